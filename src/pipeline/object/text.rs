//! Finding a container in an object's JSON text without parsing the rest: the containers a
//! patch writes to are found along their paths, parsed alone, patched and spliced back
//! (`pipeline/object.rs`).
//!
//! The text is valid JSON (the review decoded, and every splice is `serde_json`'s encoding of
//! a value), but nothing here relies on that: whatever does not scan as expected is `None`,
//! and the caller patches a tree of the whole object instead.

use std::ops::Range;

/// Where a path leads.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// An object or array, at this byte range.
    Container(Range<usize>),
    /// Nothing there, or a value that is not a container: Go's `findObject` fails.
    Missing,
}

/// Paths longer than this are left to the tree (whose parser refuses nesting deeper than 128).
const MAX_SEGMENTS: usize = 64;

/// Follows `segments` (unescaped) from the document `text` as Go's `findObject` does: object
/// members by name (the last of a repeated name, which is the one a decoder keeps), array
/// elements by index. `None` for a step this does not take (an index that is not plain
/// decimal digits, which Go reads by rules of its own, or a path deeper than
/// [`MAX_SEGMENTS`]) or text that does not scan.
///
/// One pass over the document: the members along the path are entered as they are met, and
/// every other value is skipped once.
pub(super) fn locate(text: &str, segments: &[String]) -> Option<Found> {
    if segments.len() > MAX_SEGMENTS {
        return None;
    }
    let bytes = text.as_bytes();
    let (_, found) = find(bytes, skip_whitespace(bytes, 0), segments)?;
    Some(found)
}

/// Scans the value starting at `at` to its end, following `segments` inside it: that end, and
/// where the segments lead.
fn find(bytes: &[u8], at: usize, segments: &[String]) -> Option<(usize, Found)> {
    let Some((segment, rest)) = segments.split_first() else {
        let end = skip_value(bytes, at)?;
        let found = match bytes.get(at)? {
            b'{' | b'[' => Found::Container(at..end),
            _ => Found::Missing,
        };
        return Some((end, found));
    };
    match bytes.get(at)? {
        b'{' => members(bytes, at, segment, rest),
        b'[' => elements(bytes, at, plain_index(segment)?, rest),
        // A string, number, `true`, `false` or `null` has no members.
        b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => Some((skip_value(bytes, at)?, Found::Missing)),
        _ => None,
    }
}

/// `0`, or digits not starting with `0`.
fn plain_index(segment: &str) -> Option<usize> {
    let plain = !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment == "0" || !segment.starts_with('0'));
    if plain {
        segment.parse().ok()
    } else {
        None
    }
}

/// The object opening at `open`, followed into the last member named `name` along `rest`.
fn members(bytes: &[u8], open: usize, name: &str, rest: &[String]) -> Option<(usize, Found)> {
    follow(bytes, open, b'}', rest, |at, _| {
        let key_end = skip_string(bytes, at)?;
        let key = bytes.get(at..key_end)?;
        let colon = skip_whitespace(bytes, key_end);
        if *bytes.get(colon)? != b':' {
            return None;
        }
        Some((skip_whitespace(bytes, colon + 1), key_is(key, name)?))
    })
}

/// The array opening at `open`, followed into element `index` along `rest`.
fn elements(bytes: &[u8], open: usize, index: usize, rest: &[String]) -> Option<(usize, Found)> {
    follow(bytes, open, b']', rest, |at, position| Some((at, position == index)))
}

/// The container opening at `open` and closing with `close`, followed along `rest` into the
/// item `choose` picks: given an item's start and position, `choose` returns where the item's
/// value starts and whether it is the one. Every other value is skipped; the last one picked
/// wins (a repeated member name).
fn follow(
    bytes: &[u8],
    open: usize,
    close: u8,
    rest: &[String],
    mut choose: impl FnMut(usize, usize) -> Option<(usize, bool)>,
) -> Option<(usize, Found)> {
    let mut found = Found::Missing;
    let end = each_item(bytes, open, close, |at, position| {
        let (value, chosen) = choose(at, position)?;
        if !chosen {
            return skip_value(bytes, value);
        }
        let (end, inside) = find(bytes, value, rest)?;
        found = inside;
        Some(end)
    })?;
    Some((end, found))
}

/// Walks the items (members or elements) of the container opening at `open` and closing with
/// `close`: `item` is given each item's start and position and returns its end. The
/// container's end.
fn each_item(
    bytes: &[u8],
    open: usize,
    close: u8,
    mut item: impl FnMut(usize, usize) -> Option<usize>,
) -> Option<usize> {
    let mut at = skip_whitespace(bytes, open + 1);
    if *bytes.get(at)? == close {
        return Some(at + 1);
    }
    for position in 0.. {
        at = skip_whitespace(bytes, item(at, position)?);
        match *bytes.get(at)? {
            b',' => at = skip_whitespace(bytes, at + 1),
            byte if byte == close => return Some(at + 1),
            _ => return None,
        }
    }
    None
}

/// Whether the quoted member name `quoted` is `name`; one with escapes is decoded first.
fn key_is(quoted: &[u8], name: &str) -> Option<bool> {
    let plain = quoted.get(1..quoted.len().checked_sub(1)?)?;
    if memchr::memchr(b'\\', plain).is_none() {
        return Some(plain == name.as_bytes());
    }
    let decoded: String = serde_json::from_slice(quoted).ok()?;
    Some(decoded == name)
}

/// The end (exclusive) of the value starting at `at`.
fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => skip_string(bytes, at),
        b'{' => skip_nested(bytes, at, b'{', b'}'),
        b'[' => skip_nested(bytes, at, b'[', b']'),
        // A number, `true`, `false` or `null`: up to what ends it.
        _ => {
            let rest = bytes.get(at..)?;
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(at + len)
        }
    }
}

/// The end of the string whose opening quote is at `at`, just past its closing quote.
fn skip_string(bytes: &[u8], at: usize) -> Option<usize> {
    if *bytes.get(at)? != b'"' {
        return None;
    }
    let mut at = at + 1;
    loop {
        at += next_of(
            bytes.get(at..)?,
            |b| matches!(b, b'"' | b'\\'),
            |rest| memchr::memchr2(b'"', b'\\', rest),
        )?;
        if *bytes.get(at)? == b'"' {
            return Some(at + 1);
        }
        // A backslash and the character it escapes (a `\u`'s hex digits are neither).
        at += 2;
    }
}

/// The end of the object or array opening at `at`. Inside an object the brackets of arrays
/// pair up among themselves (and the other way round), so only `open`, `close` and strings
/// need looking at.
fn skip_nested(bytes: &[u8], at: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = at;
    loop {
        at += next_of(
            bytes.get(at..)?,
            |b| b == b'"' || b == open || b == close,
            |rest| memchr::memchr3(b'"', open, close, rest),
        )?;
        match *bytes.get(at)? {
            b'"' => at = skip_string(bytes, at)?,
            byte if byte == open => {
                depth += 1;
                at += 1;
            }
            _ => {
                depth = depth.checked_sub(1)?;
                at += 1;
                if depth == 0 {
                    return Some(at);
                }
            }
        }
    }
}

/// Bytes looked at one by one before a search is handed to `memchr`, whose vectorized set-up a
/// short string or the gap between two does not repay (8 measured best: loadtest/README.md).
const SHORT: usize = 8;

/// The position of the first byte of `bytes` that is `wanted`, found by `search` beyond the
/// first [`SHORT`] bytes.
fn next_of(
    bytes: &[u8],
    wanted: impl Fn(u8) -> bool,
    search: impl Fn(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let head = bytes.len().min(SHORT);
    match bytes[..head].iter().position(|b| wanted(*b)) {
        Some(at) => Some(at),
        None => search(&bytes[head..]).map(|at| head + at),
    }
}

fn skip_whitespace(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    at + rest.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segments: &[&str]) -> Vec<String> {
        segments.iter().map(|s| (*s).to_owned()).collect()
    }

    fn at<'t>(text: &'t str, segments: &[&str]) -> Option<&'t str> {
        match locate(text, &path(segments)) {
            Some(Found::Container(range)) => text.get(range),
            _ => None,
        }
    }

    #[test]
    fn containers_are_found_along_members_and_elements() {
        let text =
            r#" {"a":"x{[\"}","b" : {"c":[1,{"d":{}} , "]"],"e":null},"b":{"c":[{"z":[]}],"n":-1.5e3}} "#;
        assert_eq!(at(text, &[]), Some(text.trim()));
        // The last of a repeated name, as a decoder keeps.
        assert_eq!(at(text, &["b"]), Some(r#"{"c":[{"z":[]}],"n":-1.5e3}"#));
        assert_eq!(at(text, &["b", "c"]), Some(r#"[{"z":[]}]"#));
        assert_eq!(at(text, &["b", "c", "0"]), Some(r#"{"z":[]}"#));
        assert_eq!(at(text, &["b", "c", "0", "z"]), Some("[]"));
        assert_eq!(locate(text, &path(&["b", "c", "1"])), Some(Found::Missing));
        assert_eq!(locate(text, &path(&["b", "n"])), Some(Found::Missing), "not a container");
        assert_eq!(locate(text, &path(&["a"])), Some(Found::Missing), "a string");
        assert_eq!(locate(text, &path(&["b", "n", "x"])), Some(Found::Missing));
        assert_eq!(locate(text, &path(&["nope", "x"])), Some(Found::Missing));
        // Indices Go reads by its own rules are left to the tree.
        let deep: Vec<String> = (0..65).map(|_| "a".to_owned()).collect();
        assert_eq!(locate(text, &deep), None, "a path deeper than the tree parser reads");
        for index in ["00", "-1", "+0", "01", "", "x"] {
            assert_eq!(locate(text, &path(&["b", "c", index])), None, "{index:?}");
        }
    }

    #[test]
    fn escaped_names_match_their_decoded_text() {
        let text = r#"{"a\/b":{"k":[]},"\u00e9":{"x":{}},"q\"":{}}"#;
        assert_eq!(at(text, &["a/b"]), Some(r#"{"k":[]}"#));
        assert_eq!(at(text, &["é", "x"]), Some("{}"));
        assert_eq!(at(text, &["q\""]), Some("{}"));
        assert_eq!(locate(text, &path(&["a\\/b"])), Some(Found::Missing));
    }

    #[test]
    fn text_that_does_not_scan_is_none_never_a_panic() {
        for text in ["", "{", r#"{"a":"#, r#"{"a":{"b":1}"#, r#"{"a" 1}"#, r#"{"a":[1,}"#, "}", r#"{"a":"\"#]
        {
            assert_eq!(locate(text, &path(&["a", "b"])), None, "{text:?}");
        }
    }
}
