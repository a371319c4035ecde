//! Expected values from cel-go v0.26's behaviour (its types' code and tests, the cel-spec
//! conformance cases it passes) and Go's `strconv`/`time` as they parse and print.

use super::convert::{go_format_float, go_parse_float};
use super::time::{civil, days_from_civil, duration_field, go_parse_duration, go_parse_rfc3339, Field};
use super::*;
use crate::eval::evaluate_str;

type Want = std::result::Result<Value, &'static str>;

fn b(v: bool) -> Want {
    Ok(Value::Bool(v))
}
fn i(v: i64) -> Want {
    Ok(Value::Int(v))
}
fn u(v: u64) -> Want {
    Ok(Value::Uint(v))
}
fn d(v: f64) -> Want {
    Ok(Value::Double(v))
}
fn s(v: &str) -> Want {
    Ok(Value::string(v))
}
fn e(msg: &'static str) -> Want {
    Err(msg)
}

/// `dyn(x)` as `[x][0]`: the same value, but not a constant conversion the program would
/// fold at creation (cel-go folds `dyn('…')` and a conversion of it, so its error is an
/// instantiation error there too); the runtime behaviour is what these tests are about.
fn undyn(src: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut closers: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == '\'' || c == '"' {
            quote = Some(c);
            out.push(c);
        } else if chars[i..].starts_with(&['d', 'y', 'n', '(']) && (i == 0 || !chars[i - 1].is_alphanumeric())
        {
            depth += 1;
            closers.push(depth);
            out.push('[');
            i += 4;
            continue;
        } else if c == '(' {
            depth += 1;
            out.push(c);
        } else if c == ')' {
            if closers.last() == Some(&depth) {
                closers.pop();
                out.push_str("][0]");
            } else {
                out.push(c);
            }
            depth -= 1;
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn check(cases: &[(&str, Want)]) {
    for (src, want) in cases {
        let got = evaluate_str(&undyn(src), &[]);
        match want {
            Ok(Value::Double(w)) if w.is_nan() => {
                assert!(matches!(got, Ok(Value::Double(g)) if g.is_nan()), "{src}: {got:?}")
            }
            Ok(v) => assert_eq!(got.as_ref(), Ok(v), "{src}"),
            Err(msg) => assert_eq!(got.as_ref().map_err(String::as_str), Err(*msg), "{src}"),
        }
    }
}

#[test]
fn arithmetic() {
    check(&[
        ("1 + 2", i(3)),
        ("9223372036854775807 + 1", e("integer overflow")),
        ("-9223372036854775807 - 1", i(i64::MIN)),
        ("-9223372036854775807 - 2", e("integer overflow")),
        ("-(-9223372036854775807 - 1)", e("integer overflow")),
        ("-(1)", i(-1)),
        ("9223372036854775807 * 2", e("integer overflow")),
        ("(-9223372036854775807 - 1) * -1", e("integer overflow")),
        ("(-9223372036854775807 - 1) / -1", e("integer overflow")),
        ("(-9223372036854775807 - 1) % -1", e("integer overflow")),
        ("7 / 2", i(3)),
        ("-7 / 2", i(-3)),
        ("-7 % 2", i(-1)),
        ("7 % -2", i(1)),
        ("1 / 0", e("division by zero")),
        ("1 % 0", e("modulus by zero")),
        ("1u / 0u", e("division by zero")),
        ("1u % 0u", e("modulus by zero")),
        ("18446744073709551615u + 1u", e("unsigned integer overflow")),
        ("1u - 2u", e("unsigned integer overflow")),
        ("9223372036854775808u * 2u", e("unsigned integer overflow")),
        ("22u + 33u", u(55)),
        ("42u / 2u", u(21)),
        ("6u % 4u", u(2)),
        ("3.5 * 40.0", d(140.0)),
        ("1.0 / 0.0", d(f64::INFINITY)),
        ("-1.0 / 0.0", d(f64::NEG_INFINITY)),
        ("0.0 / 0.0", d(f64::NAN)),
        ("10.5 - 2.0", d(8.5)),
        ("-(2.5)", d(-2.5)),
        ("'ab' + 'cd'", s("abcd")),
        ("'' + 'cd'", s("cd")),
        ("b'ab' + b'cd' == b'abcd'", b(true)),
        ("[1] + [2, 3]", Ok(Value::list(vec![Value::Int(1), Value::Int(2), Value::Int(3)]))),
        ("[] + [1]", Ok(Value::list(vec![Value::Int(1)]))),
        ("duration('1m') + duration('1s') == duration('61s')", b(true)),
        ("duration('1m') - duration('1s') == duration('59s')", b(true)),
        ("-duration('1s') == duration('-1s')", b(true)),
        ("duration('24h') + timestamp('2023-01-01T00:00:00Z') == timestamp('2023-01-02T00:00:00Z')", b(true)),
        (
            "timestamp('2023-01-01T00:00:00Z') + duration('24h1m2s') == timestamp('2023-01-02T00:01:02Z')",
            b(true),
        ),
        ("timestamp('2023-01-10T12:00:00Z') - duration('12h') == timestamp('2023-01-10T00:00:00Z')", b(true)),
        ("timestamp('2023-01-10T12:00:00Z') - timestamp('2023-01-10T00:00:00Z') == duration('12h')", b(true)),
        ("timestamp('9999-12-30T00:00:00Z') + duration('48h')", e("timestamp overflow")),
        ("timestamp('0001-01-01T00:00:00Z') - duration('1ns')", e("timestamp overflow")),
        (
            "timestamp('0001-01-01T00:00:00.5Z') - duration('0.5s') == timestamp('0001-01-01T00:00:00Z')",
            b(true),
        ),
        ("duration('2562047h') + duration('2562047h')", e("integer overflow")),
        ("timestamp('9999-12-30T00:00:00Z') - timestamp('0001-01-01T00:00:00Z')", e("integer overflow")),
        // Operands that fit no overload.
        ("dyn(1) + 1.0", e("no such overload")),
        ("dyn(true) + 1", e("no such overload: _+_")),
        ("dyn(null) + 1", e("no such overload: _+_")),
        ("dyn({}) + {}", e("no such overload: _+_")),
        ("dyn('a') * 2", e("no such overload")),
        ("dyn([1]) * 2", e("no such overload: _*_")),
        ("dyn(1.5) % 2.0", e("no such overload: _%_")),
        ("dyn(1u) - 1", e("no such overload")),
        ("-dyn(1u)", e("no such overload: -_")),
        ("-dyn(true)", e("no such overload")),
        ("-dyn('a')", e("no such overload")),
        ("-dyn([])", e("no such overload: -_")),
        ("dyn(duration('1s')) - timestamp('2023-01-01T00:00:00Z')", e("no such overload")),
        ("dyn(duration('1s')) / 2", e("no such overload")),
    ]);
}

#[test]
fn equality() {
    check(&[
        ("30 == 30.0", b(true)),
        ("30u == 30.0", b(true)),
        ("30 == 30u", b(true)),
        ("-1 == 18446744073709551615u", b(false)),
        ("dyn(3.0) == 3", b(true)),
        ("1 == 1.5", b(false)),
        ("double('NaN') == double('NaN')", b(false)),
        ("double('NaN') != double('NaN')", b(true)),
        ("9223372036854775807 == 9223372036854775808.0", b(true)),
        ("18446744073709551615u == 18446744073709551616.0", b(true)),
        ("dyn(1) == '1'", b(false)),
        ("null == null", b(true)),
        ("dyn(null) == 0", b(false)),
        ("[1, 2] == [1.0, 2u]", b(true)),
        ("[1, 2] == [1, 2, 3]", b(false)),
        ("{1: 'a'} == {1u: 'a'}", b(true)),
        ("{'a': 1} == {'a': 1.0}", b(true)),
        ("{'a': 1} == {'b': 1}", b(false)),
        ("'a' != 'b'", b(true)),
        ("b'a' == b'a'", b(true)),
        ("duration('1h') == duration('60m')", b(true)),
        ("timestamp('2023-01-01T00:00:00Z') == timestamp('2023-01-01T05:00:00+05:00')", b(true)),
        ("int == type(1)", b(true)),
        ("type(1) == type(1u)", b(false)),
        ("optional.none() == optional.none()", b(true)),
        ("optional.of(1) == optional.of(1u)", b(true)),
        ("optional.of(1) == 1", b(false)),
    ]);
}

#[test]
fn ordering() {
    check(&[
        ("1 < 2", b(true)),
        ("1 < 1.1", b(true)),
        ("1 < 2u", b(true)),
        ("1u < 0.9", b(false)),
        ("1u < -1", b(false)),
        ("2.1 < 3", b(true)),
        ("2.3 < 2u", b(false)),
        ("-1.0 < 1u", b(true)),
        ("-1 < 18446744073709551615u", b(true)),
        ("9223372036854775807 < 9223372036854775808.0", b(false)),
        ("9223372036854775807 <= 9223372036854775808.0", b(true)),
        ("1e300 > 9223372036854775807", b(true)),
        ("-1e300 < -9223372036854775807", b(true)),
        ("false < true", b(true)),
        ("'a' < 'b'", b(true)),
        ("'cat' < 'cab'", b(false)),
        ("'a' <= 'a'", b(true)),
        ("'é' > 'z'", b(true)),
        ("b'hello' < b'world'", b(true)),
        ("duration('1ms') < duration('1s')", b(true)),
        ("timestamp('2001-01-01T02:03:04Z') < timestamp('2002-02-02T02:03:04Z')", b(true)),
        ("2 >= 2.0", b(true)),
        ("2 > 2u", b(false)),
        ("1 < double('NaN')", e("NaN values cannot be ordered")),
        ("double('NaN') < 1", e("NaN values cannot be ordered")),
        ("double('NaN') >= 1u", e("NaN values cannot be ordered")),
        ("dyn(double('NaN')) < 'a'", e("NaN values cannot be ordered")),
        ("dyn(1) < 'a'", e("no such overload")),
        ("dyn('a') < 1", e("no such overload")),
        ("dyn(true) < 1", e("no such overload")),
        ("dyn([1]) < [2]", e("no such overload: _<_")),
        ("dyn(null) >= null", e("no such overload: _>=_")),
        ("dyn({}) > {}", e("no such overload: _>_")),
        ("dyn(timestamp('2001-01-01T02:03:04Z')) <= duration('1s')", e("no such overload")),
    ]);
}

#[test]
fn membership() {
    check(&[
        ("1 in [1, 2]", b(true)),
        ("1.0 in [1, 2]", b(true)),
        ("2u in [1, 2]", b(true)),
        ("3 in [1, 2]", b(false)),
        ("'a' in ['a']", b(true)),
        ("dyn('1') in [1]", b(false)),
        ("null in [null]", b(true)),
        ("[1] in [[1], [2]]", b(true)),
        ("'a' in {'a': 1}", b(true)),
        ("'b' in {'a': 1}", b(false)),
        ("1u in {1: 'a'}", b(true)),
        ("1.0 in {1: 'a'}", b(true)),
        ("1.5 in {1: 'a'}", b(false)),
        ("-1 in {18446744073709551615u: 'a'}", b(false)),
        ("dyn(1) in {'1': 'a'}", b(false)),
        ("dyn([1]) in {'1': 'a'}", b(false)),
        ("1 in dyn(1)", e("no such overload")),
        ("'a' in dyn('abc')", e("no such overload")),
    ]);
}

#[test]
fn strings_and_sizes() {
    check(&[
        ("size('héllo') == 5", b(true)),
        ("'héllo'.size()", i(5)),
        ("size('')", i(0)),
        ("size('😀')", i(1)),
        ("size(b'h\\xc3\\xa9')", i(3)),
        ("size([1, 2])", i(2)),
        ("{'a': 1}.size()", i(1)),
        ("size(dyn(1))", e("no such overload: size")),
        ("size(dyn(null))", e("no such overload: size")),
        ("dyn(duration('1s')).size()", e("no such overload")),
        ("'hello world'.contains('o w')", b(true)),
        ("'hello world'.contains('goodbye')", b(false)),
        ("'abc'.contains('')", b(true)),
        ("'hello world'.startsWith('hello')", b(true)),
        ("'hello world'.startsWith('world')", b(false)),
        ("'hello world'.endsWith('world')", b(true)),
        ("'héllo'.endsWith('llo')", b(true)),
        ("dyn(1).contains('a')", e("no such overload")),
        ("'a'.startsWith(dyn(1))", e("no such overload")),
        ("matches('123-456', '^[0-9]+(-[0-9]+)?$')", b(true)),
        ("'hello'.matches('^h.*o$')", b(true)),
        ("'hello'.matches('ell')", b(true)),
        ("'hello'.matches('^ell')", b(false)),
        ("'héllo'.matches('^h.llo$')", b(true)),
        ("'abc'.matches(dyn('('))", e("error parsing regexp: missing closing ): `(`")),
        ("'abc'.matches(dyn(1))", e("no such overload")),
        ("dyn(1).matches('a')", e("no such overload: matches")),
        ("dyn(timestamp('2001-01-01T02:03:04Z')).matches('a')", e("no such overload")),
    ]);
}

#[test]
fn conversions() {
    check(&[
        ("int(1u)", i(1)),
        ("int(dyn(9223372036854775808u))", e("integer overflow")),
        ("int(2.9)", i(2)),
        ("int(-2.9)", i(-2)),
        ("int(dyn(-9223372036854775808.0))", e("integer overflow")),
        ("int(dyn(9223372036854775807.0))", e("integer overflow")),
        ("int(dyn(1e19))", e("integer overflow")),
        ("int(dyn(double('NaN')))", e("integer overflow")),
        ("int(dyn(double('-Infinity')))", e("integer overflow")),
        ("int(dyn('123'))", i(123)),
        ("int(dyn('-123'))", i(-123)),
        ("int(dyn('+123'))", i(123)),
        ("int(dyn('  1'))", e("type conversion error from 'string' to 'int'")),
        ("int(dyn('1_000'))", e("type conversion error from 'string' to 'int'")),
        ("int(dyn('0x10'))", e("type conversion error from 'string' to 'int'")),
        ("int(dyn('9223372036854775808'))", e("type conversion error from 'string' to 'int'")),
        ("int(duration('1s'))", i(1_000_000_000)),
        ("int(timestamp('1970-01-01T00:00:01Z'))", i(1)),
        ("int(timestamp('1969-12-31T23:59:59.5Z'))", i(-1)),
        ("int(dyn([]))", e("no such overload: int(list)")),
        ("int(dyn(true))", e("no such overload: int(bool)")),
        ("uint(1)", u(1)),
        ("uint(dyn(-1))", e("unsigned integer overflow")),
        ("uint(2.7)", u(2)),
        ("uint(dyn(-0.5))", e("unsigned integer overflow")),
        ("uint(dyn(18446744073709551616.0))", e("unsigned integer overflow")),
        ("uint(dyn('42'))", u(42)),
        ("uint(dyn('+42'))", e("type conversion error from 'string' to 'uint'")),
        ("uint(dyn('-1'))", e("type conversion error from 'string' to 'uint'")),
        ("uint(dyn(null))", e("no such overload: uint(null_type)")),
        ("double(1)", d(1.0)),
        ("double(18446744073709551615u)", d(18446744073709551615u64 as f64)),
        ("double(dyn('1.5'))", d(1.5)),
        ("double(dyn('1e3'))", d(1000.0)),
        ("double(dyn('1_000.5'))", d(1000.5)),
        ("double(dyn('.5'))", d(0.5)),
        ("double(dyn('-Infinity'))", d(f64::NEG_INFINITY)),
        ("double(dyn('nan'))", d(f64::NAN)),
        ("double(dyn('0x1p-2'))", d(0.25)),
        ("double(dyn('1e400'))", e("type conversion error from 'string' to 'double'")),
        ("double(dyn('abc'))", e("type conversion error from 'string' to 'double'")),
        ("double(dyn(''))", e("type conversion error from 'string' to 'double'")),
        ("double(dyn(duration('1s')))", e("no such overload: double(google.protobuf.Duration)")),
        ("string(1.0)", s("1")),
        ("string(1e100)", s("1e+100")),
        ("string(0.1)", s("0.1")),
        ("string(123456.0)", s("123456")),
        ("string(1234567.0)", s("1.234567e+06")),
        ("string(0.0001)", s("0.0001")),
        ("string(0.00001)", s("1e-05")),
        ("string(-1.5)", s("-1.5")),
        ("string(dyn(-0.0))", s("-0")),
        ("string(double('Infinity'))", s("+Inf")),
        ("string(double('-Infinity'))", s("-Inf")),
        ("string(double('NaN'))", s("NaN")),
        ("string(-12)", s("-12")),
        ("string(12u)", s("12")),
        ("string(true)", s("true")),
        ("string(b'abc')", s("abc")),
        ("string(dyn(b'\\xff'))", e("invalid UTF-8 in bytes, cannot convert to string")),
        ("string(duration('1h30m'))", s("5400s")),
        ("string(duration('1.5s'))", s("1.5s")),
        ("string(duration('1ns'))", s("0.000000001s")),
        ("string(duration('-1.5s'))", s("-1.5s")),
        ("string(duration('0s'))", s("0s")),
        ("string(timestamp('2023-01-01T00:00:00Z'))", s("2023-01-01T00:00:00Z")),
        ("string(timestamp('2009-11-10T23:00:00.120Z'))", s("2009-11-10T23:00:00.12Z")),
        ("string(timestamp('2009-11-10T23:00:00.000000001Z'))", s("2009-11-10T23:00:00.000000001Z")),
        ("string(dyn(null))", e("no such overload: string(null_type)")),
        ("string(dyn([1]))", e("no such overload: string(list)")),
        ("bytes('abc') == b'abc'", b(true)),
        ("bytes(dyn(1))", e("no such overload: bytes(int)")),
        ("bool('true')", b(true)),
        ("bool(dyn('T'))", b(true)),
        ("bool(dyn('0'))", b(false)),
        ("bool(dyn('False'))", b(false)),
        ("bool(dyn('yes'))", e("type conversion error from 'string' to 'bool'")),
        ("bool(dyn('tRUE'))", e("type conversion error from 'string' to 'bool'")),
        ("bool(dyn(1))", e("no such overload: bool(int)")),
        ("dyn([1])", Ok(Value::list(vec![Value::Int(1)]))),
        ("type(1) == int", b(true)),
        ("type(1u) == uint", b(true)),
        ("type('a') == string", b(true)),
        ("type([]) == list", b(true)),
        ("type({}) == map", b(true)),
        ("type(null) == null_type", b(true)),
        ("type(int) == type", b(true)),
        ("type(duration('1s')) == google.protobuf.Duration", b(true)),
        ("type(timestamp('2023-01-01T00:00:00Z')) == google.protobuf.Timestamp", b(true)),
        ("duration('1h30m') == duration('5400s')", b(true)),
        ("duration(dyn('1x'))", e("type conversion error from 'string' to 'google.protobuf.Duration'")),
        ("duration(dyn(5))", e("type conversion error from 'int' to 'google.protobuf.Duration'")),
        ("duration(dyn(true))", e("no such overload: duration(bool)")),
        ("timestamp(0) == timestamp('1970-01-01T00:00:00Z')", b(true)),
        ("timestamp(dyn(253402300800))", e("timestamp overflow")),
        ("timestamp(dyn(-62135596801))", e("timestamp overflow")),
        ("timestamp(dyn('0000-01-01T00:00:00Z'))", e("timestamp overflow")),
        (
            "timestamp(dyn('2023-01-01'))",
            e("type conversion error from 'string' to 'google.protobuf.Timestamp'"),
        ),
        (
            "timestamp(dyn('2023-02-29T00:00:00Z'))",
            e("type conversion error from 'string' to 'google.protobuf.Timestamp'"),
        ),
        ("timestamp(dyn(1.5))", e("no such overload: timestamp(double)")),
    ]);
}

#[test]
fn accessors() {
    let ts = "timestamp('2023-07-14T10:30:45.123Z')";
    check(&[
        (&format!("{ts}.getFullYear()"), i(2023)),
        (&format!("{ts}.getMonth()"), i(6)),
        (&format!("{ts}.getDate()"), i(14)),
        (&format!("{ts}.getDayOfMonth()"), i(13)),
        (&format!("{ts}.getDayOfWeek()"), i(5)),
        (&format!("{ts}.getHours()"), i(10)),
        (&format!("{ts}.getMinutes()"), i(30)),
        (&format!("{ts}.getSeconds()"), i(45)),
        (&format!("{ts}.getMilliseconds()"), i(123)),
        (&format!("{ts}.getHours('America/Los_Angeles')"), i(3)),
        (&format!("{ts}.getMinutes('+05:30')"), i(0)),
        (&format!("{ts}.getHours('+05:30')"), i(16)),
        (&format!("{ts}.getHours('-08:00')"), i(2)),
        (&format!("{ts}.getHours('-00:30')"), i(10)),
        (&format!("{ts}.getMinutes('-00:30')"), i(0)),
        (&format!("{ts}.getHours('UTC')"), i(10)),
        (&format!("{ts}.getHours('')"), i(10)),
        (&format!("{ts}.getMilliseconds('Asia/Kolkata')"), i(123)),
        ("timestamp('2023-01-01T00:00:00Z').getHours('America/New_York') == 19", b(true)),
        ("timestamp('2023-01-02T00:00:00Z').getDayOfYear()", i(1)),
        ("timestamp('2023-01-01T05:00:00Z').getDayOfYear('America/Los_Angeles')", i(364)),
        ("timestamp('2023-01-01T05:30:00Z').getFullYear('-08:00')", i(2022)),
        ("timestamp('2023-01-01T05:30:00Z').getMonth('America/Los_Angeles')", i(11)),
        ("timestamp('2023-07-01T05:00:00Z').getDayOfMonth('America/Los_Angeles')", i(29)),
        ("timestamp('2023-07-01T05:00:00Z').getDate('America/Los_Angeles')", i(30)),
        ("timestamp('2023-07-16T05:00:00Z').getDayOfWeek('America/Los_Angeles')", i(6)),
        ("timestamp('2024-12-31T12:00:00Z').getDayOfYear()", i(365)),
        ("timestamp('0001-01-01T00:00:00Z').getDayOfWeek()", i(1)),
        ("timestamp('0001-01-01T00:00:00Z').getFullYear('-01:00')", i(0)),
        (
            "timestamp('2023-01-01T00:00:00Z').getHours('america/new_york')",
            e("unknown time zone america/new_york"),
        ),
        ("timestamp('2023-01-01T00:00:00Z').getHours('Mars/Olympus')", e("unknown time zone Mars/Olympus")),
        ("timestamp('2023-01-01T00:00:00Z').getHours('../etc/passwd')", e("time: invalid location name")),
        (
            "timestamp('2023-01-01T00:00:00Z').getHours('+x:00')",
            e("strconv.Atoi: parsing \"+x\": invalid syntax"),
        ),
        (
            "timestamp('2023-01-01T00:00:00Z').getHours('05:')",
            e("strconv.Atoi: parsing \"\": invalid syntax"),
        ),
        ("timestamp('2023-01-01T00:00:00Z').getHours('+25:00')", i(1)),
        (
            "timestamp('2023-01-01T00:00:00Z').getHours(dyn(5))",
            e("no such overload: getHours(google.protobuf.Timestamp, int)"),
        ),
        ("duration('3723s').getHours()", i(1)),
        ("duration('3723s').getMinutes()", i(62)),
        ("duration('3723.456s').getSeconds()", i(3723)),
        ("duration('3723.456s').getMilliseconds()", i(3723456)),
        ("duration('-90m').getHours()", i(-1)),
        ("dyn(duration('1h')).getFullYear()", e("no such overload: getFullYear(google.protobuf.Duration)")),
        (
            "dyn(duration('1h')).getHours('UTC')",
            e("no such overload: getHours(google.protobuf.Duration, string)"),
        ),
        ("dyn('x').getHours()", e("no such overload: getHours(string)")),
    ]);
}

#[test]
fn undyn_rewrites() {
    assert_eq!(undyn("int(dyn('(a)')) + dyn(f(1))"), "int(['(a)'][0]) + [f(1)][0]");
}

#[test]
fn float_text() {
    for (v, want) in [
        (1.0, "1"),
        (100.0, "100"),
        (1e6, "1e+06"),
        (1e21, "1e+21"),
        (123456.0, "123456"),
        (0.1, "0.1"),
        (1e-5, "1e-05"),
        (-2.5e-10, "-2.5e-10"),
        (1e100, "1e+100"),
        (0.30000000000000004, "0.30000000000000004"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e+308"),
    ] {
        assert_eq!(go_format_float(v), want, "{v}");
    }
    for (text, want) in [
        ("1", Some(1.0)),
        ("+1.5", Some(1.5)),
        ("-.5", Some(-0.5)),
        ("5.", Some(5.0)),
        ("1.e2", Some(100.0)),
        ("1_000", Some(1000.0)),
        ("1_0.5_0e1_0", Some(1.05e11)),
        ("0x1.8p1", Some(3.0)),
        ("0x_1p4", Some(16.0)),
        ("-0X1P-1", Some(-0.5)),
        ("0x1p1024", None),
        ("0x1p-1074", Some(5e-324)),
        ("0x1", None),
        ("Inf", Some(f64::INFINITY)),
        ("+INFINITY", Some(f64::INFINITY)),
        ("-inf", Some(f64::NEG_INFINITY)),
        ("1e-400", Some(0.0)),
        ("1e400", None),
        ("_1", None),
        ("1_", None),
        ("1__0", None),
        ("1._5", None),
        ("+nan", None),
        ("infin", None),
        ("1e", None),
        (".", None),
        ("", None),
        (" 1", None),
        ("1 ", None),
        ("1f", None),
    ] {
        let got = go_parse_float(text);
        assert_eq!(got, want, "{text:?}");
    }
    assert!(go_parse_float("NaN").is_some_and(f64::is_nan));
}

#[test]
fn durations_and_times() {
    for (text, want) in [
        ("0", Some(0)),
        ("-0", Some(0)),
        ("1h30m", Some(5_400_000_000_000)),
        ("1.5s", Some(1_500_000_000)),
        ("-1.5h", Some(-5_400_000_000_000)),
        (".5s", Some(500_000_000)),
        ("5.s", Some(5_000_000_000)),
        ("1us", Some(1_000)),
        ("1µs", Some(1_000)),
        ("1μs", Some(1_000)),
        ("2h45m", Some(9_900_000_000_000)),
        ("9223372036854775807ns", Some(i64::MAX)),
        ("9223372036854775808ns", None),
        ("-9223372036854775808ns", Some(i64::MIN)),
        ("2562048h", None),
        ("1", None),
        ("", None),
        ("-", None),
        (".s", None),
        ("1d", None),
        ("1h ", None),
        ("0.0000000001s", Some(0)),
    ] {
        assert_eq!(go_parse_duration(text), want, "{text:?}");
    }
    for (text, want) in [
        ("1970-01-01T00:00:00Z", Some((0, 0))),
        ("1970-01-01T00:00:00.5Z", Some((0, 500_000_000))),
        ("1970-01-01T00:00:00,5Z", Some((0, 500_000_000))),
        ("1970-01-01T00:00:00.1234567899Z", Some((0, 123_456_789))),
        ("1970-01-01T01:00:00+01:00", Some((0, 0))),
        ("1970-01-01T0:00:00Z", Some((0, 0))),
        ("1970-01-01T00:00:00+24:00", Some((-86_400, 0))),
        ("1970-01-01T00:00:00+25:00", None),
        ("1970-01-01T24:00:00Z", None),
        ("1970-01-01T00:60:00Z", None),
        ("1970-01-01T00:00:60Z", None),
        ("1970-01-01t00:00:00Z", None),
        ("1970-01-01T00:00:00z", None),
        ("1970-01-01T00:00:00", None),
        ("1970-01-01T00:00:00.Z", None),
        ("1970-1-01T00:00:00Z", None),
        ("2000-02-29T00:00:00Z", Some((951_782_400, 0))),
        ("1900-02-29T00:00:00Z", None),
        ("0001-01-01T00:00:00Z", Some((-62_135_596_800, 0))),
        ("9999-12-31T23:59:59Z", Some((253_402_300_799, 0))),
    ] {
        assert_eq!(go_parse_rfc3339(text), want, "{text:?}");
    }
    let c = civil(0);
    assert_eq!((c.year, c.month, c.day, c.yday, c.weekday), (1970, 1, 1, 1, 4));
    let c = civil(-62_135_596_800);
    assert_eq!((c.year, c.month, c.day, c.weekday), (1, 1, 1, 1));
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(duration_field(i64::MAX, Field::Hours), 2_562_047);
    assert_eq!(duration_field(-5_400_000_000_000, Field::Minutes), -90);
}

#[test]
fn costs() {
    let st = |s: &str| Value::string(s);
    let one = Value::Int(1);
    let long = st(&"x".repeat(25));
    let uni = st(&"é".repeat(25));
    // Equality and ordering: ⌈min(size) × 0.1⌉.
    assert_eq!(compare::min_size_cost(&[long.clone(), st(&"x".repeat(11))], &one), 2);
    assert_eq!(compare::min_size_cost(&[long.clone(), one.clone()], &one), 1);
    assert_eq!(compare::min_size_cost(&[st(""), st("")], &one), 0);
    assert_eq!(compare::min_size_cost(&[uni.clone(), uni.clone()], &one), 3);
    assert_eq!(compare::ordering_cost(&[long.clone(), long.clone()], &one), 3);
    assert_eq!(compare::ordering_cost(&[Value::Int(5), Value::Double(5.0)], &one), 1);
    // `in`: a list's size, a map's 1.
    let list = Value::list(vec![Value::Int(1); 7]);
    assert_eq!(compare::in_cost(&[one.clone(), list], &one), 7);
    assert_eq!(compare::in_cost(&[one.clone(), Value::map(Default::default())], &one), 1);
    // `_+_`: strings and bytes ⌈(a + b) × 0.1⌉; lists 1.
    assert_eq!(arith::add_cost(&[long.clone(), long.clone()], &one), 5);
    assert_eq!(arith::add_cost(&[Value::list(vec![]), Value::list(vec![])], &one), 1);
    assert_eq!(arith::add_cost(&[one.clone(), one.clone()], &one), 1);
    // contains: the product; startsWith: the receiver's pass.
    assert_eq!(text::contains_cost(&[long.clone(), st(&"x".repeat(11))], &one), 6);
    assert_eq!(text::contains_cost(&[long.clone(), st("")], &one), 0);
    assert_eq!(text::first_arg_traversal(&[long.clone(), st("x")], &one), 3);
    // matches: ⌈(1 + size) × 0.1⌉ × ⌈size(re) × 0.25⌉.
    assert_eq!(text::matches_cost(&[st(""), st("abcde")], &one), 2);
    assert_eq!(text::matches_cost(&[long.clone(), st("a")], &one), 3);
    // Conversions between strings and bytes: one pass.
    assert_eq!(convert::string_cost(&[Value::Bytes(vec![0u8; 31].into())], &one), 4);
    assert_eq!(convert::string_cost(&[Value::Double(1.0)], &one), 1);
    assert_eq!(convert::bytes_cost(&[uni], &one), 3);
}

#[test]
fn zone_names() {
    let t = jiff::Timestamp::new(1_689_330_645, 0).unwrap();
    for (name, want) in [
        ("Etc/UTC", Some(0)),
        ("GMT", Some(0)),
        ("Zulu", Some(0)),
        ("US/Pacific", Some(-7 * 3600)),
        ("Etc/GMT+5", Some(-5 * 3600)),
        ("EST", Some(-5 * 3600)),
        ("Asia/Kathmandu", Some(20_700)),
        ("utc", None),
        ("America", None),
        ("zone.tab", None),
        ("Local", Some(0)),
    ] {
        assert_eq!(super::time::zone_offset(&t, name).ok(), want, "{name}");
    }
    let err = |name| super::time::zone_offset(&t, name).unwrap_err().message;
    if std::path::Path::new("/usr/share/zoneinfo/America").is_dir() {
        assert_eq!(err("America"), "is a directory");
    }
    if std::path::Path::new("/usr/share/zoneinfo/zone.tab").is_file() {
        assert_eq!(err("zone.tab"), "malformed time zone information");
    }
}
