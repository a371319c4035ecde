//! The error texts of Go's `encoding/json` that a webhook's patch can surface: the scanner's
//! syntax errors (`src/encoding/json/scanner.go`) and the kind names of its type errors
//! (`src/encoding/json/decode.go`).

use serde_json::Value;

use super::strconv::quote;

#[cfg(test)]
mod tests;

/// The name Go's decoder gives a JSON value's kind in an `UnmarshalTypeError`, from the
/// value's first byte.
pub(crate) fn kind(first: Option<u8>) -> &'static str {
    match first {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// [`kind`] of a decoded value.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `checkValid`: runs Go's scanner over the whole input; the error is its `SyntaxError` text,
/// e.g. `invalid character 'x' looking for beginning of value`.
pub(crate) fn check_valid(bytes: &[u8]) -> Result<(), String> {
    let mut scanner = Scanner { state: ScanState::BeginValue, stack: Vec::new(), end_top: false };
    for &byte in bytes {
        scanner.step(byte)?;
    }
    // Go's `scanner.eof`: a trailing space completes a number or a literal.
    if !scanner.end_top {
        scanner.step(b' ')?;
    }
    if scanner.end_top {
        Ok(())
    } else {
        Err("unexpected end of JSON input".into())
    }
}

/// Go's scanner nesting limit.
const MAX_NESTING_DEPTH: usize = 10_000;

struct Scanner {
    state: ScanState,
    stack: Vec<Nesting>,
    end_top: bool,
}

#[derive(Clone, Copy)]
enum Nesting {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The states of Go's scanner that matter for validation, named after its `stateXxx` functions.
#[derive(Clone, Copy)]
enum ScanState {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`, expecting the byte at this position.
    Literal(&'static str, usize),
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), String> {
        let space = matches!(c, b' ' | b'\t' | b'\r' | b'\n');
        // Several Go states hand the byte on to another state; those `continue`.
        loop {
            self.state = match self.state {
                ScanState::BeginValueOrEmpty | ScanState::BeginValue if space => return Ok(()),
                ScanState::BeginValueOrEmpty if c == b']' => {
                    self.state = ScanState::EndValue;
                    continue;
                }
                ScanState::BeginValueOrEmpty | ScanState::BeginValue => match c {
                    b'{' => self.push(c, Nesting::ObjectKey, ScanState::BeginStringOrEmpty)?,
                    b'[' => self.push(c, Nesting::ArrayValue, ScanState::BeginValueOrEmpty)?,
                    b'"' => ScanState::InString,
                    b'-' => ScanState::Neg,
                    b'0' => ScanState::Zero,
                    b'1'..=b'9' => ScanState::One,
                    b't' => ScanState::Literal("true", 1),
                    b'f' => ScanState::Literal("false", 1),
                    b'n' => ScanState::Literal("null", 1),
                    _ => return Err(syntax_error(c, "looking for beginning of value")),
                },
                ScanState::BeginStringOrEmpty | ScanState::BeginString if space => return Ok(()),
                ScanState::BeginStringOrEmpty if c == b'}' => {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Nesting::ObjectValue;
                    }
                    self.state = ScanState::EndValue;
                    continue;
                }
                ScanState::BeginStringOrEmpty | ScanState::BeginString => match c {
                    b'"' => ScanState::InString,
                    _ => return Err(syntax_error(c, "looking for beginning of object key string")),
                },
                ScanState::EndValue => {
                    let Some(top) = self.stack.last_mut() else {
                        self.end_top = true;
                        self.state = ScanState::EndTop;
                        continue;
                    };
                    match (*top, c) {
                        _ if space => return Ok(()),
                        (Nesting::ObjectKey, b':') => {
                            *top = Nesting::ObjectValue;
                            ScanState::BeginValue
                        }
                        (Nesting::ObjectKey, _) => return Err(syntax_error(c, "after object key")),
                        (Nesting::ObjectValue, b',') => {
                            *top = Nesting::ObjectKey;
                            ScanState::BeginString
                        }
                        (Nesting::ObjectValue, b'}') | (Nesting::ArrayValue, b']') => self.pop(),
                        (Nesting::ObjectValue, _) => {
                            return Err(syntax_error(c, "after object key:value pair"))
                        }
                        (Nesting::ArrayValue, b',') => ScanState::BeginValue,
                        (Nesting::ArrayValue, _) => return Err(syntax_error(c, "after array element")),
                    }
                }
                ScanState::EndTop if space => ScanState::EndTop,
                ScanState::EndTop => return Err(syntax_error(c, "after top-level value")),
                ScanState::InString => match c {
                    b'"' => ScanState::EndValue,
                    b'\\' => ScanState::InStringEsc,
                    0..=0x1f => return Err(syntax_error(c, "in string literal")),
                    _ => ScanState::InString,
                },
                ScanState::InStringEsc => match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => ScanState::InString,
                    b'u' => ScanState::InStringEscU(0),
                    _ => return Err(syntax_error(c, "in string escape code")),
                },
                ScanState::InStringEscU(read) if c.is_ascii_hexdigit() => match read {
                    3 => ScanState::InString,
                    _ => ScanState::InStringEscU(read + 1),
                },
                ScanState::InStringEscU(_) => {
                    return Err(syntax_error(c, "in \\u hexadecimal character escape"))
                }
                ScanState::Neg => match c {
                    b'0' => ScanState::Zero,
                    b'1'..=b'9' => ScanState::One,
                    _ => return Err(syntax_error(c, "in numeric literal")),
                },
                ScanState::One if c.is_ascii_digit() => ScanState::One,
                ScanState::One | ScanState::Zero => match c {
                    b'.' => ScanState::Dot,
                    b'e' | b'E' => ScanState::E,
                    _ => {
                        self.state = ScanState::EndValue;
                        continue;
                    }
                },
                ScanState::Dot if c.is_ascii_digit() => ScanState::Dot0,
                ScanState::Dot => return Err(syntax_error(c, "after decimal point in numeric literal")),
                ScanState::Dot0 if c.is_ascii_digit() => ScanState::Dot0,
                ScanState::Dot0 if c == b'e' || c == b'E' => ScanState::E,
                ScanState::E if c == b'+' || c == b'-' => ScanState::ESign,
                ScanState::E | ScanState::ESign if c.is_ascii_digit() => ScanState::E0,
                ScanState::E | ScanState::ESign => {
                    return Err(syntax_error(c, "in exponent of numeric literal"))
                }
                ScanState::E0 if c.is_ascii_digit() => ScanState::E0,
                ScanState::Dot0 | ScanState::E0 => {
                    self.state = ScanState::EndValue;
                    continue;
                }
                ScanState::Literal(word, at) => {
                    let expected = word.as_bytes().get(at).copied().unwrap_or(b' ');
                    if c != expected {
                        let context = format!("in literal {word} (expecting {})", quote_char(expected));
                        return Err(syntax_error(c, &context));
                    }
                    if at + 1 == word.len() {
                        ScanState::EndValue
                    } else {
                        ScanState::Literal(word, at + 1)
                    }
                }
            };
            return Ok(());
        }
    }

    fn push(&mut self, c: u8, nesting: Nesting, next: ScanState) -> Result<ScanState, String> {
        self.stack.push(nesting);
        if self.stack.len() > MAX_NESTING_DEPTH {
            return Err(syntax_error(c, "exceeded max depth"));
        }
        Ok(next)
    }

    fn pop(&mut self) -> ScanState {
        self.stack.pop();
        if self.stack.is_empty() {
            self.end_top = true;
            ScanState::EndTop
        } else {
            ScanState::EndValue
        }
    }
}

fn syntax_error(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// `quoteChar`: a byte, read as a Latin-1 rune, in single quotes with `strconv.Quote`'s escapes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => r#"'"'"#.into(),
        _ => {
            let quoted = quote(char::from(c).encode_utf8(&mut [0; 4]));
            format!("'{}'", &quoted[1..quoted.len() - 1])
        }
    }
}
