//! The nodes of evanphx/json-patch v5 that a `serde_json::Value` does not tell apart, and
//! `lazyNode.equal` (`patch.go`).

use serde_json::Value;

use super::{nil_deref, Fail};

/// Stands, while the patch is applied, for a node holding the raw JSON `null` (an operation's
/// `value: null`), which upstream treats unlike a `null` of the document (a nil node): reached
/// as a container or compared with an object it dereferences nil. Turned back into `null` at
/// the end.
pub(super) const RAW_NULL: &str = "\u{0}structured-merge: raw null node\u{0}";

pub(super) fn is_raw_null(v: &Value) -> bool {
    matches!(v, Value::String(s) if s == RAW_NULL)
}

/// `Operation.value()` as a node: absent is a nil node (`null`), `null` a raw null node.
pub(super) fn op_value(op: &Value) -> Value {
    match op.get("value") {
        None => Value::Null,
        Some(Value::Null) => Value::String(RAW_NULL.into()),
        Some(v) => v.clone(),
    }
}

pub(super) fn clear_raw_nulls(v: &mut Value) {
    match v {
        v if is_raw_null(v) => *v = Value::Null,
        Value::Array(a) => a.iter_mut().for_each(clear_raw_nulls),
        Value::Object(m) => m.values_mut().for_each(clear_raw_nulls),
        _ => {}
    }
}

/// `lazyNode.equal` of a document node `n` (not null) with the operation's raw value `o`:
/// scalars compare by their JSON text, objects by members (a null member only equals a null
/// member), arrays item by item; `o` null equals an empty array and dereferences nil against
/// an object; a null array item dereferences nil.
pub(super) fn equal(n: &Value, o: &Value) -> Result<bool, Fail> {
    if is_raw_null(n) {
        return match o {
            Value::Null | Value::Object(_) => Err(nil_deref()),
            _ => Ok(false),
        };
    }
    match n {
        Value::Object(nm) => match o {
            Value::Null => Err(nil_deref()),
            Value::Object(om) => {
                if nm.len() != om.len() {
                    return Ok(false);
                }
                for (k, v) in nm {
                    let Some(ov) = om.get(k) else { return Ok(false) };
                    match (v.is_null(), ov.is_null()) {
                        (true, true) => continue,
                        (false, false) => {
                            if !equal(v, ov)? {
                                return Ok(false);
                            }
                        }
                        _ => return Ok(false),
                    }
                }
                Ok(true)
            }
            _ => Ok(false),
        },
        Value::Array(na) => match o {
            Value::Null => Ok(na.is_empty()),
            Value::Array(oa) => {
                if na.len() != oa.len() {
                    return Ok(false);
                }
                for (x, y) in na.iter().zip(oa) {
                    if x.is_null() || y.is_null() {
                        return Err(nil_deref());
                    }
                    if !equal(x, y)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            _ => Ok(false),
        },
        Value::Null => Err(nil_deref()),
        scalar => Ok(scalar == o),
    }
}
