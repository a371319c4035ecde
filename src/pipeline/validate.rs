//! Stage 3: every matching validating webhook at once (dispatch-semantics §12).
//!
//! Runs on the object *after* the mutating chain. Matching is decided for every webhook
//! before any call; the answer waits for all calls. Any denial or fail-closed error fails the
//! request; where several do, all of them are named.

use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::call::{self, Attempt};
use super::matching;
use super::object::ObjectState;
use super::record::Records;
use super::verdict::{self, Judgement};
use crate::config::compile::Hook;
use crate::config::Snapshot;
use crate::review::decode::IncomingReview;
use crate::review::Status;
use crate::trace::{millis, Phase, Step, Trace};

pub async fn fan_out(
    snapshot: &Snapshot,
    review: &IncomingReview,
    object: &mut ObjectState<'_>,
    deadline: Option<Instant>,
    records: &mut Records,
    trace: &mut Trace,
) -> Result<(), Status> {
    if let Some(reason) = matching::exempt(review) {
        trace.record(|| Step::Exempt { phase: Phase::Validating, reason: reason.into() });
        return Ok(());
    }
    let resource = review.resource();
    let mut matched: Vec<&Hook> = Vec::new();
    // As in the mutating chain: every webhook when tracing, so the trace says why each was skipped.
    let candidates: Vec<&Arc<Hook>> = if trace.is_enabled() {
        snapshot.validating.iter().collect()
    } else {
        snapshot.validating_candidates(&resource.group, &resource.resource).collect()
    };
    for hook in candidates {
        match matching::should_call(hook, review, object, snapshot)? {
            None => matched.push(hook),
            Some(skip) => trace.record(|| Step::Skipped {
                phase: Phase::Validating,
                configuration: hook.configuration.clone(),
                webhook: hook.name.clone(),
                round: 0,
                reason: skip.to_string(),
            }),
        }
    }
    if matched.is_empty() {
        return Ok(());
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(verdict::timeout());
    }
    let object: Option<&RawValue> = object.raw();
    let calls = matched.iter().map(|hook| call::call(hook, review, object, deadline, false));
    let results = join_all(calls).await;

    let mut failures = Vec::new();
    // `k` is the position among the matching webhooks (§12.4).
    for (k, (hook, called)) in matched.iter().zip(results).enumerate() {
        let outcome = match called.attempt {
            Attempt::Refused(status) => {
                failures.push(status);
                "refused: dry run".to_owned()
            }
            Attempt::CallError(error) => {
                let outcome = match verdict::from_call_error(hook, &error) {
                    Judgement::FailedOpen => {
                        let key =
                            format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{k}");
                        records.annotate(key, hook.name.clone());
                        format!("failed open (failurePolicy Ignore): {error}")
                    }
                    Judgement::Fail(status) => {
                        failures.push(status);
                        format!("failed (failurePolicy Fail): {error}")
                    }
                    Judgement::Continue => "allowed".to_owned(),
                };
                tracing::warn!(webhook = %hook.name, reason = error.reason(), "validating webhook call {outcome}");
                outcome
            }
            Attempt::Answered(response) => {
                records.webhook_annotations(&hook.name, response.audit_annotations);
                records.warn(response.warnings);
                if response.allowed {
                    "allowed".to_owned()
                } else {
                    let status = verdict::rejection(&hook.name, response.status.as_ref());
                    let outcome = format!("denied: {}", status.message.as_deref().unwrap_or_default());
                    failures.push(status);
                    outcome
                }
            }
        };
        trace.record(|| match &called.timeout {
            Some(timeout) => Step::Called {
                phase: Phase::Validating,
                configuration: hook.configuration.clone(),
                webhook: hook.name.clone(),
                round: 0,
                timeout: timeout.clone(),
                latency_ms: millis(called.latency),
                outcome,
                patch: None,
                mutated: false,
            },
            None => Step::NotCalled {
                phase: Phase::Validating,
                configuration: hook.configuration.clone(),
                webhook: hook.name.clone(),
                round: 0,
                outcome,
            },
        });
    }
    match verdict::several(failures) {
        Some(status) => Err(status),
        None => Ok(()),
    }
}
