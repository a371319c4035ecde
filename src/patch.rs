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
use serde_json::Value;

use crate::go::json_errors;
use crate::go::json_marshal;
pub use crate::go::strconv::AtoiError;

mod apply;
#[cfg(test)]
mod tests;

use apply::{add, copy, kind, move_, pointer, remove, replace, replace_in, test, unescape, value_of, Parent};

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

/// The bytes all `copy` operations of one patch may duplicate: kube-apiserver's
/// `JSONPatchMaxCopyBytes` (staging/src/k8s.io/apiserver/pkg/server/config.go), which it sets as
/// json-patch's `AccumulatedCopySizeLimit` for every patch it applies, webhook patches included.
/// Without it a patch of a few operations can double a value until memory runs out.
pub const MAX_COPY_BYTES: u64 = 3 * 1024 * 1024;

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
