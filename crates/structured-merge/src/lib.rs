//! An apply configuration merged into an object as kube-apiserver 1.36 merges a
//! MutatingAdmissionPolicy's `ApplyConfiguration` mutation (k8s.io/apiserver
//! `pkg/admission/plugin/policy/mutating/patch/smd.go`, `ApplyStructuredMergeDiff`), which is
//! server-side apply's merge without field managers: `sigs.k8s.io/structured-merge-diff/v6`
//! `typed` (conversion with validation, `Merge`), over the kind's schema.
//!
//! [`apply_configuration`] does what `ApplyStructuredMergeDiff` does, in its order and with its
//! error texts:
//! 1. the configuration converted to a typed value, strictly (`typed/validate.go`): a field the
//!    schema does not declare, a value of the wrong type, a duplicate key of an associative list
//!    fail with `failed to convert patch object to typed object: <path>: <problem>`;
//! 2. `validatePatch`: a value landing on an atomic list, map or struct, at any depth, fails with
//!    `invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: <paths>`;
//! 3. the live object converted, duplicates allowed;
//! 4. `Merge` (`typed/merge.go`): scalars and atomic elements replaced, maps and structs merged
//!    key by key, associative lists merged per key (or per value, for sets) in the order of
//!    structured-merge-diff's `visitListItems`.
//!
//! [`schema::Schema::builtin`] holds the built-in kinds' schemas, generated from Kubernetes'
//! published OpenAPI (`schema/generate.py`, `schema/builtin.json`).
//!
//! Deliberately not reproduced: Go map iteration order. Upstream walks a map's members in a
//! random order, so which of several unknown fields of one map is named, and the order of the
//! atomic paths, vary from run to run; here members are walked in key order. The typed round
//! trip a built-in kind's object then goes through in the API server (defaulting, Go's
//! encoding) is not this crate's.
//!
//! Linear in the sizes of the object and the configuration: associative list items are matched
//! through hash maps of their keys, never by scanning.

use serde_json::Value;

mod go;
mod merge;
pub mod schema;
#[cfg(test)]
mod tests;
mod validate;

use schema::TypeRef;

/// Merges `config` (an apply configuration, with the live object's `apiVersion` and `kind`)
/// into `live`. `Err` is the text after upstream's `error applying patch: `.
pub fn apply_configuration(ty: TypeRef<'_>, live: &Value, config: &Value) -> Result<Value, String> {
    let errors = validate::validate(ty, config, false);
    if !errors.is_empty() {
        return Err(format!("failed to convert patch object to typed object: {}", validate::join(&errors)));
    }
    let atomics = validate::atomics(ty, config);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    let errors = validate::validate(ty, live, true);
    if !errors.is_empty() {
        return Err(format!(
            "failed to convert original object to typed object: {}",
            validate::join(&errors)
        ));
    }
    match merge::merge(ty, Some(live), Some(config)) {
        Ok(merged) => Ok(merged.unwrap_or(Value::Null)),
        Err(errors) => Err(format!("failed to merge patch: {}", validate::join(&errors))),
    }
}
