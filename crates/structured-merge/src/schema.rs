//! structured-merge-diff schemas (`sigs.k8s.io/structured-merge-diff/v6/schema/elements.go`):
//! named types, each an atom of an optional scalar, list and map; type references that name a
//! type or inline an atom, optionally overriding its element relationship.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

/// How the items of a list or map relate (`schema.ElementRelationship`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rel {
    /// Not given: neither atomic nor associative.
    Unset,
    Atomic,
    Separable,
    Associative,
    /// Any other text: neither atomic nor associative, as upstream.
    Other,
}

impl Rel {
    fn parse(v: Option<&Value>) -> Result<Rel, String> {
        Ok(match v {
            None => Rel::Unset,
            Some(Value::String(s)) => match s.as_str() {
                "" => Rel::Unset,
                "atomic" => Rel::Atomic,
                "separable" => Rel::Separable,
                "associative" => Rel::Associative,
                _ => Rel::Other,
            },
            Some(other) => return Err(format!("elementRelationship: expected a string, got {other}")),
        })
    }
}

/// `schema.Scalar`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    Numeric,
    String,
    Boolean,
    Untyped,
    Other(String),
}

#[derive(Debug, Default)]
pub(crate) struct Atom {
    pub(crate) scalar: Option<Scalar>,
    pub(crate) list: Option<ListDef>,
    pub(crate) map: Option<MapDef>,
}

#[derive(Debug)]
pub(crate) struct ListDef {
    pub(crate) element_type: Box<TypeRefDef>,
    pub(crate) rel: Rel,
    pub(crate) keys: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct MapDef {
    pub(crate) fields: Vec<Field>,
    index: HashMap<String, usize>,
    pub(crate) element_type: Box<TypeRefDef>,
    pub(crate) rel: Rel,
}

impl MapDef {
    /// `Map.FindField`.
    pub(crate) fn find_field(&self, name: &str) -> Option<&Field> {
        self.index.get(name).map(|&i| &self.fields[i])
    }
}

#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) ty: TypeRefDef,
    pub(crate) default: Option<Value>,
}

/// `schema.TypeRef`: a named type (resolved to its index) or an inlined atom.
#[derive(Debug, Default)]
pub(crate) struct TypeRefDef {
    pub(crate) named: Option<(String, Option<usize>)>,
    pub(crate) inlined: Atom,
    pub(crate) rel: Option<Rel>,
}

impl TypeRefDef {
    /// `TypeRef{}`: the element type of a struct that declares no other keys.
    pub(crate) fn is_zero(&self) -> bool {
        self.named.is_none()
            && self.rel.is_none()
            && self.inlined.scalar.is_none()
            && self.inlined.list.is_none()
            && self.inlined.map.is_none()
    }
}

/// An atom as `Schema.Resolve` returns it: the element relationship of its map (else its list)
/// replaced by the reference's override.
#[derive(Clone, Copy)]
pub(crate) struct Resolved<'a> {
    pub(crate) scalar: Option<&'a Scalar>,
    pub(crate) list: Option<(&'a ListDef, Rel)>,
    pub(crate) map: Option<(&'a MapDef, Rel)>,
}

impl PartialEq for Resolved<'_> {
    fn eq(&self, o: &Self) -> bool {
        fn same<T>(a: Option<&T>, b: Option<&T>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                _ => false,
            }
        }
        self.scalar == o.scalar
            && same(self.list.map(|l| l.0), o.list.map(|l| l.0))
            && self.list.map(|l| l.1) == o.list.map(|l| l.1)
            && same(self.map.map(|m| m.0), o.map.map(|m| m.0))
            && self.map.map(|m| m.1) == o.map.map(|m| m.1)
    }
}

/// structured-merge-diff schemas: named types, maps with fields / elementType /
/// elementRelationship (atomic|separable|associative), lists with elementType,
/// elementRelationship and keys, scalars, untyped and deduced types.
pub struct Schema {
    types: Vec<(String, Atom, TypeRefDef)>,
    kinds: HashMap<String, HashMap<String, usize>>,
}

/// A type within a schema.
#[derive(Clone, Copy)]
pub struct TypeRef<'a> {
    pub(crate) schema: &'a Schema,
    pub(crate) def: &'a TypeRefDef,
}

impl std::fmt::Debug for TypeRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.def.named {
            Some((name, _)) => write!(f, "TypeRef({name})"),
            None => f.write_str("TypeRef(inlined)"),
        }
    }
}

static BUILTIN: OnceLock<Schema> = OnceLock::new();

impl Schema {
    /// The built-in kinds' schemas (embedded data, parsed once, lazily).
    pub fn builtin() -> &'static Schema {
        BUILTIN.get_or_init(|| {
            Schema::from_json(include_str!("../schema/builtin.json")).expect("the embedded schema is valid")
        })
    }

    /// From JSON in the embedded data's format: `{"types": [TypeDef…], "kinds": {apiVersion:
    /// {Kind: type name}}}`, a TypeDef being the JSON form of structured-merge-diff's YAML.
    pub fn from_json(text: &str) -> Result<Schema, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Schema::from_value(&doc)
    }

    /// [`Schema::from_json`] of the parsed document.
    pub(crate) fn from_value(doc: &Value) -> Result<Schema, String> {
        let Some(types) = doc.get("types").and_then(Value::as_array) else {
            return Err("schema: no \"types\" array".into());
        };
        let mut schema = Schema { types: Vec::with_capacity(types.len()), kinds: HashMap::new() };
        let mut by_name = HashMap::new();
        for (i, t) in types.iter().enumerate() {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let atom = parse_atom(t).map_err(|e| format!("type {name:?}: {e}"))?;
            // Go's FindNamedType keeps the last of duplicated names.
            by_name.insert(name.clone(), i);
            let self_ref = TypeRefDef { named: Some((name.clone(), None)), ..Default::default() };
            schema.types.push((name, atom, self_ref));
        }
        for (_, atom, self_ref) in &mut schema.types {
            link_atom(atom, &by_name);
            link_ref(self_ref, &by_name);
        }
        if let Some(kinds) = doc.get("kinds").and_then(Value::as_object) {
            for (api_version, ks) in kinds {
                let entry = schema.kinds.entry(api_version.clone()).or_default();
                for (kind, name) in ks.as_object().into_iter().flatten() {
                    let name = name.as_str().ok_or("kinds: type names are strings")?;
                    let idx = *by_name.get(name).ok_or_else(|| format!("kinds: unknown type {name:?}"))?;
                    entry.insert(kind.clone(), idx);
                }
            }
        }
        Ok(schema)
    }

    /// The type of `kind` in `api_version` ("v1", "apps/v1", ...), None when unknown.
    pub fn type_of(&self, api_version: &str, kind: &str) -> Option<TypeRef<'_>> {
        let idx = *self.kinds.get(api_version)?.get(kind)?;
        Some(TypeRef { schema: self, def: &self.types[idx].2 })
    }

    /// The group-versions ("v1", "apps/v1") that have kinds here.
    pub fn api_versions(&self) -> impl Iterator<Item = &str> {
        self.kinds.keys().map(String::as_str)
    }

    /// Whether kinds of `api_version` are here.
    pub fn has_api_version(&self, api_version: &str) -> bool {
        self.kinds.contains_key(api_version)
    }

    /// The named type `name` (e.g. `io.k8s.api.core.v1.PodSpec`, or `__untyped_deduced_`, the
    /// deduced type structured-merge-diff gives objects without a schema), None when unknown.
    pub fn named_type(&self, name: &str) -> Option<TypeRef<'_>> {
        let (_, _, def) = self.types.iter().rev().find(|(n, _, _)| n == name)?;
        Some(TypeRef { schema: self, def })
    }

    /// `Schema.Resolve`.
    pub(crate) fn resolve<'a>(&'a self, tr: &'a TypeRefDef) -> Option<Resolved<'a>> {
        let atom = match &tr.named {
            Some((_, idx)) => &self.types[(*idx)?].1,
            None => &tr.inlined,
        };
        let mut r = Resolved {
            scalar: atom.scalar.as_ref(),
            list: atom.list.as_ref().map(|l| (l, l.rel)),
            map: atom.map.as_ref().map(|m| (m, m.rel)),
        };
        if let Some(rel) = tr.rel {
            if let Some(m) = &mut r.map {
                m.1 = rel;
            } else if let Some(l) = &mut r.list {
                l.1 = rel;
            } else {
                return None;
            }
        }
        Some(r)
    }
}

fn link_ref(tr: &mut TypeRefDef, by_name: &HashMap<String, usize>) {
    if let Some((name, idx)) = &mut tr.named {
        *idx = by_name.get(name.as_str()).copied();
    }
    link_atom(&mut tr.inlined, by_name);
}

fn link_atom(a: &mut Atom, by_name: &HashMap<String, usize>) {
    if let Some(l) = &mut a.list {
        link_ref(&mut l.element_type, by_name);
    }
    if let Some(m) = &mut a.map {
        link_ref(&mut m.element_type, by_name);
        for f in &mut m.fields {
            link_ref(&mut f.ty, by_name);
        }
    }
}

fn parse_atom(v: &Value) -> Result<Atom, String> {
    let mut atom = Atom::default();
    if let Some(s) = v.get("scalar") {
        let s = s.as_str().ok_or("scalar: expected a string")?;
        atom.scalar = Some(match s {
            "numeric" => Scalar::Numeric,
            "string" => Scalar::String,
            "boolean" => Scalar::Boolean,
            "untyped" => Scalar::Untyped,
            other => Scalar::Other(other.to_string()),
        });
    }
    if let Some(l) = v.get("list") {
        let keys = match l.get("keys") {
            None => Vec::new(),
            Some(k) => k
                .as_array()
                .ok_or("list keys: expected an array")?
                .iter()
                .map(|k| k.as_str().map(str::to_string).ok_or("list keys: expected strings"))
                .collect::<Result<_, _>>()?,
        };
        atom.list = Some(ListDef {
            element_type: Box::new(parse_ref(l.get("elementType"))?),
            rel: Rel::parse(l.get("elementRelationship"))?,
            keys,
        });
    }
    if let Some(m) = v.get("map") {
        let mut fields = Vec::new();
        let mut index = HashMap::new();
        for f in m.get("fields").and_then(Value::as_array).into_iter().flatten() {
            let name = f.get("name").and_then(Value::as_str).ok_or("field without a name")?;
            let ty = parse_ref(f.get("type")).map_err(|e| format!("field {name:?}: {e}"))?;
            index.entry(name.to_string()).or_insert(fields.len());
            fields.push(Field { ty, default: f.get("default").cloned() });
        }
        atom.map = Some(MapDef {
            fields,
            index,
            element_type: Box::new(parse_ref(m.get("elementType"))?),
            rel: Rel::parse(m.get("elementRelationship"))?,
        });
    }
    Ok(atom)
}

fn parse_ref(v: Option<&Value>) -> Result<TypeRefDef, String> {
    let Some(v) = v else { return Ok(TypeRefDef::default()) };
    if !v.is_object() {
        return Err(format!("type reference: expected an object, got {v}"));
    }
    let named = match v.get("namedType") {
        None => None,
        Some(n) => Some((n.as_str().ok_or("namedType: expected a string")?.to_string(), None)),
    };
    let rel = match v.get("elementRelationship") {
        None => None,
        some => Some(Rel::parse(some)?),
    };
    Ok(TypeRefDef { named, inlined: parse_atom(v)?, rel })
}
