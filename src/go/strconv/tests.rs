//! Tables from Go's `src/strconv/quote_test.go` and `src/strconv/atoi_test.go`, plus cases
//! checked against Go 1.26.

use super::print::is_print;
use super::{atoi, quote, quote_bytes};

#[test]
fn quote_matches_go_quotetests() {
    let cases: [(&[u8], &str); 7] = [
        // `quotetests`: (in, Quote(in))
        (b"\x07\x08\x0c\r\n\t\x0b", r#""\a\b\f\r\n\t\v""#),
        (b"\\", r#""\\""#),
        (b"abc\xffdef", r#""abc\xffdef""#),
        ("\u{263a}".as_bytes(), "\"\u{263a}\""),
        ("\u{10ffff}".as_bytes(), r#""\U0010ffff""#),
        (b"\x04", r#""\x04""#),
        ("!\u{a0}!\u{2000}!\u{3000}!".as_bytes(), r#""!\u00a0!\u2000!\u3000!""#),
    ];
    for (input, want) in cases {
        assert_eq!(quote_bytes(input), want, "{input:?}");
    }
}

#[test]
fn quote_of_one_rune_matches_go_quoterunetests() {
    // `quoterunetests`, double-quoted: `QuoteRune` differs from `Quote` only in its quotes.
    let cases = [
        ('a', r#""a""#),
        ('\u{7}', r#""\a""#),
        ('\\', r#""\\""#),
        ('\u{ff}', "\"\u{ff}\""),
        ('\u{263a}', "\"\u{263a}\""),
        ('\u{fffd}', "\"\u{fffd}\""),
        ('\u{10ffff}', r#""\U0010ffff""#),
        ('\u{4}', r#""\x04""#),
        ('\u{a0}', r#""\u00a0""#),
        ('\u{2000}', r#""\u2000""#),
        ('\u{3000}', r#""\u3000""#),
    ];
    for (c, want) in cases {
        assert_eq!(quote(&c.to_string()), want, "{c:?}");
    }
}

#[test]
fn quote_escapes_like_go() {
    let cases: [(&[u8], &str); 11] = [
        (b"", r#""""#),
        (b"it's \"q\"", r#""it's \"q\"""#),
        (b"\x00\x1f\x7f", r#""\x00\x1f\x7f""#),
        // C1 controls, format characters, separators, private use: `\u`.
        (
            "\u{80}\u{85}\u{ad}\u{200b}\u{2028}\u{feff}\u{e000}".as_bytes(),
            r#""\u0080\u0085\u00ad\u200b\u2028\ufeff\ue000""#,
        ),
        // Supplementary planes: printable as is, or `\U`.
        ("\u{1f600}\u{e0001}\u{f0000}".as_bytes(), "\"\u{1f600}\\U000e0001\\U000f0000\""),
        // Unassigned in Unicode 15.0.0 (Go's tables): `\u`.
        ("\u{378}\u{1fae9}".as_bytes(), r#""\u0378\U0001fae9""#),
        // Assigned in 15.0.0: printable.
        ("\u{1f6dc}\u{11f00}".as_bytes(), "\"\u{1f6dc}\u{11f00}\""),
        // Invalid UTF-8: one `\x` per byte, valid text around it kept.
        (b"a\xe2\x82b", r#""a\xe2\x82b""#),
        (b"\xed\xa0\x80", r#""\xed\xa0\x80""#),
        (b"\xc0\xaf\xf5", r#""\xc0\xaf\xf5""#),
        (b"\xef\xbf\xbd", "\"\u{fffd}\""),
    ];
    for (input, want) in cases {
        assert_eq!(quote_bytes(input), want, "{input:?}");
    }
}

#[test]
fn is_print_is_gos_for_latin1_and_spot_checks_beyond() {
    // Go's Latin-1 rule: 0x20..=0x7e and 0xa1..=0xff except the soft hyphen.
    for c in (0u32..=0xff).filter_map(char::from_u32) {
        let go = matches!(u32::from(c), 0x20..=0x7e | 0xa1..=0xff) && c != '\u{ad}';
        assert_eq!(is_print(c), go, "{c:?}");
    }
    let printable = ['\u{263a}', '\u{4e00}', '\u{fffd}', '\u{1d400}', '\u{e0100}', '\u{323af}'];
    let not_printable =
        ['\u{2029}', '\u{3000}', '\u{d7ff}', '\u{fdd0}', '\u{ffff}', '\u{10ffff}', '\u{e01f0}', '\u{323b0}'];
    for c in printable {
        assert!(is_print(c), "{c:?}");
    }
    for c in not_printable {
        assert!(!is_print(c), "{c:?}");
    }
}

#[test]
fn atoi_matches_go_parse_int64_tests() {
    const SYNTAX: Result<i64, &str> = Err("invalid syntax");
    const RANGE: Result<i64, &str> = Err("value out of range");
    let cases = [
        ("", SYNTAX),
        ("0", Ok(0)),
        ("-0", Ok(0)),
        ("+0", Ok(0)),
        ("1", Ok(1)),
        ("-1", Ok(-1)),
        ("+1", Ok(1)),
        ("12345", Ok(12345)),
        ("-12345", Ok(-12345)),
        ("012345", Ok(12345)),
        ("-012345", Ok(-12345)),
        ("98765432100", Ok(98_765_432_100)),
        ("-98765432100", Ok(-98_765_432_100)),
        ("9223372036854775807", Ok(i64::MAX)),
        ("-9223372036854775807", Ok(-i64::MAX)),
        ("9223372036854775808", RANGE),
        ("-9223372036854775808", Ok(i64::MIN)),
        ("9223372036854775809", RANGE),
        ("-9223372036854775809", RANGE),
        ("-1_2_3_4_5", SYNTAX),
        ("-_12345", SYNTAX),
        ("_12345", SYNTAX),
        ("1__2345", SYNTAX),
        ("12345_", SYNTAX),
        ("123%45", SYNTAX),
        // Not from Go's table.
        ("+", SYNTAX),
        ("-", SYNTAX),
        (" 1", SYNTAX),
        ("0x10", SYNTAX),
        ("99999999999999999999x", RANGE),
    ];
    for (text, want) in cases {
        let got = atoi(text).map_err(|e| {
            let message = e.to_string();
            let prefix = format!("strconv.Atoi: parsing {}: ", quote(text));
            assert!(message.starts_with(&prefix), "{message}");
            if message.ends_with("invalid syntax") {
                "invalid syntax"
            } else {
                "value out of range"
            }
        });
        assert_eq!(got, want, "{text:?}");
    }
    assert_eq!(
        atoi("a\u{e9}\n").unwrap_err().to_string(),
        "strconv.Atoi: parsing \"a\u{e9}\\n\": invalid syntax"
    );
}
