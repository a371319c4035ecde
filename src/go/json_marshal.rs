//! How Go's `encoding/json` writes what the gateway re-encodes in Go's bytes: strings
//! (`appendString` in `src/encoding/json/encode.go`, HTML-safe as `json.Marshal` is) and a
//! `json.RawMessage` (`appendCompact` in `src/encoding/json/indent.go`, then HTML escaping).

use std::fmt::Write as _;

#[cfg(test)]
mod tests;

/// A JSON string as Go's `json.Marshal` writes it (HTML-safe).
pub(crate) fn push_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        let _ = match c {
            '"' | '\\' => write!(out, "\\{c}"),
            '\u{8}' => write!(out, "\\b"),
            '\u{c}' => write!(out, "\\f"),
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            '\t' => write!(out, "\\t"),
            '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                write!(out, "\\u{:04x}", u32::from(c))
            }
            c => write!(out, "{c}"),
        };
    }
    out.push('"');
}

/// Valid JSON text as Go's `json.Marshal` writes a `json.RawMessage`: whitespace outside strings
/// dropped, `<`, `>`, `&`, U+2028 and U+2029 escaped, everything else verbatim.
pub(crate) fn push_compact(out: &mut String, json: &str) {
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        let _ = match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => write!(out, "\\u{:04x}", u32::from(c)),
            c => write!(out, "{c}"),
        };
    }
}
