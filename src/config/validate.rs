//! Checks a defaulted webhook configuration (or Namespace) as kube-apiserver checks it on create.
//!
//! A faithful port of `ValidateMutatingWebhookConfiguration` / `ValidateValidatingWebhookConfiguration`
//! (`kubernetes/kubernetes` `pkg/apis/admissionregistration/validation/validation.go`) with the
//! helpers it calls: `ValidateObjectMeta`, `IsFullyQualifiedName`, `ValidateLabelSelector`
//! (`kubernetes/apimachinery`) and `ValidateWebhookURL` / `ValidateWebhookService`
//! (`kubernetes/apiserver` `pkg/util/webhook`). Field paths, check order and messages follow
//! upstream's `field.Error` texts so an operator can search for them.
//!
//! Where the gateway knowingly differs from a create on the API server:
//! - `sideEffects: Unknown | Some` and an `admissionReviewVersions` list with no known version
//!   are [`Severity::Warning`]s: kube-apiserver keeps them on objects that already had them, and
//!   such objects are still dispatched (dry-run requests, resp. every call, then fail).
//! - A `matchConditions` expression is type-checked and compiled by the gateway's CEL
//!   (`src/cel`, on `crates/cel-engine`) as the API server does at creation, but without the
//!   matched kinds' schemas: `object` is `dyn`, so a field's type mistake fails at evaluation
//!   instead. The message names the condition after upstream's text.
//! - `clientConfig.caBundle` must decode to at least one PEM certificate. kube-apiserver stores a
//!   bad bundle and only fails each call; the gateway refuses it up front.
//! - `reinvocationPolicy` on a validating webhook is refused (upstream's strict decoding refuses
//!   the unknown field).
//! - A password in `clientConfig.url` is redacted in the message.

use std::collections::{BTreeMap, HashSet};

use super::manifest::{
    LabelSelector, MatchCondition, Namespace, ObjectMeta, Webhook, WebhookConfiguration, WebhookKind,
};
use super::{Finding, Severity};
use client_config::client_config;
use messages::{
    duplicate, forbidden, invalid, json_list, not_supported, quote, required, too_long, too_many,
};
use names::{dns1035_label, dns1123_label, dns1123_subdomain, label_value, qualified_name};
use rules::rule_with_operations;

pub(crate) mod ca_bundle;
mod client_config;
pub(super) mod messages;
pub(super) mod names;
mod rules;
#[cfg(test)]
mod tests;

/// `failurePolicy` values, sorted as upstream lists them (`sets.String.List()`).
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
/// `sideEffects` accepted on create (`noSideEffectClasses`).
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
/// `sideEffects` accepted only on update of an object that already had them (v1beta1 era).
const LEGACY_SIDE_EFFECTS: &[&str] = &["Some", "Unknown"];
/// AdmissionReview versions the dispatcher can send (`AcceptedAdmissionReviewVersions`).
const ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const MAX_MATCH_CONDITIONS: usize = 64;
const TIMEOUT_SECONDS: std::ops::RangeInclusive<i64> = 1..=30;
/// `TotalAnnotationSizeLimitB`: keys plus values, in bytes.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Validates one defaulted configuration as the API server validates it on create.
pub(crate) fn configuration(config: &WebhookConfiguration) -> Vec<Finding> {
    let mut report = Report::default();
    object_meta(&config.metadata, dns1123_subdomain, &Path::new("metadata"), &mut report);
    let mut names = HashSet::new();
    for (i, hook) in config.webhooks.iter().enumerate() {
        let at = Path::new("webhooks").index(i);
        report.webhook = (!hook.name.is_empty()).then(|| hook.name.clone());
        webhook(config.kind, hook, &at, &mut report);
        admission_review_versions(
            hook.admission_review_versions.as_deref(),
            &at.child("admissionReviewVersions"),
            &mut report,
        );
        // Create-time rule: on update upstream keeps duplicates an old object already had.
        if !hook.name.is_empty() && !names.insert(hook.name.as_str()) {
            report.error(&at.child("name"), duplicate(&hook.name));
        }
    }
    report.findings
}

/// Validates a Namespace object (name is a DNS-1123 label, labels valid).
pub(crate) fn namespace(ns: &Namespace) -> Vec<Finding> {
    let mut report = Report::default();
    let at = Path::new("metadata");
    object_name(&ns.name, dns1123_label, &at.child("name"), &mut report);
    labels(&ns.labels, &at.child("labels"), &mut report);
    report.findings
}

/// A field path in Kubernetes notation: `webhooks[0].clientConfig.url`.
#[derive(Clone, Debug)]
struct Path(String);

impl Path {
    fn new(root: &str) -> Self {
        Self(root.to_owned())
    }

    fn child(&self, name: &str) -> Self {
        Self(format!("{}.{name}", self.0))
    }

    fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }
}

/// Findings so far, and the webhook the next ones are about.
#[derive(Default)]
struct Report {
    findings: Vec<Finding>,
    webhook: Option<String>,
}

impl Report {
    fn error(&mut self, at: &Path, message: String) {
        self.push(Severity::Error, at, message);
    }

    fn warning(&mut self, at: &Path, message: String) {
        self.push(Severity::Warning, at, message);
    }

    fn push(&mut self, severity: Severity, at: &Path, message: String) {
        self.findings.push(Finding { severity, webhook: self.webhook.clone(), field: at.0.clone(), message });
    }
}

// ---------------------------------------------------------------------------------------------
// Objects and webhooks, in upstream's order of checks.

/// `ValidateObjectMeta` for a cluster-scoped object, on the fields the manifest types keep.
fn object_meta(meta: &ObjectMeta, name_rule: fn(&str) -> Vec<String>, at: &Path, r: &mut Report) {
    object_name(&meta.name, name_rule, &at.child("name"), r);
    labels(&meta.labels, &at.child("labels"), r);
    annotations(&meta.annotations, &at.child("annotations"), r);
}

fn object_name(name: &str, rule: fn(&str) -> Vec<String>, at: &Path, r: &mut Report) {
    if name.is_empty() {
        r.error(at, required("name or generateName is required"));
        return;
    }
    for msg in rule(name) {
        r.error(at, invalid(&quote(name), &msg));
    }
}

/// `ValidateLabels`: every error is reported at the map itself, as upstream does.
fn labels(labels: &BTreeMap<String, String>, at: &Path, r: &mut Report) {
    for (key, value) in labels {
        for msg in qualified_name(key) {
            r.error(at, invalid(&quote(key), &msg));
        }
        for msg in label_value(value) {
            r.error(at, invalid(&quote(value), &msg));
        }
    }
}

/// `ValidateAnnotations`: keys are qualified names in any case; the total size is bounded.
fn annotations(annotations: &BTreeMap<String, String>, at: &Path, r: &mut Report) {
    for key in annotations.keys() {
        for msg in qualified_name(&key.to_lowercase()) {
            r.error(at, invalid(&quote(key), &msg));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_ANNOTATIONS_BYTES {
        r.error(at, too_long(MAX_ANNOTATIONS_BYTES));
    }
}

/// `validateMutatingWebhook` / `validateValidatingWebhook`.
fn webhook(kind: WebhookKind, hook: &Webhook, at: &Path, r: &mut Report) {
    if let Some(msg) = fully_qualified_name(&hook.name) {
        r.error(&at.child("name"), msg);
    }
    for (i, rule) in hook.rules.iter().enumerate() {
        rule_with_operations(rule, &at.child("rules").index(i), r);
    }
    one_of(hook.failure_policy.as_deref(), FAILURE_POLICIES, &at.child("failurePolicy"), r);
    one_of(hook.match_policy.as_deref(), MATCH_POLICIES, &at.child("matchPolicy"), r);
    side_effects(hook.side_effects.as_deref(), &at.child("sideEffects"), r);
    if let Some(timeout) = hook.timeout_seconds.filter(|t| !TIMEOUT_SECONDS.contains(t)) {
        r.error(
            &at.child("timeoutSeconds"),
            invalid(&timeout.to_string(), "the timeout value must be between 1 and 30 seconds"),
        );
    }
    if let Some(selector) = &hook.namespace_selector {
        label_selector(selector, &at.child("namespaceSelector"), r);
    }
    if let Some(selector) = &hook.object_selector {
        label_selector(selector, &at.child("objectSelector"), r);
    }
    let reinvocation = at.child("reinvocationPolicy");
    match (kind, hook.reinvocation_policy.as_deref()) {
        (_, None) => {}
        (WebhookKind::Mutating, policy) => one_of(policy, REINVOCATION_POLICIES, &reinvocation, r),
        (WebhookKind::Validating, Some(_)) => r.error(
            &reinvocation,
            forbidden(
                "not supported for validating webhooks: the field exists only in \
                 MutatingWebhookConfiguration (kube-apiserver refuses it as an unknown field)",
            ),
        ),
    }
    client_config(&hook.client_config, &at.child("clientConfig"), r);
    if let Some(conditions) = &hook.match_conditions {
        match_conditions(conditions, &at.child("matchConditions"), r);
    }
}

/// `IsFullyQualifiedName`: a DNS-1123 subdomain with at least three segments.
fn fully_qualified_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some(required(""));
    }
    let errs = dns1123_subdomain(name);
    if !errs.is_empty() {
        return Some(invalid(&quote(name), &errs.join(",")));
    }
    (name.split('.').count() < 3)
        .then(|| invalid(&quote(name), "should be a domain with at least three segments separated by dots"))
}

/// A set value must be one of `supported`; unset is fine (defaulting fills it in).
fn one_of(value: Option<&str>, supported: &[&str], at: &Path, r: &mut Report) {
    if let Some(value) = value.filter(|v| !supported.contains(v)) {
        r.error(at, not_supported(value, supported));
    }
}

fn side_effects(value: Option<&str>, at: &Path, r: &mut Report) {
    match value {
        None => r.error(at, required(&format!("must specify one of {}", SIDE_EFFECTS.join(", ")))),
        Some(v) if SIDE_EFFECTS.contains(&v) => {}
        Some(v) if LEGACY_SIDE_EFFECTS.contains(&v) => r.warning(
            at,
            format!(
                "{} (legacy value, kept by the API server only on update of an object that \
                 already had it: dry-run requests this webhook matches will be rejected)",
                not_supported(v, SIDE_EFFECTS)
            ),
        ),
        Some(v) => r.error(at, not_supported(v, SIDE_EFFECTS)),
    }
}

/// `validateAdmissionReviewVersions`, with the "none known" case relaxed to a warning.
fn admission_review_versions(versions: Option<&[String]>, at: &Path, r: &mut Report) {
    let versions = versions.unwrap_or_default();
    if versions.is_empty() {
        let known = ADMISSION_REVIEW_VERSIONS.join(", ");
        r.error(at, required(&format!("must specify one of {known}")));
        return;
    }
    let mut seen = HashSet::new();
    let mut has_known = false;
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(version.as_str()) {
            r.error(&at.index(i), invalid(&quote(version), "duplicate version"));
            continue;
        }
        for msg in dns1035_label(version) {
            r.error(&at.index(i), invalid(&quote(version), &msg));
        }
        has_known |= ADMISSION_REVIEW_VERSIONS.contains(&version.as_str());
    }
    if !has_known {
        let known = ADMISSION_REVIEW_VERSIONS.join(", ");
        r.warning(
            at,
            invalid(
                &json_list(versions),
                &format!(
                    "must include at least one of {known} (legacy value, kept by the API server \
                     only on update of an object that already lacked one: every call fails with \
                     \"webhook does not accept known AdmissionReview versions ({known})\")"
                ),
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Selectors and match conditions

/// A selector on its own, as [`configuration`] validates a webhook's (for `src/fuzzing.rs`).
pub(crate) fn selector(selector: &LabelSelector) -> Vec<Finding> {
    let mut report = Report::default();
    label_selector(selector, &Path::new("objectSelector"), &mut report);
    report.findings
}

/// `ValidateLabelSelector` with invalid label values refused (the create-time option).
fn label_selector(selector: &LabelSelector, at: &Path, r: &mut Report) {
    labels(&selector.match_labels, &at.child("matchLabels"), r);
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let at = at.child("matchExpressions").index(i);
        let values = at.child("values");
        match requirement.operator.as_str() {
            "In" | "NotIn" if requirement.values.is_empty() => {
                r.error(&values, required("must be specified when `operator` is 'In' or 'NotIn'"))
            }
            "Exists" | "DoesNotExist" if !requirement.values.is_empty() => r.error(
                &values,
                forbidden("may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => r.error(&at.child("operator"), invalid(&quote(other), "not a valid selector operator")),
        }
        for msg in qualified_name(&requirement.key) {
            r.error(&at.child("key"), invalid(&quote(&requirement.key), &msg));
        }
        for (j, value) in requirement.values.iter().enumerate() {
            for msg in label_value(value) {
                r.error(&values.index(j), invalid(&quote(value), &msg));
            }
        }
    }
}

/// `validateMatchConditions`: at most 64, each with a compiling expression and a unique
/// qualified name, every problem reported.
fn match_conditions(conditions: &[MatchCondition], at: &Path, r: &mut Report) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        r.error(at, too_many(conditions.len(), MAX_MATCH_CONDITIONS));
    }
    let mut names = HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = at.index(i);
        let name = &condition.name;
        let expression = condition.expression.trim();
        if expression.is_empty() {
            r.error(&at.child("expression"), required(""));
        } else if let Err(detail) = condition.program() {
            let which =
                if name.is_empty() { String::new() } else { format!(" (matchCondition {})", quote(name)) };
            r.error(&at.child("expression"), format!("{}{which}", invalid(&quote(expression), detail)));
        }
        if name.is_empty() {
            r.error(&at.child("name"), required(""));
            continue;
        }
        for msg in qualified_name(name) {
            r.error(&at.child("name"), invalid(&quote(name), &msg));
        }
        if !names.insert(name.as_str()) {
            r.error(&at.child("name"), duplicate(name));
        }
    }
}
