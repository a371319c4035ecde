//! Go's `encoding/base64.StdEncoding.DecodeString` (`src/encoding/base64/base64.go`): how
//! the API server decodes every `[]byte` JSON field, such as a webhook's `caBundle` or a
//! webhook response's `patch`.
//!
//! Standard alphabet with `=` padding. `\r` and `\n` are skipped anywhere, including inside
//! the padding; the padding must be complete; non-zero trailing bits are accepted
//! (`StdEncoding` is not `Strict()`). The error is Go's `CorruptInputError`, whose offset
//! counts the original input, skipped line breaks included.

use serde::{Deserialize as _, Deserializer};

#[cfg(test)]
mod tests;

/// Go's `base64.CorruptInputError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {0}")]
pub(crate) struct CorruptInputError(pub(crate) usize);

/// `StdEncoding.DecodeString`.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, CorruptInputError> {
    let src = text.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut at = 0;
    while at < src.len() {
        let (next, quantum, len) = decode_quantum(src, at)?;
        out.extend_from_slice(&quantum[..len]);
        at = next;
    }
    Ok(out)
}

/// A `deserialize_with` helper for an `Option<Vec<u8>>` field holding Go's `[]byte` JSON
/// encoding: `null` or absent (with `#[serde(default)]`) is `None`, a string is decoded.
pub(crate) fn deserialize_option<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<u8>>, D::Error> {
    let text: Option<String> = Option::deserialize(deserializer)?;
    text.map(|text| decode(&text).map_err(serde::de::Error::custom)).transpose()
}

/// `decodeQuantum`: up to four symbols from `src[at..]`, skipping line breaks. Returns where
/// the next quantum starts and the decoded bytes (the first `len` of the three).
fn decode_quantum(src: &[u8], mut at: usize) -> Result<(usize, [u8; 3], usize), CorruptInputError> {
    let skip_line_breaks = |mut at: usize| {
        while src.get(at).is_some_and(|c| matches!(c, b'\r' | b'\n')) {
            at += 1;
        }
        at
    };
    let mut symbols = [0u8; 4];
    let mut count = 0;
    while count < symbols.len() {
        let Some(&c) = src.get(at) else {
            if count == 0 {
                return Ok((at, [0; 3], 0));
            }
            // Missing padding (`StdEncoding` requires it).
            return Err(CorruptInputError(at - count));
        };
        at += 1;
        if let Some(value) = symbol_value(c) {
            symbols[count] = value;
            count += 1;
            continue;
        }
        if matches!(c, b'\r' | b'\n') {
            continue;
        }
        if c != b'=' {
            return Err(CorruptInputError(at - 1));
        }
        // Padding: the end of the input, but for line breaks.
        match count {
            0 | 1 => return Err(CorruptInputError(at - 1)),
            2 => {
                // A second `=` must follow.
                at = skip_line_breaks(at);
                match src.get(at) {
                    None => return Err(CorruptInputError(src.len())),
                    Some(b'=') => at += 1,
                    Some(_) => return Err(CorruptInputError(at - 1)),
                }
            }
            _ => {}
        }
        at = skip_line_breaks(at);
        if at < src.len() {
            return Err(CorruptInputError(at)); // trailing garbage
        }
        break;
    }
    let value = symbols.iter().fold(0u32, |value, &symbol| (value << 6) | u32::from(symbol));
    let [_, first, second, third] = value.to_be_bytes();
    Ok((at, [first, second, third], count - 1))
}

/// The value of a symbol of the standard alphabet.
fn symbol_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}
