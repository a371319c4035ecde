//! One webhook call as both dispatchers make it: the dry-run checks (§5), the request in the
//! webhook's AdmissionReview version with a fresh uid (§6), and its deadline (§7.3), taken
//! from the review's deadline budget (`budget.rs`).

use std::time::Duration;

use serde_json::value::RawValue;
use tokio::time::Instant;

use super::budget::{Budget, Grant};
use super::judge::BudgetExhausted;
use super::{observe, verdict};
use crate::config::compile::{Hook, SideEffects};
use crate::review::decode::IncomingReview;
use crate::review::{Status, WebhookResponse};
use crate::traces::{CallSpan, Parent};
use crate::upstream::breaker::Transition;
use crate::upstream::{self, CallError, Sent, CLIENT_TIMEOUT};

/// What became of one attempt to call a webhook.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// A valid answer (allowed or not).
    Answered(WebhookResponse),
    /// No usable answer: judged by `failurePolicy`.
    CallError(CallError),
    /// Refused before calling, whatever the `failurePolicy` (dry run with side effects).
    Refused(Status),
    /// Not called: the deadline budget could not cover it. Judged by `failurePolicy`.
    OutOfBudget(BudgetExhausted),
}

/// An attempt with what the trace shows of it.
#[derive(Debug)]
pub(crate) struct Called {
    pub(crate) attempt: Attempt,
    /// The `timeout` query sent, if a request was sent.
    pub(crate) timeout: Option<String>,
    pub(crate) latency: Duration,
    /// The webhook's HTTP status, if it answered.
    pub(crate) http_status: Option<u16>,
    /// The call's client span, when tracing: ended by whoever judges the call.
    pub(crate) span: Option<CallSpan>,
}

/// Calls `hook` with `object` (the current one, for a mutating webhook the object as patched
/// so far) within what `budget` grants; a client span under `trace` when tracing.
pub(crate) async fn call(
    hook: &Hook,
    review: &IncomingReview,
    budget: &Budget,
    object: Option<&RawValue>,
    mutating: bool,
    trace: &Parent,
) -> Called {
    let start = Instant::now();
    let not_sent =
        |attempt| Called { attempt, timeout: None, latency: Duration::ZERO, http_status: None, span: None };
    // Matched only in another version, which the gateway cannot convert to (§4.2).
    if let Some(error) = super::matching::not_convertible(hook, review) {
        return not_sent(Attempt::CallError(error));
    }
    if review.dry_run() {
        match hook.side_effects {
            SideEffects::Unset => return not_sent(Attempt::CallError(CallError::SideEffectsNil)),
            SideEffects::Some => return not_sent(Attempt::Refused(verdict::dry_run_unsupported(&hook.name))),
            SideEffects::None | SideEffects::NoneOnDryRun => {}
        }
    }
    let Some(version) = hook.review_version else {
        return not_sent(Attempt::CallError(CallError::NoKnownReviewVersion));
    };
    let client = match &hook.client {
        Ok(client) => client,
        Err(message) => return not_sent(Attempt::CallError(CallError::NoClient(message.clone()))),
    };
    // An ejected webhook fails at once with its last real error (`upstream/breaker.rs`).
    let permit = match hook.breaker.admit(hook.breaker_policy) {
        Ok(permit) => permit,
        Err(ejected) => return not_sent(Attempt::CallError(ejected)),
    };
    let uid = fresh_uid();
    let deadline = match budget.grant(hook.timeout, start) {
        Grant::Until(deadline) => deadline,
        Grant::Exhausted { left } => {
            return not_sent(Attempt::OutOfBudget(BudgetExhausted { left, minimum: budget.minimum_call() }))
        }
    };
    let timeout =
        upstream::timeout_param(deadline.map_or(CLIENT_TIMEOUT, |d| d.saturating_duration_since(start)));
    let span = trace.call(hook);
    let sent = Sent { uid: &uid, version, mutating, trace: span.as_ref().map(CallSpan::headers) };
    let _in_flight = observe::InFlight::enter(&hook.name);
    let encode = || review.request_body(version, &uid, object);
    let (http_status, result) = client.call(&hook.url, &timeout, encode, deadline, &sent).await;
    let attempt = match result {
        Ok(response) => Attempt::Answered(response),
        Err(error) => Attempt::CallError(error),
    };
    let failure = match &attempt {
        Attempt::CallError(error) => Some(error),
        _ => None,
    };
    match permit.done(hook.breaker_policy, failure) {
        Transition::None => {}
        Transition::Ejected => observe::ejected(hook, failure),
        Transition::Closed => observe::back(hook),
    }
    Called { attempt, timeout: Some(timeout), latency: start.elapsed(), http_status, span }
}

/// A fresh version-4 uid for one call: the API server gives every webhook call its own
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`).
/// The random bytes come from the operating system, as `Uuid::new_v4` takes them, but 256
/// uids' worth per `getrandom` call instead of one call each: a syscall per webhook call
/// showed in the load tests' profiles.
fn fresh_uid() -> String {
    const BATCH: usize = 256 * 16;
    thread_local! {
        static RANDOM: std::cell::RefCell<([u8; BATCH], usize)> = const { std::cell::RefCell::new(([0; BATCH], BATCH)) };
    }
    let bytes = RANDOM.with_borrow_mut(|(pool, used)| {
        if *used == BATCH {
            getrandom::fill(pool).ok()?;
            *used = 0;
        }
        let taken = &mut pool[*used..*used + 16];
        let mut bytes = [0; 16];
        bytes.copy_from_slice(taken);
        // Used bytes are not kept.
        taken.fill(0);
        *used += 16;
        Some(bytes)
    });
    match bytes {
        Some(bytes) => uuid::Builder::from_random_bytes(bytes).into_uuid(),
        None => uuid::Uuid::new_v4(),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_gets_its_own_version_4_uid_across_batches() {
        // Three batches' worth, so the refill is crossed twice.
        let uids: Vec<String> = (0..3 * 256 + 7).map(|_| fresh_uid()).collect();
        let distinct: std::collections::HashSet<&String> = uids.iter().collect();
        assert_eq!(distinct.len(), uids.len());
        for uid in &uids {
            let parsed = uuid::Uuid::parse_str(uid).unwrap();
            assert_eq!(parsed.get_version(), Some(uuid::Version::Random), "{uid}");
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{uid}");
            assert_eq!(uid.len(), 36, "{uid}");
        }
    }
}
