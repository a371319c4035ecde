//! JSON Patch as `github.com/evanphx/json-patch/v5` `patch.go` applies it with its default
//! options (negative indices supported, no copy limit, no missing-path tolerance), the way
//! `k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/json_patch.go` calls it.
//!
//! One owned copy of the document is mutated in place; no operation copies the document.
//!
//! The operations are JSON as the plugin builds them: `op` and `path` strings, `from` when
//! non-empty, `value` when the CEL value was set. A `value` that is JSON `null` is the raw
//! `null` the plugin sends for CEL's null (not Go's absent value). Where upstream dereferences
//! a nil pointer (a node that is `null` reached as a container, a `test` comparing an object
//! with `null`, or an array holding `null`), kube-apiserver panics and answers HTTP 500; this
//! returns the panic's text `runtime error: invalid memory address or nil pointer dereference`
//! as an error instead.

use serde_json::Value;

mod node;

use crate::gofmt::json_kind;
use node::{clear_raw_nulls, equal, is_raw_null, op_value};

const NIL_DEREF: &str = "runtime error: invalid memory address or nil pointer dereference";

enum Fail {
    Error(String),
    /// `ErrTestFailed`: the plugin makes the whole patch a no-op.
    TestFailed,
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Error(s)
    }
}

fn nil_deref() -> Fail {
    Fail::Error(NIL_DEREF.into())
}

/// Applies `patch` (a JSON array of operation objects {op, path, from?, value?}) to `doc` with
/// evanphx/json-patch v5 semantics and default options, as json_patch.go does.
/// Ok(Some(new_doc)); Ok(None) when a `test` operation did not match (upstream: the whole
/// patch is a silent no-op); Err(text): upstream's error text without the "JSON Patch: "
/// prefix the plugin adds.
pub fn apply(doc: &Value, patch: &Value) -> Result<Option<Value>, String> {
    let ops: &[Value] = match patch {
        Value::Null => &[],
        Value::Array(ops) => ops,
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                json_kind(other)
            ))
        }
    };
    if let Some(op) = ops.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_kind(op)
        ));
    }
    let mut root = match doc {
        Value::Object(_) | Value::Array(_) => doc.clone(),
        Value::Null => return Err("unexpected JSON token in document node: <nil>".into()),
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type map[string]*jsonpatch.lazyNode",
                json_kind(other)
            ))
        }
    };
    for op in ops {
        let kind = match op.get("op") {
            Some(Value::String(s)) => s.as_str(),
            _ => "unknown",
        };
        let result = match kind {
            "add" => add(&mut root, op),
            "remove" => remove(&mut root, op),
            "replace" => replace(&mut root, op),
            "move" => move_op(&mut root, op),
            "test" => test(&mut root, op),
            "copy" => copy(&mut root, op),
            other => Err(Fail::Error(format!("Unexpected kind: {other}"))),
        };
        match result {
            Ok(()) => {}
            Err(Fail::TestFailed) => return Ok(None),
            Err(Fail::Error(e)) => return Err(e),
        }
    }
    if ops.iter().any(|op| op.get("value").is_some_and(Value::is_null)) {
        clear_raw_nulls(&mut root);
    }
    Ok(Some(root))
}

/// `Operation.Path()` / `From()`: the string, or the error text.
fn str_field(op: &Value, name: &str, missing: &str) -> Result<String, String> {
    match op.get(name) {
        None | Some(Value::Null) => Err(format!("{missing}: missing value")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => {
            Err(format!("json: cannot unmarshal {} into Go value of type string", json_kind(other)))
        }
    }
}

fn path_of(op: &Value) -> Result<String, String> {
    str_field(op, "path", "operation missing path field")
}

fn from_of(op: &Value) -> Result<String, String> {
    str_field(op, "from", "operation, missing from field")
}

/// `decodePatchKey`: `~1` → `/`, `~0` → `~`, left to right.
fn decode_key(k: &str) -> String {
    if !k.contains('~') {
        return k.to_string();
    }
    let mut out = String::with_capacity(k.len());
    let mut rest = k;
    while let Some(i) = rest.find('~') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("~1") {
            out.push('/');
            rest = r;
        } else if let Some(r) = tail.strip_prefix("~0") {
            out.push('~');
            rest = r;
        } else {
            out.push('~');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// `strconv.Atoi`.
fn atoi(s: &str) -> Result<i64, String> {
    s.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        format!("strconv.Atoi: parsing {}: {why}", crate::gofmt::quote(s))
    })
}

fn invalid_index(idx: i64) -> String {
    format!("Unable to access invalid index: {idx}: invalid index referenced")
}

/// `partialArray.get`'s index (also `set`'s).
fn array_index(key: &str, len: usize) -> Result<usize, String> {
    let mut idx = atoi(key)?;
    let len = len as i64;
    if idx < 0 {
        if idx < -len {
            return Err(invalid_index(idx));
        }
        idx += len;
    }
    if idx >= len {
        return Err(invalid_index(idx));
    }
    Ok(idx as usize)
}

/// `findObject`: the container of the path's last token and that token, None when a part of
/// the path is missing, null or not a container. The first token is dropped unread (the text
/// before the first `/`).
fn find_object<'a>(root: &'a mut Value, path: &str) -> Result<Option<(&'a mut Value, String)>, Fail> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return Ok(None);
    }
    let mut cur = root;
    for part in &split[1..split.len() - 1] {
        let key = decode_key(part);
        let next = match cur {
            Value::Object(m) => m.get_mut(&key),
            Value::Array(a) => match array_index(&key, a.len()) {
                Ok(i) => a.get_mut(i),
                Err(_) => None,
            },
            _ => return Err(nil_deref()),
        };
        match next {
            Some(v @ (Value::Object(_) | Value::Array(_))) => cur = v,
            Some(v) if is_raw_null(v) => cur = v,
            _ => return Ok(None),
        }
    }
    Ok(Some((cur, decode_key(split[split.len() - 1]))))
}

/// `container.get`: the value, or the error and whether its cause is `ErrMissing`.
fn get<'a>(con: &'a Value, key: &str) -> Result<&'a Value, (String, bool)> {
    match con {
        Value::Object(m) => {
            m.get(key).ok_or_else(|| (format!("unable to get nonexistent key: {key}: missing value"), true))
        }
        Value::Array(a) => array_index(key, a.len()).map(|i| &a[i]).map_err(|e| (e, false)),
        _ => Err((NIL_DEREF.into(), false)),
    }
}

/// `container.add`.
fn add_to(con: &mut Value, key: &str, val: Value) -> Result<(), Fail> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
        }
        Value::Array(a) => {
            if key == "-" {
                a.push(val);
                return Ok(());
            }
            let mut idx =
                atoi(key).map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            let size = a.len() as i64 + 1;
            if idx >= size {
                return Err(invalid_index(idx).into());
            }
            if idx < 0 {
                if idx < -size {
                    return Err(invalid_index(idx).into());
                }
                idx += size;
            }
            a.insert(idx as usize, val);
        }
        _ => return Err(nil_deref()),
    }
    Ok(())
}

/// `container.remove`, returning the removed value.
fn remove_from(con: &mut Value, key: &str) -> Result<Value, Fail> {
    match con {
        Value::Object(m) => m
            .remove(key)
            .ok_or_else(|| format!("unable to remove nonexistent key: {key}: missing value").into()),
        Value::Array(a) => {
            let mut idx = atoi(key)?;
            let len = a.len() as i64;
            if idx >= len {
                return Err(invalid_index(idx).into());
            }
            if idx < 0 {
                if idx < -len {
                    return Err(invalid_index(idx).into());
                }
                idx += len;
            }
            Ok(a.remove(idx as usize))
        }
        _ => Err(nil_deref()),
    }
}

fn wrap(prefix: String) -> impl FnOnce(Fail) -> Fail {
    move |f| match f {
        Fail::Error(e) if e == NIL_DEREF => Fail::Error(e),
        Fail::Error(e) => Fail::Error(format!("{prefix}: {e}")),
        other => other,
    }
}

fn add(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let path = path_of(op).map_err(|_| "add operation failed to decode path: missing value".to_string())?;
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(
            format!("add operation does not apply: doc is missing path: \"{path}\": missing value").into()
        );
    };
    let val = op_value(op);
    add_to(con, &key, val).map_err(wrap(format!("error in add for path: '{path}'")))
}

fn remove(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let path =
        path_of(op).map_err(|_| "remove operation failed to decode path: missing value".to_string())?;
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        )
        .into());
    };
    remove_from(con, &key).map(drop).map_err(wrap(format!("error in remove for path: '{path}'")))
}

fn replace(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let path = path_of(op).map_err(|e| format!("replace operation failed to decode path: {e}"))?;
    if path.is_empty() {
        match op.get("value") {
            None => return Err(nil_deref()),
            // A nil document: every later operation dereferences it.
            Some(Value::Null) => *root = Value::Null,
            Some(v @ (Value::Object(_) | Value::Array(_))) => *root = v.clone(),
            // `errors.Wrapf(nil, …)` is nil: a scalar replaces nothing, without error.
            Some(_) => {}
        }
        return Ok(());
    }
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(
            format!("replace operation does not apply: doc is missing path: {path}: missing value").into()
        );
    };
    if let Err((e, _)) = get(con, &key) {
        if e == NIL_DEREF {
            return Err(nil_deref());
        }
        return Err(
            format!("replace operation does not apply: doc is missing key: {path}: missing value").into()
        );
    }
    let val = op_value(op);
    match con {
        Value::Object(m) => {
            m.insert(key, val);
        }
        Value::Array(a) => {
            let i =
                array_index(&key, a.len()).map_err(|e| format!("error in remove for path: '{path}': {e}"))?;
            a[i] = val;
        }
        _ => return Err(nil_deref()),
    }
    Ok(())
}

fn move_op(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let from = from_of(op).map_err(|e| format!("move operation failed to decode from: {e}"))?;
    let Some((con, key)) = find_object(root, &from)? else {
        return Err(format!(
            "move operation does not apply: doc is missing from path: {from}: missing value"
        )
        .into());
    };
    if let Err((e, _)) = get(con, &key) {
        return Err(wrap(format!("error in move for path: '{key}'"))(Fail::Error(e)));
    }
    let val = remove_from(con, &key).map_err(wrap(format!("error in move for path: '{key}'")))?;
    let path = path_of(op).map_err(|e| format!("move operation failed to decode path: {e}"))?;
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(format!(
            "move operation does not apply: doc is missing destination path: {path}: missing value"
        )
        .into());
    };
    add_to(con, &key, val).map_err(wrap(format!("error in move for path: '{path}'")))
}

fn copy(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let from = from_of(op).map_err(|e| format!("copy operation failed to decode from: {e}"))?;
    let Some((con, key)) = find_object(root, &from)? else {
        return Err(format!(
            "copy operation does not apply: doc is missing from path: {from}: missing value"
        )
        .into());
    };
    let val = match get(con, &key) {
        Ok(v) => v.clone(),
        Err((e, _)) => return Err(wrap(format!("error in copy for from: '{from}'"))(Fail::Error(e))),
    };
    let path = path_of(op).map_err(|_| "copy operation failed to decode path: missing value".to_string())?;
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(format!(
            "copy operation does not apply: doc is missing destination path: {path}: missing value"
        )
        .into());
    };
    add_to(con, &key, val).map_err(wrap("error while adding value during copy".into()))
}

fn test(root: &mut Value, op: &Value) -> Result<(), Fail> {
    let path = path_of(op).map_err(|e| format!("test operation failed to decode path: {e}"))?;
    let want = op.get("value");
    if path.is_empty() {
        let Some(want) = want else { return Err(nil_deref()) };
        if root.is_null() {
            return Err(nil_deref());
        }
        return if equal(root, want)? { Ok(()) } else { Err(Fail::TestFailed) };
    }
    let Some((con, key)) = find_object(root, &path)? else {
        return Err(format!("test operation does not apply: is missing path: {path}: missing value").into());
    };
    let val = match get(con, &key) {
        Ok(v) if !v.is_null() => Some(v),
        Ok(_) => None,
        Err((e, _)) if e == NIL_DEREF => return Err(nil_deref()),
        Err((_, true)) => None,
        Err((e, false)) => return Err(format!("error in test for path: '{path}': {e}").into()),
    };
    match (val, want) {
        (None, None) => Ok(()),
        (None, Some(_)) | (Some(_), None) => Err(Fail::TestFailed),
        (Some(v), Some(w)) => {
            if equal(v, w)? {
                Ok(())
            } else {
                Err(Fail::TestFailed)
            }
        }
    }
}
