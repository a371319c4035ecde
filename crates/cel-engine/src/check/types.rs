//! cel-go's checker types (`common/types.Type` as the checker sees it) and the unification of
//! `checker/types.go`: assignability with type-parameter substitution, the most general of two
//! types, and the texts cel-go prints for a type.

use std::collections::HashMap;

/// A type as cel-go's checker knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CheckedType {
    Dyn,
    /// The type of an expression that failed to check (`!error!`).
    Error,
    /// `null_type`.
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List(Box<CheckedType>),
    Map(Box<CheckedType>, Box<CheckedType>),
    /// `type` (no parameter) or `type(T)`.
    Type(Option<Box<CheckedType>>),
    /// A type parameter (`A`, `_var0`).
    Param(String),
    /// An abstract type with parameters: `optional_type(T)`, `net.IP`, `net.CIDR`.
    Opaque(String, Vec<CheckedType>),
    /// A named object type with fields (`kubernetes.AdmissionRequest`, `kubernetes.Quantity`).
    Struct(String),
    /// No type: cel-go's nil `*types.Type` (`UnspecifiedKind`), the type of a field the type
    /// provider finds without giving it a type (k8s `pkg/cel/mutation/jsonpatch.go`
    /// `JSONPatchType.Field` for a name other than `op`, `path`, `from`, `value`). Printed as
    /// nothing, assignable from `dyn` only, never exactly any type, itself included.
    Unspecified,
}

use CheckedType as T;

impl CheckedType {
    pub fn list(elem: CheckedType) -> CheckedType {
        T::List(Box::new(elem))
    }

    pub fn map(key: CheckedType, value: CheckedType) -> CheckedType {
        T::Map(Box::new(key), Box::new(value))
    }

    pub fn optional(param: CheckedType) -> CheckedType {
        T::Opaque("optional_type".into(), vec![param])
    }

    pub fn type_of(param: CheckedType) -> CheckedType {
        T::Type(Some(Box::new(param)))
    }

    pub fn param(name: &str) -> CheckedType {
        T::Param(name.into())
    }

    /// cel-go's `Kind` as a small number, for "same kind" comparisons.
    pub(crate) fn kind(&self) -> u8 {
        match self {
            T::Dyn => 1,
            T::Error => 2,
            T::Null => 3,
            T::Bool => 4,
            T::Int => 5,
            T::Uint => 6,
            T::Double => 7,
            T::String => 8,
            T::Bytes => 9,
            T::Duration => 10,
            T::Timestamp => 11,
            T::List(_) => 12,
            T::Map(..) => 13,
            T::Type(_) => 14,
            T::Param(_) => 15,
            T::Opaque(..) => 16,
            T::Struct(_) => 17,
            T::Unspecified => 0,
        }
    }

    /// `Type.TypeName()`: the runtime type name.
    pub fn type_name(&self) -> &str {
        match self {
            T::Dyn => "dyn",
            T::Error => "error",
            T::Null => "null_type",
            T::Bool => "bool",
            T::Int => "int",
            T::Uint => "uint",
            T::Double => "double",
            T::String => "string",
            T::Bytes => "bytes",
            T::Duration => "google.protobuf.Duration",
            T::Timestamp => "google.protobuf.Timestamp",
            T::List(_) => "list",
            T::Map(..) => "map",
            T::Type(_) => "type",
            T::Param(n) | T::Opaque(n, _) | T::Struct(n) => n,
            T::Unspecified => "",
        }
    }

    /// `Type.Parameters()`.
    pub fn parameters(&self) -> Vec<&CheckedType> {
        match self {
            T::List(e) => vec![e],
            T::Map(k, v) => vec![k, v],
            T::Type(Some(p)) => vec![p],
            T::Opaque(_, ps) => ps.iter().collect(),
            _ => Vec::new(),
        }
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, T::Opaque(n, _) if n == "optional_type")
    }

    /// `maybeUnwrapOptional`.
    pub fn unwrap_optional(&self) -> (&CheckedType, bool) {
        match self {
            T::Opaque(n, ps) if n == "optional_type" && ps.len() == 1 => (&ps[0], true),
            _ => (self, false),
        }
    }

    /// `IsExactType`: the same type, type-parameter names included (a nil type is exactly
    /// no type, not even itself).
    pub fn is_exact(&self, other: &CheckedType) -> bool {
        !matches!(self, T::Unspecified) && self == other
    }

    /// `IsEquivalentType`: the same type, type-parameter names ignored.
    pub fn is_equivalent(&self, other: &CheckedType) -> bool {
        match (self, other) {
            (T::Unspecified, _) => false,
            (T::Param(_), T::Param(_)) => true,
            _ => {
                if self.kind() != other.kind() || self.type_name() != other.type_name() {
                    return false;
                }
                let (a, b) = (self.parameters(), other.parameters());
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.is_equivalent(y))
            }
        }
    }

    fn is_dyn_like(&self) -> bool {
        matches!(self, T::Dyn | T::Param(_))
    }

    /// `Type.IsAssignableType(from)` (cel-go's default: no wrapper types here).
    pub(crate) fn is_assignable_type(&self, from: &CheckedType) -> bool {
        // A nil `*types.Type` receiver is assignable from nothing.
        if matches!(self, T::Unspecified) {
            return false;
        }
        if self == from || self.is_dyn_like() {
            return true;
        }
        if self.kind() != from.kind() || self.type_name() != from.type_name() {
            return false;
        }
        let (a, b) = (self.parameters(), from.parameters());
        a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.is_assignable_type(y))
    }

    /// `checker.FormatCELType`: the text of checker messages (`list(int)`, `null`, `duration`).
    pub fn format(&self) -> String {
        match self {
            T::Duration => "duration".into(),
            T::Error => "!error!".into(),
            T::Null => "null".into(),
            T::Timestamp => "timestamp".into(),
            T::Param(n) => n.clone(),
            T::Opaque(n, ps) if n == "function" && !ps.is_empty() => {
                format_function(Some(&ps[0]), &ps[1..].iter().collect::<Vec<_>>(), false)
            }
            _ => {
                let ps = self.parameters();
                if ps.is_empty() {
                    return self.type_name().to_owned();
                }
                let inner: Vec<String> = ps.iter().map(|p| p.format()).collect();
                format!("{}({})", self.type_name(), inner.join(", "))
            }
        }
    }

    /// `Type.String()`: the text Kubernetes prints in `must evaluate to bool but got dyn`.
    pub fn display(&self) -> String {
        if let T::Param(n) = self {
            return format!("<{n}>");
        }
        let ps = self.parameters();
        if ps.is_empty() {
            return self.type_name().to_owned();
        }
        let inner: Vec<String> = ps.iter().map(|p| p.display()).collect();
        format!("{}({})", self.type_name(), inner.join(", "))
    }
}

impl std::fmt::Display for CheckedType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.format())
    }
}

/// `formatFunctionDeclType`: `(int, double)` or `string.(int)`, with ` -> result` when known.
pub(crate) fn format_function(result: Option<&CheckedType>, args: &[&CheckedType], instance: bool) -> String {
    let mut out = String::new();
    let mut args = args;
    if instance && !args.is_empty() {
        out.push_str(&args[0].format());
        out.push('.');
        args = &args[1..];
    }
    out.push('(');
    let parts: Vec<String> = args.iter().map(|a| a.format()).collect();
    out.push_str(&parts.join(", "));
    out.push(')');
    if let Some(r) = result {
        let r = r.format();
        if !r.is_empty() {
            out.push_str(" -> ");
            out.push_str(&r);
        }
    }
    out
}

/// Type-parameter substitutions (`checker/mapping.go`), keyed by the parameter's name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mapping(HashMap<String, CheckedType>);

impl Mapping {
    fn find(&self, t: &CheckedType) -> Option<&CheckedType> {
        match t {
            T::Param(n) => self.0.get(n),
            _ => None,
        }
    }

    fn add(&mut self, from: &CheckedType, to: CheckedType) {
        if let T::Param(n) = from {
            self.0.insert(n.clone(), to);
        }
    }
}

fn is_dyn(t: &CheckedType) -> bool {
    matches!(t, T::Dyn)
}

pub(crate) fn is_dyn_or_error(t: &CheckedType) -> bool {
    matches!(t, T::Dyn | T::Error)
}

/// `isEqualOrLessSpecific`.
fn is_equal_or_less_specific(t1: &CheckedType, t2: &CheckedType) -> bool {
    if is_dyn(t1) || matches!(t1, T::Param(_)) {
        return true;
    }
    if is_dyn(t2) || matches!(t2, T::Param(_)) {
        return false;
    }
    if t1.kind() != t2.kind() {
        return false;
    }
    match (t1, t2) {
        (T::Opaque(n1, p1), T::Opaque(n2, p2)) => {
            n1 == n2
                && p1.len() == p2.len()
                && p1.iter().zip(p2).all(|(a, b)| is_equal_or_less_specific(a, b))
        }
        (T::List(a), T::List(b)) => is_equal_or_less_specific(a, b),
        (T::Map(k1, v1), T::Map(k2, v2)) => {
            is_equal_or_less_specific(k1, k2) && is_equal_or_less_specific(v1, v2)
        }
        (T::Type(_), T::Type(_)) => true,
        _ => t1.is_exact(t2),
    }
}

/// `mostGeneral`.
pub(crate) fn most_general(t1: &CheckedType, t2: &CheckedType) -> CheckedType {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

/// `internalIsAssignable`: whether `t1` is assignable to `t2`, recording substitutions.
fn internal_is_assignable(m: &mut Mapping, t1: &CheckedType, t2: &CheckedType) -> bool {
    if matches!(t2, T::Param(_)) {
        let (valid, has_sub) = is_valid_type_substitution(m, t1, t2);
        if valid {
            return true;
        }
        if has_sub {
            return false;
        }
    }
    if matches!(t1, T::Param(_)) {
        return is_valid_type_substitution(m, t2, t1).0;
    }
    if is_dyn_or_error(t1) || is_dyn_or_error(t2) {
        return true;
    }
    if matches!(t1, T::Null) {
        return is_assignable_null(t2);
    }
    if matches!(t2, T::Null) {
        return is_assignable_null(t1);
    }
    match t1 {
        T::Bool
        | T::Bytes
        | T::Double
        | T::Int
        | T::String
        | T::Uint
        | T::Duration
        | T::Timestamp
        | T::Struct(_) => t2.is_assignable_type(t1),
        T::Type(_) => matches!(t2, T::Type(_)),
        T::Opaque(..) | T::List(_) | T::Map(..) => {
            t1.kind() == t2.kind()
                && t1.type_name() == t2.type_name()
                && internal_is_assignable_list(m, &t1.parameters(), &t2.parameters())
        }
        _ => false,
    }
}

fn is_assignable_null(t: &CheckedType) -> bool {
    // isLegacyNullable, or assignable from null (dyn-like).
    matches!(t, T::Opaque(..) | T::Struct(_) | T::Duration | T::Timestamp) || t.is_assignable_type(&T::Null)
}

/// `isValidTypeSubstitution`: whether `t2` (a type parameter, or its substitution) can stand
/// for `t1`; and whether `t2` had a substitution.
fn is_valid_type_substitution(m: &mut Mapping, t1: &CheckedType, t2: &CheckedType) -> (bool, bool) {
    if t1.kind() == t2.kind() && t1.is_exact(t2) {
        return (true, true);
    }
    if let Some(t2_sub) = m.find(t2).cloned() {
        if t1.kind() == t2_sub.kind() && t1.is_exact(&t2_sub) {
            return (true, true);
        }
        if internal_is_assignable(m, t1, &t2_sub) {
            let t2_new = most_general(t1, &t2_sub);
            if not_referenced_in(m, t2, &t2_new) {
                m.add(t2, t2_new);
            }
            return (true, true);
        }
        return (false, true);
    }
    if not_referenced_in(m, t2, t1) {
        m.add(t2, t1.clone());
        return (true, false);
    }
    (false, false)
}

fn internal_is_assignable_list(m: &mut Mapping, l1: &[&CheckedType], l2: &[&CheckedType]) -> bool {
    if l1.len() != l2.len() {
        return false;
    }
    l1.iter().zip(l2).all(|(a, b)| internal_is_assignable(m, a, b))
}

/// The occurs check.
fn not_referenced_in(m: &Mapping, t: &CheckedType, within: &CheckedType) -> bool {
    if t.is_exact(within) {
        return false;
    }
    match within {
        T::Param(_) => match m.find(within) {
            None => true,
            Some(sub) => not_referenced_in(m, t, sub),
        },
        T::Opaque(..) | T::List(_) | T::Map(..) | T::Type(_) => {
            within.parameters().iter().all(|p| not_referenced_in(m, t, p))
        }
        _ => true,
    }
}

/// `isAssignable`: the updated substitutions when `t1` is assignable to `t2`.
pub(crate) fn is_assignable(m: &Mapping, t1: &CheckedType, t2: &CheckedType) -> Option<Mapping> {
    let mut copy = m.clone();
    internal_is_assignable(&mut copy, t1, t2).then_some(copy)
}

/// `isAssignableList`.
pub(crate) fn is_assignable_list(m: &Mapping, l1: &[CheckedType], l2: &[CheckedType]) -> Option<Mapping> {
    let mut copy = m.clone();
    let a: Vec<&CheckedType> = l1.iter().collect();
    let b: Vec<&CheckedType> = l2.iter().collect();
    internal_is_assignable_list(&mut copy, &a, &b).then_some(copy)
}

/// `substitute`: bound type parameters replaced (recursively); unbound ones by `dyn` when
/// `to_dyn`.
pub(crate) fn substitute(m: &Mapping, t: &CheckedType, to_dyn: bool) -> CheckedType {
    if let Some(sub) = m.find(t) {
        return substitute(m, sub, to_dyn);
    }
    match t {
        T::Param(_) if to_dyn => T::Dyn,
        T::Opaque(n, ps) => T::Opaque(n.clone(), ps.iter().map(|p| substitute(m, p, to_dyn)).collect()),
        T::List(e) => T::list(substitute(m, e, to_dyn)),
        T::Map(k, v) => T::map(substitute(m, k, to_dyn), substitute(m, v, to_dyn)),
        T::Type(Some(p)) => T::type_of(substitute(m, p, to_dyn)),
        _ => t.clone(),
    }
}

/// Renames type parameters per `names` (an overload's parameters to fresh variables).
pub(crate) fn rename_params(t: &CheckedType, names: &HashMap<String, String>) -> CheckedType {
    match t {
        T::Param(n) => T::Param(names.get(n).cloned().unwrap_or_else(|| n.clone())),
        T::Opaque(n, ps) => T::Opaque(n.clone(), ps.iter().map(|p| rename_params(p, names)).collect()),
        T::List(e) => T::list(rename_params(e, names)),
        T::Map(k, v) => T::map(rename_params(k, names), rename_params(v, names)),
        T::Type(Some(p)) => T::type_of(rename_params(p, names)),
        _ => t.clone(),
    }
}

/// The type-parameter names `t` mentions, in order of first appearance.
pub(crate) fn collect_params(t: &CheckedType, out: &mut Vec<String>) {
    match t {
        T::Param(n) => {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        _ => {
            for p in t.parameters() {
                collect_params(p, out);
            }
        }
    }
}
