//! List functions of the 1.36 environment:
//!
//! - k8s.io/apiserver `pkg/cel/library/lists.go` (unversioned in 1.36): `isSorted`, `sum`,
//!   `min`, `max`, `indexOf`, `lastIndexOf`, each costing k8s `traversalCost` of the list.
//! - cel-go `ext/lists.go` at `ListsVersion(3)`: `slice`, `flatten`, `lists.range`, `reverse`,
//!   `distinct`, `sort` (`sortBy` is the evaluator's), charged by the library's own cost
//!   trackers (they come before k8s' estimator in cel-go's `costCall`).
//! - cel-go's optional library (version 2): `first`, `last` (cost 1).
//!
//! cel-go dispatches a call on `list(int)` by the list's first element (its runtime type
//! guard); the same here: an overload answers `no_match` when the first element is not of a
//! type it takes, so the dispatcher's `no such overload` follows.

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry, STRING_TRAVERSAL_FACTOR};
use crate::value::{Key, Value};

mod gosort;
#[cfg(test)]
mod tests;

/// cel-go `common.ListCreateBaseCost`.
const LIST_CREATE_BASE_COST: u64 = 10;
/// cel-go ext `callCost`.
const CALL_COST: u64 = 1;
/// cel-go ext lists' `defaultMaxRangeSize`.
const MAX_RANGE_SIZE: i64 = 1_000_000;

pub(super) fn register(registry: &mut Registry) {
    // k8s lists (after strings' `indexOf`/`lastIndexOf`, which answer no_match for a list).
    registry.method("isSorted", 0, is_sorted, Cost::Of(k8s_cost));
    registry.method("sum", 0, sum, Cost::Of(k8s_cost));
    registry.method("min", 0, min, Cost::Of(k8s_cost));
    registry.method("max", 0, max, Cost::Of(k8s_cost));
    registry.method("indexOf", 1, index_of, Cost::Of(k8s_cost));
    registry.method("lastIndexOf", 1, last_index_of, Cost::Of(k8s_cost));
    // ext lists v3.
    registry.method("slice", 2, slice, Cost::Of(output_size_cost));
    registry.global("lists.range", 1, range, Cost::Of(output_size_cost));
    registry.method("reverse", 0, reverse, Cost::Of(output_size_cost));
    // `distinct` and `sort` charge their (quadratic) cost before the work.
    registry.method("distinct", 0, distinct, Cost::Fixed(0));
    registry.method("sort", 0, sort, Cost::Fixed(0));
    registry.method("flatten", 0, flatten, Cost::Of(flatten_cost));
    registry.method("flatten", 1, flatten_depth, Cost::Of(flatten_cost));
    // optionals v2.
    registry.method("first", 0, first, Cost::Fixed(1));
    registry.method("last", 0, last, Cost::Fixed(1));
}

// ---- costs ----

/// k8s `library.traversalCost`: a string or bytes `⌊len(bytes) × 0.1⌋`, a list or map the sum
/// over its elements (keys and values), anything else 1.
pub(crate) fn k8s_traversal_cost(v: &Value) -> u64 {
    match v {
        Value::String(s) => (s.len() as f64 * STRING_TRAVERSAL_FACTOR) as u64,
        Value::Bytes(b) => (b.len() as f64 * STRING_TRAVERSAL_FACTOR) as u64,
        Value::List(items) => items.iter().fold(0u64, |acc, i| acc.wrapping_add(k8s_traversal_cost(i))),
        Value::Map(map) => map.iter().fold(0u64, |acc, (k, v)| {
            acc.wrapping_add(k8s_traversal_cost(&k.to_value())).wrapping_add(k8s_traversal_cost(v))
        }),
        _ => 1,
    }
}

fn k8s_cost(args: &[Value], _: &Value) -> u64 {
    k8s_traversal_cost(&args[0])
}

/// cel-go ext `trackAllocatingListCall`.
fn allocating_list_call(cost_factor: f64, size: u64) -> u64 {
    let factor = if cost_factor < 0.0 { 1.0 } else { cost_factor };
    ((size as f64 * factor) as u64).saturating_add(CALL_COST).saturating_add(LIST_CREATE_BASE_COST)
}

/// `trackListOutputSize`: `slice`, `lists.range`, `reverse`.
fn output_size_cost(_: &[Value], result: &Value) -> u64 {
    allocating_list_call(1.0, result.cost_size())
}

/// `trackListFlattenLegacy` (version 3): the depth times the input's size.
fn flatten_cost(args: &[Value], _: &Value) -> u64 {
    let depth = match args.get(1) {
        Some(Value::Int(d)) => *d as f64,
        _ => 1.0,
    };
    allocating_list_call(depth, args[0].cost_size())
}

/// `trackListSelfCompare`: `distinct` and `sort`, `n² × 2` (`× 2.1` for strings and bytes).
fn self_compare_cost(items: &[Value]) -> u64 {
    let size = items.len() as u64;
    let mut factor = 2.0;
    if size == 0 {
        return allocating_list_call(factor, 0);
    }
    if matches!(items[0], Value::String(_) | Value::Bytes(_)) {
        factor += STRING_TRAVERSAL_FACTOR;
    }
    allocating_list_call(factor, size.saturating_mul(size))
}

// ---- guards ----

fn list_arg(v: &Value) -> Result<&Arc<Vec<Value>>> {
    match v {
        Value::List(items) => Ok(items),
        _ => Err(Error::no_match()),
    }
}

/// `list.sortBy(x, key)` once its keys are computed: cel-go's `@sortByAssociatedKeys(list,
/// keys)` — the keys' first element must be of a comparable type (else the dispatcher's no
/// such overload: `Err(None)` here), every key of its type (`list elements must have the same
/// type`), the list reordered as Go's `sort.Slice` orders the keys (not stable). Charge
/// [`sort_by_cost`] before.
#[allow(dead_code)] // for the evaluator's sortBy
pub(crate) fn sort_by_associated_keys(
    list: &[Value],
    keys: &[Value],
) -> std::result::Result<Vec<Value>, Option<Error>> {
    if list.len() != keys.len() {
        return Err(Some(Error::new(format!(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but got {} and {} elements respectively",
            list.len(),
            keys.len()
        ))));
    }
    let Some(first) = keys.first() else { return Ok(list.to_vec()) };
    if !is_comparable(first) {
        return Err(None);
    }
    if keys.len() > 1 && keys.iter().any(|k| !same_kind(k, first)) {
        return Err(Some(Error::new("list elements must have the same type")));
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    gosort::sort_slice(&mut order, &mut |a, b| keys[*a].compare(&keys[*b]) == Some(std::cmp::Ordering::Less));
    Ok(order.into_iter().map(|i| list[i].clone()).collect())
}

/// The cost of `@sortByAssociatedKeys` (cel-go ext lists v3 `trackListSortBy`): the keys'
/// self-comparison, `n² × 2` (`× 2.1` for string or bytes keys) + 11.
#[allow(dead_code)] // for the evaluator's sortBy
pub(crate) fn sort_by_cost(keys: &[Value]) -> u64 {
    self_compare_cost(keys)
}

/// One of the types `isSorted`, `min`, `max` and `sort` are declared for (cel-go's Comparers).
fn is_comparable(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::Uint(_)
            | Value::Double(_)
            | Value::Bool(_)
            | Value::Duration(_)
            | Value::Timestamp(_)
            | Value::String(_)
            | Value::Bytes(_)
    )
}

/// A list whose first element (if any) is comparable: the runtime guard of `list(T)`, T one
/// of the comparable types.
fn comparable_list(v: &Value) -> Result<&Arc<Vec<Value>>> {
    let items = list_arg(v)?;
    match items.first() {
        Some(first) if !is_comparable(first) => Err(Error::no_match()),
        _ => Ok(items),
    }
}

fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

// ---- k8s lists ----

fn is_sorted(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = comparable_list(&args[0])?;
    let mut prev: Option<&Value> = None;
    for item in items.iter() {
        if !is_comparable(item) {
            return Err(Error::no_such_overload());
        }
        if let Some(p) = prev {
            // An ordering error (different types, NaN) is not "greater": it does not unsort.
            if p.compare(item) == Some(std::cmp::Ordering::Greater) {
                return Ok(Value::Bool(false));
            }
        }
        prev = Some(item);
    }
    Ok(Value::Bool(true))
}

fn sum(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    // The overload is chosen by the first element (an empty list takes the first, `int`).
    let zero = match items.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::Uint(_)) => Value::Uint(0),
        Some(Value::Double(_)) => Value::Double(0.0),
        Some(Value::Duration(_)) => Value::Duration(0),
        Some(_) => return Err(Error::no_match()),
    };
    items.iter().try_fold(zero, |acc, next| add(&acc, next))
}

/// cel-go's `Adder.Add` between two values of the summable types.
fn add(acc: &Value, next: &Value) -> Result<Value> {
    match (acc, next) {
        (Value::Int(a), Value::Int(b)) => {
            a.checked_add(*b).map(Value::Int).ok_or_else(|| Error::new("integer overflow"))
        }
        (Value::Uint(a), Value::Uint(b)) => {
            a.checked_add(*b).map(Value::Uint).ok_or_else(|| Error::new("unsigned integer overflow"))
        }
        (Value::Double(a), Value::Double(b)) => Ok(Value::Double(a + b)),
        (Value::Duration(a), Value::Duration(b)) => {
            a.checked_add(*b).map(Value::Duration).ok_or_else(|| Error::new("integer overflow"))
        }
        _ => Err(Error::no_such_overload()),
    }
}

fn min(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    extreme(&args[0], "min", std::cmp::Ordering::Greater)
}

fn max(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    extreme(&args[0], "max", std::cmp::Ordering::Less)
}

/// k8s `cmp`: the running result is replaced by an element when `result.Compare(next)` is
/// `prefer`; an ordering error keeps the result.
fn extreme(list: &Value, name: &str, prefer: std::cmp::Ordering) -> Result<Value> {
    let items = comparable_list(list)?;
    let mut result: Option<&Value> = None;
    for item in items.iter() {
        if !is_comparable(item) {
            return Err(Error::no_such_overload());
        }
        match result {
            None => result = Some(item),
            Some(r) => {
                if r.compare(item) == Some(prefer) {
                    result = Some(item);
                }
            }
        }
    }
    result.cloned().ok_or_else(|| Error::new(format!("{name} called on empty list")))
}

fn index_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    let found = items.iter().position(|v| v.equals(&args[1]));
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn last_index_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    let found = items.iter().rposition(|v| v.equals(&args[1]));
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

// ---- ext lists ----

fn slice(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    let (Value::Int(start), Value::Int(end)) = (&args[1], &args[2]) else { return Err(Error::no_match()) };
    let (start, end) = (*start, *end);
    if start < 0 || end < 0 {
        return Err(Error::new(format!("cannot slice({start}, {end}), negative indexes not supported")));
    }
    if start > end {
        return Err(Error::new(format!(
            "cannot slice({start}, {end}), start index must be less than or equal to end index"
        )));
    }
    let len = items.len() as i64;
    if len < end {
        return Err(Error::new(format!("cannot slice({start}, {end}), list is length {len}")));
    }
    Ok(Value::list(items[start as usize..end as usize].to_vec()))
}

fn range(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let Value::Int(n) = args[0] else { return Err(Error::no_match()) };
    if n < 0 {
        return Err(Error::new(format!("lists.range: size must be non-negative, got {n}")));
    }
    if n > MAX_RANGE_SIZE {
        return Err(Error::new(format!("lists.range: size {n} exceeds maximum allowed ({MAX_RANGE_SIZE})")));
    }
    Ok(Value::list((0..n).map(Value::Int).collect()))
}

fn reverse(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    Ok(Value::list(items.iter().rev().cloned().collect()))
}

fn distinct(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    ctx.charge(self_compare_cost(items))?;
    if items.is_empty() {
        return Ok(args[0].clone());
    }
    Ok(Value::list(distinct_values(items)))
}

/// The first occurrence of each value under cel-go's heterogeneous equality, in order.
pub(crate) fn distinct_values(items: &[Value]) -> Vec<Value> {
    // All strings, or all ints: equality is the key's; a set keeps this linear.
    if items.iter().all(|v| matches!(v, Value::String(_))) || items.iter().all(|v| matches!(v, Value::Int(_)))
    {
        let mut seen: HashSet<Key> = HashSet::with_capacity(items.len());
        return items
            .iter()
            .filter(|v| seen.insert(Key::from_value(v).unwrap_or(Key::Bool(false))))
            .cloned()
            .collect();
    }
    let mut unique: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !unique.iter().any(|u| item.equals(u)) {
            unique.push(item.clone());
        }
    }
    unique
}

/// `sort()`: cel-go binds every overload to one implementation guarded only by the receiver
/// being a list, so a first element that cannot be ordered is `list elements must be
/// comparable`, not a missing overload.
fn sort(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    ctx.charge(self_compare_cost(items))?;
    if items.is_empty() {
        return Ok(args[0].clone());
    }
    sort_values(items).map(Value::list)
}

/// cel-go `sortListByAssociatedKeys(list, list)`: every element of the first one's type.
pub(crate) fn sort_values(items: &[Value]) -> Result<Vec<Value>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let first = &items[0];
    if !is_comparable(first) {
        return Err(Error::new("list elements must be comparable"));
    }
    if items.len() > 1 && items.iter().any(|v| !same_kind(v, first)) {
        return Err(Error::new("list elements must have the same type"));
    }
    let mut sorted = items.to_vec();
    // Go's sort.Slice with `Compare == -1` as less (an ordering error, NaN, is not less).
    gosort::sort_slice(&mut sorted, &mut |a, b| a.compare(b) == Some(std::cmp::Ordering::Less));
    Ok(sorted)
}

/// cel-go's `%v` of a runtime value's type (`list(dyn)`, `map(dyn, dyn)`, `int`).
fn runtime_type(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "list(dyn)",
        Value::Map(_) => "map(dyn, dyn)",
        other => other.type_name(),
    }
}

fn flatten(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let Value::List(items) = &args[0] else {
        return Err(Error::new(format!("no such overload: {}.flatten()", runtime_type(&args[0]))));
    };
    let mut out = Vec::with_capacity(items.len());
    flatten_into(items, 1, &mut out)?;
    Ok(Value::list(out))
}

fn flatten_depth(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    if !matches!(args[1], Value::Int(_)) {
        // cel-go's cost tracker for `list_flatten_int` asserts an int depth after the call; the
        // interpreter recovers its panic as this error.
        return Err(Error::new(format!(
            "internal error: interface conversion: ref.Val is {}, not types.Int",
            go_value_type(&args[1])
        )));
    }
    let (Value::List(items), Value::Int(depth)) = (&args[0], &args[1]) else {
        return Err(Error::new(format!(
            "no such overload: {}.flatten({})",
            runtime_type(&args[0]),
            runtime_type(&args[1])
        )));
    };
    let mut out = Vec::with_capacity(items.len());
    flatten_into(items, *depth, &mut out)?;
    Ok(Value::list(out))
}

/// Go's `%T` of a cel-go value (scalars exactly; aggregates as a literal builds them).
fn go_value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "types.Null",
        Value::Bool(_) => "types.Bool",
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Double(_) => "types.Double",
        Value::String(_) => "types.String",
        Value::Bytes(_) => "types.Bytes",
        Value::Duration(_) => "types.Duration",
        Value::Timestamp(_) => "types.Timestamp",
        Value::List(_) => "*types.baseList",
        Value::Map(_) => "*types.baseMap",
        Value::Type(_) => "*types.Type",
        Value::Optional(_) => "*types.Optional",
        Value::Object(_) => "ref.Val",
    }
}

/// cel-go `flatten`.
fn flatten_into(items: &[Value], depth: i64, out: &mut Vec<Value>) -> Result<()> {
    if depth < 0 {
        return Err(Error::new("level must be non-negative"));
    }
    for item in items {
        match item {
            Value::List(nested) if depth > 0 => flatten_into(nested, depth - 1, out)?,
            other => out.push(other.clone()),
        }
    }
    Ok(())
}

fn first(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    Ok(Value::Optional(items.first().cloned().map(Arc::new)))
}

fn last(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = list_arg(&args[0])?;
    Ok(Value::Optional(items.last().cloned().map(Arc::new)))
}
