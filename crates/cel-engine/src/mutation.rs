//! The CEL of a MutatingAdmissionPolicy's mutations, as kube-apiserver 1.36 compiles and
//! evaluates them: the patch types its environment adds for a mutation (k8s
//! `pkg/admission/plugin/cel/compile.go`, `hasPatchTypes`), the result type a mutation must
//! have, and what the patchers make of its value.
//!
//! Opt-in, per environment (a policy's matchConditions and variables do not have them:
//! `undeclared reference to 'JSONPatch'` there):
//! - checking: [`TypeEnv::with_mutation`](crate::check::TypeEnv::with_mutation) declares the
//!   types of the type resolver (`pkg/cel/mutation/typeresolver.go`) and `jsonpatch.escapeKey`;
//! - evaluating: [`register`] adds `jsonpatch.escapeKey` to a [`Registry`] and lets
//!   [`compile`](crate::compile()) build the types' literals.
//!
//! The types:
//! - `JSONPatch{op, path, from, value}` (`pkg/cel/mutation/jsonpatch.go`): `op`, `path`,
//!   `from` are strings, `value` is `dyn`. Any other field name is found with no type, so the
//!   checker refuses a value for it (`expected type of field 'foo' is '' but provided type is
//!   'string'`) unless the value is `dyn`, which fails when evaluated (`unexpected
//!   JSONPatchType field: foo`); a string field given a `dyn` of another type fails then too
//!   (`unexpected type int64 for JSONPatchType 'op' field`).
//! - `Object` and `Object.<field>.<field>…` (`pkg/cel/mutation/dynamic/objects.go`): any field
//!   name, every field `dyn`; nothing ties a type's name to where its value is put, until the
//!   patcher checks the names ([`type_name_errors`]).
//! - The type names are no values at runtime: a reference to one as an expression (`Object`,
//!   `type(x) == JSONPatch`) fails the program (`reference to undefined type: JSONPatch`).
//!
//! A literal costs cel-go's `StructCreateBaseCost` (40) when evaluated, its fields their own;
//! `jsonpatch.escapeKey(s)` costs one traversal of `s` (k8s `pkg/cel/library/cost.go`).
//!
//! After evaluation: [`check_mutation`] is the result-type check of the API server's compiler
//! (`must evaluate to list(JSONPatch) but got list(dyn)`); [`json_patch`] and
//! [`apply_configuration`] turn a value into the JSON the patchers apply, with their errors.

use std::fmt;

use crate::check::{check_result_type, CheckedType};
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::value::Value;

mod json;
mod object;

pub use json::{apply_configuration, json_patch};
pub use object::{type_name_errors, DynObject, JsonPatch};

pub(crate) use object::Kind;

/// The name of the JSON Patch operation type.
pub const JSONPATCH: &str = "JSONPatch";
/// The name of the root object type; `Object.<field>…` names the type of a field's value.
pub const OBJECT: &str = "Object";

/// How a mutation patches (`MutatingAdmissionPolicy` `spec.mutations[].patchType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `JSONPatch`: the expression gives `list(JSONPatch)`.
    JsonPatch,
    /// `ApplyConfiguration`: the expression gives an `Object`.
    ApplyConfiguration,
}

/// The type a mutation's expression must have (`patch.JSONPatchCondition.ReturnTypes`,
/// `patch.ApplyConfigurationCondition.ReturnTypes`).
pub fn result_type(patch_type: PatchType) -> CheckedType {
    match patch_type {
        PatchType::JsonPatch => CheckedType::list(CheckedType::Struct(JSONPATCH.into())),
        PatchType::ApplyConfiguration => CheckedType::Struct(OBJECT.into()),
    }
}

/// The API server's result-type check of a mutation (`CompileCELExpression`): the checked
/// type must be exactly [`result_type`]; the error is its text (`must evaluate to
/// list(JSONPatch) but got list(dyn)`, `must evaluate to Object but got dyn`).
pub fn check_mutation(patch_type: PatchType, output: &CheckedType) -> std::result::Result<(), String> {
    check_result_type(output, &[result_type(patch_type)])
}

/// Whether the mutation environment's type resolver knows `name`
/// (`DynamicTypeResolver.Resolve`): `JSONPatch`, `Object`, `Object.<anything>`.
pub fn is_patch_type(name: &str) -> bool {
    name == JSONPATCH || name == OBJECT || name.starts_with("Object.")
}

/// The type the resolver gives the field `field` of the type `type_name` (`Field`): for
/// `JSONPatch`, `string` for `op`, `path`, `from`, `dyn` for `value`, no type for any other
/// name; `dyn` for any field of an object.
pub(crate) fn field_type(type_name: &str, field: &str) -> CheckedType {
    match (type_name, field) {
        (JSONPATCH, "op" | "path" | "from") => CheckedType::String,
        (JSONPATCH, "value") => CheckedType::Dyn,
        (JSONPATCH, _) => CheckedType::Unspecified,
        _ => CheckedType::Dyn,
    }
}

/// Adds what a mutation's environment has beyond the base one to `registry`: the `jsonpatch`
/// library (`jsonpatch.escapeKey`) and the literals of `JSONPatch` and `Object…` types.
pub fn register(registry: &mut Registry) {
    registry.global("jsonpatch.escapeKey", 1, escape_key_call, Cost::Of(|args, _| escape_key_cost(args)));
    registry.mutation_types = true;
}

/// k8s `library.escapeKey`: a key made a JSON Pointer reference token (RFC 6901): `~` becomes
/// `~0`, `/` becomes `~1` (`a/b~c` → `a~1b~0c`).
pub fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

fn escape_key_call(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    match &args[0] {
        Value::String(s) => Ok(Value::string(escape_key(s))),
        _ => Err(Error::no_match()),
    }
}

/// One traversal of the string (characters × 0.1, rounded up).
fn escape_key_cost(args: &[Value]) -> u64 {
    traversal_cost(args[0].size().unwrap_or(1))
}

/// Why a mutation's value gives no patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MutationError {
    /// The error upstream's patcher returns, its text.
    Error(String),
    /// Upstream panics here (the text is the panic's): a JSON Patch `value` holding an
    /// `Object…{}` inside a list or a map.
    Panic(String),
    /// An apply configuration holding a value its unstructured object cannot hold (the Go
    /// type upstream puts there: `uint64`, `[]uint8`, `time.Time`, …); upstream refuses it
    /// when merging, in structured-merge-diff's words about the schema, not reproduced here.
    Unrepresentable(String),
}

impl MutationError {
    fn prefixed(self, prefix: &str) -> MutationError {
        match self {
            MutationError::Error(s) => MutationError::Error(format!("{prefix}{s}")),
            other => other,
        }
    }
}

impl fmt::Display for MutationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MutationError::Error(s) | MutationError::Panic(s) => f.write_str(s),
            MutationError::Unrepresentable(t) => {
                write!(f, "the applyConfiguration holds a value of Go type {t}, which an object cannot hold")
            }
        }
    }
}

impl std::error::Error for MutationError {}

#[cfg(test)]
mod tests;
