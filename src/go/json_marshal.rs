//! How Go's `encoding/json` writes what the gateway re-encodes in Go's bytes: strings
//! (`appendString` in `src/encoding/json/encode.go`, HTML-safe as `json.Marshal` is) and a
//! `json.RawMessage` (`appendCompact` in `src/encoding/json/indent.go`, then HTML escaping).

use std::fmt::Write as _;

#[cfg(test)]
mod tests;

/// A JSON string as Go's `json.Marshal` writes it (HTML-safe). Copied in runs between the
/// characters it escapes.
pub(crate) fn push_string(out: &mut String, text: &str) {
    out.push('"');
    let mut run = 0;
    for (at, c) in text.char_indices() {
        if !matches!(c, '"' | '\\' | '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}') {
            continue;
        }
        out.push_str(&text[run..at]);
        run = at + c.len_utf8();
        let _ = match c {
            '"' | '\\' => write!(out, "\\{c}"),
            '\u{8}' => write!(out, "\\b"),
            '\u{c}' => write!(out, "\\f"),
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            '\t' => write!(out, "\\t"),
            _ => write!(out, "\\u{:04x}", u32::from(c)),
        };
    }
    out.push_str(&text[run..]);
    out.push('"');
}

/// Valid JSON text as Go's `json.Marshal` writes a `json.RawMessage`: whitespace outside strings
/// dropped, `<`, `>`, `&`, U+2028 and U+2029 escaped, everything else verbatim. Copied in runs
/// between the characters it drops or escapes.
pub(crate) fn push_compact(out: &mut String, json: &str) {
    let (mut in_string, mut escaped) = (false, false);
    let mut run = 0;
    for (at, c) in json.char_indices() {
        let dropped = if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            false
        } else if c == '"' {
            in_string = true;
            false
        } else {
            matches!(c, ' ' | '\t' | '\n' | '\r')
        };
        let html = matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}');
        if dropped || html {
            out.push_str(&json[run..at]);
            run = at + c.len_utf8();
            if html {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        }
    }
    out.push_str(&json[run..]);
}
