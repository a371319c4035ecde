//! `_+_ _-_ _*_ _/_ _%_ -_`: cel-go's `Adder`, `Subtractor`, `Multiplier`, `Divider`,
//! `Modder` and `Negater` implementations (`common/types/{int,uint,double,string,bytes,list,
//! duration,timestamp}.go`) with the checks of `common/types/overflow.go`.

use std::sync::Arc;

use super::operator_error;
use super::time::{timestamp_from_nanos, timestamp_parts};
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Ctx};
use crate::value::Value;

pub(super) fn int_overflow() -> Error {
    Error::new("integer overflow")
}

pub(super) fn uint_overflow() -> Error {
    Error::new("unsigned integer overflow")
}

/// `_+_`.
pub(super) fn add(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match (&args[0], &args[1]) {
        (V::Int(a), V::Int(b)) => V::Int(a.checked_add(*b).ok_or_else(int_overflow)?),
        (V::Uint(a), V::Uint(b)) => V::Uint(a.checked_add(*b).ok_or_else(uint_overflow)?),
        (V::Double(a), V::Double(b)) => V::Double(a + b),
        (V::String(a), V::String(b)) => {
            if a.is_empty() {
                V::String(b.clone())
            } else if b.is_empty() {
                V::String(a.clone())
            } else {
                let mut s = String::with_capacity(a.len() + b.len());
                s.push_str(a);
                s.push_str(b);
                V::string(s)
            }
        }
        (V::Bytes(a), V::Bytes(b)) => {
            let mut out = Vec::with_capacity(a.len() + b.len());
            out.extend_from_slice(a);
            out.extend_from_slice(b);
            V::Bytes(Arc::from(out))
        }
        (V::List(a), V::List(b)) => {
            // cel-go returns the other operand itself when one side is empty.
            if a.is_empty() {
                V::List(b.clone())
            } else if b.is_empty() {
                V::List(a.clone())
            } else {
                let mut out = Vec::with_capacity(a.len() + b.len());
                out.extend(a.iter().cloned());
                out.extend(b.iter().cloned());
                V::list(out)
            }
        }
        (V::Duration(a), V::Duration(b)) => V::Duration(a.checked_add(*b).ok_or_else(int_overflow)?),
        (V::Duration(d), V::Timestamp(t)) | (V::Timestamp(t), V::Duration(d)) => add_time_duration(t, *d)?,
        (a, _) => {
            let adder = matches!(
                a,
                V::Int(_)
                    | V::Uint(_)
                    | V::Double(_)
                    | V::String(_)
                    | V::Bytes(_)
                    | V::List(_)
                    | V::Duration(_)
                    | V::Timestamp(_)
            );
            return Err(operator_error("_+_", a, adder));
        }
    })
}

/// cel-go's cost of `_+_`: strings and bytes (`add_string`, `add_bytes`) are one pass over
/// both operands, everything else (lists included) 1.
pub(super) fn add_cost(args: &[Value], _: &Value) -> u64 {
    match (&args[0], &args[1]) {
        (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
            traversal_cost(args[0].cost_size().saturating_add(args[1].cost_size()))
        }
        _ => 1,
    }
}

/// `_-_`.
pub(super) fn subtract(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match (&args[0], &args[1]) {
        (V::Int(a), V::Int(b)) => V::Int(a.checked_sub(*b).ok_or_else(int_overflow)?),
        (V::Uint(a), V::Uint(b)) => V::Uint(a.checked_sub(*b).ok_or_else(uint_overflow)?),
        (V::Double(a), V::Double(b)) => V::Double(a - b),
        (V::Duration(a), V::Duration(b)) => V::Duration(a.checked_sub(*b).ok_or_else(int_overflow)?),
        (V::Timestamp(t), V::Duration(d)) => {
            // `subtractTimeDurationChecked`: the duration negated first.
            let negated = d.checked_neg().ok_or_else(int_overflow)?;
            add_time_duration(t, negated)?
        }
        (V::Timestamp(a), V::Timestamp(b)) => V::Duration(subtract_times(a, b)?),
        (a, _) => {
            let subtractor =
                matches!(a, V::Int(_) | V::Uint(_) | V::Double(_) | V::Duration(_) | V::Timestamp(_));
            return Err(operator_error("_-_", a, subtractor));
        }
    })
}

/// `_*_`.
pub(super) fn multiply(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match (&args[0], &args[1]) {
        (V::Int(a), V::Int(b)) => V::Int(a.checked_mul(*b).ok_or_else(int_overflow)?),
        (V::Uint(a), V::Uint(b)) => V::Uint(a.checked_mul(*b).ok_or_else(uint_overflow)?),
        (V::Double(a), V::Double(b)) => V::Double(a * b),
        (a, _) => return Err(operator_error("_*_", a, matches!(a, V::Int(_) | V::Uint(_) | V::Double(_)))),
    })
}

/// `_/_`.
pub(super) fn divide(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match (&args[0], &args[1]) {
        (V::Int(_), V::Int(0)) | (V::Uint(_), V::Uint(0)) => return Err(Error::new("division by zero")),
        (V::Int(a), V::Int(b)) => V::Int(a.checked_div(*b).ok_or_else(int_overflow)?),
        (V::Uint(a), V::Uint(b)) => V::Uint(a / b),
        (V::Double(a), V::Double(b)) => V::Double(a / b),
        (a, _) => return Err(operator_error("_/_", a, matches!(a, V::Int(_) | V::Uint(_) | V::Double(_)))),
    })
}

/// `_%_`.
pub(super) fn modulo(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match (&args[0], &args[1]) {
        (V::Int(_), V::Int(0)) | (V::Uint(_), V::Uint(0)) => return Err(Error::new("modulus by zero")),
        (V::Int(a), V::Int(b)) => V::Int(a.checked_rem(*b).ok_or_else(int_overflow)?),
        (V::Uint(a), V::Uint(b)) => V::Uint(a % b),
        (a, _) => return Err(operator_error("_%_", a, matches!(a, V::Int(_) | V::Uint(_)))),
    })
}

/// `-_`: ints (checked), doubles, durations (checked); a bool has the trait (`!_`) but
/// cel-go's binding refuses it.
pub(super) fn negate(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    use Value as V;
    Ok(match &args[0] {
        V::Int(i) => V::Int(i.checked_neg().ok_or_else(int_overflow)?),
        V::Double(d) => V::Double(-d),
        V::Duration(d) => V::Duration(d.checked_neg().ok_or_else(int_overflow)?),
        a => return Err(operator_error("-_", a, matches!(a, V::Bool(_)))),
    })
}

/// cel-go's `addTimeDurationChecked`: the sum, `timestamp overflow` outside years 1 to 9999.
pub(super) fn add_time_duration(t: &jiff::Timestamp, d: i64) -> Result<Value> {
    let (secs, nanos) = timestamp_parts(t);
    // The seconds and the nanoseconds are added apart in Go; with |d| < 2^63 ns and timestamps
    // within years 1 to 9999 the second count cannot overflow, so one i128 sum is the same.
    let total = i128::from(secs) * 1_000_000_000 + i128::from(nanos) + i128::from(d);
    timestamp_from_nanos(total).map(Value::Timestamp)
}

/// cel-go's `subtractTimeChecked`: seconds and nanoseconds apart, each step checked.
fn subtract_times(a: &jiff::Timestamp, b: &jiff::Timestamp) -> Result<i64> {
    let (s1, n1) = timestamp_parts(a);
    let (s2, n2) = timestamp_parts(b);
    let secs = s1.checked_sub(s2).ok_or_else(int_overflow)?;
    let nanos = i64::from(n1) - i64::from(n2);
    let whole = secs.checked_mul(1_000_000_000).ok_or_else(int_overflow)?;
    whole.checked_add(nanos).ok_or_else(int_overflow)
}
