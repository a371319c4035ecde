//! One request through the ValidatingAdmissionPolicies, as kube-apiserver's plugin evaluates
//! it (k8s.io/apiserver `pkg/admission/plugin/policy/validating`, `…/policy/generic`,
//! `…/policy/matching`): per policy, its bindings × their parameters, decisions, warnings,
//! audit entries and metric observations; then [`aggregate`] over the policies that are enforced.
//!
//! Synchronous and pure but for the clock and what [`Lookups`] answers: the stage fetches what
//! may need the network (the request's namespace) before calling it.

#![allow(dead_code)] // until the stage uses every part (removed when wired)

use std::sync::Arc;

use serde_json::Value;

use crate::config::policy::{Policies, Policy};
use crate::review::decode::IncomingReview;
use crate::review::Status;

/// Evaluates every policy that has bindings against the request, in evaluation order.
pub(crate) fn evaluate(
    policies: &Policies,
    attributes: &Attributes<'_>,
    lookups: &dyn Lookups,
) -> Vec<PolicyResult> {
    let _ = (policies, attributes, lookups);
    Vec::new()
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
    /// Whether some binding of the policy matched the request (and so needed its namespace).
    pub(crate) matched: bool,
    /// How long the policy's evaluation took, all bindings and parameters.
    pub(crate) elapsed: std::time::Duration,
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

/// Aggregates the results of the policies that are enforced (§12.2).
pub(crate) fn aggregate<'a>(results: impl IntoIterator<Item = &'a PolicyResult>) -> Verdict {
    let mut verdict = Verdict::default();
    for result in results {
        if verdict.denial.is_none() {
            verdict.denial = result.denials.first().cloned();
        }
        verdict.warnings.extend(result.warnings.iter().cloned());
        verdict.audit_annotations.extend(result.audit_annotations.iter().cloned());
    }
    verdict
}
