//! A metav1 LabelSelector and labels (JSON), split at the first NUL byte: validating,
//! compiling and matching never panic (`src/config/selector.rs`, `src/config/validate.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (selector, labels) = admission_gateway::fuzzing::split(data);
    admission_gateway::fuzzing::label_selector(selector, labels);
});
