//! Expected values from cel-go `ext/strings_test.go` and `ext/formatting_test.go` (the tables
//! of the version the API server's plugin is built with), and from Go's behaviour where the
//! tables are silent.
#![allow(clippy::approx_constant)]

use super::format::{format, go_g, go_quote};
use super::*;
use crate::eval::{evaluate_str, test_ctx};

fn eval(expr: &str) -> std::result::Result<Value, String> {
    evaluate_str(expr, &[])
}

/// `lhs == rhs`, each side evaluated on its own and compared with CEL's equality (so these
/// tables do not depend on the standard library's `_==_`).
fn check(expr: &str) -> std::result::Result<bool, String> {
    let (lhs, rhs) = expr.split_once(" == ").unwrap_or((expr, "true"));
    Ok(eval(lhs)?.equals(&eval(rhs)?))
}

fn assert_true(exprs: &[&str]) {
    for expr in exprs {
        match check(expr) {
            Ok(true) => {}
            other => panic!("{expr}: {other:?} ({:?})", eval(expr.split(" == ").next().unwrap())),
        }
    }
}

/// `no such overload: f(int, int)` is the dispatcher's text when no overload takes the
/// arguments (cel-go's `MaybeNoSuchOverload`); a bare `no such overload` wanted accepts it.
fn assert_err(cases: &[(&str, &str)]) {
    for (expr, want) in cases {
        match check(expr) {
            Err(e) if *want == "no such overload" => assert!(e.starts_with(want), "{expr}: {e}"),
            Err(e) => assert_eq!(&e, want, "{expr}"),
            Ok(v) => panic!("{expr}: {v:?}, wanted error {want}"),
        }
    }
}

#[test]
fn char_at_index_of_last_index_of() {
    assert_true(&[
        "'tacocat'.charAt(3) == 'o'",
        "'tacocat'.charAt(7) == ''",
        "'©αT'.charAt(0) == '©'",
        "'©αT'.charAt(1) == 'α'",
        "'©αT'.charAt(2) == 'T'",
        "'héllo'.charAt(1) == 'é'",
        "'tacocat'.indexOf('') == 0",
        "'tacocat'.indexOf('ac') == 1",
        "'tacocat'.indexOf('none') == -1",
        "'tacocat'.indexOf('', 3) == 3",
        "'tacocat'.indexOf('a', 3) == 5",
        "'tacocat'.indexOf('at', 3) == 5",
        "'ta©o©αT'.indexOf('©') == 2",
        "'ta©o©αT'.indexOf('©', 3) == 4",
        "'ta©o©αT'.indexOf('©αT', 3) == 4",
        "'ta©o©αT'.indexOf('©α', 5) == -1",
        "'ijk'.indexOf('k') == 2",
        "'hello wello'.indexOf('hello wello') == 0",
        "'hello wello'.indexOf('ello', 6) == 7",
        "'hello wello'.indexOf('elbo room!!') == -1",
        "'hello wello'.indexOf('elbo room!!!') == -1",
        "''.lastIndexOf('@@') == -1",
        "'tacocat'.lastIndexOf('') == 7",
        "'tacocat'.lastIndexOf('at') == 5",
        "'tacocat'.lastIndexOf('none') == -1",
        "'tacocat'.lastIndexOf('', 3) == 3",
        "'tacocat'.lastIndexOf('a', 3) == 1",
        "'ta©o©αT'.lastIndexOf('©') == 4",
        "'ta©o©αT'.lastIndexOf('©', 3) == 2",
        "'ta©o©αT'.lastIndexOf('©α', 4) == 4",
        "'hello wello'.lastIndexOf('ello', 6) == 1",
        "'hello wello'.lastIndexOf('low') == -1",
        "'hello wello'.lastIndexOf('elbo room!!') == -1",
        "'hello wello'.lastIndexOf('elbo room!!!') == -1",
        "'hello wello'.lastIndexOf('hello wello') == 0",
        "'bananananana'.lastIndexOf('nana', 7) == 6",
        "'tacocat'.indexOf('a', 30) == -1",
        "'tacocat'.indexOf('', 7) == 7",
        "'tacocat'.indexOf('', 30) == 7",
        "'tacocat'.lastIndexOf('a', 30) == -1",
        "'tacocat'.lastIndexOf('', 7) == 7",
        "'tacocat'.lastIndexOf('', 30) == 7",
    ]);
    assert_err(&[
        ("'tacocat'.charAt(30) == ''", "index out of range: 30"),
        ("'tacocat'.charAt(-1) == ''", "index out of range: -1"),
        ("'tacocat'.indexOf('', -1) == 0", "index out of range: -1"),
        ("'tacocat'.lastIndexOf('a', -1) == -1", "index out of range: -1"),
        ("'tacocat'.lastIndexOf('', -1) == 0", "index out of range: -1"),
    ]);
}

#[test]
fn case_replace_split_substring_trim() {
    assert_true(&[
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCÆt'.lowerAscii() == 'tacocÆt'",
        "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'",
        "'tacoCat'.upperAscii() == 'TACOCAT'",
        "'tacoCαt'.upperAscii() == 'TACOCαT'",
        "'ÿ'.upperAscii() == 'ÿ'",
        "\"12 days 12 hours\".replace(\"{0}\", \"2\") == \"12 days 12 hours\"",
        "\"{0} days {0} hours\".replace(\"{0}\", \"2\") == \"2 days 2 hours\"",
        "\"{0} days {0} hours\".replace(\"{0}\", \"2\", 1).replace(\"{0}\", \"23\") == \"2 days 23 hours\"",
        "\"1 ©αT taco\".replace(\"αT\", \"o©α\") == \"1 ©o©α taco\"",
        "\"hello hello\".replace(\"\", \"_\") == \"_h_e_l_l_o_ _h_e_l_l_o_\"",
        "\"hello hello\".replace(\"h\", \"\") == \"ello ello\"",
        "\"héllo\".replace(\"\", \"_\", 2) == \"_h_éllo\"",
        "\"aaa\".replace(\"a\", \"b\", 0) == \"aaa\"",
        "\"aaa\".replace(\"a\", \"b\", -5) == \"bbb\"",
        "\"hello world\".split(\" \") == [\"hello\", \"world\"]",
        "\"hello world events!\".split(\" \", 0) == []",
        "\"hello world events!\".split(\" \", 1) == [\"hello world events!\"]",
        "\"o©o©o©o\".split(\"©\", -1) == [\"o\", \"o\", \"o\", \"o\"]",
        "\"o©o©o©o\".split(\"©\", 2) == [\"o\", \"o©o©o\"]",
        "\"\".split(\",\") == [\"\"]",
        "\"\".split(\"\") == []",
        "\"a©c\".split(\"\") == [\"a\", \"©\", \"c\"]",
        "\"a©c\".split(\"\", 2) == [\"a\", \"©c\"]",
        "\"tacocat\".substring(4) == \"cat\"",
        "\"tacocat\".substring(7) == \"\"",
        "\"tacocat\".substring(0, 4) == \"taco\"",
        "\"tacocat\".substring(4, 4) == \"\"",
        "'ta©o©αT'.substring(2, 6) == \"©o©α\"",
        "'ta©o©αT'.substring(7, 7) == \"\"",
        "\" \\f\\n\\r\\t\\vtext  \".trim() == \"text\"",
        "\"\\u0085\\u00a0\\u1680text\".trim() == \"text\"",
        "\"text\\u2000\\u2001\\u2002\\u2003\\u2004\\u2004\\u2006\\u2007\\u2008\\u2009\".trim() == \"text\"",
        "\"\\u200atext\\u2028\\u2029\\u202F\\u205F\\u3000\".trim() == \"text\"",
        "\"\\u180etext\\u200b\\u200c\\u200d\\u2060\\ufeff\".trim() == \"\\u180etext\\u200b\\u200c\\u200d\\u2060\\ufeff\"",
    ]);
    assert_err(&[
        ("\"tacocat\".substring(40) == \"cat\"", "index out of range: 40"),
        ("\"tacocat\".substring(-1) == \"cat\"", "index out of range: -1"),
        ("\"tacocat\".substring(1, 50) == \"cat\"", "index out of range: 50"),
        ("\"tacocat\".substring(49, 50) == \"cat\"", "index out of range: 49"),
        ("\"tacocat\".substring(4, 3) == \"\"", "invalid substring range. start: 4, end: 3"),
    ]);
}

#[test]
fn join_and_quote() {
    assert_true(&[
        "['x', 'y'].join() == 'xy'",
        "['x', 'y'].join('-') == 'x-y'",
        "[].join() == ''",
        "[].join('-') == ''",
        r#"strings.quote("first\nsecond") == "\"first\\nsecond\"""#,
        r#"strings.quote("bell\a") == "\"bell\\a\"""#,
        r#"strings.quote("\bbackspace") == "\"\\bbackspace\"""#,
        r#"strings.quote("\fform feed") == "\"\\fform feed\"""#,
        r#"strings.quote("carriage \r return") == "\"carriage \\r return\"""#,
        r#"strings.quote("horizontal tab\t") == "\"horizontal tab\\t\"""#,
        r#"strings.quote("vertical \v tab") == "\"vertical \\v tab\"""#,
        r#"strings.quote("double \\\\ slash") == "\"double \\\\\\\\ slash\"""#,
        r#"strings.quote("two escape sequences \a\n") == "\"two escape sequences \\a\\n\"""#,
        r#"strings.quote("verbatim") == "\"verbatim\"""#,
        r#"strings.quote("ends with \\") == "\"ends with \\\\\"""#,
        r#"strings.quote("\\ starts with") == "\"\\\\ starts with\"""#,
        r#"strings.quote("printable unicode😀") == "\"printable unicode😀\"""#,
        r#"strings.quote("mid string \" quote") == "\"mid string \\\" quote\"""#,
        r#"strings.quote('single-quote with "double quote"') == "\"single-quote with \\\"double quote\\\"\"""#,
        r#"strings.quote("size('ÿ')") == "\"size('ÿ')\"""#,
        r#"strings.quote("завтра") == "\"завтра\"""#,
        r#"strings.quote("") == "\"\"""#,
        r#"strings.quote('%s %s').format(['hello', 'world']) == "\"hello world\"""#,
    ]);
    // A list(dyn) whose first element is a string takes the list(string) overload; a later
    // element that is not a string is cel-go's `join: invalid input: %v`.
    assert_err(&[
        ("['a', 1].join()", "join: invalid input: 1"),
        ("[1, 'a'].join()", "no such overload"),
        ("['a', 1.5].join('-')", "join: invalid input: 1.5"),
        // From the upstream plugin, on a JSON list with a null.
        ("['a', null].join()", "join: invalid input: 0"),
        ("['a', {'k': 'v'}].join()", "join: invalid input: {k: v}"),
        ("['a', ['x']].join()", "join: invalid input: [x]"),
    ]);
}

#[test]
fn list_and_string_index_of_share_a_name() {
    assert_true(&["[1, 2, 3].indexOf(2) == 1", "'abc'.indexOf('c') == 2", "[1, 2, 1].lastIndexOf(1) == 2"]);
    assert_err(&[("1.indexOf(1)", "no such overload")]);
}

fn fmt1(f: &str, args: Vec<Value>) -> std::result::Result<String, String> {
    format(f, &args)
}

#[test]
fn format_table() {
    use std::sync::Arc;
    let s = |x: &str| Value::string(x);
    let ok: Vec<(&str, Vec<Value>, &str)> = vec![
        ("no substitution", vec![], "no substitution"),
        ("str is %s and some more", vec![s("filler")], "str is filler and some more"),
        ("%% and also %%", vec![], "% and also %"),
        ("%%%s%%", vec![s("text")], "%text%"),
        ("%s%%", vec![s("percent on the right")], "percent on the right%"),
        ("%%%s", vec![s("percent on the left")], "%percent on the left"),
        ("%.3f", vec![Value::Double(1.2345)], "1.234"),
        ("this is 5 in binary: %b", vec![Value::Int(5)], "this is 5 in binary: 101"),
        ("this is -5 in binary: %b", vec![Value::Int(-5)], "this is -5 in binary: -101"),
        ("unsigned 64 in binary: %b", vec![Value::Uint(64)], "unsigned 64 in binary: 1000000"),
        ("bit set from bool: %b", vec![Value::Bool(true)], "bit set from bool: 1"),
        ("%o", vec![Value::Int(11)], "13"),
        ("%o", vec![Value::Int(-11)], "-13"),
        ("this is an unsigned octal: %o", vec![Value::Uint(65535)], "this is an unsigned octal: 177777"),
        ("%x is 30 in hexadecimal", vec![Value::Int(30)], "1e is 30 in hexadecimal"),
        ("%X is 20 in hexadecimal", vec![Value::Int(30)], "1E is 20 in hexadecimal"),
        ("%x is -30 in hexadecimal", vec![Value::Int(-30)], "-1e is -30 in hexadecimal"),
        ("%X is 6000 in hexadecimal", vec![Value::Uint(6000)], "1770 is 6000 in hexadecimal"),
        ("%x", vec![s("Hello world!")], "48656c6c6f20776f726c6421"),
        ("%X", vec![s("Hello world!")], "48656C6C6F20776F726C6421"),
        ("%x", vec![Value::Bytes(Arc::from(&b"byte string"[..]))], "6279746520737472696e67"),
        (
            "%x",
            vec![Value::Bytes(Arc::from(&b"\x00\x00byte string\x00"[..]))],
            "00006279746520737472696e6700",
        ),
        ("%.6e", vec![Value::Double(1052.032911275)], "1.052033×10⁰³"),
        ("%f", vec![Value::Double(2.71828)], "2.718280"),
        ("%e", vec![Value::Double(2.71828)], "2.718280×10⁰⁰"),
        ("%s", vec![Value::Double(2.71)], "2.71"),
        ("%s", vec![Value::list(vec![Value::Double(2.71)])], "[2.710000]"),
        ("%s", vec![Value::Double(0.000000002)], "2e-09"),
        ("%s", vec![Value::list(vec![Value::Double(0.000000002)])], "[0.000000]"),
        ("%f", vec![s("NaN")], "NaN"),
        ("%f", vec![s("Infinity")], "∞"),
        ("%f", vec![s("-Infinity")], "-∞"),
        ("%s", vec![Value::Double(f64::NAN)], "NaN"),
        ("%s", vec![Value::Double(f64::INFINITY)], "+Inf"),
        ("%s", vec![Value::Double(f64::NEG_INFINITY)], "-Inf"),
        (
            "%s",
            vec![Value::list(vec![
                Value::Double(f64::NAN),
                Value::Double(f64::INFINITY),
                Value::Double(f64::NEG_INFINITY),
            ])],
            r#"["NaN", "+Inf", "-Inf"]"#,
        ),
        ("%d", vec![Value::Uint(64)], "64"),
        ("null: %s", vec![Value::Null], "null: null"),
        ("%s", vec![Value::Int(999999999999)], "999999999999"),
        ("some bytes: %s", vec![Value::Bytes(Arc::from(&b"xyz"[..]))], "some bytes: xyz"),
        ("type is %s", vec![Value::Type(crate::value::Type::String)], "type is string"),
        ("%s", vec![Value::Duration(6347 * 1_000_000_000)], "6347s"),
        ("%s", vec![Value::Duration(2)], "0.000000002s"),
        (
            "true bool: %s, false bool: %s",
            vec![Value::Bool(true), Value::Bool(false)],
            "true bool: true, false bool: false",
        ),
        ("%.3f", vec![Value::Double(4.5)], "4.500"),
        // en-US grouping, rounding, negative values.
        ("%.2f", vec![Value::Double(1234567.891)], "1,234,567.89"),
        ("%f", vec![Value::Double(-1234.5)], "-1,234.500000"),
        ("%.0f", vec![Value::Double(999.5)], "1,000"),
        ("%.2f", vec![Value::Double(-0.0001)], "-0.00"),
        // `%.<n>e` is a width in cel-go (`"%<n>e"`): always six digits, padded on the left.
        ("%.2e", vec![Value::Double(-0.000123)], "-1.230000×10⁻⁰⁴"),
        ("%.0e", vec![Value::Double(0.0)], "0.000000×10⁰⁰"),
        ("%.20e", vec![Value::Double(1.0)], "       1.000000×10⁰⁰"),
        ("%.5e", vec![s("-Infinity")], "   -∞"),
        ("%.300f", vec![Value::Double(1.5)], "1.50000000000000000000000000000000000000000000"),
        (
            "%s",
            vec![Value::list(vec![Value::Double(-0.0), Value::Double(f64::INFINITY)])],
            r#"[-0.000000, "+Inf"]"#,
        ),
        ("%s", vec![Value::list(vec![Value::Double(1e6)])], "[1000000.000000]"),
        // From the upstream plugin.
        (
            "%.3f|%.1f|%.0f|%f",
            vec![Value::Double(0.0005), Value::Double(0.25), Value::Double(2.5), Value::Double(1e21)],
            "0.001|0.2|2|1,000,000,000,000,000,000,000.000000",
        ),
        ("%f", vec![Value::Double(123456789012345678.0)], "123,456,789,012,345,680.000000"),
        (
            "%s|%s|%s|%s|%s",
            vec![
                Value::Double(0.1),
                Value::Double(100000.0),
                Value::Double(1e-4),
                Value::Double(1e-5),
                Value::Double(123456789.0),
            ],
            "0.1|100000|0.0001|1e-05|1.23456789e+08",
        ),
        ("%s", vec![Value::Double(1.0 / 3.0)], "0.3333333333333333"),
        ("%s", vec![Value::Duration(-1)], "-0.000000001s"),
        (
            "%s",
            vec![Value::list(vec![
                Value::Duration(-1_500_000_000),
                Value::Duration(360_000_000 * 1_000_000_000),
                Value::Uint(3),
            ])],
            r#"[duration("-1.5s"), duration("360000000s"), 3]"#,
        ),
        (
            "%b %o %X %x",
            vec![
                Value::Int(-5),
                Value::Uint(8),
                Value::Bytes(std::sync::Arc::from(&b"\x0a\xff"[..])),
                s("é"),
            ],
            "-101 10 0AFF c3a9",
        ),
        ("%e|%f", vec![s("Infinity"), s("NaN")], "     ∞|NaN"),
        ("[%e]", vec![Value::Double(f64::NAN)], "[   NaN]"),
        ("[%e]", vec![s("-Infinity")], "[    -∞]"),
        ("%e", vec![Value::Double(1e100)], "1.000000×10¹⁰⁰"),
        ("%s", vec![Value::Double(1e6)], "1e+06"),
        ("%s", vec![Value::Double(123456.0)], "123456"),
        ("%s", vec![Value::Double(-0.0001)], "-0.0001"),
        ("%s", vec![Value::Double(1.5e-5)], "1.5e-05"),
        ("%.3d", vec![Value::Int(7)], "7"),
        ("é%s€", vec![s("ü")], "éü€"),
    ];
    for (f, args, want) in ok {
        assert_eq!(fmt1(f, args.clone()).as_deref(), Ok(want), "{f} {args:?}");
    }
}

#[test]
fn format_aggregates() {
    use crate::value::{Key, Map};
    use std::sync::Arc;
    let mut m = Map::new();
    m.insert(Key::str("key1"), Value::Bytes(Arc::from(&b"xyz"[..])));
    m.insert(Key::str("key5"), Value::Null);
    m.insert(Key::str("key2"), Value::Duration(7200 * 1_000_000_000));
    m.insert(Key::str("key4"), Value::Bool(true));
    m.insert(Key::str("key3"), Value::Double(2.71828));
    assert_eq!(
        format("%s", &[Value::map(m)]).unwrap(),
        r#"{"key1":b"xyz", "key2":duration("7200s"), "key3":2.718280, "key4":true, "key5":null}"#
    );
    let mut m = Map::new();
    m.insert(Key::Int(1), Value::string("value1"));
    m.insert(Key::Uint(2), Value::string("value2"));
    m.insert(Key::Bool(true), Value::Double(f64::NAN));
    assert_eq!(
        format("map with multiple key types: %s", &[Value::map(m)]).unwrap(),
        r#"map with multiple key types: {1:"value1", 2:"value2", true:"NaN"}"#
    );
    let mut m = Map::new();
    m.insert(Key::str("strKey"), Value::string("x"));
    m.insert(Key::Int(6), Value::Duration(422 * 1_000_000_000));
    m.insert(Key::Bool(true), Value::Int(42));
    assert_eq!(format("%s", &[Value::map(m)]).unwrap(), r#"{"strKey":"x", 6:duration("422s"), true:42}"#);
    let ts: jiff::Timestamp = "2023-02-03T23:31:20Z".parse().unwrap();
    let list = Value::list(vec![
        Value::string("abc"),
        Value::Double(3.14),
        Value::Null,
        Value::list(vec![Value::Int(9), Value::Int(8), Value::Int(7), Value::Int(6)]),
        Value::Timestamp(ts),
    ]);
    assert_eq!(
        format("%s", &[list]).unwrap(),
        r#"["abc", 3.140000, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")]"#
    );
    assert_eq!(format("%s", &[Value::Timestamp(ts)]).unwrap(), "2023-02-03T23:31:20Z");
    let ts: jiff::Timestamp = "2009-11-10T23:00:00.120Z".parse().unwrap();
    assert_eq!(format("%s", &[Value::Timestamp(ts)]).unwrap(), "2009-11-10T23:00:00.12Z");
    assert_eq!(
        format("%s", &[Value::list(vec![Value::string("a\"\n\u{0}\u{a0}é")])]).unwrap(),
        r#"["a\"\n\x00\u00a0é"]"#
    );
}

#[test]
fn format_errors() {
    let s = |x: &str| Value::string(x);
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        ("%a", vec![Value::Int(1)], "could not parse formatting clause: unrecognized formatting clause \"a\""),
        ("%d %d %d", vec![Value::Int(0), Value::Int(1)], "index 2 out of range"),
        (
            "string is %b",
            vec![Value::string("abc")],
            "error during formatting: only integers and bools can be formatted as binary, was given string",
        ),
        (
            "%d",
            vec![Value::Duration(1)],
            "error during formatting: decimal clause can only be used on integers, was given google.protobuf.Duration",
        ),
        (
            "octal: %o",
            vec![Value::string("a string")],
            "error during formatting: octal clause can only be used on integers, was given string",
        ),
        (
            "double is %x",
            vec![Value::Double(0.5)],
            "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double",
        ),
        ("double is %E", vec![Value::Double(0.5)], "could not parse formatting clause: unrecognized formatting clause \"E\""),
        ("null: %d", vec![Value::Null], "error during formatting: decimal clause can only be used on integers, was given null_type"),
        ("null: %e", vec![Value::Null], "error during formatting: scientific clause can only be used on doubles, was given null_type"),
        ("null: %f", vec![Value::Null], "error during formatting: fixed-point clause can only be used on doubles, was given null_type"),
        ("%s %s", vec![Value::string("abc")], "index 1 out of range"),
        ("filler %", vec![], "index 0 out of range"),
        ("filler %", vec![Value::Int(1)], "unexpected end of string"),
        (
            "double is %.34",
            vec![Value::Double(5.0)],
            "could not parse formatting clause: error while parsing precision: could not find end of precision specifier",
        ),
        (
            "%.f",
            vec![Value::Double(5.0)],
            "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax",
        ),
        (
            "%s",
            vec![Value::Optional(None)],
            "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type",
        ),
        ("%s", vec![Value::list(vec![Value::Optional(None)])], "error during formatting: no formatting function for optional_type"),
        ("%é", vec![Value::Int(1)], "could not parse formatting clause: unrecognized formatting clause \"Ã\""),
        // From the upstream plugin.
        ("%5", vec![Value::Int(1)], "could not parse formatting clause: unrecognized formatting clause \"5\""),
        ("%", vec![], "index 0 out of range"),
        (
            "%.99999999999999999999f",
            vec![Value::Double(1.0)],
            "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
        ),
        ("%f", vec![s("inf")], "error during formatting: fixed-point clause can only be used on doubles, was given string"),
        ("%.2f", vec![Value::Int(1)], "error during formatting: fixed-point clause can only be used on doubles, was given int"),
        (
            "%s",
            vec![Value::Bytes(std::sync::Arc::from(&b"\xff"[..]))],
            "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string",
        ),
    ];
    for (f, args, want) in cases {
        assert_eq!(fmt1(f, args.clone()), Err(want.to_string()), "{f} {args:?}");
    }
}

#[test]
fn go_number_and_quote_texts() {
    assert_eq!(go_g(56.8), "56.8");
    assert_eq!(go_g(1234567.0), "1.234567e+06");
    assert_eq!(go_g(-0.0), "-0");
    assert_eq!(go_g(1e21), "1e+21");
    assert_eq!(go_g(100000.0), "100000");
    assert_eq!(go_quote("\u{7f}\u{200b}\u{1F600}"), "\"\\x7f\\u200b\u{1F600}\"");
    assert_eq!(go_quote("\u{e000}\u{f0000}"), "\"\\ue000\\U000f0000\"");
    // From the upstream plugin: combining marks printed, format characters, separators,
    // noncharacters and unassigned code points escaped.
    assert_eq!(
        go_quote("\u{300}\u{600}\u{E0001}\u{FFFF}\u{AD}\u{2028}\u{3000}\u{2062}\u{10FFFF}\u{378}"),
        "\"\u{300}\\u0600\\U000e0001\\uffff\\u00ad\\u2028\\u3000\\u2062\\U0010ffff\\u0378\""
    );
}

#[test]
fn costs() {
    fn cost_of(expr: &str) -> u64 {
        // Cost of the call alone: run it on a meter and read the charge.
        let registry = crate::library::standard();
        let program = crate::compile(expr, &crate::Declarations::with_variables(&[]), &registry).unwrap();
        let mut meter = crate::Meter::new(crate::Limits { cost: u64::MAX, deadline: None });
        let values: Vec<Value> = Vec::new();
        program.evaluate(&values, &crate::NoHost, &mut meter).unwrap();
        meter.cost
    }
    // Constants cost 0; the call its own cost.
    assert_eq!(cost_of("'hello world'.charAt(0)"), 1);
    // traversalCost: ⌊11 bytes × 0.1⌋.
    assert_eq!(cost_of("'hello world'.indexOf('world')"), 1);
    assert_eq!(cost_of("'aaaaaaaaaaaaaaaaaaaaaaaaaaaaa'.lastIndexOf('a')"), 2);
    // ⌈5 × 0.1⌉.
    assert_eq!(cost_of("'HELLO'.lowerAscii()"), 1);
    // ⌈11 × 2 × 0.1⌉ = 3.
    assert_eq!(cost_of("'hello world'.replace('world', 'CEL')"), 3);
    // join: ⌈9 × 0.2⌉ = 2 (plus the list literal, a constant).
    assert_eq!(cost_of("['a', 'b', 'c', 'd', 'e'].join('-')"), 2);
    // format and strings.quote: ⌈size × 0.1⌉ of the first argument.
    assert_eq!(cost_of("strings.quote('')"), 0);
    assert_eq!(cost_of("'%s and %s and %s'.format(['x', 'y', 'z'])"), 2);
}

#[test]
fn direct_calls() {
    test_ctx(|ctx| {
        let r = char_at(ctx, &[Value::string("héllo"), Value::Int(1)]).unwrap();
        assert_eq!(r, Value::string("é"));
        let e = char_at(ctx, &[Value::Int(1), Value::Int(1)]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::NoMatch);
        let e = index_of(ctx, &[Value::list(vec![]), Value::string("")]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::NoMatch);
    });
    // A long string: code points, not bytes.
    let long: String = "é".repeat(10_000);
    assert_eq!(index_of_str(&long, "é", 9_999), Ok(9_999));
    assert_eq!(last_index_of_whole(&long, "éé"), Ok(9_998));
    assert_eq!(substring_str(&long, 9_998, 10_000).unwrap(), "éé");
}
