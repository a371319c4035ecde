//! A received AdmissionReview body: decoding never panics, nor does answering it
//! (`src/review/decode.rs`, `src/review/encode.rs`, through `src/fuzzing.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    admission_gateway::fuzzing::review_decode(data);
});
