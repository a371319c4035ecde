//! The values of the mutation types at runtime: `JSONPatch{…}` (k8s `pkg/cel/mutation/jsonpatch.go`,
//! `JSONPatchType.Val` and `JSONPatchVal`) and `Object…{…}` (`pkg/cel/mutation/dynamic/objects.go`,
//! `ObjectVal`), built by the evaluator ([`Kind::build`]); and the type-name check the patchers run
//! on an object before converting it (`ObjectVal.CheckTypeNamesMatchFieldPathNames`).

use std::any::Any;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::error::Error;
use crate::go::quote as go_quote;
use crate::value::{Key, Map, Object, Type, Value};

use super::{JSONPATCH, OBJECT};

/// A struct literal's type, resolved when the program is built.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    JsonPatch,
    /// `Object` or `Object.<field>…`, by its full name.
    Object(Arc<str>),
}

impl Kind {
    /// The type the mutation resolver gives `name` (`DynamicTypeResolver.Resolve`), if any.
    pub(crate) fn of(name: &str) -> Option<Kind> {
        if name == JSONPATCH {
            return Some(Kind::JsonPatch);
        }
        super::is_patch_type(name).then(|| Kind::Object(Arc::from(name)))
    }

    /// The value the type provider makes of the literal's fields (`NewValue`), in the order
    /// they were written (a field written twice keeps its last value; an optional field
    /// without a value is left out). cel-go hands the fields over as a Go map, so where two
    /// fields are wrong, which one upstream reports varies; here the first written.
    pub(crate) fn build(&self, fields: IndexMap<Arc<str>, Value>) -> Result<Value, Error> {
        match self {
            Kind::Object(name) => Ok(Value::object(DynObject { type_name: name.clone(), fields })),
            Kind::JsonPatch => {
                let mut patch = JsonPatch::default();
                for (name, value) in fields {
                    match &*name {
                        "op" => patch.op = patch_string(&value, "op")?,
                        "path" => patch.path = patch_string(&value, "path")?,
                        "from" => patch.from = patch_string(&value, "from")?,
                        "value" => patch.value = Some(value),
                        _ => return Err(Error::new(format!("unexpected JSONPatchType field: {name}"))),
                    }
                }
                Ok(Value::object(patch))
            }
        }
    }
}

/// `JSONPatchType.Val` for `op`, `path`, `from`: the field's Go value (`value.Value()`) must be a
/// string.
fn patch_string(value: &Value, field: &str) -> Result<Arc<str>, Error> {
    match go_string(value) {
        Some(s) => Ok(s),
        None => Err(Error::new(format!(
            "unexpected type {} for JSONPatchType '{field}' field",
            go_value_type(value)
        ))),
    }
}

/// The string a value's Go value (`ref.Val.Value()`) is, if it is one: a string; a type (its
/// `Value()` is its name); an optional's value's.
fn go_string(value: &Value) -> Option<Arc<str>> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Type(t) => Some(Arc::from(t.name())),
        Value::Optional(Some(v)) => go_string(v),
        _ => None,
    }
}

/// Go's `%T` of a value's Go value (`ref.Val.Value()`), as upstream's errors print it. A list
/// or a map is printed as a literal's (`[]ref.Val`, `map[ref.Val]ref.Val`); one read from the
/// request's JSON would print `[]interface {}` or `map[string]interface {}` upstream.
pub(crate) fn go_value_type(value: &Value) -> String {
    match value {
        Value::Null => "structpb.NullValue".into(),
        Value::Bool(_) => "bool".into(),
        Value::Int(_) => "int64".into(),
        Value::Uint(_) => "uint64".into(),
        Value::Double(_) => "float64".into(),
        Value::String(_) => "string".into(),
        Value::Bytes(_) => "[]uint8".into(),
        Value::List(_) => "[]ref.Val".into(),
        Value::Map(_) => "map[ref.Val]ref.Val".into(),
        Value::Duration(_) => "time.Duration".into(),
        Value::Timestamp(_) => "time.Time".into(),
        Value::Type(_) => "string".into(),
        Value::Optional(None) => "<nil>".into(),
        Value::Optional(Some(v)) => go_value_type(v),
        Value::Object(o) => {
            if o.as_any().is::<JsonPatch>() {
                return "*mutation.JSONPatchVal".into();
            }
            if o.as_any().is::<DynObject>() {
                return "map[string]interface {}".into();
            }
            match o.type_name() {
                "net.IP" => "netip.Addr",
                "net.CIDR" => "netip.Prefix",
                "kubernetes.Quantity" => "*resource.Quantity",
                "kubernetes.URL" => "*url.URL",
                "kubernetes.Semver" => "semver.Version",
                "kubernetes.NamedFormat" => "cel.Format",
                // The authorizer's values (`receiverOnlyObjectVal.Value()`).
                name if name.starts_with("kubernetes.authorization.") => "*types.Err",
                name => name,
            }
            .into()
        }
    }
}

/// A `JSONPatch{op, path, from, value}` (k8s `JSONPatchVal`): a field not written is empty,
/// `value` absent.
#[derive(Clone, Debug, Default)]
pub struct JsonPatch {
    pub op: Arc<str>,
    pub path: Arc<str>,
    pub from: Arc<str>,
    /// The value, when the literal gave one (`null` included).
    pub value: Option<Value>,
}

impl Object for JsonPatch {
    fn type_name(&self) -> &'static str {
        JSONPATCH
    }

    /// `JSONPatchVal.Equal`: the same op, from and path, and values both absent or equal.
    fn equals(&self, other: &dyn Object) -> bool {
        let Some(o) = other.as_any().downcast_ref::<JsonPatch>() else { return false };
        if self.op != o.op || self.from != o.from || self.path != o.path {
            return false;
        }
        match (&self.value, &o.value) {
            (None, None) => true,
            (Some(a), Some(b)) => a.equals(b),
            _ => false,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn field(&self, name: &str) -> Option<Value> {
        self.select(name).ok()
    }

    /// `JSONPatchVal.Get`. An absent `value` is `null` here (upstream hands back a nil value).
    fn select(&self, name: &str) -> Result<Value, Error> {
        match name {
            "op" => Ok(Value::String(self.op.clone())),
            "path" => Ok(Value::String(self.path.clone())),
            "from" => Ok(Value::String(self.from.clone())),
            "value" => Ok(self.value.clone().unwrap_or(Value::Null)),
            _ => Err(Error::new(format!("unsupported indexer: {name}"))),
        }
    }

    /// `JSONPatchVal.IsSet`: a string field is set when not empty.
    fn has(&self, name: &str) -> Result<bool, Error> {
        match name {
            "op" => Ok(!self.op.is_empty()),
            "path" => Ok(!self.path.is_empty()),
            "from" => Ok(!self.from.is_empty()),
            "value" => Ok(self.value.is_some()),
            _ => Err(Error::new(format!("unsupported field: {name}"))),
        }
    }
}

/// An `Object{…}` or `Object.<field>…{…}` (k8s `ObjectVal`): its type's full name and its
/// fields, in the order written. Field names and values are not checked against any schema.
#[derive(Clone, Debug)]
pub struct DynObject {
    pub type_name: Arc<str>,
    pub fields: IndexMap<Arc<str>, Value>,
}

impl Object for DynObject {
    /// Every object type answers `Object` here (a static name); its full name is its
    /// [`Object::runtime_type`] and [`DynObject::type_name`].
    fn type_name(&self) -> &'static str {
        OBJECT
    }

    /// `ObjectVal.Equal`: the same type, and fields `reflect.DeepEqual` (numbers of
    /// different types differ; a list equals only itself; maps by content).
    fn equals(&self, other: &dyn Object) -> bool {
        let Some(o) = other.as_any().downcast_ref::<DynObject>() else { return false };
        self.type_name == o.type_name && fields_deep_equal(&self.fields, &o.fields)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn field(&self, name: &str) -> Option<Value> {
        self.select(name).ok()
    }

    /// A field of a statically typed object (the type's `GetFrom` on `ObjectVal.Value()`): its
    /// value with the objects in it made maps, as the Go conversion does; `null` when the
    /// object has no such field. (Upstream selects on an object typed `dyn` as on any value
    /// without fields, `no such key`.)
    fn select(&self, name: &str) -> Result<Value, Error> {
        Ok(self.fields.get(name).map(plain).unwrap_or(Value::Null))
    }

    fn has(&self, name: &str) -> Result<bool, Error> {
        Ok(self.fields.contains_key(name))
    }

    /// `ObjectVal.IsZeroValue`: no fields.
    fn is_zero(&self) -> bool {
        self.fields.is_empty()
    }

    fn runtime_type(&self) -> Type {
        Type::Named(self.type_name.clone())
    }
}

/// A value read back from an object's field: the objects in it become maps of their fields.
fn plain(value: &Value) -> Value {
    match value {
        Value::Object(o) => match o.as_any().downcast_ref::<DynObject>() {
            Some(object) => {
                let mut map = Map::with_capacity(object.fields.len());
                for (k, v) in &object.fields {
                    map.insert(Key::String(k.clone()), plain(v));
                }
                Value::map(map)
            }
            None => value.clone(),
        },
        Value::List(items) if items.iter().any(holds_object) => {
            Value::list(items.iter().map(plain).collect())
        }
        Value::Map(map) if map.values().any(holds_object) => {
            Value::map(map.iter().map(|(k, v)| (k.clone(), plain(v))).collect())
        }
        other => other.clone(),
    }
}

fn holds_object(value: &Value) -> bool {
    match value {
        Value::Object(o) => o.as_any().is::<DynObject>(),
        Value::List(items) => items.iter().any(holds_object),
        Value::Map(map) => map.values().any(holds_object),
        _ => false,
    }
}

fn fields_deep_equal(a: &IndexMap<Arc<str>, Value>, b: &IndexMap<Arc<str>, Value>) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| deep_equal(v, w)))
}

/// Go's `reflect.DeepEqual` on two fields' `ref.Val`s: the same Go type and content. Numbers
/// of different types differ (`1` and `1.0`); a list is equal only to itself (cel-go's list
/// holds a function, and functions are never deeply equal); maps by content; objects by type
/// and fields.
fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Uint(x), Value::Uint(y)) => x == y,
        (Value::Double(x), Value::Double(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Duration(x), Value::Duration(y)) => x == y,
        (Value::Timestamp(x), Value::Timestamp(y)) => x == y,
        (Value::Type(x), Value::Type(y)) => x.name() == y.name(),
        (Value::List(x), Value::List(y)) => Arc::ptr_eq(x, y),
        (Value::Map(x), Value::Map(y)) => {
            Arc::ptr_eq(x, y)
                || (x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w))))
        }
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => deep_equal(x, y),
            _ => false,
        },
        (Value::Object(x), Value::Object(y)) => {
            Arc::ptr_eq(x, y)
                || match (x.as_any().downcast_ref::<DynObject>(), y.as_any().downcast_ref::<DynObject>()) {
                    (Some(x), Some(y)) => {
                        x.type_name == y.type_name && fields_deep_equal(&x.fields, &y.fields)
                    }
                    (None, None) => x.type_name() == y.type_name() && x.equals(y.as_ref()),
                    _ => false,
                }
        }
        _ => false,
    }
}

/// `ObjectVal.CheckTypeNamesMatchFieldPathNames` on `object`: every object nested in it
/// through its fields must be named after the path of field names from it
/// (`Object.spec{selector: Object.spec.selector{}}`); lists and maps in between add no name.
/// The errors in the order of the fields (upstream's order follows Go's map iteration).
pub fn type_name_errors(object: &DynObject) -> Vec<String> {
    let mut errors = Vec::new();
    let mut path = object.type_name.to_string();
    check_object(object, &mut path, &mut errors);
    errors
}

fn check_object(object: &DynObject, path: &mut String, errors: &mut Vec<String>) {
    if *object.type_name != **path {
        errors.push(format!(
            "unexpected type name {}, expected {}, which matches field name path from root Object type",
            go_quote(&object.type_name),
            go_quote(path)
        ));
    }
    for (name, value) in &object.fields {
        let len = path.len();
        path.push('.');
        path.push_str(name);
        check_value(value, path, errors);
        path.truncate(len);
    }
}

/// `typeCheck` of a value under an object: an object is checked; a list's elements and a
/// map's values (their Go values being `[]ref.Val` and `map[ref.Val]ref.Val`, also an
/// optional's) under the same path.
fn check_value(value: &Value, path: &mut String, errors: &mut Vec<String>) {
    match value {
        Value::Object(o) => {
            if let Some(object) = o.as_any().downcast_ref::<DynObject>() {
                check_object(object, path, errors);
            }
        }
        Value::List(items) => items.iter().for_each(|v| check_value(v, path, errors)),
        Value::Map(map) => map.values().for_each(|v| check_value(v, path, errors)),
        Value::Optional(Some(inner)) if matches!(**inner, Value::List(_) | Value::Map(_)) => {
            check_value(inner, path, errors)
        }
        _ => {}
    }
}
