//! Go's `strconv.Quote` (what `%q` prints) and `strconv.Atoi` with its error
//! (`src/strconv/quote.go`, `src/strconv/atoi.go`).

use std::fmt::{self, Write as _};

mod print;
#[cfg(test)]
mod tests;

/// `strconv.Quote`: `text` in double quotes, with Go's escapes.
pub(crate) fn quote(text: &str) -> String {
    quote_bytes(text.as_bytes())
}

/// `strconv.Quote` of a Go string holding any bytes: each byte that is not part of valid
/// UTF-8 is written `\xNN`.
pub(crate) fn quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut out, c);
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('"');
    out
}

/// `appendEscapedRune` for a double-quoted string.
fn push_escaped(out: &mut String, c: char) {
    let _ = match c {
        '"' | '\\' => write!(out, "\\{c}"),
        c if print::is_print(c) => write!(out, "{c}"),
        '\u{7}' => write!(out, "\\a"),
        '\u{8}' => write!(out, "\\b"),
        '\u{c}' => write!(out, "\\f"),
        '\n' => write!(out, "\\n"),
        '\r' => write!(out, "\\r"),
        '\t' => write!(out, "\\t"),
        '\u{b}' => write!(out, "\\v"),
        '\0'..='\u{1f}' | '\u{7f}' => write!(out, "\\x{:02x}", u32::from(c)),
        '\u{80}'..='\u{ffff}' => write!(out, "\\u{:04x}", u32::from(c)),
        _ => write!(out, "\\U{:08x}", u32::from(c)),
    };
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign, then ASCII digits only, in
/// the `i64` range.
pub(crate) fn atoi(text: &str) -> Result<i64, AtoiError> {
    let error = |out_of_range| AtoiError { text: text.to_owned(), out_of_range };
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() {
        return Err(error(false));
    }
    let mut magnitude: u64 = 0;
    for byte in digits.bytes() {
        if !byte.is_ascii_digit() {
            return Err(error(false));
        }
        // Like `ParseUint`, an overflow is reported at once, before any later bad byte.
        magnitude = magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(byte - b'0')))
            .ok_or_else(|| error(true))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).ok_or_else(|| error(true))
    } else {
        i64::try_from(magnitude).map_err(|_| error(true))
    }
}

/// Go's `*strconv.NumError` from `Atoi`, e.g. `strconv.Atoi: parsing "x": invalid syntax`.
#[derive(Debug, thiserror::Error)]
pub struct AtoiError {
    text: String,
    out_of_range: bool,
}

impl fmt::Display for AtoiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problem = if self.out_of_range { "value out of range" } else { "invalid syntax" };
        write!(f, "strconv.Atoi: parsing {}: {problem}", quote(&self.text))
    }
}
