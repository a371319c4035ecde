//! A mutation's value applied to the object (k8s.io/apiserver
//! `pkg/admission/plugin/policy/mutating/patch/{json_patch.go,smd.go,typeconverter.go}`) by the
//! `structured-merge` crate: a JSON Patch with evanphx/json-patch v5's semantics, an apply
//! configuration merged as server-side apply merges it, with the kind's schema.
//!
//! The schema is looked up by group-version (`src/schemas.rs`: the built-in kinds', the
//! `GatewayConfig`'s OpenAPI documents, the cluster's published OpenAPI). kube-apiserver looks
//! its type converter up before every mutation; without one it answers 503. So does the
//! gateway for an apply configuration, and in cluster mode for a JSON Patch too; outside
//! cluster mode a JSON Patch needs no schema and is applied to any kind (docs/differences.md,
//! "Custom resources").

use serde_json::Value;

use super::Mutated;
use crate::cel::PatchType;
use crate::review::decode::IncomingReview;
use crate::review::Status;
use crate::schemas::Schemas;
use structured_merge::typed::GoTypes;

pub(super) fn mutation(
    review: &IncomingReview,
    schemas: &Schemas,
    patch_type: PatchType,
    object: &Value,
    value: Value,
) -> Result<Mutated, Status> {
    let kind = review.kind();
    let api_version =
        if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    let mutated = match patch_type {
        // In cluster mode a group-version the API server published no document for has no type
        // converter there: upstream's 503, a JSON Patch too. Outside it, the gateway cannot
        // know, and applies the patch.
        PatchType::JsonPatch if schemas.cluster_published() && schemas.of(&api_version).is_none() => {
            return Err(no_schema(&kind.group, &kind.version, &kind.kind))
        }
        PatchType::JsonPatch => json_patch(object, &value),
        PatchType::ApplyConfiguration => {
            let Some(found) = schemas.of(&api_version) else {
                return Err(no_schema(&kind.group, &kind.version, &kind.kind));
            };
            let Some(schema) = found.schema().type_of(&api_version, &kind.kind) else {
                // The group-version's converter has no type for the kind (`NewNoCorrespondingTypeError`).
                return Ok(Mutated::Failed(format!(
                    "error applying patch: failed to convert patch object to typed object: no corresponding type for {}/{}, Kind={}",
                    kind.group, kind.version, kind.kind
                )));
            };
            let mut configuration = value;
            if let Value::Object(fields) = &mut configuration {
                // The object's own kind and version, whatever the configuration said.
                fields.insert("apiVersion".to_owned(), Value::String(api_version.clone()));
                fields.insert("kind".to_owned(), Value::String(kind.kind.clone()));
            }
            match structured_merge::apply_configuration(schema, object, &configuration) {
                Ok(merged) => Mutated::Object(merged),
                Err(error) => Mutated::Failed(format!("error applying patch: {error}")),
            }
        }
    };
    match mutated {
        Mutated::Object(changed) => typed_round_trip(&api_version, &kind.kind, changed, object),
        other => Ok(other),
    }
}

/// A built-in kind's object as kube-apiserver holds it after a mutation: decoded into its Go
/// type (strictly, after a JSON Patch) and encoded again (`structured_merge::typed`). An error
/// of the decoding is the API server's 500, whatever the failurePolicy, and ends the policies'
/// run. A custom resource is held unstructured: unchanged. Members the object had before the
/// mutation are never unknown (a Kubernetes newer than the gateway's types sent them).
fn typed_round_trip(api_version: &str, kind: &str, object: Value, before: &Value) -> Result<Mutated, Status> {
    match GoTypes::builtin().round_trip(api_version, kind, &object, Some(before)) {
        None => Ok(Mutated::Object(object)),
        Some(Ok(typed)) => Ok(Mutated::Object(typed)),
        Some(Err(error)) => Err(crate::pipeline::verdict::internal_error(&error.0)),
    }
}

/// The operations (as `cel_engine::mutation::json_patch` made them) applied to the object with
/// evanphx/json-patch v5's semantics (`structured_merge::json_patch`).
fn json_patch(object: &Value, operations: &Value) -> Mutated {
    match structured_merge::json_patch::apply(object, operations) {
        Ok(Some(patched)) => Mutated::Object(patched),
        // A `test` that did not hold: the whole patch is a silent no-op.
        Ok(None) => Mutated::Unchanged,
        Err(error) => Mutated::Failed(format!("JSON Patch: {error}")),
    }
}

/// The API server's answer when it has no type converter for the kind: 503, no details.
fn no_schema(group: &str, version: &str, kind: &str) -> Status {
    Status {
        metadata: None,
        status: Some("Failure".to_owned()),
        message: Some(format!(
            "Resource kind {group}/{version}, Kind={kind} not found. There can be a delay between when CustomResourceDefinitions are created and when they are available."
        )),
        reason: Some("ServiceUnavailable".to_owned()),
        details: None,
        code: Some(503),
    }
}
