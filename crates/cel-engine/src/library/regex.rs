//! k8s.io/apiserver `pkg/cel/library/regex.go`: `find` and `findAll` on strings, with Go's
//! `regexp` (RE2 syntax) semantics.
//!
//! Patterns are RE2's, not the `regex` crate's: [`compile`] parses a pattern as Go's
//! `regexp/syntax` does (its errors worded as Go words them:
//! `error parsing regexp: missing closing ): `(a``), and rewrites it for the `regex` crate where
//! the two differ: `\d \s \w \b` are ASCII in Go, `[a&&b]`, `[[x]]`, `\<` and `(?x)` are not
//! Go syntax, octal escapes and `\Q…\E` are, `{` that does not start a repetition is a literal.
//! Leftmost-first matching and `FindAllString`'s treatment of empty matches agree already.
//!
//! Costs (k8s `CostEstimator.CallCost`): `⌈(1 + size(str)) × 0.1⌉ × ⌈size(regex) × 0.25⌉`.

mod syntax;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry, STRING_TRAVERSAL_FACTOR};
use crate::value::Value;

/// cel-go `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH_FACTOR: f64 = 0.25;

pub(super) fn register(registry: &mut Registry) {
    registry.method("find", 1, find, Cost::Of(regex_cost));
    registry.method("findAll", 1, find_all, Cost::Of(regex_cost));
    registry.method("findAll", 2, find_all_n, Cost::Of(regex_cost));
}

fn regex_cost(args: &[Value], _: &Value) -> u64 {
    let str_cost = ((1.0 + args[0].cost_size() as f64) * STRING_TRAVERSAL_FACTOR).ceil() as u64;
    let regex_cost = (args[1].cost_size() as f64 * REGEX_LENGTH_FACTOR).ceil() as u64;
    str_cost.wrapping_mul(regex_cost)
}

/// A Go (RE2) pattern compiled for the `regex` crate, or Go's error text
/// (`error parsing regexp: …`). Compiled patterns are kept (a bounded cache), since a policy
/// evaluates the same constant pattern on every request.
pub(crate) fn compile(pattern: &str) -> std::result::Result<Arc<regex::Regex>, String> {
    const CACHE_LIMIT: usize = 512;
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<regex::Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(re) = cache.lock().ok().and_then(|c| c.get(pattern).cloned()) {
        return Ok(re);
    }
    let translated = syntax::translate(pattern).map_err(|e| format!("error parsing regexp: {e}"))?;
    let re = regex::RegexBuilder::new(&translated)
        .size_limit(256 << 20)
        .dfa_size_limit(8 << 20)
        .nest_limit(2050)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => {
                format!("error parsing regexp: expression too large: `{pattern}`")
            }
            other => {
                let detail = other.to_string();
                let last =
                    detail.lines().last().unwrap_or_default().trim_start_matches("error: ").to_string();
                format!("error parsing regexp: {last}: `{pattern}`")
            }
        })?;
    let re = Arc::new(re);
    if let Ok(mut c) = cache.lock() {
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    }
    Ok(re)
}

/// Go's `regexp.Compile` error for `pattern` (`error parsing regexp: …`) as Go's parser
/// decides it, without compiling the pattern: for checks at creation time, where compiling
/// `\pL{1000}` would cost a second. `None` when Go accepts the pattern.
#[allow(dead_code)] // for the creation-time check (check/validate.rs)
pub(crate) fn syntax_error(pattern: &str) -> Option<String> {
    syntax::translate(pattern).err().map(|e| format!("error parsing regexp: {e}"))
}

fn illegal(e: String) -> Error {
    Error::new(format!("Illegal regex: {e}"))
}

fn strings(args: &[Value]) -> Result<(&str, &str)> {
    match (&args[0], &args[1]) {
        (Value::String(s), Value::String(r)) => Ok((s, r)),
        _ => Err(Error::no_match()),
    }
}

fn find(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, pattern) = strings(args)?;
    let re = compile(pattern).map_err(illegal)?;
    Ok(Value::string(re.find(s).map_or("", |m| m.as_str())))
}

fn find_all(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, pattern) = strings(args)?;
    let re = compile(pattern).map_err(illegal)?;
    Ok(find_all_limited(&re, s, -1))
}

fn find_all_n(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (s, pattern) = strings(args)?;
    let Value::Int(n) = args[2] else { return Err(Error::no_match()) };
    let re = compile(pattern).map_err(illegal)?;
    Ok(find_all_limited(&re, s, n))
}

/// Go's `FindAllString(s, n)`: every match when `n < 0`, none when `n == 0`, else at most `n`.
fn find_all_limited(re: &regex::Regex, s: &str, n: i64) -> Value {
    let limit = if n < 0 { usize::MAX } else { usize::try_from(n).unwrap_or(usize::MAX) };
    Value::list(re.find_iter(s).take(limit).map(|m| Value::string(m.as_str())).collect())
}
