//! cel-go's `ext.Strings` at `StringsVersion(2)` (k8s.io/apiserver `pkg/cel/environment/base.go`
//! at 1.36): `charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//! `substring`, `trim`, `format` (the version-1 formatter, `formatting.go`, locale `en_US`),
//! `strings.quote` and `join`. Strings are indexed by code point, as Go's `[]rune(s)`.
//!
//! Runtime costs: version 2 registers no cost trackers of its own, so each call costs what
//! k8s `library.CostEstimator.CallCost` says (`indexOf`/`lastIndexOf`: its `traversalCost`;
//! `lowerAscii`, `upperAscii`, `substring`, `trim`: one pass; `replace`, `split`: two passes;
//! `join`: two passes over the result), or else cel-go's `costCall` default (`format` and
//! `strings.quote`: one pass over the first argument; `charAt`: 1).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::value::Value;

mod format;
#[cfg(test)]
mod tests;

pub(super) fn register(registry: &mut Registry) {
    registry.method("charAt", 1, char_at, Cost::Fixed(1));
    registry.method("indexOf", 1, index_of, Cost::Of(search_cost));
    registry.method("indexOf", 2, index_of_offset, Cost::Of(search_cost));
    registry.method("lastIndexOf", 1, last_index_of, Cost::Of(search_cost));
    registry.method("lastIndexOf", 2, last_index_of_offset, Cost::Of(search_cost));
    registry.method("lowerAscii", 0, lower_ascii, Cost::Of(one_pass));
    registry.method("upperAscii", 0, upper_ascii, Cost::Of(one_pass));
    registry.method("replace", 2, replace, Cost::Of(two_passes));
    registry.method("replace", 3, replace_n, Cost::Of(two_passes));
    registry.method("split", 1, split, Cost::Of(two_passes));
    registry.method("split", 2, split_n, Cost::Of(two_passes));
    registry.method("substring", 1, substring, Cost::Of(one_pass));
    registry.method("substring", 2, substring_range, Cost::Of(one_pass));
    registry.method("trim", 0, trim, Cost::Of(one_pass));
    registry.method("format", 1, format::format_call, Cost::Of(one_pass));
    registry.global("strings.quote", 1, quote_call, Cost::Of(one_pass));
    registry.method("join", 0, join, Cost::Of(join_cost));
    registry.method("join", 1, join_sep, Cost::Of(join_cost));
}

// ---- costs ----

/// k8s `CostEstimator.CallCost` for `indexOf`/`lastIndexOf`: `traversalCost(args[0])`.
fn search_cost(args: &[Value], _: &Value) -> u64 {
    super::lists::k8s_traversal_cost(&args[0])
}

/// `ceil(size(args[0]) × 0.1)` (code points for a string).
fn one_pass(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].cost_size())
}

/// `ceil(size(args[0]) × 2 × 0.1)`, computed as Go computes it.
fn two_passes(args: &[Value], _: &Value) -> u64 {
    (args[0].cost_size() as f64 * 2.0 * crate::func::STRING_TRAVERSAL_FACTOR).ceil() as u64
}

/// `join`: `ceil(size(result) × 2 × 0.1)`.
fn join_cost(_: &[Value], result: &Value) -> u64 {
    (result.cost_size() as f64 * 2.0 * crate::func::STRING_TRAVERSAL_FACTOR).ceil() as u64
}

// ---- argument guards ----

fn string_arg(v: &Value) -> Result<&str> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(Error::no_match()),
    }
}

fn int_arg(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(Error::no_match()),
    }
}

fn out_of_range(i: i64) -> Error {
    Error::new(format!("index out of range: {i}"))
}

// ---- functions ----

fn char_at(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let i = int_arg(&args[1])?;
    char_at_str(s, i).map(Value::string)
}

pub(crate) fn char_at_str(s: &str, i: i64) -> Result<String> {
    if i < 0 {
        return Err(out_of_range(i));
    }
    let mut chars = s.chars();
    for _ in 0..i {
        if chars.next().is_none() {
            return Err(out_of_range(i));
        }
    }
    Ok(chars.next().map(String::from).unwrap_or_default())
}

fn index_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sub = string_arg(&args[1])?;
    index_of_str(s, sub, 0).map(Value::Int)
}

fn index_of_offset(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sub = string_arg(&args[1])?;
    let offset = int_arg(&args[2])?;
    index_of_str(s, sub, offset).map(Value::Int)
}

/// cel-go `indexOfOffset`.
pub(crate) fn index_of_str(s: &str, sub: &str, offset: i64) -> Result<i64> {
    if offset < 0 {
        return Err(out_of_range(offset));
    }
    let runes: Vec<char> = s.chars().collect();
    let len = runes.len() as i64;
    if sub.is_empty() {
        return Ok(offset.min(len));
    }
    let subrunes: Vec<char> = sub.chars().collect();
    if offset >= len {
        return Ok(-1);
    }
    let last_start = runes.len() as i64 - subrunes.len() as i64;
    let mut i = offset;
    while i <= last_start {
        let at = i as usize;
        if runes[at..at + subrunes.len()] == subrunes[..] {
            return Ok(i);
        }
        i += 1;
    }
    Ok(-1)
}

fn last_index_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sub = string_arg(&args[1])?;
    last_index_of_whole(s, sub).map(Value::Int)
}

/// cel-go `lastIndexOf`.
pub(crate) fn last_index_of_whole(s: &str, sub: &str) -> Result<i64> {
    let len = s.chars().count() as i64;
    if sub.is_empty() {
        return Ok(len);
    }
    // Go compares byte lengths here.
    if s.len() < sub.len() {
        return Ok(-1);
    }
    last_index_of_str(s, sub, len - 1)
}

fn last_index_of_offset(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sub = string_arg(&args[1])?;
    let offset = int_arg(&args[2])?;
    last_index_of_str(s, sub, offset).map(Value::Int)
}

/// cel-go `lastIndexOfOffset`.
pub(crate) fn last_index_of_str(s: &str, sub: &str, offset: i64) -> Result<i64> {
    if offset < 0 {
        return Err(out_of_range(offset));
    }
    let runes: Vec<char> = s.chars().collect();
    let len = runes.len() as i64;
    if sub.is_empty() {
        return Ok(offset.min(len));
    }
    let subrunes: Vec<char> = sub.chars().collect();
    if offset >= len {
        return Ok(-1);
    }
    let mut off = offset;
    if off > len - subrunes.len() as i64 {
        off = len - subrunes.len() as i64;
    }
    let mut i = off;
    while i >= 0 {
        let at = i as usize;
        if runes[at..at + subrunes.len()] == subrunes[..] {
            return Ok(i);
        }
        i -= 1;
    }
    Ok(-1)
}

fn lower_ascii(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::string(string_arg(&args[0])?.to_ascii_lowercase()))
}

fn upper_ascii(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::string(string_arg(&args[0])?.to_ascii_uppercase()))
}

fn replace(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let old = string_arg(&args[1])?;
    let new = string_arg(&args[2])?;
    Ok(Value::string(replace_str(s, old, new, -1)))
}

fn replace_n(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let old = string_arg(&args[1])?;
    let new = string_arg(&args[2])?;
    let n = int_arg(&args[3])?;
    Ok(Value::string(replace_str(s, old, new, n)))
}

/// Go's `strings.Replace(s, old, new, n)`: `n < 0` replaces every match; an empty `old`
/// matches before each code point and at the end.
pub(crate) fn replace_str(s: &str, old: &str, new: &str, n: i64) -> String {
    if n < 0 {
        s.replace(old, new)
    } else {
        s.replacen(old, new, usize::try_from(n).unwrap_or(usize::MAX))
    }
}

fn split(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sep = string_arg(&args[1])?;
    Ok(strings_list(split_str(s, sep, -1)))
}

fn split_n(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let sep = string_arg(&args[1])?;
    let n = int_arg(&args[2])?;
    Ok(strings_list(split_str(s, sep, n)))
}

fn strings_list(parts: Vec<&str>) -> Value {
    Value::list(parts.into_iter().map(Value::string).collect())
}

/// Go's `strings.SplitN(s, sep, n)`: `n == 0` none, `n < 0` all, else at most `n` parts; an
/// empty `sep` splits into code points (none for an empty string).
pub(crate) fn split_str<'a>(s: &'a str, sep: &str, n: i64) -> Vec<&'a str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let count = s.chars().count();
        let limit = if n < 0 || n as u64 > count as u64 { count } else { n as usize };
        let mut parts = Vec::with_capacity(limit);
        let mut rest = s;
        while parts.len() + 1 < limit {
            let width = rest.chars().next().map_or(0, char::len_utf8);
            parts.push(&rest[..width]);
            rest = &rest[width..];
        }
        if limit > 0 {
            parts.push(rest);
        }
        return parts;
    }
    if n < 0 {
        s.split(sep).collect()
    } else {
        s.splitn(usize::try_from(n).unwrap_or(usize::MAX), sep).collect()
    }
}

fn substring(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let start = int_arg(&args[1])?;
    let len = s.chars().count() as i64;
    if start < 0 || start > len {
        return Err(out_of_range(start));
    }
    Ok(Value::string(s.chars().skip(start as usize).collect::<String>()))
}

fn substring_range(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let start = int_arg(&args[1])?;
    let end = int_arg(&args[2])?;
    substring_str(s, start, end).map(Value::string)
}

/// cel-go `substrRange`.
pub(crate) fn substring_str(s: &str, start: i64, end: i64) -> Result<String> {
    let len = s.chars().count() as i64;
    if start > end {
        return Err(Error::new(format!("invalid substring range. start: {start}, end: {end}")));
    }
    if start < 0 || start > len {
        return Err(out_of_range(start));
    }
    if end < 0 || end > len {
        return Err(out_of_range(end));
    }
    Ok(s.chars().skip(start as usize).take((end - start) as usize).collect())
}

/// Go's `strings.TrimSpace`: `unicode.IsSpace` is Unicode's White_Space, as Rust's `trim`.
fn trim(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let s = string_arg(&args[0])?;
    let trimmed = s.trim();
    if trimmed.len() == s.len() {
        return Ok(args[0].clone());
    }
    Ok(Value::string(trimmed))
}

fn quote_call(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::string(quote(string_arg(&args[0])?)))
}

/// cel-go `quote`: CEL's escapes, every other code point as it is.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The runtime type guard of `list(string)`: a list whose first element (if any) is a string.
fn string_list(v: &Value) -> Result<&Arc<Vec<Value>>> {
    match v {
        Value::List(items) if matches!(items.first(), None | Some(Value::String(_))) => Ok(items),
        _ => Err(Error::no_match()),
    }
}

fn join(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    join_list(string_list(&args[0])?, "")
}

fn join_sep(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let items = string_list(&args[0])?;
    let sep = string_arg(&args[1])?;
    join_list(items, sep)
}

/// cel-go `joinValSeparator`.
fn join_list(items: &[Value], sep: &str) -> Result<Value> {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i != 0 {
            out.push_str(sep);
        }
        match item {
            Value::String(s) => out.push_str(s),
            other => return Err(Error::new(format!("join: invalid input: {}", go_value_v(other)))),
        }
    }
    Ok(Value::string(out))
}

/// Go's `%v` of a CEL value, as cel-go's error texts print one: `types.Null` has no `String`
/// method (its int32, 0); a list prints its Go elements (`[x, 1.5]`), a map its entries
/// (`{k: v}`, from the upstream plugin on JSON values; Go's map order is random, ours the
/// object's). Library objects by their type name (an approximation).
pub(crate) fn go_value_v(v: &Value) -> String {
    match v {
        Value::Null => "0".into(),
        Value::List(items) => format!("[{}]", items.iter().map(go_native_v).collect::<Vec<_>>().join(", ")),
        Value::Map(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", go_value_v(&k.to_value()), go_value_v(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => go_native_v(other),
    }
}

/// Go's `%v` of the Go value behind a CEL value (`<nil>`, `[a b]`, `map[k:v]` with sorted keys).
fn go_native_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => format::go_g(*d),
        Value::String(s) => s.to_string(),
        Value::List(items) => format!("[{}]", items.iter().map(go_native_v).collect::<Vec<_>>().join(" ")),
        Value::Map(map) => {
            let mut entries: Vec<(String, String)> =
                map.iter().map(|(k, v)| (go_native_v(&k.to_value()), go_native_v(v))).collect();
            entries.sort();
            format!(
                "map[{}]",
                entries.into_iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(" ")
            )
        }
        other => other.type_name().to_string(),
    }
}
