//! A webhook's `rules[]`, as upstream's `validateRuleWithOperations`, `validateRule` and
//! `validateResources` check them (`kubernetes/kubernetes`
//! `pkg/apis/admissionregistration/validation/validation.go`): operations, API groups and
//! versions, resources with their wildcard exclusions, scope.

use std::collections::HashSet;

use super::super::manifest::RuleWithOperations;
use super::messages::{invalid, json_list, quote, required};
use super::{one_of, Path, Report};

const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];

/// `validateRuleWithOperations` and `validateRule` (subresources allowed).
pub(super) fn rule_with_operations(rule: &RuleWithOperations, at: &Path, r: &mut Report) {
    let operations = at.child("operations");
    if rule.operations.is_empty() {
        r.error(&operations, required(""));
    }
    if rule.operations.len() > 1 && has_wildcard(&rule.operations) {
        r.error(
            &operations,
            invalid(&json_list(&rule.operations), "if '*' is present, must not specify other operations"),
        );
    }
    for (i, operation) in rule.operations.iter().enumerate() {
        one_of(Some(operation), OPERATIONS, &operations.index(i), r);
    }

    let groups = at.child("apiGroups");
    if rule.api_groups.is_empty() {
        r.error(&groups, required(""));
    }
    if rule.api_groups.len() > 1 && has_wildcard(&rule.api_groups) {
        r.error(
            &groups,
            invalid(&json_list(&rule.api_groups), "if '*' is present, must not specify other API groups"),
        );
    }
    // An empty group is fine: it is the core ("legacy") group.
    let versions = at.child("apiVersions");
    if rule.api_versions.is_empty() {
        r.error(&versions, required(""));
    }
    if rule.api_versions.len() > 1 && has_wildcard(&rule.api_versions) {
        r.error(
            &versions,
            invalid(&json_list(&rule.api_versions), "if '*' is present, must not specify other API versions"),
        );
    }
    for (i, version) in rule.api_versions.iter().enumerate() {
        if version.is_empty() {
            r.error(&versions.index(i), required(""));
        }
    }
    resources(&rule.resources, &at.child("resources"), r);
    one_of(rule.scope.as_deref(), SCOPES, &at.child("scope"), r);
}

fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == "*")
}

/// `validateResources`: `*/*` alone, `*` not beside plain resources, `r/*` excludes `r/x`,
/// `*/x` excludes `y/x` (the latter two only for entries *after* the wildcard one).
fn resources(resources: &[String], at: &Path, r: &mut Report) {
    if resources.is_empty() {
        r.error(at, required(""));
    }
    let mut wildcard_subresources_of = HashSet::new(); // `x` of every `x/*`
    let mut wildcard_resources_for = HashSet::new(); // `x` of every `*/x`
    let mut has_double_wildcard = false;
    let mut has_single_wildcard = false;
    let mut has_resource_without_subresource = false;
    for (i, entry) in resources.iter().enumerate() {
        if entry.is_empty() {
            r.error(&at.index(i), required(""));
            continue;
        }
        has_double_wildcard |= entry == "*/*";
        has_single_wildcard |= entry == "*";
        let Some((resource, subresource)) = entry.split_once('/') else {
            // Upstream assigns here rather than or-ing, so only the last entry without a `/`
            // counts: `["pods", "*"]` is accepted, `["*", "pods"]` refused. Kept, so that the
            // gateway accepts exactly what kube-apiserver stores.
            has_resource_without_subresource = entry != "*";
            continue;
        };
        if wildcard_subresources_of.contains(resource) {
            r.error(
                &at.index(i),
                invalid(&quote(entry), &format!("if '{resource}/*' is present, must not specify {entry}")),
            );
        }
        if wildcard_resources_for.contains(subresource) {
            r.error(
                &at.index(i),
                invalid(&quote(entry), &format!("if '*/{subresource}' is present, must not specify {entry}")),
            );
        }
        if subresource == "*" {
            wildcard_subresources_of.insert(resource);
        }
        if resource == "*" {
            wildcard_resources_for.insert(subresource);
        }
    }
    if resources.len() > 1 && has_double_wildcard {
        r.error(at, invalid(&json_list(resources), "if '*/*' is present, must not specify other resources"));
    }
    if has_single_wildcard && has_resource_without_subresource {
        r.error(
            at,
            invalid(
                &json_list(resources),
                "if '*' is present, must not specify other resources without subresources",
            ),
        );
    }
}
