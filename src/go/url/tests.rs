//! `TestParseErrors` of Go's `src/net/url/url_test.go`, then error texts checked against Go
//! 1.26.

use super::parse;

#[test]
fn accepts_and_refuses_as_go_test_parse_errors() {
    let cases = [
        // (input, Go refuses it)
        ("http://[::1]", false),
        ("http://[::1]:80", false),
        ("http://[::1]:namedport", true),
        ("http://x:namedport", true),
        ("http://[::1]/", false),
        ("http://[::1]a", true),
        ("http://[::1]%23", true),
        ("http://[::1%25en0]", false),
        ("http://[::1]:", false),
        ("http://x:", false),
        ("http://[::1]:%38%30", true),
        ("http://[::1%25%41]", false),
        ("http://[%10::1]", true),
        ("http://[::1]/%48", false),
        ("http://%41:8080/", true),
        ("mysql://x@y(z:123)/foo", true),
        ("mysql://x@y(1.2.3.4:123)/foo", true),
        (" http://foo.com", true),
        ("ht tp://foo.com", true),
        ("ahttp://foo.com", false),
        ("1http://foo.com", true),
        ("http://[]%20%48%54%54%50%2f%31%2e%31%0a%4d%79%48%65%61%64%65%72%3a%20%31%32%33%0a%0a/", true),
        ("http://a b.com/", true),
        ("cache_object://foo", true),
        ("cache_object:foo", true),
        ("cache_object:foo/bar", true),
        ("cache_object/:foo/bar", false),
        ("http://[192.168.0.1]/", true),
        ("http://[192.168.0.1]:8080/", true),
        ("http://[::ffff:192.168.0.1]/", false),
        ("http://[::ffff:192.168.0.1000]/", true),
        ("http://[::ffff:192.168.0.1]:8080/", false),
        ("http://[::ffff:c0a8:1]/", false),
        ("http://[not-an-ip]/", true),
        ("http://[fe80::1%foo]/", true),
        ("http://[fe80::1", true),
        ("http://fe80::1]/", true),
        ("http://[test.com]/", true),
        ("http://example.com[::1]", true),
        ("http://example.com[::1", true),
        ("http://[::1", true),
        ("http://.[::1]", true),
        ("http:// [::1]", true),
        ("hxxp://mathepqo[.]serveftp(.)com:9059", true),
        // `TestRejectControlCharacters`
        ("http://foo.com/?foo\nbar", true),
        ("http\r://foo.com/", true),
        ("http://foo\u{7f}.com/", true),
        ("http://foo.com/ctl\u{80}", false),
        // Issue 11202
        ("*", false),
    ];
    for (raw, refused) in cases {
        assert_eq!(parse(raw).is_err(), refused, "{raw:?}: {:?}", parse(raw).err());
    }
}

#[test]
fn errors_read_as_go_url_error() {
    let cases = [
        (
            "https://hooks.example.com:80:80/",
            r#"parse "https://hooks.example.com:80:80/": invalid port ":80:80" after host"#,
        ),
        (
            "https://hooks.example.com:x/",
            r#"parse "https://hooks.example.com:x/": invalid port ":x" after host"#,
        ),
        ("://hooks.example.com", r#"parse "://hooks.example.com": missing protocol scheme"#),
        ("https://[fd00::1/", r#"parse "https://[fd00::1/": missing ']' in host"#),
        ("https://[hooks.example.com]/", r#"parse "https://[hooks.example.com]/": invalid IP-literal"#),
        ("https://%41.example.com/", r#"parse "https://%41.example.com/": invalid URL escape "%41""#),
        (
            "https://hooks.example.com/%zz",
            r#"parse "https://hooks.example.com/%zz": invalid URL escape "%zz""#,
        ),
        (
            "https://a b@hooks.example.com/",
            r#"parse "https://a b@hooks.example.com/": net/url: invalid userinfo"#,
        ),
        (
            "https://hooks.example.com/\n",
            r#"parse "https://hooks.example.com/\n": net/url: invalid control character in URL"#,
        ),
        (
            "https://hooks example.com/",
            r#"parse "https://hooks example.com/": invalid character " " in host name"#,
        ),
        ("a:b/c", ""),      // a scheme `a`, opaque: parses
        ("hooks:8443", ""), // likewise
        ("/a:b", ""),
        ("a/b:c", ""),
        ("b:c/d", ""),
        ("1a:b/c", r#"parse "1a:b/c": first path segment in URL cannot contain colon"#),
        (
            "https://hooks.example.com/#%zz",
            r#"parse "https://hooks.example.com/#%zz": invalid URL escape "%zz""#,
        ),
        // The escape's three bytes cut `é` in two: Go quotes the bytes.
        ("https://h/%a\u{e9}", r#"parse "https://h/%aé": invalid URL escape "%a\xc3""#),
        ("https://h/%\u{e9}", r#"parse "https://h/%é": invalid URL escape "%é""#),
    ];
    for (raw, expected) in cases {
        let got = parse(raw).err().unwrap_or_default();
        assert_eq!(got, expected, "{raw:?}");
    }
}

#[test]
fn the_fields_webhook_validation_reads() {
    let url = parse("HTTPS://us%40er@[fe80::1%25eth0]:8443/p?q#f%20g").expect("parses");
    assert_eq!(
        (url.scheme.as_str(), url.user.as_deref(), url.host.as_str()),
        ("https", Some("us%40er"), "[fe80::1%eth0]:8443")
    );
    assert_eq!((url.raw_query.as_str(), url.fragment.as_str()), ("q", "f g"));
    let url = parse("https://admin:s3cret@hooks.example.com/?").expect("parses");
    assert_eq!((url.user.as_deref(), url.raw_query.as_str()), (Some("admin:xxxxx"), ""));
}
