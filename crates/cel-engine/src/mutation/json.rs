//! What the patchers of a MutatingAdmissionPolicy make of a mutation's value (k8s
//! `pkg/admission/plugin/policy/mutating/patch/json_patch.go`, `smd.go`): the operations of a
//! JSON Patch, each `value` converted as cel-go converts a value to a protobuf `Value` and
//! `encoding/json` marshals it; the object of an apply configuration.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map as JsonMap, Number, Value as Json};

use crate::go::quote as go_quote;
use crate::library::standard::{duration_string, timestamp_string};
use crate::value::{Key, Value};

use super::object::{go_value_type, type_name_errors, DynObject, JsonPatch};
use super::MutationError;

/// What `json_patch.go` puts before an error converting or marshalling a patch's `value`.
const MARSHAL_PREFIX: &str = "JSONPath valueExpression evaluated to a type that could not marshal to JSON: ";

/// The value of a JSONPatch mutation (a checked `list(JSONPatch)`) as the JSON Patch upstream
/// applies (`jsonPatcher.evaluatePatchExpression`): an array of operations, each with `op` and
/// `path` (empty when not written: applying it then fails, `Unexpected kind: `), `from` when
/// not empty, and `value` when written (`null` included). Where upstream stops, the error is
/// its text; an operation whose `value` is an `Object…{}` has its type names checked first.
pub fn json_patch(value: &Value) -> Result<Json, MutationError> {
    let Value::List(items) = value else {
        return Err(MutationError::Error(
            "type mismatch: JSONPatchType.expression should evaluate to array".into(),
        ));
    };
    let mut operations = Vec::with_capacity(items.len());
    for item in items.iter() {
        let Some(patch) = as_json_patch(item)? else {
            return Err(MutationError::Error(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: {}",
                conversion_error(item, "*mutation.JSONPatchVal")
            )));
        };
        operations.push(operation(patch)?);
    }
    Ok(Json::Array(operations))
}

/// The patch an element is (`ConvertToNative` to `*mutation.JSONPatchVal`: an optional's
/// value converts as itself); `None` for a value of another type.
fn as_json_patch(item: &Value) -> Result<Option<&JsonPatch>, MutationError> {
    match item {
        Value::Object(o) => Ok(o.as_any().downcast_ref::<JsonPatch>()),
        Value::Optional(Some(inner)) => as_json_patch(inner),
        Value::Optional(None) => Err(MutationError::Error(
            "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: optional.none() dereference"
                .into(),
        )),
        _ => Ok(None),
    }
}

fn operation(patch: &JsonPatch) -> Result<Json, MutationError> {
    let mut op = JsonMap::new();
    op.insert("op".into(), Json::String(patch.op.to_string()));
    op.insert("path".into(), Json::String(patch.path.to_string()));
    if !patch.from.is_empty() {
        op.insert("from".into(), Json::String(patch.from.to_string()));
    }
    if let Some(value) = &patch.value {
        if let Some(object) = dyn_object(value) {
            let errors = type_name_errors(object);
            if !errors.is_empty() {
                return Err(MutationError::Error(format!("type mismatch: {}", errors.join("\n"))));
            }
        }
        let converted = proto_value(value).map_err(|e| e.prefixed(MARSHAL_PREFIX))?;
        if let Some(bad) = first_non_finite(value) {
            // `encoding/json` calls the message's `MarshalJSON` (protojson), which refuses a
            // number JSON cannot write. An object converts to a `Struct`, anything else to a
            // `Value`.
            let message = if unwrap_optional(value).is_some_and(|v| dyn_object(v).is_some()) {
                "*structpb.Struct"
            } else {
                "*structpb.Value"
            };
            return Err(MutationError::Error(format!(
                "{MARSHAL_PREFIX}json: error calling MarshalJSON for type {message}: proto: google.protobuf.Value.number_value: invalid {} value",
                go_float_text(bad)
            )));
        }
        op.insert("value".into(), converted);
    }
    Ok(Json::Object(op))
}

fn dyn_object(value: &Value) -> Option<&DynObject> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<DynObject>(),
        _ => None,
    }
}

/// The value under any optionals (`Optional.ConvertToNative` converts its value); `None` for
/// `optional.none()`.
fn unwrap_optional(value: &Value) -> Option<&Value> {
    match value {
        Value::Optional(Some(inner)) => unwrap_optional(inner),
        Value::Optional(None) => None,
        other => Some(other),
    }
}

/// `ref.Val.ConvertToNative(*structpb.Value)` as cel-go 0.26 does it, then read back as JSON:
/// ints and uints within ±(2^53−1) are numbers, beyond it decimal strings; doubles numbers;
/// bytes base64; durations `"3600s"`; timestamps RFC 3339; lists and maps (string keys)
/// recursively; an `Object…{}` through its Go map ([`object_json`]). A non-finite double is
/// left as `null` here: [`first_non_finite`] reports it, as marshalling does after the
/// conversion.
fn proto_value(value: &Value) -> Result<Json, MutationError> {
    let error = |s: String| Err(MutationError::Error(s));
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) if i.unsigned_abs() <= MAX_INT_JSON => Json::Number(Number::from(*i)),
        Value::Int(i) => Json::String(i.to_string()),
        Value::Uint(u) if *u <= MAX_INT_JSON => Json::Number(Number::from(*u)),
        Value::Uint(u) => Json::String(u.to_string()),
        Value::Double(d) => json_double(*d),
        Value::String(s) => Json::String(s.to_string()),
        Value::Bytes(b) => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Duration(d) => Json::String(duration_string(*d)),
        Value::Timestamp(t) => Json::String(timestamp_string(t)),
        Value::Type(_) => return error("type conversion not supported for 'type'".into()),
        Value::Optional(None) => return error("optional.none() dereference".into()),
        Value::Optional(Some(inner)) => proto_value(inner)?,
        Value::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items.iter() {
                out.push(element_value(item, "reflect.Set")?);
            }
            Json::Array(out)
        }
        Value::Map(map) => {
            let mut out = JsonMap::new();
            for (key, item) in map.iter() {
                let key = match key {
                    Key::String(s) => s.to_string(),
                    other => return error(conversion_error(&other.to_value(), "string")),
                };
                out.insert(key, element_value(item, "reflect.Value.SetMapIndex")?);
            }
            Json::Object(out)
        }
        Value::Object(o) => match o.as_any().downcast_ref::<DynObject>() {
            Some(object) => object_json(object, Target::Patch)?,
            None => return error(conversion_error(value, "*structpb.Value")),
        },
    })
}

/// An element of a list or a map converted to `*structpb.Value` and stored by reflection: an
/// `Object…{}` converts to a `*structpb.Struct` (k8s 1.36 `ObjectVal.ConvertToNative`), which
/// reflection cannot store there: upstream panics.
fn element_value(item: &Value, setter: &str) -> Result<Json, MutationError> {
    let converted = proto_value(item)?;
    if unwrap_optional(item).is_some_and(|v| dyn_object(v).is_some()) {
        return Err(MutationError::Panic(format!(
            "{setter}: value of type *structpb.Struct is not assignable to type *structpb.Value"
        )));
    }
    Ok(converted)
}

/// cel-go's `maxIntJSON`: 2^53 − 1.
const MAX_INT_JSON: u64 = (1 << 53) - 1;

/// A finite double as JSON after protojson (or `encoding/json`) wrote it and the API server's
/// decoder read it back: written without an exponent from 1e-6 to 1e21, an integral one is
/// an integer literal (an int64 when it fits); `null` for NaN and infinities (never written).
fn json_double(d: f64) -> Json {
    if d.fract() == 0.0 && d.abs() < 1e21 {
        if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
            return Json::Number(Number::from(d as i64));
        }
        if (0.0..1.844_674_407_370_955_2e19).contains(&d) {
            return Json::Number(Number::from(d as u64));
        }
    }
    Number::from_f64(d).map_or(Json::Null, Json::Number)
}

/// Go's `%v` of a non-finite float64.
fn go_float_text(d: f64) -> &'static str {
    if d.is_nan() {
        "NaN"
    } else if d > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

/// The first NaN or infinity protojson meets writing the converted `value` (a map's or an
/// object's entries in key order, a list's in order).
fn first_non_finite(value: &Value) -> Option<f64> {
    match value {
        Value::Double(d) if !d.is_finite() => Some(*d),
        Value::Optional(Some(inner)) => first_non_finite(inner),
        Value::List(items) => items.iter().find_map(first_non_finite),
        Value::Map(map) => {
            let mut entries: Vec<(&Key, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries.into_iter().find_map(|(_, v)| first_non_finite(v))
        }
        Value::Object(o) => o.as_any().downcast_ref::<DynObject>().and_then(|object| {
            let mut entries: Vec<(&Arc<str>, &Value)> = object.fields.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries.into_iter().find_map(|(_, v)| first_non_finite(v))
        }),
        _ => None,
    }
}

/// cel-go's error converting `value` to the Go type `target` (`ConvertToNative`), for a value
/// that is not of it.
fn conversion_error(value: &Value, target: &str) -> String {
    match value {
        Value::Int(_) => format!("unsupported type conversion from 'int' to {target}"),
        Value::Uint(_) => format!("unsupported type conversion from 'uint' to {target}"),
        Value::Double(_) => format!("type conversion error from Double to '{target}'"),
        Value::Bytes(_) => format!("type conversion error from Bytes to '{target}'"),
        Value::Timestamp(_) => format!("type conversion error from 'Timestamp' to '{target}'"),
        Value::Duration(_) => format!("type conversion error from 'Duration' to '{target}'"),
        Value::Null => format!("type conversion error from 'null_type' to '{target}'"),
        Value::Bool(_) => format!("type conversion error from bool to '{target}'"),
        Value::String(_) => format!("unsupported native conversion from string to '{target}'"),
        Value::List(_) => format!("type conversion error from list to '{target}'"),
        Value::Map(_) => format!("type conversion error from map to '{target}'"),
        Value::Type(_) => "type conversion not supported for 'type'".into(),
        Value::Optional(None) => "optional.none() dereference".into(),
        Value::Optional(Some(inner)) => conversion_error(inner, target),
        Value::Object(o) => {
            if o.as_any().is::<JsonPatch>() {
                return format!("cannot convert to native type: {target}");
            }
            if o.as_any().is::<DynObject>() {
                return format!("unable to convert to {target}");
            }
            let short = match o.type_name() {
                "net.IP" => "IP",
                "net.CIDR" => "CIDR",
                "kubernetes.Quantity" => "Quantity",
                "kubernetes.URL" => "URL",
                "kubernetes.Semver" => "Semver",
                "kubernetes.NamedFormat" => "Format",
                other => other,
            };
            format!("type conversion error from '{short}' to '{target}'")
        }
    }
}

/// Where an object's Go map goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A JSON Patch `value` (`structpb.NewStruct` of `ObjectVal.ConvertToNative`'s map).
    Patch,
    /// An apply configuration (the map as an unstructured object, merged by
    /// structured-merge-diff).
    Apply,
}

/// The value of an ApplyConfiguration mutation (a checked `Object`) as the object upstream
/// merges (`applyConfigPatcher.Patch`): its type names checked (`type mismatch: …`), then its
/// fields as JSON (each field's Go value, objects in it likewise; `null` kept, for the schema
/// to refuse).
pub fn apply_configuration(value: &Value) -> Result<Json, MutationError> {
    let Some(object) = dyn_object(value) else {
        return Err(MutationError::Error(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            value.type_of().name()
        )));
    };
    let errors = type_name_errors(object);
    if !errors.is_empty() {
        return Err(MutationError::Error(format!("type mismatch: {}", errors.join("\n"))));
    }
    object_json(object, Target::Apply)
}

/// An `Object…{}` as JSON: its fields converted by `ObjectVal.ConvertToNative` to Go values
/// (`ref.Val.Value()`, maps needing string keys), each then taken as the target takes it.
///
/// k8s 1.36 converts one level of lists and maps under a field (`convertField`); deeper ones
/// keep their CEL values, which the JSON Patch conversion refuses (`invalid type: []ref.Val`)
/// and the merge cannot read, unless they came from the request's JSON (Go values already).
/// Which a list came from is not known here: every level is converted (as k8s does after
/// 1.36), objects in them too.
fn object_json(object: &DynObject, target: Target) -> Result<Json, MutationError> {
    for (name, value) in &object.fields {
        if let Some(key) = non_string_key(value) {
            return Err(MutationError::Error(match target {
                Target::Patch => format!(
                    "fail to convert field {}: map key {} is of type {}, not string",
                    go_quote(name),
                    go_key_q(&key),
                    go_key_type(&key)
                ),
                // `ObjectVal.Value()` is then an error, not a map.
                Target::Apply => "invalid return type: *dynamic.ObjectVal".into(),
            }));
        }
    }
    let mut out = JsonMap::new();
    for (name, value) in &object.fields {
        out.insert(name.to_string(), native_json(value, target)?);
    }
    Ok(Json::Object(out))
}

/// The first key that is not a string in the maps of `value` (not those of objects in it,
/// which convert on their own).
fn non_string_key(value: &Value) -> Option<Key> {
    match value {
        Value::List(items) => items.iter().find_map(non_string_key),
        Value::Map(map) => map.iter().find_map(|(k, v)| match k {
            Key::String(_) => non_string_key(v),
            other => Some(other.clone()),
        }),
        Value::Optional(Some(inner)) => non_string_key(inner),
        _ => None,
    }
}

/// A value under an object as its Go value (`Value()`) becomes JSON: for a patch, through
/// `structpb.NewValue` (numbers as float64, bytes base64; `null`, durations, timestamps and
/// library values are `invalid type`); for an apply configuration, as structured-merge-diff
/// reads an unstructured value (int64, float64, string, bool, maps, lists; `null` kept; a
/// uint64, bytes, a duration, a timestamp, a library value or a non-finite double it cannot
/// hold).
fn native_json(value: &Value, target: Target) -> Result<Json, MutationError> {
    let patch = target == Target::Patch;
    let refused = |v: &Value| -> MutationError {
        match target {
            Target::Patch => MutationError::Error(format!("proto: invalid type: {}", go_value_type(v))),
            Target::Apply => MutationError::Unrepresentable(go_value_type(v)),
        }
    };
    Ok(match value {
        Value::Null if patch => return Err(refused(value)),
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) if patch => json_double(*i as f64),
        Value::Int(i) => Json::Number(Number::from(*i)),
        Value::Uint(u) if patch => json_double(*u as f64),
        Value::Double(d) if patch || d.is_finite() => json_double(*d),
        Value::String(s) => Json::String(s.to_string()),
        Value::Bytes(b) if patch => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Type(t) => Json::String(t.name().to_owned()),
        Value::Optional(None) => Json::Null,
        Value::Optional(Some(inner)) => native_json(inner, target)?,
        Value::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items.iter() {
                out.push(native_json(item, target)?);
            }
            Json::Array(out)
        }
        Value::Map(map) => {
            let mut out = JsonMap::new();
            for (key, item) in map.iter() {
                let Key::String(key) = key else { return Err(refused(value)) };
                out.insert(key.to_string(), native_json(item, target)?);
            }
            Json::Object(out)
        }
        Value::Object(o) => match o.as_any().downcast_ref::<DynObject>() {
            Some(object) => object_json(object, target)?,
            None => return Err(refused(value)),
        },
        Value::Uint(_) | Value::Double(_) | Value::Bytes(_) | Value::Duration(_) | Value::Timestamp(_) => {
            return Err(match (target, value) {
                (Target::Apply, Value::Double(d)) => {
                    MutationError::Unrepresentable(format!("float64 {}", go_float_text(*d)))
                }
                _ => refused(value),
            })
        }
    })
}

/// Go's `%q` of a map key's `ref.Val`: an integer as a quoted character (`'\x01'`), a bool
/// as fmt's complaint.
fn go_key_q(key: &Key) -> String {
    match key {
        Key::String(s) => go_quote(s),
        Key::Bool(b) => format!("%!q(types.Bool={b})"),
        Key::Int(i) => go_quote_rune(u64::try_from(*i).unwrap_or(u64::MAX)),
        Key::Uint(u) => go_quote_rune(*u),
    }
}

fn go_key_type(key: &Key) -> &'static str {
    match key {
        Key::String(_) => "types.String",
        Key::Bool(_) => "types.Bool",
        Key::Int(_) => "types.Int",
        Key::Uint(_) => "types.Uint",
    }
}

/// Go's `strconv.QuoteRune` of an integer (fmt's `%q`: beyond the last code point, or a
/// surrogate, the replacement character).
fn go_quote_rune(n: u64) -> String {
    let c = u32::try_from(n).ok().and_then(char::from_u32).unwrap_or('\u{fffd}');
    let quoted = go_quote(c.encode_utf8(&mut [0u8; 4]));
    let inner = &quoted[1..quoted.len() - 1];
    match inner {
        "\\\"" => "'\"'".into(),
        "'" => "'\\''".into(),
        _ => format!("'{inner}'"),
    }
}
