//! cel-go's report of a set of errors (common/errors.go `Errors.ToDisplayString`, common/error.go
//! `Error.ToDisplayString`), as kube-apiserver prints it after `compilation failed: `:
//!
//! ```text
//! ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, double)'
//!  | 1 + 1.0
//!  | ..^
//! ```

use super::{CheckError, MAX_ERRORS};

/// The largest source line cel-go shows under an error (`maxSnippetLength`, in bytes).
const MAX_SNIPPET_LENGTH: usize = 16384;

/// `errors` of an expression whose source is `source`, one after another on their own lines,
/// sorted by position (stably: errors at one position keep their order; those without a
/// position come first), the first [`MAX_ERRORS`] of them and how many more there were.
pub fn display_errors(errors: &[CheckError], source: &str) -> String {
    let mut sorted: Vec<&CheckError> = errors.iter().collect();
    sorted.sort_by_key(|e| e.location.map(|l| (l.line, l.column)));
    let mut lines: Vec<String> = sorted.iter().take(MAX_ERRORS).map(|e| display_error(e, source)).collect();
    if errors.len() > MAX_ERRORS {
        lines.push(format!("{} more errors were truncated", errors.len() - MAX_ERRORS));
    }
    lines.join("\n")
}

/// One error: its 1-based line and column (`-1:0` without a position), its message, then the
/// source line and a caret under the column.
fn display_error(error: &CheckError, source: &str) -> String {
    let Some(location) = error.location else {
        return format!("ERROR: <input>:-1:0: {}", error.message);
    };
    let mut out = format!("ERROR: <input>:{}:{}: {}", location.line, location.column + 1, error.message);
    if let Some(line) = source_line(source, location.line).filter(|l| l.len() <= MAX_SNIPPET_LENGTH) {
        let line = line.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&line);
        out.push_str("\n | ");
        out.push_str(&caret(&line, location.column));
    }
    out
}

/// The 1-based `line` of `source` without its line feed (cel-go's `Source.Snippet`: none of
/// an empty source).
fn source_line(source: &str, line: usize) -> Option<&str> {
    if source.is_empty() {
        return None;
    }
    source.split('\n').nth(line.checked_sub(1)?)
}

/// A dot for each character before `column` and a caret under it, the full-width forms
/// (U+FF0E, U+FF3E) for a character of more than one byte in UTF-8, as cel-go pads.
fn caret(line: &str, column: usize) -> String {
    let wide = |c: char| c.len_utf8() > 1;
    let mut chars = line.chars();
    let mut out: String =
        chars.by_ref().take(column).map(|c| if wide(c) { '\u{ff0e}' } else { '.' }).collect();
    out.push(if chars.next().is_some_and(wide) { '\u{ff3e}' } else { '^' });
    out
}
