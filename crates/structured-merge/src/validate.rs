//! Conversion to a typed value, with its validation (`typed/validate.go`), and `findAtomics`
//! (`smd.go`): the paths of the configuration's values that land on atomic elements.

use std::collections::HashSet;

use serde_json::Value;

use crate::go;
use crate::schema::{Atom, List, Relationship, Scalar, TypeRef};

/// One problem at one path (`ValidationError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PathError {
    pub(crate) path: String,
    pub(crate) message: String,
}

/// `ValidationErrors.Error()`: one as it is, several under `errors:`, one per line.
pub(crate) fn join(errors: &[PathError]) -> String {
    let one = |e: &PathError| {
        if e.path.is_empty() {
            e.message.clone()
        } else {
            format!("{}: {}", e.path, e.message)
        }
    };
    match errors {
        [single] => one(single),
        _ => {
            let mut lines = vec!["errors:".to_owned()];
            lines.extend(errors.iter().map(|e| format!("  {}", one(e))));
            lines.join("\n")
        }
    }
}

/// Every problem of `value` as a value of `ty` (duplicate keys allowed or not).
pub(crate) fn validate(ty: TypeRef<'_>, value: &Value, allow_duplicates: bool) -> Vec<PathError> {
    let mut walker = Walker { allow_duplicates, errors: Vec::new(), path: String::new() };
    walker.value(ty, value);
    walker.errors
}

struct Walker {
    allow_duplicates: bool,
    errors: Vec<PathError>,
    path: String,
}

impl Walker {
    fn error(&mut self, message: String) {
        self.errors.push(PathError { path: self.path.clone(), message });
    }

    fn value(&mut self, ty: TypeRef<'_>, value: &Value) {
        let Some(atom) = ty.resolve() else {
            return self.error(format!("schema error: no type found matching: {}", ty.name()));
        };
        let atom = atom.deduce(Some(value));
        if let Some(scalar) = atom.scalar {
            if let Some(message) = scalar_error(scalar, value) {
                self.error(message);
            }
        } else if let Some((list, relationship)) = atom.list {
            match value {
                Value::Array(items) => self.list(ty, list, relationship, items),
                other => self.error(format!("expected list, got {}", go::plain_v(other))),
            }
        } else if let Some((map, _)) = atom.map {
            match value {
                Value::Object(members) => {
                    for (key, member) in members {
                        let field = map.field(key).map(|f| &f.ty).or(map.element_type.as_ref());
                        let len = self.path.len();
                        self.path.push('.');
                        self.path.push_str(key);
                        match field {
                            Some(field) => self.value(ty.with(field), member),
                            None => {
                                // Upstream stops at the first undeclared member of a map.
                                self.error("field not declared in schema".to_owned());
                                self.path.truncate(len);
                                break;
                            }
                        }
                        self.path.truncate(len);
                    }
                }
                other => self.error(format!("expected map, got {}", go::plain_v(other))),
            }
        } else {
            self.error(format!("schema error: invalid atom: {}", ty.name()));
        }
    }

    fn list(&mut self, ty: TypeRef<'_>, list: &List, relationship: Relationship, items: &[Value]) {
        let mut seen: HashSet<String> = HashSet::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let element = if relationship == Relationship::Associative {
                match path_element(ty, list, item) {
                    Ok(element) => element,
                    Err(error) => {
                        self.error(format!("element {index}: {error}"));
                        return;
                    }
                }
            } else {
                format!("[{index}]")
            };
            if relationship == Relationship::Associative
                && !seen.insert(element.clone())
                && !self.allow_duplicates
            {
                self.error(format!("duplicate entries for key {element}"));
            }
            let len = self.path.len();
            self.path.push_str(&element);
            self.value(ty.with(&list.element_type), item);
            self.path.truncate(len);
        }
    }
}

/// `validateScalar` of the configuration's value: `null` is CEL's, protobuf's NullValue in Go,
/// which no scalar type accepts.
fn scalar_error(scalar: Scalar, value: &Value) -> Option<String> {
    let ok = match scalar {
        Scalar::Numeric => value.is_number(),
        Scalar::String => value.is_string(),
        Scalar::Boolean => value.is_boolean(),
        Scalar::Untyped => matches!(value, Value::Number(_) | Value::String(_) | Value::Bool(_)),
    };
    if ok {
        return None;
    }
    Some(match scalar {
        Scalar::Numeric => format!("expected numeric (int or float), got {}", go::type_name(value)),
        Scalar::String => format!("expected string, got {}", go::sharp_v(value)),
        Scalar::Boolean => format!("expected boolean, got {}", go::plain_v(value)),
        Scalar::Untyped => format!("expected any scalar, got {}", go::plain_v(value)),
    })
}

/// `listItemToPathElement` as text: `[k1=v1,k2=v2]` by the list's keys (a key the item omits
/// takes its field's default), `[=value]` for a set's item.
pub(crate) fn path_element(ty: TypeRef<'_>, list: &List, item: &Value) -> Result<String, String> {
    if list.keys.is_empty() {
        return Ok(format!("[={}]", go::to_string(item)));
    }
    let Value::Object(members) = item else {
        return Err(format!("expected map, got {}", go::plain_v(item)));
    };
    let element = ty.with(&list.element_type).resolve().and_then(|a| a.map).map(|(m, _)| m);
    let mut keys: Vec<(&str, String)> = Vec::with_capacity(list.keys.len());
    for key in &list.keys {
        let value = match members.get(key) {
            Some(value) => go::to_string(value),
            None => match element.and_then(|m| m.field(key)).and_then(|f| f.default.as_ref()) {
                Some(default) => go::to_string(default),
                None => continue,
            },
        };
        keys.push((key, value));
    }
    if keys.is_empty() {
        return Err(format!(
            "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
            list.keys.iter().map(|k| go::quote(k)).collect::<Vec<_>>().join(" ")
        ));
    }
    keys.sort_by(|a, b| a.0.cmp(b.0));
    let keys: Vec<String> = keys.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(format!("[{}]", keys.join(",")))
}

/// `findAtomics`: the paths where the configuration sets an atomic map, struct or list,
/// depth first (members in key order, list items by their index in the configuration).
pub(crate) fn atomics(ty: TypeRef<'_>, config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    find(ty, config, &mut String::new(), &mut out);
    out
}

fn find(ty: TypeRef<'_>, value: &Value, path: &mut String, out: &mut Vec<String>) {
    let Some(atom): Option<Atom<'_>> = ty.resolve() else { return };
    match value {
        Value::Object(members) => {
            let Some((map, relationship)) = atom.map else { return };
            if relationship == Relationship::Atomic {
                out.push(path.clone());
            }
            for (key, member) in members {
                if let Some(field) = map.field(key) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    find(ty.with(&field.ty), member, path, out);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            let Some((list, relationship)) = atom.list else { return };
            if relationship == Relationship::Atomic {
                out.push(path.clone());
            }
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                find(ty.with(&list.element_type), item, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}
