//! The MutatingAdmissionPolicies' turn in each round of the mutating phase (docs/policies.md,
//! "Mutating policies"): before the mutating webhooks, as kube-apiserver runs its
//! `MutatingAdmissionPolicy` plugin before `MutatingAdmissionWebhook`
//! (`pkg/kubeapiserver/options/plugins.go`). The evaluation itself is `policy/mutating.rs`.
//! Here: what it may read fetched (the namespace, cluster parameters), the run on a thread of
//! the evaluations, each policy judged (`Review::judge_mutating_policy`), and the object it
//! leaves made the review's object, so that the webhooks see it and the one combined patch
//! carries it.

use std::sync::Arc;

use super::context::Review;
use super::modes::CallMode;
use super::policies::{mode_of, off_thread, prepare};
use super::policy;
use super::policy::mutating::{self, Rounds};
use super::verdict;
use crate::review::Status;
use crate::schemas::{Published, Schemas};

/// Runs the mutating policies in round `round`. Returns whether they changed the object;
/// `Err` is the Status the request fails with.
pub(crate) async fn run(review: &mut Review<'_>, round: u8, rounds: &mut Rounds) -> Result<bool, Status> {
    let policies = Arc::clone(&review.snapshot.mutating_policies);
    if policies.is_empty() || !policy::may_match(&policies, review.request) {
        return Ok(false);
    }
    let object = prepare(review, &policies).await;
    let request = review.request.clone();
    let mut state = std::mem::take(rounds);
    let schemas = Schemas::new(
        Arc::clone(&review.snapshot.settings.openapi_documents),
        review.cluster.map(|cluster| Arc::clone(&cluster.openapi) as Arc<dyn Published>),
    );
    let (dispatch, state) =
        off_thread(review, Arc::clone(&policies), object, move |policies, attributes, lookups| {
            let applied = |p: &crate::config::policy::Policy| {
                matches!(mode_of(p, &request), CallMode::Enforce | CallMode::Canary)
            };
            let dispatch =
                mutating::dispatch(policies, attributes, lookups, &schemas, round, &applied, &mut state);
            (dispatch, state)
        })
        .await?;
    *rounds = state;
    if dispatch.results.iter().any(|result| result.matched) {
        if let Some(status) = review.namespace.for_policies(review.request) {
            // The namespace of a namespaced request is fetched for the first invocation, and
            // the request fails as it is when it cannot be.
            return Err(status);
        }
    }
    for result in &dispatch.results {
        let mode = mode_of(&result.policy, review.request);
        review.judge_mutating_policy(result, mode, round);
        if let (CallMode::Shadow(shadow), 0) = (mode, round) {
            let denied = result.errors > 0;
            review.policies.shadowed(&result.policy, shadow, denied);
            if result.policy.replaces.is_some() {
                review.policies.mutating_paired(&result.policy, denied, result.would.clone());
            }
        }
    }
    dispatch.outcome?;
    let Some(object) = dispatch.object else { return Ok(false) };
    match review.object.replace(object) {
        Ok(changed) => {
            if changed {
                review.conditions.object_changed();
            }
            Ok(changed)
        }
        Err(error) => Err(verdict::internal_error(&error.to_string())),
    }
}
