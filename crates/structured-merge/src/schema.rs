//! structured-merge-diff schemas (`sigs.k8s.io/structured-merge-diff/v6/schema`): named
//! types, each an atom of a scalar, a list and/or a map, and the type of each built-in kind.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// Named types and the kinds they are the types of.
#[derive(Debug, Deserialize)]
pub struct Schema {
    types: HashMap<String, TypeDef>,
    /// `<apiVersion>, Kind=<kind>` → a type's name.
    kinds: HashMap<String, String>,
    /// Each kind's type as a reference, made at load.
    #[serde(skip)]
    refs: HashMap<String, TypeDef>,
}

/// A type: named (`namedType`), or inline; `elementRelationship` overrides the resolved map's or
/// list's own (a struct field marked atomic).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TypeDef {
    pub(crate) named_type: Option<String>,
    pub(crate) scalar: Option<Scalar>,
    pub(crate) list: Option<Box<List>>,
    pub(crate) map: Option<Box<Map>>,
    pub(crate) element_relationship: Option<Relationship>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Scalar {
    Numeric,
    String,
    Boolean,
    Untyped,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Relationship {
    Atomic,
    Separable,
    Associative,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct List {
    pub(crate) element_type: TypeDef,
    /// Unset: atomic.
    pub(crate) element_relationship: Option<Relationship>,
    #[serde(default)]
    pub(crate) keys: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Map {
    #[serde(default)]
    pub(crate) fields: Vec<Field>,
    pub(crate) element_type: Option<TypeDef>,
    /// Unset: separable.
    pub(crate) element_relationship: Option<Relationship>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Field {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) ty: TypeDef,
    pub(crate) default: Option<Value>,
}

impl Map {
    pub(crate) fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A type of a schema.
#[derive(Clone, Copy, Debug)]
pub struct TypeRef<'a> {
    pub(crate) schema: &'a Schema,
    pub(crate) def: &'a TypeDef,
}

/// A type resolved: what a value of it may be, with the relationships in force.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Atom<'a> {
    pub(crate) scalar: Option<Scalar>,
    pub(crate) list: Option<(&'a List, Relationship)>,
    pub(crate) map: Option<(&'a Map, Relationship)>,
}

static BUILTIN: &str = include_str!("../schema/builtin.json");

impl Schema {
    /// The built-in kinds' schemas (`schema/builtin.json`), parsed on first use.
    pub fn builtin() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA
            .get_or_init(|| Schema::from_json(BUILTIN).unwrap_or_else(|e| panic!("schema/builtin.json: {e}")))
    }

    /// A schema in `schema/builtin.json`'s format.
    pub fn from_json(text: &str) -> Result<Schema, String> {
        let mut schema: Schema = serde_json::from_str(text).map_err(|e| e.to_string())?;
        schema.refs = schema
            .kinds
            .iter()
            .map(|(kind, name)| {
                (kind.clone(), TypeDef { named_type: Some(name.clone()), ..TypeDef::default() })
            })
            .collect();
        Ok(schema)
    }

    /// The type of `kind` in `api_version` (`v1`, `apps/v1`, …), when the schema has it.
    pub fn type_of(&self, api_version: &str, kind: &str) -> Option<TypeRef<'_>> {
        let def = self.refs.get(&format!("{api_version}, Kind={kind}"))?;
        Some(TypeRef { schema: self, def })
    }

    pub(crate) fn named(&self, name: &str) -> Option<&TypeDef> {
        self.types.get(name)
    }
}

impl<'a> TypeRef<'a> {
    pub(crate) fn with(self, def: &'a TypeDef) -> TypeRef<'a> {
        TypeRef { schema: self.schema, def }
    }

    /// `Schema.Resolve`: the named type's atom (or the inline one), the reference's
    /// `elementRelationship` in force over the map's and the list's own. `None`: no such type.
    pub(crate) fn resolve(self) -> Option<Atom<'a>> {
        let def = match &self.def.named_type {
            Some(name) => self.schema.named(name)?,
            None => self.def,
        };
        let over = self.def.element_relationship;
        Some(Atom {
            scalar: def.scalar,
            list: def
                .list
                .as_deref()
                .map(|l| (l, over.or(l.element_relationship).unwrap_or(Relationship::Atomic))),
            map: def
                .map
                .as_deref()
                .map(|m| (m, over.or(m.element_relationship).unwrap_or(Relationship::Separable))),
        })
    }

    /// The type's name, for a schema error.
    pub(crate) fn name(self) -> String {
        self.def.named_type.clone().unwrap_or_else(|| "<inline>".to_owned())
    }
}

impl<'a> Atom<'a> {
    /// `deduceAtom`: the part of the atom a value of this shape takes (the whole atom when no
    /// part fits, or for a missing value).
    pub(crate) fn deduce(self, value: Option<&Value>) -> Atom<'a> {
        match value {
            Some(Value::Number(_) | Value::String(_) | Value::Bool(_)) if self.scalar.is_some() => {
                Atom { scalar: self.scalar, ..Atom::default() }
            }
            Some(Value::Array(_)) if self.list.is_some() => Atom { list: self.list, ..Atom::default() },
            Some(Value::Object(_)) if self.map.is_some() => Atom { map: self.map, ..Atom::default() },
            _ => self,
        }
    }
}
