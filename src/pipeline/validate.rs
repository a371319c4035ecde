//! Stage 3: every matching validating webhook at once (docs/semantics.md §12).
//!
//! Runs on the object *after* the mutating chain. Matching is decided for every webhook
//! before any call; the answer waits for all calls. Any denial or fail-closed error fails the
//! request; where several do, all of them are named.

use std::sync::Arc;

use futures_util::future::join_all;

use super::call;
use super::context::Review;
use super::judge::Turn;
use super::matching;
use super::modes::CallMode;
use super::shadow;
use super::verdict::{self, Judgement};
use crate::config::compile::Hook;
use crate::explain::{Phase, Step};
use crate::review::Status;

const PHASE: Phase = Phase::Validating;

pub(crate) async fn fan_out(review: &mut Review<'_>) -> Result<(), Status> {
    if let Some(reason) = matching::exempt::from_webhooks(review.request) {
        review.explanation.record(|| Step::Exempt { phase: PHASE, reason: reason.into() });
        return Ok(());
    }
    let candidates = review.candidates(PHASE);
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
        let turn = Turn { phase: PHASE, round: 0, index };
        if let (Judgement::Fail(status), _) = review.judge(hook, turn, &mut called).await {
            failures.push(status);
        }
    }
    match verdict::several(failures) {
        Some(status) => Err(status),
        None => Ok(()),
    }
}
