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

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::go::json_errors;
use crate::go::json_marshal;
use crate::go::strconv::atoi;
pub use crate::go::strconv::AtoiError;

#[cfg(test)]
mod tests;

/// One operation's members, in Go's `map[string]*json.RawMessage`: a repeated key keeps its
/// last value, and iteration is in bytewise key order, as Go marshals maps.
type Operation = BTreeMap<String, Box<RawValue>>;

/// A decoded patch: Go's `jsonpatch.Patch`.
#[derive(Clone, Debug, Default)]
pub struct Patch {
    /// `None` is a `null` array element (Go: a nil `Operation`), which fails to apply.
    operations: Vec<Option<Operation>>,
    /// The length of the JSON it was decoded from.
    source_len: usize,
}

/// Why a webhook's patch is not a JSON Patch; the text is Go's `json.Unmarshal` error.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
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
pub enum ApplyError {
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
    /// The bytes `copy` operations duplicated in one patch passed [`MAX_COPY_BYTES`].
    #[error("Unable to complete the copy, the accumulated size increase of copy is {accumulated}, exceeding the limit {limit}")]
    CopySize { accumulated: u64, limit: u64 },
    /// A `value` `serde_json` cannot hold (see the module documentation).
    #[error(transparent)]
    Value(serde_json::Error),
}

/// Why an operation's `path` or `from` member is unusable.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
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
pub enum TargetError {
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

impl Patch {
    /// Decodes a JSON array of operation objects, as Go's `jsonpatch.DecodePatch`.
    pub fn decode(bytes: &[u8]) -> Result<Patch, DecodeError> {
        match serde_json::from_slice::<Option<Vec<Option<Operation>>>>(bytes) {
            Ok(operations) => {
                Ok(Patch { operations: operations.unwrap_or_default(), source_len: bytes.len() })
            }
            Err(error) => Err(explain_decode_error(bytes, error)),
        }
    }

    /// Whether the patch has no operations (kube-apiserver then treats it as no patch).
    pub(crate) fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// At least the bytes by which applying the patch can lengthen a document's compact
    /// encoding: every value it adds is written in it (and re-encodes to at most 5 times its
    /// text: `1e15` is `1000000000000000.0` to serde_json), and `copy` duplicates at most
    /// [`MAX_COPY_BYTES`].
    pub(crate) fn growth_bound(&self) -> u64 {
        let copies = self.operations.iter().flatten().any(|operation| kind(operation) == "copy");
        5 * self.source_len as u64 + if copies { MAX_COPY_BYTES } else { 0 }
    }

    /// How many operations the patch has.
    pub(crate) fn len(&self) -> usize {
        self.operations.len()
    }

    /// Applies the operations in order, in place. On error the document may be partly patched.
    /// `copy` operations may duplicate at most [`MAX_COPY_BYTES`] in all, as in the API server.
    pub fn apply(&self, doc: &mut Value) -> Result<(), ApplyError> {
        self.application().run(doc, usize::MAX)
    }

    /// The patch applied a few operations at a time ([`Application::run`]), so that a long
    /// patch can stop at a deadline and let other work run between its slices.
    pub(crate) fn application(&self) -> Application<'_> {
        Application { patch: self, next: 0, copied: 0 }
    }
}

/// A patch part way through being applied to one document: [`Patch::apply`] in slices.
///
/// Each operation costs time linear in its own size and its path's depth (an array insert or
/// removal also moves the elements after it, as Go's json-patch does), so a slice of a few
/// operations is short, and the caller decides between slices whether to go on.
#[derive(Debug)]
pub(crate) struct Application<'p> {
    patch: &'p Patch,
    /// The first operation not yet applied.
    next: usize,
    /// The bytes `copy` operations have duplicated so far ([`MAX_COPY_BYTES`]).
    copied: u64,
}

impl Application<'_> {
    /// Whether every operation has been applied.
    pub(crate) fn is_done(&self) -> bool {
        self.next >= self.patch.operations.len()
    }

    /// How many operations have been applied.
    pub(crate) fn applied(&self) -> usize {
        self.next
    }

    /// Applies up to `most` more operations to `doc`, which must be the document the earlier
    /// slices were applied to. On error the document may be partly patched.
    pub(crate) fn run(&mut self, doc: &mut Value, most: usize) -> Result<(), ApplyError> {
        if self.next == 0 && !(doc.is_object() || doc.is_array()) {
            return Err(ApplyError::DocumentNotContainer(json_errors::kind_of(doc)));
        }
        let end = self.next.saturating_add(most).min(self.patch.operations.len());
        while self.next < end {
            let Some(operation) = &self.patch.operations[self.next] else {
                return Err(ApplyError::UnexpectedKind("unknown".into()));
            };
            match kind(operation).as_str() {
                "add" => add(operation, doc)?,
                "remove" => remove(operation, doc)?,
                "replace" => replace(operation, doc)?,
                "move" => move_(operation, doc)?,
                "test" => test(operation, doc)?,
                "copy" => copy(operation, doc, &mut self.copied)?,
                other => return Err(ApplyError::UnexpectedKind(other.to_owned())),
            }
            self.next += 1;
        }
        Ok(())
    }
}

impl Patch {
    /// Where the operations can change a document: for each operation that writes, the
    /// pointer of the container its `path` (and a `move`'s `from`) lands in, as written; `""`
    /// (the whole document) where a pointer is missing or not a string. Everything a
    /// successful [`Patch::apply`] changes lies inside these containers.
    pub(crate) fn written_containers(&self) -> Vec<String> {
        let parent = |operation: &Operation, field: &str| -> String {
            let pointer: Option<String> =
                operation.get(field).and_then(|raw| serde_json::from_str(raw.get()).ok());
            match pointer {
                Some(pointer) if pointer.starts_with('/') => {
                    pointer[..pointer.rfind('/').unwrap_or(0)].to_owned()
                }
                // Go ignores the text before the first `/`: the whole document, to be safe.
                _ => String::new(),
            }
        };
        let mut containers = Vec::new();
        for operation in self.operations.iter().flatten() {
            match kind(operation).as_str() {
                "test" => {}
                "move" => {
                    containers.push(parent(operation, "from"));
                    containers.push(parent(operation, "path"));
                }
                _ => containers.push(parent(operation, "path")),
            }
        }
        containers
    }

    /// The JSON Pointers the writing operations (every one but `test`) write to, as written,
    /// in order: a `move`'s `from` and `path`, every other operation's `path`. Pointers only,
    /// never values (for reports that must not carry the object's contents).
    pub(crate) fn written_paths(&self) -> Vec<String> {
        let pointer = |operation: &Operation, field: &str| -> Option<String> {
            operation.get(field).and_then(|raw| serde_json::from_str(raw.get()).ok())
        };
        let mut paths = Vec::new();
        for operation in self.operations.iter().flatten() {
            match kind(operation).as_str() {
                "test" => {}
                "move" => paths
                    .extend([pointer(operation, "from"), pointer(operation, "path")].into_iter().flatten()),
                _ => paths.extend(pointer(operation, "path")),
            }
        }
        paths
    }

    /// Appends the operations that write (every one but `test`) to `out`, as JSON objects
    /// separated by commas, written as [`Patch::annotation_json`] writes them. Replayed in
    /// order on the object they were applied to, they reproduce it exactly; `test` operations
    /// already passed, and Go compares their values differently (see above), so they are left
    /// out.
    pub(crate) fn push_writes(&self, out: &mut String) {
        for operation in self.operations.iter().flatten() {
            if kind(operation) == "test" {
                continue;
            }
            if !out.is_empty() {
                out.push(',');
            }
            push_operation(out, operation);
        }
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
            push_operation(&mut out, operation);
        }
        out.push(']');
        out
    }
}

/// One operation as Go marshals it: keys sorted, values compacted.
fn push_operation(out: &mut String, operation: &Operation) {
    out.push('{');
    for (j, (key, value)) in operation.iter().enumerate() {
        if j > 0 {
            out.push(',');
        }
        json_marshal::push_string(out, key);
        out.push(':');
        json_marshal::push_compact(out, value.get());
    }
    out.push('}');
}

/// An `add`, `remove` or `replace` taken apart where Go's `findObject` takes it: the
/// container its path lands in, and the member or element there. `ObjectState`
/// (`pipeline/object.rs`) applies such steps to the container alone, found in the object's
/// text, instead of to a tree of the whole object.
#[derive(Debug)]
pub(crate) struct Step {
    op: StepOp,
    /// The path's segments but the last, unescaped: where the container is.
    pub(crate) container: Vec<String>,
    /// The last segment, unescaped.
    key: String,
    /// `value` for `add` and `replace` (`null` when absent, as in [`Patch::apply`]).
    value: Value,
}

#[derive(Clone, Copy, Debug)]
enum StepOp {
    Add,
    Remove,
    Replace,
}

impl Patch {
    /// The operations as [`Step`]s, if every one is an `add`, `remove` or `replace` whose
    /// `path` is a string starting with `/` (so not the whole document) and whose `value`
    /// decodes; otherwise `None`, and the patch is for [`Patch::apply`] on the whole document.
    pub(crate) fn steps(&self) -> Option<Vec<Step>> {
        let step = |operation: &Operation| {
            let op = match kind(operation).as_str() {
                "add" => StepOp::Add,
                "remove" => StepOp::Remove,
                "replace" => StepOp::Replace,
                _ => return None,
            };
            // The op named here only shapes error texts, which are not kept.
            let path = pointer(operation, "add", "path").ok()?;
            let rest = path.strip_prefix('/')?;
            let (container, key) = match rest.rsplit_once('/') {
                Some((container, key)) => {
                    (container.split('/').map(|s| unescape(s).into_owned()).collect(), key)
                }
                None => (Vec::new(), rest),
            };
            let value = match op {
                StepOp::Remove => Value::Null,
                StepOp::Add | StepOp::Replace => value_of(operation).ok()?.unwrap_or(Value::Null),
            };
            Some(Step { op, container, key: unescape(key).into_owned(), value })
        };
        self.operations.iter().map(|operation| step(operation.as_ref()?)).collect()
    }
}

impl Step {
    /// Applies the step to its container as the operation applies to the whole document once
    /// `findObject` has found that container. `Err` where the operation fails (a container
    /// that is neither object nor array, a missing member, a bad index): its text would name
    /// the wrong path, so the caller applies the whole patch to the document for Go's error.
    pub(crate) fn apply(&self, container: &mut Value) -> Result<(), ()> {
        let parent = match container {
            Value::Object(map) => Parent::Object(map),
            Value::Array(array) => Parent::Array(array),
            _ => return Err(()),
        };
        let key = Cow::Borrowed(self.key.as_str());
        let applied = match self.op {
            StepOp::Add => parent.add(key, self.value.clone()),
            StepOp::Remove => parent.remove(&key).map(drop),
            StepOp::Replace => replace_in(parent, key, self.value.clone()),
        };
        applied.map_err(drop)
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
    replace_in(parent, key, value.unwrap_or(Value::Null))
        .map_err(|_| ApplyError::ReplaceMissingKey(path.clone()))
}

/// The end of Go's `replace` once the container is found: an object member need not exist
/// (Go's partialDoc.get never fails); an array element must.
fn replace_in(parent: Parent<'_>, key: Cow<'_, str>, value: Value) -> Result<(), TargetError> {
    match parent {
        Parent::Object(map) => {
            map.insert(key.into_owned(), value);
        }
        Parent::Array(array) => {
            let index = existing_index(&key, array.len())?;
            array[index] = value;
        }
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

/// The bytes all `copy` operations of one patch may duplicate: kube-apiserver's
/// `JSONPatchMaxCopyBytes` (staging/src/k8s.io/apiserver/pkg/server/config.go), which it sets as
/// json-patch's `AccumulatedCopySizeLimit` for every patch it applies, webhook patches included.
/// Without it a patch of a few operations can double a value until memory runs out.
pub const MAX_COPY_BYTES: u64 = 3 * 1024 * 1024;

/// The size json-patch charges for copying `value`: its length as Go's `json.Marshal` writes it.
fn marshalled_len(value: &Value) -> u64 {
    let compact = value.to_string();
    let mut go = String::with_capacity(compact.len());
    crate::go::json_marshal::push_compact(&mut go, &compact);
    go.len() as u64
}

fn copy(operation: &Operation, doc: &mut Value, copied: &mut u64) -> Result<(), ApplyError> {
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
    let value = value.unwrap_or(Value::Null);
    *copied += marshalled_len(&value);
    if *copied > MAX_COPY_BYTES {
        return Err(ApplyError::CopySize { accumulated: *copied, limit: MAX_COPY_BYTES });
    }
    parent.add(key, value).map_err(ApplyError::CopyTo)
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
            Err(FieldError::NotString(json_errors::kind(raw.get().as_bytes().first().copied())))
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

/// Turns `serde_json`'s refusal into the error Go's `json.Unmarshal` gives: syntax errors first
/// (Go checks the whole input before decoding), then the first type error.
fn explain_decode_error(bytes: &[u8], error: serde_json::Error) -> DecodeError {
    if let Err(message) = json_errors::check_valid(bytes) {
        return DecodeError::Syntax(message);
    }
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first != Some(b'[') {
        return DecodeError::Type { found: json_errors::kind(first), target: "jsonpatch.Patch" };
    }
    if let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(bytes) {
        let mut firsts = elements.iter().map(|element| element.get().as_bytes().first().copied());
        if let Some(first) = firsts.find(|first| !matches!(first, Some(b'{' | b'n'))) {
            return DecodeError::Type { found: json_errors::kind(first), target: "jsonpatch.Operation" };
        }
    }
    DecodeError::Unsupported(error)
}
