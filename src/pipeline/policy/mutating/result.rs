//! What one run of the mutating policies leaves: each policy's result, the run's outcome, the
//! request's reinvocation state across rounds, and the 403 the collected errors fail the
//! request with (`mutating/dispatcher.go`: every error a cause, the first one's text and reason).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};

use super::super::denial::name_of;
use super::super::ConditionCheck;
use crate::config::policy::Policy;
use crate::review::decode::IncomingReview;
use crate::review::Status;

/// The reinvocation state of one request (`reinvocationcontext.go`), by invocation key.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// `IfNeeded` invocations run since the last change: "P".
    pub(super) awaiting: HashSet<String>,
    /// Invocations to run in round 1: "R".
    pub(super) scheduled: HashSet<String>,
    /// The object as the policies last left it (compared at the start of round 1).
    pub(super) last: Option<Value>,
    /// Round 1 was asked for: some mutation succeeded.
    pub(super) requested: bool,
}

impl Rounds {
    pub(super) fn schedule_awaiting(&mut self) {
        self.scheduled.extend(self.awaiting.drain());
    }
}

/// What one policy did on the request, all its invocations together.
#[derive(Debug)]
pub(crate) struct MutatingResult {
    pub(crate) policy: Arc<Policy>,
    /// What matched and why, for `review`'s explanation and the spans.
    pub(crate) steps: Vec<String>,
    /// Some binding matched (so the namespace was needed).
    pub(crate) matched: bool,
    /// Some mutation changed the object.
    pub(crate) mutated: bool,
    /// An error was dropped by `failurePolicy: Ignore`.
    pub(crate) failed_open: bool,
    /// Errors collected under Fail: the request is denied.
    pub(crate) errors: usize,
    /// One observation of `apiserver_mutating_admission_policy_check_*` per mutation run.
    pub(crate) checks: Vec<MutationCheck>,
    /// Observations of the match-condition metrics.
    pub(crate) conditions: Vec<ConditionCheck>,
    pub(crate) elapsed: std::time::Duration,
    /// Not applied (its mode): the object it saw and the object its mutations would have left.
    pub(crate) would: Option<(Value, Value)>,
}

/// One mutation's observation.
#[derive(Clone, Debug)]
pub(crate) struct MutationCheck {
    pub(crate) binding: String,
    /// `no_error`, `compile_error`, `out_of_budget`, `invalid_error`.
    pub(crate) error_type: &'static str,
    pub(crate) seconds: f64,
}

/// The outcome of one run of the plugin.
#[derive(Debug)]
pub(crate) struct Dispatch {
    /// The object after the run, when some mutation changed it.
    pub(crate) object: Option<Value>,
    pub(crate) results: Vec<MutatingResult>,
    /// `Err`: the request fails with this Status (the collected errors' 403, or a status
    /// error that ended the run).
    pub(crate) outcome: Result<(), Status>,
}

/// One collected error.
pub(super) struct PolicyError {
    pub(super) message: String,
    /// `Invalid` for evaluation and matchCondition errors; none (`Forbidden`) for
    /// configuration errors.
    pub(super) reason: Option<&'static str>,
}

impl MutatingResult {
    pub(super) fn new(policy: &Arc<Policy>) -> Self {
        Self {
            policy: Arc::clone(policy),
            steps: Vec::new(),
            matched: false,
            mutated: false,
            failed_open: false,
            errors: 0,
            checks: Vec::new(),
            conditions: Vec::new(),
            elapsed: std::time::Duration::ZERO,
            would: None,
        }
    }
}

/// The 403 the collected errors fail the request with: the first error's reason and text,
/// every error a cause.
pub(super) fn denial(review: &IncomingReview, first: &PolicyError, errors: &[PolicyError]) -> Status {
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    let mut details = serde_json::Map::new();
    details.insert("name".to_owned(), json!(name_of(review)));
    if !resource.group.is_empty() {
        details.insert("group".to_owned(), json!(resource.group));
    }
    details.insert("kind".to_owned(), json!(resource.resource));
    let causes: Vec<Value> = errors.iter().map(|e| json!({"message": e.message})).collect();
    details.insert("causes".to_owned(), Value::Array(causes));
    Status {
        metadata: None,
        status: Some("Failure".to_owned()),
        message: Some(first.message.clone()),
        reason: Some(first.reason.unwrap_or("Forbidden").to_owned()),
        details: Some(Value::Object(details)),
        code: Some(403),
    }
}
