//! Timestamps and durations: Go's `time.ParseDuration` and `time.Parse(time.RFC3339, …)`, the
//! string forms cel-go gives them, and the accessors (`getFullYear` … `getMilliseconds`) in UTC
//! or in a time zone named as cel-go's `inTimeZone` reads it: an IANA name (Go's
//! `time.LoadLocation`, here the system's zoneinfo through jiff) or, when the text has a `:`,
//! a numeric offset (`+05:30`, `-08:00`) parsed with `strconv.Atoi` on each side of it.

use super::overload_error;
use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry};
use crate::go::quote as go_quote;
use crate::value::Value;

/// cel-go's range of timestamps: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
pub(crate) const MIN_UNIX: i64 = -62_135_596_800;
pub(crate) const MAX_UNIX: i64 = 253_402_300_799;

const NANOS: i64 = 1_000_000_000;

/// Where Go's `time.LoadLocation` finds zones first on Linux (as jiff does).
const ZONEINFO: &str = "/usr/share/zoneinfo";

macro_rules! accessors {
    ($(($func:ident, $name:literal, $field:ident)),* $(,)?) => {
        $(
            fn $func(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
                get(ctx, args, $name, Field::$field)
            }
        )*

        pub(super) fn register(registry: &mut Registry) {
            $(
                registry.method($name, 0, $func, Cost::Fixed(1));
                registry.method($name, 1, $func, Cost::Fixed(1));
            )*
        }
    };
}

accessors![
    (get_full_year, "getFullYear", FullYear),
    (get_month, "getMonth", Month),
    (get_day_of_year, "getDayOfYear", DayOfYear),
    (get_day_of_month, "getDayOfMonth", DayOfMonth),
    (get_date, "getDate", Date),
    (get_day_of_week, "getDayOfWeek", DayOfWeek),
    (get_hours, "getHours", Hours),
    (get_minutes, "getMinutes", Minutes),
    (get_seconds, "getSeconds", Seconds),
    (get_milliseconds, "getMilliseconds", Milliseconds),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    FullYear,
    Month,
    DayOfYear,
    DayOfMonth,
    Date,
    DayOfWeek,
    Hours,
    Minutes,
    Seconds,
    Milliseconds,
}

/// An accessor call: `ts.getX()`, `ts.getX(tz)`, `dur.getX()` (hours to milliseconds only).
fn get(_: &mut Ctx<'_>, args: &[Value], name: &str, field: Field) -> Result<Value> {
    match (args, field) {
        ([Value::Timestamp(t)], _) => timestamp_field(t, "UTC", field),
        ([Value::Timestamp(t), Value::String(tz)], _) => timestamp_field(t, tz, field),
        ([Value::Duration(d)], Field::Hours | Field::Minutes | Field::Seconds | Field::Milliseconds) => {
            Ok(Value::Int(duration_field(*d, field)))
        }
        _ => Err(overload_error(name, args)),
    }
}

/// cel-go's `DurationGetHours` and kin: Go's `Duration.Hours()` (a float) truncated, as Go
/// computes it; milliseconds are integer division.
pub(super) fn duration_field(d: i64, field: Field) -> i64 {
    let float_units = |unit: i64| {
        let whole = d / unit;
        let rest = d % unit;
        (whole as f64 + rest as f64 / unit as f64) as i64
    };
    match field {
        Field::Hours => float_units(3600 * NANOS),
        Field::Minutes => float_units(60 * NANOS),
        Field::Seconds => float_units(NANOS),
        _ => d / 1_000_000,
    }
}

/// A timestamp's Unix seconds (rounded down) and nanoseconds (0 to 999,999,999), as Go holds
/// a `time.Time`.
pub(crate) fn timestamp_parts(t: &jiff::Timestamp) -> (i64, i32) {
    let ns = t.as_nanosecond();
    let secs = ns.div_euclid(i128::from(NANOS)) as i64;
    let nanos = ns.rem_euclid(i128::from(NANOS)) as i32;
    (secs, nanos)
}

/// The timestamp `total` nanoseconds after the epoch, `timestamp overflow` outside cel-go's
/// range.
pub(crate) fn timestamp_from_nanos(total: i128) -> Result<jiff::Timestamp> {
    let secs = total.div_euclid(i128::from(NANOS));
    if secs < i128::from(MIN_UNIX) || secs > i128::from(MAX_UNIX) {
        return Err(Error::new("timestamp overflow"));
    }
    jiff::Timestamp::from_nanosecond(total).map_err(|_| Error::new("timestamp overflow"))
}

/// The civil fields of a moment, as Go's `Time` methods give them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Civil {
    pub year: i64,
    /// 1 to 12.
    pub month: i64,
    /// 1 to 31.
    pub day: i64,
    /// 1 to 366.
    pub yday: i64,
    /// 0 = Sunday.
    pub weekday: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
}

/// The civil fields of `secs` Unix seconds (already shifted by the zone's offset), in the
/// proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
pub(super) fn civil(secs: i64) -> Civil {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let yday = days - days_from_civil(year, 1, 1) + 1;
    Civil {
        year,
        month,
        day,
        yday,
        weekday: (days + 4).rem_euclid(7),
        hour: sod / 3600,
        minute: sod % 3600 / 60,
        second: sod % 60,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn timestamp_field(t: &jiff::Timestamp, tz: &str, field: Field) -> Result<Value> {
    let (secs, nanos) = timestamp_parts(t);
    let offset = zone_offset(t, tz)?;
    let c = civil(secs.wrapping_add(offset));
    Ok(Value::Int(match field {
        Field::FullYear => c.year,
        Field::Month => c.month - 1,
        Field::DayOfYear => c.yday - 1,
        Field::DayOfMonth => c.day - 1,
        Field::Date => c.day,
        Field::DayOfWeek => c.weekday,
        Field::Hours => c.hour,
        Field::Minutes => c.minute,
        Field::Seconds => c.second,
        Field::Milliseconds => i64::from(nanos / 1_000_000),
    }))
}

/// The offset east of UTC, in seconds, of the zone `tz` at `t` (cel-go's `inTimeZone`).
pub(super) fn zone_offset(t: &jiff::Timestamp, tz: &str) -> Result<i64> {
    let Some(colon) = tz.find(':') else {
        return load_location(tz).map(|zone| i64::from(zone.to_offset(*t).seconds()));
    };
    let hr = go_atoi(&tz[..colon])?;
    let min = go_atoi(&tz[colon + 1..])?;
    let offset = if tz.starts_with('-') {
        hr.wrapping_mul(60).wrapping_sub(min)
    } else {
        hr.wrapping_mul(60).wrapping_add(min)
    };
    // int((time.Duration(offset) * time.Minute).Seconds()), Go's wrapping arithmetic.
    let d = offset.wrapping_mul(60 * NANOS);
    let seconds = (d / NANOS) as f64 + (d % NANOS) as f64 / 1e9;
    Ok(seconds as i64)
}

/// Go's `time.LoadLocation`: `""` and `"UTC"` are UTC; `"Local"` is the server's zone (the
/// API server's container has none: UTC); other names are files of the zoneinfo database,
/// matched with their case.
fn load_location(name: &str) -> Result<jiff::tz::TimeZone> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return Ok(jiff::tz::TimeZone::UTC);
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err(Error::new("time: invalid location name"));
    }
    let found = jiff::tz::db().get(name);
    if let Ok(zone) = &found {
        if zone.iana_name() == Some(name) {
            return Ok(zone.clone());
        }
    }
    // Go reads the file itself: a directory is a read error, a file that is not TZif data is
    // malformed; a name found only without its case is not found.
    let path = std::path::Path::new(ZONEINFO).join(name);
    if path.is_dir() {
        return Err(Error::new("is a directory"));
    }
    if found.is_err() && path.is_file() {
        return Err(Error::new("malformed time zone information"));
    }
    Err(Error::new(format!("unknown time zone {name}")))
}

/// Go's `strconv.Atoi`, its error text included (`strconv.Atoi: parsing "x": invalid syntax`).
fn go_atoi(s: &str) -> Result<i64> {
    let syntax = || Error::new(format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(s)));
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    s.parse::<i64>()
        .map_err(|_| Error::new(format!("strconv.Atoi: parsing {}: value out of range", go_quote(s))))
}

/// cel-go's string of a duration: Go's `strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"`.
pub(crate) fn duration_string(d: i64) -> String {
    let secs = (d / NANOS) as f64 + (d % NANOS) as f64 / 1e9;
    format!("{secs}s")
}

/// cel-go's string of a timestamp: Go's `time.RFC3339Nano` (trailing zeros of the fraction
/// dropped), in UTC. cel-go prints the offset the timestamp was parsed with
/// (`timestamp('2023-01-01T00:00:00+05:00')` prints `+05:00`); `Value::Timestamp` does not keep
/// one, so such a timestamp prints in UTC here.
pub(crate) fn timestamp_string(t: &jiff::Timestamp) -> String {
    let (secs, nanos) = timestamp_parts(t);
    let c = civil(secs);
    let mut out =
        format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", c.year, c.month, c.day, c.hour, c.minute, c.second);
    if nanos != 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Go's `time.ParseDuration`: nanoseconds, `None` where Go errs.
pub(crate) fn go_parse_duration(s: &str) -> Option<i64> {
    let mut rest = s.as_bytes();
    let mut neg = false;
    if let Some((&c, tail)) = rest.split_first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            rest = tail;
        }
    }
    if rest == b"0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    const LIMIT: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !(rest[0] == b'.' || rest[0].is_ascii_digit()) {
            return None;
        }
        // leadingInt: [0-9]*, an error past 2^63.
        let mut v: u64 = 0;
        let mut i = 0;
        while i < rest.len() && rest[i].is_ascii_digit() {
            if v > LIMIT / 10 {
                return None;
            }
            v = v * 10 + u64::from(rest[i] - b'0');
            if v > LIMIT {
                return None;
            }
            i += 1;
        }
        let pre = i > 0;
        rest = &rest[i..];
        // leadingFraction: precision stops accumulating at overflow.
        let mut f: u64 = 0;
        let mut scale = 1f64;
        let mut post = false;
        if rest.first() == Some(&b'.') {
            rest = &rest[1..];
            let mut i = 0;
            let mut overflow = false;
            while i < rest.len() && rest[i].is_ascii_digit() {
                if !overflow {
                    if f > (LIMIT - 1) / 10 {
                        overflow = true;
                    } else {
                        let y = f * 10 + u64::from(rest[i] - b'0');
                        if y > LIMIT {
                            overflow = true;
                        } else {
                            f = y;
                            scale *= 10.0;
                        }
                    }
                }
                i += 1;
            }
            post = i > 0;
            rest = &rest[i..];
        }
        if !pre && !post {
            return None;
        }
        let unit_len = rest.iter().take_while(|&&c| c != b'.' && !c.is_ascii_digit()).count();
        if unit_len == 0 {
            return None;
        }
        let unit: u64 = match &rest[..unit_len] {
            b"ns" => 1,
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if v > LIMIT / unit {
            return None;
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        total += v;
        if total > LIMIT {
            return None;
        }
    }
    if neg {
        return Some((total as i64).wrapping_neg());
    }
    if total > LIMIT - 1 {
        return None;
    }
    Some(total as i64)
}

/// Go's `time.Parse(time.RFC3339, s)`: the Unix seconds and the nanoseconds, `None` where Go
/// errs. Go's fast path (`parseRFC3339`) and, where it fails, its general parser: a one-digit
/// hour, a `,` before the fraction and offsets up to `±24:60` are taken by the latter.
pub(crate) fn go_parse_rfc3339(s: &str) -> Option<(i64, i32)> {
    let b = s.as_bytes();
    let mut i = 0;
    let num = |i: &mut usize, min: usize, max: usize| -> Option<i64> {
        let start = *i;
        while *i < b.len() && *i - start < max && b[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i - start < min {
            return None;
        }
        std::str::from_utf8(&b[start..*i]).ok()?.parse().ok()
    };
    let lit = |i: &mut usize, c: u8| -> Option<()> { (b.get(*i) == Some(&c)).then(|| *i += 1) };
    let year = num(&mut i, 4, 4)?;
    lit(&mut i, b'-')?;
    let month = num(&mut i, 2, 2)?;
    lit(&mut i, b'-')?;
    let day = num(&mut i, 2, 2)?;
    lit(&mut i, b'T')?;
    let hour = num(&mut i, 1, 2)?;
    lit(&mut i, b':')?;
    let minute = num(&mut i, 2, 2)?;
    lit(&mut i, b':')?;
    let second = num(&mut i, 2, 2)?;
    let mut nanos = 0i64;
    if i + 1 < b.len() && (b[i] == b'.' || b[i] == b',') && b[i + 1].is_ascii_digit() {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        // Nine digits at most count (Go's parseNanoseconds).
        let digits = &s[start..i.min(start + 9)];
        nanos = digits.parse::<i64>().ok()? * 10i64.pow(9 - digits.len() as u32);
    }
    let offset = match b.get(i) {
        Some(b'Z') => {
            i += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            i += 1;
            let h = num(&mut i, 2, 2)?;
            lit(&mut i, b':')?;
            let m = num(&mut i, 2, 2)?;
            if h > 24 || m > 60 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    if i != b.len() {
        return None;
    }
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day < 1 || day > days_in_month[(month - 1) as usize] {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second - offset, nanos as i32))
}
