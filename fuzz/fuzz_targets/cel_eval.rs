//! A CEL expression and a JSON object, split at the first NUL byte: compiling with the API
//! server's libraries and evaluating against the object as `object` never panics and always
//! ends (the cost limit bounds the work; `crates/cel-engine`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (expression, object) = admission_gateway::fuzzing::split(data);
    admission_gateway::fuzzing::cel_eval(expression, object);
});
