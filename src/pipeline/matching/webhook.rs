//! Whether a webhook is called for a request (docs/semantics.md §3, §4; k8s.io/apiserver
//! `pkg/admission/plugin/webhook/generic/webhook.go`, `ShouldCallHook`), up to its
//! matchConditions (§4.0.7, `conditions.rs`).
//!
//! Upstream evaluates the namespaceSelector, the objectSelector, then the rules, and a
//! selector's error only fails the request when a rule matched (§4.0.5, §4.0.6). Rules read
//! nothing but the request's envelope, so they come first here: a webhook no rule matches is
//! skipped without its object's labels read or its namespace looked up, which changes no
//! decision. For one whose rules match, the selectors are then evaluated in upstream's order.

use std::fmt;

use super::namespace::{NamespaceLabels, Scope};
use super::rules::{as_received, first_match, RuleMatch};
use super::selectors::{namespace_selected, object_selected, NO_LABELS};
use crate::config::compile::Hook;
use crate::config::equivalence::{Gvk, Hit};
use crate::pipeline::object::ObjectState;
use crate::pipeline::verdict;
use crate::review::decode::IncomingReview;
use crate::review::Status;
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

/// §4.0.3, then §4.0.4 for an Equivalent webhook.
pub(crate) fn rule_match<'h>(hook: &'h Hook, review: &IncomingReview) -> RuleMatch<'h> {
    first_match(hook.rules.iter(), hook.equivalence.as_deref(), &as_received(review))
}

/// Whether matching `hook`, whose rules matched so (`rules`), reads the labels of the
/// request's stored namespace: they are looked up before [`selected`] then.
pub(crate) fn needs_namespace(hook: &Hook, rules: &RuleMatch<'_>, review: &IncomingReview) -> bool {
    rules.matched()
        && hook.namespace_selector.as_ref().is_some_and(|selector| !selector.is_empty())
        && Scope::of(review) == Scope::Stored
}

/// `Ok(None)`: call the webhook; `Ok(Some(skip))`: don't; `Err(status)`: the request fails.
/// With the namespace's labels as already looked up (the review looks them up first when
/// [`needs_namespace`] says so).
pub(crate) fn should_call(
    hook: &Hook,
    review: &IncomingReview,
    object: &ObjectState<'_>,
    namespace: &NamespaceLabels,
) -> Result<Option<Skip>, Status> {
    selected(hook, rule_match(hook, review), review, object, namespace)
}

/// [`should_call`] once the rules are known: the selectors in upstream's order for a webhook
/// whose rules match.
pub(crate) fn selected(
    hook: &Hook,
    rules: RuleMatch<'_>,
    review: &IncomingReview,
    object: &ObjectState<'_>,
    namespace: &NamespaceLabels,
) -> Result<Option<Skip>, Status> {
    if !rules.matched() {
        return Ok(Some(Skip::Rules));
    }
    let mut selector_error = None;
    match namespace_matches(hook, review, object, namespace) {
        Ok(true) => {}
        Ok(false) => return Ok(Some(Skip::NamespaceSelector)),
        Err(status) => selector_error = Some(status),
    }
    let selected = hook
        .object_selector
        .as_ref()
        .is_some_and(|selector| object_selected(selector, || object.labels(), || object.old_labels()));
    if !selected {
        return Ok(Some(Skip::ObjectSelector));
    }
    // Before any selector error, as the API server does (§4.2).
    if let RuleMatch::Equivalent(Hit { member, kind: None }) = rules {
        return Err(verdict::internal_error(&format!("unable to convert to {}: unknown kind", member.gvr())));
    }
    match selector_error {
        Some(status) => Err(status),
        None => Ok(None),
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
    let scope = Scope::of(review);
    // Cluster-scoped objects other than namespaces are never excluded.
    if scope == Scope::Cluster {
        return Ok(true);
    }
    let Some(selector) = &hook.namespace_selector else {
        return Ok(false);
    };
    namespace_selected(selector, || match scope {
        Scope::Written => Ok(object.labels().unwrap_or(&NO_LABELS)),
        _ => namespace.for_webhook(&review.request.namespace, &hook.name),
    })
}
