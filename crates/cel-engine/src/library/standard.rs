//! cel-go's standard library as kube-apiserver 1.36 runs it (cel-go v0.26.0,
//! `common/stdlib/standard.go` and the `common/types` values behind it), operators included:
//!
//! - arithmetic (`_+_ _-_ _*_ _/_ _%_ -_`) with cel-go's overflow checks and texts
//!   ([`arith`]);
//! - equality (heterogeneous, numbers across types), ordering (numbers across types, as
//!   `CrossTypeNumericComparisons` allows), `@in` ([`compare`]);
//! - `size`, `contains`, `startsWith`, `endsWith`, `matches` ([`text`]);
//! - the type conversions `int uint double string bytes bool dyn type duration timestamp`,
//!   with Go's parsers and formatters ([`convert`]);
//! - the timestamp and duration accessors, time zones included ([`time`]).
//!
//! Errors are worded as cel-go words them. Where an operator's first operand lacks the trait
//! the operator needs (`[1] * 2`), cel-go answers `no such overload: _*_`; where it has the
//! trait but the other operand does not fit (`1 + 1.0`), or it is a "receiver" type
//! (string, duration, timestamp), `no such overload`. A conversion or accessor given a value it
//! has no overload for answers `no such overload: int(list)` (cel-go's
//! `decls.MaybeNoSuchOverload`).
//!
//! Costs are cel-go's `CostTracker.costCall` defaults (k8s' `CostEstimator` handles none of
//! these functions), charged as if the checker resolved the call to one overload; see
//! [`crate::func::Cost`].

mod arith;
mod compare;
mod convert;
#[cfg(test)]
mod tests;
mod text;
mod time;

use crate::error::Error;
use crate::func::{Cost, Registry};
use crate::value::Value;

// Go's parsers and formatters, for the checker's folding of constants.
#[allow(unused_imports)]
pub(crate) use convert::{go_format_float, go_parse_float};
#[allow(unused_imports)]
pub(crate) use time::{duration_string, go_parse_duration, go_parse_rfc3339, timestamp_string};

pub(super) fn register(registry: &mut Registry) {
    // Arithmetic.
    registry.global("_+_", 2, arith::add, Cost::Of(arith::add_cost));
    registry.global("_-_", 2, arith::subtract, Cost::Fixed(1));
    registry.global("_*_", 2, arith::multiply, Cost::Fixed(1));
    registry.global("_/_", 2, arith::divide, Cost::Fixed(1));
    registry.global("_%_", 2, arith::modulo, Cost::Fixed(1));
    registry.global("-_", 1, arith::negate, Cost::Fixed(1));
    // Equality and ordering.
    registry.global("_==_", 2, compare::equals, Cost::Of(compare::min_size_cost));
    registry.global("_!=_", 2, compare::not_equals, Cost::Of(compare::min_size_cost));
    registry.global("_<_", 2, compare::less, Cost::Of(compare::ordering_cost));
    registry.global("_<=_", 2, compare::less_equals, Cost::Of(compare::ordering_cost));
    registry.global("_>_", 2, compare::greater, Cost::Of(compare::ordering_cost));
    registry.global("_>=_", 2, compare::greater_equals, Cost::Of(compare::ordering_cost));
    registry.global("@in", 2, compare::in_aggregate, Cost::Of(compare::in_cost));
    // Strings and sizes.
    registry.global("size", 1, text::size, Cost::Fixed(1));
    registry.method("size", 0, text::size, Cost::Fixed(1));
    registry.method("contains", 1, text::contains, Cost::Of(text::contains_cost));
    registry.method("startsWith", 1, text::starts_with, Cost::Of(text::first_arg_traversal));
    registry.method("endsWith", 1, text::ends_with, Cost::Of(text::first_arg_traversal));
    // The global `matches` is overload `matches`, which cel-go's cost table does not list (1);
    // the member one is `matches_string`.
    registry.global("matches", 2, text::matches, Cost::Fixed(1));
    registry.method("matches", 1, text::matches, Cost::Of(text::matches_cost));
    // Conversions.
    registry.global("int", 1, convert::to_int, Cost::Fixed(1));
    registry.global("uint", 1, convert::to_uint, Cost::Fixed(1));
    registry.global("double", 1, convert::to_double, Cost::Fixed(1));
    registry.global("string", 1, convert::to_string, Cost::Of(convert::string_cost));
    registry.global("bytes", 1, convert::to_bytes, Cost::Of(convert::bytes_cost));
    registry.global("bool", 1, convert::to_bool, Cost::Fixed(1));
    registry.global("dyn", 1, convert::dyn_, Cost::Fixed(1));
    registry.global("type", 1, convert::type_of, Cost::Fixed(1));
    registry.global("duration", 1, convert::to_duration, Cost::Fixed(1));
    registry.global("timestamp", 1, convert::to_timestamp, Cost::Fixed(1));
    // Timestamp and duration accessors.
    time::register(registry);
}

/// cel-go's `decls.MaybeNoSuchOverload`: `no such overload: fn(type, …)`, the runtime type
/// names of the arguments (the receiver first).
pub(crate) fn overload_error(function: &str, args: &[Value]) -> Error {
    let types: Vec<&str> = args.iter().map(Value::type_name).collect();
    Error::new(format!("no such overload: {function}({})", types.join(", ")))
}

/// The receiver types of cel-go (`traits.ReceiverType`): a call they lack the trait for is sent
/// to their `Receive`, which answers `no such overload`.
fn is_receiver(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Duration(_) | Value::Timestamp(_))
}

/// The error of an operator (a singleton binding guarded by a trait) that cannot take its
/// operands: `no such overload` when the first operand has the trait (the other operand is the
/// misfit) or is a receiver type, `no such overload: <fn>` otherwise (cel-go's `evalUnary`,
/// `evalBinary`).
fn operator_error(function: &str, first: &Value, has_trait: bool) -> Error {
    if has_trait || is_receiver(first) {
        Error::no_such_overload()
    } else {
        Error::new(format!("no such overload: {function}"))
    }
}
