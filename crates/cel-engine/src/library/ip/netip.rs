//! Go's `net/netip` as the library uses it (Go 1.27's `ParseAddr`, `ParsePrefix`,
//! `Addr.String`, the predicates, `Prefix.Contains`, `Overlaps`, `Masked`), with its error
//! texts.

use std::fmt;

use crate::library::semver::go_quote;

/// An IPv4 or IPv6 address (IPv4 held as Go holds it, in the IPv4-mapped form).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Addr {
    v4: bool,
    bytes: [u8; 16],
    zone: Option<String>,
}

/// An address and a prefix length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prefix {
    pub(crate) addr: Addr,
    pub(crate) bits: u8,
}

fn addr_error(input: &str, msg: &str, at: Option<&str>) -> String {
    match at {
        Some(at) if !at.is_empty() => {
            format!("ParseAddr({}): {msg} (at {})", go_quote(input), go_quote(at))
        }
        _ => format!("ParseAddr({}): {msg}", go_quote(input)),
    }
}

impl Addr {
    fn from4(b: [u8; 4]) -> Addr {
        let mut bytes = [0u8; 16];
        bytes[10] = 0xff;
        bytes[11] = 0xff;
        bytes[12..].copy_from_slice(&b);
        Addr { v4: true, bytes, zone: None }
    }

    pub(crate) fn is_4(&self) -> bool {
        self.v4
    }

    pub(crate) fn has_zone(&self) -> bool {
        self.zone.is_some()
    }

    pub(crate) fn is_4in6(&self) -> bool {
        !self.v4
            && self.bytes[..10].iter().all(|&b| b == 0)
            && self.bytes[10] == 0xff
            && self.bytes[11] == 0xff
    }

    fn v4(&self, i: usize) -> u8 {
        self.bytes[12 + i]
    }

    fn v6u16(&self, i: usize) -> u16 {
        u16::from_be_bytes([self.bytes[2 * i], self.bytes[2 * i + 1]])
    }

    /// IPv4 and IPv4-mapped IPv6 addresses as IPv4 (Go's `Unmap`, for the predicates).
    fn unmapped(&self) -> Addr {
        if self.is_4in6() {
            let mut a = self.clone();
            a.v4 = true;
            a.zone = None;
            a
        } else {
            self.clone()
        }
    }

    fn bit_len(&self) -> u32 {
        if self.v4 {
            32
        } else {
            128
        }
    }

    pub(crate) fn is_unspecified(&self) -> bool {
        self.zone.is_none() && self.bytes == Addr::from4([0; 4]).bytes && self.v4
            || self.zone.is_none() && !self.v4 && self.bytes == [0; 16]
    }

    pub(crate) fn is_loopback(&self) -> bool {
        let ip = self.unmapped();
        if ip.v4 {
            ip.v4(0) == 127
        } else {
            ip.bytes[..15].iter().all(|&b| b == 0) && ip.bytes[15] == 1
        }
    }

    fn is_multicast(&self) -> bool {
        let ip = self.unmapped();
        if ip.v4 {
            ip.v4(0) & 0xf0 == 0xe0
        } else {
            ip.bytes[0] == 0xff
        }
    }

    pub(crate) fn is_link_local_multicast(&self) -> bool {
        let ip = self.unmapped();
        if ip.v4 {
            ip.v4(0) == 224 && ip.v4(1) == 0 && ip.v4(2) == 0
        } else {
            ip.v6u16(0) & 0xff0f == 0xff02
        }
    }

    pub(crate) fn is_link_local_unicast(&self) -> bool {
        let ip = self.unmapped();
        if ip.v4 {
            ip.v4(0) == 169 && ip.v4(1) == 254
        } else {
            ip.v6u16(0) & 0xffc0 == 0xfe80
        }
    }

    pub(crate) fn is_global_unicast(&self) -> bool {
        let ip = self.unmapped();
        if ip.v4 && (ip == Addr::from4([0; 4]) || ip == Addr::from4([255; 4])) {
            return false;
        }
        let v6_unspecified = !ip.v4 && ip.zone.is_none() && ip.bytes == [0; 16];
        !v6_unspecified && !ip.is_loopback() && !ip.is_multicast() && !ip.is_link_local_unicast()
    }

    /// The address with the bits past `bits` cleared (Go's `Addr.Prefix(bits).Addr()`).
    fn masked(&self, bits: u8) -> Addr {
        let mut a = self.clone();
        a.zone = None;
        let offset = if a.v4 { 96 } else { 0 };
        for bit in (offset + u32::from(bits))..128 {
            a.bytes[(bit / 8) as usize] &= !(0x80u8 >> (bit % 8));
        }
        a
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v4 {
            return write!(f, "{}.{}.{}.{}", self.v4(0), self.v4(1), self.v4(2), self.v4(3));
        }
        if self.is_4in6() {
            write!(f, "::ffff:{}.{}.{}.{}", self.v4(0), self.v4(1), self.v4(2), self.v4(3))?;
        } else {
            // The first longest run of two or more zero groups becomes `::`.
            let (mut zero_start, mut zero_end) = (8usize, 8usize);
            let mut i = 0;
            while i < 8 {
                let mut j = i;
                while j < 8 && self.v6u16(j) == 0 {
                    j += 1;
                }
                if j - i >= 2 && (zero_start == 8 || j - i > zero_end - zero_start) {
                    zero_start = i;
                    zero_end = j;
                }
                i = j.max(i + 1);
            }
            let mut i = 0;
            while i < 8 {
                if i == zero_start {
                    f.write_str("::")?;
                    i = zero_end;
                    if i >= 8 {
                        break;
                    }
                } else if i > 0 {
                    f.write_str(":")?;
                }
                write!(f, "{:x}", self.v6u16(i))?;
                i += 1;
            }
        }
        if let Some(zone) = &self.zone {
            write!(f, "%{zone}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

impl Prefix {
    /// `Prefix.Contains`: false across families.
    pub(crate) fn contains(&self, ip: &Addr) -> bool {
        if ip.has_zone() || self.addr.v4 != ip.v4 {
            return false;
        }
        self.addr.masked(self.bits) == ip.masked(self.bits)
    }

    /// `Prefix.Overlaps`.
    pub(crate) fn overlaps(&self, o: &Prefix) -> bool {
        if self == o {
            return true;
        }
        if self.addr.v4 != o.addr.v4 {
            return false;
        }
        let min = self.bits.min(o.bits);
        if min == 0 {
            return true;
        }
        self.addr.masked(min) == o.addr.masked(min)
    }

    /// `Prefix.Masked`.
    pub(crate) fn masked(&self) -> Prefix {
        Prefix { addr: self.addr.masked(self.bits), bits: self.bits }
    }
}

/// `parseIPv4Fields` over `input[off..end]`.
fn parse_ipv4_fields(input: &str, off: usize, end: usize) -> Result<[u8; 4], String> {
    let s = &input.as_bytes()[off..end];
    let text = &input[off..end];
    let mut fields = [0u8; 4];
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0);
    for i in 0..s.len() {
        let c = s[i];
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(addr_error(input, "IPv4 field has octet with leading zero", None));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(input, "IPv4 field must have at least one digit", Some(&text[i..])));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            fields[pos] = val as u8;
            pos += 1;
            val = 0;
            dig_len = 0;
        } else {
            return Err(addr_error(input, "unexpected character", Some(&text[i..])));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    fields[3] = val as u8;
    Ok(fields)
}

/// `parseIPv6`.
fn parse_ipv6(input: &str) -> Result<Addr, String> {
    let mut s = input;
    let mut zone = None;
    if let Some(i) = s.find('%') {
        let z = &s[i + 1..];
        if z.is_empty() {
            return Err(addr_error(input, "zone must be a non-empty string", None));
        }
        zone = Some(z.to_owned());
        s = &s[..i];
    }
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(Addr { v4: false, bytes: ip, zone });
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc: u32 = 0;
        while off < b.len() {
            let c = b[off];
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(digit);
            if off > 3 {
                return Err(addr_error(input, "each group must have 4 or less digits", Some(s)));
            }
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if off < b.len() && b[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            let mut end = input.len();
            if let Some(z) = &zone {
                end -= z.len() + 1;
            }
            let fields = parse_ipv4_fields(input, end - s.len(), end)?;
            ip[i..i + 4].copy_from_slice(&fields);
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(input, "unexpected character, want colon", Some(s)));
        } else if s.len() == 1 {
            return Err(addr_error(input, "colon must be followed by more characters", Some(s)));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(ellipsis) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        for j in (ellipsis..i).rev() {
            ip[j + n] = ip[j];
        }
        ip[ellipsis..ellipsis + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(input, "the :: must expand to at least one field of zeros", None));
    }
    Ok(Addr { v4: false, bytes: ip, zone })
}

/// `netip.ParseAddr`.
pub(crate) fn parse_addr(s: &str) -> Result<Addr, String> {
    for b in s.bytes() {
        match b {
            b'.' => return parse_ipv4_fields(s, 0, s.len()).map(Addr::from4),
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

/// `netip.ParsePrefix`.
pub(crate) fn parse_prefix(s: &str) -> Result<Prefix, String> {
    let err = |msg: &str| format!("netip.ParsePrefix({}): {msg}", go_quote(s));
    let Some(i) = s.rfind('/') else {
        return Err(err("no '/'"));
    };
    let addr = parse_addr(&s[..i]).map_err(|e| err(&e))?;
    if !addr.v4 && addr.zone.is_some() {
        return Err(err("IPv6 zones cannot be present in a prefix"));
    }
    let bits_str = &s[i + 1..];
    let bad_bits = || err(&format!("bad bits after slash: {}", go_quote(bits_str)));
    let b = bits_str.as_bytes();
    if b.len() > 1 && !(b'1'..=b'9').contains(&b[0]) {
        return Err(bad_bits());
    }
    // `strconv.Atoi`: an optional sign, then digits.
    let digits = bits_str.strip_prefix(['+', '-']).unwrap_or(bits_str);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad_bits());
    }
    let bits: i64 = bits_str.parse().map_err(|_| bad_bits())?;
    if bits < 0 || bits > i64::from(addr.bit_len()) {
        return Err(err("prefix length out of range"));
    }
    Ok(Prefix { addr, bits: bits as u8 })
}
