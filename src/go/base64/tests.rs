//! Tables from Go's `src/encoding/base64/base64_test.go`, run against `StdEncoding`.

use base64::Engine as _;
use serde::Deserialize;

use super::{decode, CorruptInputError};

#[test]
fn decodes_go_pairs() {
    let pairs: [(&[u8], &str); 19] = [
        // RFC 3548 examples
        (b"\x14\xfb\x9c\x03\xd9\x7e", "FPucA9l+"),
        (b"\x14\xfb\x9c\x03\xd9", "FPucA9k="),
        (b"\x14\xfb\x9c\x03", "FPucAw=="),
        // RFC 4648 examples
        (b"", ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
        (b"fooba", "Zm9vYmE="),
        (b"foobar", "Zm9vYmFy"),
        // Wikipedia examples
        (b"sure.", "c3VyZS4="),
        (b"sure", "c3VyZQ=="),
        (b"sur", "c3Vy"),
        (b"su", "c3U="),
        (b"leasure.", "bGVhc3VyZS4="),
        (b"easure.", "ZWFzdXJlLg=="),
        (b"asure.", "YXN1cmUu"),
        (b"sure.", "c3VyZS4="),
        // `bigtest`
        (b"Twas brillig, and the slithy toves", "VHdhcyBicmlsbGlnLCBhbmQgdGhlIHNsaXRoeSB0b3Zlcw=="),
    ];
    for (decoded, encoded) in pairs {
        assert_eq!(decode(encoded).as_deref(), Ok(decoded), "{encoded:?}");
    }
}

#[test]
fn reports_corruption_where_go_does() {
    let cases = [
        // `TestDecodeCorrupt`: (input, offset of the corruption)
        ("", None),
        ("\n", None),
        ("AAA=\n", None),
        ("AAAA\n", None),
        ("!!!!", Some(0)),
        ("====", Some(0)),
        ("x===", Some(1)),
        ("=AAA", Some(0)),
        ("A=AA", Some(1)),
        ("AA=A", Some(2)),
        ("AA==A", Some(4)),
        ("AAA=AAAA", Some(4)),
        ("AAAAA", Some(4)),
        ("AAAAAA", Some(4)),
        ("A=", Some(1)),
        ("A==", Some(1)),
        ("AA=", Some(3)),
        ("AA==", None),
        ("AAA=", None),
        ("AAAA", None),
        ("AAAAAA=", Some(7)),
        ("YWJjZA=====", Some(8)),
        ("A!\n", Some(1)),
        ("A=\n", Some(1)),
        // Offsets count the skipped line breaks.
        ("AA\n\n=", Some(5)),
        ("AA=\r\nB", Some(4)),
        ("\r\nA", Some(2)),
        ("AAAA\nA A", Some(6)),
        ("Zg== ", Some(4)),
        ("Zg==\t", Some(4)),
    ];
    for (input, offset) in cases {
        assert_eq!(decode(input).err(), offset.map(CorruptInputError), "{input:?}");
    }
    assert_eq!(decode("AAAAA").unwrap_err().to_string(), "illegal base64 data at input byte 4");
}

#[test]
fn skips_line_breaks_anywhere() {
    // `TestNewLineCharacters`: each decodes to "sure".
    let examples = [
        "c3VyZQ==",
        "c3VyZQ==\r",
        "c3VyZQ==\n",
        "c3VyZQ==\r\n",
        "c3VyZ\r\nQ==",
        "c3V\ryZ\nQ==",
        "c3V\nyZ\rQ==",
        "c3VyZ\nQ==",
        "c3VyZQ\n==",
        "c3VyZQ=\n=",
        "c3VyZQ=\r\n\r\n=",
    ];
    for example in examples {
        assert_eq!(decode(example).as_deref(), Ok(&b"sure"[..]), "{example:?}");
    }
    // Wrapped as PEM and MIME wrap base64 (76 columns), with either line ending.
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
    for line_break in ["\n", "\r\n"] {
        let lines: Vec<&str> = encoded
            .as_bytes()
            .chunks(76)
            .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
            .collect();
        let wrapped = lines.join(line_break) + line_break;
        assert_eq!(decode(&wrapped), Ok(data.clone()), "{line_break:?}");
    }
}

#[test]
fn accepts_non_zero_trailing_bits() {
    // Issue 15656: `StdEncoding` (not `Strict()`) ignores the bits after the last byte.
    assert_eq!(decode("WvLTlMrX9NpYDQlEIFlnDB=="), decode("WvLTlMrX9NpYDQlEIFlnDA=="));
    assert_eq!(decode("Zh=="), Ok(b"f".to_vec()));
    assert_eq!(decode("Zm9="), Ok(b"fo".to_vec()));
}

#[test]
fn deserializes_an_optional_byte_field() {
    #[derive(Deserialize)]
    struct Response {
        #[serde(default, deserialize_with = "super::deserialize_option")]
        patch: Option<Vec<u8>>,
    }
    let decoded =
        |json: &str| serde_json::from_str::<Response>(json).map(|r| r.patch).map_err(|e| e.to_string());
    assert_eq!(decoded(r#"{}"#), Ok(None));
    assert_eq!(decoded(r#"{"patch":null}"#), Ok(None));
    assert_eq!(decoded(r#"{"patch":""}"#), Ok(Some(Vec::new())));
    assert_eq!(decoded(r#"{"patch":"W10=\n"}"#), Ok(Some(b"[]".to_vec())));
    let error = decoded(r#"{"patch":"W10"}"#).unwrap_err();
    assert!(error.starts_with("illegal base64 data at input byte 0"), "{error}");
}
