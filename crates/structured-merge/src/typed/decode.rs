//! Decoding a patched object as encoding/json would into the kind's Go type: what fails and
//! with which text (`sigs.k8s.io/json`'s strict mode: type errors first, then every unknown
//! member), and which members are the object's own (see [`super::GoTypes::round_trip`]).

use serde_json::{Number, Value};

use super::{GoType, GoTypes, Scalar, Special};
use crate::gofmt::json_kind;

pub(super) struct Decoder<'t> {
    types: &'t GoTypes,
    /// The names of the struct fields entered, embedded structs' Go names included
    /// (encoding/json's error context).
    path: Vec<String>,
    /// Where the decoder is, as the strict errors name it: `spec.containers[0]`.
    at: Vec<String>,
    /// The Go name of the struct whose field is being decoded.
    context: Option<&'t str>,
    pub(super) first: Option<String>,
    pub(super) unknown: Vec<String>,
}

impl<'t> Decoder<'t> {
    pub(super) fn new(types: &'t GoTypes) -> Self {
        Decoder { types, path: Vec::new(), at: Vec::new(), context: None, first: None, unknown: Vec::new() }
    }

    /// encoding/json's `UnmarshalTypeError` (only the first is kept, as `saveError` keeps it).
    fn type_error(&mut self, what: &str, go: &str) {
        if self.first.is_some() {
            return;
        }
        self.first = Some(match self.context {
            Some(s) if !self.path.is_empty() => {
                format!(
                    "json: cannot unmarshal {what} into Go struct field {s}.{} of type {go}",
                    self.path.join(".")
                )
            }
            _ => format!("json: cannot unmarshal {what} into Go value of type {go}"),
        });
    }

    fn error(&mut self, text: String) {
        if self.first.is_none() {
            self.first = Some(text);
        }
    }

    pub(super) fn check(&mut self, ty: &'t GoType, value: &Value, before: Option<&Value>) {
        if value.is_null() {
            // `null` leaves a value as it is and a pointer, list or map nil.
            return;
        }
        match ty {
            GoType::Ptr(inner) => self.check(inner, value, before),
            GoType::Scalar { kind, go } => match (kind, value) {
                (Scalar::String, Value::String(_)) | (Scalar::Bool, Value::Bool(_)) => {}
                (Scalar::Int(bits), Value::Number(n)) => {
                    if !fits_signed(n, *bits) {
                        self.type_error(&format!("number {n}"), go);
                    }
                }
                (Scalar::Uint(bits), Value::Number(n)) => {
                    if !n.as_u64().is_some_and(|u| *bits == 64 || u < (1u64 << bits)) {
                        self.type_error(&format!("number {n}"), go);
                    }
                }
                (Scalar::Float, Value::Number(_)) => {}
                (_, other) => self.type_error(json_kind(other), go),
            },
            GoType::Slice { elem, go } => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.at.push(format!("[{i}]"));
                        self.check(elem, item, self::item(before, i));
                        self.at.pop();
                    }
                }
                other => self.type_error(json_kind(other), go),
            },
            GoType::Map { elem, go } => match value {
                Value::Object(members) => {
                    for (k, v) in members {
                        self.check(elem, v, member(before, k));
                    }
                }
                other => self.type_error(json_kind(other), go),
            },
            GoType::Struct { name, go } => {
                let Some(s) = self.types.structs.get(name) else { return };
                let Value::Object(members) = value else {
                    // The root's Go name: its package's last element and its name.
                    let package = name.rsplit('.').nth(1).unwrap_or_default();
                    let go = if go.is_empty() { format!("{package}.{}", s.go) } else { go.clone() };
                    return self.type_error(json_kind(value), &go);
                };
                for (key, member) in members {
                    let value_of_member = member;
                    match s.index.get(key) {
                        Some(&i) => {
                            let field = &s.fields[i];
                            let context = self.context.replace(&s.go);
                            let depth = self.path.len();
                            self.path.extend(field.embedded.iter().cloned());
                            self.path.push(key.clone());
                            self.at.push(key.clone());
                            self.check(&field.ty, value_of_member, self::member(before, key));
                            self.at.pop();
                            self.path.truncate(depth);
                            self.context = context;
                        }
                        None if self::member(before, key).is_some() => {}
                        None => {
                            let mut at = self.at.clone();
                            at.push(key.clone());
                            self.unknown.push(dotted(&at));
                        }
                    }
                }
            }
            GoType::Special { kind, go } => self.special(*kind, go, value),
        }
    }

    fn special(&mut self, kind: Special, go: &str, value: &Value) {
        match kind {
            Special::Quantity => {
                let text = match value {
                    Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                };
                if let Err(why) = crate::quantity::parse(&text) {
                    self.error(why.to_owned());
                }
            }
            // Their UnmarshalJSON decodes an int32 or a string with encoding/json, whose error
            // gets the field's context.
            Special::IntOrString => match value {
                Value::String(_) => {}
                Value::Number(n) if fits_signed(n, 32) => {}
                Value::Number(n) => self.type_error(&format!("number {n}"), "int32"),
                other => self.type_error(json_kind(other), "int32"),
            },
            Special::Time | Special::MicroTime | Special::Duration => match value {
                Value::String(text) if kind == Special::Time => {
                    if let Err(why) = crate::rfc3339::utc_seconds(text) {
                        self.error(why);
                    }
                }
                Value::String(_) => {}
                other => self.type_error(json_kind(other), "string"),
            },
            Special::Bytes => {
                if !value.is_string() {
                    self.type_error(json_kind(value), go);
                }
            }
            Special::Raw => {}
        }
    }
}

/// Whether Go parses the number (as JSON writes it: an integral float64 without a fraction)
/// into a signed integer of `bits` bits.
fn fits_signed(n: &Number, bits: u32) -> bool {
    let integer = n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).then_some(f as i64)
    });
    match integer {
        Some(i) => bits == 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1))),
        None => false,
    }
}

/// The member `key` of `value`, if it is an object that has it.
pub(super) fn member<'v>(value: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    value?.as_object()?.get(key)
}

/// The item `index` of `value`, if it is a list that long.
pub(super) fn item(value: Option<&Value>, index: usize) -> Option<&Value> {
    value?.as_array()?.get(index)
}

/// `spec.containers[0].z`: names joined by dots, indices attached.
fn dotted(parts: &[String]) -> String {
    let mut out = String::new();
    for part in parts {
        if !out.is_empty() && !part.starts_with('[') {
            out.push('.');
        }
        out.push_str(part);
    }
    out
}

pub(super) fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
