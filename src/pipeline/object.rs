//! The object as it travels the mutating chain: raw JSON until a stage needs a tree, parsed
//! once, re-encoded only after a patch changed it, and diffed once at the end.

use std::cell::OnceCell;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::selector::Labels;
use crate::patch::{ApplyError, Patch};

/// The request's `object` (current) with what is needed to answer with one combined patch,
/// and the labels object selectors look at, found once rather than once per webhook.
#[derive(Debug)]
pub(crate) struct ObjectState<'a> {
    /// The object as received; `None` for a null object (DELETE).
    received: Option<&'a RawValue>,
    /// The request's `oldObject`, which patches never change.
    old: Option<&'a RawValue>,
    /// Labels of the current object (`None` inside: no object, or no metadata).
    labels: OnceCell<Option<Labels>>,
    /// Labels of the old object.
    old_labels: OnceCell<Option<Labels>>,
    /// The current object as a tree, once some stage needed it.
    tree: Option<Value>,
    /// The received object as a tree, kept once a patch changed the object.
    original: Option<Value>,
    /// Encoding of `tree` after a change, made when a webhook next needs the bytes.
    encoded: Option<Box<RawValue>>,
}

/// Why the object could not be patched: both become internal errors (§9.3).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("couldn't decode the patched object: {0}")]
    Decode(String),
}

#[derive(Deserialize)]
struct MetadataOnly {
    metadata: Option<LabelsOnly>,
}

#[derive(Deserialize)]
struct LabelsOnly {
    #[serde(default)]
    labels: Option<Labels>,
}

impl<'a> ObjectState<'a> {
    pub(crate) fn new(received: Option<&'a RawValue>, old: Option<&'a RawValue>) -> Self {
        Self {
            received: received.filter(|raw| raw.get() != "null"),
            old,
            labels: OnceCell::new(),
            old_labels: OnceCell::new(),
            tree: None,
            original: None,
            encoded: None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        self.received.is_none()
    }

    /// Whether a patch has changed the object since it was received.
    pub(crate) fn changed(&self) -> bool {
        self.original.is_some()
    }

    /// The current object's JSON, as sent to the next webhook.
    pub(crate) fn raw(&mut self) -> Option<&RawValue> {
        if !self.changed() {
            return self.received;
        }
        if self.encoded.is_none() {
            let tree = self.tree.as_ref()?;
            // A serde_json::Value always encodes.
            self.encoded = serde_json::value::to_raw_value(tree).ok();
        }
        self.encoded.as_deref()
    }

    /// The current object's labels; `None` when there is no object or it has no metadata
    /// (options kinds on CONNECT), which no object selector matches (§4.4).
    pub(crate) fn labels(&self) -> Option<&Labels> {
        self.labels.get_or_init(|| labels_of(self.tree.as_ref(), self.received)).as_ref()
    }

    /// The old object's labels, on the same terms.
    pub(crate) fn old_labels(&self) -> Option<&Labels> {
        self.old_labels.get_or_init(|| labels_of(None, self.old)).as_ref()
    }

    /// The current object as a tree.
    pub(crate) fn tree(&mut self) -> Option<&Value> {
        self.ensure_tree();
        self.tree.as_ref()
    }

    fn ensure_tree(&mut self) {
        if self.tree.is_none() {
            // The review decoded, so its object is valid JSON.
            self.tree = self.received.and_then(|raw| serde_json::from_str(raw.get()).ok());
        }
    }

    /// Applies a webhook's patch; returns whether it changed the object (deep equality).
    pub(crate) fn apply(&mut self, patch: &Patch) -> Result<bool, PatchError> {
        self.ensure_tree();
        let Some(current) = self.tree.as_ref() else {
            return Err(PatchError::Decode("no object".into()));
        };
        let mut patched = current.clone();
        patch.apply(&mut patched)?;
        if !patched.is_object() {
            return Err(PatchError::Decode(format!(
                "the patched object is not a JSON object: {}",
                kind_of(&patched)
            )));
        }
        if &patched == current {
            return Ok(false);
        }
        let previous = self.tree.replace(patched);
        if self.original.is_none() {
            self.original = previous;
        }
        self.encoded = None;
        self.labels = OnceCell::new();
        Ok(true)
    }

    /// One JSONPatch from the received object to the current one; `None` if unchanged. The diff
    /// is the `json-patch` crate's (the crate's one use: our `patch` module applies patches
    /// with the API server's semantics, but computes none).
    pub(crate) fn combined_patch(&self) -> Option<Vec<u8>> {
        let (original, current) = (self.original.as_ref()?, self.tree.as_ref()?);
        let patch = json_patch::diff(original, current);
        if patch.0.is_empty() {
            return None;
        }
        serde_json::to_vec(&patch).ok()
    }
}

/// Labels of an object given as a tree or raw JSON, without building a tree from raw JSON.
fn labels_of(tree: Option<&Value>, raw: Option<&RawValue>) -> Option<Labels> {
    if let Some(tree) = tree {
        let metadata = tree.get("metadata")?.as_object()?;
        let labels = metadata.get("labels").and_then(Value::as_object);
        return Some(
            labels
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect(),
        );
    }
    let raw = raw.filter(|raw| raw.get() != "null")?;
    let only: MetadataOnly = serde_json::from_str(raw.get()).ok()?;
    Some(only.metadata?.labels.unwrap_or_default())
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn patches_accumulate_into_one_combined_patch() {
        let received = raw(r#"{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"x":1}}"#);
        let mut object = ObjectState::new(Some(&received), None);
        assert_eq!(object.raw().unwrap().get(), received.get(), "untouched object is forwarded as received");
        assert_eq!(object.labels().unwrap().get("b"), None);
        let add = Patch::decode(br#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#).unwrap();
        assert!(object.apply(&add).unwrap());
        let same = Patch::decode(br#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#).unwrap();
        assert!(!object.apply(&same).unwrap(), "re-adding an existing label changes nothing");
        let remove = Patch::decode(br#"[{"op":"remove","path":"/spec/x"}]"#).unwrap();
        assert!(object.apply(&remove).unwrap());
        assert_eq!(
            object.labels().unwrap().get("b").map(String::as_str),
            Some("2"),
            "labels follow the patches"
        );
        assert!(object.raw().unwrap().get().contains(r#""b":"2""#));
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&object.combined_patch().unwrap()).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(&replayed, object.tree().unwrap());
    }

    #[test]
    fn labels_need_metadata() {
        assert_eq!(labels_of(None, Some(&raw(r#"{"kind":"PodExecOptions","command":["sh"]}"#))), None);
        assert_eq!(labels_of(None, Some(&raw(r#"{"metadata":{"name":"x"}}"#))), Some(Labels::new()));
        assert_eq!(labels_of(None, Some(&raw("null"))), None);
        assert_eq!(labels_of(None, None), None);
    }

    #[test]
    fn an_unchanged_object_yields_no_patch() {
        let received = raw(r#"{"metadata":{}}"#);
        let object = ObjectState::new(Some(&received), None);
        assert_eq!(object.combined_patch(), None);
    }
}
