//! Expected values from Go's `regexp` (`FindString`, `FindAllString`, `regexp/syntax`'s
//! `Error` texts, read from its source) and k8s `regex.go`'s `Illegal regex: ` wrapping.

use super::*;
use crate::eval::test_ctx;

fn s(x: &str) -> Value {
    Value::string(x)
}

fn strs(v: &[&str]) -> Value {
    Value::list(v.iter().map(|x| s(x)).collect())
}

fn find_str(text: &str, pattern: &str) -> std::result::Result<Value, String> {
    test_ctx(|ctx| find(ctx, &[s(text), s(pattern)]).map_err(|e| e.message))
}

fn find_all_str(text: &str, pattern: &str, n: Option<i64>) -> std::result::Result<Value, String> {
    test_ctx(|ctx| match n {
        None => find_all(ctx, &[s(text), s(pattern)]),
        Some(n) => find_all_n(ctx, &[s(text), s(pattern), Value::Int(n)]),
    })
    .map_err(|e| e.message)
}

#[test]
fn find_and_find_all() {
    let cases: Vec<(&str, &str, &str)> = vec![
        ("abc 123", "[0-9]+", "123"),
        ("abc 123", "xyz", ""),
        ("substring", "sub", "sub"),
        ("", "a*", ""),
        // Go's \d \w \s \b are ASCII.
        ("٣3", "\\d", "3"),
        ("é_x", "\\w+", "_x"),
        ("a\u{a0}b c", "\\s", " "),
        ("éa", "\\ba", "a"),
        ("é a", "\\ba", "a"),
        ("xé", "[\\w]+", "x"),
        ("ab1", "\\D+", "ab"),
        ("\u{b}x", "\\S", "\u{b}"),
        // RE2 syntax the regex crate reads otherwise.
        ("a{", "a{", "a{"),
        ("a{,3}", "a{,3}", "a{,3}"),
        ("x&y", "[a&&b]+", "&"),
        ("a[b", "[[]", "["),
        ("a~b", "[~]", "~"),
        ("a-b", "[-a]+", "a-"),
        ("a-b", "[a-]+", "a-"),
        ("<a>", "\\<a\\>", "<a>"),
        ("a*b", "\\Q*b\\E", "*b"),
        ("a\nb", "\\012", "\n"),
        ("k", "(?i)K", "k"),
        ("AB", "\\x41\\x{42}", "AB"),
        ("αβγ abc", "\\p{Greek}+", "αβγ"),
        ("αβγ abc", "\\p{greek}+", "αβγ"),
        ("αβγ abc", "\\pL+", "αβγ"),
        ("αβγ abc", "\\p{^Greek}+", " abc"),
        ("abc1", "[[:alpha:]]+", "abc"),
        ("abc", "(?P<first>a)(?<second>b)", "ab"),
        ("abc", "(?)abc", "abc"),
        ("aaa", "a{2}", "aa"),
        ("aaa", "a{2,}?", "aa"),
        ("aaa", "(?U)a+", "a"),
        ("ab", "a|", "a"),
        ("x", "\\p{Cs}|x", "x"),
        ("]a", "[]a]+", "]a"),
        // From the upstream plugin.
        ("ab", "(?P<n>a)(?P<n>b)", "ab"),
        ("x{2}", "x{2", "x{2"),
        ("a{,2}", "a{,2}", "a{,2}"),
        ("\u{212a}", "(?i)\\w", "\u{212a}"),
        ("ſ", "(?i)s", "ſ"),
        ("é", "(?i)É", "é"),
    ];
    for (text, pattern, want) in cases {
        assert_eq!(find_str(text, pattern), Ok(s(want)), "{text:?}.find({pattern:?})");
    }
    assert_eq!(find_all_str("123 abc 456", "[0-9]+", None), Ok(strs(&["123", "456"])));
    assert_eq!(find_all_str("123 abc 456", "[0-9]+", Some(1)), Ok(strs(&["123"])));
    assert_eq!(find_all_str("123 abc 456", "[0-9]+", Some(0)), Ok(strs(&[])));
    assert_eq!(find_all_str("123 abc 456", "[0-9]+", Some(-3)), Ok(strs(&["123", "456"])));
    assert_eq!(find_all_str("123 abc 456", "[0-9]+", Some(10)), Ok(strs(&["123", "456"])));
    assert_eq!(find_all_str("abc", "x", None), Ok(strs(&[])));
    // Empty matches: none right after a match.
    assert_eq!(find_all_str("baaab", "a*", None), Ok(strs(&["", "aaa", ""])));
    assert_eq!(find_all_str("héllo", "", None), Ok(strs(&["", "", "", "", "", ""])));
    // From the upstream plugin.
    assert_eq!(find_all_str("x y", "\\b", None), Ok(strs(&["", "", "", ""])));
    assert_eq!(find_all_str("ab", "a|", None), Ok(strs(&["a", ""])));
    assert_eq!(find_all_str("k\u{212a}", "(?i)k", None), Ok(strs(&["k", "\u{212a}"])));
    assert_eq!(find_all_str("é1", "\\W", None), Ok(strs(&["é"])));
    assert_eq!(find_all_str("a\u{b}b", "\\s", None), Ok(strs(&[])));
    assert_eq!(find_all_str("ab12", "[[:^alpha:]]", None), Ok(strs(&["1", "2"])));
    assert_eq!(find_all_str("aaa", "a*", Some(-1)), Ok(strs(&["aaa"])));
}

#[test]
fn syntax_errors() {
    let cases: Vec<(&str, &str)> = vec![
        ("(", "missing closing ): `(`"),
        ("(a(b)", "missing closing ): `(a(b)`"),
        (")", "unexpected ): `)`"),
        ("a)b", "unexpected ): `a)b`"),
        ("[a", "missing closing ]: `[a`"),
        ("x[a-", "missing closing ]: `[a-`"),
        ("*", "missing argument to repetition operator: `*`"),
        ("a|*", "missing argument to repetition operator: `*`"),
        ("(+?)", "missing argument to repetition operator: `+?`"),
        ("(?i)*", "missing argument to repetition operator: `*`"),
        ("{2}", "missing argument to repetition operator: `{2}`"),
        ("a**", "invalid nested repetition operator: `**`"),
        ("a+?*", "invalid nested repetition operator: `+?*`"),
        ("x{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
        ("a{1001}", "invalid repeat count: `{1001}`"),
        ("a{2,1}", "invalid repeat count: `{2,1}`"),
        ("a{100000000}", "invalid repeat count: `{100000000}`"),
        ("(a{100}){100}", "invalid repeat count: `{100}`"),
        ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
        ("(?!a)", "invalid or unsupported Perl syntax: `(?!`"),
        ("(?x)a", "invalid or unsupported Perl syntax: `(?x`"),
        ("(?", "invalid or unsupported Perl syntax: `(?`"),
        ("(?-)", "invalid or unsupported Perl syntax: `(?-)`"),
        ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
        ("(?P<>a)", "invalid named capture: `(?P<>`"),
        ("(?P<a-b>x)", "invalid named capture: `(?P<a-b>`"),
        ("\\1", "invalid escape sequence: `\\1`"),
        ("\\8", "invalid escape sequence: `\\8`"),
        ("\\C", "invalid escape sequence: `\\C`"),
        ("\\e", "invalid escape sequence: `\\e`"),
        ("\\xZZ", "invalid escape sequence: `\\xZZ`"),
        ("\\x{}", "invalid escape sequence: `\\x{}`"),
        ("a\\", "trailing backslash at end of expression: ``"),
        ("[z-a]", "invalid character class range: `z-a`"),
        ("[a--]", "invalid character class range: `a--`"),
        ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
        ("\\p{Foo}", "invalid character class range: `\\p{Foo}`"),
        ("\\p{Greek", "invalid character class range: `\\p{Greek`"),
        ("\\p{Grek}", "invalid character class range: `\\p{Grek}`"),
        // From the upstream plugin.
        ("\\p{Sc=Grek}", "invalid character class range: `\\p{Sc=Grek}`"),
        ("a{1000}{2}", "invalid nested repetition operator: `{1000}{2}`"),
        ("(?i)(?x)a", "invalid or unsupported Perl syntax: `(?x`"),
        ("x{2}{1001}", "invalid repeat count: `{1001}`"),
        ("\\pZ\\p{Zs}\\p{Letter}\\p{latin}\\p{L&}", "invalid character class range: `\\p{L&}`"),
        ("[\\p{Foo}]", "invalid character class range: `\\p{Foo}`"),
        ("\\x{110000}", "invalid escape sequence: `\\x{110000`"),
        ("(?i", "invalid or unsupported Perl syntax: `(?i`"),
    ];
    for (pattern, want) in cases {
        assert_eq!(
            find_str("abc", pattern),
            Err(format!("Illegal regex: error parsing regexp: {want}")),
            "{pattern:?}"
        );
    }
    assert_eq!(
        syntax_error("a**").as_deref(),
        Some("error parsing regexp: invalid nested repetition operator: `**`")
    );
    assert_eq!(syntax_error("\\pL{1000}"), None);
    assert_eq!(
        find_all_str("abc", "(", Some(1)),
        Err("Illegal regex: error parsing regexp: missing closing ): `(`".into())
    );
}

#[test]
fn costs_and_guards() {
    let args = [s("hello world"), s("l+o")];
    // ⌈12 × 0.1⌉ × ⌈3 × 0.25⌉ = 2 × 1.
    assert_eq!(regex_cost(&args, &Value::Null), 2);
    assert_eq!(regex_cost(&[s(""), s("")], &Value::Null), 0);
    assert_eq!(regex_cost(&[s(&"x".repeat(100)), s("[a-z]+[0-9]*")], &Value::Null), 11 * 3);
    test_ctx(|ctx| {
        let e = find(ctx, &[Value::Int(1), s("a")]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::NoMatch);
        let e = find_all_n(ctx, &[s("a"), s("a"), s("1")]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::NoMatch);
    });
}

/// 252 patterns drawn from 60,000 random ones (regex metacharacters, Go-only and crate-only
/// syntax), with Go 1.27's `regexp.Compile` verdict and `FindAllString` on six subjects, as a
/// Go program printed them; the whole 60,000 agreed when this table was made.
#[test]
fn go_regexp_table() {
    let subjects = ["", "abé1 xP-{2}", "aaa", "Ab\nc", "é\u{212a} k_K1:[]", "x{2}-y<>=!&~"];
    let cases: serde_json::Value = serde_json::from_str(include_str!("go_cases.json")).unwrap();
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), 252);
    for case in cases {
        let pattern = case["pattern"].as_str().unwrap();
        let go = case["go"].as_str().unwrap();
        match compile(pattern) {
            Err(e) => assert_eq!(e, go, "{pattern:?}"),
            Ok(re) => {
                assert_eq!(go, "OK", "{pattern:?}");
                let matches = case["matches"].as_array().unwrap();
                for (s, want) in subjects.iter().zip(matches) {
                    let got: Vec<&str> = re.find_iter(s).map(|m| m.as_str()).collect();
                    let want: Vec<&str> =
                        want.as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
                    assert_eq!(got, want, "{pattern:?} on {s:?}");
                }
            }
        }
    }
}

#[test]
fn random_patterns_translate() {
    // Whatever Go's parser accepts, the `regex` crate compiles once translated.
    let alphabet = [
        "a",
        "é",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "*",
        "+",
        "?",
        "|",
        "^",
        "$",
        ".",
        "\\",
        "-",
        ",",
        "1",
        "0",
        ":",
        "<",
        ">",
        "P",
        "i",
        "d",
        "w",
        "s",
        "b",
        "p",
        "Q",
        "E",
        "&",
        "~",
        "{2}",
        "[:alpha:]",
        "\\p{Greek}",
        "(?i)",
        "(?U)",
        "(?:",
        "\\d",
    ];
    let mut r: u64 = 88172645463325252;
    let mut next = || {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        r
    };
    for _ in 0..3_000 {
        let len = (next() % 8) as usize;
        let p: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
        if let Ok(t) = syntax::translate(&p) {
            assert!(regex::RegexBuilder::new(&t).nest_limit(2050).build().is_ok(), "{p:?} -> {t:?}");
        }
    }
}
