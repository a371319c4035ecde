//! Cases from Go's `src/encoding/json/encode_test.go` (`encodeStringTests`, `TestHTMLEscape`)
//! and `src/encoding/json/scanner_test.go` (`examples` of `TestCompact`).

use super::{push_compact, push_string};

#[test]
fn strings_are_written_as_go_writes_them() {
    for byte in 0u8..0x20 {
        let want = match byte {
            0x08 => r#""\b""#.to_owned(),
            0x09 => r#""\t""#.to_owned(),
            0x0a => r#""\n""#.to_owned(),
            0x0c => r#""\f""#.to_owned(),
            0x0d => r#""\r""#.to_owned(),
            _ => format!(r#""\u{byte:04x}""#),
        };
        let mut out = String::new();
        push_string(&mut out, &char::from(byte).to_string());
        assert_eq!(out, want, "{byte:#x}");
    }
    for (text, want) in
        [("é<ü", r#""é\u003cü""#), ("plain", r#""plain""#), ("a\"", r#""a\"""#), ("", r#""""#)]
    {
        let mut out = String::new();
        push_string(&mut out, text);
        assert_eq!(out, want, "{text:?}");
    }
    let mut out = String::new();
    push_string(&mut out, "<html>foo &\u{2028} \u{2029}</html> \"q\" \\ \u{7f} \u{e9}");
    assert_eq!(
        out,
        "\"\\u003chtml\\u003efoo \\u0026\\u2028 \\u2029\\u003c/html\\u003e \\\"q\\\" \\\\ \u{7f} \u{e9}\""
    );
}

#[test]
fn raw_messages_are_compacted_and_html_escaped() {
    let cases = [
        ("1", "1"),
        ("{}", "{}"),
        ("[]", "[]"),
        (r#"{"":2}"#, r#"{"":2}"#),
        ("[3]", "[3]"),
        ("[1,2,3]", "[1,2,3]"),
        (r#"{"x":1}"#, r#"{"x":1}"#),
        (" [ 1 ,\n\t2 ,\r3 ] ", "[1,2,3]"),
        (r#"{ "a b" : "c \" d < e" , "\\" : [ ] }"#, r#"{"a b":"c \" d \u003c e","\\":[]}"#),
        ("\"\u{2028}&\u{2029}>\"", r#""\u2028\u0026\u2029\u003e""#),
        // Runs copied whole around what is dropped or escaped, multi-byte characters included.
        ("\"é<ü\" ", r#""é\u003cü""#),
        ("[\"ä\" , \"\\\"&\u{2028}\"]", r#"["ä","\"\u0026\u2028"]"#),
    ];
    for (json, want) in cases {
        let mut out = String::new();
        push_compact(&mut out, json);
        assert_eq!(out, want, "{json}");
    }
}
