//! The Go ports of `src/go/`: the first byte picks the function, the rest is its input.
#![no_main]

use admission_gateway::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    if which % 6 == 4 {
        fuzzing::go_strconv(rest);
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else { return };
    match which % 6 {
        0 => drop(fuzzing::go_url(text)),
        1 => drop(fuzzing::go_duration(text)),
        2 => drop(fuzzing::go_base64(text)),
        3 => drop(fuzzing::go_json(text)),
        _ => {
            // Every parser on the same text.
            let _ = (fuzzing::go_url(text), fuzzing::go_duration(text), fuzzing::go_base64(text));
            let _ = (fuzzing::go_json(text), fuzzing::go_strconv(rest));
        }
    }
});
