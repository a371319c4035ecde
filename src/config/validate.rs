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
//! - `matchConditions` are refused outright: this gateway does not evaluate CEL, and calling the
//!   webhook where the API server would skip it would be a wrong verdict.
//! - `clientConfig.caBundle` must decode to at least one PEM certificate. kube-apiserver stores a
//!   bad bundle and only fails each call; the gateway refuses it up front.
//! - `reinvocationPolicy` on a validating webhook is refused (upstream's strict decoding refuses
//!   the unknown field).
//! - A password in `clientConfig.url` is redacted in the message.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use base64::alphabet;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;

use super::manifest::{
    LabelSelector, MatchCondition, Namespace, ObjectMeta, RuleWithOperations, ServiceReference, Webhook,
    WebhookClientConfig, WebhookConfiguration, WebhookKind,
};
use super::{Finding, Severity};

/// `failurePolicy` values, sorted as upstream lists them (`sets.String.List()`).
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
/// `sideEffects` accepted on create (`noSideEffectClasses`).
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
/// `sideEffects` accepted only on update of an object that already had them (v1beta1 era).
const LEGACY_SIDE_EFFECTS: &[&str] = &["Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
/// AdmissionReview versions the dispatcher can send (`AcceptedAdmissionReviewVersions`).
const ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const MAX_MATCH_CONDITIONS: usize = 64;
const TIMEOUT_SECONDS: std::ops::RangeInclusive<i64> = 1..=30;
const PORTS: std::ops::RangeInclusive<i64> = 1..=65535;
/// `TotalAnnotationSizeLimitB`: keys plus values, in bytes.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

const DNS1123_LABEL_MAX_LEN: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
const DNS1035_LABEL_MAX_LEN: usize = 63;
const LABEL_KEY_NAME_MAX_LEN: usize = 63;
const LABEL_VALUE_MAX_LEN: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `ValidateWebhookURL`'s hint, appended to its format errors.
const URL_FORM: &str = "; desired format: https://host[/path]";

/// The `[]byte` decoding of Go's `encoding/json`: standard alphabet, canonical padding,
/// non-zero trailing bits tolerated (`base64.StdEncoding` is not `Strict`).
const GO_STD_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

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
// rules[]

/// `validateRuleWithOperations` and `validateRule` (subresources allowed).
fn rule_with_operations(rule: &RuleWithOperations, at: &Path, r: &mut Report) {
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

// ---------------------------------------------------------------------------------------------
// Selectors and match conditions

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

/// Refuses any match condition (no CEL here), then applies upstream's structural checks so
/// that every problem is reported at once. Upstream also compiles each expression.
fn match_conditions(conditions: &[MatchCondition], at: &Path, r: &mut Report) {
    if conditions.is_empty() {
        return;
    }
    r.error(
        at,
        forbidden(
            "matchConditions (CEL) are not supported by this version of admission-gateway; \
             the webhook would be called where the API server would skip it",
        ),
    );
    if conditions.len() > MAX_MATCH_CONDITIONS {
        r.error(at, too_many(conditions.len(), MAX_MATCH_CONDITIONS));
    }
    let mut names = HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = at.index(i);
        if condition.expression.trim().is_empty() {
            r.error(&at.child("expression"), required(""));
        }
        let name = &condition.name;
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

// ---------------------------------------------------------------------------------------------
// clientConfig

fn client_config(config: &WebhookClientConfig, at: &Path, r: &mut Report) {
    match (&config.url, &config.service) {
        (Some(url), None) => webhook_url(url, &at.child("url"), r),
        (None, Some(service)) => webhook_service(service, &at.child("service"), r),
        _ => r.error(at, required("exactly one of url or service is required")),
    }
    if let Some(msg) = config.ca_bundle.as_deref().and_then(ca_bundle) {
        r.error(&at.child("caBundle"), msg);
    }
}

/// `ValidateWebhookURL` with `forceHttps`, over a port of Go's `url.Parse`.
fn webhook_url(raw: &str, at: &Path, r: &mut Report) {
    let url = match go_url::parse(raw) {
        Ok(url) => url,
        Err(e) => {
            r.error(at, required(&format!("url must be a valid URL: {e}{URL_FORM}")));
            return;
        }
    };
    if url.scheme != "https" {
        let detail = format!("'https' is the only allowed URL scheme{URL_FORM}");
        r.error(at, invalid(&quote(&url.scheme), &detail));
    }
    if url.host.is_empty() {
        let detail = format!("host must be specified{URL_FORM}");
        r.error(at, invalid(&quote(&url.host), &detail));
    }
    if let Some(user) = &url.user {
        r.error(at, invalid(&quote(user), "user information is not permitted in the URL"));
    }
    if !url.fragment.is_empty() {
        r.error(at, invalid(&quote(&url.fragment), "fragments are not permitted in the URL"));
    }
    if !url.raw_query.is_empty() {
        r.error(at, invalid(&quote(&url.raw_query), "query parameters are not permitted in the URL"));
    }
}

/// `ValidateWebhookService`. An unset port is the defaulted 443.
fn webhook_service(service: &ServiceReference, at: &Path, r: &mut Report) {
    if service.name.is_empty() {
        r.error(&at.child("name"), required(""));
    }
    if service.namespace.is_empty() {
        r.error(&at.child("namespace"), required(""));
    }
    if let Some(port) = service.port.filter(|p| !PORTS.contains(p)) {
        r.error(
            &at.child("port"),
            invalid(&port.to_string(), "port is not valid: must be between 1 and 65535, inclusive"),
        );
    }
    if let Some(path) = service.path.as_deref() {
        service_path(path, &at.child("path"), r);
    }
}

fn service_path(path: &str, at: &Path, r: &mut Report) {
    if path.is_empty() || path == "/" {
        return;
    }
    if path == "//" {
        r.error(at, invalid(&quote(path), "segment[0] may not be empty"));
        return;
    }
    if !path.starts_with('/') {
        r.error(at, invalid(&quote(path), "must start with a '/'"));
    }
    // Like upstream, drop the first character whatever it is, and one trailing '/'.
    let mut chars = path.chars();
    chars.next();
    let rest = chars.as_str();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, segment) in rest.split('/').enumerate() {
        if segment.is_empty() {
            let detail = format!("segment[{i}] may not be empty");
            r.error(at, invalid(&quote(path), &detail));
            continue;
        }
        for failure in dns1123_subdomain(segment) {
            r.error(at, invalid(&quote(path), &format!("segment[{i}]: {failure}")));
        }
    }
}

/// A non-empty bundle must hold at least one PEM `CERTIFICATE` (what client-go's
/// `AppendCertsFromPEM` needs); `None` when it is fine.
fn ca_bundle(encoded: &str) -> Option<String> {
    const OMITTED: &str = "\"<value omitted>\"";
    // Go's base64 decoding skips line breaks, which YAML block scalars may leave in.
    let cleaned: String = encoded.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    let pem = match GO_STD_BASE64.decode(&cleaned) {
        Ok(pem) => pem,
        Err(e) => {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => cleaned.len(),
            };
            let detail = format!("illegal base64 data at input byte {at}");
            return Some(invalid(OMITTED, &detail));
        }
    };
    if pem.is_empty() {
        return None; // the system roots are used
    }
    let mut certificates = 0;
    let mut failure = None;
    for section in CertificateDer::pem_slice_iter(&pem) {
        match section {
            // A DER certificate is a SEQUENCE; anything else x509 would refuse too.
            Ok(der) if der.first() == Some(&0x30) => certificates += 1,
            Ok(_) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if certificates > 0 {
        return None;
    }
    let mut detail = String::from("unable to load root certificates: unable to parse bytes as PEM block");
    if let Some(e) = failure {
        let _ = write!(detail, " ({e})");
    }
    Some(invalid(OMITTED, &detail))
}

// ---------------------------------------------------------------------------------------------
// apimachinery's name and label formats (`pkg/util/validation`, `pkg/api/validate/content`)

/// `IsDNS1123Label`.
fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LEN {
        errs.push(max_len_characters(DNS1123_LABEL_MAX_LEN));
    }
    if !is_dns1123_label(value) {
        if is_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain` (`pkg/util/validation`: lengths in "characters").
fn dns1123_subdomain(value: &str) -> Vec<String> {
    subdomain_errors(value, max_len_characters)
}

fn subdomain_errors(value: &str, max_len_error: fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `IsDNS1035Label`.
fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LEN {
        errs.push(max_len_characters(DNS1035_LABEL_MAX_LEN));
    }
    let starts_with_letter = value.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
    if !(starts_with_letter && is_dns1123_label(value)) {
        errs.push(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// `IsQualifiedName` (= `content.IsLabelKey`): `[prefix/]name`.
fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                let prefix_errs = subdomain_errors(prefix, max_len_bytes);
                errs.extend(prefix_errs.into_iter().map(|e| format!("prefix part {e}")));
            }
            *name
        }
        _ => {
            let format = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"]);
            return vec![format!(
                "a valid label key {format} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_KEY_NAME_MAX_LEN {
        errs.push(format!("name part {}", max_len_bytes(LABEL_KEY_NAME_MAX_LEN)));
    }
    if !is_label_key_name(name) {
        let format = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"]);
        errs.push(format!("name part {format}"));
    }
    errs
}

/// `IsValidLabelValue` (= `content.IsLabelValue`).
fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_bytes(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_label_key_name(value) {
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
fn is_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    edge(b.first())
        && edge(b.last())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// `^label(\.label)*$`
fn is_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(is_dns1123_label)
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_label_key_name(value: &str) -> bool {
    let b = value.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(u8::is_ascii_alphanumeric);
    edge(b.first())
        && edge(b.last())
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `MaxLenError` of `pkg/util/validation`.
fn max_len_characters(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// `MaxLenError` of `pkg/api/validate/content`.
fn max_len_bytes(max: usize) -> String {
    format!("must be no more than {max} bytes")
}

/// `RegexError`, including its doubled spaces between examples.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        let _ = write!(out, "'{example}', ");
    }
    let _ = write!(out, "regex used for validation is '{regex}')");
    out
}

// ---------------------------------------------------------------------------------------------
// `field.Error` texts (`ErrorBody`: type, then the bad value, then the detail)

fn required(detail: &str) -> String {
    with_detail("Required value".to_owned(), detail)
}

/// `value` is already rendered: [`quote`]d, a number, or a [`json_list`].
fn invalid(value: &str, detail: &str) -> String {
    with_detail(format!("Invalid value: {value}"), detail)
}

fn not_supported(value: &str, supported: &[&str]) -> String {
    let supported: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    format!("Unsupported value: {}: supported values: {}", quote(value), supported.join(", "))
}

fn duplicate(value: &str) -> String {
    format!("Duplicate value: {}", quote(value))
}

fn forbidden(detail: &str) -> String {
    with_detail("Forbidden".to_owned(), detail)
}

fn too_many(actual: usize, max: usize) -> String {
    format!("Too many: {actual}: must have at most {max} items")
}

fn too_long(max_bytes: usize) -> String {
    format!("Too long: may not be more than {max_bytes} bytes")
}

fn with_detail(mut body: String, detail: &str) -> String {
    if !detail.is_empty() {
        body.push_str(": ");
        body.push_str(detail);
    }
    body
}

/// A string as Go's `%q` prints it (close enough: Go escapes a few more non-printables).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A list as `json.Marshal` prints it, for `Invalid value: ["CREATE","*"]`.
fn json_list(values: &[String]) -> String {
    serde_json::to_string(values).unwrap_or_else(|_| format!("{values:?}"))
}

// ---------------------------------------------------------------------------------------------

/// The parts of Go's `net/url.Parse` that `ValidateWebhookURL` looks at, with its errors.
///
/// Follows Go 1.26 (kube-apiserver's toolchain): colons in a host are strict (the first one
/// starts the port) and a bracketed host must be an IPv6 literal. Errors read as Go's
/// `*url.Error`: `parse "<url>": <reason>`.
mod go_url {
    use std::fmt::Write as _;

    use super::quote;

    /// A parsed URL: only the fields `ValidateWebhookURL` reads.
    #[derive(Debug, Default)]
    pub(super) struct Url {
        /// Lower-cased.
        pub(super) scheme: String,
        /// `Userinfo.String()`, with any password shown as `xxxxx` (as `URL.Redacted` does).
        pub(super) user: Option<String>,
        /// Unescaped, port included.
        pub(super) host: String,
        pub(super) raw_query: String,
        /// Unescaped.
        pub(super) fragment: String,
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Path,
        Host,
        Zone,
        UserPassword,
        Fragment,
    }

    /// `url.Parse`.
    pub(super) fn parse(raw: &str) -> Result<Url, String> {
        let wrap = |url: &str, e: String| format!("parse {}: {e}", quote(url));
        let (before, fragment) = raw.split_once('#').unwrap_or((raw, ""));
        let mut url = parse_without_fragment(before).map_err(|e| wrap(before, e))?;
        if !fragment.is_empty() {
            let fragment = unescape(fragment, Mode::Fragment).map_err(|e| wrap(raw, e))?;
            url.fragment = String::from_utf8_lossy(&fragment).into_owned();
        }
        Ok(url)
    }

    /// `parse(rawURL, viaRequest=false)`.
    fn parse_without_fragment(raw: &str) -> Result<Url, String> {
        if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err("net/url: invalid control character in URL".to_owned());
        }
        let mut url = Url::default();
        if raw == "*" {
            return Ok(url);
        }
        let (scheme, rest) = scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
            &rest[..rest.len() - 1]
        } else {
            let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
            url.raw_query = query.to_owned();
            rest
        };
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                return Ok(url); // opaque: `scheme:rest`, no host
            }
            let first_segment = rest.split('/').next().unwrap_or_default();
            if first_segment.contains(':') {
                return Err("first path segment in URL cannot contain colon".to_owned());
            }
        }
        let mut path = rest;
        if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
            let after = &rest[2..];
            let (authority, tail) = after.find('/').map_or((after, ""), |i| after.split_at(i));
            let (user, host) = authority_parts(authority)?;
            url.user = user;
            url.host = host;
            path = tail;
        }
        unescape(path, Mode::Path)?;
        Ok(url)
    }

    /// `getScheme`: `[a-zA-Z][a-zA-Z0-9+-.]*:`, or no scheme at all.
    fn scheme(raw: &str) -> Result<(&str, &str), String> {
        for (i, c) in raw.bytes().enumerate() {
            match c {
                b'a'..=b'z' | b'A'..=b'Z' => {}
                b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
                b':' if i == 0 => return Err("missing protocol scheme".to_owned()),
                b':' => return Ok((&raw[..i], &raw[i + 1..])),
                _ => return Ok(("", raw)),
            }
        }
        Ok(("", raw))
    }

    /// `parseAuthority`: `[userinfo@]host`.
    fn authority_parts(authority: &str) -> Result<(Option<String>, String), String> {
        let Some((userinfo, host)) = authority.rsplit_once('@') else {
            return Ok((None, parse_host(authority)?));
        };
        let host = parse_host(host)?; // the host is checked first, as in Go
        if !valid_userinfo(userinfo) {
            return Err("net/url: invalid userinfo".to_owned());
        }
        let user = match userinfo.split_once(':') {
            None => escape_user(&unescape(userinfo, Mode::UserPassword)?),
            Some((name, password)) => {
                let name = escape_user(&unescape(name, Mode::UserPassword)?);
                unescape(password, Mode::UserPassword)?;
                format!("{name}:xxxxx")
            }
        };
        Ok((Some(user), host))
    }

    /// `parseHost` with Go 1.26's strict colons; returns the unescaped host.
    fn parse_host(host: &str) -> Result<String, String> {
        let invalid_port = |port: &str| format!("invalid port {} after host", quote(port));
        match host.rfind('[') {
            Some(0) => {
                let close = host.rfind(']').ok_or("missing ']' in host")?;
                let port = &host[close + 1..];
                if !valid_optional_port(port) {
                    return Err(invalid_port(port));
                }
                // RFC 6874: `%25` starts a zone, which has its own escaping rules.
                let zone = host[..close].find("%25").unwrap_or(close);
                let address = unescape(&host[1..zone], Mode::Host)?;
                let zone_id = unescape(&host[zone..close], Mode::Zone)?;
                let address = String::from_utf8_lossy(&address);
                if address.parse::<std::net::Ipv6Addr>().is_err() {
                    return Err("invalid IP-literal".to_owned());
                }
                let mut unescaped = format!("[{address}");
                unescaped.push_str(&String::from_utf8_lossy(&zone_id));
                unescaped.push_str(&host[close..]); // `]` and digits only
                return Ok(unescaped);
            }
            Some(_) => return Err("invalid IP-literal".to_owned()),
            None => {
                if let Some(colon) = host.find(':') {
                    let port = &host[colon..];
                    if !valid_optional_port(port) {
                        return Err(invalid_port(port));
                    }
                }
            }
        }
        Ok(String::from_utf8_lossy(&unescape(host, Mode::Host)?).into_owned())
    }

    /// Empty, or `:` followed by digits only.
    fn valid_optional_port(port: &str) -> bool {
        port.is_empty()
            || port.strip_prefix(':').is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
    }

    /// RFC 3986 userinfo characters (escapes are checked by [`unescape`]).
    fn valid_userinfo(s: &str) -> bool {
        s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c))
    }

    /// `shouldEscape`, for the modes parsing uses.
    fn should_escape(c: u8, mode: Mode) -> bool {
        if c.is_ascii_alphanumeric() {
            return false;
        }
        // Sub-delims, `:port`, `[ipv6]`, and the few characters Go lets through in hosts.
        if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
            return false;
        }
        match c {
            b'-' | b'_' | b'.' | b'~' => false,
            b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::Fragment => false,
                Mode::Host | Mode::Zone => true,
            },
            b'!' | b'(' | b')' | b'*' if mode == Mode::Fragment => false,
            _ => true,
        }
    }

    /// `unescape`: checks `%XX` escapes (and host characters), returns the decoded bytes.
    fn unescape(s: &str, mode: Mode) -> Result<Vec<u8>, String> {
        let bytes = s.as_bytes();
        let escape_error = |from: usize| {
            let end = (from + 3).min(bytes.len());
            let text = String::from_utf8_lossy(&bytes[from..end]);
            format!("invalid URL escape {}", quote(&text))
        };
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(&c) = bytes.get(i) {
            if c == b'%' {
                let (Some(hi), Some(lo)) =
                    (bytes.get(i + 1).and_then(|h| hex(*h)), bytes.get(i + 2).and_then(|l| hex(*l)))
                else {
                    return Err(escape_error(i));
                };
                let is_25 = &bytes[i..i + 3] == b"%25";
                // Hosts may only escape non-ASCII bytes (or `%25`, RFC 6874 zones).
                if mode == Mode::Host && hi < 8 && !is_25 {
                    return Err(escape_error(i));
                }
                let v = (hi << 4) | lo;
                if mode == Mode::Zone && !is_25 && v != b' ' && should_escape(v, Mode::Host) {
                    return Err(escape_error(i));
                }
                out.push(v);
                i += 3;
                continue;
            }
            if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                let text = char::from(c).to_string();
                return Err(format!("invalid character {} in host name", quote(&text)));
            }
            out.push(c);
            i += 1;
        }
        Ok(out)
    }

    fn hex(c: u8) -> Option<u8> {
        char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }

    /// `escape(s, encodeUserPassword)`, for `Userinfo.String()`.
    fn escape_user(raw: &[u8]) -> String {
        let mut out = String::with_capacity(raw.len());
        for &c in raw {
            if should_escape(c, Mode::UserPassword) {
                let _ = write!(out, "%{c:02X}");
            } else {
                out.push(char::from(c));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
