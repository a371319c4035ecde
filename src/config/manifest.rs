//! The Kubernetes objects users write, as serde types: `admissionregistration.k8s.io/v1`
//! webhook configurations and `v1` Namespaces.
//!
//! These mirror the upstream API types field for field, with two deliberate choices:
//! every enum-like field stays a `String` (so validation can name a bad value instead of serde
//! rejecting it anonymously, and legacy values such as `sideEffects: Unknown` survive), and every
//! optional field stays an `Option` (so "unset" and "defaulted" remain distinguishable until
//! [`apply_defaults`](super::defaults::apply) runs, in one place).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `metadata` of any object: only what admission needs; other fields are accepted and ignored.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Which of the two webhook configuration kinds an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookKind {
    Mutating,
    Validating,
}

impl WebhookKind {
    pub fn kind_name(self) -> &'static str {
        match self {
            Self::Mutating => "MutatingWebhookConfiguration",
            Self::Validating => "ValidatingWebhookConfiguration",
        }
    }
}

/// A `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration`.
#[derive(Clone, Debug)]
pub struct WebhookConfiguration {
    pub kind: WebhookKind,
    pub metadata: ObjectMeta,
    pub webhooks: Vec<Webhook>,
}

/// The body of either configuration kind (`apiVersion` and `kind` are read separately).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WebhookConfigurationBody {
    #[allow(dead_code)] // read before the body, kept so deny_unknown_fields accepts it
    pub api_version: String,
    #[allow(dead_code)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub webhooks: Vec<Webhook>,
}

/// One entry of `webhooks[]`. `reinvocationPolicy` is only accepted for mutating webhooks
/// (validation refuses it on a validating one, as the API server's strict decoding would).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub client_config: WebhookClientConfig,
    #[serde(default)]
    pub rules: Vec<RuleWithOperations>,
    pub failure_policy: Option<String>,
    pub match_policy: Option<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub object_selector: Option<LabelSelector>,
    pub side_effects: Option<String>,
    pub timeout_seconds: Option<i64>,
    pub admission_review_versions: Option<Vec<String>>,
    pub reinvocation_policy: Option<String>,
    pub match_conditions: Option<Vec<MatchCondition>>,
}

/// `clientConfig`: exactly one of `url` and `service`, plus an optional PEM `caBundle`
/// (base64 in the manifest, as the API's `[]byte` encoding).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceReference>,
    pub ca_bundle: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceReference {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    pub path: Option<String>,
    pub port: Option<i64>,
}

/// `rules[]`: operations × (apiGroups, apiVersions, resources) within a scope.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleWithOperations {
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    pub scope: Option<String>,
}

/// A metav1 `LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub expression: String,
}

/// A `v1` `Namespace`: its labels feed `namespaceSelector`.
#[derive(Clone, Debug)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}
