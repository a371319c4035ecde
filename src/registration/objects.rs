//! The objects `registration` prints, in the field order `kubectl get -o yaml` uses.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::defaults;
use crate::config::manifest::RuleWithOperations;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Registration {
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) metadata: Metadata,
    pub(super) webhooks: Vec<GatewayWebhook>,
}

#[derive(Debug, Serialize)]
pub(super) struct Metadata {
    pub(super) name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) annotations: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GatewayWebhook {
    pub(super) name: &'static str,
    pub(super) client_config: ClientConfig,
    pub(super) rules: Vec<Rule>,
    pub(super) failure_policy: &'static str,
    pub(super) match_policy: &'static str,
    pub(super) namespace_selector: NamespaceSelector,
    pub(super) side_effects: &'static str,
    pub(super) timeout_seconds: u64,
    pub(super) admission_review_versions: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reinvocation_policy: Option<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) service: Option<ServiceConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ca_bundle: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct ServiceConfig {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) path: &'static str,
    pub(super) port: i64,
}

/// One rule of the gateway: a fleet rule with its scope defaulted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Rule {
    pub(super) operations: Vec<String>,
    pub(super) api_groups: Vec<String>,
    pub(super) api_versions: Vec<String>,
    pub(super) resources: Vec<String>,
    pub(super) scope: String,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NamespaceSelector {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) match_expressions: Vec<Requirement>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Requirement {
    pub(super) key: &'static str,
    pub(super) operator: &'static str,
    pub(super) values: Vec<String>,
}

impl Rule {
    pub(super) fn from_fleet(rule: &RuleWithOperations) -> Self {
        Self {
            operations: rule.operations.clone(),
            api_groups: rule.api_groups.clone(),
            api_versions: rule.api_versions.clone(),
            resources: rule.resources.clone(),
            scope: rule.scope.clone().unwrap_or_else(|| defaults::SCOPE.to_owned()),
        }
    }

    pub(super) fn everything() -> Self {
        let all = |value: &str| vec![value.to_owned()];
        Self {
            operations: all("*"),
            api_groups: all("*"),
            api_versions: all("*"),
            resources: all("*/*"),
            scope: "*".to_owned(),
        }
    }

    /// Whether every request this rule matches, `other` matches too (rule matching as in
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`).
    pub(super) fn covers(&self, other: &Rule) -> bool {
        let listed = |ours: &[String], theirs: &[String]| {
            ours.iter().any(|v| v == "*") || theirs.iter().all(|v| ours.contains(v))
        };
        let split = |entry: &str| -> (String, String) {
            let (resource, subresource) = entry.split_once('/').unwrap_or((entry, ""));
            (resource.to_owned(), subresource.to_owned())
        };
        let resources_covered = other.resources.iter().map(|e| split(e)).all(|(resource, subresource)| {
            self.resources
                .iter()
                .map(|e| split(e))
                .any(|(r, s)| (r == "*" || r == resource) && (s == "*" || s == subresource))
        });
        (self.scope == "*" || self.scope == other.scope)
            && listed(&self.operations, &other.operations)
            && listed(&self.api_groups, &other.api_groups)
            && listed(&self.api_versions, &other.api_versions)
            && resources_covered
    }
}
