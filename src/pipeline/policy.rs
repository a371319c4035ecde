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
//! docs/policies.md describes the whole.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cel::{
    json_value, request_value, with_session, Activation, Evaluated, Failure, PhaseLimits, Session,
};
use crate::config::policy::{Action, Binding, CompiledValidation, FailurePolicy, Param, Policies, Policy};
use crate::review::decode::IncomingReview;
use crate::review::Status;

mod audit;
mod decisions;
mod denial;
pub(crate) mod mutating;
mod params;
#[cfg(test)]
mod tests;

use super::matching::resources::{self, Kind, Request};
use super::matching::{exempt, rules};
use audit::Annotations;
use decisions::{apply, config_error, evaluate_binding};

/// Evaluates every policy that has bindings against the request, in evaluation order.
pub(crate) fn evaluate(
    policies: &Policies,
    attributes: &Attributes<'_>,
    lookups: &dyn Lookups,
) -> Vec<PolicyResult> {
    let review = attributes.review;
    let mut state = State::new();
    state.activation.deadline = attributes.deadline;
    let mut results = Vec::new();
    let mut candidates = candidates(policies, review).map(|(position, _)| position).peekable();
    for (position, policy) in policies.iter().enumerate().filter(|(_, p)| !p.bindings.is_empty()) {
        let started = std::time::Instant::now();
        let mut result = PolicyResult::new(policy);
        let candidate = candidates.next_if_eq(&position).is_some();
        if let Some(why) = exempt::from_policy(review, policy.is_static) {
            result.steps.push(format!("policy {:?} skipped: {why}", policy.name));
        } else if !candidate {
            // Its rules cannot match (the index says): `matchConstraints` would not match,
            // whatever the object and the namespace.
            result.steps.push(no_match(policy));
        } else {
            evaluate_policy(policies, policy, attributes, lookups, &mut state, &mut result);
        }
        result.elapsed = started.elapsed();
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
    /// The review's deadline: an evaluation still running then fails under its
    /// failurePolicy, as a webhook call that timed out.
    pub(crate) deadline: Option<std::time::Instant>,
}

/// Live state an evaluation may read: parameters from the API server (cluster mode).
pub(crate) trait Lookups {
    /// Parameter objects of `api_version`/`kind` in `namespace` (empty for a cluster-scoped
    /// kind) that `name` names, or all of them; `None` when this source does not serve that
    /// kind, or the API server's error for the kind (not yet synced, unknown to discovery).
    fn params(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> Option<Result<Vec<Arc<Param>>, String>>;

    /// Whether objects of the kind live in namespaces, when this source knows.
    fn namespaced(&self, _api_version: &str, _kind: &str) -> Option<bool> {
        None
    }
}

/// No live state: parameters come from the configuration only.
pub(crate) struct NoLookups;

impl Lookups for NoLookups {
    fn params(&self, _: &str, _: &str, _: &str, _: Option<&str>) -> Option<Result<Vec<Arc<Param>>, String>> {
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
    /// Whether some binding of the policy matched the request (and so needed its namespace).
    pub(crate) matched: bool,
    /// An error was ignored (`failurePolicy: Ignore`): a configuration, matchCondition or
    /// expression error that would otherwise have denied.
    pub(crate) failed_open: bool,
    /// How long the policy's evaluation took, all bindings and parameters.
    pub(crate) elapsed: std::time::Duration,
    /// Observations of the match-condition metrics (`name` = the policy, `kind="policy"`).
    pub(crate) conditions: Vec<ConditionCheck>,
}

/// One observation of `apiserver_admission_match_condition_evaluation_seconds`, and `errors`
/// of `apiserver_admission_match_condition_evaluation_errors_total`: made when an evaluation's
/// matchConditions had a false one or failed, not when they all held.
#[derive(Clone, Debug)]
pub(crate) struct ConditionCheck {
    /// How many conditions failed (at least 1 when the whole phase failed; 0 when one was false).
    pub(crate) errors: usize,
    pub(crate) seconds: f64,
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
            matched: false,
            failed_open: false,
            elapsed: std::time::Duration::ZERO,
            conditions: Vec::new(),
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

/// Aggregates the results of the policies that are enforced: the first denial, the
/// warnings (exact duplicates dropped), the audit annotations (the first writer of a key
/// wins) and the `validation_failure` annotation.
pub(crate) fn aggregate<'a>(results: impl IntoIterator<Item = &'a PolicyResult>) -> Verdict {
    let mut verdict = Verdict::default();
    let mut failures: Vec<&Value> = Vec::new();
    // Sets beside the lists: a selector may select many parameters, each with its warnings.
    let mut warned: HashSet<&str> = HashSet::new();
    let mut annotated: HashSet<&str> = HashSet::new();
    for result in results {
        if verdict.denial.is_none() {
            verdict.denial = result.denials.first().cloned();
        }
        for warning in &result.warnings {
            if warned.insert(warning) {
                verdict.warnings.push(warning.clone());
            }
        }
        for (key, value) in &result.audit_annotations {
            if annotated.insert(key) {
                verdict.audit_annotations.push((key.clone(), value.clone()));
            }
        }
        if failures.len() < MAX_AUDIT_FAILURES {
            failures.extend(result.audit_failures.iter().take(MAX_AUDIT_FAILURES - failures.len()));
        }
    }
    if !failures.is_empty() && !annotated.contains(VALIDATION_FAILURE_KEY) {
        let entries: Vec<AuditEntry<'_>> = failures.iter().map(|v| AuditEntry::of(v)).collect();
        verdict.audit_annotations.push((VALIDATION_FAILURE_KEY.to_owned(), go_json(&entries)));
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
// Request state

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
        self.activation.old_object = Some(super::conditions::old_object_value(attributes.old_object));
        // The same `request` as webhook matchConditions see (`conditions.rs`).
        self.activation.request = Some(request_value(&super::conditions::request(attributes.review)));
        self.activation.namespace_object = namespace_object(attributes).map(|n| json_value(Some(n)));
        self.prepared = true;
    }
}

/// `namespaceObject`: null for a request without namespace and for every request on a Namespace.
fn namespace_object<'a>(attributes: &Attributes<'a>) -> Option<&'a Value> {
    let review = attributes.review;
    let kind = review.kind();
    if review.request.namespace.is_empty() || (kind.group.is_empty() && kind.kind == "Namespace") {
        return None;
    }
    attributes.namespace
}

// ---------------------------------------------------------------------------------------------
// One policy

/// The request as matching sees it: as it was made (`requestKind`/`requestResource`, which the
/// API server sets when it converted the object for the gateway).
fn request_of<'a>(attributes: &Attributes<'a>) -> Request<'a> {
    let review = attributes.review;
    let rule = rules::as_requested(review);
    let kind = review.request.request_kind.as_ref().unwrap_or(review.kind());
    Request {
        rule,
        kind: Kind { group: &kind.group, version: &kind.version, kind: &kind.kind, resource: rule.resource },
        name: &review.request.name,
        object: attributes.object,
        old_object: attributes.old_object,
        namespace: attributes.namespace,
    }
}

/// The policies whose `matchConstraints` may match `review`, with their positions, from the
/// index by the resource as it was requested.
fn candidates<'p>(
    policies: &'p Policies,
    review: &IncomingReview,
) -> impl Iterator<Item = (usize, &'p Arc<Policy>)> {
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    policies.candidates(&resource.group, &resource.resource)
}

/// The step of a policy whose `matchConstraints` do not match.
fn no_match(policy: &Policy) -> String {
    format!("policy {:?}: matchConstraints do not match the request", policy.name)
}

/// Whether some candidate policy that is not exempt has resource rules that accept `review`: a
/// necessary condition of any match that reads neither the object nor the namespace. When no
/// policy passes it, nothing can match and [`evaluate`] without the object, its namespace or a
/// thread of its own gives the same results; so only then are they fetched.
pub(crate) fn may_match(policies: &Policies, review: &IncomingReview) -> bool {
    let attributes = Attributes { review, object: None, old_object: None, namespace: None, deadline: None };
    let request = request_of(&attributes);
    candidates(policies, review).any(|(_, policy)| {
        exempt::from_policy(review, policy.is_static).is_none()
            && match &policy.match_constraints {
                None => true,
                Some(constraints) => resources::rules_accept(constraints, &request, policies.equivalence()),
            }
    })
}

/// The budgets (k8s.io/apiserver `pkg/apis/cel/config.go`) in cel-go's cost units. No
/// wall-clock limit: the review's deadline (`Attributes::deadline`) is the only time bound.
const PER_EXPRESSION: u64 = 1_000_000;
const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;
const EVALUATION_BUDGET: u64 = 10_000_000;
/// A messageExpression result longer than this is not used.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// Audit annotation values are cut to this many bytes.
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

fn limits(per_phase: u64) -> PhaseLimits {
    #[cfg(test)]
    let per_phase = tests::BUDGET.get().unwrap_or(per_phase);
    PhaseLimits { per_expression: PER_EXPRESSION, per_phase }
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
    let request = request_of(attributes);
    let (object_kind, object_resource) = (review.kind(), review.resource());
    let own = Kind {
        group: &object_kind.group,
        version: &object_kind.version,
        kind: &object_kind.kind,
        resource: &object_resource.resource,
    };
    let equivalence = policies.equivalence();
    // The policy's matchConstraints.
    let Some(constraints) = &policy.match_constraints else {
        config_error(policy, None, "policy contained no match constraints, a required field", review, result);
        return;
    };
    let matched = match resources::matches(constraints, &request, equivalence) {
        Ok(None) => {
            result.steps.push(no_match(policy));
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
        // The binding's matchResources narrow the policy's.
        if let Some(narrowing) = &binding.match_resources {
            match resources::matches(narrowing, &request, equivalence) {
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
        // Its parameters.
        let params = match params::of(policy, binding, review, lookups) {
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
        // Only the object's own version can be evaluated (no conversion).
        if (matched.group, matched.version, matched.kind) != (own.group, own.version, own.kind) {
            let error = format!(
                "failed to convert object version: admission-gateway does not convert {}/{}, Kind={} to {}/{}, Kind={}",
                own.group, own.version, own.kind, matched.group, matched.version, matched.kind
            );
            result.steps.push(format!("binding {:?}: {error}", binding.name));
            config_error(policy, Some(binding), &error, review, result);
            continue;
        }
        // §3.5: here the API server fetches the request's namespace.
        result.matched = true;
        result.steps.push(format!(
            "binding {:?} matches ({} parameter set{})",
            binding.name,
            params.len(),
            if params.len() == 1 { "" } else { "s" }
        ));
        state.prepare(attributes);
        for param in params {
            state.activation.params = param;
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
