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

#[cfg(test)]
impl CelValue {
    /// Whether both are the same allocation (a map, list or string), not equal copies.
    pub(crate) fn shares(&self, other: &CelValue) -> bool {
        use cel_engine::Value;
        match (&self.0, &other.0) {
            (Value::Map(a), Value::Map(b)) => std::sync::Arc::ptr_eq(a, b),
            (Value::List(a), Value::List(b)) => std::sync::Arc::ptr_eq(a, b),
            (Value::String(a), Value::String(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
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
