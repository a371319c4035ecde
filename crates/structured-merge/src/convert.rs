//! Conversion to a typed value: the validation of `typed/validate.go` (with `AllowDuplicates`
//! for the live object), and the atomic check of the plugin's `validatePatch` / `findAtomics`
//! (`mutating/patch/smd.go`).

use std::collections::HashSet;

use serde_json::Value;

use crate::gofmt::{self, kind, Kind};
use crate::path::{list_item_pe, prefix_from, Pe, VErr};
use crate::schema::{ListDef, MapDef, Rel, Resolved, Scalar, Schema, TypeRefDef};

/// `deduceAtom`: the part of the atom that fits the value, else the whole atom.
pub(crate) fn deduce<'a>(a: Resolved<'a>, v: Option<&Value>, config: bool) -> Resolved<'a> {
    let Some(v) = v else { return a };
    let only = Resolved { scalar: None, list: None, map: None };
    match kind(v, config) {
        Kind::Float | Kind::Int | Kind::Str | Kind::Bool if a.scalar.is_some() => {
            Resolved { scalar: a.scalar, ..only }
        }
        Kind::List if a.list.is_some() => Resolved { list: a.list, ..only },
        Kind::Map if a.map.is_some() => Resolved { map: a.map, ..only },
        _ => a,
    }
}

/// The texts of `resolveSchema`'s and `handleAtom`'s schema errors.
pub(crate) fn no_type(tr: &TypeRefDef) -> String {
    match &tr.named {
        Some((name, _)) => format!("schema error: no type found matching: {name}"),
        None => "schema error: no type found matching: inlined type".into(),
    }
}

pub(crate) fn invalid_atom(tr: &TypeRefDef) -> String {
    match &tr.named {
        Some((name, _)) => format!("schema error: invalid atom: named type: {name}"),
        None => "schema error: invalid atom: inlined".into(),
    }
}

/// `validateScalar` (with an empty prefix).
pub(crate) fn scalar_error(t: &Scalar, v: &Value, config: bool) -> Option<String> {
    let k = kind(v, config);
    let ok = match t {
        _ if k == Kind::Nil => true,
        Scalar::Numeric => matches!(k, Kind::Float | Kind::Int),
        Scalar::String => k == Kind::Str,
        Scalar::Boolean => k == Kind::Bool,
        Scalar::Untyped => matches!(k, Kind::Float | Kind::Int | Kind::Str | Kind::Bool),
        Scalar::Other(s) => return Some(format!("unexpected scalar type in schema: {s}")),
    };
    if ok {
        return None;
    }
    Some(match t {
        Scalar::Numeric => {
            format!("expected numeric (int or float), got {}", gofmt::type_name(v, config))
        }
        Scalar::String => format!(
            "expected string, got &value.valueUnstructured{{Value:{}}}",
            gofmt::sharp(v, config, true)
        ),
        Scalar::Boolean => format!("expected boolean, got &{{{}}}", gofmt::plain(v, config)),
        _ => format!("expected any scalar, got &{{{}}}", gofmt::plain(v, config)),
    })
}

/// The validating walker. `config`: the value is an apply configuration (JSON null is CEL's
/// null, refused); else the live object (null is nil, accepted) with duplicates allowed.
pub(crate) struct Validator<'a> {
    pub(crate) schema: &'a Schema,
    pub(crate) config: bool,
}

impl<'a> Validator<'a> {
    pub(crate) fn validate(&self, tr: &'a TypeRefDef, v: &'a Value, errs: &mut Vec<VErr>) {
        let Some(a) = self.schema.resolve(tr) else {
            errs.push(VErr::new(no_type(tr)));
            return;
        };
        let a = deduce(a, Some(v), self.config);
        if let Some((m, _)) = a.map {
            self.do_map(m, v, errs);
        } else if let Some(s) = a.scalar {
            if let Some(e) = scalar_error(s, v, self.config) {
                errs.push(VErr::new(e));
            }
        } else if let Some((l, rel)) = a.list {
            self.do_list(l, rel, v, errs);
        } else {
            errs.push(VErr::new(invalid_atom(tr)));
        }
    }

    fn do_list(&self, t: &'a ListDef, rel: Rel, v: &'a Value, errs: &mut Vec<VErr>) {
        let items = match (kind(v, self.config), v) {
            (Kind::Nil, _) => return,
            (Kind::List, Value::Array(items)) => items,
            _ => {
                errs.push(VErr::new(format!("expected list, got &{{{}}}", gofmt::plain(v, self.config))));
                return;
            }
        };
        let mut observed = HashSet::with_capacity(if rel == Rel::Associative { items.len() } else { 0 });
        for (i, child) in items.iter().enumerate() {
            let pe = if rel != Rel::Associative {
                Pe::Index(i)
            } else {
                match list_item_pe(self.schema, t, rel, child, self.config) {
                    Ok(pe) => pe,
                    Err(e) => {
                        errs.push(VErr::new(format!("element {i}: {e}")));
                        return;
                    }
                }
            };
            if rel == Rel::Associative && !observed.insert(pe.canon(self.config)) && self.config {
                errs.push(VErr::new(format!("duplicate entries for key {}", pe.display(self.config))));
            }
            let start = errs.len();
            self.validate(&t.element_type, child, errs);
            prefix_from(errs, start, || pe.display(self.config));
        }
    }

    fn do_map(&self, t: &'a MapDef, v: &'a Value, errs: &mut Vec<VErr>) {
        let m = match (kind(v, self.config), v) {
            (Kind::Nil, _) => return,
            (Kind::Map, Value::Object(m)) => m,
            _ => {
                errs.push(VErr::new(format!("expected map, got &{{{}}}", gofmt::plain(v, self.config))));
                return;
            }
        };
        for (key, val) in m {
            let tr = match t.find_field(key) {
                Some(f) => &f.ty,
                None if t.element_type.is_zero() => {
                    errs.push(VErr { path: format!(".{key}"), msg: "field not declared in schema".into() });
                    return;
                }
                None => &t.element_type,
            };
            let start = errs.len();
            self.validate(tr, val, errs);
            prefix_from(errs, start, || format!(".{key}"));
        }
    }
}

/// `findAtomics`: the paths where the configuration sets an atomic list, map or struct, at any
/// depth. Map keys are visited in sorted order (upstream iterates a Go map: its order varies),
/// list items in index order; the path of a list item is its index in the configuration.
pub(crate) fn find_atomics(schema: &Schema, tr: &TypeRefDef, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_atomics(schema, tr, v, &mut String::new(), &mut out);
    out
}

fn walk_atomics(schema: &Schema, tr: &TypeRefDef, v: &Value, path: &mut String, out: &mut Vec<String>) {
    let Some(a) = schema.resolve(tr) else { return };
    match (v, a.map, a.list) {
        (Value::Object(m), Some((map, rel)), _) => {
            if rel == Rel::Atomic {
                out.push(path.clone());
            }
            let mut keys: Vec<_> = m.iter().collect();
            keys.sort_by(|x, y| x.0.cmp(y.0));
            for (key, val) in keys {
                if let Some(f) = map.find_field(key) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    walk_atomics(schema, &f.ty, val, path, out);
                    path.truncate(len);
                }
            }
        }
        (Value::Array(items), _, Some((list, rel))) => {
            if rel == Rel::Atomic {
                out.push(path.clone());
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk_atomics(schema, &list.element_type, item, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}
