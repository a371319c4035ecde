//! `size` (cel-go's `Sizer`: a string's code points, bytes, entries), `contains`,
//! `startsWith`, `endsWith` (`types.StringContains` and kin, type guards disabled) and
//! `matches` (`String.Match`: Go's `regexp.MatchString`, unanchored).

use super::operator_error;
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Ctx, STRING_TRAVERSAL_FACTOR};
use crate::value::Value;

/// cel-go `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH_FACTOR: f64 = 0.25;

/// `size(x)` and `x.size()`.
pub(super) fn size(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let n = match &args[0] {
        Value::String(s) => s.chars().count(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        other => return Err(operator_error("size", other, false)),
    };
    Ok(Value::Int(n as i64))
}

fn strings(args: &[Value]) -> Result<(&str, &str)> {
    match (&args[0], &args[1]) {
        (Value::String(a), Value::String(b)) => Ok((a, b)),
        _ => Err(Error::no_such_overload()),
    }
}

pub(super) fn contains(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, sub) = strings(args)?;
    Ok(Value::Bool(s.contains(sub)))
}

pub(super) fn starts_with(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, prefix) = strings(args)?;
    Ok(Value::Bool(s.starts_with(prefix)))
}

pub(super) fn ends_with(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, suffix) = strings(args)?;
    Ok(Value::Bool(s.ends_with(suffix)))
}

/// `contains_string`: `⌈size(s) × 0.1⌉ × ⌈size(sub) × 0.1⌉`.
pub(super) fn contains_cost(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].cost_size()).wrapping_mul(traversal_cost(args[1].cost_size()))
}

/// `starts_with_string`, `ends_with_string`, `string_to_bytes`, `bytes_to_string`:
/// `⌈size(arg0) × 0.1⌉`.
pub(super) fn first_arg_traversal(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].cost_size())
}

/// `matches(s, re)` and `s.matches(re)`.
pub(super) fn matches(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    match (&args[0], &args[1]) {
        (Value::String(s), Value::String(pattern)) => {
            let re = crate::library::regex::compile(pattern).map_err(Error::new)?;
            Ok(Value::Bool(re.is_match(s)))
        }
        (a @ Value::String(_), _) => Err(operator_error("matches", a, true)),
        (a, _) => Err(operator_error("matches", a, false)),
    }
}

/// `matches_string`: `⌈(1 + size(s)) × 0.1⌉ × ⌈size(re) × 0.25⌉`.
pub(super) fn matches_cost(args: &[Value], _: &Value) -> u64 {
    let str_cost = ((1.0 + args[0].cost_size() as f64) * STRING_TRAVERSAL_FACTOR).ceil() as u64;
    let regex_cost = (args[1].cost_size() as f64 * REGEX_LENGTH_FACTOR).ceil() as u64;
    str_cost.wrapping_mul(regex_cost)
}
