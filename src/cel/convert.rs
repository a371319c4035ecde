//! JSON → CEL values, as the API server sees unstructured objects: integers are `int`
//! (`int64`), other numbers `double`, objects maps with string keys.

use kube_cel::cel;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cel::common::types::CelNull;
use cel::common::value::Val;
use cel::objects::{Key, Map, Value};

/// A converted value, ready to be lent to evaluations.
pub(crate) struct CelValue(pub(super) Box<dyn Val>);

impl fmt::Debug for CelValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CelValue(..)")
    }
}

/// Converts a JSON value (`None`: absent, which CEL sees as null).
pub(crate) fn json_value(value: Option<&serde_json::Value>) -> CelValue {
    let boxed = value
        .map(|v| Box::<dyn Val>::try_from(to_cel(v)))
        .and_then(Result::ok)
        .unwrap_or_else(|| Box::new(CelNull));
    CelValue(boxed)
}

/// The request variable: a JSON rendering of the AdmissionRequest (see the pipeline for the
/// fields the API server exposes), converted as any JSON.
pub(crate) fn request_value(request: &serde_json::Value) -> CelValue {
    json_value(Some(request))
}

fn to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(to_cel).collect())),
        serde_json::Value::Object(fields) => {
            let map: HashMap<Key, Value> =
                fields.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}
