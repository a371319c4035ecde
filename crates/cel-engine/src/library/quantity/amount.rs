//! apimachinery's `resource.Quantity` arithmetic and parsing (`quantity.go`, `amount.go`,
//! `math.go`, `suffix.go` of k8s.io/apimachinery 0.36), ported: its two forms, its rounding,
//! its overflow rules and its error texts.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use super::big::Big;
use crate::error::{Error, Result};

pub(super) const ERR_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
pub(super) const ERR_NUMERIC: &str = "unable to parse numeric part of quantity";
pub(super) const ERR_SUFFIX: &str = "unable to parse quantity's suffix";
/// Not upstream's: a decimal past this many digits is refused, where apimachinery would spend
/// minutes and gigabytes (`1111111111111111111e2000000000`).
pub(super) const ERR_TOO_LARGE: &str = "quantity is too large";
const MAX_DIGITS: u64 = 1_000_000;

/// `inf.Dec`: ±mag × 10^(−scale).
#[derive(Clone, Debug)]
pub(super) struct Dec {
    neg: bool,
    mag: Big,
    scale: i32,
}

impl Dec {
    fn sign(&self) -> i64 {
        if self.mag.is_zero() {
            0
        } else if self.neg {
            -1
        } else {
            1
        }
    }

    /// The value compared, exactly and without scaling far (`inf.Dec.Cmp`).
    fn cmp(&self, other: &Dec) -> Ordering {
        let (a, b) = (self.sign(), other.sign());
        if a != b || a == 0 {
            return a.cmp(&b);
        }
        let magnitude = Dec::cmp_mag(self, other);
        if a < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    fn cmp_mag(a: &Dec, b: &Dec) -> Ordering {
        // The order of magnitude first: digits − scale.
        let ea = a.mag.digits() as i64 - i64::from(a.scale);
        let eb = b.mag.digits() as i64 - i64::from(b.scale);
        if ea != eb {
            return ea.cmp(&eb);
        }
        // Same magnitude: the scale difference is at most the longer's digits.
        let (mut x, mut y) = (a.mag.clone(), b.mag.clone());
        match a.scale.cmp(&b.scale) {
            Ordering::Less => x.mul_pow10((i64::from(b.scale) - i64::from(a.scale)) as u64),
            Ordering::Greater => y.mul_pow10((i64::from(a.scale) - i64::from(b.scale)) as u64),
            Ordering::Equal => {}
        }
        x.cmp(&y)
    }

    /// Both at the larger scale (`inf`'s upscale), refused past [`MAX_DIGITS`].
    fn aligned(a: &Dec, b: &Dec) -> Result<(Big, Big, i32)> {
        let (mut x, mut y) = (a.mag.clone(), b.mag.clone());
        let scale = a.scale.max(b.scale);
        let grow = |m: &mut Big, from: i32| -> Result<()> {
            let k = (i64::from(scale) - i64::from(from)) as u64;
            if k > 0 && !m.is_zero() {
                if m.digits() + k > MAX_DIGITS {
                    return Err(Error::new(ERR_TOO_LARGE));
                }
                m.mul_pow10(k);
            }
            Ok(())
        };
        grow(&mut x, a.scale)?;
        grow(&mut y, b.scale)?;
        Ok((x, y, scale))
    }

    /// `inf.Dec.Add` (`negate_b`: `Sub`).
    fn add(a: &Dec, b: &Dec, negate_b: bool) -> Result<Dec> {
        let (mut x, y, scale) = Dec::aligned(a, b)?;
        let b_neg = b.neg != negate_b;
        if a.neg == b_neg {
            x.add_assign(&y);
            return Ok(Dec { neg: a.neg, mag: x, scale });
        }
        match x.cmp(&y) {
            Ordering::Less => {
                let mut y = y;
                y.sub_assign(&x);
                Ok(Dec { neg: b_neg, mag: y, scale })
            }
            _ => {
                x.sub_assign(&y);
                let neg = a.neg && !x.is_zero();
                Ok(Dec { neg, mag: x, scale })
            }
        }
    }
}

/// A decimal shared between quantities: in 1.36 (k8s.io/apiserver 0.36) `add` and `sub` copy
/// the receiver shallowly (`copy := *q`), so a decimal-form receiver and its result share one
/// `inf.Dec`, which the operation overwrites: `x.add(y)` changes `x` itself when `x` is
/// decimal (later versions copy deeply; upstream's test `add_does_not_mutate_receiver` is
/// newer than 1.36).
type DecCell = Arc<Mutex<Dec>>;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The two forms of `resource.Quantity`.
#[derive(Clone, Debug)]
pub(super) enum Amount {
    /// `int64Amount`: value × 10^scale.
    Int { value: i64, scale: i32 },
    /// `infDecAmount`.
    Dec(DecCell),
}

impl Amount {
    pub(super) fn as_dec(&self) -> Dec {
        match self {
            Amount::Int { value, scale } => {
                Dec { neg: *value < 0, mag: Big::from_u64(value.unsigned_abs()), scale: scale.wrapping_neg() }
            }
            Amount::Dec(d) => lock(d).clone(),
        }
    }

    pub(super) fn new_dec(dec: Dec) -> Amount {
        Amount::Dec(Arc::new(Mutex::new(dec)))
    }

    pub(super) fn is_dec(&self) -> bool {
        matches!(self, Amount::Dec(_))
    }

    pub(super) fn sign(&self) -> i64 {
        match self {
            Amount::Int { value, .. } => value.signum(),
            Amount::Dec(d) => lock(d).sign(),
        }
    }

    /// `Quantity.Cmp`: two int64 forms through `int64Amount.Cmp` (whose scale difference wraps
    /// as Go's int32 does, and then divides by zero: cel-go's recovered panic), else exactly.
    pub(super) fn cmp(&self, other: &Amount) -> Result<Ordering> {
        match (self, other) {
            (Amount::Int { value: av, scale: ascale }, Amount::Int { value: bv, scale: bscale }) => {
                int_cmp(*av, *ascale, *bv, *bscale).unwrap_or_else(|| Ok(self.as_dec().cmp(&other.as_dec())))
            }
            _ => Ok(self.as_dec().cmp(&other.as_dec())),
        }
    }

    /// `Quantity.AsInt64`.
    pub(super) fn as_i64(&self) -> Option<i64> {
        match *self {
            Amount::Dec(_) => None,
            Amount::Int { value, scale } => match scale.cmp(&0) {
                Ordering::Equal => Some(value),
                Ordering::Less => None,
                Ordering::Greater => positive_scale(value, scale),
            },
        }
    }

    /// `Quantity.AsApproximateFloat64`.
    pub(super) fn as_f64(&self) -> f64 {
        let (base, exponent) = match self {
            Amount::Dec(d) => {
                let d = lock(d);
                let m = d.mag.to_f64();
                (if d.neg { -m } else { m }, i64::from(d.scale.wrapping_neg()))
            }
            Amount::Int { value, scale } => (*value as f64, i64::from(*scale)),
        };
        if exponent == 0 {
            return base;
        }
        base * pow10(exponent)
    }

    /// `Quantity.Add` (`Sub` when `sub`) on a shallow copy of `self`: a decimal `self` is
    /// overwritten with the result, which shares it.
    pub(super) fn add(&self, y: &Amount, sub: bool) -> Result<Amount> {
        if let (Amount::Int { value: av, scale: ascale }, Amount::Int { value: bv, scale: bscale }) =
            (self, y)
        {
            let bv = if sub { bv.wrapping_neg() } else { *bv };
            if let Some(sum) = int_add(*av, *ascale, bv, *bscale) {
                return Ok(sum);
            }
        }
        let y = y.as_dec();
        match self {
            Amount::Dec(cell) => {
                let mut dec = lock(cell);
                let result = Dec::add(&dec, &y, sub)?;
                *dec = result;
                Ok(Amount::Dec(cell.clone()))
            }
            Amount::Int { .. } => Ok(Amount::new_dec(Dec::add(&self.as_dec(), &y, sub)?)),
        }
    }
}

/// `divideByScaleInt64`: `None` when inexact (a scale of 18 or more), an error for a wrapped,
/// negative scale (Go divides by `pow10Int64`'s 0 there).
fn divide_by_scale(base: i64, scale: i32) -> Option<Result<(i64, i64)>> {
    if scale == 0 {
        return Some(Ok((base, 0)));
    }
    if scale >= 18 {
        return None;
    }
    if scale < 0 {
        return Some(Err(Error::new("internal error: runtime error: integer divide by zero")));
    }
    let divisor = 10i64.pow(scale as u32);
    Some(Ok((base / divisor, base % divisor)))
}

/// `int64Amount.Cmp`; `None`: compare the decimal forms.
fn int_cmp(mut av: i64, ascale: i32, mut bv: i64, bscale: i32) -> Option<Result<Ordering>> {
    match ascale.cmp(&bscale) {
        Ordering::Equal => {}
        Ordering::Greater => {
            let (result, remainder) = match divide_by_scale(bv, ascale.wrapping_sub(bscale))? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            if result == av {
                return Some(Ok(0.cmp(&remainder)));
            }
            bv = result;
        }
        Ordering::Less => {
            let (result, remainder) = match divide_by_scale(av, bscale.wrapping_sub(ascale))? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            if result == bv {
                return Some(Ok(remainder.cmp(&0)));
            }
            av = result;
        }
    }
    Some(Ok(av.cmp(&bv)))
}

/// `int64Amount.Add`: `None` on overflow.
fn int_add(av: i64, ascale: i32, bv: i64, bscale: i32) -> Option<Amount> {
    if bv == 0 {
        return Some(Amount::Int { value: av, scale: ascale });
    }
    if av == 0 {
        return Some(Amount::Int { value: bv, scale: bscale });
    }
    match ascale.cmp(&bscale) {
        Ordering::Equal => Some(Amount::Int { value: av.checked_add(bv)?, scale: ascale }),
        Ordering::Greater => {
            let c = positive_scale(av, ascale.wrapping_sub(bscale))?;
            Some(Amount::Int { value: c.checked_add(bv)?, scale: bscale })
        }
        Ordering::Less => {
            let c = positive_scale(bv, bscale.wrapping_sub(ascale))?;
            Some(Amount::Int { value: av.checked_add(c)?, scale: ascale })
        }
    }
}

/// `positiveScaleInt64`: base × 10^scale, `None` on overflow; a negative scale (a wrapped
/// difference) leaves the base as it is, as upstream's loop does.
fn positive_scale(base: i64, scale: i32) -> Option<i64> {
    if base == 0 || scale <= 0 {
        return Some(base);
    }
    let mut value = base;
    for _ in 0..scale {
        value = value.checked_mul(10)?;
    }
    Some(value)
}

/// Go's `math.Pow10`.
fn pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288];
    const NEG32: [f64; 11] =
        [1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320];
    if (0..=308).contains(&n) {
        return POS32[(n / 32) as usize] * TAB[(n % 32) as usize];
    }
    if (-323..0).contains(&n) {
        let m = -n;
        return NEG32[(m / 32) as usize] / TAB[(m % 32) as usize];
    }
    if n > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}

/// What `parseQuantityString` returns.
struct Scanned<'a> {
    positive: bool,
    value: &'a [u8],
    num: &'a [u8],
    denom: &'a [u8],
    suffix: &'a [u8],
}

/// apimachinery's `parseQuantityString`, byte for byte.
fn scan(s: &[u8]) -> Result<Scanned<'_>, &'static str> {
    let end = s.len();
    let mut out = Scanned { positive: true, value: b"", num: b"", denom: b"", suffix: b"" };
    let mut pos = 0;
    if pos < end {
        match s[0] {
            b'-' => {
                out.positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    // Leading zeros.
    loop {
        if pos >= end {
            out.num = b"0";
            out.value = b"0";
            return Ok(out);
        }
        if s[pos] == b'0' {
            pos += 1;
        } else {
            break;
        }
    }
    // The numerator.
    let mut i = pos;
    loop {
        if i >= end {
            out.num = &s[pos..end];
            out.value = &s[..end];
            return Ok(out);
        }
        if !s[i].is_ascii_digit() {
            out.num = &s[pos..i];
            pos = i;
            break;
        }
        i += 1;
    }
    if out.num.is_empty() {
        out.num = b"0";
    }
    // The denominator.
    if pos < end && s[pos] == b'.' {
        pos += 1;
        let mut i = pos;
        loop {
            if i >= end {
                out.denom = &s[pos..end];
                out.value = &s[..end];
                return Ok(out);
            }
            if !s[i].is_ascii_digit() {
                out.denom = &s[pos..i];
                pos = i;
                break;
            }
            i += 1;
        }
    }
    out.value = &s[..pos];
    // The suffix.
    let suffix_start = pos;
    let mut i = pos;
    loop {
        if i >= end {
            out.suffix = &s[suffix_start..end];
            return Ok(out);
        }
        if !b"eEinumkKMGTP".contains(&s[i]) {
            pos = i;
            break;
        }
        i += 1;
    }
    if pos < end && (s[pos] == b'-' || s[pos] == b'+') {
        pos += 1;
    }
    let mut i = pos;
    loop {
        if i >= end {
            out.suffix = &s[suffix_start..end];
            return Ok(out);
        }
        if !s[i].is_ascii_digit() {
            return Err(ERR_FORMAT);
        }
        i += 1;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// `quantitySuffixer.interpret`: (base, exponent, format).
fn interpret(suffix: &[u8]) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        b"" => dec(0),
        b"n" => dec(-9),
        b"u" => dec(-6),
        b"m" => dec(-3),
        b"k" => dec(3),
        b"M" => dec(6),
        b"G" => dec(9),
        b"T" => dec(12),
        b"P" => dec(15),
        b"E" => dec(18),
        b"Ki" => bin(10),
        b"Mi" => bin(20),
        b"Gi" => bin(30),
        b"Ti" => bin(40),
        b"Pi" => bin(50),
        b"Ei" => bin(60),
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            let parsed = go_parse_i64(rest)?;
            Some((10, parsed as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)` (an optional sign, then digits).
fn go_parse_i64(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// apimachinery's `ParseQuantity`, with the error texts it returns.
pub(super) fn parse(text: &str) -> Result<Amount, &'static str> {
    if text.is_empty() {
        return Err(ERR_FORMAT);
    }
    if text == "0" {
        return Ok(Amount::Int { value: 0, scale: 0 });
    }
    let s = scan(text.as_bytes())?;
    let (base, exponent, format) = interpret(s.suffix).ok_or(ERR_SUFFIX)?;

    let (precision, mut scale, mantissa): (i64, i32, i64) = match format {
        Format::DecimalExponent | Format::DecimalSI => {
            (18 - (s.num.len() + s.denom.len()) as i64, exponent, 1)
        }
        Format::BinarySI if exponent >= 0 && s.denom.is_empty() => {
            (15 - s.num.len() as i64 - i64::from(exponent * 3 / 10) - 1, 0, 1i64 << exponent)
        }
        Format::BinarySI => (-1, 0, 1),
    };

    if precision >= 0 {
        scale = scale.wrapping_sub(s.denom.len() as i32);
        if scale >= -9 {
            let mut shifted = Vec::with_capacity(s.num.len() + s.denom.len());
            shifted.extend_from_slice(s.num);
            shifted.extend_from_slice(s.denom);
            let value = go_parse_i64(&shifted).ok_or(ERR_NUMERIC)?;
            if let Some(result) = value.checked_mul(mantissa) {
                let result = if s.positive { result } else { -result };
                return Ok(Amount::Int { value: result, scale });
            }
        }
    }

    // The decimal form (`inf.Dec.SetString` of the numeric part).
    let mut dec = dec_from_str(s.value).ok_or(ERR_NUMERIC)?;
    if base == 10 {
        dec.scale = dec.scale.wrapping_add(exponent.wrapping_neg());
    } else {
        dec.mag.mul_pow2(exponent as u32);
    }
    let negative = dec.neg && !dec.mag.is_zero();
    dec.neg = false;
    // Rounded up to nano units.
    if !dec.mag.is_zero() {
        match dec.scale.cmp(&9) {
            Ordering::Less => {
                let k = (9 - i64::from(dec.scale)) as u64;
                if dec.mag.digits() + k > MAX_DIGITS {
                    return Err(ERR_TOO_LARGE);
                }
                dec.mag.mul_pow10(k);
            }
            Ordering::Greater => dec.mag.div_pow10_ceil((i64::from(dec.scale) - 9) as u64),
            Ordering::Equal => {}
        }
        dec.scale = 9;
    }
    if format == Format::BinarySI {
        let max = Dec { neg: false, mag: Big::from_u64(i64::MAX as u64), scale: 0 };
        if dec.cmp(&max) == Ordering::Greater {
            dec = max;
        }
    }
    dec.neg = negative;
    Ok(Amount::new_dec(dec))
}

/// `inf.Dec.SetString`: an optional sign, digits with at most one point, at least one digit.
fn dec_from_str(s: &[u8]) -> Option<Dec> {
    let (neg, rest) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut digits = Vec::with_capacity(rest.len());
    let mut point = None;
    for &b in rest {
        match b {
            b'.' if point.is_none() => point = Some(digits.len()),
            b'0'..=b'9' => digits.push(b),
            _ => return None,
        }
    }
    if digits.is_empty() {
        return None;
    }
    let scale = point.map_or(0, |p| (digits.len() - p) as i32);
    Some(Dec { neg, mag: Big::from_digits(&digits), scale })
}
