//! Expected values from k8s.io/apiserver 0.36.4 (kube-apiserver 1.36) itself: each case was
//! evaluated by cel-go with the API server's base environment and `library.CostEstimator`
//! (its result, or error text, and its runtime cost), including upstream's
//! `pkg/cel/library/quantity_test.go` table.

use crate::compile::{compile, Declarations};
use crate::eval::{Limits, Meter};
use crate::value::Value;

/// A value as the tables print it: `true`, `5`, `5u`, `d:<shortest %e>`, `"text"`, `[…]`,
/// `{k: v}` (entries sorted), `optional(…)`, `obj:<type>`.
pub(crate) fn render(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => format!("{u}u"),
        Value::Double(d) => format!("d:{}", go_e(*d)),
        Value::String(s) => format!("\"{s}\""),
        Value::List(items) => format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(", ")),
        Value::Map(map) => {
            let mut entries: Vec<String> =
                map.iter().map(|(k, v)| format!("{}: {}", render(&k.to_value()), render(v))).collect();
            entries.sort();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Optional(Some(v)) => format!("optional({})", render(v)),
        Value::Optional(None) => "optional.none()".into(),
        other => format!("obj:{}", other.type_name()),
    }
}

/// Go's `strconv.FormatFloat(d, 'e', -1, 64)`.
fn go_e(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    // The fewest digits that read back as `d`, rounded to the closest (Go's shortest form;
    // Rust's `{:e}` may end on another digit when two forms are as short).
    let s =
        (0..17).map(|p| format!("{d:.p$e}")).find(|s| s.parse::<f64>() == Ok(d)).unwrap_or(format!("{d:e}"));
    let s = match s.split_once('e') {
        Some((m, e)) if m.contains('.') => format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.')),
        _ => s,
    };
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Evaluates each case with the 1.36 libraries: its rendering (or `err: <text>`) and its cost
/// must be upstream's; `compile` (an expression upstream's type check refuses) must fail.
pub(crate) fn check(cases: &[(&str, &str, u64)]) {
    let registry = crate::library::standard();
    let mut failures = Vec::new();
    let mut skipped = 0;
    for &(source, expected, cost) in cases {
        let program = match compile(source, &Declarations::with_variables(&[]), &registry) {
            Ok(p) => p,
            // A function of a library not registered yet (the standard library's operators,
            // optionals): skipped, and said.
            Err(e) if missing_function(&e).is_some_and(|name| !registry.has_name(name)) => {
                skipped += 1;
                continue;
            }
            Err(e) => {
                if expected != "compile" {
                    failures.push(format!("{source}\n    compile error {e}\n    expected {expected}"));
                }
                continue;
            }
        };
        let mut meter = Meter::new(Limits { cost: 10_000_000, deadline: None });
        let values: Vec<Value> = Vec::new();
        let got = match program.evaluate(&values, &crate::NoHost, &mut meter) {
            Ok(v) => render(&v),
            Err(e) => format!("err: {}", e.message),
        };
        if expected == "compile" {
            if !got.starts_with("err: ") {
                failures.push(format!("{source}\n    got {got}\n    expected a compile error"));
            }
            continue;
        }
        if got != expected {
            failures.push(format!("{source}\n    got      {got}\n    expected {expected}"));
        } else if meter.cost != cost && !got.starts_with("err: ") {
            failures.push(format!("{source}\n    cost {} expected {cost}", meter.cost));
        }
    }
    if skipped > 0 {
        eprintln!("{skipped} of {} cases skipped: a function they call is not registered yet", cases.len());
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The name in a compile error `undeclared reference to 'name'`.
fn missing_function(error: &str) -> Option<&str> {
    let rest = error.split("undeclared reference to '").nth(1)?;
    rest.split('\'').next()
}

#[test]
fn upstream_cases() {
    check(&[
        (r#"quantity("12Mi") == quantity("12582912")"#, r#"true"#, 3),
        (r#"quantity("+") == quantity("0")"#, r#"true"#, 3),
        (r#"quantity(".") == quantity("0")"#, r#"true"#, 3),
        (r#"quantity("e5") == quantity("0")"#, r#"true"#, 3),
        (
            r#"quantity("")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            0,
        ),
        (
            r#"quantity(" 1")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (
            r#"quantity("1 ")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (r#"quantity("1e")"#, r#"err: unable to parse quantity's suffix"#, 1),
        (r#"quantity("10Mm")"#, r#"err: unable to parse quantity's suffix"#, 1),
        (
            r#"quantity("10Mo")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (
            r#"quantity("1.2.3")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (r#"quantity("+-5")"#, r#"err: unable to parse quantity's suffix"#, 1),
        (r#"quantity("--5")"#, r#"err: unable to parse quantity's suffix"#, 1),
        (r#"quantity(".e-10")"#, r#"err: unable to parse numeric part of quantity"#, 1),
        (
            r#"quantity("ñ")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (
            r#"quantity("1Ñ")"#,
            r#"err: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            1,
        ),
        (r#"quantity("1").add(1) == quantity("2")"#, r#"true"#, 4),
        (r#"quantity("1e1000000").isInteger()"#, r#"false"#, 2),
        (r#"quantity("5Ei").asInteger()"#, r#"err: cannot convert value to integer"#, 2),
        (r#"quantity("8Ei").asInteger()"#, r#"err: cannot convert value to integer"#, 2),
        (r#"quantity("8Ei").asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 2),
        (r#"quantity("16Ei").asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 2),
        (r#"quantity("8Ei").isGreaterThan(quantity("9223372036854775807"))"#, r#"false"#, 4),
        (r#"quantity("9223372036854775807").asInteger()"#, r#"err: cannot convert value to integer"#, 3),
        (r#"quantity("9223372036854775807").add(1).isInteger()"#, r#"false"#, 4),
        (r#"quantity("9223372036854775807").add(1).asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 4),
        (r#"quantity("-9223372036854775807").sub(2).compareTo(quantity("-9223372036854775809"))"#, r#"0"#, 6),
        (r#"quantity("0.1n").asApproximateFloat()"#, r#"d:1e-09"#, 2),
        (r#"quantity("-0.1n").asApproximateFloat()"#, r#"d:-1e-09"#, 2),
        (r#"quantity("1e-1000").asApproximateFloat()"#, r#"d:1e-09"#, 2),
        (r#"quantity("1e400").asApproximateFloat()"#, r#"d:+Inf"#, 2),
        (r#"sign(quantity("1Mi"))"#, r#"1"#, 2),
        (r#"sign(quantity("-1Mi"))"#, r#"-1"#, 2),
        (r#"sign(quantity("0"))"#, r#"0"#, 2),
        (r#"sign(quantity("0.0000000001"))"#, r#"1"#, 3),
        (r#"sign(quantity("-0"))"#, r#"0"#, 2),
        (r#"sign(quantity("-1.5n"))"#, r#"-1"#, 2),
        (r#"sign(quantity("-0.0000000000001"))"#, r#"-1"#, 3),
        (r#"isQuantity("1.G")"#, r#"true"#, 1),
        (r#"isQuantity("20")"#, r#"true"#, 1),
        (r#"isQuantity("20M")"#, r#"true"#, 1),
        (r#"isQuantity("20Mi")"#, r#"true"#, 1),
        (r#"isQuantity("20Mo")"#, r#"false"#, 1),
        (r#"isQuantity("10Mm")"#, r#"false"#, 1),
        (r#"isQuantity("")"#, r#"false"#, 0),
        (r#"isQuantity("1e9223372036854775807")"#, r#"true"#, 3),
        (r#"isQuantity("1e9223372036854775808")"#, r#"false"#, 3),
        (r#"quantity("0.5Ki").isInteger()"#, r#"false"#, 2),
        (r#"quantity("0.5Ki").asApproximateFloat()"#, r#"d:5.12e+02"#, 2),
        (r#"quantity("1.0").isInteger()"#, r#"false"#, 2),
        (r#"quantity("0e400").asApproximateFloat()"#, r#"d:NaN"#, 2),
        (r#"quantity("1e300").asApproximateFloat()"#, r#"d:1e+300"#, 2),
        (r#"quantity("1111111111111111111e300").asApproximateFloat()"#, r#"d:+Inf"#, 4),
        (r#"quantity("0e2000000").asInteger()"#, r#"0"#, 2),
        (r#"quantity("1").sub(-9223372036854775808).asInteger()"#, r#"-9223372036854775807"#, 3),
        (r#"quantity("-1").add(-9223372036854775808).isInteger()"#, r#"false"#, 3),
        (
            r#"quantity("-1").add(-9223372036854775808).asApproximateFloat()"#,
            r#"d:-9.223372036854776e+18"#,
            3,
        ),
        (r#"quantity("9223372036854775807Ki").asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 4),
        (r#"quantity("9223372036854775807Ki").compareTo(quantity("8Ei"))"#, r#"0"#, 5),
        (r#"quantity("1.5Ki").asApproximateFloat()"#, r#"d:1.536e+03"#, 2),
        (r#"quantity("0.0000000001").asApproximateFloat()"#, r#"d:1e-09"#, 3),
        (r#"quantity("-0.0000000001").asApproximateFloat()"#, r#"d:-1e-09"#, 3),
        (r#"quantity("-0.0000000000").isInteger()"#, r#"false"#, 3),
        (r#"quantity("1e-5").asApproximateFloat()"#, r#"d:1e-05"#, 2),
        (r#"quantity("1e-5").isInteger()"#, r#"false"#, 2),
        (r#"quantity("123456789012345678").isInteger()"#, r#"true"#, 3),
        (r#"quantity("1234567890123456789").isInteger()"#, r#"false"#, 3),
        (r#"quantity("1234567890123456789").asApproximateFloat()"#, r#"d:1.234567890123457e+18"#, 3),
        (r#"quantity("9223372036854775808").asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 3),
        (r#"quantity("1e9223372036854775808").isInteger()"#, r#"err: unable to parse quantity's suffix"#, 4),
        (r#"quantity("1.").isInteger()"#, r#"true"#, 2),
        (r#"quantity("1.e3").asInteger()"#, r#"1000"#, 2),
        (r#"quantity("1E3").asInteger()"#, r#"1000"#, 2),
        (r#"quantity("1E").asInteger()"#, r#"1000000000000000000"#, 2),
        (r#"quantity("1e+3").asInteger()"#, r#"1000"#, 2),
        (r#"quantity("1e-3").asApproximateFloat()"#, r#"d:1e-03"#, 2),
        (r#"quantity("1n").asApproximateFloat()"#, r#"d:1e-09"#, 2),
        (r#"quantity("1u").asApproximateFloat()"#, r#"d:1e-06"#, 2),
        (r#"quantity("1m").asApproximateFloat()"#, r#"d:1e-03"#, 2),
        (r#"quantity("1Ei").asInteger()"#, r#"err: cannot convert value to integer"#, 2),
        (r#"quantity("1Pi").asInteger()"#, r#"err: cannot convert value to integer"#, 2),
        (r#"quantity("1Ti").asInteger()"#, r#"1099511627776"#, 2),
        (r#"quantity("1P").asInteger()"#, r#"1000000000000000"#, 2),
        (r#"quantity("1T").asInteger()"#, r#"1000000000000"#, 2),
        (r#"quantity("1G").asInteger()"#, r#"1000000000"#, 2),
        (r#"quantity("1M").asInteger()"#, r#"1000000"#, 2),
        (r#"quantity("1-").isInteger()"#, r#"err: unable to parse quantity's suffix"#, 2),
        (r#"quantity("1i").isInteger()"#, r#"err: unable to parse quantity's suffix"#, 2),
        (r#"quantity("1k").asInteger()"#, r#"1000"#, 2),
        (r#"quantity("1K").asInteger()"#, r#"err: unable to parse quantity's suffix"#, 2),
        (r#"quantity("1Ki").asInteger()"#, r#"1024"#, 2),
        (r#"quantity("1Mi").asInteger()"#, r#"1048576"#, 2),
        (r#"quantity("1Gi").asInteger()"#, r#"1073741824"#, 2),
        (r#"quantity("1.5n").asApproximateFloat()"#, r#"d:2e-09"#, 2),
        (r#"quantity("-1.5n").asApproximateFloat()"#, r#"d:-2e-09"#, 2),
        (
            r#"quantity("10000000000000000000000000000000.5").asApproximateFloat()"#,
            r#"d:1.0000000000000001e+31"#,
            5,
        ),
        (
            r#"quantity("100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000").asApproximateFloat()"#,
            r#"d:1e+296"#,
            31,
        ),
        (r#"quantity("1e2147483647").asApproximateFloat()"#, r#"d:+Inf"#, 3),
        (r#"quantity("200M") == quantity("200M")"#, r#"true"#, 3),
        (r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#, r#"true"#, 6),
        (
            r#"quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")"#,
            r#"true"#,
            9,
        ),
        (r#"quantity("200M") == quantity("0.3G")"#, r#"false"#, 3),
        (r#"quantity("1") == quantity("1000m")"#, r#"true"#, 3),
        (r#"quantity("50M").isLessThan(quantity("50Mi"))"#, r#"true"#, 3),
        (r#"quantity("50M").isLessThan(quantity("100M"))"#, r#"true"#, 3),
        (r#"quantity("100M").isLessThan(quantity("50M"))"#, r#"false"#, 3),
        (r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#, r#"true"#, 3),
        (r#"quantity("150Mi").isGreaterThan(quantity("100Mi"))"#, r#"true"#, 3),
        (r#"quantity("50M").isGreaterThan(quantity("100M"))"#, r#"false"#, 3),
        (r#"quantity("200M").compareTo(quantity("0.2G"))"#, r#"0"#, 3),
        (r#"quantity("50M").compareTo(quantity("50Mi"))"#, r#"-1"#, 3),
        (r#"quantity("50Mi").compareTo(quantity("50M"))"#, r#"1"#, 3),
        (r#"quantity("-50Mi").compareTo(quantity("-50M"))"#, r#"-1"#, 3),
        (r#"quantity("-1e-10").compareTo(quantity("-2e-10"))"#, r#"0"#, 3),
        (r#"quantity("1e-10").compareTo(quantity("2e-10"))"#, r#"0"#, 3),
        (r#"quantity("1e-10").compareTo(quantity("1n"))"#, r#"0"#, 3),
        (r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#, r#"true"#, 5),
        (r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#, r#"false"#, 4),
        (r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#, r#"true"#, 5),
        (r#"quantity("50k").sub(20) == quantity("49980")"#, r#"true"#, 4),
        (r#"quantity("50k").add(20).sub(quantity("100k")).asInteger()"#, r#"-49980"#, 5),
        (r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()"#, r#"20"#, 6),
        (r#"quantity("50k").asInteger()"#, r#"50000"#, 2),
        (
            r#"quantity("9999999999999999999999999999999999999G").asInteger()"#,
            r#"err: cannot convert value to integer"#,
            5,
        ),
        (r#"quantity("9999999999999999999999999999999999999G").isInteger()"#, r#"false"#, 5),
        (
            r#"quantity("9999999999999999999999999999999999999G").asApproximateFloat()"#,
            r#"d:1.0000000000000001e+46"#,
            5,
        ),
        (r#"quantity("50").isInteger()"#, r#"true"#, 2),
        (r#"quantity("50.703k").asApproximateFloat()"#, r#"d:5.0703e+04"#, 2),
        (
            r#"[quantity("9999999999999999999999999999999999999")].all(x, x.add(quantity("1")).compareTo(x.add(quantity("2"))) == -1)"#,
            r#"false"#,
            26,
        ),
        (
            r#"[quantity("1")].map(x, [x.isInteger(), x.compareTo(quantity("0.5Ki")) == -1, x.isInteger()])"#,
            r#"[[true, true, false]]"#,
            42,
        ),
        (
            r#"[quantity("1")].map(x, [x.isInteger(), quantity("0.5Ki").compareTo(x) == 1, x.isInteger()])"#,
            r#"[[true, true, true]]"#,
            42,
        ),
        (
            r#"[quantity("1")].map(x, [x.isInteger(), x == quantity("0.5Ki"), x.isInteger()])"#,
            r#"[[true, false, true]]"#,
            41,
        ),
        (
            r#"[quantity("1")].map(x, [x.isInteger(), x.isLessThan(quantity("1e-10")), x.isInteger()])"#,
            r#"[[true, false, false]]"#,
            41,
        ),
        (
            r#"[quantity("1")].map(x, [x.isInteger(), x.isGreaterThan(quantity("1")), x.isInteger()])"#,
            r#"[[true, false, true]]"#,
            41,
        ),
        (r#"quantity("1e-10").add(quantity("1")).asApproximateFloat()"#, r#"d:1.000000001e+00"#, 4),
        (r#"quantity("1e-10").sub(quantity("1e-10")).isInteger()"#, r#"false"#, 4),
        (r#"sign(quantity("1e-10").sub(quantity("1e-10")))"#, r#"0"#, 4),
        (r#"quantity("0").add(quantity("1e-10")).asApproximateFloat()"#, r#"d:1e-09"#, 4),
        (r#"quantity("1k").add(quantity("1m")).asApproximateFloat()"#, r#"d:1.000001e+03"#, 4),
        (r#"quantity("1k").sub(quantity("1m")).asInteger()"#, r#"err: cannot convert value to integer"#, 4),
        (r#"quantity("1m").add(quantity("999m")).asInteger()"#, r#"err: cannot convert value to integer"#, 4),
        (r#"quantity("1m").add(quantity("999m")).asApproximateFloat()"#, r#"d:1e+00"#, 4),
        (r#"quantity("1e18").add(quantity("1e18")).asApproximateFloat()"#, r#"d:2e+18"#, 4),
        (r#"quantity("1e18").add(quantity("1e18")).isInteger()"#, r#"true"#, 4),
        (r#"quantity("1e2147483647").add(quantity("1n")).asApproximateFloat()"#, r#"d:2e-09"#, 5),
        (r#"quantity("1.5").sub(quantity("1.5")).isInteger()"#, r#"false"#, 4),
        (r#"quantity("1").sub(quantity("1")).isInteger()"#, r#"true"#, 4),
        (r#"quantity("12345678901234567.89").asApproximateFloat()"#, r#"d:1.234567890123457e+16"#, 3),
        (r#"quantity("0.000000000123456789123456789").asApproximateFloat()"#, r#"d:1e-09"#, 4),
        (r#"quantity("-0.000000000123456789123456789").asApproximateFloat()"#, r#"d:-1e-09"#, 4),
        (
            r#"quantity("123456789123456789123456789123456789").asApproximateFloat()"#,
            r#"d:1.234567891234568e+35"#,
            5,
        ),
        (r#"quantity("0.5").asApproximateFloat()"#, r#"d:5e-01"#, 2),
        (r#"quantity("1.5Gi").asApproximateFloat()"#, r#"d:1.610612736e+09"#, 2),
        (r#"quantity("-1.5Gi").asApproximateFloat()"#, r#"d:-1.610612736e+09"#, 2),
        (r#"quantity("-0.5Ki").asApproximateFloat()"#, r#"d:-5.12e+02"#, 2),
        (r#"quantity("0.0000000000001Ki").asApproximateFloat()"#, r#"d:1e-09"#, 3),
        (r#"quantity("100000000000000000000Ki").asApproximateFloat()"#, r#"d:9.223372036854776e+18"#, 4),
        (r#"quantity("-100000000000000000000Ki").asApproximateFloat()"#, r#"d:-9.223372036854776e+18"#, 4),
        (r#"quantity("1e3").add(quantity("1k")).asInteger()"#, r#"2000"#, 4),
        (r#"quantity("1").sub(0) == quantity("1")"#, r#"true"#, 4),
        (
            r#"[quantity("0.5Ki")].map(x, x.add(quantity("2")).sub(x).asApproximateFloat())"#,
            r#"[d:0e+00]"#,
            30,
        ),
        (r#"[quantity("0.5Ki")].map(x, x.sub(x).asApproximateFloat())"#, r#"[d:0e+00]"#, 28),
        (r#"[quantity("0.5Ki")].map(x, x.add(x).asApproximateFloat())"#, r#"[d:1.024e+03]"#, 28),
        (
            r#"[quantity("0.5Ki")].map(x, [x.add(quantity("1")).asApproximateFloat(), x.add(quantity("1")).asApproximateFloat(), x.asApproximateFloat()])"#,
            r#"[[d:5.13e+02, d:5.14e+02, d:5.14e+02]]"#,
            44,
        ),
        (
            r#"[quantity("5")].map(x, [x.add(quantity("0.5Ki")).asApproximateFloat(), x.add(quantity("0.5Ki")).asApproximateFloat(), x.asApproximateFloat()])"#,
            r#"[[d:5.17e+02, d:5.17e+02, d:5e+00]]"#,
            44,
        ),
        (
            r#"[quantity("5")].map(x, [x.add(9223372036854775807).asApproximateFloat(), x.add(1).asApproximateFloat(), x.asApproximateFloat()])"#,
            r#"[[d:9.223372036854776e+18, d:6e+00, d:5e+00]]"#,
            42,
        ),
        (
            r#"[quantity("5")].map(x, [x.add(9223372036854775807).add(1).asApproximateFloat(), x.asApproximateFloat()])"#,
            r#"[[d:9.223372036854776e+18, d:5e+00]]"#,
            40,
        ),
        (
            r#"[quantity("0.5Ki")].map(x, [x.add(1).add(1).asApproximateFloat(), x.asApproximateFloat()])"#,
            r#"[[d:5.14e+02, d:5.14e+02]]"#,
            40,
        ),
        (
            r#"quantity("0.5Ki").sub(quantity("1")).sub(quantity("1")).asApproximateFloat()"#,
            r#"d:5.1000000000000006e+02"#,
            6,
        ),
        (r#"[quantity("0.5Ki")].map(x, x.add(quantity("1")) == x)"#, r#"[true]"#, 29),
        (
            r#"[quantity("1")].map(x, x.add(quantity("1")).add(quantity("1")) == quantity("3"))"#,
            r#"[true]"#,
            31,
        ),
        (r#"quantity("5").isGreaterThan(5)"#, r#"compile"#, 0),
        (r#"quantity("5").add(5.0)"#, r#"compile"#, 0),
        // int64 forms whose scales differ past int32: upstream's division by zero, recovered.
        (
            r#"quantity("1e2147483647").compareTo(quantity("1n"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (
            r#"quantity("1n").compareTo(quantity("1e2147483647"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (
            r#"quantity("1e2147483647").compareTo(quantity("1e-9"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (
            r#"quantity("5e2147483640").compareTo(quantity("3e-9"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (
            r#"quantity("-5e2147483640").compareTo(quantity("3e-9"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (
            r#"quantity("5e2147483640").compareTo(quantity("-3e-9"))"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
        (r#"quantity("1e2147483647").isGreaterThan(quantity("1e2147483646"))"#, r#"true"#, 5),
        (r#"quantity("1e30").compareTo(quantity("1e29"))"#, r#"1"#, 3),
        (r#"quantity("10e29").compareTo(quantity("1e30"))"#, r#"0"#, 3),
        (r#"quantity("7e40").compareTo(quantity("7e-5"))"#, r#"1"#, 3),
        (r#"quantity("1e-9").compareTo(quantity("1e18"))"#, r#"-1"#, 3),
        (r#"quantity("123e100").compareTo(quantity("1230e99"))"#, r#"0"#, 3),
        (r#"quantity("1e2147483647").sub(quantity("1n")).asApproximateFloat()"#, r#"d:0e+00"#, 5),
        (r#"quantity("1e-5").add(quantity("1e2147483647")).asApproximateFloat()"#, r#"d:2e-05"#, 5),
    ]);
}

/// Upstream's `Quantity.Equal` takes only the value form on its right: a quantity made by
/// `add` or `sub` (a `*Quantity`) there is `no such overload`. `Object::equals` answers a bool,
/// so the evaluator's `_==_` cannot say this yet (`Quantity::from_arithmetic` tells the case).
#[test]
#[ignore = "needs a fallible Object equality in value.rs"]
fn equality_with_an_arithmetic_result_on_the_right() {
    check(&[
        (r#"quantity("2") == quantity("1").add(1)"#, r#"err: no such overload"#, 4),
        (r#"quantity("1") == quantity("1").add(0)"#, r#"err: no such overload"#, 4),
        (r#"quantity("1").add(1) == quantity("2")"#, r#"true"#, 4),
        // `Equal` through `Cmp`'s division by zero.
        (
            r#"quantity("1e2147483647") == quantity("1n")"#,
            r#"err: internal error: runtime error: integer divide by zero"#,
            3,
        ),
    ]);
}

#[test]
fn parse_forms() {
    use super::amount::{parse, Amount, ERR_TOO_LARGE};
    let int = |s: &str| match parse(s) {
        Ok(Amount::Int { value, scale }) => Some((value, scale)),
        _ => None,
    };
    assert_eq!(int("12Mi"), Some((12 << 20, 0)));
    assert_eq!(int("1.5"), Some((15, -1)));
    assert_eq!(int("0.001"), Some((1, -3)));
    assert_eq!(int("-7k"), Some((-7, 3)));
    assert_eq!(int("1e300"), Some((1, 300)));
    assert!(matches!(parse("0.5Ki"), Ok(Amount::Dec(_))));
    assert!(matches!(parse("1e-10"), Ok(Amount::Dec(_))));
    // Past what we compute (upstream spends minutes and gigabytes there).
    assert_eq!(parse("1111111111111111111e2000000000").err(), Some(ERR_TOO_LARGE));
    assert!(parse("1e-2147483647").is_ok());
}
