//! What `env.Program` refuses after a successful check, with cel-go's `OptOptimize` as the
//! API server sets it: a type conversion (`int`, `uint`, `double`, `string`, `bytes`,
//! `bool`, `duration`, `timestamp`, `dyn`, `type`) of a constant is evaluated at planning
//! (`interpreter.maybeOptimizeConstUnary`) and its error fails the program; a constant
//! pattern of `matches`, `find` or `findAll` is compiled (`MatchesRegexOptimization`, k8s
//! `FindRegexOptimization`, `FindAllRegexOptimization`). The planner goes depth first, so the
//! first failure in post-order is the one reported.

// The runtime's own Go number parsing and formatting: what a constant conversion folds to here
// is what it evaluates to.
use crate::library::standard::{go_format_float as go_format_g, go_parse_float};
use std::collections::{HashMap, HashSet};

use cel_parser::ast::{Expr, IdedExpr, LiteralValue};

use super::validate::{
    children, go_parse_duration, go_parse_rfc3339, go_quote, go_regexp_error, is_strict_rfc3339,
};

/// A constant the planner knows (`InterpretableConst`).
#[derive(Clone, Debug, PartialEq)]
enum Const {
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    Bytes(Vec<u8>),
    Bool(bool),
    Duration(i128),
    Timestamp(i64),
    Null,
    List,
    Map,
    Type,
    /// A constant whose value this module does not render.
    Other,
}

/// Kubernetes' text for the first failure: `program instantiation failed: …`.
pub(super) fn instantiation_error(
    root: &IdedExpr,
    undefined_types: &HashMap<u64, String>,
    type_names: &HashSet<u64>,
) -> Option<String> {
    let refs = Refs { undefined_types, type_names };
    plan(root, &refs).err().map(|e| format!("program instantiation failed: {e}"))
}

/// What the checker resolved: references to type names.
struct Refs<'a> {
    undefined_types: &'a HashMap<u64, String>,
    type_names: &'a HashSet<u64>,
}

fn plan(e: &IdedExpr, refs: &Refs<'_>) -> Result<Option<Const>, String> {
    let undefined_types = refs.undefined_types;
    // A type name the runtime's provider does not know (the checker rewrote a qualified
    // selection naming it into one identifier: its operands are not planned).
    if let Some(name) = undefined_types.get(&e.id) {
        return Err(format!("reference to undefined type: {name}"));
    }
    let mut consts = Vec::new();
    for c in children(e) {
        consts.push(plan(c, refs)?);
    }
    match &e.expr {
        Expr::Literal(l) => Ok(Some(match l {
            LiteralValue::Int(i) => Const::Int(*i),
            LiteralValue::UInt(u) => Const::Uint(*u),
            LiteralValue::Double(d) => Const::Double(*d),
            LiteralValue::String(s) => Const::Str(s.clone()),
            LiteralValue::Bytes(b) => Const::Bytes(b.clone()),
            LiteralValue::Boolean(b) => Const::Bool(*b),
            LiteralValue::Null => Const::Null,
        })),
        // Constant list and map literals are built once (`maybeBuildListLiteral`).
        Expr::List(l) if l.optional_indices.is_empty() && consts.iter().all(Option::is_some) => {
            Ok(Some(Const::List))
        }
        Expr::Map(_) if consts.iter().all(Option::is_some) => Ok(Some(Const::Map)),
        Expr::Ident(_) | Expr::Select(_) if refs.type_names.contains(&e.id) => Ok(Some(Const::Type)),
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            if call.target.is_none() && call.args.len() == 1 {
                if let Some(Some(arg)) = consts.first() {
                    if let Some(result) = convert(name, arg) {
                        return result.map(Some);
                    }
                }
            }
            // A constant index becomes an attribute qualifier (`planCallIndex`), of the few
            // types a qualifier can be.
            if matches!(name, "_[_]" | "_[?_]") && call.args.len() == 2 {
                if let Some(Some(index)) = consts.get(1) {
                    let go_type = match index {
                        Const::Null => Some("types.Null"),
                        Const::List => Some("*types.baseList"),
                        Const::Map => Some("*types.baseMap"),
                        Const::Type => Some("*types.Type"),
                        Const::Bytes(_) => Some("types.Bytes"),
                        Const::Duration(_) => Some("types.Duration"),
                        Const::Timestamp(_) => Some("types.Timestamp"),
                        _ => None,
                    };
                    if let Some(go_type) = go_type {
                        return Err(format!("invalid qualifier type: {go_type}"));
                    }
                }
            }
            if matches!(name, "matches" | "find" | "findAll") {
                if let Some(Some(Const::Str(pattern))) = consts.get(1) {
                    if let Some(err) = go_regexp_error(pattern) {
                        return Err(err);
                    }
                }
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

fn conversion_error(from: &str, to: &str) -> String {
    format!("type conversion error from '{from}' to '{to}'")
}

/// The conversion `name` of a constant: `None` when `name` is not a conversion function.
fn convert(name: &str, v: &Const) -> Option<Result<Const, String>> {
    use Const as C;
    const MIN_UNIX: i64 = -62135596800;
    const MAX_UNIX: i64 = 253402300799;
    let int_overflow = || Err("integer overflow".to_owned());
    let uint_overflow = || Err("unsigned integer overflow".to_owned());
    let r = match (name, v) {
        ("dyn", v) => Ok(v.clone()),
        ("type", _) => Ok(C::Type),
        (_, C::Other) => Ok(C::Other),
        ("int", C::Int(i)) => Ok(C::Int(*i)),
        ("int", C::Uint(u)) => i64::try_from(*u).map(C::Int).or_else(|_| int_overflow()),
        ("int", C::Double(d)) => {
            if d.is_nan() || *d <= i64::MIN as f64 || *d >= i64::MAX as f64 {
                int_overflow()
            } else {
                Ok(C::Int(*d as i64))
            }
        }
        ("int", C::Str(s)) => s.parse::<i64>().map(C::Int).map_err(|_| conversion_error("string", "int")),
        ("int", C::Duration(ns)) => Ok(C::Int(*ns as i64)),
        ("int", C::Timestamp(secs)) => Ok(C::Int(*secs)),
        ("uint", C::Uint(u)) => Ok(C::Uint(*u)),
        ("uint", C::Int(i)) => u64::try_from(*i).map(C::Uint).or_else(|_| uint_overflow()),
        ("uint", C::Double(d)) => {
            if d.is_nan() || *d < 0.0 || *d >= 18446744073709551616.0 {
                uint_overflow()
            } else {
                Ok(C::Uint(*d as u64))
            }
        }
        ("uint", C::Str(s)) => {
            let unsigned = !s.starts_with('+');
            match s.parse::<u64>() {
                Ok(u) if unsigned => Ok(C::Uint(u)),
                _ => Err(conversion_error("string", "uint")),
            }
        }
        ("double", C::Double(d)) => Ok(C::Double(*d)),
        ("double", C::Int(i)) => Ok(C::Double(*i as f64)),
        ("double", C::Uint(u)) => Ok(C::Double(*u as f64)),
        ("double", C::Str(s)) => {
            go_parse_float(s).map(C::Double).ok_or_else(|| conversion_error("string", "double"))
        }
        ("string", C::Str(s)) => Ok(C::Str(s.clone())),
        ("string", C::Int(i)) => Ok(C::Str(i.to_string())),
        ("string", C::Uint(u)) => Ok(C::Str(u.to_string())),
        ("string", C::Double(d)) => Ok(C::Str(go_format_g(*d))),
        ("string", C::Bool(b)) => Ok(C::Str(b.to_string())),
        ("string", C::Bytes(b)) => match String::from_utf8(b.clone()) {
            Ok(s) => Ok(C::Str(s)),
            Err(_) => Err("invalid UTF-8 in bytes, cannot convert to string".to_owned()),
        },
        ("string", C::Duration(_) | C::Timestamp(_)) => Ok(C::Other),
        ("bytes", C::Bytes(b)) => Ok(C::Bytes(b.clone())),
        ("bytes", C::Str(s)) => Ok(C::Bytes(s.as_bytes().to_vec())),
        ("bool", C::Bool(b)) => Ok(C::Bool(*b)),
        ("bool", C::Str(s)) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(C::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(C::Bool(false)),
            _ => Err(conversion_error("string", "bool")),
        },
        ("duration", C::Duration(d)) => Ok(C::Duration(*d)),
        ("duration", C::Str(s)) => go_parse_duration(s)
            .map(C::Duration)
            .ok_or_else(|| conversion_error("string", "google.protobuf.Duration")),
        ("timestamp", C::Timestamp(t)) => Ok(C::Timestamp(*t)),
        ("timestamp", C::Int(i)) => {
            if (MIN_UNIX..=MAX_UNIX).contains(i) {
                Ok(C::Timestamp(*i))
            } else {
                Err("timestamp overflow".to_owned())
            }
        }
        ("timestamp", C::Str(s)) if !is_strict_rfc3339(s) => {
            Err(format!("invalid RFC 3339 timestamp {}", go_quote(s)))
        }
        ("timestamp", C::Str(s)) => match go_parse_rfc3339(s) {
            Some(secs) if (MIN_UNIX..=MAX_UNIX).contains(&secs) => Ok(C::Timestamp(secs)),
            Some(_) => Err("timestamp overflow".to_owned()),
            None => Err(conversion_error("string", "google.protobuf.Timestamp")),
        },
        ("int" | "uint" | "double" | "string" | "bytes" | "bool" | "duration" | "timestamp", _) => {
            // A runtime type the overloads do not take (through `dyn`): left to evaluation.
            Ok(C::Other)
        }
        _ => return None,
    };
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_floats() {
        assert_eq!(go_parse_float("1.5"), Some(1.5));
        assert_eq!(go_parse_float("-1e3"), Some(-1000.0));
        assert_eq!(go_parse_float(".5"), Some(0.5));
        assert_eq!(go_parse_float("Inf"), Some(f64::INFINITY));
        assert_eq!(go_parse_float("-infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(go_parse_float("0x1.8p1"), Some(3.0));
        assert_eq!(go_parse_float("1e400"), None);
        assert_eq!(go_parse_float("1_000"), Some(1000.0));
        assert_eq!(go_parse_float("1__0"), None);
        assert_eq!(go_parse_float("_1"), None);
        assert_eq!(go_parse_float("abc"), None);
        assert_eq!(go_parse_float(""), None);
        assert_eq!(go_format_g(100.0), "100");
        assert_eq!(go_format_g(1e6), "1e+06");
        assert_eq!(go_format_g(123456.0), "123456");
        assert_eq!(go_format_g(1.5), "1.5");
        assert_eq!(go_format_g(0.0001), "0.0001");
        assert_eq!(go_format_g(0.00001), "1e-05");
        assert_eq!(go_format_g(-2.5e-10), "-2.5e-10");
        assert_eq!(go_format_g(1e21), "1e+21");
    }
}
