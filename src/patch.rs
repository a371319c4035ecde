//! STUB (replaced by the real module)
use serde_json::Value;
pub(crate) struct Patch(Vec<Value>);
#[derive(Debug, thiserror::Error)]
#[error("decode")]
pub(crate) struct DecodeError;
#[derive(Debug, thiserror::Error)]
#[error("apply")]
pub(crate) struct ApplyError;
impl Patch {
    pub(crate) fn decode(b: &[u8]) -> Result<Patch, DecodeError> {
        serde_json::from_slice(b)
            .map(Patch)
            .map_err(|_| DecodeError)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    pub(crate) fn apply(&self, doc: &mut Value) -> Result<(), ApplyError> {
        let p: json_patch::Patch =
            serde_json::from_value(Value::Array(self.0.clone())).map_err(|_| ApplyError)?;
        json_patch::patch(doc, &p).map_err(|_| ApplyError)
    }
    pub(crate) fn annotation_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }
}
