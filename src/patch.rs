//! JSON Patch exactly as kube-apiserver applies a mutating webhook's patch (evanphx/json-patch v4).
//!
//! [`Patch::decode`] and [`Patch::apply`] reproduce `DecodePatch` and `Patch.Apply` of
//! `gopkg.in/evanphx/json-patch.v4` v4.13.0 with the package defaults kube-apiserver keeps
//! (negative indices allowed, no copy size limit), error texts included. v4 is not strict RFC
//! 6902, and its differences are kept on purpose: `replace` of a missing object member adds it;
//! negative array indices count from the end (`add` counts from `len + 1`, so `-1` appends);
//! `add`, `copy` and `move` only need the parent container; `copy` from a missing member, and
//! `add`/`replace` without `value`, write `null`; `test` with a `null` (or absent) value passes
//! on a missing or `null` member; a path's text before its first `/` is ignored (`a/b` acts as
//! `/b`) and a path without `/` (`""` included) is missing, except for `replace`/`test` of the
//! whole document.
//!
//! Where Go's behaviour is not reproduced (none of it is a patch a real webhook sends):
//! - The document is a `serde_json::Value`, so numbers are kept as `serde_json` keeps them
//!   (`1.0` stays a float, `1e2` becomes `100.0`) where Go copies a value's text verbatim.
//! - `test` compares scalars as decoded values; Go compares their compacted JSON text, so for Go
//!   `1.50` is not `1.5`, `"\u0061"` is not `"a"`, and a document string holding `<`, `>` or `&`
//!   (which Go's encoder escapes) never equals a value written plainly.
//! - Go panics on `test` of arrays holding `null`, and on `replace`/`test` of the whole document
//!   without `value`; here the arrays compare normally and the missing value fails
//!   (`replace operation value must be object or array…`, `testing value  failed…`).
//! - For Go, a member set to `null` by an earlier operation differs from one that was `null` in
//!   the document: a later `test` without `value` fails on the first and passes on the second.
//!   Here both pass.
//! - Go accepts invalid UTF-8, lone surrogates such as `\ud800` (read as U+FFFD) and nesting up
//!   to 10000. `serde_json` refuses these, and a `value` nested deeper than 128 or a number
//!   beyond `f64`, with its own message (or reads such an `op` as `unknown`).
//! - A document that is a scalar or `null` is refused (Go: a `json: cannot unmarshal` error for
//!   scalars, a panic for most operations on `null`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

#[cfg(test)]
mod tests;

/// One operation's members, in Go's `map[string]*json.RawMessage`: a repeated key keeps its
/// last value, and iteration is in bytewise key order, as Go marshals maps.
type Operation = BTreeMap<String, Box<RawValue>>;

/// A decoded patch: Go's `jsonpatch.Patch`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Patch {
    /// `None` is a `null` array element (Go: a nil `Operation`), which fails to apply.
    operations: Vec<Option<Operation>>,
}

/// Why a webhook's patch is not a JSON Patch; the text is Go's `json.Unmarshal` error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    /// Go's `*json.SyntaxError`, e.g. `invalid character 'x' looking for beginning of value`.
    #[error("{0}")]
    Syntax(String),
    /// Go's `*json.UnmarshalTypeError`: the patch is not an array, or an element not an object.
    #[error("json: cannot unmarshal {found} into Go value of type {target}")]
    Type { found: &'static str, target: &'static str },
    /// Valid for Go but not for `serde_json` (see the module documentation).
    #[error(transparent)]
    Unsupported(serde_json::Error),
}

/// Why a patch does not apply; the text is `evanphx/json-patch`'s, wrapping included.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplyError {
    #[error("json: cannot unmarshal {0} into Go value of type jsonpatch.partialDoc")]
    DocumentNotContainer(&'static str),
    #[error("Unexpected kind: {0}")]
    UnexpectedKind(String),
    #[error("{op} operation failed to decode {field}: {cause}")]
    Undecodable { op: &'static str, field: &'static str, cause: FieldError },
    /// `add` and `remove`.
    #[error("{op} operation does not apply: doc is missing path: \"{path}\": missing value")]
    MissingPath { op: &'static str, path: String },
    #[error("replace operation does not apply: doc is missing path: {0}: missing value")]
    ReplaceMissingPath(String),
    #[error("replace operation does not apply: doc is missing key: {0}: missing value")]
    ReplaceMissingKey(String),
    #[error("replace operation value must be object or array: %!w(<nil>)")]
    ReplaceDocumentNotContainer,
    #[error("test operation does not apply: is missing path: {0}: missing value")]
    TestMissingPath(String),
    #[error("testing value {0} failed: test failed")]
    TestFailed(String),
    /// `move` and `copy`.
    #[error("{op} operation does not apply: doc is missing from path: {from}: missing value")]
    MissingFrom { op: &'static str, from: String },
    /// `move` and `copy`.
    #[error("{op} operation does not apply: doc is missing destination path: {path}: missing value")]
    MissingDestination { op: &'static str, path: String },
    /// `add`, `remove`, `move` and `test`; for `move`'s source, `path` is the last segment only.
    #[error("error in {op} for path: '{path}': {cause}")]
    Target { op: &'static str, path: String, cause: TargetError },
    #[error("error in copy for from: '{from}': {cause}")]
    CopyFrom { from: String, cause: TargetError },
    #[error("error while adding value during copy: {0}")]
    CopyTo(TargetError),
    /// A `value` `serde_json` cannot hold (see the module documentation).
    #[error(transparent)]
    Value(serde_json::Error),
}

/// Why an operation's `path` or `from` member is unusable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FieldError {
    /// `add`, `remove` and `copy` report any `path` problem as just this.
    #[error("missing value")]
    Missing,
    #[error("operation missing path field: missing value")]
    MissingPath,
    #[error("operation, missing from field: missing value")]
    MissingFrom,
    #[error("json: cannot unmarshal {0} into Go value of type string")]
    NotString(&'static str),
    #[error(transparent)]
    Unsupported(serde_json::Error),
}

/// Why the container a pointer leads to has no such member or index.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("Unable to remove nonexistent key: {0}: missing value")]
    NonexistentKey(String),
    #[error("Unable to access invalid index: {0}: invalid index referenced")]
    InvalidIndex(i64),
    #[error(transparent)]
    Index(AtoiError),
    /// `add` to an array.
    #[error("value was not a proper array index: '{key}': {cause}")]
    NotArrayIndex { key: String, cause: AtoiError },
}

/// Go's `strconv.Atoi` error, e.g. `strconv.Atoi: parsing "x": invalid syntax`.
#[derive(Debug, thiserror::Error)]
pub(crate) struct AtoiError {
    text: String,
    out_of_range: bool,
}

impl fmt::Display for AtoiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problem = if self.out_of_range { "value out of range" } else { "invalid syntax" };
        write!(f, "strconv.Atoi: parsing {}: {problem}", go_quote(&self.text))
    }
}

impl Patch {
    /// Decodes a JSON array of operation objects, as Go's `jsonpatch.DecodePatch`.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Patch, DecodeError> {
        match serde_json::from_slice::<Option<Vec<Option<Operation>>>>(bytes) {
            Ok(operations) => Ok(Patch { operations: operations.unwrap_or_default() }),
            Err(error) => Err(explain_decode_error(bytes, error)),
        }
    }

    /// Whether the patch has no operations (kube-apiserver then treats it as no patch).
    pub(crate) fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.operations.len()
    }

    /// Applies the operations in order, in place. On error the document may be partly patched.
    pub(crate) fn apply(&self, doc: &mut Value) -> Result<(), ApplyError> {
        if !(doc.is_object() || doc.is_array()) {
            return Err(ApplyError::DocumentNotContainer(go_kind_of(doc)));
        }
        for operation in &self.operations {
            let Some(operation) = operation else {
                return Err(ApplyError::UnexpectedKind("unknown".into()));
            };
            match kind(operation).as_str() {
                "add" => add(operation, doc)?,
                "remove" => remove(operation, doc)?,
                "replace" => replace(operation, doc)?,
                "move" => move_(operation, doc)?,
                "test" => test(operation, doc)?,
                "copy" => copy(operation, doc)?,
                other => return Err(ApplyError::UnexpectedKind(other.to_owned())),
            }
        }
        Ok(())
    }

    /// The patch as Go's `json.Marshal` writes it for the audit annotation: compact, each
    /// operation's keys sorted, values as sent but compacted, `<`, `>`, `&`, U+2028 and U+2029
    /// escaped. (Go writes `null` for a patch decoded from `null`; kube-apiserver never
    /// annotates an empty patch.)
    pub(crate) fn annotation_json(&self) -> String {
        let mut out = String::from("[");
        for (i, operation) in self.operations.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let Some(operation) = operation else {
                out.push_str("null");
                continue;
            };
            out.push('{');
            for (j, (key, value)) in operation.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                push_go_json_string(&mut out, key);
                out.push(':');
                push_go_compact(&mut out, value.get());
            }
            out.push('}');
        }
        out.push(']');
        out
    }
}

// ---- the six operations, each as its Go function -------------------------------------------

fn add(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "add", "path")?;
    let value = value_of(operation)?.unwrap_or(Value::Null);
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingPath { op: "add", path });
    };
    parent.add(key, value).map_err(failed_in("add", &path))
}

fn remove(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "remove", "path")?;
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingPath { op: "remove", path });
    };
    parent.remove(&key).map_err(failed_in("remove", &path))?;
    Ok(())
}

fn replace(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "replace", "path")?;
    let value = value_of(operation)?;
    if path.is_empty() {
        let Some(value @ (Value::Object(_) | Value::Array(_))) = value else {
            return Err(ApplyError::ReplaceDocumentNotContainer);
        };
        *doc = value;
        return Ok(());
    }
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::ReplaceMissingPath(path));
    };
    let value = value.unwrap_or(Value::Null);
    match parent {
        // An object member need not exist: Go's partialDoc.get never fails.
        Parent::Object(map) => {
            map.insert(key.into_owned(), value);
        }
        Parent::Array(array) => match existing_index(&key, array.len()) {
            Ok(index) => array[index] = value,
            Err(_) => return Err(ApplyError::ReplaceMissingKey(path.clone())),
        },
    }
    Ok(())
}

fn move_(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let from = pointer(operation, "move", "from")?;
    let Some((parent, key)) = find_parent(doc, &from) else {
        return Err(ApplyError::MissingFrom { op: "move", from });
    };
    // Go's get-then-remove fails exactly when remove does; its message names the key only.
    let value = parent.remove(&key).map_err(failed_in("move", &key))?;
    // Only now is `path` read: a bad `path` fails after the source was removed, as in Go.
    let path = pointer(operation, "move", "path")?;
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingDestination { op: "move", path });
    };
    parent.add(key, value).map_err(failed_in("move", &path))
}

fn test(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "test", "path")?;
    let expected = value_of(operation)?;
    let passed = if path.is_empty() {
        expected.as_ref() == Some(&*doc)
    } else {
        let Some((parent, key)) = find_parent(doc, &path) else {
            return Err(ApplyError::TestMissingPath(path));
        };
        match (parent.get(&key).map_err(failed_in("test", &path))?, expected) {
            // Go: a missing member and a `null` one are both a nil node, which only `null` (or
            // no `value` at all) matches.
            (None | Some(Value::Null), expected) => matches!(expected, None | Some(Value::Null)),
            (Some(actual), Some(expected)) => *actual == expected,
            (Some(_), None) => false,
        }
    };
    if passed {
        Ok(())
    } else {
        Err(ApplyError::TestFailed(path))
    }
}

fn copy(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let from = pointer(operation, "copy", "from")?;
    let Some((parent, key)) = find_parent(doc, &from) else {
        return Err(ApplyError::MissingFrom { op: "copy", from });
    };
    let value = match parent.get(&key) {
        Ok(value) => value.cloned(),
        Err(cause) => return Err(ApplyError::CopyFrom { from: from.clone(), cause }),
    };
    let path = pointer(operation, "copy", "path")?;
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingDestination { op: "copy", path });
    };
    // A missing object member copies as `null` (Go deep-copies the nil node).
    parent.add(key, value.unwrap_or(Value::Null)).map_err(ApplyError::CopyTo)
}

/// Wraps a container's error as `error in <op> for path: '<path>': <cause>`.
fn failed_in<'a>(op: &'static str, path: &'a str) -> impl FnOnce(TargetError) -> ApplyError + 'a {
    move |cause| ApplyError::Target { op, path: path.to_owned(), cause }
}

// ---- reading an operation's members ---------------------------------------------------------

/// Go's `Operation.Kind`: the `op` string, or `unknown` if absent, `null` or not a string.
fn kind(operation: &Operation) -> String {
    let op = operation.get("op").filter(|raw| raw.get() != "null");
    op.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_else(|| "unknown".into())
}

/// Go's `Operation.Path`/`From` (present, not `null`, a string), its error wrapped for `op`.
fn pointer(operation: &Operation, op: &'static str, field: &'static str) -> Result<String, ApplyError> {
    let read = match operation.get(field).filter(|raw| raw.get() != "null") {
        None if field == "path" => Err(FieldError::MissingPath),
        None => Err(FieldError::MissingFrom),
        Some(raw) if !raw.get().starts_with('"') => {
            Err(FieldError::NotString(go_kind(raw.get().as_bytes().first().copied())))
        }
        Some(raw) => serde_json::from_str(raw.get()).map_err(FieldError::Unsupported),
    };
    read.map_err(|cause| {
        // `add`, `remove` and `copy` report any `path` problem as just `missing value`.
        let plain = field == "path" && matches!(op, "add" | "remove" | "copy");
        let cause = if plain { FieldError::Missing } else { cause };
        ApplyError::Undecodable { op, field, cause }
    })
}

/// The `value` member; `None` when absent (a present `null` is `Some(Value::Null)`).
fn value_of(operation: &Operation) -> Result<Option<Value>, ApplyError> {
    let value = operation.get("value").map(|raw| serde_json::from_str(raw.get()));
    value.transpose().map_err(ApplyError::Value)
}

// ---- JSON pointers, Go's findObject ---------------------------------------------------------

/// The container holding the member or element a pointer names.
enum Parent<'d> {
    Object(&'d mut Map<String, Value>),
    Array(&'d mut Vec<Value>),
}

/// Go's `findObject`: the container of `path`'s last segment, and that segment unescaped.
///
/// The text before the first `/` is ignored, so `""` and `"a"` have no container and `"a/b"`
/// is `"/b"`. Every segment but the last must lead to an existing, non-null object or array.
fn find_parent<'d, 'p>(doc: &'d mut Value, path: &'p str) -> Option<(Parent<'d>, Cow<'p, str>)> {
    let (_, rest) = path.split_once('/')?;
    let (ancestors, last) = match rest.rsplit_once('/') {
        Some((ancestors, last)) => (Some(ancestors), last),
        None => (None, rest),
    };
    let mut node = doc;
    for segment in ancestors.into_iter().flat_map(|ancestors| ancestors.split('/')) {
        let key = unescape(segment);
        node = match node {
            Value::Object(map) => map.get_mut(key.as_ref())?,
            Value::Array(array) => {
                let index = existing_index(&key, array.len()).ok()?;
                array.get_mut(index)?
            }
            _ => return None,
        };
    }
    match node {
        Value::Object(map) => Some((Parent::Object(map), unescape(last))),
        Value::Array(array) => Some((Parent::Array(array), unescape(last))),
        _ => None,
    }
}

/// RFC 6901 unescaping in one left-to-right pass: `~1` is `/`, `~0` is `~`.
fn unescape(segment: &str) -> Cow<'_, str> {
    if !segment.contains('~') {
        return Cow::Borrowed(segment);
    }
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('~', Some('1')) => {
                out.push('/');
                chars.next();
            }
            ('~', Some('0')) => {
                out.push('~');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

impl Parent<'_> {
    /// Go's `container.get`: a missing object member is `Ok(None)`; a bad index is an error.
    fn get(&self, key: &str) -> Result<Option<&Value>, TargetError> {
        match self {
            Parent::Object(map) => Ok(map.get(key)),
            Parent::Array(array) => Ok(array.get(existing_index(key, array.len())?)),
        }
    }

    /// Go's `container.add`: sets an object member; inserts into an array, where `-` and
    /// `len` append and a negative index counts from `len + 1`.
    fn add(self, key: Cow<'_, str>, value: Value) -> Result<(), TargetError> {
        match self {
            Parent::Object(map) => {
                map.insert(key.into_owned(), value);
            }
            Parent::Array(array) if key == "-" => array.push(value),
            Parent::Array(array) => {
                let index = atoi(&key)
                    .map_err(|cause| TargetError::NotArrayIndex { key: key.into_owned(), cause })?;
                let index = resolve_index(index, array.len() + 1)?;
                array.insert(index, value);
            }
        }
        Ok(())
    }

    /// Go's `container.remove`, returning what was removed.
    fn remove(self, key: &str) -> Result<Value, TargetError> {
        match self {
            Parent::Object(map) => map.remove(key).ok_or_else(|| TargetError::NonexistentKey(key.to_owned())),
            Parent::Array(array) => Ok(array.remove(existing_index(key, array.len())?)),
        }
    }
}

/// The index of an existing element (Go's array get/set/remove).
fn existing_index(key: &str, len: usize) -> Result<usize, TargetError> {
    resolve_index(atoi(key).map_err(TargetError::Index)?, len)
}

/// Go's bounds check with `SupportNegativeIndices = true`: `-bound <= index < bound`, and a
/// negative index counts from `bound`. The error shows the index as written.
fn resolve_index(index: i64, bound: usize) -> Result<usize, TargetError> {
    let bound = i64::try_from(bound).unwrap_or(i64::MAX);
    if index >= bound || index < -bound {
        return Err(TargetError::InvalidIndex(index));
    }
    let resolved = if index < 0 { index + bound } else { index };
    usize::try_from(resolved).map_err(|_| TargetError::InvalidIndex(index))
}

/// Go's `strconv.Atoi` on 64-bit: optional sign, ASCII digits only, `i64` range.
fn atoi(text: &str) -> Result<i64, AtoiError> {
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

// ---- Go's encoding/json, where its texts show ------------------------------------------------

/// The name Go's decoder gives a JSON value's kind, from its first byte.
fn go_kind(first: Option<u8>) -> &'static str {
    match first {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

fn go_kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Turns `serde_json`'s refusal into the error Go's `json.Unmarshal` gives: syntax errors first
/// (Go checks the whole input before decoding), then the first type error.
fn explain_decode_error(bytes: &[u8], error: serde_json::Error) -> DecodeError {
    if let Err(message) = go_check_valid(bytes) {
        return DecodeError::Syntax(message);
    }
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first != Some(b'[') {
        return DecodeError::Type { found: go_kind(first), target: "jsonpatch.Patch" };
    }
    if let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(bytes) {
        let mut firsts = elements.iter().map(|element| element.get().as_bytes().first().copied());
        if let Some(first) = firsts.find(|first| !matches!(first, Some(b'{' | b'n'))) {
            return DecodeError::Type { found: go_kind(first), target: "jsonpatch.Operation" };
        }
    }
    DecodeError::Unsupported(error)
}

/// Go's `encoding/json` `checkValid` (its scanner), for its syntax error texts.
fn go_check_valid(bytes: &[u8]) -> Result<(), String> {
    let mut scanner = GoScanner { state: ScanState::BeginValue, stack: Vec::new(), end_top: false };
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
const GO_MAX_NESTING_DEPTH: usize = 10_000;

struct GoScanner {
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

impl GoScanner {
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
                    _ => return Err(go_syntax_error(c, "looking for beginning of value")),
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
                    _ => return Err(go_syntax_error(c, "looking for beginning of object key string")),
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
                        (Nesting::ObjectKey, _) => return Err(go_syntax_error(c, "after object key")),
                        (Nesting::ObjectValue, b',') => {
                            *top = Nesting::ObjectKey;
                            ScanState::BeginString
                        }
                        (Nesting::ObjectValue, b'}') | (Nesting::ArrayValue, b']') => self.pop(),
                        (Nesting::ObjectValue, _) => {
                            return Err(go_syntax_error(c, "after object key:value pair"))
                        }
                        (Nesting::ArrayValue, b',') => ScanState::BeginValue,
                        (Nesting::ArrayValue, _) => return Err(go_syntax_error(c, "after array element")),
                    }
                }
                ScanState::EndTop if space => ScanState::EndTop,
                ScanState::EndTop => return Err(go_syntax_error(c, "after top-level value")),
                ScanState::InString => match c {
                    b'"' => ScanState::EndValue,
                    b'\\' => ScanState::InStringEsc,
                    0..=0x1f => return Err(go_syntax_error(c, "in string literal")),
                    _ => ScanState::InString,
                },
                ScanState::InStringEsc => match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => ScanState::InString,
                    b'u' => ScanState::InStringEscU(0),
                    _ => return Err(go_syntax_error(c, "in string escape code")),
                },
                ScanState::InStringEscU(read) if c.is_ascii_hexdigit() => match read {
                    3 => ScanState::InString,
                    _ => ScanState::InStringEscU(read + 1),
                },
                ScanState::InStringEscU(_) => {
                    return Err(go_syntax_error(c, "in \\u hexadecimal character escape"))
                }
                ScanState::Neg => match c {
                    b'0' => ScanState::Zero,
                    b'1'..=b'9' => ScanState::One,
                    _ => return Err(go_syntax_error(c, "in numeric literal")),
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
                ScanState::Dot => return Err(go_syntax_error(c, "after decimal point in numeric literal")),
                ScanState::Dot0 if c.is_ascii_digit() => ScanState::Dot0,
                ScanState::Dot0 if c == b'e' || c == b'E' => ScanState::E,
                ScanState::E if c == b'+' || c == b'-' => ScanState::ESign,
                ScanState::E | ScanState::ESign if c.is_ascii_digit() => ScanState::E0,
                ScanState::E | ScanState::ESign => {
                    return Err(go_syntax_error(c, "in exponent of numeric literal"))
                }
                ScanState::E0 if c.is_ascii_digit() => ScanState::E0,
                ScanState::Dot0 | ScanState::E0 => {
                    self.state = ScanState::EndValue;
                    continue;
                }
                ScanState::Literal(word, at) => {
                    let expected = word.as_bytes().get(at).copied().unwrap_or(b' ');
                    if c != expected {
                        let context = format!("in literal {word} (expecting {})", go_quote_char(expected));
                        return Err(go_syntax_error(c, &context));
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
        if self.stack.len() > GO_MAX_NESTING_DEPTH {
            return Err(go_syntax_error(c, "exceeded max depth"));
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

fn go_syntax_error(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", go_quote_char(c))
}

/// Go's `quoteChar`: a byte, read as a Latin-1 rune, in single quotes with `strconv.Quote`'s escapes.
fn go_quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => r#"'"'"#.into(),
        _ => {
            let mut out = String::from("'");
            push_go_quoted_char(&mut out, char::from(c));
            out.push('\'');
            out
        }
    }
}

/// Go's `strconv.Quote`.
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        push_go_quoted_char(&mut out, c);
    }
    out.push('"');
    out
}

fn push_go_quoted_char(out: &mut String, c: char) {
    let _ = match c {
        '"' | '\\' => write!(out, "\\{c}"),
        '\u{7}' => write!(out, "\\a"),
        '\u{8}' => write!(out, "\\b"),
        '\u{c}' => write!(out, "\\f"),
        '\n' => write!(out, "\\n"),
        '\r' => write!(out, "\\r"),
        '\t' => write!(out, "\\t"),
        '\u{b}' => write!(out, "\\v"),
        '\0'..='\u{1f}' | '\u{7f}' => write!(out, "\\x{:02x}", u32::from(c)),
        c if go_is_print(c) => write!(out, "{c}"),
        '\u{80}'..='\u{ffff}' => write!(out, "\\u{:04x}", u32::from(c)),
        _ => write!(out, "\\U{:08x}", u32::from(c)),
    };
}

/// Go's `unicode.IsPrint`, exact for Latin-1; beyond it, control, separator, common format and
/// private-use characters count as unprintable (Go's tables also exclude unassigned ones).
fn go_is_print(c: char) -> bool {
    let format_or_private = matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
            | '\u{f0000}'..
    );
    !(c.is_control() || (c.is_whitespace() && c != ' ') || format_or_private)
}

/// A JSON string as Go's `json.Marshal` writes it (HTML-safe).
fn push_go_json_string(out: &mut String, text: &str) {
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
fn push_go_compact(out: &mut String, json: &str) {
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
