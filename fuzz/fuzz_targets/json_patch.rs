//! A JSON document and a JSON Patch, split at the first NUL byte: applying never panics, and
//! the invariants of `src/fuzzing.rs` (`json_patch`) hold (`src/patch.rs`,
//! `src/pipeline/object.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (object, patch) = admission_gateway::fuzzing::split(data);
    admission_gateway::fuzzing::json_patch(object, patch);
});
