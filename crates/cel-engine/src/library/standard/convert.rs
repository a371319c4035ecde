//! The type conversions, as each cel-go value's `ConvertToType` converts: Go's `strconv`
//! parsers (`ParseInt`, `ParseUint`, `ParseFloat`, `ParseBool`), `time.ParseDuration`,
//! `time.Parse(time.RFC3339, …)`, and Go's formatting (`%g` for doubles, `FormatFloat('f')` of
//! the seconds for durations, `time.RFC3339Nano` for timestamps).

use std::sync::Arc;

use super::arith::{int_overflow, uint_overflow};
use super::overload_error;
use super::time::{
    duration_string, go_parse_duration, go_parse_rfc3339, timestamp_parts, timestamp_string, MAX_UNIX,
    MIN_UNIX,
};
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Ctx};
use crate::value::Value;

/// `type conversion error from 'string' to 'int'`.
fn conversion_error(from: &str, to: &str) -> Error {
    Error::new(format!("type conversion error from '{from}' to '{to}'"))
}

const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// cel-go's `doubleToInt64Checked`: both ends of int64's range refused (`-2^63` too).
pub(crate) fn double_to_int(d: f64) -> Option<i64> {
    if d.is_nan() || d <= -TWO_POW_63 || d >= TWO_POW_63 {
        return None;
    }
    Some(d as i64)
}

/// cel-go's `doubleToUint64Checked`.
pub(crate) fn double_to_uint(d: f64) -> Option<u64> {
    if d.is_nan() || !(0.0..TWO_POW_64).contains(&d) {
        return None;
    }
    Some(d as u64)
}

pub(super) fn to_int(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(match &args[0] {
        Value::Int(i) => *i,
        Value::Uint(u) => i64::try_from(*u).map_err(|_| int_overflow())?,
        Value::Double(d) => double_to_int(*d).ok_or_else(int_overflow)?,
        // Go's ParseInt(s, 10, 64) and Rust's i64 parser take the same texts: an optional sign,
        // ASCII digits, no underscores.
        Value::String(s) => s.parse().map_err(|_| conversion_error("string", "int"))?,
        Value::Duration(d) => *d,
        // Unix seconds, rounded down (Go's `Time.Unix`).
        Value::Timestamp(t) => timestamp_parts(t).0,
        _ => return Err(overload_error("int", args)),
    }))
}

pub(super) fn to_uint(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Uint(match &args[0] {
        Value::Uint(u) => *u,
        Value::Int(i) => u64::try_from(*i).map_err(|_| uint_overflow())?,
        Value::Double(d) => double_to_uint(*d).ok_or_else(uint_overflow)?,
        // ParseUint takes no sign at all; Rust's u64 parser takes a `+`.
        Value::String(s) if !s.starts_with('+') => {
            s.parse().map_err(|_| conversion_error("string", "uint"))?
        }
        Value::String(_) => return Err(conversion_error("string", "uint")),
        _ => return Err(overload_error("uint", args)),
    }))
}

pub(super) fn to_double(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Double(match &args[0] {
        Value::Double(d) => *d,
        Value::Int(i) => *i as f64,
        Value::Uint(u) => *u as f64,
        Value::String(s) => go_parse_float(s).ok_or_else(|| conversion_error("string", "double"))?,
        _ => return Err(overload_error("double", args)),
    }))
}

pub(super) fn to_string(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(match &args[0] {
        Value::String(_) => args[0].clone(),
        Value::Bool(b) => Value::string(if *b { "true" } else { "false" }),
        Value::Int(i) => Value::string(i.to_string()),
        Value::Uint(u) => Value::string(u.to_string()),
        Value::Double(d) => Value::string(go_format_float(*d)),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::string(s),
            Err(_) => return Err(Error::new("invalid UTF-8 in bytes, cannot convert to string")),
        },
        Value::Duration(d) => Value::string(duration_string(*d)),
        Value::Timestamp(t) => Value::string(timestamp_string(t)),
        // The Kubernetes libraries add `string` overloads for their types (ip, cidr).
        Value::Object(_) => return Err(Error::no_match()),
        _ => return Err(overload_error("string", args)),
    })
}

/// `bytes_to_string` is one pass over the bytes; the other conversions to string cost 1.
pub(super) fn string_cost(args: &[Value], _: &Value) -> u64 {
    match &args[0] {
        Value::Bytes(b) => traversal_cost(b.len() as u64),
        _ => 1,
    }
}

pub(super) fn to_bytes(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(match &args[0] {
        Value::Bytes(_) => args[0].clone(),
        Value::String(s) => Value::Bytes(Arc::from(s.as_bytes())),
        _ => return Err(overload_error("bytes", args)),
    })
}

/// `string_to_bytes` is one pass over the string (its size in code points).
pub(super) fn bytes_cost(args: &[Value], _: &Value) -> u64 {
    match &args[0] {
        Value::String(_) => traversal_cost(args[0].cost_size()),
        _ => 1,
    }
}

pub(super) fn to_bool(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(match &args[0] {
        Value::Bool(b) => *b,
        // Go's strconv.ParseBool.
        Value::String(s) => match &**s {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
            "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
            _ => return Err(conversion_error("string", "bool")),
        },
        _ => return Err(overload_error("bool", args)),
    }))
}

pub(super) fn dyn_(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(args[0].clone())
}

pub(super) fn type_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Type(args[0].type_of()))
}

pub(super) fn to_duration(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(match &args[0] {
        Value::Duration(_) => args[0].clone(),
        Value::String(s) => Value::Duration(
            go_parse_duration(s).ok_or_else(|| conversion_error("string", "google.protobuf.Duration"))?,
        ),
        // cel-go v0.26 declares `duration(int)` (`int64_to_duration`), but an int does not
        // convert to a duration: the conversion's error.
        Value::Int(_) => return Err(conversion_error("int", "google.protobuf.Duration")),
        _ => return Err(overload_error("duration", args)),
    })
}

fn timestamp_overflow() -> Error {
    Error::new("timestamp overflow")
}

pub(super) fn to_timestamp(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(match &args[0] {
        Value::Timestamp(_) => args[0].clone(),
        Value::Int(secs) => {
            if !(MIN_UNIX..=MAX_UNIX).contains(secs) {
                return Err(timestamp_overflow());
            }
            Value::Timestamp(jiff::Timestamp::new(*secs, 0).map_err(|_| timestamp_overflow())?)
        }
        Value::String(s) => {
            let (secs, nanos) =
                go_parse_rfc3339(s).ok_or_else(|| conversion_error("string", "google.protobuf.Timestamp"))?;
            if !(MIN_UNIX..=MAX_UNIX).contains(&secs) {
                return Err(timestamp_overflow());
            }
            Value::Timestamp(jiff::Timestamp::new(secs, nanos).map_err(|_| timestamp_overflow())?)
        }
        _ => return Err(overload_error("timestamp", args)),
    })
}

/// Go's `fmt.Sprintf("%g", d)` (`strconv.FormatFloat(d, 'g', -1, 64)`, fmt's signs): the
/// shortest digits that read back as `d`, in exponent form (`1e+06`, `1e-05`) when the decimal
/// exponent is below -4 or at least 6 (strconv's `eprec = 6` for the shortest precision).
pub(crate) fn go_format_float(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust's `{:e}` and `{}` give the shortest round-trip digits, as Go's shortest formatting.
    let sci = format!("{d:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.unsigned_abs());
    }
    format!("{d}")
}

/// Go's `strconv.ParseFloat(s, 64)`: `None` on a syntax error or a value out of range (±Inf
/// with `ErrRange`). Go takes a sign, `.5`, `5.`, exponents, `_` between digits, hexadecimal
/// mantissas with a `p` exponent (`0x1.8p1`), and `inf`, `infinity` (signed) and `nan` in any
/// case.
pub(crate) fn go_parse_float(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    let read = read_float(s)?;
    let value = if read.hex {
        atof_hex(read.mantissa, read.exp, read.trunc)?
    } else {
        // Rust's parser rounds correctly, as Go's; it wants the text without underscores.
        let cleaned: String = s.chars().filter(|&c| c != '_').collect();
        let v: f64 = cleaned.trim_start_matches(['+', '-']).parse().ok()?;
        if v.is_infinite() {
            return None;
        }
        v
    };
    Some(if read.neg { -value } else { value })
}

struct ReadFloat {
    mantissa: u64,
    exp: i64,
    neg: bool,
    trunc: bool,
    hex: bool,
}

/// Go's `readFloat`, requiring the whole text to be the number.
fn read_float(s: &str) -> Option<ReadFloat> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut neg = false;
    if let Some(&c) = b.first() {
        if c == b'+' || c == b'-' {
            neg = c == b'-';
            i += 1;
        }
    }
    let mut base: u64 = 10;
    let mut max_mant_digits = 19;
    let mut exp_char = b'e';
    let mut hex = false;
    if i + 2 < b.len() && b[i] == b'0' && (b[i + 1] | 0x20) == b'x' {
        base = 16;
        max_mant_digits = 16;
        i += 2;
        exp_char = b'p';
        hex = true;
    }
    let (mut underscores, mut saw_dot, mut saw_digits) = (false, false, false);
    let (mut nd, mut nd_mant, mut dp) = (0i64, 0i64, 0i64);
    let mut mantissa: u64 = 0;
    let mut trunc = false;
    while i < b.len() {
        let c = b[i];
        if c == b'_' {
            underscores = true;
        } else if c == b'.' {
            if saw_dot {
                break;
            }
            saw_dot = true;
            dp = nd;
        } else if c.is_ascii_digit() {
            saw_digits = true;
            if c == b'0' && nd == 0 {
                dp -= 1;
            } else {
                nd += 1;
                if nd_mant < max_mant_digits {
                    mantissa = mantissa * base + u64::from(c - b'0');
                    nd_mant += 1;
                } else if c != b'0' {
                    trunc = true;
                }
            }
        } else if base == 16 && (b'a'..=b'f').contains(&(c | 0x20)) {
            saw_digits = true;
            nd += 1;
            if nd_mant < max_mant_digits {
                mantissa = mantissa * 16 + u64::from((c | 0x20) - b'a' + 10);
                nd_mant += 1;
            } else {
                trunc = true;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if !saw_dot {
        dp = nd;
    }
    if base == 16 {
        dp *= 4;
        nd_mant *= 4;
    }
    if i < b.len() && (b[i] | 0x20) == exp_char {
        i += 1;
        if i >= b.len() {
            return None;
        }
        let mut esign = 1;
        if b[i] == b'+' || b[i] == b'-' {
            if b[i] == b'-' {
                esign = -1;
            }
            i += 1;
        }
        if i >= b.len() || !b[i].is_ascii_digit() {
            return None;
        }
        let mut e = 0i64;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            if b[i] == b'_' {
                underscores = true;
            } else if e < 10000 {
                e = e * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        dp += e * esign;
    } else if base == 16 {
        return None;
    }
    let exp = if mantissa != 0 { dp - nd_mant } else { 0 };
    if underscores && !underscore_ok(&s[..i]) {
        return None;
    }
    if i != b.len() {
        return None;
    }
    Some(ReadFloat { mantissa, exp, neg, trunc, hex })
}

/// Go's `underscoreOK`: underscores only between digits (or after a base prefix).
fn underscore_ok(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(s[1] | 0x20, b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = (s[1] | 0x20) == b'x';
    }
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// Go's `atofHex` for float64 (the value's magnitude): `mantissa × 2^exp`, rounded to nearest
/// even; `None` when it overflows (Go's range error).
fn atof_hex(mut mantissa: u64, mut exp: i64, trunc: bool) -> Option<f64> {
    const MANT_BITS: u32 = 52;
    const BIAS: i64 = -1023;
    let max_exp = (1i64 << 11) + BIAS - 2;
    let min_exp = BIAS + 1;
    exp += i64::from(MANT_BITS);
    while mantissa != 0 && mantissa >> (MANT_BITS + 2) == 0 {
        mantissa <<= 1;
        exp -= 1;
    }
    if trunc {
        mantissa |= 1;
    }
    while mantissa >> (1 + MANT_BITS + 2) != 0 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    while mantissa > 1 && exp < min_exp - 2 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    let mut round = mantissa & 3;
    mantissa >>= 2;
    round |= mantissa & 1;
    exp += 2;
    if round == 3 {
        mantissa += 1;
        if mantissa == 1 << (1 + MANT_BITS) {
            mantissa >>= 1;
            exp += 1;
        }
    }
    if mantissa >> MANT_BITS == 0 {
        exp = BIAS;
    }
    if exp > max_exp {
        return None;
    }
    let bits = (mantissa & ((1u64 << MANT_BITS) - 1)) | ((((exp - BIAS) & 0x7ff) as u64) << MANT_BITS);
    Some(f64::from_bits(bits))
}
