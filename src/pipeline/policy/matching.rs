//! A MatchResources against a request (k8s.io/apiserver
//! `pkg/admission/plugin/policy/matching/matching.go`): selectors, excluded rules, rules with
//! `resourceNames`, `matchPolicy: Equivalent`, in upstream's order and with its errors.

use serde_json::Value;

use crate::config::equivalence::Equivalence;
use crate::config::policy::{Matcher, NamedRule};
use crate::config::rules::RuleRequest;
use crate::config::selector::labels_of;
use crate::review::Operation;

/// What matching looks at.
pub(super) struct Request<'a> {
    pub(super) rule: RuleRequest<'a>,
    pub(super) kind: Kind<'a>,
    pub(super) name: &'a str,
    pub(super) object: Option<&'a Value>,
    pub(super) old_object: Option<&'a Value>,
    /// The request's namespace object, when known.
    pub(super) namespace: Option<&'a Value>,
}

/// A group/version/kind (and its resource) a request matched as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kind<'a> {
    pub(super) group: &'a str,
    pub(super) version: &'a str,
    pub(super) kind: &'a str,
    pub(super) resource: &'a str,
}

/// `Ok(None)`: no match; `Ok(Some(kind))`: matched as `kind`; `Err`: a match error.
pub(super) fn matches<'a>(
    matcher: &Matcher,
    request: &Request<'a>,
    equivalence: &'a Equivalence,
) -> Result<Option<Kind<'a>>, String> {
    let namespace_error = match namespace_matches(matcher, request) {
        Ok(false) => return Ok(None),
        Ok(true) => None,
        Err(error) => Some(error),
    };
    if !object_matches(matcher, request) {
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
pub(super) fn rules_accept(matcher: &Matcher, request: &Request<'_>, equivalence: &Equivalence) -> bool {
    matcher.resource_rules.is_empty()
        || !matches!(rules_match(&matcher.resource_rules, matcher.equivalent, request, equivalence), Ok(None))
}

fn names_accept(rule: &NamedRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// The first rule that matches (exactly, then under Equivalent with an equivalent resource).
fn rules_match<'a>(
    rules: &[NamedRule],
    equivalent: bool,
    request: &Request<'a>,
    equivalence: &'a Equivalence,
) -> Result<Option<Kind<'a>>, String> {
    if rules.iter().any(|r| r.rule.matches(&request.rule) && names_accept(r, request.name)) {
        return Ok(Some(request.kind));
    }
    if !equivalent {
        return Ok(None);
    }
    let r = &request.rule;
    let others: Vec<_> = equivalence
        .equivalents(r.group, r.version, r.resource)
        .filter(|m| (m.group, m.version, m.resource) != (r.group, r.version, r.resource))
        .collect();
    for rule in rules.iter().filter(|rule| names_accept(rule, request.name)) {
        for member in &others {
            let as_if =
                RuleRequest { group: member.group, version: member.version, resource: member.resource, ..*r };
            if rule.rule.matches(&as_if) {
                return match member.kind(r.subresource) {
                    Some(gvk) if !gvk.kind.is_empty() => Ok(Some(Kind {
                        group: gvk.group,
                        version: gvk.version,
                        kind: gvk.kind,
                        resource: member.resource,
                    })),
                    _ => Err(format!("unable to convert to {}: unknown kind", member.gvr())),
                };
            }
        }
    }
    Ok(None)
}

/// `Ok(false)`: a clean non-match; `Err`: the namespace is unknown.
fn namespace_matches(matcher: &Matcher, request: &Request<'_>) -> Result<bool, String> {
    let r = &request.rule;
    let is_namespace = r.group.is_empty() && r.resource == "namespaces";
    if r.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    if matcher.namespace_selector.is_empty() {
        return Ok(true);
    }
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
    Ok(matcher.namespace_selector.matches(&labels.unwrap_or_default()))
}

fn object_matches(matcher: &Matcher, request: &Request<'_>) -> bool {
    if matcher.object_selector.is_empty() {
        return true;
    }
    [request.object, request.old_object]
        .into_iter()
        .filter_map(|o| o.and_then(labels_of))
        .any(|labels| matcher.object_selector.matches(&labels))
}
