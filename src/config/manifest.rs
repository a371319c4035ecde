//! The Kubernetes objects users write, as serde types: `admissionregistration.k8s.io/v1`
//! webhook configurations and `v1` Namespaces.
//!
//! These mirror the upstream API types field for field, with two deliberate choices:
//! every enum-like field stays a `String` (so validation can name a bad value instead of serde
//! rejecting it anonymously, and legacy values such as `sideEffects: Unknown` survive), and every
//! optional field stays an `Option` (so "unset" and "defaulted" remain distinguishable until
//! [`apply_defaults`](super::defaults::apply) runs, in one place).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use crate::cel;

/// `metadata` of any object: only what admission needs; other fields are accepted and ignored.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectMeta {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) annotations: BTreeMap<String, String>,
}

/// Which of the two webhook configuration kinds an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum WebhookKind {
    Mutating,
    Validating,
}

impl WebhookKind {
    pub(crate) fn kind_name(self) -> &'static str {
        match self {
            Self::Mutating => "MutatingWebhookConfiguration",
            Self::Validating => "ValidatingWebhookConfiguration",
        }
    }
}

/// The `admissionregistration.k8s.io` version an object was written in: it decides the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ApiVersion {
    V1,
    /// Removed from Kubernetes in 1.22; loaded with the defaults the API server applied to it.
    V1beta1,
}

/// A `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration`.
#[derive(Clone, Debug)]
pub(crate) struct WebhookConfiguration {
    pub(crate) kind: WebhookKind,
    pub(crate) version: ApiVersion,
    pub(crate) metadata: ObjectMeta,
    pub(crate) webhooks: Vec<Webhook>,
}

/// The body of either configuration kind (`apiVersion` and `kind` are read separately).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WebhookConfigurationBody {
    #[allow(dead_code)] // read before the body, kept so deny_unknown_fields accepts it
    pub(crate) api_version: String,
    #[allow(dead_code)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) webhooks: Vec<Webhook>,
}

/// One entry of `webhooks[]`. `reinvocationPolicy` is only accepted for mutating webhooks
/// (validation refuses it on a validating one, as the API server's strict decoding would).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Webhook {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) client_config: WebhookClientConfig,
    #[serde(default)]
    pub(crate) rules: Vec<RuleWithOperations>,
    pub(crate) failure_policy: Option<String>,
    pub(crate) match_policy: Option<String>,
    pub(crate) namespace_selector: Option<LabelSelector>,
    pub(crate) object_selector: Option<LabelSelector>,
    pub(crate) side_effects: Option<String>,
    pub(crate) timeout_seconds: Option<i64>,
    pub(crate) admission_review_versions: Option<Vec<String>>,
    pub(crate) reinvocation_policy: Option<String>,
    pub(crate) match_conditions: Option<Vec<MatchCondition>>,
}

/// `clientConfig`: exactly one of `url` and `service`, plus an optional PEM `caBundle`
/// (base64 in the manifest, as the API's `[]byte` encoding).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WebhookClientConfig {
    pub(crate) url: Option<String>,
    pub(crate) service: Option<ServiceReference>,
    pub(crate) ca_bundle: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ServiceReference {
    #[serde(default)]
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) path: Option<String>,
    pub(crate) port: Option<i64>,
}

/// `rules[]`: operations × (apiGroups, apiVersions, resources) within a scope.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RuleWithOperations {
    #[serde(default)]
    pub(crate) operations: Vec<String>,
    #[serde(default)]
    pub(crate) api_groups: Vec<String>,
    #[serde(default)]
    pub(crate) api_versions: Vec<String>,
    #[serde(default)]
    pub(crate) resources: Vec<String>,
    pub(crate) scope: Option<String>,
}

/// A metav1 `LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LabelSelector {
    #[serde(default)]
    pub(crate) match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LabelSelectorRequirement {
    #[serde(default)]
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) operator: String,
    #[serde(default)]
    pub(crate) values: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MatchCondition {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) expression: String,
    /// The compiled expression, made once by whichever of validation and compilation asks
    /// first.
    #[serde(skip)]
    compiled: OnceLock<Result<Arc<cel::Program>, String>>,
}

impl MatchCondition {
    #[cfg(test)]
    pub(crate) fn new(name: &str, expression: &str) -> Self {
        Self { name: name.to_owned(), expression: expression.to_owned(), compiled: OnceLock::new() }
    }

    /// The expression compiled as the API server compiles it (trimmed); `Err` is the detail
    /// of the validation error.
    pub(crate) fn program(&self) -> &Result<Arc<cel::Program>, String> {
        self.compiled.get_or_init(|| cel::compile(self.expression.trim()).map(Arc::new))
    }
}

/// A `v1` `Namespace`: its labels feed `namespaceSelector`.
#[derive(Clone, Debug)]
pub(crate) struct Namespace {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
}
