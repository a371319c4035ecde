//! Stage 3: every matching validating webhook at once (docs/semantics.md §12).
//!
//! Runs on the object *after* the mutating chain. Matching is decided for every webhook
//! before any call; the answer waits for all calls. Any denial or fail-closed error fails the
//! request; where several do, all of them are named.

use std::sync::Arc;

use futures_util::future::join_all;

use super::call::{self, Attempt};
use super::matching;
use super::shadow::{self, CallMode};
use super::verdict::{self, Judgement};
use super::{Judged, Mutation, Review};
use crate::config::compile::Hook;
use crate::config::mode::Mode;
use crate::explain::{Phase, Step};
use crate::review::Status;
use crate::telemetry::names;

const PHASE: Phase = Phase::Validating;

/// Prefixed to a warn-mode webhook's denial returned as a warning.
pub(crate) const WARN_MODE_PREFIX: &str = "admission-gateway warn mode: ";

pub(crate) async fn fan_out(review: &mut Review<'_>) -> Result<(), Status> {
    if let Some(reason) = matching::exempt(review.request) {
        review.explanation.record(|| Step::Exempt { phase: PHASE, reason: reason.into() });
        return Ok(());
    }
    let candidates = review.candidates(PHASE);
    review.look_up_namespace(&candidates).await;
    let mut matched: Vec<&Arc<Hook>> = Vec::new();
    let mut shadowed = Vec::new();
    for hook in candidates {
        match CallMode::of(hook, review.request) {
            CallMode::Shadow(mode) => shadowed.push((hook, mode)),
            _ if review.matches(hook, PHASE, 0).await? => matched.push(hook),
            _ => {}
        }
    }
    // Matched as if enforced, once the enforced webhooks' matching let the request through.
    for (hook, mode) in shadowed {
        shadow::start(review, hook, PHASE, 0, mode).await;
    }
    if matched.is_empty() {
        return Ok(());
    }
    let (request, budget, trace) = (review.request, review.budget, &review.trace);
    let object = review.object.raw();
    let results =
        join_all(matched.iter().map(|hook| call::call(hook, request, &budget, object, false, trace))).await;

    let mut failures = Vec::new();
    // `index` is the position among the matching webhooks (§12.4).
    for (index, (hook, mut called)) in matched.iter().zip(results).enumerate() {
        let judged = match &mut called.attempt {
            Attempt::Refused(status) => Judged::dry_run_refused(status.clone()),
            Attempt::OutOfBudget { left } => review.out_of_budget(hook, PHASE, 0, index, *left),
            Attempt::CallError(error) => review.failed(hook, PHASE, 0, index, error),
            Attempt::Answered(response) => {
                review.keep_records(hook, response);
                if response.allowed {
                    Judged::allowed()
                } else if hook.mode == Mode::Warn {
                    review.warn_mode_denial(hook, verdict::rejection(&hook.name, response.status.as_ref()))
                } else {
                    Judged::denied(verdict::rejection(&hook.name, response.status.as_ref()))
                }
            }
        };
        if let Judgement::Fail(status) =
            review.explain_call(hook, PHASE, 0, &mut called, judged, Mutation::default())
        {
            failures.push(status);
        }
    }
    match verdict::several(failures) {
        Some(status) => Err(status),
        None => Ok(()),
    }
}

impl Review<'_> {
    /// A warn-mode webhook denied: its denial, in the API server's words, becomes a warning
    /// returned to the user, and the request goes on (docs/configuration.md, "Shadow, canary and warn modes").
    fn warn_mode_denial(&mut self, hook: &Hook, status: Status) -> Judged {
        let message = status.message.as_deref().unwrap_or_default();
        self.records.warn(Some(vec![format!("{WARN_MODE_PREFIX}{message}")]));
        metrics::counter!(
            names::WARN_DENIALS,
            "webhook" => hook.name.clone(),
            "configuration" => hook.configuration.clone(),
        )
        .increment(1);
        Judged::warned(status)
    }
}
