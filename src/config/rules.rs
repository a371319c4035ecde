//! A webhook's `rules[]` (and a policy's `resourceRules`), compiled: matching a request
//! (docs/semantics.md §4.1), and the index from (group, resource) to the webhooks or policies
//! whose rules can match — the requested resource or, under `matchPolicy: Equivalent`, one
//! stored with it (§4.2) — so a review never scans the whole fleet.

use std::collections::HashMap;

use super::equivalence::Equivalence;
use crate::review::Operation;

/// One compiled entry of `rules[]`.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    operations: Vec<String>,
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    /// Each `resources` entry split at its first `/`: (resource, subresource).
    resources: Vec<(String, String)>,
    scope: Scope,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Any,
    Cluster,
    Namespaced,
}

/// What rule matching looks at in a request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleRequest<'a> {
    pub(crate) operation: Operation,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
}

impl Rule {
    pub(crate) fn compile(rule: &super::manifest::RuleWithOperations) -> Self {
        let resources = rule
            .resources
            .iter()
            .map(|entry| match entry.split_once('/') {
                Some((resource, subresource)) => (resource.to_owned(), subresource.to_owned()),
                None => (entry.clone(), String::new()),
            })
            .collect();
        let scope = match rule.scope.as_deref() {
            Some("Cluster") => Scope::Cluster,
            Some("Namespaced") => Scope::Namespaced,
            _ => Scope::Any,
        };
        Self {
            operations: rule.operations.clone(),
            api_groups: rule.api_groups.clone(),
            api_versions: rule.api_versions.clone(),
            resources,
            scope,
        }
    }

    /// docs/semantics.md §4.1.
    pub(crate) fn matches(&self, request: &RuleRequest<'_>) -> bool {
        let listed = |values: &[String], wanted: &str| values.iter().any(|v| v == "*" || v == wanted);
        self.scope_matches(request)
            && listed(&self.operations, request.operation.as_str())
            && listed(&self.api_groups, request.group)
            && listed(&self.api_versions, request.version)
            && self.resources.iter().any(|(resource, subresource)| {
                (resource == "*" || resource == request.resource)
                    && (subresource == "*" || subresource == request.subresource)
            })
    }

    fn scope_matches(&self, request: &RuleRequest<'_>) -> bool {
        // A Namespace (and its subresources) is cluster-scoped even when the API server sets
        // the request namespace to its own name.
        let is_namespace =
            request.group.is_empty() && request.version == "v1" && request.resource == "namespaces";
        match self.scope {
            Scope::Any => true,
            Scope::Namespaced => !request.namespace.is_empty() && !is_namespace,
            Scope::Cluster => request.namespace.is_empty() || is_namespace,
        }
    }
}

/// group → resource → positions of the webhooks (or policies) that have a rule for it; `*` is
/// a key too.
#[derive(Debug, Default)]
pub(crate) struct RuleIndex {
    by_group: HashMap<String, HashMap<String, Vec<usize>>>,
}

impl RuleIndex {
    /// From each webhook's position, rules and, under `matchPolicy: Equivalent`, the registry
    /// of equivalent resources, in ascending position order. An Equivalent webhook is also a
    /// candidate for every group/resource stored with one its rules name.
    pub(crate) fn build<'r>(
        hooks: impl Iterator<Item = (usize, &'r [Rule], Option<&'r Equivalence>)>,
    ) -> Self {
        let mut index = Self::default();
        for (position, rules, equivalence) in hooks {
            index.add(position, rules, equivalence);
        }
        index
    }

    /// Makes the one at `position` (past every position added so far, or the last again) a
    /// candidate for what `rules` name and, with `equivalence`, what is stored with it.
    pub(crate) fn add<'r>(
        &mut self,
        position: usize,
        rules: impl IntoIterator<Item = &'r Rule>,
        equivalence: Option<&Equivalence>,
    ) {
        for rule in rules {
            for group in &rule.api_groups {
                for (resource, _) in &rule.resources {
                    self.insert(group, resource, position);
                    for (group, resource) in
                        equivalence.map(|e| e.related(group, resource)).unwrap_or_default()
                    {
                        self.insert(group, resource, position);
                    }
                }
            }
        }
    }

    /// Makes the one at `position` a candidate for every request.
    pub(crate) fn add_everywhere(&mut self, position: usize) {
        self.insert("*", "*", position);
    }

    fn insert(&mut self, group: &str, resource: &str, position: usize) {
        let positions =
            self.by_group.entry(group.to_owned()).or_default().entry(resource.to_owned()).or_default();
        if positions.last() != Some(&position) {
            positions.push(position);
        }
    }

    /// Positions, ascending, of the webhooks (or policies) whose rules name this group and
    /// resource.
    pub(crate) fn candidates(&self, group: &str, resource: &str) -> Vec<usize> {
        let mut found = Vec::new();
        for group in [group, "*"] {
            let Some(by_resource) = self.by_group.get(group) else {
                continue;
            };
            for resource in [resource, "*"] {
                if let Some(positions) = by_resource.get(resource) {
                    found.extend_from_slice(positions);
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        operations: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        scope: &str,
    ) -> Rule {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Rule::compile(&super::super::manifest::RuleWithOperations {
            operations: strings(operations),
            api_groups: strings(groups),
            api_versions: strings(versions),
            resources: strings(resources),
            scope: Some(scope.into()),
        })
    }

    fn request<'a>(
        operation: Operation,
        gvr: (&'a str, &'a str, &'a str),
        subresource: &'a str,
        namespace: &'a str,
    ) -> RuleRequest<'a> {
        RuleRequest { operation, group: gvr.0, version: gvr.1, resource: gvr.2, subresource, namespace }
    }

    #[test]
    fn rule_matching_table() {
        use Operation::*;
        let pods = ("", "v1", "pods");
        let deployments = ("apps", "v1", "deployments");
        let namespaces = ("", "v1", "namespaces");
        let nodes = ("", "v1", "nodes");
        let cases = [
            (rule(&["CREATE"], &[""], &["v1"], &["pods"], "*"), request(Create, pods, "", "ns"), true),
            (rule(&["CREATE"], &[""], &["v1"], &["pods"], "*"), request(Update, pods, "", "ns"), false),
            (rule(&["*"], &[""], &["v1"], &["pods"], "*"), request(Connect, pods, "exec", "ns"), false),
            (rule(&["*"], &[""], &["v1"], &["pods/*"], "*"), request(Connect, pods, "exec", "ns"), true),
            (rule(&["*"], &[""], &["v1"], &["pods/*"], "*"), request(Create, pods, "", "ns"), true),
            (
                rule(&["*"], &[""], &["v1"], &["pods/status"], "*"),
                request(Update, pods, "status", "ns"),
                true,
            ),
            (rule(&["*"], &[""], &["v1"], &["pods/status"], "*"), request(Update, pods, "", "ns"), false),
            (rule(&["*"], &["*"], &["*"], &["*"], "*"), request(Update, pods, "status", "ns"), false),
            (rule(&["*"], &["*"], &["*"], &["*/*"], "*"), request(Update, pods, "status", "ns"), true),
            (
                rule(&["*"], &["*"], &["*"], &["*/scale"], "*"),
                request(Update, deployments, "scale", "ns"),
                true,
            ),
            (rule(&["*"], &["*"], &["*"], &["*/scale"], "*"), request(Update, deployments, "", "ns"), false),
            (
                rule(&["*"], &["apps"], &["v1beta1"], &["*"], "*"),
                request(Create, deployments, "", "ns"),
                false,
            ),
            (rule(&["*"], &["*"], &["*"], &["*"], "Namespaced"), request(Create, pods, "", "ns"), true),
            (rule(&["*"], &["*"], &["*"], &["*"], "Namespaced"), request(Create, nodes, "", ""), false),
            (rule(&["*"], &["*"], &["*"], &["*"], "Cluster"), request(Create, nodes, "", ""), true),
            (rule(&["*"], &["*"], &["*"], &["*"], "Cluster"), request(Create, pods, "", "ns"), false),
            // A namespace counts as cluster-scoped even with its own name as request namespace.
            (rule(&["*"], &["*"], &["*"], &["*"], "Cluster"), request(Delete, namespaces, "", "team"), true),
            (
                rule(&["*"], &["*"], &["*"], &["*"], "Namespaced"),
                request(Delete, namespaces, "", "team"),
                false,
            ),
            (
                rule(&["*"], &["*"], &["*"], &["*/*"], "Cluster"),
                request(Update, namespaces, "finalize", "team"),
                true,
            ),
        ];
        for (i, (rule, request, expected)) in cases.iter().enumerate() {
            assert_eq!(rule.matches(request), *expected, "case {i}: {rule:?} vs {request:?}");
        }
    }
}
