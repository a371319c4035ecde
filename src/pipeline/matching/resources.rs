//! A policy's `matchConstraints`, or a binding's `matchResources`, against a request
//! (k8s.io/apiserver `pkg/admission/plugin/policy/matching/matching.go`): selectors, excluded
//! rules, rules with `resourceNames`, `matchPolicy: Equivalent`, in upstream's order and with
//! its errors.
//!
//! The namespace labels differ from a webhook's (`webhook.rs`) where the gateway, outside
//! cluster mode, does not know a Namespace request's stored namespace (docs/differences.md, "A
//! policy's namespace outside cluster mode"): the namespace is the one the stage fetched, given
//! as the object `namespaceObject` is.

use serde_json::Value;

use super::rules::{first_match, RuleMatch};
use super::selectors::{namespace_selected, object_selected};
use crate::config::equivalence::{Equivalence, Hit};
use crate::config::policy::{Matcher, NamedRule};
use crate::config::rules::RuleRequest;
use crate::config::selector::labels_of;
use crate::review::Operation;

/// What matching looks at.
pub(crate) struct Request<'a> {
    pub(crate) rule: RuleRequest<'a>,
    pub(crate) kind: Kind<'a>,
    pub(crate) name: &'a str,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    /// The request's namespace object, when known.
    pub(crate) namespace: Option<&'a Value>,
}

/// A group/version/kind (and its resource) a request matched as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kind<'a> {
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) resource: &'a str,
}

/// `Ok(None)`: no match; `Ok(Some(kind))`: matched as `kind`; `Err`: a match error.
pub(crate) fn matches<'a>(
    matcher: &Matcher,
    request: &Request<'a>,
    equivalence: &'a Equivalence,
) -> Result<Option<Kind<'a>>, String> {
    let namespace_error = match namespace_matches(matcher, request) {
        Ok(false) => return Ok(None),
        Ok(true) => None,
        Err(error) => Some(error),
    };
    let of = |object: Option<&Value>| object.and_then(labels_of);
    if !object_selected(&matcher.object_selector, || of(request.object), || of(request.old_object)) {
        return Ok(None);
    }
    if rules_match(&matcher.exclude_resource_rules, matcher.equivalent, request, equivalence)?.is_some() {
        return Ok(None);
    }
    let kind = if matcher.resource_rules.is_empty() {
        request.kind
    } else {
        match rules_match(&matcher.resource_rules, matcher.equivalent, request, equivalence)? {
            None => return Ok(None),
            Some(kind) => kind,
        }
    };
    match namespace_error {
        Some(error) => Err(error),
        None => Ok(Some(kind)),
    }
}

/// Whether `matcher`'s resource rules accept the request, before its exclusions and selectors:
/// when not, [`matches`] is `Ok(None)` whatever the object and namespace.
pub(crate) fn rules_accept(matcher: &Matcher, request: &Request<'_>, equivalence: &Equivalence) -> bool {
    matcher.resource_rules.is_empty()
        || !matches!(rules_match(&matcher.resource_rules, matcher.equivalent, request, equivalence), Ok(None))
}

fn names_accept(rule: &NamedRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// The first rule whose `resourceNames` accept the request's name and that matches it
/// (exactly, then under Equivalent with an equivalent resource).
fn rules_match<'a>(
    rules: &[NamedRule],
    equivalent: bool,
    request: &Request<'a>,
    equivalence: &'a Equivalence,
) -> Result<Option<Kind<'a>>, String> {
    let named = rules.iter().filter(|rule| names_accept(rule, request.name)).map(|rule| &rule.rule);
    match first_match(named, equivalent.then_some(equivalence), &request.rule) {
        RuleMatch::None => Ok(None),
        RuleMatch::Requested => Ok(Some(request.kind)),
        RuleMatch::Equivalent(Hit { member, kind }) => match kind {
            Some(gvk) if !gvk.kind.is_empty() => Ok(Some(Kind {
                group: gvk.group,
                version: gvk.version,
                kind: gvk.kind,
                resource: member.resource,
            })),
            _ => Err(format!("unable to convert to {}: unknown kind", member.gvr())),
        },
    }
}

/// `Ok(false)`: a clean non-match; `Err`: the namespace is unknown.
fn namespace_matches(matcher: &Matcher, request: &Request<'_>) -> Result<bool, String> {
    let r = &request.rule;
    let is_namespace = r.group.is_empty() && r.resource == "namespaces";
    if r.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    namespace_selected(&matcher.namespace_selector, || {
        let labels = if is_namespace && matches!(r.operation, Operation::Create | Operation::Update) {
            request.object.and_then(labels_of)
        } else if is_namespace && r.subresource.is_empty() && request.namespace.is_none() {
            // A Namespace request names itself: the stored one, else the request's object.
            request.old_object.or(request.object).and_then(labels_of)
        } else {
            match request.namespace {
                Some(namespace) => labels_of(namespace),
                None => {
                    let name = if is_namespace { request.name } else { r.namespace };
                    return Err(format!("namespaces {} not found", crate::go::strconv::quote(name)));
                }
            }
        };
        Ok(labels.unwrap_or_default())
    })
}
