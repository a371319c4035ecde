//! A Kubernetes quantity as `resource.Quantity` parses it and writes it back to JSON
//! (`k8s.io/apimachinery/pkg/api/resource/{quantity.go,amount.go,math.go,suffix.go}`):
//! [`parse`] keeps the text when it is already canonical and otherwise gives the canonical form
//! (`1000m` → `1`, `1536Mi` kept, `2048Ki` → `2Mi`, `1e3` kept, `1000` → `1k`).
//!
//! Only upstream's int64 path is ported: a quantity of at most 18 significant digits, at least
//! nano precision, whose value fits an int64. Others (upstream computes them with arbitrary
//! precision and rounds up to nano units) are kept as written.

const FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const SUFFIX: &str = "unable to parse quantity's suffix";
const NUMERIC: &str = "unable to parse numeric part of quantity";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

const DECIMAL: [(&str, i32); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY: [(&str, i32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

/// The JSON text Go writes for the quantity `text`, or the error `ParseQuantity` gives.
pub(crate) fn parse(text: &str) -> Result<String, &'static str> {
    if text.is_empty() {
        return Err(FORMAT);
    }
    if text == "0" {
        return Ok(text.to_owned());
    }
    let parts = split(text)?;
    let (_, exponent, format) = interpret(parts.suffix).ok_or(SUFFIX)?;
    let (mut scale, precision, shift) = match format {
        Format::DecimalExponent | Format::DecimalSI => {
            (exponent, 18 - (parts.num.len() + parts.denom.len()) as i32, 0)
        }
        Format::BinarySI if exponent >= 0 && parts.denom.is_empty() => {
            let precision = 15 - parts.num.len() as i32 - (exponent as f32 * 3.0 / 10.0) as i32 - 1;
            (0, precision, exponent)
        }
        Format::BinarySI => (0, -1, 0),
    };
    if precision >= 0 {
        scale -= parts.denom.len() as i32;
        if scale >= -9 {
            let shifted = format!("{}{}", parts.num, parts.denom);
            let value: i64 = shifted.parse().map_err(|_| NUMERIC)?;
            if let Some(result) = value.checked_mul(1i64 << shift) {
                let result = if parts.positive { result } else { -result };
                let canonical_as_written = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                if canonical_as_written {
                    return Ok(text.to_owned());
                }
                return Ok(canonical(result, scale, format));
            }
        }
    }
    // Upstream's arbitrary-precision path, for a binary quantity with a fraction that is a whole
    // number (`1.5Gi`); other cases are not ported.
    if format == Format::BinarySI && !parts.denom.is_empty() && exponent >= 0 {
        let digits = format!("{}{}", parts.num, parts.denom);
        let whole = digits.parse::<i128>().ok().and_then(|v| v.checked_mul(1i128 << exponent));
        let unit = 10i128.checked_pow(parts.denom.len() as u32);
        if let (Some(whole), Some(unit)) = (whole, unit) {
            if whole % unit == 0 {
                if let Ok(value) = i64::try_from(whole / unit) {
                    return Ok(canonical(if parts.positive { value } else { -value }, 0, format));
                }
            }
        }
    }
    Ok(text.to_owned())
}

struct Parts<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// `parseQuantityString`.
fn split(text: &str) -> Result<Parts<'_>, &'static str> {
    let b = text.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts { positive, num: "0", denom: "", suffix: "" });
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &text[start..pos] };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &text[start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(FORMAT);
    }
    Ok(Parts { positive, num, denom, suffix: &text[suffix_start..] })
}

/// `suffixHandler.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(i32, i32, Format)> {
    if let Some((_, e)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some((10, *e, Format::DecimalSI));
    }
    if let Some((_, e)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        return Some((2, *e, Format::BinarySI));
    }
    let rest = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let exponent: i64 = rest.parse().ok()?;
    Some((10, i32::try_from(exponent).ok()?, Format::DecimalExponent))
}

/// `Quantity.CanonicalizeBytes` of an int64 amount.
fn canonical(value: i64, scale: i32, format: Format) -> String {
    if value == 0 {
        return "0".into();
    }
    let mut format = format;
    let mut whole = value;
    if format == Format::BinarySI {
        let (as_int, exact) = as_scale_zero(value, scale);
        if (-1024 < value_at_scale0(value, scale) && value_at_scale0(value, scale) < 1024) || !exact {
            format = Format::DecimalSI;
        } else {
            whole = as_int;
        }
    }
    match format {
        Format::BinarySI => {
            let (amount, times) = remove_factors(whole, 1024);
            let suffix = BINARY.iter().find(|(_, e)| *e == times * 10).map_or("", |(s, _)| s);
            format!("{amount}{suffix}")
        }
        _ => {
            let (mut amount, times) = remove_factors(value, 10);
            let mut exponent = scale + times;
            let adjust = match exponent.rem_euclid(3) {
                1 => 1,
                2 => 2,
                _ => 0,
            };
            if adjust > 0 {
                match amount.checked_mul(10i64.pow(adjust)) {
                    Some(a) => {
                        amount = a;
                        exponent -= adjust as i32;
                    }
                    None => return format!("{value}e{scale}"),
                }
            }
            let suffix = match format {
                Format::DecimalExponent if exponent == 0 => String::new(),
                Format::DecimalExponent => format!("e{exponent}"),
                _ => DECIMAL
                    .iter()
                    .find(|(_, e)| *e == exponent)
                    .map_or(String::new(), |(s, _)| (*s).to_owned()),
            };
            format!("{amount}{suffix}")
        }
    }
}

/// The amount compared with ±1024 (`Quantity.CmpInt64`): its value at scale 0, rounded away
/// from zero.
fn value_at_scale0(value: i64, scale: i32) -> i64 {
    as_scale_zero(value, scale).0
}

/// `int64Amount.AsScale(0)` (when the scale is below 0) or the value scaled up: (value, exact).
fn as_scale_zero(value: i64, scale: i32) -> (i64, bool) {
    if scale >= 0 {
        return (value.checked_mul(10i64.saturating_pow(scale as u32)).unwrap_or(i64::MAX), true);
    }
    let mut v = value;
    let mut fraction = false;
    for _ in 0..(-scale) {
        if !fraction && v % 10 != 0 {
            fraction = true;
        }
        v /= 10;
        if v == 0 {
            return if fraction { (value.signum(), false) } else { (0, true) };
        }
    }
    if fraction {
        v += value.signum();
    }
    (v, !fraction)
}

/// `removeInt64Factors`.
fn remove_factors(value: i64, base: i64) -> (i64, i32) {
    let negative = value < 0;
    let mut result = value.abs();
    let mut times = 0;
    while result >= base && result % base == 0 {
        times += 1;
        result /= base;
    }
    (if negative { -result } else { result }, times)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn canonical_forms_as_upstream_writes_them() {
        for (written, canonical) in [
            ("1000m", "1"),
            ("100m", "100m"),
            ("1", "1"),
            ("1000", "1k"),
            ("1024", "1024"),
            ("1Gi", "1Gi"),
            ("2048Ki", "2Mi"),
            ("1536Mi", "1536Mi"),
            ("0.5", "500m"),
            ("1.5Gi", "1536Mi"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("10Mi", "10Mi"),
            ("1.0", "1"),
            ("-1000m", "-1"),
            ("0", "0"),
            ("00", "0"),
            ("+2G", "+2G"),
            ("12000k", "12M"),
        ] {
            assert_eq!(parse(written).as_deref(), Ok(canonical), "{written}");
        }
        assert!(parse("lots").is_err());
        assert_eq!(parse("1mi"), Err("unable to parse quantity's suffix"));
        assert!(parse("1Q").unwrap_err().starts_with("quantities must match"));
        assert!(parse("").is_err());
        assert!(parse("1.2.3").is_err());
    }
}
