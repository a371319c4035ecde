//! Stage 2: the mutating chain (dispatch-semantics §10) with reinvocation (§11).
//!
//! Webhooks run one after another in configuration order, each seeing the object as patched
//! by the ones before. If any webhook changed the object in round 0, round 1 calls again the
//! `IfNeeded` webhooks that a later webhook's change scheduled; there is never a round 2.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use tokio::time::Instant;

use super::call::{self, Attempt};
use super::matching::{self, Skip};
use super::object::ObjectState;
use super::record::Records;
use super::verdict::{self, Judgement};
use crate::config::compile::{Hook, ReinvocationPolicy};
use crate::config::Snapshot;
use crate::patch::Patch;
use crate::review::decode::IncomingReview;
use crate::review::Status;
use crate::trace::{millis, Phase, Step, Trace};
use crate::upstream::CallError;

/// The reinvocation bookkeeping of one request (§11.2).
#[derive(Default)]
struct Reinvocation<'s> {
    /// IfNeeded webhooks invoked since the last change: "P".
    awaiting: HashSet<&'s str>,
    /// Webhooks to call in round 1: "R".
    scheduled: HashSet<&'s str>,
}

/// Runs every matching mutating webhook; `Err` is the status the request fails with.
pub async fn run_chain(
    snapshot: &Snapshot,
    review: &IncomingReview,
    object: &mut ObjectState<'_>,
    deadline: Option<Instant>,
    records: &mut Records,
    trace: &mut Trace,
) -> Result<(), Status> {
    if let Some(reason) = matching::exempt(review) {
        trace.record(|| Step::Exempt { phase: Phase::Mutating, reason: reason.into() });
        return Ok(());
    }
    let resource = review.resource();
    // The index narrows the fleet to the webhooks whose rules can match; a trace lists every
    // webhook instead, so it can say why each was skipped.
    let candidates: Vec<&Arc<Hook>> = if trace.is_enabled() {
        snapshot.mutating.iter().collect()
    } else {
        snapshot.mutating_candidates(&resource.group, &resource.resource).collect()
    };
    let mut reinvocation = Reinvocation::default();
    let mut changed_in_round_0 = false;
    for round in 0..=1u8 {
        if round == 1 && !changed_in_round_0 {
            break;
        }
        for hook in &candidates {
            let skip = matching::should_call(hook, review, object, snapshot)?;
            let skip = skip.or_else(|| {
                (round == 1 && !reinvocation.scheduled.contains(hook.id.as_str()))
                    .then_some(Skip::NotReinvoked)
            });
            if let Some(skip) = skip {
                trace.record(|| skipped(hook, round, &skip));
                continue;
            }
            let (changed, judgement) = call_hook(hook, round, review, object, deadline, records, trace).await;
            if changed {
                // A change schedules every IfNeeded webhook invoked before it (§11.3 a).
                reinvocation.scheduled.extend(reinvocation.awaiting.drain());
                changed_in_round_0 |= round == 0;
            }
            if hook.reinvocation == ReinvocationPolicy::IfNeeded {
                reinvocation.awaiting.insert(hook.id.as_str());
            }
            match judgement {
                Judgement::Continue => {}
                Judgement::FailedOpen => {
                    let key = format!(
                        "failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{}",
                        hook.position
                    );
                    records.annotate(key, hook.name.clone());
                    // The caller's deadline passed: no later webhook may run (§7.4).
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(verdict::timeout());
                    }
                }
                Judgement::Fail(status) => return Err(status),
            }
        }
    }
    Ok(())
}

fn skipped(hook: &Hook, round: u8, skip: &Skip) -> Step {
    Step::Skipped {
        phase: Phase::Mutating,
        configuration: hook.configuration.clone(),
        webhook: hook.name.clone(),
        round,
        reason: skip.to_string(),
    }
}

/// Calls one webhook and applies its patch. Returns whether the object changed and how the
/// chain goes on. Writes the webhook's `mutation.webhook…` annotation on every outcome (§14.3).
async fn call_hook(
    hook: &Hook,
    round: u8,
    review: &IncomingReview,
    object: &mut ObjectState<'_>,
    deadline: Option<Instant>,
    records: &mut Records,
    trace: &mut Trace,
) -> (bool, Judgement) {
    let called = call::call(hook, review, object.raw(), deadline, true).await;
    let mut applied_patch = None;
    let (changed, judgement, outcome) = match called.attempt {
        Attempt::Refused(status) => (false, Judgement::Fail(status), "refused: dry run".to_owned()),
        Attempt::CallError(error) => call_error(hook, &error),
        Attempt::Answered(mut response) => {
            records.webhook_annotations(&hook.name, response.audit_annotations.take());
            records.warn(response.warnings.take());
            if !response.allowed {
                let status = verdict::rejection(&hook.name, response.status.as_ref());
                let outcome = format!("denied: {}", status.message.as_deref().unwrap_or_default());
                (false, Judgement::Fail(status), outcome)
            } else {
                match apply_patch(hook, round, &response, object, records) {
                    Ok((changed, patch)) => {
                        applied_patch = patch;
                        (changed, Judgement::Continue, "allowed".to_owned())
                    }
                    Err(PatchFailure::Call(error)) => call_error(hook, &error),
                    Err(PatchFailure::Internal(status)) => {
                        let outcome = format!("error: {}", status.message.as_deref().unwrap_or_default());
                        (false, Judgement::Fail(status), outcome)
                    }
                }
            }
        }
    };
    records.annotate(
        format!("mutation.webhook.admission.k8s.io/round_{round}_index_{}", hook.position),
        // Keys in the API server's order: configuration, webhook, mutated.
        format!(
            r#"{{"configuration":{},"webhook":{},"mutated":{changed}}}"#,
            json!(hook.configuration),
            json!(hook.name)
        ),
    );
    trace.record(|| match called.timeout {
        Some(timeout) => Step::Called {
            phase: Phase::Mutating,
            configuration: hook.configuration.clone(),
            webhook: hook.name.clone(),
            round,
            timeout,
            latency_ms: millis(called.latency),
            outcome,
            patch: applied_patch,
            mutated: changed,
        },
        None => Step::NotCalled {
            phase: Phase::Mutating,
            configuration: hook.configuration.clone(),
            webhook: hook.name.clone(),
            round,
            outcome,
        },
    });
    (changed, judgement)
}

fn call_error(hook: &Hook, error: &CallError) -> (bool, Judgement, String) {
    let judgement = verdict::from_call_error(hook, error);
    let outcome = match judgement {
        Judgement::FailedOpen => format!("failed open (failurePolicy Ignore): {error}"),
        _ => format!("failed (failurePolicy Fail): {error}"),
    };
    tracing::warn!(webhook = %hook.name, reason = error.reason(), "mutating webhook call {outcome}");
    (false, judgement, outcome)
}

enum PatchFailure {
    Call(CallError),
    Internal(Status),
}

/// §10.3, in the API server's order. Returns (changed, patch annotation JSON if applied).
fn apply_patch(
    hook: &Hook,
    round: u8,
    response: &crate::review::WebhookResponse,
    object: &mut ObjectState<'_>,
    records: &mut Records,
) -> Result<(bool, Option<String>), PatchFailure> {
    let Some(bytes) = response.patch.as_deref().filter(|p| !p.is_empty()) else {
        return Ok((false, None));
    };
    let patch =
        Patch::decode(bytes).map_err(|e| PatchFailure::Call(CallError::UndecodablePatch(e.to_string())))?;
    if patch.is_empty() {
        return Ok((false, None));
    }
    if object.is_null() {
        return Err(PatchFailure::Internal(verdict::internal_error(&format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        ))));
    }
    let patch_type = response.patch_type.as_deref().unwrap_or_default();
    if patch_type != "JSONPatch" {
        return Err(PatchFailure::Call(CallError::UnsupportedPatchType {
            patch_type: patch_type.to_owned(),
            status: Box::new(verdict::rejection(&hook.name, response.status.as_ref())),
        }));
    }
    let changed =
        object.apply(&patch).map_err(|e| PatchFailure::Internal(verdict::internal_error(&e.to_string())))?;
    let patch_json = patch.annotation_json();
    // Built by hand so the patch stays verbatim and the keys keep the API server's order.
    let value = format!(
        r#"{{"configuration":{},"webhook":{},"patch":{patch_json},"patchType":"JSONPatch"}}"#,
        json!(hook.configuration),
        json!(hook.name)
    );
    records.annotate(format!("patch.webhook.admission.k8s.io/round_{round}_index_{}", hook.position), value);
    Ok((changed, Some(patch_json)))
}
