//! CEL values as cel-go holds them, shared rather than copied: a list, a map, a string or bytes
//! is one allocation behind an `Arc`, so naming `object` inside a comprehension costs a
//! reference count, never a copy.

use std::any::Any;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::error::Error;

/// A CEL value.
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<Vec<Value>>),
    Map(Arc<Map>),
    /// Nanoseconds, as Go's `time.Duration`.
    Duration(i64),
    Timestamp(jiff::Timestamp),
    Type(Type),
    Optional(Option<Arc<Value>>),
    /// A value of a library's own type: an IP address, a quantity, a URL, an authorizer.
    Object(Arc<dyn Object>),
}

/// The map of a CEL value: insertion order kept (a JSON object's order), looked up by key.
pub type Map = IndexMap<Key, Value>;

/// A map key: CEL allows bool, int, uint and string keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Arc<str>),
}

/// A library type's value (`net.IP`, `kubernetes.Quantity`, …).
pub trait Object: Send + Sync + fmt::Debug + 'static {
    /// The CEL type name, e.g. `net.IP`.
    fn type_name(&self) -> &'static str;
    /// Equality with another value of the same library type.
    fn equals(&self, other: &dyn Object) -> bool;
    fn as_any(&self) -> &dyn Any;
    /// A field selected from the value (`authorizer.requestResource`), if it has one.
    fn field(&self, name: &str) -> Option<Value> {
        let _ = name;
        None
    }
    /// `value.name`: the field, or the error of the selection (`no such key: <name>` for a
    /// field [`Object::field`] does not give).
    fn select(&self, name: &str) -> Result<Value, Error> {
        self.field(name).ok_or_else(|| Error::no_such_key(name))
    }
    /// `has(value.name)` (and whether `value.?name` has a value): by default an error, as for
    /// a value that is neither a map nor a message.
    fn has(&self, name: &str) -> Result<bool, Error> {
        Err(Error::no_such_key(name))
    }
    /// cel-go's `traits.Zeroer` (`optional.ofNonZeroValue`): by default no zero value.
    fn is_zero(&self) -> bool {
        false
    }
    /// The value's type (`type(value)`), when it is not named [`Object::type_name`] (a type
    /// whose name is not static: `Object.spec`).
    fn runtime_type(&self) -> Type {
        Type::Named(Arc::from(self.type_name()))
    }
}

/// A CEL type, as `type(x)` returns it and as type identifiers (`int`, `string`) denote it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List,
    Map,
    Duration,
    Timestamp,
    Type,
    Optional,
    /// A library or message type, by its name.
    Named(Arc<str>),
}

impl Type {
    pub fn name(&self) -> &str {
        match self {
            Type::Null => "null_type",
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Uint => "uint",
            Type::Double => "double",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::List => "list",
            Type::Map => "map",
            Type::Duration => "google.protobuf.Duration",
            Type::Timestamp => "google.protobuf.Timestamp",
            Type::Type => "type",
            Type::Optional => "optional_type",
            Type::Named(name) => name,
        }
    }

    /// The type a type identifier names, if it is one.
    pub fn from_ident(name: &str) -> Option<Type> {
        Some(match name {
            "null_type" => Type::Null,
            "bool" => Type::Bool,
            "int" => Type::Int,
            "uint" => Type::Uint,
            "double" => Type::Double,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "list" => Type::List,
            "map" => Type::Map,
            "google.protobuf.Duration" => Type::Duration,
            "google.protobuf.Timestamp" => Type::Timestamp,
            "type" => Type::Type,
            "optional_type" => Type::Optional,
            // The library types the 1.36 environment names (the `kubernetes.*` ones it does not).
            "net.IP" | "net.CIDR" => Type::Named(Arc::from(name)),
            _ => return None,
        })
    }
}

impl Value {
    pub fn string(s: impl Into<Arc<str>>) -> Value {
        Value::String(s.into())
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    pub fn map(map: Map) -> Value {
        Value::Map(Arc::new(map))
    }

    pub fn object(object: impl Object) -> Value {
        Value::Object(Arc::new(object))
    }

    pub fn type_of(&self) -> Type {
        match self {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Bool,
            Value::Int(_) => Type::Int,
            Value::Uint(_) => Type::Uint,
            Value::Double(_) => Type::Double,
            Value::String(_) => Type::String,
            Value::Bytes(_) => Type::Bytes,
            Value::List(_) => Type::List,
            Value::Map(_) => Type::Map,
            Value::Duration(_) => Type::Duration,
            Value::Timestamp(_) => Type::Timestamp,
            Value::Type(_) => Type::Type,
            Value::Optional(_) => Type::Optional,
            Value::Object(o) => o.runtime_type(),
        }
    }

    /// The type's name, for error texts (never the value).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null_type",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Duration(_) => "google.protobuf.Duration",
            Value::Timestamp(_) => "google.protobuf.Timestamp",
            Value::Type(_) => "type",
            Value::Optional(_) => "optional_type",
            Value::Object(o) => o.type_name(),
        }
    }

    /// cel-go's `Sizer`: characters of a string (not bytes), bytes, entries. `None` for a
    /// value without a size.
    pub fn size(&self) -> Option<u64> {
        Some(match self {
            Value::String(s) => s.chars().count() as u64,
            Value::Bytes(b) => b.len() as u64,
            Value::List(l) => l.len() as u64,
            Value::Map(m) => m.len() as u64,
            _ => return None,
        })
    }

    /// cel-go's `actualSize` for costs: the size, an optional's value's size, else 1.
    pub fn cost_size(&self) -> u64 {
        match self {
            Value::Optional(Some(v)) => v.cost_size(),
            // Strings are charged by bytes here: cel-go's Size() of a string counts runes, but a
            // rune count is O(n) and costs agree on ASCII; see `string_cost_size`.
            other => other.size().unwrap_or(1),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// cel-go's heterogeneous equality (`_==_`): numbers compare across int, uint and double;
    /// lists and maps element-wise; values of different types are unequal (never an error).
    pub fn equals(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            (Value::Duration(a), Value::Duration(b)) => a == b,
            (Value::Timestamp(a), Value::Timestamp(b)) => a == b,
            (Value::Type(a), Value::Type(b)) => a.name() == b.name(),
            (Value::List(a), Value::List(b)) => {
                Arc::ptr_eq(a, b) || (a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(y)))
            }
            (Value::Map(a), Value::Map(b)) => {
                Arc::ptr_eq(a, b)
                    || (a.len() == b.len()
                        && a.iter().all(|(k, v)| lookup(b, &k.to_value()).is_some_and(|w| v.equals(w))))
            }
            (Value::Optional(a), Value::Optional(b)) => match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => a.equals(b),
                _ => false,
            },
            (Value::Object(a), Value::Object(b)) => a.type_name() == b.type_name() && a.equals(b.as_ref()),
            (a, b) => match numeric_cmp(a, b) {
                Some(ordering) => ordering == Ordering::Equal,
                None => false,
            },
        }
    }

    /// `_<_` and its kin: numbers across types, strings, bytes, bools, durations, timestamps.
    /// `None`: no such overload.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (Value::String(a), Value::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Value::Bytes(a), Value::Bytes(b)) => Some(a.cmp(b)),
            (Value::Duration(a), Value::Duration(b)) => Some(a.cmp(b)),
            (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
            (a, b) => numeric_cmp(a, b),
        }
    }
}

/// Ordering of two numbers of any of CEL's numeric types, as cel-go compares them. `None` if
/// either is not a number; NaN compares as cel-go does (unequal, unordered: `Less` never).
pub fn numeric_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Uint(a), Value::Uint(b)) => Some(a.cmp(b)),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::Int(a), Value::Uint(b)) => Some(if *a < 0 { Ordering::Less } else { (*a as u64).cmp(b) }),
        (Value::Uint(a), Value::Int(b)) => Some(if *b < 0 { Ordering::Greater } else { a.cmp(&(*b as u64)) }),
        (Value::Int(a), Value::Double(b)) => int_double_cmp(*a, *b),
        (Value::Double(a), Value::Int(b)) => int_double_cmp(*b, *a).map(Ordering::reverse),
        (Value::Uint(a), Value::Double(b)) => uint_double_cmp(*a, *b),
        (Value::Double(a), Value::Uint(b)) => uint_double_cmp(*b, *a).map(Ordering::reverse),
        _ => None,
    }
}

fn int_double_cmp(i: i64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    // cel-go's `compareDoubleInt`: compare as doubles, except where the double is beyond
    // int64's range as a double (`d > 2^63`, not `>=`: 2^63 equals int64's max as a double).
    if d < -9_223_372_036_854_775_808.0 {
        return Some(Ordering::Greater);
    }
    if d > 9_223_372_036_854_775_808.0 {
        return Some(Ordering::Less);
    }
    (i as f64).partial_cmp(&d)
}

fn uint_double_cmp(u: u64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    if d < 0.0 {
        return Some(Ordering::Greater);
    }
    // cel-go's `compareDoubleUint`: `d > 2^64` (uint64's max as a double is 2^64).
    if d > 18_446_744_073_709_551_616.0 {
        return Some(Ordering::Less);
    }
    (u as f64).partial_cmp(&d)
}

impl Key {
    pub fn to_value(&self) -> Value {
        match self {
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(i) => Value::Int(*i),
            Key::Uint(u) => Value::Uint(*u),
            Key::String(s) => Value::String(s.clone()),
        }
    }

    /// The key a value makes, or cel-go's error for a type that cannot be a key.
    pub fn from_value(value: &Value) -> Result<Key, Error> {
        match value {
            Value::Bool(b) => Ok(Key::Bool(*b)),
            Value::Int(i) => Ok(Key::Int(*i)),
            Value::Uint(u) => Ok(Key::Uint(*u)),
            Value::String(s) => Ok(Key::String(s.clone())),
            other => Err(Error::new(format!("unsupported key type: {}", other.type_name()))),
        }
    }

    pub fn str(s: &str) -> Key {
        Key::String(Arc::from(s))
    }
}

/// Looks `key` up in `map` as cel-go does: an int, uint or integral double key finds an entry
/// under any numeric key of the same value.
pub fn lookup<'m>(map: &'m Map, key: &Value) -> Option<&'m Value> {
    match key {
        Value::String(s) => map.get(&Key::String(s.clone())),
        Value::Bool(b) => map.get(&Key::Bool(*b)),
        Value::Int(i) => {
            map.get(&Key::Int(*i)).or_else(|| u64::try_from(*i).ok().and_then(|u| map.get(&Key::Uint(u))))
        }
        Value::Uint(u) => {
            map.get(&Key::Uint(*u)).or_else(|| i64::try_from(*u).ok().and_then(|i| map.get(&Key::Int(i))))
        }
        Value::Double(d) => {
            if d.fract() != 0.0 || !d.is_finite() {
                return None;
            }
            // cel-go's `doubleToInt64Lossless`: -2^63 is refused as a key too.
            let as_int = if *d > -9_223_372_036_854_775_808.0 && *d < 9_223_372_036_854_775_808.0 {
                map.get(&Key::Int(*d as i64))
            } else {
                None
            };
            as_int.or_else(|| {
                if *d >= 0.0 && *d < 18_446_744_073_709_551_616.0 {
                    map.get(&Key::Uint(*d as u64))
                } else {
                    None
                }
            })
        }
        _ => None,
    }
}

/// Strings as keys of a JSON object's map, shared.
impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key::str(s)
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.equals(other)
    }
}

/// A JSON value as CEL sees an unstructured object: objects are maps with string keys, numbers
/// are int when integral and in range, else double (as the API server's unstructured values).
pub fn from_json(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                // Beyond int64: the API server's JSON decoder makes such a number a float64.
                Value::Double(u as f64)
            } else {
                Value::Double(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::from(s.as_str())),
        serde_json::Value::Array(items) => Value::list(items.iter().map(from_json).collect()),
        serde_json::Value::Object(fields) => {
            let mut map = Map::with_capacity(fields.len());
            for (k, v) in fields {
                map.insert(Key::str(k), from_json(v));
            }
            Value::map(map)
        }
    }
}
