//! The typed round trip of a built-in kind: what kube-apiserver does to an object after a JSON
//! Patch mutation (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/json_patch.go`):
//! the patched JSON decoded strictly into the kind's Go type (`sigs.k8s.io/json`, through
//! `k8s.io/apimachinery/pkg/runtime/serializer/json` with `Strict: true`), which is encoded again
//! when the object is next read.
//!
//! [`GoTypes::round_trip`] reproduces:
//! - decoding errors with encoding/json's texts (and those of the types that decode
//!   themselves: a quantity, an int-or-string, a time that does not parse): `json: cannot unmarshal string into Go struct
//!   field Container.spec.containers.ports.containerPort of type int32` (the first, in member
//!   order), a number that is no integer of the field's size (`number 1.5`), a quantity that
//!   does not parse, an int-or-string that is neither; otherwise every member the type does not
//!   have, `strict decoding error: unknown field "spec.foo", unknown field "…"`;
//! - the encoding: members the type omits when empty (`omitempty`: `""`, `0`, `false`, `null`,
//!   `[]`, `{}` of strings, numbers, booleans, pointers, lists and maps) or zero (`omitzero`)
//!   dropped, members it always writes added with their zero value (`"containers": null`, a
//!   struct as `{}` and its own such members), `null` given to a string, number or boolean
//!   written as its zero value.
//!
//! Quantities are written in their canonical form (`1000m` as `1`, `crate::quantity`).
//!
//! Times (`metav1.Time`) are written in UTC to the second, as Go writes them.
//!
//! What it does not reproduce: a quantity beyond int64 or nano precision and a micro-time are
//! kept as written; a micro-time, a duration and base64 bytes are not parsed; members are taken in key order where Go takes them in the order written, which
//! decides only which of several type errors is named and the order of the unknown fields.
//!
//! The types: `schema/gotypes.json`, printed by the test oracle (`tests/oracle/gotypes.go`,
//! `oracle --go-types`) from the Go types of client-go's scheme (golang-k8s-client-go-dev
//! 0.36.4-1, Debian).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Number, Value};

mod decode;

use decode::{go_quote, item, member, Decoder};

/// A Go type as encoding/json sees it.
#[derive(Debug)]
enum GoType {
    /// `string`, `bool`, `int32`, `int64` (and their named types, `go` being the name printed).
    Scalar {
        kind: Scalar,
        go: String,
    },
    Ptr(Box<GoType>),
    Slice {
        elem: Box<GoType>,
        go: String,
    },
    Map {
        elem: Box<GoType>,
        go: String,
    },
    Struct {
        name: String,
        go: String,
    },
    Special {
        kind: Special,
        go: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    String,
    Bool,
    Int(u32),
    Uint(u32),
    Float,
}

/// Types that decode themselves (`UnmarshalJSON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    Quantity,
    IntOrString,
    Time,
    MicroTime,
    Duration,
    Bytes,
    Raw,
}

#[derive(Debug)]
struct Field {
    name: String,
    /// The Go names of the embedded structs it is promoted from.
    embedded: Vec<String>,
    ty: GoType,
    omit_empty: bool,
    omit_zero: bool,
}

#[derive(Debug)]
struct Struct {
    go: String,
    fields: Vec<Field>,
    index: HashMap<String, usize>,
}

/// The Go types of the built-in kinds.
pub struct GoTypes {
    structs: HashMap<String, Struct>,
    kinds: HashMap<String, HashMap<String, String>>,
}

static BUILTIN: OnceLock<GoTypes> = OnceLock::new();

/// An error of the decoding, with the texts kube-apiserver answers (after `Internal error
/// occurred: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl GoTypes {
    /// The built-in kinds' types (embedded data, parsed once, lazily).
    pub fn builtin() -> &'static GoTypes {
        BUILTIN.get_or_init(|| {
            GoTypes::from_json(include_str!("../schema/gotypes.json"))
                .expect("the embedded Go types are valid")
        })
    }

    /// From `oracle --go-types`'s JSON.
    pub fn from_json(text: &str) -> Result<GoTypes, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut structs = HashMap::new();
        for (name, s) in doc.get("structs").and_then(Value::as_object).ok_or("no \"structs\"")? {
            let mut fields = Vec::new();
            let mut index = HashMap::new();
            for f in s.get("fields").and_then(Value::as_array).into_iter().flatten() {
                let field_name = f.get("name").and_then(Value::as_str).ok_or("a field without a name")?;
                let ty = parse_type(f.get("type").ok_or("a field without a type")?)
                    .map_err(|e| format!("{name}.{field_name}: {e}"))?;
                // encoding/json: the first of two fields of one name wins.
                index.entry(field_name.to_owned()).or_insert(fields.len());
                let embedded = f.get("embedded").and_then(Value::as_array).into_iter().flatten();
                fields.push(Field {
                    name: field_name.to_owned(),
                    embedded: embedded.filter_map(Value::as_str).map(str::to_owned).collect(),
                    ty,
                    omit_empty: f.get("omitempty") == Some(&Value::Bool(true)),
                    omit_zero: f.get("omitzero") == Some(&Value::Bool(true)),
                });
            }
            let go = s.get("go").and_then(Value::as_str).unwrap_or_default().to_owned();
            structs.insert(name.clone(), Struct { go, fields, index });
        }
        let mut kinds: HashMap<String, HashMap<String, String>> = HashMap::new();
        for (api_version, ks) in doc.get("kinds").and_then(Value::as_object).ok_or("no \"kinds\"")? {
            for (kind, name) in ks.as_object().into_iter().flatten() {
                let name = name.as_str().ok_or("kinds: type names are strings")?;
                if !structs.contains_key(name) {
                    return Err(format!("kinds: unknown type {name:?}"));
                }
                kinds.entry(api_version.clone()).or_default().insert(kind.clone(), name.to_owned());
            }
        }
        Ok(GoTypes { structs, kinds })
    }

    /// Whether `kind` of `api_version` is a Go type here (a built-in kind).
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.kinds.get(api_version).is_some_and(|k| k.contains_key(kind))
    }

    /// `object` decoded into the Go type of `kind` and encoded again; None when the kind is not
    /// here (a custom resource: no round trip).
    ///
    /// `before`: the object as it was before the mutation. A member the Go types here do not
    /// have but `before` had at the same place is the API server's own (a newer Kubernetes than
    /// these types): kept as it is, never an unknown field. Only what the mutation brought is
    /// judged.
    pub fn round_trip(
        &self,
        api_version: &str,
        kind: &str,
        object: &Value,
        before: Option<&Value>,
    ) -> Option<Result<Value, DecodeError>> {
        let name = self.kinds.get(api_version)?.get(kind)?;
        let root = GoType::Struct { name: name.clone(), go: String::new() };
        let mut decoder = Decoder::new(self);
        decoder.check(&root, object, before);
        if let Some(error) = decoder.first {
            return Some(Err(DecodeError(error)));
        }
        if !decoder.unknown.is_empty() {
            let listed: Vec<String> =
                decoder.unknown.iter().map(|f| format!("unknown field {}", go_quote(f))).collect();
            return Some(Err(DecodeError(format!("strict decoding error: {}", listed.join(", ")))));
        }
        Some(Ok(self.encode(&root, Some(object), before)))
    }

    /// The value as Go encodes the decoded value (`None`: the member was absent, the zero value).
    fn encode(&self, ty: &GoType, value: Option<&Value>, before: Option<&Value>) -> Value {
        let value = value.filter(|v| !v.is_null());
        match ty {
            GoType::Scalar { kind, .. } => match value {
                Some(v) => v.clone(),
                None => match kind {
                    Scalar::String => Value::String(String::new()),
                    Scalar::Bool => Value::Bool(false),
                    Scalar::Int(_) | Scalar::Uint(_) | Scalar::Float => Value::Number(Number::from(0)),
                },
            },
            GoType::Ptr(inner) => match value {
                Some(v) => self.encode(inner, Some(v), before),
                None => Value::Null,
            },
            GoType::Slice { elem, .. } => match value {
                Some(Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(n, i)| self.encode(elem, Some(i), item(before, n)))
                        .collect(),
                ),
                _ => Value::Null,
            },
            GoType::Map { elem, .. } => match value {
                Some(Value::Object(members)) => Value::Object(
                    members
                        .iter()
                        .map(|(k, v)| (k.clone(), self.encode(elem, Some(v), member(before, k))))
                        .collect(),
                ),
                _ => Value::Null,
            },
            GoType::Struct { name, .. } => {
                let Some(s) = self.structs.get(name) else { return value.cloned().unwrap_or(Value::Null) };
                let members = value.and_then(Value::as_object);
                let mut out = Map::new();
                for field in &s.fields {
                    let given = members.and_then(|m| m.get(&field.name));
                    let encoded = self.encode(&field.ty, given, member(before, &field.name));
                    if (field.omit_empty && is_empty(&field.ty, &encoded))
                        || (field.omit_zero && self.is_zero(&field.ty, &encoded))
                    {
                        continue;
                    }
                    out.insert(field.name.clone(), encoded);
                }
                // Members of a newer Kubernetes the object already had: kept as they are.
                for (key, value) in members.into_iter().flatten() {
                    if !s.index.contains_key(key) && member(before, key).is_some() {
                        out.insert(key.clone(), value.clone());
                    }
                }
                Value::Object(out)
            }
            GoType::Special { kind, .. } => match (kind, value) {
                // Written back in its canonical form (`1000m` as `1`), as a string.
                (Special::Quantity, Some(v)) => {
                    let text = match v {
                        Value::String(s) => s.trim().to_owned(),
                        other => other.to_string(),
                    };
                    Value::String(crate::quantity::parse(&text).unwrap_or(text))
                }
                // metav1.Time: in UTC, to the second.
                (Special::Time, Some(Value::String(text))) => {
                    Value::String(crate::rfc3339::utc_seconds(text).unwrap_or_else(|_| text.clone()))
                }
                (_, Some(v)) => v.clone(),
                (Special::Quantity, None) => Value::String("0".into()),
                (Special::IntOrString, None) => Value::Number(Number::from(0)),
                (Special::Duration, None) => Value::String("0s".into()),
                (Special::Time | Special::MicroTime | Special::Bytes | Special::Raw, None) => Value::Null,
            },
        }
    }

    /// `omitzero`: the Go value is its type's zero value.
    fn is_zero(&self, ty: &GoType, encoded: &Value) -> bool {
        match ty {
            GoType::Struct { name, .. } => match (self.structs.get(name), encoded) {
                (Some(s), Value::Object(members)) => s.fields.iter().all(|f| match members.get(&f.name) {
                    None => true,
                    Some(v) => self.is_zero(&f.ty, v),
                }),
                _ => false,
            },
            GoType::Special { kind: Special::Quantity, .. } => encoded == "0",
            GoType::Special { kind: Special::Duration, .. } => encoded == "0s",
            GoType::Special { kind: Special::IntOrString, .. } => encoded == &Value::Number(Number::from(0)),
            // A zero time encodes as `null`; so do nil bytes and raw values.
            GoType::Special { .. } => encoded.is_null(),
            GoType::Slice { .. } | GoType::Map { .. } | GoType::Ptr(_) => encoded.is_null(),
            _ => is_empty(ty, encoded),
        }
    }
}

/// `omitempty`: false, 0, "", a nil pointer, an empty list or map (never a struct).
fn is_empty(ty: &GoType, encoded: &Value) -> bool {
    match ty {
        GoType::Struct { .. } => false,
        // A pointer to a zero value is not nil.
        GoType::Ptr(_) => encoded.is_null(),
        GoType::Special { kind, .. } => match kind {
            Special::Bytes | Special::Raw => match encoded {
                Value::Null => true,
                Value::String(s) => s.is_empty() && *kind == Special::Bytes,
                _ => false,
            },
            // Structs in Go: never empty.
            _ => false,
        },
        _ => match encoded {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
        },
    }
}

fn parse_type(v: &Value) -> Result<GoType, String> {
    let go = v.get("go").and_then(Value::as_str).unwrap_or_default().to_owned();
    if let Some(inner) = v.get("ptr") {
        return Ok(GoType::Ptr(Box::new(parse_type(inner)?)));
    }
    if let Some(elem) = v.get("slice") {
        return Ok(GoType::Slice { elem: Box::new(parse_type(elem)?), go });
    }
    if let Some(elem) = v.get("map") {
        return Ok(GoType::Map { elem: Box::new(parse_type(elem)?), go });
    }
    if let Some(name) = v.get("struct").and_then(Value::as_str) {
        return Ok(GoType::Struct { name: name.to_owned(), go });
    }
    if let Some(special) = v.get("special").and_then(Value::as_str) {
        let kind = match special {
            "quantity" => Special::Quantity,
            "int-or-string" => Special::IntOrString,
            "time" => Special::Time,
            "micro-time" => Special::MicroTime,
            "duration" => Special::Duration,
            "bytes" => Special::Bytes,
            "raw" => Special::Raw,
            other => return Err(format!("unknown special type {other:?}")),
        };
        return Ok(GoType::Special { kind, go });
    }
    let kind = match v.get("scalar").and_then(Value::as_str) {
        Some("string") => Scalar::String,
        Some("bool") => Scalar::Bool,
        Some("int") | Some("int64") => Scalar::Int(64),
        Some("int32") => Scalar::Int(32),
        Some("int16") => Scalar::Int(16),
        Some("int8") => Scalar::Int(8),
        Some("uint") | Some("uint64") => Scalar::Uint(64),
        Some("uint32") => Scalar::Uint(32),
        Some("uint16") => Scalar::Uint(16),
        Some("uint8") => Scalar::Uint(8),
        Some("float32") | Some("float64") => Scalar::Float,
        other => return Err(format!("unknown type {other:?}")),
    };
    Ok(GoType::Scalar { kind, go })
}
