//! `_==_ _!=_` (cel-go's `types.Equal`: heterogeneous, never an error), `_<_ _<=_ _>_ _>=_`
//! (the `Comparer` implementations: numbers across int, uint and double, NaN refused) and
//! `@in` (`inAggregate`: a list's elements by equality, a map's keys by lookup).

use std::cmp::Ordering;

use super::operator_error;
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Ctx};
use crate::value::{lookup, numeric_cmp, Value};

pub(super) fn equals(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(args[0].equals(&args[1])))
}

pub(super) fn not_equals(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(!args[0].equals(&args[1])))
}

/// `⌈min(size a, size b) × 0.1⌉`: cel-go's cost of `equals`, `not_equals` and of the string and
/// bytes orderings (a scalar's size is 1, so 1).
pub(super) fn min_size_cost(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].cost_size().min(args[1].cost_size()))
}

/// The orderings cost as equality on strings and bytes (`less_string`, …), 1 otherwise.
pub(super) fn ordering_cost(args: &[Value], result: &Value) -> u64 {
    match (&args[0], &args[1]) {
        (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
            min_size_cost(args, result)
        }
        _ => 1,
    }
}

fn nan_error() -> Error {
    Error::new("NaN values cannot be ordered")
}

/// cel-go's `Compare` of `a` with `b`, or its error: NaN on either side of a numeric comparison
/// (a NaN first operand even against a non-number), `no such overload` for a misfit.
pub(crate) fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering> {
    use Value as V;
    match (a, b) {
        (V::Double(d), _) if d.is_nan() => Err(nan_error()),
        (V::Int(_) | V::Uint(_) | V::Double(_), V::Double(d)) if d.is_nan() => Err(nan_error()),
        (V::Int(_) | V::Uint(_) | V::Double(_), V::Int(_) | V::Uint(_) | V::Double(_)) => {
            numeric_cmp(a, b).ok_or_else(nan_error)
        }
        (V::Bool(x), V::Bool(y)) => Ok(x.cmp(y)),
        (V::String(x), V::String(y)) => Ok(x.as_bytes().cmp(y.as_bytes())),
        (V::Bytes(x), V::Bytes(y)) => Ok(x.as_ref().cmp(y.as_ref())),
        (V::Duration(x), V::Duration(y)) => Ok(x.cmp(y)),
        (V::Timestamp(x), V::Timestamp(y)) => Ok(x.cmp(y)),
        (a, _) => {
            let comparer = matches!(
                a,
                V::Bool(_)
                    | V::Int(_)
                    | V::Uint(_)
                    | V::Double(_)
                    | V::String(_)
                    | V::Bytes(_)
                    | V::Duration(_)
                    | V::Timestamp(_)
            );
            Err(operator_error(function, a, comparer))
        }
    }
}

pub(super) fn less(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare("_<_", &args[0], &args[1])? == Ordering::Less))
}

pub(super) fn less_equals(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare("_<=_", &args[0], &args[1])? != Ordering::Greater))
}

pub(super) fn greater(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare("_>_", &args[0], &args[1])? == Ordering::Greater))
}

pub(super) fn greater_equals(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare("_>=_", &args[0], &args[1])? != Ordering::Less))
}

/// `elem in container`.
pub(super) fn in_aggregate(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let elem = &args[0];
    match &args[1] {
        Value::List(items) => Ok(Value::Bool(items.iter().any(|item| elem.equals(item)))),
        Value::Map(map) => Ok(Value::Bool(lookup(map, elem).is_some())),
        _ => Err(Error::no_such_overload()),
    }
}

/// `in_list` costs the list's size; `in_map` 1.
pub(super) fn in_cost(args: &[Value], _: &Value) -> u64 {
    match &args[1] {
        Value::List(items) => items.len() as u64,
        _ => 1,
    }
}
