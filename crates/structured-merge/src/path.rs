//! Path elements of list items (`fieldpath.PathElement`, `typed/helpers.go`
//! `listItemToPathElement`), with a canonical text for hashing that follows `value.Equals`
//! (an int and a float are equal when their float64 values are), and SMD's validation errors.

use serde_json::Value;

use crate::gofmt::{self, kind, Kind};
use crate::schema::{ListDef, Rel, Schema};

/// The path element of a list item.
pub(crate) enum Pe<'a> {
    Index(usize),
    /// Key fields sorted by name, as `keyMap.Sort()`.
    Key(Vec<(&'a str, &'a Value)>),
    /// An item of a set.
    Value(&'a Value),
}

impl Pe<'_> {
    /// `PathElement.String()`.
    pub(crate) fn display(&self, config: bool) -> String {
        match self {
            Pe::Index(i) => format!("[{i}]"),
            Pe::Key(fields) => {
                let parts: Vec<_> = fields
                    .iter()
                    .map(|(name, v)| format!("{name}={}", gofmt::smd_string(v, config)))
                    .collect();
                format!("[{}]", parts.join(","))
            }
            Pe::Value(v) => format!("[={}]", gofmt::smd_string(v, config)),
        }
    }

    /// A text equal for two elements exactly when `PathElement.Equals` holds.
    pub(crate) fn canon(&self, config: bool) -> String {
        let mut out = String::new();
        match self {
            Pe::Index(i) => out.push_str(&format!("#{i}")),
            Pe::Key(fields) => {
                out.push('k');
                for (name, v) in fields {
                    out.push_str(&format!("{}:{name}", name.len()));
                    canon_value(v, config, &mut out);
                }
            }
            Pe::Value(v) => {
                out.push('v');
                canon_value(v, config, &mut out);
            }
        }
        out
    }
}

fn canon_value(v: &Value, config: bool, out: &mut String) {
    match v {
        Value::Null if config => out.push('N'),
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&format!("i{i}"));
            } else if let Some(u) = n.as_u64() {
                out.push_str(&format!("u{u}"));
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 9.2e18 {
                    out.push_str(&format!("i{}", f as i64));
                } else {
                    out.push_str(&format!("d{f:e}"));
                }
            }
        }
        Value::String(s) => out.push_str(&format!("s{}:{s}", s.len())),
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canon_value(x, config, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut kv: Vec<_> = m.iter().collect();
            kv.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (k, x) in kv {
                out.push_str(&format!("{}:{k}", k.len()));
                canon_value(x, config, out);
            }
            out.push('}');
        }
    }
}

/// `listItemToPathElement`; `config` says how JSON null is read (see [`gofmt::kind`]).
pub(crate) fn list_item_pe<'a>(
    schema: &'a Schema,
    list: &'a ListDef,
    rel: Rel,
    child: &'a Value,
    config: bool,
) -> Result<Pe<'a>, String> {
    if rel != Rel::Associative {
        return Err("invalid indexing of non-associative list".into());
    }
    let k = kind(child, config);
    if list.keys.is_empty() {
        return match k {
            Kind::Map => Err("associative list without keys has an element that's a map type".into()),
            Kind::List => Err("not supported: associative list with lists as elements".into()),
            Kind::Nil => Err("associative list without keys has an element that's an explicit null".into()),
            _ => Ok(Pe::Value(child)),
        };
    }
    let m = match (k, child) {
        (Kind::Nil, _) => return Err("associative list with keys may not have a null element".into()),
        (Kind::Map, Value::Object(m)) => m,
        _ => return Err("associative list with keys may not have non-map elements".into()),
    };
    let mut fields = Vec::with_capacity(list.keys.len());
    for name in &list.keys {
        if let Some(v) = m.get(name) {
            fields.push((name.as_str(), v));
            continue;
        }
        // getAssociativeKeyDefault
        let atom = schema.resolve(&list.element_type);
        let default = match atom {
            None => Err("invalid elementType for list"),
            Some(a) => match a.map {
                None => Err("associative list may not have non-map types"),
                Some((map, _)) => Ok(map.find_field(name).and_then(|f| f.default.as_ref())),
            },
        };
        match default {
            Err(e) => return Err(format!("couldn't find default value for {name}: {e}")),
            Ok(Some(d)) => fields.push((name.as_str(), d)),
            Ok(None) => {}
        }
    }
    if fields.is_empty() {
        let keys: Vec<_> = list.keys.iter().map(|k| gofmt::quote(k)).collect();
        return Err(format!(
            "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
            keys.join(" ")
        ));
    }
    fields.sort_by(|a, b| a.0.cmp(b.0));
    Ok(Pe::Key(fields))
}

/// `typed.ValidationError`.
pub(crate) struct VErr {
    pub(crate) path: String,
    pub(crate) msg: String,
}

impl VErr {
    pub(crate) fn new(msg: impl Into<String>) -> VErr {
        VErr { path: String::new(), msg: msg.into() }
    }
}

/// Prefixes the paths of `errs[start..]` (`ValidationErrors.WithLazyPrefix`).
pub(crate) fn prefix_from(errs: &mut [VErr], start: usize, prefix: impl FnOnce() -> String) {
    if errs.len() > start {
        let p = prefix();
        for e in &mut errs[start..] {
            e.path.insert_str(0, &p);
        }
    }
}

/// `ValidationErrors.Error()`.
pub(crate) fn errors_text(errs: &[VErr]) -> String {
    fn one(e: &VErr) -> String {
        if e.path.is_empty() {
            e.msg.clone()
        } else {
            format!("{}: {}", e.path, e.msg)
        }
    }
    if errs.len() == 1 {
        return one(&errs[0]);
    }
    let mut out = String::from("errors:");
    for e in errs {
        out.push_str("\n  ");
        out.push_str(&one(e));
    }
    out
}
