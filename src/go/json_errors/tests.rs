//! Cases from Go's `src/encoding/json/scanner_test.go` (`TestValid`) and the syntax errors of
//! `src/encoding/json/decode_test.go` (`unmarshalTests`), plus ones checked against Go 1.26.

use serde_json::json;

use super::{check_valid, kind, kind_of, quote_char};

#[test]
fn check_valid_accepts_and_refuses_like_go() {
    let valid =
        [r#"{}"#, r#"{"foo":"bar"}"#, r#"{"foo":"bar","bar":{"baz":["qux"]}}"#, " 42 ", "-0.5e+7", "null"];
    for text in valid {
        assert_eq!(check_valid(text.as_bytes()), Ok(()), "{text}");
    }
    let cases = [
        // (input, Go's SyntaxError text)
        ("foo", "invalid character 'o' in literal false (expecting 'a')"),
        ("}{", "invalid character '}' looking for beginning of value"),
        ("{]", "invalid character ']' looking for beginning of object key string"),
        (r#"{"X": "foo", "Y"}"#, "invalid character '}' after object key"),
        ("[1, 2, 3+]", "invalid character '+' after array element"),
        (r#"{"X":12x}"#, "invalid character 'x' after object key:value pair"),
        ("\x01 42", "invalid character '\\x01' looking for beginning of value"),
        (" 42 \x01", "invalid character '\\x01' after top-level value"),
        ("[2, 3", "unexpected end of JSON input"),
        (r#"{"F3": -}"#, "invalid character '}' in numeric literal"),
        ("", "unexpected end of JSON input"),
        ("1.", "invalid character ' ' after decimal point in numeric literal"),
        ("1e", "invalid character ' ' in exponent of numeric literal"),
        ("\"\\u00g0\"", "invalid character 'g' in \\u hexadecimal character escape"),
        ("\"\\a\"", "invalid character 'a' in string escape code"),
        ("\"\u{7f}\n\"", "invalid character '\\n' in string literal"),
        ("\u{e9}", "invalid character '\u{c3}' looking for beginning of value"),
        ("'", r"invalid character '\'' looking for beginning of value"),
        ("[\"\"\"]", "invalid character '\"' after array element"),
    ];
    for (text, want) in cases {
        assert_eq!(check_valid(text.as_bytes()).unwrap_err(), want, "{text:?}");
    }
    let deep = "[".repeat(10_001);
    assert_eq!(check_valid(deep.as_bytes()).unwrap_err(), "invalid character '[' exceeded max depth");
    let deepest = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(check_valid(deepest.as_bytes()), Ok(()));
}

#[test]
fn quote_char_is_gos_quote_char() {
    let cases = [
        (b'a', "'a'"),
        (b'\'', r"'\''"),
        (b'"', r#"'"'"#),
        (b'\\', r"'\\'"),
        (b'\t', r"'\t'"),
        (0, r"'\x00'"),
    ];
    for (c, want) in cases {
        assert_eq!(quote_char(c), want, "{c}");
    }
    // A byte is read as a Latin-1 rune: 0x80..=0xa0 and 0xad are not printable.
    assert_eq!(quote_char(0x80), r"'\u0080'");
    assert_eq!(quote_char(0xad), r"'\u00ad'");
    assert_eq!(quote_char(0xff), "'\u{ff}'");
}

#[test]
fn kinds_are_named_as_go_names_them() {
    let values = [json!(null), json!(true), json!(1.5), json!("s"), json!([]), json!({})];
    for value in values {
        let text = value.to_string();
        assert_eq!(kind(text.bytes().next()), kind_of(&value), "{text}");
    }
    assert_eq!(kind(Some(b'-')), "number");
}
