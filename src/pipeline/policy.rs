//! One request through the ValidatingAdmissionPolicies, as kube-apiserver's plugin evaluates
//! it (k8s.io/apiserver `pkg/admission/plugin/policy/validating`, `…/policy/generic`,
//! `…/policy/matching`): per policy, its bindings × their parameters, decisions, warnings,
//! audit entries and metric observations; then [`aggregate`] over the policies that are enforced.
//!
//! Synchronous and pure but for the clock and what [`Lookups`] answers: the stage fetches what
//! may need the network (the request's namespace) before calling it. `authorizer` checks are
//! asked of the scope the caller installs with `cel::authorizer::with_scope`
//! around the call (none: every check is an evaluation error).
//!
//! docs/policies.md describes the whole; the rule numbers below refer to its sections.

#![allow(dead_code)] // until the stage uses every part (removed when wired)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cel::{
    json_value, request_value, with_session, Activation, Evaluated, Failure, PhaseLimits, Session,
};
use crate::config::policy::{
    Action, Binding, CompiledValidation, FailurePolicy, Param, Policies, Policy, STATIC_SUFFIX,
};
use crate::config::rules::RuleRequest;
use crate::review::decode::IncomingReview;
use crate::review::Status;

mod matching;
#[cfg(test)]
mod tests;

use matching::{Kind, Request};

/// Evaluates every policy that has bindings against the request, in evaluation order.
pub(crate) fn evaluate(
    policies: &Policies,
    attributes: &Attributes<'_>,
    lookups: &dyn Lookups,
) -> Vec<PolicyResult> {
    let review = attributes.review;
    let mut state = State::new();
    let mut results = Vec::new();
    for policy in policies.iter().filter(|p| !p.bindings.is_empty()) {
        let mut result = PolicyResult::new(policy);
        if let Some(why) = exempt(review, policy) {
            result.steps.push(format!("policy {:?} skipped: {why}", policy.name));
        } else {
            evaluate_policy(policies, policy, attributes, lookups, &mut state, &mut result);
        }
        results.push(result);
    }
    results
}

/// The request as the policies see it.
pub(crate) struct Attributes<'a> {
    pub(crate) review: &'a IncomingReview,
    /// The object after the mutating phase (`/admit`) or as received (`/validate`).
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    /// The request's namespace as an object (`namespaceObject`; its labels for selectors),
    /// fetched by the pipeline beforehand; `None` when the request has none or it is unknown.
    pub(crate) namespace: Option<&'a Value>,
}

/// Live state an evaluation may read: parameters from the API server (cluster mode).
pub(crate) trait Lookups {
    /// Parameter objects of `api_version`/`kind` in `namespace` (`None`: cluster-scoped), or
    /// `None` when this source does not serve that kind.
    fn params(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Vec<Arc<Value>>>;
}

/// No live state: parameters come from the configuration only.
pub(crate) struct NoLookups;

impl Lookups for NoLookups {
    fn params(&self, _: &str, _: &str, _: Option<&str>) -> Option<Vec<Arc<Value>>> {
        None
    }
}

/// What one policy decided on one request, all its bindings and parameters together.
#[derive(Debug)]
pub(crate) struct PolicyResult {
    pub(crate) policy: Arc<Policy>,
    /// Denials in evaluation order, each the whole Status the request would fail with.
    pub(crate) denials: Vec<Status>,
    /// `Validation failed for ValidatingAdmissionPolicy …` texts.
    pub(crate) warnings: Vec<String>,
    /// Entries of the `validation.policy.admission.k8s.io/validation_failure` annotation.
    pub(crate) audit_failures: Vec<Value>,
    /// `{policy}/{key}` → value, several bindings' values joined.
    pub(crate) audit_annotations: Vec<(String, String)>,
    /// One per observation of the API server's policy metrics.
    pub(crate) checks: Vec<Check>,
    /// What matched and why, for `review`'s explanation and the spans.
    pub(crate) steps: Vec<String>,
}

impl PolicyResult {
    fn new(policy: &Arc<Policy>) -> Self {
        Self {
            policy: policy.clone(),
            denials: Vec::new(),
            warnings: Vec::new(),
            audit_failures: Vec::new(),
            audit_annotations: Vec::new(),
            checks: Vec::new(),
            steps: Vec::new(),
        }
    }
}

/// One observation of `apiserver_validating_admission_policy_check_*`.
#[derive(Clone, Debug)]
pub(crate) struct Check {
    pub(crate) binding: String,
    /// `invalid_error`, `compile_error`, `out_of_budget`.
    pub(crate) error_type: &'static str,
    /// `deny`, `warn`, `audit`, `allow`.
    pub(crate) enforcement_action: &'static str,
    pub(crate) seconds: f64,
}

/// The policies' verdict on a request: the first denial, every warning, the audit annotations
/// (the `validation_failure` one included, at most 50 entries).
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) denial: Option<Status>,
    pub(crate) warnings: Vec<String>,
    pub(crate) audit_annotations: Vec<(String, String)>,
}

/// The annotation every audit entry of a request goes to.
pub(crate) const VALIDATION_FAILURE_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";
/// At most this many audit entries are published.
const MAX_AUDIT_FAILURES: usize = 50;

/// Aggregates the results of the policies that are enforced (§12.2): the first denial, the
/// warnings (exact duplicates dropped), the audit annotations (the first writer of a key
/// wins) and the `validation_failure` annotation.
pub(crate) fn aggregate<'a>(results: impl IntoIterator<Item = &'a PolicyResult>) -> Verdict {
    let mut verdict = Verdict::default();
    let mut failures: Vec<&Value> = Vec::new();
    for result in results {
        if verdict.denial.is_none() {
            verdict.denial = result.denials.first().cloned();
        }
        for warning in &result.warnings {
            if !verdict.warnings.contains(warning) {
                verdict.warnings.push(warning.clone());
            }
        }
        for (key, value) in &result.audit_annotations {
            if !verdict.audit_annotations.iter().any(|(k, _)| k == key) {
                verdict.audit_annotations.push((key.clone(), value.clone()));
            }
        }
        failures.extend(result.audit_failures.iter());
    }
    if !failures.is_empty() {
        failures.truncate(MAX_AUDIT_FAILURES);
        if !verdict.audit_annotations.iter().any(|(k, _)| k == VALIDATION_FAILURE_KEY) {
            let entries: Vec<AuditEntry<'_>> = failures.iter().map(|v| AuditEntry::of(v)).collect();
            verdict.audit_annotations.push((VALIDATION_FAILURE_KEY.to_owned(), go_json(&entries)));
        }
    }
    verdict
}

/// One entry of the `validation_failure` annotation, fields in the API server's order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditEntry<'a> {
    message: &'a Value,
    policy: &'a Value,
    binding: &'a Value,
    expression_index: &'a Value,
    validation_actions: &'a Value,
}

impl<'a> AuditEntry<'a> {
    fn of(value: &'a Value) -> Self {
        let field = |name: &str| value.get(name).unwrap_or(&Value::Null);
        Self {
            message: field("message"),
            policy: field("policy"),
            binding: field("binding"),
            expression_index: field("expressionIndex"),
            validation_actions: field("validationActions"),
        }
    }
}

/// Compact JSON as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn go_json<T: serde::Serialize>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Exemptions and request state

/// §1.5: the authentication and authorization reviews for every policy; the admission policy
/// resources for policies that are not static.
fn exempt(review: &IncomingReview, policy: &Policy) -> Option<&'static str> {
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    let is = |group: &str, resources: &[&str]| {
        resource.group == group && resources.contains(&resource.resource.as_str())
    };
    if is("authentication.k8s.io", &["tokenreviews", "selfsubjectreviews"])
        || is(
            "authorization.k8s.io",
            &[
                "subjectaccessreviews",
                "localsubjectaccessreviews",
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
            ],
        )
    {
        return Some("authentication and authorization reviews are never admitted by policies");
    }
    let admission = [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    ];
    if !policy.name.ends_with(STATIC_SUFFIX) && is("admissionregistration.k8s.io", &admission) {
        return Some("admission policies and their bindings are exempt from policies that are not static");
    }
    None
}

/// What is made once per request and shared by every evaluation.
struct State {
    activation: Activation,
    /// The activation holds the request's values (made when a first binding matches).
    prepared: bool,
}

impl State {
    fn new() -> Self {
        Self { activation: Activation::default(), prepared: false }
    }

    /// Converts the request's values, once per request.
    fn prepare(&mut self, attributes: &Attributes<'_>) {
        if self.prepared {
            return;
        }
        self.activation.object = attributes.object.map(|o| json_value(Some(o)));
        self.activation.old_object = attributes.old_object.map(|o| json_value(Some(o)));
        self.activation.request = Some(request_value(&request(attributes.review)));
        self.activation.namespace_object = namespace_object(attributes).map(|n| json_value(Some(n)));
        self.prepared = true;
    }
}

/// §6.4: null for a request without namespace and for every request on a Namespace.
fn namespace_object<'a>(attributes: &Attributes<'a>) -> Option<&'a Value> {
    let review = attributes.review;
    let kind = review.kind();
    if review.request.namespace.is_empty() || (kind.group.is_empty() && kind.kind == "Namespace") {
        return None;
    }
    attributes.namespace
}

/// The `request` variable (plugin/cel/condition.go, `CreateAdmissionRequest`), as for webhook
/// matchConditions: the AdmissionRequest without `uid`, `object`, `oldObject`, `omitempty`
/// fields absent.
fn request(review: &IncomingReview) -> Value {
    let r = &review.request;
    let (kind, resource) = (review.kind(), review.resource());
    let mut request = json!({
        "kind": to_json(kind),
        "resource": to_json(resource),
        "requestKind": to_json(r.request_kind.as_ref().unwrap_or(kind)),
        "requestResource": to_json(r.request_resource.as_ref().unwrap_or(resource)),
        "operation": review.operation().as_str(),
        "userInfo": user_info(review),
        "dryRun": review.dry_run(),
        "options": r.options.value.as_deref().and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok()),
    });
    let request_sub_resource = r.request_sub_resource.as_deref().unwrap_or(&r.sub_resource);
    for (key, value) in [
        ("subResource", r.sub_resource.as_str()),
        ("requestSubResource", request_sub_resource),
        ("name", r.name.as_str()),
        ("namespace", r.namespace.as_str()),
    ] {
        if !value.is_empty() {
            request[key] = json!(value);
        }
    }
    request
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// `userInfo` with its `omitempty` fields absent when empty.
fn user_info(review: &IncomingReview) -> Value {
    let mut info: Value = serde_json::from_str(review.user_info().get()).unwrap_or_else(|_| json!({}));
    if let Value::Object(fields) = &mut info {
        fields.retain(|_, v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        });
    }
    info
}

// ---------------------------------------------------------------------------------------------
// One policy

/// The budgets (k8s.io/apiserver `pkg/apis/cel/config.go`) in the metering's steps, and the
/// gateway's own wall-clock limit per phase.
const PER_EXPRESSION: u64 = 1_000_000;
const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;
const EVALUATION_BUDGET: u64 = 10_000_000;
const PHASE_DEADLINE: Duration = Duration::from_millis(100);
/// §8.2: a messageExpression result longer than this is not used.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// §11.2: audit annotation values are cut to this many bytes.
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

fn limits(per_phase: u64) -> PhaseLimits {
    #[cfg(test)]
    let per_phase = tests::BUDGET.get().unwrap_or(per_phase);
    PhaseLimits { per_expression: PER_EXPRESSION, per_phase, deadline: PHASE_DEADLINE }
}

fn evaluate_policy(
    policies: &Policies,
    policy: &Arc<Policy>,
    attributes: &Attributes<'_>,
    lookups: &dyn Lookups,
    state: &mut State,
    result: &mut PolicyResult,
) {
    let review = attributes.review;
    let r = &review.request;
    // Matching sees the request as it was made (`requestKind`/`requestResource`, which the API
    // server sets when it converted the object for the gateway); the object is of `kind`.
    let resource = r.request_resource.as_ref().unwrap_or(review.resource());
    let kind = r.request_kind.as_ref().unwrap_or(review.kind());
    let original =
        Kind { group: &kind.group, version: &kind.version, kind: &kind.kind, resource: &resource.resource };
    let (object_kind, object_resource) = (review.kind(), review.resource());
    let own = Kind {
        group: &object_kind.group,
        version: &object_kind.version,
        kind: &object_kind.kind,
        resource: &object_resource.resource,
    };
    let request = Request {
        rule: RuleRequest {
            operation: review.operation(),
            group: &resource.group,
            version: &resource.version,
            resource: &resource.resource,
            subresource: r.request_sub_resource.as_deref().unwrap_or(&r.sub_resource),
            namespace: &r.namespace,
        },
        kind: original,
        name: &r.name,
        object: attributes.object,
        old_object: attributes.old_object,
        namespace: attributes.namespace,
    };
    let equivalence = policies.equivalence();
    // §3.1
    let Some(constraints) = &policy.match_constraints else {
        config_error(policy, None, "policy contained no match constraints, a required field", review, result);
        return;
    };
    let matched = match matching::matches(constraints, &request, equivalence) {
        Ok(None) => {
            result.steps.push(format!("policy {:?}: matchConstraints do not match the request", policy.name));
            return;
        }
        Ok(Some(matched)) => matched,
        Err(error) => {
            result.steps.push(format!("policy {:?}: matchConstraints failed: {error}", policy.name));
            config_error(policy, None, &error, review, result);
            return;
        }
    };
    let mut annotations = Annotations::default();
    for binding in &policy.bindings {
        // §3.2, §4.7
        if let Some(resources) = &binding.match_resources {
            match matching::matches(resources, &request, equivalence) {
                Ok(None) => {
                    result
                        .steps
                        .push(format!("binding {:?}: matchResources do not match the request", binding.name));
                    continue;
                }
                Ok(Some(_)) => {}
                Err(error) => {
                    result.steps.push(format!("binding {:?}: matchResources failed: {error}", binding.name));
                    config_error(policy, Some(binding), &error, review, result);
                    continue;
                }
            }
        }
        // §3.3, §5
        let params = match params(policy, binding, review, lookups) {
            Ok(params) => params,
            Err(error) => {
                result.steps.push(format!("binding {:?}: parameters: {error}", binding.name));
                config_error(policy, Some(binding), &error, review, result);
                continue;
            }
        };
        if params.is_empty() {
            result.steps.push(format!("binding {:?}: no parameters found: nothing evaluated", binding.name));
            continue;
        }
        // §3.4: only the object's own version can be evaluated.
        if (matched.group, matched.version, matched.kind) != (own.group, own.version, own.kind) {
            let error = format!(
                "failed to convert object version: admission-gateway does not convert {}/{}, Kind={} to {}/{}, Kind={}",
                own.group, own.version, own.kind, matched.group, matched.version, matched.kind
            );
            result.steps.push(format!("binding {:?}: {error}", binding.name));
            config_error(policy, Some(binding), &error, review, result);
            continue;
        }
        result.steps.push(format!(
            "binding {:?} matches ({} parameter set{})",
            binding.name,
            params.len(),
            if params.len() == 1 { "" } else { "s" }
        ));
        state.prepare(attributes);
        for param in params {
            state.activation.params = param.as_deref().map(|p| json_value(Some(p)));
            let decisions = evaluate_binding(policy, binding, &mut state.activation, result);
            if let Some(decisions) = decisions {
                apply(policy, binding, decisions, review, result);
            }
        }
        state.activation.params = None;
        annotations.collect(result);
    }
    result.audit_annotations = annotations.publish(&policy.name);
}

/// The params of one binding (§5): `[None]` for one evaluation without params.
fn params(
    policy: &Policy,
    binding: &Binding,
    review: &IncomingReview,
    lookups: &dyn Lookups,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let (Some(kind), Some(param_ref)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let namespaced =
        is_namespaced(&kind.api_version, &kind.kind, &policy.params, param_ref.namespace.as_deref());
    let namespace = match (namespaced, param_ref.namespace.as_deref()) {
        (false, Some(_)) => {
            return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".to_owned())
        }
        (false, None) => None,
        (true, Some(namespace)) => Some(namespace.to_owned()),
        (true, None) if review.request.namespace.is_empty() => {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .to_owned(),
            )
        }
        (true, None) => Some(review.request.namespace.clone()),
    };
    let candidates: Vec<Param> = match lookups.params(&kind.api_version, &kind.kind, namespace.as_deref()) {
        Some(live) => {
            let mut live: Vec<Param> = live.into_iter().map(param_of).collect();
            live.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            live
        }
        None => policy
            .params
            .iter()
            .filter(|p| p.namespace == namespace.clone().unwrap_or_default())
            .cloned()
            .collect(),
    };
    let found: Vec<Option<Arc<Value>>> = candidates
        .into_iter()
        .filter(|p| match (&param_ref.name, &param_ref.selector) {
            (Some(name), _) => &p.name == name,
            (None, Some(selector)) => selector.matches(&p.labels),
            (None, None) => false,
        })
        .map(|p| Some(with_kind(p.value, &kind.api_version, &kind.kind)))
        .collect();
    if found.is_empty() && param_ref.deny_when_not_found {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".to_owned());
    }
    Ok(found)
}

/// §5.5: `apiVersion` and `kind` filled in when the object lacks them.
fn with_kind(value: Arc<Value>, api_version: &str, kind: &str) -> Arc<Value> {
    if value.get("kind").is_some() && value.get("apiVersion").is_some() {
        return value;
    }
    let mut owned = (*value).clone();
    if let Value::Object(fields) = &mut owned {
        fields.entry("apiVersion").or_insert_with(|| json!(api_version));
        fields.entry("kind").or_insert_with(|| json!(kind));
    }
    Arc::new(owned)
}

fn param_of(value: Arc<Value>) -> Param {
    let metadata = value.get("metadata");
    let text =
        |f: &str| metadata.and_then(|m| m.get(f)).and_then(Value::as_str).unwrap_or_default().to_owned();
    let labels = metadata
        .and_then(|m| m.get("labels"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    Param { namespace: text("namespace"), name: text("name"), labels, value }
}

/// The param kind's scope, without discovery: the core kinds the gateway knows, else the
/// configured objects of the kind (namespaced when they have a namespace), else the binding's
/// `paramRef.namespace`.
fn is_namespaced(api_version: &str, kind: &str, configured: &[Param], ref_namespace: Option<&str>) -> bool {
    const CLUSTER: &[(&str, &str)] = &[("v1", "Namespace"), ("v1", "Node"), ("v1", "PersistentVolume")];
    const NAMESPACED: &[(&str, &str)] =
        &[("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Service")];
    if CLUSTER.contains(&(api_version, kind)) {
        return false;
    }
    if NAMESPACED.contains(&(api_version, kind)) {
        return true;
    }
    match configured.first() {
        Some(param) => !param.namespace.is_empty(),
        None => ref_namespace.is_some(),
    }
}

// ---------------------------------------------------------------------------------------------
// Decisions

/// One decision of an evaluation (§8, §9).
#[derive(Debug)]
struct Decision {
    kind: DecisionKind,
    message: String,
    /// `reason` of the validation (`None`: Invalid).
    reason: Option<String>,
    /// 0-based index in `spec.validations` (0 for whole-evaluation errors).
    index: usize,
    seconds: f64,
}

#[derive(Debug, PartialEq, Eq)]
enum DecisionKind {
    /// A false validation: through the binding's actions.
    Deny,
    /// An expression error: through the actions under Fail, allowed under Ignore.
    Error,
    /// An audit annotation error under Fail: a denial regardless of the actions.
    Enforced,
}

/// What one evaluation gives: its decisions, and the audit annotation values it produced.
struct Evaluation {
    decisions: Vec<Decision>,
    annotations: Vec<(String, String)>,
}

fn whole(message: String) -> Decision {
    Decision { kind: DecisionKind::Error, message, reason: None, index: 0, seconds: 0.0 }
}

/// One (binding, param) evaluation: matchConditions, validations, messages, audit
/// annotations. `None`: skipped by a false condition (or an error under Ignore).
fn evaluate_binding(
    policy: &Policy,
    binding: &Binding,
    activation: &mut Activation,
    result: &mut PolicyResult,
) -> Option<Evaluation> {
    // §7: namespaceObject is null in matchConditions.
    if !policy.match_conditions.is_empty() {
        let namespace = activation.namespace_object.take();
        let outcome = with_session(activation, &[], |session| conditions(policy, session));
        activation.namespace_object = namespace;
        match outcome {
            Conditions::Match => {}
            Conditions::False(name) => {
                result
                    .steps
                    .push(format!("binding {:?}: matchCondition {name:?} is false: skipped", binding.name));
                return None;
            }
            Conditions::Error(message) => {
                result.steps.push(format!("binding {:?}: matchConditions failed: {message}", binding.name));
                if policy.failure_policy == FailurePolicy::Ignore {
                    result.checks.push(Check {
                        binding: binding.name.clone(),
                        error_type: error_type(&message),
                        enforcement_action: "allow",
                        seconds: 0.0,
                    });
                    return None;
                }
                return Some(Evaluation { decisions: vec![whole(message)], annotations: Vec::new() });
            }
        }
    }
    let evaluation = with_session(activation, &policy.variables, |session| validations(policy, session));
    for decision in &evaluation.decisions {
        let index = decision.index;
        let line = match decision.kind {
            DecisionKind::Deny => format!("binding {:?}: validation {index} is false", binding.name),
            DecisionKind::Enforced => {
                format!("binding {:?}: audit annotation failed: {}", binding.name, decision.message)
            }
            _ => format!("binding {:?}: validation {index} failed: {}", binding.name, decision.message),
        };
        result.steps.push(line);
    }
    if evaluation.decisions.is_empty() && !policy.validations.is_empty() {
        result.steps.push(format!("binding {:?}: every validation is true", binding.name));
    }
    Some(evaluation)
}

enum Conditions {
    Match,
    False(String),
    Error(String),
}

/// §7.2: every condition in order; a false one wins over errors.
fn conditions(policy: &Policy, session: &mut Session<'_>) -> Conditions {
    session.begin_phase(limits(MATCH_CONDITIONS_BUDGET));
    let mut errors: Vec<String> = Vec::new();
    let mut first_false = None;
    for condition in &policy.match_conditions {
        let program = match &condition.program {
            Ok(program) => program,
            Err(error) => {
                errors.push(format!("compilation error: {error}"));
                continue;
            }
        };
        match session.eval(program) {
            Ok(Evaluated::Bool(true)) => {}
            Ok(Evaluated::Bool(false)) => {
                first_false.get_or_insert_with(|| condition.name.clone());
            }
            Ok(other) => errors.push(resulted(
                &condition.expression,
                &format!("must evaluate to bool but got {}", type_of(&other)),
            )),
            Err(Failure::Expression(error)) => errors.push(resulted(&condition.expression, &error)),
            Err(Failure::Phase(error)) => return Conditions::Error(error),
        }
    }
    if let Some(name) = first_false {
        return Conditions::False(name);
    }
    if errors.is_empty() {
        return Conditions::Match;
    }
    let mut distinct: Vec<String> = Vec::new();
    for error in errors {
        if !distinct.contains(&error) {
            distinct.push(error);
        }
    }
    Conditions::Error(if distinct.len() == 1 {
        distinct.remove(0)
    } else {
        format!("[{}]", distinct.join(", "))
    })
}

fn resulted(expression: &str, error: &str) -> String {
    format!("expression '{expression}' resulted in error: {error}")
}

fn type_of(value: &Evaluated) -> &'static str {
    match value {
        Evaluated::Bool(_) => "bool",
        Evaluated::String(_) => "string",
        Evaluated::Null => "null_type",
        Evaluated::Other(name) => name,
    }
}

/// §8: the validations, then every messageExpression, on one budget; then the audit
/// annotations on a fresh one.
fn validations(policy: &Policy, session: &mut Session<'_>) -> Evaluation {
    session.begin_phase(limits(EVALUATION_BUDGET));
    let mut decisions: Vec<Option<Decision>> = Vec::new();
    let mut phase_error = None;
    for (index, validation) in policy.validations.iter().enumerate() {
        let started = Instant::now();
        // Only a false validation carries its `reason`; errors are `Invalid` (§8.4).
        let decision = |kind: DecisionKind, message: String| {
            Some(Decision {
                reason: validation.reason.clone().filter(|_| kind == DecisionKind::Deny),
                kind,
                message,
                index,
                seconds: started.elapsed().as_secs_f64(),
            })
        };
        let expression = &validation.expression;
        let program = match &expression.program {
            Ok(program) => program,
            Err(error) => {
                decisions.push(decision(DecisionKind::Error, format!("compilation error: {error}")));
                continue;
            }
        };
        decisions.push(match session.eval(program) {
            Ok(Evaluated::Bool(true)) => None,
            // Anything but `true` denies (validator.go: `EvalResult != celtypes.True`); a
            // result that is not a bool only gets here past the load-time checks (`dyn`).
            Ok(_) => decision(DecisionKind::Deny, String::new()),
            Err(Failure::Expression(error)) => {
                decision(DecisionKind::Error, resulted(&expression.expression, &error))
            }
            Err(Failure::Phase(error)) => {
                phase_error = Some(error);
                break;
            }
        });
    }
    if let Some(error) = phase_error {
        return Evaluation { decisions: vec![whole(error)], annotations: Vec::new() };
    }
    // Every messageExpression, of passing validations too (§8.2).
    let mut messages: Vec<Option<String>> = Vec::new();
    for validation in &policy.validations {
        let message = match validation.message_expression.as_ref().map(|m| &m.program) {
            Some(Ok(program)) => match session.eval(program) {
                Ok(Evaluated::String(text)) => Some(text),
                Ok(_) | Err(Failure::Expression(_)) => None,
                Err(Failure::Phase(error)) => {
                    phase_error = Some(error);
                    break;
                }
            },
            _ => None,
        };
        messages.push(message);
    }
    let mut decisions: Vec<Decision> = match phase_error {
        Some(error) => {
            // Every validation that did not itself fail becomes an error decision.
            let failed_message = format!("failed messageExpression: {error}");
            decisions
                .into_iter()
                .enumerate()
                .map(|(index, decision)| match decision {
                    Some(d) if d.kind == DecisionKind::Error => d,
                    other => Decision {
                        kind: DecisionKind::Error,
                        message: failed_message.clone(),
                        reason: other.and_then(|d| d.reason),
                        index,
                        seconds: 0.0,
                    },
                })
                .collect()
        }
        None => decisions
            .into_iter()
            .zip(policy.validations.iter().zip(messages))
            .filter_map(|(decision, (validation, message))| {
                let mut decision = decision?;
                if decision.kind == DecisionKind::Deny {
                    decision.message = message_of(validation, message);
                }
                Some(decision)
            })
            .collect(),
    };
    // §11: audit annotations on a fresh budget.
    let mut annotations = Vec::new();
    if !policy.audit_annotations.is_empty() {
        session.begin_phase(limits(EVALUATION_BUDGET));
        for annotation in &policy.audit_annotations {
            let value = &annotation.value;
            let program = match &value.program {
                Ok(program) => program,
                Err(error) => {
                    decisions.push(enforced(format!("compilation error: {error}")));
                    continue;
                }
            };
            match session.eval(program) {
                Ok(Evaluated::String(text)) => {
                    let text = text.trim();
                    if !text.is_empty() {
                        annotations.push((annotation.key.clone(), cut(text, MAX_AUDIT_VALUE_BYTES).to_owned()));
                    }
                }
                Ok(Evaluated::Null) => {}
                Ok(other) => decisions.push(Decision {
                    kind: DecisionKind::Enforced,
                    message: format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        value.expression,
                        type_of(&other)
                    ),
                    reason: None,
                    index: 0,
                    seconds: 0.0,
                }),
                Err(Failure::Expression(error)) => {
                    if policy.failure_policy != FailurePolicy::Ignore {
                        decisions.push(enforced(resulted(&value.expression, &error)));
                    }
                }
                Err(Failure::Phase(error)) => {
                    return Evaluation { decisions: vec![whole(error)], annotations: Vec::new() };
                }
            }
        }
    }
    Evaluation { decisions, annotations }
}

fn enforced(message: String) -> Decision {
    Decision { kind: DecisionKind::Enforced, message, reason: None, index: 0, seconds: 0.0 }
}

/// §8.2: the message of a false validation.
fn message_of(validation: &CompiledValidation, evaluated: Option<String>) -> String {
    if let Some(text) = evaluated {
        let text = text.trim();
        if !text.is_empty() && text.len() <= MAX_MESSAGE_BYTES && !text.contains('\n') {
            return text.to_owned();
        }
    }
    if let Some(message) = &validation.message {
        return message.clone();
    }
    format!("failed expression: {}", validation.expression.expression.trim())
}

/// The first `max` bytes of `text`, at a character boundary (a Rust string cannot hold the
/// split character the API server's byte cut may leave).
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// §13.2: the metric's error type, from the decision's message.
fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation") {
        "compile_error"
    } else if message.starts_with("validation failed due to running out of cost budget") {
        "out_of_budget"
    } else {
        "invalid_error"
    }
}

/// §10: the binding's actions on each deny decision.
fn apply(
    policy: &Policy,
    binding: &Binding,
    evaluation: Evaluation,
    review: &IncomingReview,
    result: &mut PolicyResult,
) {
    for (key, value) in evaluation.annotations {
        result.audit_annotations.push((key, value));
    }
    for decision in evaluation.decisions {
        let error_type = error_type(&decision.message);
        match decision.kind {
            DecisionKind::Error if policy.failure_policy == FailurePolicy::Ignore => {
                result.checks.push(Check {
                    binding: binding.name.clone(),
                    error_type,
                    enforcement_action: "allow",
                    seconds: decision.seconds,
                });
                continue;
            }
            DecisionKind::Enforced => {
                let inner = format!(
                    "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                    policy.name, binding.name, decision.message
                );
                result.denials.push(denial(review, &inner, None));
                result.checks.push(Check {
                    binding: binding.name.clone(),
                    error_type,
                    enforcement_action: "deny",
                    seconds: decision.seconds,
                });
                continue;
            }
            _ => {}
        }
        for action in &binding.validation_actions {
            match action {
                Action::Deny => {
                    let inner = format!(
                        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                        policy.name, binding.name, decision.message
                    );
                    result.denials.push(denial(review, &inner, decision.reason.as_deref()));
                }
                Action::Warn => result.warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    policy.name, binding.name, decision.message
                )),
                Action::Audit => result.audit_failures.push(audit_entry(policy, binding, &decision)),
            }
            result.checks.push(Check {
                binding: binding.name.clone(),
                error_type,
                enforcement_action: match action {
                    Action::Deny => "deny",
                    Action::Warn => "warn",
                    Action::Audit => "audit",
                },
                seconds: decision.seconds,
            });
        }
    }
}

/// §10.4: fields in this order.
fn audit_entry(policy: &Policy, binding: &Binding, decision: &Decision) -> Value {
    let actions: Vec<&str> = binding.validation_actions.iter().map(|a| a.as_str()).collect();
    json!({
        "message": decision.message,
        "policy": policy.name,
        "binding": binding.name,
        "expressionIndex": decision.index,
        "validationActions": actions,
    })
}

/// §9.3: a configuration error of the policy (`binding` `None`) or of a binding.
fn config_error(
    policy: &Policy,
    binding: Option<&Binding>,
    error: &str,
    review: &IncomingReview,
    result: &mut PolicyResult,
) {
    let message = match binding {
        None => format!("failed to configure policy: {error}"),
        Some(_) => format!("failed to configure binding: {error}"),
    };
    let message = match &policy.failure_policy {
        FailurePolicy::Ignore => return,
        FailurePolicy::Fail => message,
        FailurePolicy::Unrecognized(value) => format!("unrecognized failure policy: '{value}'"),
    };
    let inner = match binding {
        None => format!("ValidatingAdmissionPolicy '{}' denied request: {message}", policy.name),
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
            policy.name, binding.name
        ),
    };
    result.denials.push(denial(review, &inner, None));
}

/// §8.4, §8.5: the Status a denial fails the request with.
fn denial(review: &IncomingReview, inner: &str, reason: Option<&str>) -> Status {
    let reason = reason.unwrap_or("Invalid");
    let code = match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    // `attr.GetResource()`: the resource as requested.
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    let qualified = if resource.group.is_empty() {
        resource.resource.clone()
    } else {
        format!("{}.{}", resource.resource, resource.group)
    };
    let name = name_of(review);
    let mut details = serde_json::Map::new();
    for (key, value) in
        [("name", name.as_str()), ("group", resource.group.as_str()), ("kind", resource.resource.as_str())]
    {
        if !value.is_empty() {
            details.insert(key.to_owned(), json!(value));
        }
    }
    details.insert("causes".to_owned(), json!([{"message": inner}]));
    Status {
        metadata: None,
        status: Some("Failure".to_owned()),
        message: Some(format!("{qualified} {} is forbidden: {inner}", crate::go::strconv::quote(&name))),
        reason: Some(reason.to_owned()),
        details: Some(Value::Object(details)),
        code: Some(code),
    }
}

/// §8.5: the request's name, else the object's name or generateName, else `Unknown`.
fn name_of(review: &IncomingReview) -> String {
    let r = &review.request;
    if !r.name.is_empty() {
        return r.name.clone();
    }
    let object: Option<Value> = r
        .object
        .value
        .as_deref()
        .or(r.old_object.value.as_deref())
        .and_then(|raw| serde_json::from_str(raw.get()).ok());
    let Some(metadata) = object.as_ref().and_then(|o| o.get("metadata")) else {
        return "Unknown/errorGettingName".to_owned();
    };
    for field in ["name", "generateName"] {
        if let Some(value) = metadata.get(field).and_then(Value::as_str).filter(|v| !v.is_empty()) {
            return value.to_owned();
        }
    }
    "Unknown".to_owned()
}

/// §11.3: a policy's audit annotation values over its bindings and params.
#[derive(Default)]
struct Annotations {
    /// key → distinct values in order of first appearance.
    values: Vec<(String, Vec<String>)>,
}

impl Annotations {
    /// Takes the values the evaluations left in `result.audit_annotations`.
    fn collect(&mut self, result: &mut PolicyResult) {
        for (key, value) in result.audit_annotations.drain(..) {
            match self.values.iter_mut().find(|(k, _)| *k == key) {
                Some((_, values)) => {
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
                None => self.values.push((key, vec![value])),
            }
        }
    }

    fn publish(self, policy: &str) -> Vec<(String, String)> {
        self.values.into_iter().map(|(key, values)| (format!("{policy}/{key}"), values.join(", "))).collect()
    }
}
