//! A mutation's expression and a JSON object, split at the first NUL byte: a
//! MutatingAdmissionPolicy with that one mutation run on the object never panics, always ends,
//! and the patch the gateway would answer with replays to the object it made
//! (`src/pipeline/policy/mutating.rs`, `crates/structured-merge`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (expression, object) = admission_gateway::fuzzing::split(data);
    admission_gateway::fuzzing::mutating_policy(expression, object);
});
