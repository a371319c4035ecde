//! cel-go's optional library (`cel/library.go` `optionalLib`, all versions, as
//! `cel.OptionalTypes()` enables it): `optional.of`, `optional.ofNonZeroValue`,
//! `optional.none`, `hasValue`, `value`, and (version 2) `optional.unwrap` / `unwrapOpt`.
//! `or`, `orValue`, `optMap` and `optFlatMap` are the evaluator's (lazy); `first` and `last`
//! are with the lists. Each costs 1 (cel-go's default: neither the cost table nor k8s'
//! estimator lists them).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry};
use crate::library::standard::{go_format_float, overload_error};
use crate::value::Value;

pub(super) fn register(registry: &mut Registry) {
    registry.global("optional.of", 1, of, Cost::Fixed(1));
    registry.global("optional.ofNonZeroValue", 1, of_non_zero_value, Cost::Fixed(1));
    registry.global("optional.none", 0, none, Cost::Fixed(1));
    registry.method("hasValue", 0, has_value, Cost::Fixed(1));
    registry.method("value", 0, value, Cost::Fixed(1));
    registry.global("optional.unwrap", 1, unwrap, Cost::Fixed(1));
    registry.method("unwrapOpt", 0, unwrap_opt, Cost::Fixed(1));
}

fn of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Optional(Some(Arc::new(args[0].clone()))))
}

fn none(_: &mut Ctx<'_>, _: &[Value]) -> Result<Value> {
    Ok(Value::Optional(None))
}

fn of_non_zero_value(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    if is_zero_value(&args[0]) {
        Ok(Value::Optional(None))
    } else {
        of_value(args[0].clone())
    }
}

fn of_value(v: Value) -> Result<Value> {
    Ok(Value::Optional(Some(Arc::new(v))))
}

/// cel-go's `traits.Zeroer`: false, 0, 0u, 0.0 (and -0.0), "", b"", [], {}, null, a zero
/// duration, Go's zero time (0001-01-01T00:00:00Z). Types, optionals and the library types
/// have no zero value; an object answers for itself ([`crate::value::Object::is_zero`]: an
/// `Object{}` without fields is zero).
pub(crate) fn is_zero_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => *d == 0,
        Value::Timestamp(t) => t.as_nanosecond() == -62_135_596_800_000_000_000,
        Value::Object(o) => o.is_zero(),
        Value::Type(_) | Value::Optional(_) => false,
    }
}

fn has_value(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    match &args[0] {
        Value::Optional(o) => Ok(Value::Bool(o.is_some())),
        _ => Err(overload_error("hasValue", args)),
    }
}

fn value(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    match &args[0] {
        Value::Optional(Some(v)) => Ok((**v).clone()),
        Value::Optional(None) => Err(Error::new("optional.none() dereference")),
        _ => Err(overload_error("value", args)),
    }
}

fn unwrap(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    unwrap_list(args, "optional.unwrap")
}

fn unwrap_opt(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    unwrap_list(args, "unwrapOpt")
}

/// cel-go's `optUnwrap`: the values of the optionals that have one; an element that is not an
/// optional is an error naming it (`value 1 is not optional`).
fn unwrap_list(args: &[Value], name: &str) -> Result<Value> {
    let Value::List(items) = &args[0] else { return Err(overload_error(name, args)) };
    let mut out = Vec::with_capacity(items.len());
    for item in items.iter() {
        match item {
            Value::Optional(Some(v)) => out.push((**v).clone()),
            Value::Optional(None) => {}
            other => return Err(Error::new(format!("value {} is not optional", go_v(other)))),
        }
    }
    Ok(Value::list(out))
}

/// Go's `%v` of a cel-go value, for the one error text that holds a value.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "0".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => go_format_float(*d),
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => format!("{:?}", b.as_ref()).replace(',', ""),
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(go_v).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Type(t) => t.name().to_string(),
        other => other.type_name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate_str;

    fn eval(src: &str) -> std::result::Result<Value, String> {
        evaluate_str(src, &[])
    }

    #[test]
    fn expressions() {
        let cases: &[(&str, std::result::Result<Value, &str>)] = &[
            ("optional.none() == optional.none()", Ok(Value::Bool(true))),
            ("optional.of(1) == optional.of(1)", Ok(Value::Bool(true))),
            ("optional.of(1) == optional.of(1.0)", Ok(Value::Bool(true))),
            ("optional.of(1) == optional.none()", Ok(Value::Bool(false))),
            ("optional.none() != optional.of(1)", Ok(Value::Bool(true))),
            ("optional.of(1).hasValue()", Ok(Value::Bool(true))),
            ("optional.none().hasValue()", Ok(Value::Bool(false))),
            ("optional.of('a').value()", Ok(Value::string("a"))),
            ("optional.none().value()", Err("optional.none() dereference")),
            ("optional.of(null).hasValue()", Ok(Value::Bool(true))),
            ("optional.ofNonZeroValue(0).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(0u).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(0.0).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(-0.0).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue('').hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(b'').hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue([]).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue({}).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(null).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(false).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(duration('0s')).hasValue()", Ok(Value::Bool(false))),
            ("optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()", Ok(Value::Bool(false))),
            (
                "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00.1Z')).hasValue()",
                Ok(Value::Bool(true)),
            ),
            ("optional.ofNonZeroValue(1).value()", Ok(Value::Int(1))),
            ("optional.ofNonZeroValue('hello').value()", Ok(Value::string("hello"))),
            ("optional.ofNonZeroValue([0]).hasValue()", Ok(Value::Bool(true))),
            ("optional.ofNonZeroValue(optional.none()).hasValue()", Ok(Value::Bool(true))),
            ("optional.ofNonZeroValue(int).hasValue()", Ok(Value::Bool(true))),
            (
                "optional.unwrap([optional.of(1), optional.none(), optional.of(3)])",
                Ok(Value::list(vec![Value::Int(1), Value::Int(3)])),
            ),
            ("[optional.none(), optional.of('a')].unwrapOpt()", Ok(Value::list(vec![Value::string("a")]))),
            ("optional.unwrap([])", Ok(Value::list(vec![]))),
            ("optional.unwrap([dyn(1)])", Err("value 1 is not optional")),
            ("[optional.of(1), dyn('x')].unwrapOpt()", Err("value x is not optional")),
            ("dyn(1).hasValue()", Err("no such overload: hasValue(int)")),
            ("dyn('a').value()", Err("no such overload: value(string)")),
            ("optional.unwrap(dyn(1))", Err("no such overload: optional.unwrap(int)")),
            ("type(optional.none()) == optional_type", Ok(Value::Bool(true))),
        ];
        for (src, want) in cases {
            let got = eval(src);
            match want {
                Ok(v) => assert_eq!(got.as_ref(), Ok(v), "{src}"),
                Err(e) => assert_eq!(got.as_ref().map_err(String::as_str), Err(*e), "{src}"),
            }
        }
    }

    #[test]
    fn zero_values() {
        assert!(is_zero_value(&Value::Null));
        assert!(!is_zero_value(&Value::Double(f64::NAN)));
        assert!(is_zero_value(&Value::Timestamp(jiff::Timestamp::new(-62_135_596_800, 0).unwrap())));
        assert!(!is_zero_value(&Value::Timestamp(jiff::Timestamp::UNIX_EPOCH)));
        assert_eq!(go_v(&Value::Double(1.5)), "1.5");
        assert_eq!(go_v(&Value::list(vec![Value::Int(1), Value::string("a")])), "[1, a]");
    }
}
