//! A configuration text (YAML or JSON): loading, validating and compiling never panic, and a
//! refused configuration names its errors (`src/config/load.rs`, `validate.rs`, `compile.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = admission_gateway::fuzzing::config_load(text);
    }
});
