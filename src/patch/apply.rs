//! Applying one operation of a patch (`patch.rs`), each as its Go function in
//! `gopkg.in/evanphx/json-patch.v4` `patch.go`: the six operations, reading an operation's
//! members, and Go's `findObject` over JSON pointers.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{ApplyError, FieldError, Operation, TargetError, MAX_COPY_BYTES};
use crate::go::json_errors;
use crate::go::strconv::atoi;

// ---- the six operations, each as its Go function -------------------------------------------

pub(super) fn add(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "add", "path")?;
    let value = value_of(operation)?.unwrap_or(Value::Null);
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingPath { op: "add", path });
    };
    parent.add(key, value).map_err(failed_in("add", &path))
}

pub(super) fn remove(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
    let path = pointer(operation, "remove", "path")?;
    let Some((parent, key)) = find_parent(doc, &path) else {
        return Err(ApplyError::MissingPath { op: "remove", path });
    };
    parent.remove(&key).map_err(failed_in("remove", &path))?;
    Ok(())
}

pub(super) fn replace(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
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
pub(super) fn replace_in(parent: Parent<'_>, key: Cow<'_, str>, value: Value) -> Result<(), TargetError> {
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

pub(super) fn move_(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
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

pub(super) fn test(operation: &Operation, doc: &mut Value) -> Result<(), ApplyError> {
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

/// The size json-patch charges for copying `value`: its length as Go's `json.Marshal` writes it.
pub(super) fn marshalled_len(value: &Value) -> u64 {
    let compact = value.to_string();
    let mut go = String::with_capacity(compact.len());
    crate::go::json_marshal::push_compact(&mut go, &compact);
    go.len() as u64
}

pub(super) fn copy(operation: &Operation, doc: &mut Value, copied: &mut u64) -> Result<(), ApplyError> {
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
pub(super) fn failed_in<'a>(op: &'static str, path: &'a str) -> impl FnOnce(TargetError) -> ApplyError + 'a {
    move |cause| ApplyError::Target { op, path: path.to_owned(), cause }
}

// ---- reading an operation's members ---------------------------------------------------------

/// Go's `Operation.Kind`: the `op` string, or `unknown` if absent, `null` or not a string.
pub(super) fn kind(operation: &Operation) -> String {
    let op = operation.get("op").filter(|raw| raw.get() != "null");
    op.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_else(|| "unknown".into())
}

/// Go's `Operation.Path`/`From` (present, not `null`, a string), its error wrapped for `op`.
pub(super) fn pointer(
    operation: &Operation,
    op: &'static str,
    field: &'static str,
) -> Result<String, ApplyError> {
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
pub(super) fn value_of(operation: &Operation) -> Result<Option<Value>, ApplyError> {
    let value = operation.get("value").map(|raw| serde_json::from_str(raw.get()));
    value.transpose().map_err(ApplyError::Value)
}

// ---- JSON pointers, Go's findObject ---------------------------------------------------------

/// The container holding the member or element a pointer names.
pub(super) enum Parent<'d> {
    Object(&'d mut Map<String, Value>),
    Array(&'d mut Vec<Value>),
}

/// Go's `findObject`: the container of `path`'s last segment, and that segment unescaped.
///
/// The text before the first `/` is ignored, so `""` and `"a"` have no container and `"a/b"`
/// is `"/b"`. Every segment but the last must lead to an existing, non-null object or array.
pub(super) fn find_parent<'d, 'p>(doc: &'d mut Value, path: &'p str) -> Option<(Parent<'d>, Cow<'p, str>)> {
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
pub(super) fn unescape(segment: &str) -> Cow<'_, str> {
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
    pub(super) fn get(&self, key: &str) -> Result<Option<&Value>, TargetError> {
        match self {
            Parent::Object(map) => Ok(map.get(key)),
            Parent::Array(array) => Ok(array.get(existing_index(key, array.len())?)),
        }
    }

    /// Go's `container.add`: sets an object member; inserts into an array, where `-` and
    /// `len` append and a negative index counts from `len + 1`.
    pub(super) fn add(self, key: Cow<'_, str>, value: Value) -> Result<(), TargetError> {
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
    pub(super) fn remove(self, key: &str) -> Result<Value, TargetError> {
        match self {
            Parent::Object(map) => map.remove(key).ok_or_else(|| TargetError::NonexistentKey(key.to_owned())),
            Parent::Array(array) => Ok(array.remove(existing_index(key, array.len())?)),
        }
    }
}

/// The index of an existing element (Go's array get/set/remove).
pub(super) fn existing_index(key: &str, len: usize) -> Result<usize, TargetError> {
    resolve_index(atoi(key).map_err(TargetError::Index)?, len)
}

/// Go's bounds check with `SupportNegativeIndices = true`: `-bound <= index < bound`, and a
/// negative index counts from `bound`. The error shows the index as written.
pub(super) fn resolve_index(index: i64, bound: usize) -> Result<usize, TargetError> {
    let bound = i64::try_from(bound).unwrap_or(i64::MAX);
    if index >= bound || index < -bound {
        return Err(TargetError::InvalidIndex(index));
    }
    let resolved = if index < 0 { index + bound } else { index };
    usize::try_from(resolved).map_err(|_| TargetError::InvalidIndex(index))
}
