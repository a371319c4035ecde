//! The object replaced whole by a stage that computes its next version itself (the mutating
//! policies): the writes that turn the current object into the new one are added to the
//! combined patch — whole-value `add`, `replace` and `remove` at the members that differ, never
//! index arithmetic inside a list (a list that differs is replaced whole) — so that the one
//! patch the API server gets still replays to the final object exactly.

use std::cell::OnceCell;
use std::fmt::Write as _;

use serde_json::Value;

use super::{ObjectState, PatchError};

impl ObjectState<'_> {
    /// Makes `next` the current object; returns whether it differs from the current one.
    /// Linear in the sizes of both. A result larger than the object's limit is an error, the
    /// object then left as it was.
    pub(crate) fn replace(&mut self, next: Value) -> Result<bool, PatchError> {
        self.ensure_tree();
        let Some(current) = self.tree.as_ref() else {
            return Err(PatchError::Decode("no object".into()));
        };
        if *current == next {
            return Ok(false);
        }
        let encoded =
            serde_json::value::to_raw_value(&next).map_err(|e| PatchError::Decode(e.to_string()))?;
        let size = encoded.get().len() as u64;
        if size > self.size_limit {
            return Err(PatchError::TooLarge { size, limit: self.size_limit });
        }
        let mut path = String::new();
        diff(&mut path, current, &next, &mut self.writes);
        self.tree = Some(next);
        self.changed = true;
        self.encoded = Some(encoded);
        self.spliced = None;
        self.labels = OnceCell::new();
        self.size_bound = size;
        Ok(true)
    }
}

/// Appends to `out` the operations that turn `old` into `new` at `path`.
fn diff(path: &mut String, old: &Value, new: &Value, out: &mut String) {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in old {
                let at = path.len();
                push_token(path, key);
                match new.get(key) {
                    None => push_op(out, "remove", path, None),
                    Some(next) if next != value => diff(path, value, next, out),
                    Some(_) => {}
                }
                path.truncate(at);
            }
            for (key, value) in new {
                if !old.contains_key(key) {
                    let at = path.len();
                    push_token(path, key);
                    push_op(out, "add", path, Some(value));
                    path.truncate(at);
                }
            }
        }
        _ if old != new => push_op(out, "replace", path, Some(new)),
        _ => {}
    }
}

/// `/` and the key as a JSON Pointer reference token (RFC 6901: `~` as `~0`, `/` as `~1`).
fn push_token(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

fn push_op(out: &mut String, op: &str, path: &str, value: Option<&Value>) {
    if !out.is_empty() {
        out.push(',');
    }
    // Strings and values always encode.
    let path = serde_json::to_string(path).unwrap_or_default();
    let _ = write!(out, "{{\"op\":\"{op}\",\"path\":{path}");
    if let Some(value) = value {
        let _ = write!(out, ",\"value\":{}", serde_json::to_string(value).unwrap_or_default());
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::patch::Patch;

    #[test]
    fn the_combined_patch_replays_to_the_replaced_object() {
        let received = serde_json::value::to_raw_value(&json!({
            "metadata": {"name": "a", "labels": {"x": "1", "gone": "y", "a/b~c": "z"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "keep": true},
        }))
        .unwrap();
        let mut object = ObjectState::new(Some(&received), None);
        let next = json!({
            "metadata": {"name": "a", "labels": {"x": "2", "a/b~c": "w", "new": "n"}},
            "spec": {"containers": [{"name": "c", "image": "j"}, {"name": "d"}], "keep": true},
            "status": {"phase": "P"},
        });
        assert!(object.replace(next.clone()).unwrap());
        assert!(!object.replace(next.clone()).unwrap(), "the same object again changes nothing");
        let patch = object.combined_patch().unwrap();
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&patch).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(replayed, next);
        let text = String::from_utf8(patch).unwrap();
        assert!(text.contains(r#"{"op":"remove","path":"/metadata/labels/gone"}"#), "{text}");
        assert!(text.contains(r#""path":"/metadata/labels/a~1b~0c""#), "{text}");
        assert!(!text.contains(r#""path":"/metadata/name""#), "unchanged members are not written: {text}");
        assert_eq!(object.raw().map(|raw| serde_json::from_str::<Value>(raw.get()).unwrap()), Some(next));
    }

    #[test]
    fn a_replacement_beyond_the_limit_is_refused_and_the_object_kept() {
        let received = serde_json::value::to_raw_value(&json!({"data": {}})).unwrap();
        let mut object = ObjectState::new(Some(&received), None).limited_to(40);
        let error = object.replace(json!({"data": {"big": "x".repeat(100)}})).unwrap_err();
        assert!(matches!(error, PatchError::TooLarge { .. }), "{error}");
        assert!(!object.changed());
        assert!(object.combined_patch().is_none());
    }
}
