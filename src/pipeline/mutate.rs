//! Stage 2: the mutating chain (docs/semantics.md §10) with reinvocation (§11).
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
use super::object::{ObjectState, PatchError};
use super::record::Records;
use super::shadow::{self, CallMode};
use super::verdict::{self, Judgement};
use super::{Failure, Judged, Mutation, Review};
use crate::config::compile::{Hook, ReinvocationPolicy};
use crate::explain::{Phase, Step};
use crate::patch::Patch;
use crate::review::Status;
use crate::upstream::CallError;

const PHASE: Phase = Phase::Mutating;

/// The reinvocation bookkeeping of one request (§11.2), by webhook id.
#[derive(Default)]
struct Reinvocation {
    /// IfNeeded webhooks invoked since the last change: "P".
    awaiting: HashSet<String>,
    /// Webhooks to call in round 1: "R".
    scheduled: HashSet<String>,
}

/// Runs every matching mutating webhook; `Err` is the status the request fails with.
pub(crate) async fn run_chain(review: &mut Review<'_>) -> Result<(), Status> {
    if let Some(reason) = matching::exempt(review.request) {
        review.explanation.record(|| Step::Exempt { phase: PHASE, reason: reason.into() });
        return Ok(());
    }
    let candidates = review.candidates(PHASE);
    review.look_up_namespace(&candidates).await;
    let mut reinvocation = Reinvocation::default();
    let mut changed_in_round_0 = false;
    for round in 0..=1u8 {
        if round == 1 && !changed_in_round_0 {
            break;
        }
        for hook in &candidates {
            if let CallMode::Shadow(mode) = CallMode::of(hook, review.request) {
                // Off the critical path: called with the object as it stands here; its patch
                // reaches no later webhook, and it is never reinvoked.
                if round == 0 {
                    shadow::start(review, hook, PHASE, round, mode).await;
                }
                continue;
            }
            if !review.matches(hook, PHASE, round).await? {
                continue;
            }
            if round == 1 && !reinvocation.scheduled.contains(&hook.id) {
                review.skipped(hook, PHASE, round, &Skip::NotReinvoked);
                continue;
            }
            let (changed, judgement) = call_hook(review, hook, round).await;
            if changed {
                review.conditions.object_changed();
                // A change schedules every IfNeeded webhook invoked before it (§11.3 a).
                reinvocation.scheduled.extend(reinvocation.awaiting.drain());
                changed_in_round_0 |= round == 0;
            }
            if hook.reinvocation == ReinvocationPolicy::IfNeeded {
                reinvocation.awaiting.insert(hook.id.clone());
            }
            if let Judgement::Fail(status) = judgement {
                return Err(status);
            }
        }
    }
    Ok(())
}

/// Calls one webhook and applies its patch. Returns whether the object changed and how the
/// chain goes on. Writes the webhook's `mutation.webhook…` annotation on every outcome (§14.3).
async fn call_hook(review: &mut Review<'_>, hook: &Arc<Hook>, round: u8) -> (bool, Judgement) {
    let index = hook.position;
    let mut called =
        call::call(hook, review.request, &review.budget, review.object.raw(), true, &review.trace).await;
    let mut applied_patch = None;
    let mut changed = false;
    let judged = match &mut called.attempt {
        Attempt::Refused(status) => Judged::dry_run_refused(status.clone()),
        Attempt::OutOfBudget { left } => review.out_of_budget(hook, PHASE, round, index, *left),
        Attempt::CallError(error) => review.failed(hook, PHASE, round, index, error),
        Attempt::Answered(response) if !response.allowed => {
            review.keep_records(hook, response);
            Judged::denied(verdict::rejection(&hook.name, response.status.as_ref()))
        }
        Attempt::Answered(response) => {
            review.keep_records(hook, response);
            let audit_patch = review.snapshot.settings.audit_patch_annotations;
            let deadline = review.budget.deadline();
            let applied = apply_patch(
                hook,
                round,
                response,
                &mut review.object,
                &mut review.records,
                audit_patch,
                deadline,
            )
            .await;
            match applied {
                Ok((mutated, patch)) => {
                    (changed, applied_patch) = (mutated, patch);
                    Judged::allowed()
                }
                Err(PatchFailure::Call(error)) => review.failed(hook, PHASE, round, index, &error),
                Err(PatchFailure::OutOfTime(error)) => review.failed(hook, PHASE, round, index, &error),
                Err(PatchFailure::Internal(status)) => Judged::internal(status, "patch_failed"),
            }
        }
    };
    review.records.annotate(
        format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}"),
        mutation_annotation(hook, changed),
    );
    let mutation = Mutation { patch: applied_patch, mutated: changed };
    let judgement = review.explain_call(hook, PHASE, round, &mut called, judged, mutation);
    (changed, judgement)
}

/// The `mutation.webhook…` annotation's value, keys in the API server's order.
fn mutation_annotation(hook: &Hook, mutated: bool) -> String {
    #[derive(serde::Serialize)]
    struct Annotation<'a> {
        configuration: &'a str,
        webhook: &'a str,
        mutated: bool,
    }
    let annotation = Annotation { configuration: &hook.configuration, webhook: &hook.name, mutated };
    // Cannot fail: two strings and a boolean.
    serde_json::to_string(&annotation)
        .unwrap_or_else(|error| unreachable!("mutation annotation encoding failed: {error}"))
}

enum PatchFailure {
    Call(CallError),
    /// The review's deadline came first: judged by the webhook's `failurePolicy`, as a call
    /// that timed out, with the object as it was before the patch.
    OutOfTime(PatchOutOfTime),
    Internal(Status),
}

/// A patch not applied before the review's deadline (`ObjectState::apply`).
pub(crate) struct PatchOutOfTime(String);

impl std::fmt::Display for PatchOutOfTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Failure for PatchOutOfTime {
    fn reason(&self) -> &'static str {
        "patch_out_of_time"
    }

    /// What the API server records for a call that ran into its deadline: 503.
    fn code(&self) -> u16 {
        503
    }
}

/// §10.3, in the API server's order. Returns (changed, the patch if applied).
/// The `patch.webhook…` annotation holds the patch itself and is only written when the
/// settings ask for it (`auditPatchAnnotations`): see `config/settings.rs`.
async fn apply_patch(
    hook: &Hook,
    round: u8,
    response: &crate::review::WebhookResponse,
    object: &mut ObjectState<'_>,
    records: &mut Records,
    audit_patch: bool,
    deadline: Option<Instant>,
) -> Result<(bool, Option<Patch>), PatchFailure> {
    let Some(bytes) = response.patch.as_deref().filter(|p| !p.is_empty()) else {
        return Ok((false, None));
    };
    let patch = decode_patch(bytes, deadline).await.map_err(|undecoded| match undecoded {
        Undecoded::Invalid(error) => PatchFailure::Call(CallError::UndecodablePatch(error)),
        Undecoded::OutOfTime => PatchFailure::OutOfTime(PatchOutOfTime(undecoded.to_string())),
    })?;
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
    let changed = object.apply(&patch, deadline).await.map_err(|error| match error {
        PatchError::OutOfTime { .. } => PatchFailure::OutOfTime(PatchOutOfTime(error.to_string())),
        error => PatchFailure::Internal(verdict::internal_error(&error.to_string())),
    })?;
    if audit_patch {
        let patch_json = patch.annotation_json();
        // Built by hand so the patch stays verbatim and the keys keep the API server's order.
        let value = format!(
            r#"{{"configuration":{},"webhook":{},"patch":{patch_json},"patchType":"JSONPatch"}}"#,
            json!(hook.configuration),
            json!(hook.name)
        );
        records
            .annotate(format!("patch.webhook.admission.k8s.io/round_{round}_index_{}", hook.position), value);
    }
    Ok((changed, Some(patch)))
}

/// Why a webhook's patch was not decoded.
#[derive(Debug, thiserror::Error)]
pub(super) enum Undecoded {
    /// Not a JSON Patch: the text of `patch::DecodeError`.
    #[error("{0}")]
    Invalid(String),
    #[error("admission-gateway could not decode the patch before the review's deadline")]
    OutOfTime,
}

/// [`Patch::decode`], on the runtime's blocking threads for a patch as large as
/// `upstream::DECODE_ASIDE_BYTES` or more, so that other reviews on the serving thread go on;
/// not waited for past `deadline`.
pub(super) async fn decode_patch(bytes: &[u8], deadline: Option<Instant>) -> Result<Patch, Undecoded> {
    if bytes.len() < crate::upstream::DECODE_ASIDE_BYTES {
        return Patch::decode(bytes).map_err(|e| Undecoded::Invalid(e.to_string()));
    }
    let bytes = bytes.to_vec();
    let decoding = tokio::task::spawn_blocking(move || Patch::decode(&bytes));
    let joined = match deadline {
        Some(deadline) => {
            tokio::time::timeout_at(deadline, decoding).await.map_err(|_| Undecoded::OutOfTime)?
        }
        None => decoding.await,
    };
    match joined {
        Ok(decoded) => decoded.map_err(|e| Undecoded::Invalid(e.to_string())),
        Err(error) => Err(Undecoded::Invalid(format!("decoding was stopped: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large patch is decoded aside and not waited for past the deadline; a small one, or
    /// one with time left, decodes as `Patch::decode` decodes it.
    #[tokio::test]
    async fn a_large_patch_is_not_waited_for_past_the_deadline() {
        let operation = r#"{"op":"add","path":"/metadata/labels/a","value":"b"}"#;
        let count = crate::upstream::DECODE_ASIDE_BYTES / operation.len() + 1;
        let large = format!("[{}]", vec![operation; count].join(","));
        let past = Some(Instant::now());
        assert!(matches!(decode_patch(large.as_bytes(), past).await, Err(Undecoded::OutOfTime)));
        let later = Some(Instant::now() + std::time::Duration::from_secs(3600));
        assert_eq!(decode_patch(large.as_bytes(), later).await.unwrap().len(), count);
        assert_eq!(decode_patch(large.as_bytes(), None).await.unwrap().len(), count);
        let small = format!("[{operation}]");
        assert_eq!(decode_patch(small.as_bytes(), past).await.unwrap().len(), 1, "decoded at once");
        let error = decode_patch(b"{", later).await.unwrap_err().to_string();
        assert_eq!(error, Patch::decode(b"{").unwrap_err().to_string());
    }
}
