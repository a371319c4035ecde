//! `ValidatingAdmissionPolicy`, `MutatingAdmissionPolicy` and their bindings as serde types,
//! field for field as `admissionregistration.k8s.io/v1` (v1beta1, and v1alpha1 of the mutating
//! kinds, have the same fields). One type serves both kinds: the fields of the other kind are
//! refused after decoding as unknown ones (`foreign_fields`). As in `config::manifest`:
//! enum-like fields are `String`s, optional fields `Option`s, unknown fields refused.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::manifest::{LabelSelector, RuleWithOperations};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metadata {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicyObject {
    #[allow(dead_code)] // read before the body, kept so deny_unknown_fields accepts it
    pub(crate) api_version: String,
    #[allow(dead_code)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) metadata: Metadata,
    #[serde(default)]
    pub(crate) spec: PolicySpec,
    /// Written by the API server; read and ignored.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) status: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicySpec {
    pub(crate) param_kind: Option<ParamKind>,
    pub(crate) match_constraints: Option<MatchResources>,
    #[serde(default)]
    pub(crate) validations: Vec<Validation>,
    pub(crate) failure_policy: Option<String>,
    #[serde(default)]
    pub(crate) audit_annotations: Vec<AuditAnnotation>,
    #[serde(default)]
    pub(crate) match_conditions: Vec<NamedExpression>,
    #[serde(default)]
    pub(crate) variables: Vec<NamedExpression>,
    /// MutatingAdmissionPolicy only.
    #[serde(default)]
    pub(crate) mutations: Vec<Mutation>,
    /// MutatingAdmissionPolicy only.
    pub(crate) reinvocation_policy: Option<String>,
}

/// One entry of a MutatingAdmissionPolicy's `spec.mutations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Mutation {
    pub(crate) patch_type: Option<String>,
    pub(crate) apply_configuration: Option<MutationExpression>,
    pub(crate) json_patch: Option<MutationExpression>,
}

/// `ApplyConfiguration` and `JSONPatch`: an expression.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MutationExpression {
    #[serde(default)]
    pub(crate) expression: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ParamKind {
    pub(crate) api_version: Option<String>,
    pub(crate) kind: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MatchResources {
    pub(crate) namespace_selector: Option<LabelSelector>,
    pub(crate) object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) resource_rules: Vec<NamedRule>,
    #[serde(default)]
    pub(crate) exclude_resource_rules: Vec<NamedRule>,
    pub(crate) match_policy: Option<String>,
}

/// `NamedRuleWithOperations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NamedRule {
    #[serde(default)]
    pub(crate) resource_names: Vec<String>,
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

impl NamedRule {
    /// The rule without its names, as webhooks' rules are.
    pub(crate) fn rule(&self) -> RuleWithOperations {
        RuleWithOperations {
            operations: self.operations.clone(),
            api_groups: self.api_groups.clone(),
            api_versions: self.api_versions.clone(),
            resources: self.resources.clone(),
            scope: self.scope.clone(),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Validation {
    #[serde(default)]
    pub(crate) expression: String,
    pub(crate) message: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) message_expression: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AuditAnnotation {
    #[serde(default)]
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) value_expression: String,
}

/// `MatchCondition` and `Variable`: a name and an expression.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NamedExpression {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) expression: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BindingObject {
    #[allow(dead_code)] // read before the body, kept so deny_unknown_fields accepts it
    pub(crate) api_version: String,
    #[allow(dead_code)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) metadata: Metadata,
    #[serde(default)]
    pub(crate) spec: BindingSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BindingSpec {
    #[serde(default)]
    pub(crate) policy_name: String,
    pub(crate) param_ref: Option<ParamRef>,
    pub(crate) match_resources: Option<MatchResources>,
    /// ValidatingAdmissionPolicyBinding only.
    #[serde(default)]
    pub(crate) validation_actions: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ParamRef {
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) selector: Option<LabelSelector>,
    pub(crate) parameter_not_found_action: Option<String>,
}

/// The fields `value` (a policy or binding as written) has that its kind does not: each named
/// as the strict decoder names an unknown field.
pub(crate) fn foreign_fields(
    value: &serde_json::Value,
    mutating: bool,
    binding: bool,
) -> Vec<(String, String)> {
    let foreign: &[&str] = match (mutating, binding) {
        (false, false) => &["mutations", "reinvocationPolicy"],
        (true, false) => &["validations", "auditAnnotations"],
        (false, true) => &[],
        (true, true) => &["validationActions"],
    };
    let Some(spec) = value.get("spec").and_then(serde_json::Value::as_object) else { return Vec::new() };
    foreign
        .iter()
        .filter(|field| spec.contains_key(**field))
        .map(|field| (format!("spec.{field}"), format!("unknown field {field:?}")))
        .collect()
}
