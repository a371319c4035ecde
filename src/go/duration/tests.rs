//! `parseDurationTests` and `parseDurationErrorTests` of Go's `src/time/time_test.go`.

use super::{format, fraction_nanos, parse, Float};

const NS: i64 = 1;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;
const M: i64 = 60 * S;
const H: i64 = 60 * M;

#[test]
fn parses_go_parse_duration_tests() {
    let cases = [
        // simple
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        // sign
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        // decimal
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        // different units
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12\u{b5}s", 12 * US),
        ("12\u{3bc}s", 12 * US),
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        // composite durations
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        // large value
        ("52763797000ns", 52_763_797_000 * NS),
        // more than 9 digits after decimal point, see https://golang.org/issue/6617
        ("0.3333333333333333333h", 20 * M),
        // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
        ("9007199254740993ns", (1 << 53) + 1),
        // largest duration that can be represented by int64 in nanoseconds
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-9223372036s854ms775us808ns", i64::MIN),
        // largest negative round trip value, see https://golang.org/issue/48629
        ("-2562047h47m16.854775808s", i64::MIN),
        // huge string; issue 15011.
        ("0.100000000000000000000h", 6 * M),
        // This value tests the first overflow check in leadingFraction.
        ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827 * NS),
        // Not from Go's table: Go's float rounding, and its `uint64` sum wrapping at 2^64.
        ("0.0000000000000000001h", 0),
        ("0.9999999999999999999h", H),
        ("1.9999999999999999999ns", 2 * NS),
        ("9223372036854775808ns9223372036854775808ns", 0),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text), Ok(want), "{text:?}");
    }
}

#[test]
fn refuses_go_parse_duration_error_tests() {
    let cases = [
        // invalid
        ("", r#"time: invalid duration """#),
        ("3", r#"time: missing unit in duration "3""#),
        ("-", r#"time: invalid duration "-""#),
        ("s", r#"time: invalid duration "s""#),
        (".", r#"time: invalid duration ".""#),
        ("-.", r#"time: invalid duration "-.""#),
        (".s", r#"time: invalid duration ".s""#),
        ("+.s", r#"time: invalid duration "+.s""#),
        ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ("\u{fffd}", r#"time: invalid duration "\xef\xbf\xbd""#),
        (
            "\u{fffd} hello \u{fffd} world",
            r#"time: invalid duration "\xef\xbf\xbd hello \xef\xbf\xbd world""#,
        ),
        // overflow
        ("9223372036854775810ns", r#"time: invalid duration "9223372036854775810ns""#),
        ("9223372036854775808ns", r#"time: invalid duration "9223372036854775808ns""#),
        ("-9223372036854775809ns", r#"time: invalid duration "-9223372036854775809ns""#),
        ("9223372036854776us", r#"time: invalid duration "9223372036854776us""#),
        ("3000000h", r#"time: invalid duration "3000000h""#),
        ("9223372036854775.808us", r#"time: invalid duration "9223372036854775.808us""#),
        ("9223372036854ms775us808ns", r#"time: invalid duration "9223372036854ms775us808ns""#),
        // Not from Go's table.
        ("1\u{b5}", r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#),
        ("1s\"\\", r#"time: unknown unit "s\"\\" in duration "1s\"\\""#),
        ("1 s", r#"time: unknown unit " s" in duration "1 s""#),
        ("1s\n", r#"time: unknown unit "s\x0a" in duration "1s\x0a""#),
        ("1s-1s", r#"time: unknown unit "s-" in duration "1s-1s""#),
        ("1.s.5", r#"time: missing unit in duration "1.s.5""#),
        ("00", r#"time: missing unit in duration "00""#),
        ("99999999999999999999ns", r#"time: invalid duration "99999999999999999999ns""#),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text), Err(want.to_owned()), "{text:?}");
    }
}

/// The integer emulation of Go's `uint64(float64(f) * (float64(unit) / scale))`, against the
/// floating-point expression itself.
#[test]
fn fraction_nanos_rounds_as_float64_does() {
    let units = [1u64, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000, 3_600_000_000_000];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..200_000 {
        let digits = u32::try_from(next() % 19).unwrap() + 1;
        let scale = 10u64.pow(digits);
        let fraction = next() % scale;
        let unit = units[usize::try_from(next() % 6).unwrap()];
        let float = (fraction as f64 * (unit as f64 / scale as f64)) as u64;
        assert_eq!(
            fraction_nanos(fraction, unit, Some(Float::round(u128::from(scale), 0, false))),
            float,
            "{fraction}/{scale} of {unit}"
        );
    }
    // Values close to rounding boundaries.
    for fraction in [3_333_333_333_333_333_333u64, 9_999_999_999_999_999_999, 5_000_000_000_000_000_001] {
        for unit in units {
            let float = (fraction as f64 * (unit as f64 / 1e19)) as u64;
            assert_eq!(fraction_nanos(fraction, unit, Some(Float::round(10u128.pow(19), 0, false))), float);
        }
    }
}

/// Found by fuzzing (fuzz/regressions/go_compat): a fraction with leading zeros, whose Go
/// `float64` scale passes 10^19, overflowed `u64` (a panic in debug builds, wrong values in
/// release ones). Expected values from Go 1.26's `time.ParseDuration`, its float scale
/// rounded past 10^22 and +Inf past 10^308.
#[test]
fn fraction_scale_beyond_u64() {
    let zeros = "0".repeat(400);
    let cases = [
        ("3.0333333333333333333626s".to_owned(), 3_033_333_333),
        ("1.0333333333333333333s".to_owned(), 1_033_333_333),
        ("0.00000000000000000001s".to_owned(), 0),
        ("1.00000000000000000000000000000000000000000001h".to_owned(), H),
        ("0.0000000000001h".to_owned(), 0),
        ("0.000000000001h".to_owned(), 3),
        (format!("0.{zeros}9h"), 0),
        ("7.00000000000000000000000000000123456789012345678901234567890h".to_owned(), 7 * H),
        ("0.0123456789012345678901234h".to_owned(), 44_444_444_044),
        ("0.000000000009999999999999999999h".to_owned(), 36),
    ];
    for (text, nanos) in cases {
        assert_eq!(parse(&text), Ok(nanos), "{text}");
        assert_eq!(parse(&format!("-{text}")), Ok(-nanos), "-{text}");
    }
}

#[test]
fn formatted_durations_parse_back_to_themselves() {
    use std::time::Duration;
    let cases = [
        (Duration::from_secs(10), "10s"),
        (Duration::from_secs(90), "90s"),
        (Duration::from_secs(120), "2m"),
        (Duration::from_secs(7200), "2h"),
        (Duration::from_millis(1500), "1500ms"),
        (Duration::from_micros(3), "3us"),
        (Duration::from_nanos(7), "7ns"),
        (Duration::ZERO, "0ns"),
    ];
    for (duration, text) in cases {
        assert_eq!(format(duration), text);
        assert_eq!(parse(text), Ok(i64::try_from(duration.as_nanos()).unwrap()), "{text}");
    }
}
