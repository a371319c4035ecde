//! How Go prints the values structured-merge-diff's errors name (`typed/validate.go`: `%#v`,
//! `%T` and `%v` of an unstructured value; `value.ToString` in path elements).

use serde_json::Value;

/// `%#v` of a `*value.valueUnstructured`.
pub(crate) fn sharp_v(value: &Value) -> String {
    format!("&value.valueUnstructured{{Value:{}}}", go_syntax(value))
}

/// `%T` of the value's Go form.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        // CEL `null` reaches the merge as protobuf's NullValue (`ref.Val.Value()`).
        Value::Null => "structpb.NullValue",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `%v` of a `*value.valueUnstructured`.
pub(crate) fn plain_v(value: &Value) -> String {
    format!("&{{{}}}", plain(value))
}

fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "0".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(interface).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> =
                map.iter().map(|(k, v)| format!("{}:{}", quote(k), interface(v))).collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// An element of an `interface{}` container under `%#v`: its type is written.
fn interface(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        other => go_syntax(other),
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::Null => "NULL_VALUE".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(plain).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            format!(
                "map[{}]",
                map.iter().map(|(k, v)| format!("{k}:{}", plain(v))).collect::<Vec<_>>().join(" ")
            )
        }
    }
}

fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => {
            if f.fract() == 0.0 && f.abs() < 1e21 {
                format!("{f:.0}")
            } else {
                f.to_string()
            }
        }
        _ => n.to_string(),
    }
}

/// Go's `%q` of a string, for the printable text structured-merge-diff meets.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `value.ToString`: how a key's value reads in a path element.
pub(crate) fn to_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::String(s) => quote(s),
        Value::Number(n) => number(n),
        Value::Bool(b) => b.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}
