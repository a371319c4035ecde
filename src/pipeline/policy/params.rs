//! The parameters of one binding (k8s.io/apiserver `pkg/admission/plugin/policy/generic`,
//! `CollectParams`): the objects its `paramRef` selects, from the configuration or, for a kind
//! it holds none of, from [`Lookups`] (cluster mode); the scope and not-found errors as upstream.

use super::Lookups;
use crate::cel::CelValue;
use crate::config::policy::{Binding, ParamSet, Policy};
use crate::review::decode::IncomingReview;

/// The params of one binding as CEL sees them: `[None]` for one evaluation without params.
/// Each object, of the configuration or served by the API server, is converted once and
/// shared by every review until it changes (`Param::cel`).
pub(super) fn of(
    policy: &Policy,
    binding: &Binding,
    review: &IncomingReview,
    lookups: &dyn Lookups,
) -> Result<Vec<Option<CelValue>>, String> {
    let (Some(kind), Some(param_ref)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    // Parameters of a kind the configuration holds come from it; others, in cluster mode,
    // from the API server.
    let live = policy.params.is_empty();
    let namespaced =
        live.then(|| lookups.namespaced(&kind.api_version, &kind.kind)).flatten().unwrap_or_else(|| {
            is_namespaced(&kind.api_version, &kind.kind, &policy.params, param_ref.namespace.as_deref())
        });
    let namespace = match (namespaced, param_ref.namespace.as_deref()) {
        (false, Some(_)) => {
            return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".to_owned())
        }
        (false, None) => None,
        (true, Some(namespace)) => Some(namespace.to_owned()),
        (true, None) if review.request.namespace.is_empty() => {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .to_owned(),
            )
        }
        (true, None) => Some(review.request.namespace.clone()),
    };
    let namespace = namespace.unwrap_or_default();
    // A name is one lookup; a selector reads the namespace's objects only.
    let name = param_ref.name.as_deref();
    let candidates =
        match live.then(|| lookups.params(&kind.api_version, &kind.kind, &namespace, name)).flatten() {
            Some(served) => served?,
            None => policy.params.select(&namespace, name),
        };
    let found: Vec<Option<CelValue>> = candidates
        .iter()
        .filter(|p| match (&param_ref.name, &param_ref.selector) {
            (Some(_), _) => true,
            (None, Some(selector)) => selector.matches(&p.labels),
            (None, None) => false,
        })
        .map(|p| Some(p.cel(&kind.api_version, &kind.kind)))
        .collect();
    if found.is_empty() && param_ref.deny_when_not_found {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".to_owned());
    }
    Ok(found)
}

/// The param kind's scope, without discovery: the core kinds the gateway knows, else the
/// configured objects of the kind (namespaced when they have a namespace), else the binding's
/// `paramRef.namespace`.
fn is_namespaced(api_version: &str, kind: &str, configured: &ParamSet, ref_namespace: Option<&str>) -> bool {
    const CLUSTER: &[(&str, &str)] = &[("v1", "Namespace"), ("v1", "Node"), ("v1", "PersistentVolume")];
    const NAMESPACED: &[(&str, &str)] =
        &[("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Service")];
    if CLUSTER.contains(&(api_version, kind)) {
        return false;
    }
    if NAMESPACED.contains(&(api_version, kind)) {
        return true;
    }
    match configured.iter().next() {
        Some(param) => !param.namespace.is_empty(),
        None => ref_namespace.is_some(),
    }
}
