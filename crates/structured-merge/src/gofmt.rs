//! Go's `fmt` texts of the values structured-merge-diff puts in its messages, and the Go kind
//! of a JSON value as `value.valueUnstructured` sees it.

use serde_json::{Map, Number, Value};

/// What a JSON value is to structured-merge-diff. In an apply configuration JSON `null` stands
/// for CEL's null, which reaches SMD as `structpb.NullValue` (`types.Null.Value()`): not null to
/// SMD, and no scalar, list or map either. In the live object it is Go's nil.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Nil,
    NullValue,
    Float,
    Int,
    Str,
    Bool,
    List,
    Map,
}

pub(crate) fn kind(v: &Value, config: bool) -> Kind {
    match v {
        Value::Null if config => Kind::NullValue,
        Value::Null => Kind::Nil,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        Value::String(_) => Kind::Str,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Map,
    }
}

/// `%q` of a string (strconv.Quote).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `%v` of a float64: strconv's 'g' with the shortest precision, which takes the exponent
/// form when the decimal exponent is below -4 or at least 6 (`internal/strconv/ftoa.go`).
pub(crate) fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Shortest digits and decimal exponent from Rust's `{:e}` ("1.2345e6").
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

fn number(n: &Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) if !n.is_f64() => i.to_string(),
        (_, Some(u), _) if !n.is_f64() => u.to_string(),
        (_, _, Some(f)) => float(f),
        _ => n.to_string(),
    }
}

fn sorted(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut kv: Vec<_> = m.iter().collect();
    kv.sort_by(|a, b| a.0.cmp(b.0));
    kv
}

/// `%v` of the Go value (`&{…}` around it is the caller's).
pub(crate) fn plain(v: &Value, config: bool) -> String {
    match v {
        Value::Null if config => "NULL_VALUE".into(),
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => {
            let items: Vec<_> = a.iter().map(|x| plain(x, config)).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(m) => {
            let items: Vec<_> =
                sorted(m).into_iter().map(|(k, x)| format!("{k}:{}", plain(x, config))).collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// `%#v` of the Go value held in an `interface{}`.
pub(crate) fn sharp(v: &Value, config: bool, top: bool) -> String {
    match v {
        Value::Null if config => "0".into(),
        Value::Null if top => "<nil>".into(),
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(a) => {
            let items: Vec<_> = a.iter().map(|x| sharp(x, config, false)).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<_> = sorted(m)
                .into_iter()
                .map(|(k, x)| format!("{}:{}", quote(k), sharp(x, config, false)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
    }
}

/// `%T` of the Go value.
pub(crate) fn type_name(v: &Value, config: bool) -> &'static str {
    match v {
        Value::Null if config => "structpb.NullValue",
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(n) if n.is_u64() && n.as_i64().is_none() => "uint64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `value.ToString` (fieldpath's texts of key values).
pub(crate) fn smd_string(v: &Value, config: bool) -> String {
    match v {
        Value::Null if config => "{{undefined}}".into(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(a) => {
            let items: Vec<_> = a.iter().map(|x| smd_string(x, config)).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(m) => {
            sorted(m).into_iter().map(|(k, x)| format!("{k}={}", smd_string(x, config))).collect()
        }
    }
}

/// encoding/json's name of a JSON value's kind in its errors (`cannot unmarshal number into …`).
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
