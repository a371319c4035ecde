//! Rules against a request, webhooks' and policies' alike (docs/semantics.md §4.0.3, §4.0.4,
//! §4.2; k8s.io/apiserver `pkg/admission/plugin/webhook/generic/webhook.go`, `ShouldCallHook`,
//! and `pkg/admission/plugin/policy/matching/matching.go`, `matchesResourceRules`): the
//! requested resource first, rule by rule; then, under `matchPolicy: Equivalent`, the resources
//! stored with it, rules in list order and for each the equivalents in the API server's
//! registration order ([`Equivalence::search`]).

use crate::config::equivalence::{Equivalence, Hit};
use crate::config::rules::{Rule, RuleRequest};
use crate::review::decode::IncomingReview;

/// How rules match a request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RuleMatch<'e> {
    None,
    /// A rule matches the requested resource (§4.0.3).
    Requested,
    /// Under `matchPolicy: Equivalent`, only a resource stored with it (§4.0.4, §4.2).
    Equivalent(Hit<'e>),
}

impl RuleMatch<'_> {
    /// Whether some rule matched, the requested resource or an equivalent one.
    pub(crate) fn matched(&self) -> bool {
        !matches!(self, RuleMatch::None)
    }
}

/// The first of `rules` that matches `request`, then, with `equivalence` (`matchPolicy:
/// Equivalent`), the first that matches a resource stored with it.
pub(crate) fn first_match<'r, 'e>(
    rules: impl Iterator<Item = &'r Rule> + Clone,
    equivalence: Option<&'e Equivalence>,
    request: &RuleRequest<'_>,
) -> RuleMatch<'e> {
    if rules.clone().any(|rule| rule.matches(request)) {
        return RuleMatch::Requested;
    }
    match equivalence.and_then(|equivalence| equivalence.search(rules, request)) {
        Some(hit) => RuleMatch::Equivalent(hit),
        None => RuleMatch::None,
    }
}

/// The request as webhooks match it: the resource the gateway was sent (§4.1).
pub(crate) fn as_received(review: &IncomingReview) -> RuleRequest<'_> {
    let resource = review.resource();
    RuleRequest {
        operation: review.operation(),
        group: &resource.group,
        version: &resource.version,
        resource: &resource.resource,
        subresource: &review.request.sub_resource,
        namespace: &review.request.namespace,
    }
}

/// The request as policies match it: as it was made (`requestResource`,
/// `requestSubResource`, which the API server sets when it converted the object for the
/// gateway).
pub(crate) fn as_requested(review: &IncomingReview) -> RuleRequest<'_> {
    let r = &review.request;
    let resource = r.request_resource.as_ref().unwrap_or(review.resource());
    RuleRequest {
        operation: review.operation(),
        group: &resource.group,
        version: &resource.version,
        resource: &resource.resource,
        subresource: r.request_sub_resource.as_deref().unwrap_or(&r.sub_resource),
        namespace: &r.namespace,
    }
}
