//! A MutatingAdmissionPolicy's mutations applied to an object as kube-apiserver 1.36's plugin
//! applies them (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch`):
//!
//! - [`json_patch::apply`]: a JSONPatch mutation, with `github.com/evanphx/json-patch/v5`'s
//!   semantics and default options (`json_patch.go`): `replace` of a missing key fails, a failed
//!   `test` makes the whole patch a no-op, negative indices, v5's error texts;
//! - [`apply_configuration`]: an ApplyConfiguration mutation (`smd.go`): the configuration and
//!   the live object converted to typed values with the kind's structured-merge-diff schema
//!   (`sigs.k8s.io/structured-merge-diff/v6/typed/validate.go`), the plugin's refusal of atomic
//!   lists, maps and structs, then SMD's `Merge` (`typed/merge.go`), its list order included;
//! - [`schema::Schema::builtin`]: the schemas of the built-in kinds, generated
//!   (`schema/generate.py`) from the `schemaYAML` of
//!   `k8s.io/client-go/applyconfigurations/internal/internal.go` — which applyconfiguration-gen
//!   makes from Kubernetes' published OpenAPI — and the `GroupName` of each
//!   `k8s.io/api/*/*/register.go`, both from Debian's golang-k8s-client-go-dev 0.36.4-1 and
//!   golang-k8s-api-dev 0.36.4-1.
//!
//! What it deliberately does not do:
//! - evaluate CEL: the patch and the configuration are JSON the caller made from the CEL
//!   values as the plugin does (ints, doubles, strings, lists, maps; CEL null is JSON `null`);
//! - decode a JSON Patch's result into the kind's Go type by itself: [`typed::GoTypes`] does
//!   that round trip (unknown fields, wrong types, members dropped when empty or added when
//!   always written) for the caller to run; canonical quantities and defaulting are not done;
//! - fetch schemas: kube-apiserver builds its type converter from its own OpenAPI v3 for each
//!   group-version (custom resources included); [`schema::Schema::from_openapi`] converts such
//!   a document (v3, or a v2 one) as upstream does, [`schema::Schema::from_json`] takes a
//!   schema in the embedded data's format;
//! - reproduce Go's panics: where upstream dereferences nil (see [`json_patch`]), this returns
//!   an error.
//!
//! Where upstream's output depends on Go's random map order, this takes keys in sorted order:
//! the paths listed by the atomic check, which of several undeclared fields is reported (SMD
//! stops at the first it meets), the order of several conversion errors, and whether a JSON
//! Patch `test` of two objects that differ in one member and would dereference nil in another
//! fails or panics.
//!
//! Known differences with upstream:
//! - JSON Patch `test` compares scalars as `serde_json` values, upstream by their JSON text:
//!   `1` and `1.0` differ in both, but `1.0` and `1.00`, or `"\u0041"` and `"A"`, are equal
//!   here and not upstream;
//! - an integer beyond `i64` in a configuration is taken as Go's `uint64` (CEL's uint);
//! - when the live object and the configuration hold values of different kinds under a type
//!   that allows both (deduced types), upstream also walks the live value on a copy whose result
//!   it drops, which could only add errors; that walk is skipped.

pub mod json_patch;
pub mod schema;
pub mod typed;

mod convert;
mod gofmt;
mod merge;
mod openapi;
mod path;
mod quantity;
mod rfc3339;

use serde_json::Value;

use crate::path::{errors_text, VErr};

/// Merges `config` (an apply configuration: the object a CEL `Object{...}` made, already given
/// apiVersion/kind of the live object) into `live` as smd.go does: both converted to typed
/// values with the schema (config strictly: JSON `null` is CEL's null and refused, duplicate
/// list keys refused; the live object leniently, null accepted and duplicates tolerated as
/// upstream's `AllowDuplicates`), the atomic check, then SMD `Merge`.
///
/// Err(text): the text after upstream's `error applying patch: ` prefix, e.g.
/// `failed to convert patch object to typed object: .spec.foo: field not declared in schema`,
/// `invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.nodeSelector, .spec.containers[0].args`.
/// The atomic paths come in a deterministic order (map keys sorted, list items by index; each
/// list index is the item's position in the configuration); upstream's order follows Go's
/// map iteration and varies from request to request.
pub fn apply_configuration(ty: schema::TypeRef<'_>, live: &Value, config: &Value) -> Result<Value, String> {
    let s = ty.schema;
    let mut errs: Vec<VErr> = Vec::new();
    convert::Validator { schema: s, config: true }.validate(ty.def, config, &mut errs);
    if !errs.is_empty() {
        return Err(format!("failed to convert patch object to typed object: {}", errors_text(&errs)));
    }
    let atomics = convert::find_atomics(s, ty.def, config);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    convert::Validator { schema: s, config: false }.validate(ty.def, live, &mut errs);
    if !errs.is_empty() {
        return Err(format!("failed to convert original object to typed object: {}", errors_text(&errs)));
    }
    let merged = merge::Merger { schema: s }.merge(ty.def, Some(live), Some(config), &mut errs);
    if !errs.is_empty() {
        return Err(format!("failed to merge patch: {}", errors_text(&errs)));
    }
    match merged {
        Some(v @ Value::Object(_)) => Ok(v),
        other => Err(format!(
            "failed to convert typed object to object: failed to convert value to unstructured for type {}",
            other.as_ref().map_or("<nil>", |v| gofmt::type_name(v, false))
        )),
    }
}
