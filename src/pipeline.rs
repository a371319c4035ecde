//! The admission pipeline: one decoded review in, one answer out.
//!
//! ```text
//! Request ─▶ Review (context.rs) ─▶ mutate::run_chain   sequential, patches applied, IfNeeded round 1
//!                                ─▶ policies::run       ValidatingAdmissionPolicies, on the mutated object
//!                                ─▶ validate::fan_out   concurrent, on the mutated object
//!                                ─▶ Outcome: verdict + one combined patch + annotations + warnings,
//!                                            and a CallRecord per matched webhook
//! each webhook: matching.rs, conditions.rs ─▶ call.rs ─▶ judge.rs (patching.rs) ─▶ CallRecord
//! shadow calls: shadow.rs, off the critical path, judged by the same Verdict
//! after the answer: observe.rs turns the outcome into metrics and the review's log line
//! ```
//!
//! Where each idea lives: `context.rs` the per-review state and what both dispatchers ask of
//! it; `judge.rs` the one place an attempt becomes a decision; `patching.rs` the one patch
//! check; `outcome.rs` what a review produced; `observe.rs` every metric, log line and span
//! end of a call and a review; `modes.rs` enforce, warn, canary and shadow; `verdict.rs` the
//! API server's statuses; `record.rs` audit annotations and warnings; `budget.rs` the deadline.

pub(crate) mod budget;
pub(crate) mod call;
pub(crate) mod conditions;
pub(crate) mod context;
pub(crate) mod evaluations;
pub(crate) mod judge;
pub(crate) mod matching;
pub(crate) mod modes;
pub(crate) mod mutate;
pub(crate) mod mutating_policies;
pub(crate) mod object;
pub(crate) mod observe;
pub(crate) mod outcome;
pub(crate) mod patching;
pub(crate) mod policies;
pub(crate) mod policy;
pub(crate) mod record;
pub(crate) mod shadow;
pub(crate) mod validate;
pub(crate) mod verdict;

use crate::cluster::Cluster;
use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::explain::Explanation;
use crate::review::decode::IncomingReview;
use crate::traces::Parent;
use budget::Budget;
use context::Review;
pub(crate) use outcome::Outcome;
use shadow::Shadows;

/// One review to dispatch, and what it is dispatched with.
pub(crate) struct Request<'r> {
    /// The configuration it is judged against, loaded once for the whole review.
    pub(crate) snapshot: &'r Snapshot,
    pub(crate) review: &'r IncomingReview,
    /// Which dispatchers it goes through.
    pub(crate) endpoint: Endpoint,
    pub(crate) budget: Budget,
    /// Live cluster state, in cluster mode.
    pub(crate) cluster: Option<&'r Cluster>,
    /// Records the steps when enabled.
    pub(crate) explanation: Explanation,
    /// Where shadow calls are cancelled and whether they are awaited.
    pub(crate) shadows: &'r Shadows,
    /// The review's span, parent of its calls' spans.
    pub(crate) trace: Parent,
    /// The request's namespace as a recording saw it (replay): taken instead of a lookup.
    pub(crate) recorded_namespace: Option<matching::NamespaceLabels>,
}

impl<'r> Request<'r> {
    /// `review` at `endpoint` against `snapshot`: no cluster, not explained, not traced.
    pub(crate) fn new(
        snapshot: &'r Snapshot,
        review: &'r IncomingReview,
        endpoint: Endpoint,
        budget: Budget,
        shadows: &'r Shadows,
    ) -> Self {
        Request {
            snapshot,
            review,
            endpoint,
            budget,
            cluster: None,
            explanation: Explanation::disabled(),
            shadows,
            trace: Parent::default(),
            recorded_namespace: None,
        }
    }
}

/// Dispatches one review within its budget. Shadow calls go on after the answer: returned
/// with the outcome are those still running (the `review` command awaits them to show their
/// results; the server lets them go).
pub(crate) async fn review(request: Request<'_>) -> (Outcome, shadow::Running) {
    let endpoint = request.endpoint;
    let mut review = Review::new(request);
    let mut result = Ok(());
    if matches!(endpoint, Endpoint::Mutate | Endpoint::Admit) {
        result = mutate::run_chain(&mut review).await;
    }
    // kube-apiserver's validating plugins in order: policies, then webhooks.
    if result.is_ok() && matches!(endpoint, Endpoint::Validate | Endpoint::Admit) {
        result = policies::run(&mut review).await;
    }
    if result.is_ok() && matches!(endpoint, Endpoint::Validate | Endpoint::Admit) {
        result = validate::fan_out(&mut review).await;
    }
    review.finish(result)
}
