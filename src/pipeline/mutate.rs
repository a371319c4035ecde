//! Stage 2: the mutating chain (docs/semantics.md §10) with reinvocation (§11): the
//! MutatingAdmissionPolicies, then the webhooks, in each round.
//!
//! Webhooks run one after another in configuration order, each seeing the object as patched
//! by the policies and the webhooks before. If any webhook changed the object in round 0, or a
//! policy's mutation succeeded, round 1 runs the policies scheduled for it and calls again the
//! `IfNeeded` webhooks that a later change scheduled; there is never a round 2.

use std::collections::HashSet;
use std::sync::Arc;

use super::call;
use super::context::Review;
use super::judge::Turn;
use super::matching::{self, Skip};
use super::modes::CallMode;
use super::mutating_policies;
use super::policy::mutating::{self, Rounds};
use super::shadow;
use super::verdict::Judgement;
use crate::config::compile::{Hook, ReinvocationPolicy};
use crate::explain::{Phase, Step};
use crate::review::Status;

const PHASE: Phase = Phase::Mutating;

/// The reinvocation bookkeeping of one request (§11.2), by webhook id.
#[derive(Default)]
struct Reinvocation {
    /// IfNeeded webhooks invoked since the last change: "P".
    awaiting: HashSet<String>,
    /// Webhooks to call in round 1: "R".
    scheduled: HashSet<String>,
}

/// Runs the mutating phase: in each round the mutating policies, then every matching
/// mutating webhook; `Err` is the status the request fails with.
///
/// Round 1 runs when a webhook changed the object in round 0 or the policies asked for it
/// (any of their mutations succeeded: `policy::mutating`). The policies keep their own
/// reinvocation state; the webhooks see a change the policies made in round 1 as one by
/// another plugin, which schedules every `IfNeeded` webhook invoked so far (upstream's
/// `IsOutputChangedSinceLastWebhookInvocation`).
pub(crate) async fn run_chain(review: &mut Review<'_>) -> Result<(), Status> {
    let exempt = matching::exempt::from_webhooks(review.request);
    if let Some(reason) = exempt {
        review.explanation.record(|| Step::Exempt { phase: PHASE, reason: reason.into() });
    }
    let candidates = if exempt.is_none() { review.candidates(PHASE) } else { Vec::new() };
    let mut rounds = Rounds::default();
    let mut reinvocation = Reinvocation::default();
    let mut changed_in_round_0 = false;
    for round in 0..=1u8 {
        if round == 1 && !changed_in_round_0 && !mutating::wants_round_1(&rounds) {
            break;
        }
        let policies_changed = mutating_policies::run(review, round, &mut rounds).await?;
        if round == 1 && policies_changed {
            reinvocation.scheduled.extend(reinvocation.awaiting.drain());
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

/// Calls one webhook, judged with its patch applied. Returns whether the object changed and
/// how the chain goes on. Writes the webhook's `mutation.webhook…` annotation on every
/// outcome (§14.3).
async fn call_hook(review: &mut Review<'_>, hook: &Arc<Hook>, round: u8) -> (bool, Judgement) {
    let turn = Turn { phase: PHASE, round, index: hook.position };
    // A shadowed mutating policy replaces this webhook: what it makes of the object is kept.
    let watched = round == 0 && review.policies.watches(&hook.configuration, &hook.name);
    let sent = if watched { review.object.tree().cloned() } else { None };
    let mut called =
        call::call(hook, review.request, &review.budget, review.object.raw(), true, &review.trace).await;
    let (judgement, changed) = review.judge(hook, turn, &mut called).await;
    if let Some(sent) = sent {
        let patched = review.object.tree().cloned().unwrap_or_default();
        review.policies.output(&hook.configuration, &hook.name, sent, patched);
    }
    review.records.annotate(
        format!("mutation.webhook.admission.k8s.io/round_{round}_index_{}", turn.index),
        mutation_annotation(hook, changed),
    );
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
