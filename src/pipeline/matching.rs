//! Stage 1: does a webhook get called for this request? (docs/semantics.md §3, §4)
//!
//! Evaluated in the API server's order: namespaceSelector, objectSelector, rules; a selector
//! error only fails the request when a rule matched (§4.0.5–4.0.6). matchConditions come last
//! (§4.0.7), in `conditions.rs`, once these let the webhook through.

use std::fmt;
use std::sync::Arc;

use super::object::ObjectState;
use super::verdict;
use crate::config::compile::Hook;
use crate::config::equivalence::{Gvk, Hit};
use crate::config::rules::RuleRequest;
use crate::config::selector::Labels;
use crate::review::decode::IncomingReview;
use crate::review::{Operation, Status};
use crate::upstream::CallError;

/// Why a webhook was not called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// No rule names this operation, resource and scope.
    Rules,
    NamespaceSelector,
    ObjectSelector,
    /// Round 1 of the mutating chain: not scheduled for reinvocation (§11.4).
    NotReinvoked,
    /// This matchCondition, the first false one, excludes the webhook (§4.5 a).
    ConditionFalse(String),
    /// matchConditions failed to evaluate, and `failurePolicy: Ignore` skips the webhook
    /// (§4.5 b): the error, and the conditions that failed (none: the whole evaluation).
    ConditionError {
        message: String,
        conditions: Vec<String>,
    },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rules => "no rule matches",
            Self::NamespaceSelector => "namespaceSelector does not match",
            Self::ObjectSelector => "objectSelector matches neither object nor oldObject",
            Self::NotReinvoked => "not scheduled for reinvocation",
            Self::ConditionFalse(name) => return write!(f, "matchCondition {name:?} is false"),
            Self::ConditionError { message, conditions } => {
                let which = match conditions.as_slice() {
                    [] => "matchConditions failed to evaluate".to_owned(),
                    [one] => format!("matchCondition {one:?} failed to evaluate"),
                    many => format!("matchConditions {} failed to evaluate", many.join(", ")),
                };
                return write!(f, "{which} and failurePolicy is Ignore: {message}");
            }
        })
    }
}

/// Requests no API-registered webhook ever sees (§3.2, §3.3), with the reason.
pub(crate) fn exempt(review: &IncomingReview) -> Option<&'static str> {
    let kind = review.kind();
    let resource = review.resource();
    let admission_kinds = [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ];
    if kind.group == "admissionregistration.k8s.io" && admission_kinds.contains(&kind.kind.as_str()) {
        return Some("admission configuration objects are never sent to webhooks");
    }
    let virtual_resource = match resource.group.as_str() {
        "authentication.k8s.io" => {
            ["tokenreviews", "selfsubjectreviews"].contains(&resource.resource.as_str())
        }
        "authorization.k8s.io" => [
            "subjectaccessreviews",
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
        ]
        .contains(&resource.resource.as_str()),
        _ => false,
    };
    virtual_resource.then_some("virtual authentication/authorization resources are never sent to webhooks")
}

/// The labels of the request's namespace, as far as they were found (§4.3).
#[derive(Clone, Debug)]
pub(crate) enum NamespaceLabels {
    /// Not looked up: no candidate webhook needs them.
    NotNeeded,
    Found(Arc<Labels>),
    /// No such namespace; `live` when the API server said so (not the configuration).
    Missing {
        live: bool,
    },
    /// The API server could not be asked.
    Unavailable(String),
}

/// Whether matching this request against a namespaceSelector reads the labels of a stored
/// namespace (not those of the object itself or none at all).
pub(crate) fn reads_namespace_labels(review: &IncomingReview) -> bool {
    let namespace = &review.request.namespace;
    let resource = &review.resource().resource;
    if namespace.is_empty() && resource != "namespaces" {
        return false;
    }
    !writes_namespace(review)
}

/// Creating or updating a namespace: its selector sees the labels the request (and earlier
/// patches) give it.
fn writes_namespace(review: &IncomingReview) -> bool {
    review.resource().resource == "namespaces"
        && review.request.sub_resource.is_empty()
        && matches!(review.operation(), Operation::Create | Operation::Update)
}

/// Whether `hook` looks at namespace labels at all.
pub(crate) fn has_namespace_selector(hook: &Hook) -> bool {
    hook.namespace_selector.as_ref().is_some_and(|selector| !selector.is_empty())
}

/// `Ok(None)`: call the webhook; `Ok(Some(skip))`: don't; `Err(status)`: the request fails.
pub(crate) fn should_call(
    hook: &Hook,
    review: &IncomingReview,
    object: &ObjectState<'_>,
    namespace: &NamespaceLabels,
) -> Result<Option<Skip>, Status> {
    let mut selector_error = None;
    match namespace_matches(hook, review, object, namespace) {
        Ok(true) => {}
        Ok(false) => return Ok(Some(Skip::NamespaceSelector)),
        Err(status) => selector_error = Some(status),
    }
    if !object_matches(hook, object) {
        return Ok(Some(Skip::ObjectSelector));
    }
    match rule_match(hook, review) {
        RuleMatch::None => return Ok(Some(Skip::Rules)),
        RuleMatch::Requested | RuleMatch::Equivalent(Hit { kind: Some(_), .. }) => {}
        // Before any selector error, as the API server does (§4.2).
        RuleMatch::Equivalent(Hit { member, kind: None }) => {
            return Err(verdict::internal_error(&format!(
                "unable to convert to {}: unknown kind",
                member.gvr()
            )))
        }
    }
    match selector_error {
        Some(status) => Err(status),
        None => Ok(None),
    }
}

/// How a webhook's rules match the request.
pub(crate) enum RuleMatch<'h> {
    None,
    /// A rule matches the requested resource (§4.0.3).
    Requested,
    /// Under `matchPolicy: Equivalent`, only a resource stored with it (§4.0.4, §4.2).
    Equivalent(Hit<'h>),
}

/// §4.0.3, then §4.0.4 for an Equivalent webhook.
pub(crate) fn rule_match<'h>(hook: &'h Hook, review: &IncomingReview) -> RuleMatch<'h> {
    let resource = review.resource();
    let request = RuleRequest {
        operation: review.operation(),
        group: &resource.group,
        version: &resource.version,
        resource: &resource.resource,
        subresource: &review.request.sub_resource,
        namespace: &review.request.namespace,
    };
    if hook.rules.iter().any(|rule| rule.matches(&request)) {
        return RuleMatch::Requested;
    }
    match hook.equivalence.as_deref().and_then(|equivalence| equivalence.search(&hook.rules, &request)) {
        Some(hit) => RuleMatch::Equivalent(hit),
        None => RuleMatch::None,
    }
}

/// The call error of a webhook whose rules match only another version of the requested
/// resource: the gateway cannot convert the object to it (docs/differences.md,
/// "matchPolicy `Equivalent`"), so the webhook is judged by its failurePolicy instead of being sent
/// the object in a version it did not ask for.
pub(crate) fn not_convertible(hook: &Hook, review: &IncomingReview) -> Option<CallError> {
    let RuleMatch::Equivalent(Hit { kind: Some(to), .. }) = rule_match(hook, review) else {
        return None;
    };
    let from = review.kind();
    let from = Gvk { group: &from.group, version: &from.version, kind: &from.kind };
    Some(CallError::NotConvertible { from: from.to_string(), to: to.to_string() })
}

/// §4.3. `Err` is the 404 for a namespace that does not exist, or the 500 when the API server
/// could not say.
fn namespace_matches(
    hook: &Hook,
    review: &IncomingReview,
    object: &ObjectState<'_>,
    namespace: &NamespaceLabels,
) -> Result<bool, Status> {
    // Cluster-scoped objects other than namespaces are never excluded.
    if review.request.namespace.is_empty() && review.resource().resource != "namespaces" {
        return Ok(true);
    }
    let Some(selector) = &hook.namespace_selector else {
        return Ok(false);
    };
    if selector.is_empty() {
        return Ok(true);
    }
    if writes_namespace(review) {
        let no_labels = Labels::new();
        return Ok(selector.matches(object.labels().unwrap_or(&no_labels)));
    }
    match namespace {
        NamespaceLabels::Found(labels) => Ok(selector.matches(labels)),
        NamespaceLabels::Missing { live } => {
            Err(verdict::namespace_not_found(&review.request.namespace, (!live).then_some(&hook.name)))
        }
        NamespaceLabels::Unavailable(message) => Err(verdict::internal_error(message)),
        // Resolved before matching whenever a candidate has a selector: not reached.
        NamespaceLabels::NotNeeded => Err(verdict::internal_error("namespace labels were not looked up")),
    }
}

/// §4.4: the selector must match the labels of the current object or of the old object.
fn object_matches(hook: &Hook, object: &ObjectState<'_>) -> bool {
    let Some(selector) = &hook.object_selector else {
        return false;
    };
    if selector.is_empty() {
        return true;
    }
    object.labels().is_some_and(|labels| selector.matches(labels))
        || object.old_labels().is_some_and(|labels| selector.matches(labels))
}
