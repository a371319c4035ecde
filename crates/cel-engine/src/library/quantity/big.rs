//! The little arbitrary-precision arithmetic `resource.Quantity` needs (its `inf.Dec` form):
//! unsigned magnitudes in base 10⁹ limbs, least significant first, so scaling by powers of ten
//! is cheap and printing is direct.

use std::cmp::Ordering;

const BASE: u64 = 1_000_000_000;

/// An unsigned integer of any size (no leading zero limbs; zero is no limbs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Big(Vec<u32>);

impl Big {
    pub(super) fn from_u64(mut v: u64) -> Big {
        let mut limbs = Vec::new();
        while v > 0 {
            limbs.push((v % BASE) as u32);
            v /= BASE;
        }
        Big(limbs)
    }

    /// From ASCII decimal digits (leading zeros allowed).
    pub(super) fn from_digits(digits: &[u8]) -> Big {
        let mut limbs = Vec::with_capacity(digits.len() / 9 + 1);
        let mut end = digits.len();
        while end > 0 {
            let start = end.saturating_sub(9);
            let mut limb = 0u32;
            for &d in &digits[start..end] {
                limb = limb * 10 + u32::from(d - b'0');
            }
            limbs.push(limb);
            end = start;
        }
        let mut big = Big(limbs);
        big.trim();
        big
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    pub(super) fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of decimal digits (0 for zero).
    pub(super) fn digits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(top) => (self.0.len() as u64 - 1) * 9 + u64::from(top.ilog10() + 1),
        }
    }

    /// Multiplies by a small factor (< 2³²).
    pub(super) fn mul_small(&mut self, factor: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(factor) + carry;
            *limb = (v % BASE) as u32;
            carry = v / BASE;
        }
        while carry > 0 {
            self.0.push((carry % BASE) as u32);
            carry /= BASE;
        }
        self.trim();
    }

    /// Multiplies by 10^k.
    pub(super) fn mul_pow10(&mut self, k: u64) {
        if self.is_zero() {
            return;
        }
        let limbs = (k / 9) as usize;
        if limbs > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, limbs));
        }
        self.mul_small(10u32.pow((k % 9) as u32));
    }

    /// Multiplies by 2^k.
    pub(super) fn mul_pow2(&mut self, mut k: u32) {
        while k > 0 {
            let step = k.min(29);
            self.mul_small(1 << step);
            k -= step;
        }
    }

    /// ⌈self / 10^k⌉.
    pub(super) fn div_pow10_ceil(&mut self, k: u64) {
        let limbs = (k / 9) as usize;
        let mut inexact = false;
        if limbs >= self.0.len() {
            let nonzero = !self.is_zero();
            self.0.clear();
            if nonzero {
                self.0.push(1);
            }
            return;
        }
        if self.0[..limbs].iter().any(|&l| l != 0) {
            inexact = true;
        }
        self.0.drain(..limbs);
        let divisor = 10u64.pow((k % 9) as u32);
        if divisor > 1 {
            let mut rem = 0u64;
            for limb in self.0.iter_mut().rev() {
                let v = rem * BASE + u64::from(*limb);
                *limb = (v / divisor) as u32;
                rem = v % divisor;
            }
            if rem != 0 {
                inexact = true;
            }
        }
        self.trim();
        if inexact {
            self.add_assign(&Big::from_u64(1));
        }
    }

    pub(super) fn add_assign(&mut self, other: &Big) {
        let mut carry = 0u64;
        let n = self.0.len().max(other.0.len());
        self.0.resize(n, 0);
        for i in 0..n {
            let v = u64::from(self.0[i]) + u64::from(other.0.get(i).copied().unwrap_or(0)) + carry;
            self.0[i] = (v % BASE) as u32;
            carry = v / BASE;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// self − other, with self ≥ other.
    pub(super) fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = i64::from(self.0[i]) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += BASE as i64;
                borrow = 1;
            }
            self.0[i] = v as u32;
        }
        self.trim();
    }

    pub(super) fn cmp(&self, other: &Big) -> Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// The decimal digits.
    pub(super) fn to_decimal(&self) -> String {
        let mut out = String::with_capacity(self.0.len() * 9 + 1);
        match self.0.last() {
            None => out.push('0'),
            Some(top) => {
                out.push_str(&top.to_string());
                for limb in self.0.iter().rev().skip(1) {
                    out.push_str(&format!("{limb:09}"));
                }
            }
        }
        out
    }

    /// The nearest double (ties to even), as Go's `big.Float.SetInt(x).Float64()`; +Inf past the
    /// range.
    pub(super) fn to_f64(&self) -> f64 {
        self.to_decimal().parse().unwrap_or(f64::INFINITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let mut a = Big::from_digits(b"000123456789123456789");
        assert_eq!(a.to_decimal(), "123456789123456789");
        assert_eq!(a.digits(), 18);
        a.mul_pow10(10);
        assert_eq!(a.to_decimal(), "1234567891234567890000000000");
        a.div_pow10_ceil(11);
        assert_eq!(a.to_decimal(), "12345678912345679");
        a.mul_pow2(60);
        assert_eq!(a.to_decimal(), (12345678912345679u128 << 60).to_string());
        let mut b = Big::from_u64(1);
        b.sub_assign(&Big::from_u64(1));
        assert!(b.is_zero());
        let mut c = Big::from_digits(b"1000000000000000000");
        c.sub_assign(&Big::from_u64(1));
        assert_eq!(c.to_decimal(), "999999999999999999");
        c.add_assign(&Big::from_u64(1));
        assert_eq!(c.to_decimal(), "1000000000000000000");
        assert_eq!(Big::from_u64(5).cmp(&Big::from_u64(40)), Ordering::Less);
        let mut d = Big::from_u64(1);
        d.div_pow10_ceil(40);
        assert_eq!(d.to_decimal(), "1");
        assert_eq!(Big::from_u64(0).to_decimal(), "0");
    }
}
