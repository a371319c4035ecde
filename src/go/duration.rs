//! Go's `time.ParseDuration` (`src/time/format.go`), in integers.
//!
//! `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with the units `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC),
//! `ms`, `s`, `m` and `h`, or a lone `0`; anything beyond the `i64` nanosecond range is an
//! error. Go adds a fraction's nanoseconds as `uint64(float64(f) * (float64(unit) / scale))`;
//! [`fraction_nanos`] reproduces those three IEEE roundings exactly, in integer arithmetic, so
//! that every input parses to Go's value (`0.3333333333333333333h` is exactly 20m, as in Go).

use std::fmt::Write as _;

#[cfg(test)]
mod tests;

/// `duration` in the largest of Go's units that writes it whole (`10s`, `1500ms`, `7ns`): text
/// [`parse`] reads back to the same value.
pub(crate) fn format(duration: std::time::Duration) -> String {
    let nanos = duration.as_nanos();
    for (unit, per) in [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if nanos >= per && nanos.is_multiple_of(per) {
            return format!("{}{unit}", nanos / per);
        }
    }
    format!("{nanos}ns")
}

/// `time.ParseDuration`: signed nanoseconds, or Go's error text.
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", quote(text));
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    // Special case: a lone zero needs no unit.
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while let Some(&first) = rest.as_bytes().first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let (whole, after_whole) = leading_int(rest).ok_or_else(invalid)?;
        let has_whole = after_whole.len() != rest.len();
        rest = after_whole;
        let (mut fraction, mut has_fraction) = (Fraction::default(), false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let after_fraction;
            (fraction, after_fraction) = leading_fraction(after_dot);
            has_fraction = after_fraction.len() != after_dot.len();
            rest = after_fraction;
        }
        if !has_whole && !has_fraction {
            return Err(invalid()); // no digits, e.g. `.s`
        }
        let unit_len = rest.bytes().position(|c| c == b'.' || c.is_ascii_digit()).unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(text)));
        }
        let (unit, after_unit) = rest.split_at(unit_len);
        rest = after_unit;
        let Some(unit_nanos) = unit_nanos(unit) else {
            return Err(format!("time: unknown unit {} in duration {}", quote(unit), quote(text)));
        };
        if whole > (1 << 63) / unit_nanos {
            return Err(invalid());
        }
        let mut nanos = whole * unit_nanos;
        if fraction.digits > 0 {
            nanos += fraction_nanos(fraction.digits, unit_nanos, fraction.scale);
            if nanos > 1 << 63 {
                return Err(invalid());
            }
        }
        // Go adds in `uint64`: 2^63 + 2^63 wraps to 0 and passes its check. Kept.
        total = total.wrapping_add(nanos);
        if total > 1 << 63 {
            return Err(invalid());
        }
    }
    if negative {
        // `-Duration(d)` with `d <= 2^63`: 2^63 is `i64::MIN`.
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// Nanoseconds per unit.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 60 * 60 * 1_000_000_000,
        _ => return None,
    })
}

/// `leadingInt`: the leading `[0-9]*` and the rest; `None` beyond 2^63.
fn leading_int(text: &str) -> Option<(u64, &str)> {
    let len = text.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(text.len());
    let mut value: u64 = 0;
    for c in text[..len].bytes() {
        if value > (1 << 63) / 10 {
            return None;
        }
        value = value * 10 + u64::from(c - b'0');
        if value > 1 << 63 {
            return None;
        }
    }
    Some((value, &text[len..]))
}

/// The digits after a decimal point, as `digits / scale`.
#[derive(Clone, Copy, Debug)]
struct Fraction {
    digits: u64,
    /// Go's `float64` `scale`: ten to the number of digits kept, leading zeros included (so
    /// beyond `u64`), each multiplication by ten rounded as Go's is; `None` once it is +Inf.
    scale: Option<Float>,
}

impl Default for Fraction {
    fn default() -> Self {
        Self { digits: 0, scale: Some(Float { mantissa: 1, exponent: 0 }) }
    }
}

/// `leadingFraction`: consumes `[0-9]*`, keeping digits while they fit.
fn leading_fraction(text: &str) -> (Fraction, &str) {
    let len = text.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(text.len());
    let mut fraction = Fraction::default();
    let mut overflow = false;
    for c in text[..len].bytes() {
        if overflow {
            continue;
        }
        if fraction.digits > ((1 << 63) - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = fraction.digits * 10 + u64::from(c - b'0');
        if next > 1 << 63 {
            overflow = true;
            continue;
        }
        fraction.digits = next;
        fraction.scale = fraction.scale.and_then(Float::times_ten);
    }
    (fraction, &text[len..])
}

/// `uint64(float64(digits) * (float64(unit) / float64(scale)))`, computed as IEEE 754 binary64
/// would compute it (round to nearest, ties to even, at each of the three steps), without
/// floating point. A `scale` of `None` is +Inf: the ratio, and the nanoseconds, are 0.
fn fraction_nanos(digits: u64, unit: u64, scale: Option<Float>) -> u64 {
    let Some(scale) = scale else { return 0 };
    let digits = Float::round(u128::from(digits), 0, false);
    // unit / scale, with enough quotient bits to round: shift `unit` up to 126 bits, and divide
    // by the scale's mantissa (at most 53 bits).
    let shift = 126 - (128 - u128::from(unit).leading_zeros());
    let shifted = u128::from(unit) << shift;
    let divisor = u128::from(scale.mantissa);
    let ratio = Float::round(shifted / divisor, -(shift as i32) - scale.exponent, shifted % divisor != 0);
    let product = Float::round(
        u128::from(digits.mantissa) * u128::from(ratio.mantissa),
        digits.exponent + ratio.exponent,
        false,
    );
    product.truncate()
}

/// A non-negative binary64 value: `mantissa * 2^exponent`, the mantissa below 2^53.
#[derive(Clone, Copy, Debug)]
struct Float {
    mantissa: u64,
    exponent: i32,
}

impl Float {
    /// Rounds `value * 2^exponent` to 53 significant bits, ties to even. `sticky`: the exact
    /// value is a little above `value * 2^exponent` (a discarded non-zero remainder).
    fn round(value: u128, exponent: i32, sticky: bool) -> Float {
        let bits = 128 - value.leading_zeros();
        if bits <= 53 {
            // Exact (callers pass `sticky` only with more than 53 bits).
            return Float { mantissa: value as u64, exponent };
        }
        let dropped = bits - 53;
        let mut mantissa = (value >> dropped) as u64;
        let remainder = value & ((1u128 << dropped) - 1);
        let half = 1u128 << (dropped - 1);
        let round_up = remainder > half || (remainder == half && (sticky || mantissa & 1 == 1));
        let mut exponent = exponent + dropped as i32;
        if round_up {
            mantissa += 1;
            if mantissa == 1 << 53 {
                mantissa >>= 1;
                exponent += 1;
            }
        }
        Float { mantissa, exponent }
    }

    /// `self * 10`, rounded; `None` if that overflows to +Inf (2^1024 or more).
    fn times_ten(self) -> Option<Float> {
        let product = Float::round(u128::from(self.mantissa) * 10, self.exponent, false);
        let bits = 64 - product.mantissa.leading_zeros();
        (bits as i32 + product.exponent <= 1024).then_some(product)
    }

    /// The conversion to `uint64`: towards zero.
    fn truncate(self) -> u64 {
        if self.exponent >= 0 {
            self.mantissa << self.exponent
        } else if self.exponent > -64 {
            self.mantissa >> -self.exponent
        } else {
            0
        }
    }
}

/// The `time` package's own `quote`: bytes outside printable ASCII as `\xNN`, `"` and `\`
/// escaped; not `strconv.Quote`.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for byte in text.bytes() {
        if !(b' '..0x80).contains(&byte) {
            let _ = write!(out, "\\x{byte:02x}");
        } else {
            if byte == b'"' || byte == b'\\' {
                out.push('\\');
            }
            out.push(char::from(byte));
        }
    }
    out.push('"');
    out
}
