//! Create-time validation of policies and bindings, as `ValidateValidatingAdmissionPolicy`,
//! `ValidateMutatingAdmissionPolicy` and their bindings' (`kubernetes/kubernetes`
//! `pkg/apis/admissionregistration/validation/validation.go`): every problem, in upstream's
//! order of checks, with `field.Error` texts. The two kinds share everything but what only
//! one has (validations and audit annotations, validation actions; mutations, the
//! reinvocation policy and the operations a mutating policy may match). Rules and selectors are checked by the webhook
//! validation (`config::validate`), so their texts are the same.

use std::collections::HashSet;

use serde_json::json;

use super::manifest::{BindingObject, MatchResources, NamedRule, PolicyObject};
use super::PolicyKind;
use crate::config::manifest::{LabelSelector, Webhook, WebhookConfiguration, WebhookKind};
use crate::config::{validate as webhooks, Finding};

use super::messages::{duplicate, forbidden, invalid, json_list, not_supported, quote, required, too_many};
use super::names::{dns1035_label, dns1123_subdomain, qualified_name};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const NOT_FOUND_ACTIONS: &[&str] = &["Deny", "Allow"];
const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
const REINVOCATION_POLICIES: &[&str] = &["Never", "IfNeeded"];
/// What a MutatingAdmissionPolicy's rules may match: it never sees a DELETE.
const MUTATING_OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];
const MAX_MATCH_CONDITIONS: usize = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// `maxAuditAnnotationValueExpressionLength`.
pub(crate) const MAX_VALUE_EXPRESSION_BYTES: usize = 5 * 1024;
/// Reserved words a variable may not be named (cel-go `parser.reservedIds`).
const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "package",
    "namespace",
    "null",
    "return",
    "true",
    "var",
    "void",
    "while",
];

/// Findings so far.
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) findings: Vec<Finding>,
}

impl Report {
    pub(crate) fn error(&mut self, field: &str, message: String) {
        self.findings.push(Finding::error(field, message));
    }
}

/// Everything but the expressions (compiled by the caller, which reports their errors here).
pub(crate) fn policy(policy: &PolicyObject, kind: PolicyKind, r: &mut Report) {
    let name = &policy.metadata.name;
    if name.is_empty() {
        r.error("metadata.name", required("name or generateName is required"));
    }
    for msg in dns1123_subdomain(name).into_iter().filter(|_| !name.is_empty()) {
        r.error("metadata.name", invalid(&quote(name), &msg));
    }
    let spec = &policy.spec;
    if let Some(failure_policy) = &spec.failure_policy {
        if !FAILURE_POLICIES.contains(&failure_policy.as_str()) {
            r.error("spec.failurePolicy", not_supported(failure_policy, FAILURE_POLICIES));
        }
    }
    if let Some(kind) = &spec.param_kind {
        match kind.api_version.as_deref() {
            None | Some("") => r.error("spec.paramKind.apiVersion", required("")),
            Some(api_version) => group_version(api_version, r),
        }
        match kind.kind.as_deref() {
            None | Some("") => r.error("spec.paramKind.kind", required("")),
            Some(kind) => {
                let errs = dns1035_label(&kind.to_lowercase());
                if !errs.is_empty() {
                    let detail =
                        format!("may have mixed case, but should otherwise match: {}", errs.join(","));
                    r.error("spec.paramKind.kind", invalid(&quote(kind), &detail));
                }
            }
        }
    }
    match &spec.match_constraints {
        None => r.error("spec.matchConstraints", required("")),
        Some(constraints) => {
            match_resources(constraints, "spec.matchConstraints", r);
            if constraints.resource_rules.is_empty() {
                r.error("spec.matchConstraints.resourceRules", required(""));
            }
            if kind == PolicyKind::Mutating {
                mutating_operations(constraints, "spec.matchConstraints", r);
            }
        }
    }
    if spec.match_conditions.len() > MAX_MATCH_CONDITIONS {
        r.error("spec.matchConditions", too_many(spec.match_conditions.len(), MAX_MATCH_CONDITIONS));
    }
    let mut names = HashSet::new();
    for (i, condition) in spec.match_conditions.iter().enumerate() {
        let at = format!("spec.matchConditions[{i}]");
        if condition.expression.trim().is_empty() {
            r.error(&format!("{at}.expression"), required(""));
        }
        if condition.name.is_empty() {
            r.error(&format!("{at}.name"), required(""));
            continue;
        }
        for msg in qualified_name(&condition.name) {
            r.error(&format!("{at}.name"), invalid(&quote(&condition.name), &msg));
        }
        if !names.insert(condition.name.as_str()) {
            r.error(&format!("{at}.name"), duplicate(&condition.name));
        }
    }
    for (i, variable) in spec.variables.iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        if variable.name.trim().is_empty() {
            r.error(&format!("{at}.name"), required("name is not specified"));
        } else if !is_cel_identifier(&variable.name) {
            r.error(
                &format!("{at}.name"),
                invalid(&quote(&variable.name), "name is not a valid CEL identifier"),
            );
        }
        if variable.expression.trim().is_empty() {
            r.error(&format!("{at}.expression"), required("expression is not specified"));
        }
    }
    if kind == PolicyKind::Mutating {
        return mutations(policy, r);
    }
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        r.error("spec.validations", required(detail));
        r.error("spec.auditAnnotations", required(detail));
    }
    for (i, validation) in spec.validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        if validation.expression.trim().is_empty() {
            r.error(&format!("{at}.expression"), required("expression is not specified"));
        }
        if let Some(expression) = &validation.message_expression {
            if !expression.is_empty() && expression.trim().is_empty() {
                r.error(
                    &format!("{at}.messageExpression"),
                    invalid(&quote(expression), "must be non-empty if specified"),
                );
            }
        }
        if let Some(message) = &validation.message {
            let trimmed = message.trim();
            if !message.is_empty() && trimmed.is_empty() {
                r.error(
                    &format!("{at}.message"),
                    invalid(&quote(message), "message must be non-empty if specified"),
                );
            } else if trimmed.contains(['\n', '\r']) {
                r.error(
                    &format!("{at}.message"),
                    invalid(&quote(message), "message must not contain line breaks"),
                );
            }
        }
        if let Some(reason) = &validation.reason {
            if !REASONS.contains(&reason.as_str()) {
                r.error(&format!("{at}.reason"), not_supported(reason, REASONS));
            }
        }
    }
    if spec.audit_annotations.len() > MAX_AUDIT_ANNOTATIONS {
        let listed: Vec<serde_json::Value> = spec
            .audit_annotations
            .iter()
            .map(|a| json!({"key": a.key, "valueExpression": a.value_expression}))
            .collect();
        let value = serde_json::to_string(&listed).unwrap_or_default();
        let detail = format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations");
        r.error("spec.auditAnnotations", invalid(&value, &detail));
    }
    let mut keys = HashSet::new();
    for (i, annotation) in spec.audit_annotations.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        if name.is_empty() {
            r.error(
                &format!("{at}.key"),
                invalid(&quote(&annotation.key), "requires metadata.name be non-empty"),
            );
        } else {
            let qualified = format!("{name}/{}", annotation.key);
            for msg in qualified_name(&qualified) {
                r.error(&format!("{at}.key"), invalid(&quote(&qualified), &msg));
            }
        }
        let trimmed = annotation.value_expression.trim();
        if trimmed.is_empty() {
            r.error(&format!("{at}.valueExpression"), required("valueExpression is not specified"));
        } else if trimmed.len() > MAX_VALUE_EXPRESSION_BYTES {
            let detail = format!("must not exceed {MAX_VALUE_EXPRESSION_BYTES} bytes in length");
            r.error(&format!("{at}.valueExpression"), required(&detail));
        }
        if !keys.insert(annotation.key.as_str()) {
            r.error(&format!("{at}.key"), duplicate(&annotation.key));
        }
    }
}

/// A MutatingAdmissionPolicy's `spec.mutations` (their expressions compiled by the caller) and
/// `spec.reinvocationPolicy`, which has no default.
fn mutations(policy: &PolicyObject, r: &mut Report) {
    let spec = &policy.spec;
    if spec.mutations.is_empty() {
        r.error("spec.mutations", required("mutations must contain at least one item"));
    }
    for (i, mutation) in spec.mutations.iter().enumerate() {
        let at = format!("spec.mutations[{i}]");
        let bodies = [
            ("JSONPatch", "jsonPatch", &mutation.json_patch),
            ("ApplyConfiguration", "applyConfiguration", &mutation.apply_configuration),
        ];
        match mutation.patch_type.as_deref() {
            None | Some("") => r.error(&format!("{at}.patchType"), required("")),
            Some(patch_type) if !PATCH_TYPES.contains(&patch_type) => {
                r.error(&format!("{at}.patchType"), not_supported(patch_type, PATCH_TYPES))
            }
            Some(patch_type) => {
                for (of, field, body) in bodies {
                    match (of == patch_type, body) {
                        (true, None) => r.error(
                            &format!("{at}.{field}"),
                            required(&format!("must be specified when patchType is {patch_type}")),
                        ),
                        (true, Some(body)) if body.expression.trim().is_empty() => {
                            r.error(&format!("{at}.{field}.expression"), required(""))
                        }
                        (false, Some(_)) => r.error(
                            &format!("{at}.{field}"),
                            invalid(
                                &quote(&format!("{{{field}}}")),
                                &format!("must not be specified when patchType is {patch_type}"),
                            ),
                        ),
                        _ => {}
                    }
                }
            }
        }
    }
    match spec.reinvocation_policy.as_deref() {
        None | Some("") => r.error("spec.reinvocationPolicy", required("")),
        Some(policy) if !REINVOCATION_POLICIES.contains(&policy) => {
            r.error("spec.reinvocationPolicy", not_supported(policy, REINVOCATION_POLICIES))
        }
        Some(_) => {}
    }
}

/// A mutating policy's or binding's rules may not name DELETE (nor anything but `*`,
/// CONNECT, CREATE, UPDATE): the error's path has no index, as upstream's.
fn mutating_operations(resources: &MatchResources, at: &str, r: &mut Report) {
    for rule in &resources.resource_rules {
        for operation in &rule.operations {
            if !MUTATING_OPERATIONS.contains(&operation.as_str()) {
                r.error(
                    &format!("{at}.resourceRules.operations"),
                    not_supported(operation, MUTATING_OPERATIONS),
                );
            }
        }
    }
}

/// A binding, whole.
pub(crate) fn binding(binding: &BindingObject, kind: PolicyKind, r: &mut Report) {
    let name = &binding.metadata.name;
    if name.is_empty() {
        r.error("metadata.name", required("name or generateName is required"));
    }
    for msg in dns1123_subdomain(name).into_iter().filter(|_| !name.is_empty()) {
        r.error("metadata.name", invalid(&quote(name), &msg));
    }
    let spec = &binding.spec;
    if spec.policy_name.is_empty() {
        r.error("spec.policyName", required(""));
    } else {
        for msg in dns1123_subdomain(&spec.policy_name) {
            r.error("spec.policyName", invalid(&quote(&spec.policy_name), &msg));
        }
    }
    if let Some(param_ref) = &spec.param_ref {
        // `validateParamRef`, in its order (`paramRef.namespace` is not checked).
        let at = "spec.paramRef";
        let name = param_ref.name.as_deref().filter(|n| !n.is_empty());
        let exclusive = || forbidden("name and selector are mutually exclusive");
        if let Some(name) = name {
            for msg in path_segment(name) {
                r.error(&format!("{at}.name"), invalid(&quote(name), &msg));
            }
            if param_ref.selector.is_some() {
                r.error(&format!("{at}.name"), exclusive());
            }
        }
        if let Some(selector) = &param_ref.selector {
            selector_findings(selector, &format!("{at}.selector"), r);
            if name.is_some() {
                r.error(&format!("{at}.selector"), exclusive());
            }
        }
        if name.is_none() && param_ref.selector.is_none() {
            r.error(at, required("one of name or selector must be specified"));
        }
        match param_ref.parameter_not_found_action.as_deref() {
            None | Some("") => r.error(&format!("{at}.parameterNotFoundAction"), required("")),
            Some(action) if !NOT_FOUND_ACTIONS.contains(&action) => {
                r.error(&format!("{at}.parameterNotFoundAction"), not_supported(action, NOT_FOUND_ACTIONS))
            }
            Some(_) => {}
        }
    }
    if let Some(resources) = &spec.match_resources {
        match_resources(resources, "spec.matchResources", r);
        if kind == PolicyKind::Mutating {
            mutating_operations(resources, "spec.matchResources", r);
        }
    }
    if kind == PolicyKind::Mutating {
        return;
    }
    let actions = &spec.validation_actions;
    let mut seen = HashSet::new();
    for (i, action) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(&action.as_str()) {
            r.error(&at, not_supported(action, ACTIONS));
        }
        if !seen.insert(action.as_str()) {
            r.error(&at, duplicate(action));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        r.error(
            "spec.validationActions",
            invalid(
                &json_list(actions),
                "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ),
        );
    }
    if actions.is_empty() {
        r.error("spec.validationActions", required("at least one validation action is required"));
    }
}

fn match_resources(resources: &MatchResources, at: &str, r: &mut Report) {
    if let Some(policy) = &resources.match_policy {
        if !MATCH_POLICIES.contains(&policy.as_str()) {
            r.error(&format!("{at}.matchPolicy"), not_supported(policy, MATCH_POLICIES));
        }
    }
    if let Some(selector) = &resources.namespace_selector {
        selector_findings(selector, &format!("{at}.namespaceSelector"), r);
    }
    if let Some(selector) = &resources.object_selector {
        selector_findings(selector, &format!("{at}.objectSelector"), r);
    }
    for (list, rules) in [
        ("resourceRules", &resources.resource_rules),
        ("excludeResourceRules", &resources.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().enumerate() {
            named_rule(rule, &format!("{at}.{list}[{i}]"), r);
        }
    }
}

/// `resourceNames`, then the rule as a webhook's (with the webhook validation's texts).
fn named_rule(rule: &NamedRule, at: &str, r: &mut Report) {
    let mut names = HashSet::new();
    for (i, name) in rule.resource_names.iter().enumerate() {
        let field = format!("{at}.resourceNames[{i}]");
        for msg in path_segment(name) {
            r.error(&field, invalid(&quote(name), &msg));
        }
        if !names.insert(name.as_str()) {
            r.error(&field, duplicate(name));
        }
    }
    let hook = json!({
        "name": "rule.admission-gateway.invalid",
        "rules": [{
            "operations": rule.operations, "apiGroups": rule.api_groups,
            "apiVersions": rule.api_versions, "resources": rule.resources, "scope": rule.scope,
        }],
    });
    if let Ok(hook) = serde_json::from_value::<Webhook>(hook) {
        let configuration = WebhookConfiguration {
            kind: WebhookKind::Validating,
            version: crate::config::manifest::ApiVersion::V1,
            metadata: crate::config::manifest::ObjectMeta { name: "rules".into(), ..Default::default() },
            webhooks: vec![hook],
        };
        for finding in webhooks::configuration(&configuration) {
            if let Some(rest) = finding.field.strip_prefix("webhooks[0].rules[0]") {
                r.error(&format!("{at}{rest}"), finding.message);
            }
        }
    }
}

/// A selector, with the webhook validation's texts.
fn selector_findings(selector: &LabelSelector, at: &str, r: &mut Report) {
    for finding in webhooks::selector(selector) {
        let rest = finding.field.strip_prefix("objectSelector").unwrap_or(&finding.field);
        r.error(&format!("{at}{rest}"), finding.message);
    }
}

/// `IsValidPathSegmentName`.
fn path_segment(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// `validateParamKind`'s apiVersion: `parseGroupVersion`, then the group and version formats.
fn group_version(api_version: &str, r: &mut Report) {
    let at = "spec.paramKind.apiVersion";
    let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
        _ if api_version == "/" => ("", ""),
        [version] => ("", *version),
        [group, version] => (*group, *version),
        _ => {
            let detail = format!("unexpected GroupVersion string: {api_version}");
            return r.error(at, invalid(&quote(api_version), &detail));
        }
    };
    let errs = dns1123_subdomain(group);
    if !group.is_empty() && !errs.is_empty() {
        r.error(at, invalid(&quote(group), &errs.join(",")));
    }
    if version.is_empty() {
        r.error(at, invalid(&quote(api_version), "version must be specified"));
    } else {
        let errs = dns1035_label(version);
        if !errs.is_empty() {
            r.error(at, invalid(&quote(version), &errs.join(",")));
        }
    }
}

/// A CEL identifier that is not a reserved word.
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}
