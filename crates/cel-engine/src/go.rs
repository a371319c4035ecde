//! Go's text conventions the error messages and `format` reproduce.

/// Go's `strconv.Quote`: `\a \b \f \n \r \t \v \\ \"`, other control and non-printable code
/// points as `\xNN`, `\uNNNN` or `\UNNNNNNNN`, printable ones as they are.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and U+0020 (Unicode's
/// categories from the `regex` crate's tables, Unicode 16; Go 1.27's are Unicode 17).
fn go_is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    static PRINT: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let print = PRINT.get_or_init(|| regex::Regex::new(r"^[\p{L}\p{M}\p{N}\p{P}\p{S}]$").ok());
    let mut buf = [0u8; 4];
    print.as_ref().is_some_and(|re| re.is_match(c.encode_utf8(&mut buf)))
}
