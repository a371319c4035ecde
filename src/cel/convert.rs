//! JSON → CEL values, as the API server sees unstructured objects: integers are `int`
//! (`int64`), other numbers `double`, objects maps with string keys. Converted once, then
//! shared: a [`CelValue`] is cloned by reference count into every evaluation that reads it.

use std::fmt;

/// A converted value, ready to be shared with evaluations.
#[derive(Clone)]
pub(crate) struct CelValue(pub(super) cel_engine::Value);

impl fmt::Debug for CelValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CelValue(..)")
    }
}

/// Converts a JSON value (`None`: absent, which CEL sees as null).
pub(crate) fn json_value(value: Option<&serde_json::Value>) -> CelValue {
    CelValue(value.map_or(cel_engine::Value::Null, cel_engine::value::from_json))
}

/// The request variable: a JSON rendering of the AdmissionRequest (see the pipeline for the
/// fields the API server exposes), converted as any JSON.
pub(crate) fn request_value(request: &serde_json::Value) -> CelValue {
    json_value(Some(request))
}
