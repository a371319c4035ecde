//! `"…".format([args])` as cel-go's `ext.Strings` below version 4 formats (`formatting.go`,
//! `parseFormatString` with the `stringFormatter` and locale `en_US`, no precision limit):
//! `%s %d %f %e %b %x %X %o` and `%%`, with an optional `.precision` before the verb.
//!
//! `%f` and `%e` go through golang.org/x/text's `message.Printer` for `en-US`: digits grouped by
//! three with `,` (`1,234.500000`), infinities as `∞`, and the exponent written
//! `×10⁰³`; `%.<n>e` takes `n` as a width (cel-go writes `"%<n>e"`), its digits always six. Inside a list or a map (`%s`), doubles are `%.6f` without grouping, strings and
//! bytes Go-quoted, timestamps and durations as CEL literals, map entries sorted by key text.

use crate::error::{Error, Result};
use crate::func::Ctx;
pub(crate) use crate::go::quote as go_quote;
use crate::value::{Key, Value};

const DEFAULT_PRECISION: usize = 6;

pub(super) fn format_call(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let Value::String(fmt) = &args[0] else { return Err(Error::no_match()) };
    let Value::List(list) = &args[1] else { return Err(Error::no_match()) };
    format(fmt, list).map(Value::string).map_err(Error::new)
}

/// cel-go `parseFormatString`.
pub(crate) fn format(fmt: &str, args: &[Value]) -> std::result::Result<String, String> {
    let bytes = fmt.as_bytes();
    let mut out = String::with_capacity(fmt.len());
    let mut i = 0;
    let mut arg_index = 0usize;
    let mut literal_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        out.push_str(&fmt[literal_start..i]);
        if i + 1 < bytes.len() && bytes[i + 1] == b'%' {
            out.push('%');
            i += 2;
            literal_start = i;
            continue;
        }
        let Some(arg) = args.get(arg_index) else {
            return Err(format!("index {arg_index} out of range"));
        };
        if i + 1 >= bytes.len() {
            return Err("unexpected end of string".into());
        }
        let (read, text) = clause(&bytes[i + 1..], arg)?;
        out.push_str(&text);
        i += 1 + read;
        literal_start = i;
        arg_index += 1;
    }
    out.push_str(&fmt[literal_start..]);
    Ok(out)
}

/// `parseAndFormatClause`: the bytes after `%` consumed, and the text.
fn clause(spec: &[u8], arg: &Value) -> std::result::Result<(usize, String), String> {
    let parse_err = |e: String| format!("could not parse formatting clause: {e}");
    let (mut i, precision) =
        parse_precision(spec).map_err(|e| parse_err(format!("error while parsing precision: {e}")))?;
    let verb = spec[i];
    i += 1;
    let text = match verb {
        b's' => format_string(arg),
        b'd' => decimal(arg),
        b'f' => fixed(arg, precision),
        b'e' => scientific(arg, precision),
        b'b' => binary(arg),
        b'x' => hex(arg, false),
        b'X' => hex(arg, true),
        b'o' => octal(arg),
        other => return Err(parse_err(format!("unrecognized formatting clause \"{}\"", other as char))),
    };
    text.map(|t| (i, t)).map_err(|e| format!("error during formatting: {e}"))
}

/// `parsePrecision`: bytes read and the precision, if one is given.
fn parse_precision(spec: &[u8]) -> std::result::Result<(usize, Option<u64>), String> {
    if spec[0] != b'.' {
        return Ok((0, None));
    }
    let mut i = 1;
    loop {
        if i >= spec.len() {
            return Err("could not find end of precision specifier".into());
        }
        if !spec[i].is_ascii_digit() {
            break;
        }
        i += 1;
    }
    let digits = std::str::from_utf8(&spec[1..i]).unwrap_or_default();
    if digits.is_empty() {
        return Err(
            "error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax".into(),
        );
    }
    match digits.parse::<i64>() {
        Ok(p) => Ok((i, Some(p as u64))),
        Err(_) => Err(format!(
            "error while converting precision to integer: strconv.Atoi: parsing \"{digits}\": value out of range"
        )),
    }
}

fn string_clause_error(type_name: &str) -> String {
    format!(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {type_name}"
    )
}

/// `FormatString` (`%s`).
fn format_string(arg: &Value) -> std::result::Result<String, String> {
    match arg {
        Value::List(items) => format_list(items),
        Value::Map(map) => format_map(map),
        Value::Null => Ok("null".into()),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(
                "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string"
                    .into(),
            ),
        },
        Value::Optional(_) | Value::Object(_) => Err(string_clause_error(arg.type_name())),
        scalar => Ok(to_cel_string(scalar)),
    }
}

/// cel-go's `ConvertToType(StringType)` of a scalar.
pub(crate) fn to_cel_string(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => go_g(*d),
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Duration(d) => duration_string(*d),
        Value::Timestamp(t) => timestamp_string(t),
        Value::Type(t) => t.name().to_string(),
        Value::Null => "null".into(),
        other => other.type_name().to_string(),
    }
}

/// `clauseForType` then `quoteForCEL`: one element of a list or a map, as CEL would write it.
fn format_member(v: &Value) -> std::result::Result<String, String> {
    match v {
        Value::Int(i) => Ok(i.to_string()),
        Value::Uint(u) => Ok(u.to_string()),
        Value::String(s) => Ok(go_quote(s)),
        Value::Bytes(_) => Ok(format!("b{}", go_quote(&format_string(v)?))),
        Value::Bool(_) | Value::Null | Value::Type(_) => format_string(v),
        Value::Timestamp(t) => Ok(format!("timestamp({})", go_quote(&timestamp_string(t)))),
        Value::Duration(d) => Ok(format!("duration({})", go_quote(&duration_string(*d)))),
        Value::List(items) => format_list(items),
        Value::Map(map) => format_map(map),
        Value::Double(d) => {
            let text = go_fixed_plain(*d, DEFAULT_PRECISION);
            Ok(if d.is_finite() { text } else { go_quote(&text) })
        }
        other => Err(format!("no formatting function for {}", other.type_name())),
    }
}

fn format_list(items: &[Value]) -> std::result::Result<String, String> {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format_member(item)?);
    }
    out.push(']');
    Ok(out)
}

fn format_map(map: &crate::value::Map) -> std::result::Result<String, String> {
    let mut pairs = Vec::with_capacity(map.len());
    for (k, v) in map {
        let key = match k {
            Key::String(s) => go_quote(s),
            Key::Bool(b) => b.to_string(),
            Key::Int(i) => i.to_string(),
            Key::Uint(u) => u.to_string(),
        };
        pairs.push((key, format_member(v)?));
    }
    // Go's sort.SliceStable on the key texts (byte order).
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let entries: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    Ok(format!("{{{}}}", entries.join(", ")))
}

fn decimal(arg: &Value) -> std::result::Result<String, String> {
    match arg {
        Value::Int(i) => Ok(i.to_string()),
        Value::Uint(u) => Ok(u.to_string()),
        other => Err(format!("decimal clause can only be used on integers, was given {}", other.type_name())),
    }
}

/// The double a `%f`/`%e` clause takes: a double, or the strings `NaN`, `Infinity`, `-Infinity`.
fn float_arg(arg: &Value) -> Option<f64> {
    match arg {
        Value::Double(d) => Some(*d),
        Value::String(s) => match &**s {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

fn fixed(arg: &Value, precision: Option<u64>) -> std::result::Result<String, String> {
    let Some(d) = float_arg(arg) else {
        return Err(format!("fixed-point clause can only be used on doubles, was given {}", arg.type_name()));
    };
    Ok(en_us_fixed(d, precision.unwrap_or(DEFAULT_PRECISION as u64)))
}

fn scientific(arg: &Value, precision: Option<u64>) -> std::result::Result<String, String> {
    let Some(d) = float_arg(arg) else {
        return Err(format!("scientific clause can only be used on doubles, was given {}", arg.type_name()));
    };
    // cel-go: a missing precision is 6, written as the width too ("%6e").
    Ok(en_us_scientific(d, Some(precision.unwrap_or(DEFAULT_PRECISION as u64))))
}

fn signed_radix(negative: bool, magnitude: String) -> String {
    if negative {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

fn binary(arg: &Value) -> std::result::Result<String, String> {
    match arg {
        Value::Int(i) => Ok(signed_radix(*i < 0, format!("{:b}", i.unsigned_abs()))),
        Value::Uint(u) => Ok(format!("{u:b}")),
        Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
        other => Err(format!(
            "only integers and bools can be formatted as binary, was given {}",
            other.type_name()
        )),
    }
}

fn hex(arg: &Value, upper: bool) -> std::result::Result<String, String> {
    let bytes_hex = |b: &[u8]| -> String {
        b.iter().map(|x| if upper { format!("{x:02X}") } else { format!("{x:02x}") }).collect()
    };
    let num = |n: u64| if upper { format!("{n:X}") } else { format!("{n:x}") };
    match arg {
        Value::String(s) => Ok(bytes_hex(s.as_bytes())),
        Value::Bytes(b) => Ok(bytes_hex(b)),
        Value::Int(i) => Ok(signed_radix(*i < 0, num(i.unsigned_abs()))),
        Value::Uint(u) => Ok(num(*u)),
        other => Err(format!(
            "only integers, byte buffers, and strings can be formatted as hex, was given {}",
            other.type_name()
        )),
    }
}

fn octal(arg: &Value) -> std::result::Result<String, String> {
    match arg {
        Value::Int(i) => Ok(signed_radix(*i < 0, format!("{:o}", i.unsigned_abs()))),
        Value::Uint(u) => Ok(format!("{u:o}")),
        other => Err(format!("octal clause can only be used on integers, was given {}", other.type_name())),
    }
}

// ---- numbers as Go writes them ----

/// Go's `fmt.Sprintf("%g", d)`: the shortest digits, in exponent form when the exponent is
/// below -4 or at least 6 (`1e+06`, `1.5e-05`), else plain.
pub(crate) fn go_g(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let e = format!("{d:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{d}")
    }
}

/// Go's `fmt.Sprintf("%.<p>f", d)` (no grouping; `+Inf`, `-Inf`, `NaN`).
fn go_fixed_plain(d: f64, precision: usize) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    format!("{d:.precision$}")
}

/// Groups the integer digits by three with `,` (CLDR `#,##0` for `en`).
fn group_thousands(int_digits: &str) -> String {
    let n = int_digits.len();
    let mut out = String::with_capacity(n + n / 3);
    for (i, c) in int_digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// x/text `message.Printer(en-US).Sprintf("%.<p>f", d)`: at most `p` fraction digits (an int16
/// in x/text), at least `p mod 256` (a uint8 there), digits grouped by three.
fn en_us_fixed(d: f64, precision: u64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    let neg = d < 0.0;
    let sign = if neg { "-" } else { "" };
    if d.is_infinite() {
        return format!("{sign}∞");
    }
    let min_frac = (precision as u8) as usize;
    let max_frac = precision as i16;
    let abs = d.abs();
    let text =
        if max_frac >= 0 { format!("{abs:.prec$}", prec = max_frac as usize) } else { format!("{abs}") };
    let (int_part, frac_part) = text.split_once('.').unwrap_or((&text, ""));
    let mut frac = frac_part.trim_end_matches('0').to_string();
    while frac.len() < min_frac {
        frac.push('0');
    }
    let mut out = format!("{sign}{}", group_thousands(int_part));
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    }
    out
}

const SUPERSCRIPT_DIGITS: [&str; 10] = [
    "\u{2070}", "\u{b9}", "\u{b2}", "\u{b3}", "\u{2074}", "\u{2075}", "\u{2076}", "\u{2077}", "\u{2078}",
    "\u{2079}",
];

/// cel-go's `%e`: its `Scientific` builds `"%<p>e"` (a width, not a precision) for x/text's
/// `message.Printer(en-US)`: six fraction digits (`1.052033×10⁰³`, `-2.500000×10⁻⁰⁷`), padded
/// with spaces on the left to `p` code points (a uint16 in x/text).
fn en_us_scientific(d: f64, width: Option<u64>) -> String {
    let text = en_us_scientific_digits(d);
    let width = width.map_or(0, |w| (w as u16) as usize);
    let count = text.chars().count();
    if count < width {
        format!("{}{text}", " ".repeat(width - count))
    } else {
        text
    }
}

fn en_us_scientific_digits(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    let sign = if d < 0.0 { "-" } else { "" };
    if d.is_infinite() {
        return format!("{sign}∞");
    }
    let text = format!("{:.6e}", d.abs());
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut out = format!("{sign}{mantissa}×10");
    if exp < 0 {
        out.push('\u{207B}');
    }
    let digits = format!("{:02}", exp.unsigned_abs());
    for c in digits.bytes() {
        out.push_str(SUPERSCRIPT_DIGITS[(c - b'0') as usize]);
    }
    out
}

/// cel-go's duration as a string: Go's `strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"`.
pub(crate) fn duration_string(nanos: i64) -> String {
    let secs = (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
    format!("{secs}s")
}

/// cel-go's timestamp as a string: Go's `time.RFC3339Nano` in UTC.
pub(crate) fn timestamp_string(t: &jiff::Timestamp) -> String {
    let civil = t.to_zoned(jiff::tz::TimeZone::UTC);
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        civil.year(),
        civil.month(),
        civil.day(),
        civil.hour(),
        civil.minute(),
        civil.second()
    );
    let nanos = civil.subsec_nanosecond();
    if nanos != 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}
