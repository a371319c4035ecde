//! Shadow and canary webhooks (docs/configuration.md, "Shadow, canary and warn modes"): called exactly as if
//! enforced — the same request, at the same place in the chain, with the webhook's own
//! timeout — but off the critical path. The answer never waits for them and never changes
//! because of them; once the review's decision is known, each outcome is compared with it and
//! reported as a metric (and a log line when they disagree).
//!
//! ```text
//! stage ─ matched, mode shadow (or canary, not enforced this time)
//!       ├─ no permit left (shadowInFlightLimit) ─▶ result "dropped"
//!       └─ spawn ─▶ call (own timeout) ─▶ judge ─▶ await the decision (oneshot) ─▶ compare ─▶ report
//! Review::finish ─▶ the decision to every spawned call
//! shutdown ─▶ every call in flight is cancelled
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::budget::Budget;
use super::call;
use super::context::Review;
use super::judge::{Failure, Verdict};
use super::modes::ShadowMode;
use super::object::ObjectState;
use super::observe;
use super::outcome::CallOutcome;
use super::patching::{self, PatchFailure};
use crate::config::compile::Hook;
use crate::explain::{Explanation, Phase, Step};
use crate::review::decode::IncomingReview;
use crate::review::WebhookResponse;
use crate::traces::Parent;

/// How long a finished shadow call waits for the review's decision: the review is bounded by
/// the caller's timeout (at most an hour, `budget.rs`), this by a few minutes more than any
/// webhook's own timeout.
const DECISION_WAIT: Duration = Duration::from_secs(300);
/// At most this many JSON Pointer paths are reported per disagreement, each cut to this length.
const MAX_PATHS: usize = 16;
const MAX_PATH_LEN: usize = 256;

/// What shadow calls share with the gateway: the shutdown signal that cancels them, and
/// whether their results are kept for the caller (the `review` command awaits them).
#[derive(Clone, Debug, Default)]
pub(crate) struct Shadows {
    /// Turns true on shutdown; `None`: never cancelled (one-off commands).
    stop: Option<watch::Receiver<bool>>,
    /// Keep each call's handle so the caller can await its result.
    collect: bool,
}

impl Shadows {
    /// Shadow calls of a server, cancelled when `stop` turns true.
    pub(crate) fn cancelled_by(stop: watch::Receiver<bool>) -> Self {
        Self { stop: Some(stop), collect: false }
    }

    /// Shadow calls of a one-off review, whose results are awaited and shown.
    pub(crate) fn awaited() -> Self {
        Self { stop: None, collect: true }
    }
}

/// The shadow calls one review started.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The request, copied once for all of the review's shadow calls.
    request: Option<Arc<IncomingReview>>,
    /// Where the review's decision goes, one per call.
    decisions: Vec<oneshot::Sender<bool>>,
    /// The calls, with their step in the explanation, when collected.
    handles: Vec<(Option<usize>, JoinHandle<Option<ShadowReport>>)>,
}

impl Pending {
    /// The review is decided: every shadow call may compare.
    pub(crate) fn decided(
        &mut self,
        allowed: bool,
    ) -> Vec<(Option<usize>, JoinHandle<Option<ShadowReport>>)> {
        for decision in self.decisions.drain(..) {
            let _ = decision.send(allowed);
        }
        std::mem::take(&mut self.handles)
    }
}

/// Shadow calls still running after the answer, for a caller that waits for them.
#[derive(Debug, Default)]
pub(crate) struct Running(pub(crate) Vec<(Option<usize>, JoinHandle<Option<ShadowReport>>)>);

impl Running {
    /// Waits for every call and writes its result into its step of `explanation`.
    pub(crate) async fn finish(self, explanation: &mut Explanation) {
        for (step, handle) in self.0 {
            let Ok(Some(report)) = handle.await else { continue };
            if let Some(Step::Shadow { outcome, .. }) = step.and_then(|i| explanation.steps.get_mut(i)) {
                *outcome = report.to_string();
            }
        }
    }
}

/// How a shadow call compared with the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShadowResult {
    Agree,
    Disagree(Disagreement),
    /// No usable answer (or not called); a bounded reason.
    Error(&'static str),
    /// Not called: the webhook had `shadowInFlightLimit` shadow calls in flight.
    Dropped,
}

/// What the shadow webhook would have done differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disagreement {
    /// It denied a request that was allowed.
    Deny,
    /// It allowed a request that was denied.
    Allow,
    /// Its patch would have changed the object.
    Mutate,
}

impl ShadowResult {
    /// The `result` and `disagreement` labels of its metric.
    pub(crate) fn labels(self) -> (&'static str, &'static str) {
        match self {
            Self::Agree => ("agree", ""),
            Self::Disagree(Disagreement::Deny) => ("disagree", "would_deny"),
            Self::Disagree(Disagreement::Allow) => ("disagree", "would_allow"),
            Self::Disagree(Disagreement::Mutate) => ("disagree", "would_mutate"),
            Self::Error(_) => ("error", ""),
            Self::Dropped => ("dropped", ""),
        }
    }
}

/// What one shadow call came to.
#[derive(Debug)]
pub(crate) struct ShadowReport {
    pub(crate) hook: Arc<Hook>,
    pub(crate) phase: Phase,
    pub(crate) mode: ShadowMode,
    pub(crate) result: ShadowResult,
    /// The JSON Pointer paths a would-be mutation writes (paths only, never values).
    pub(crate) paths: Vec<String>,
    /// What the webhook answered, for the explanation only (never logged).
    detail: String,
}

impl fmt::Display for ShadowReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (result, kind) = self.result.labels();
        write!(f, "{} {result}", self.mode.as_str())?;
        if !kind.is_empty() {
            write!(f, " ({kind})")?;
        }
        if let ShadowResult::Error(reason) = self.result {
            write!(f, " ({reason})")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        if !self.paths.is_empty() {
            write!(f, "; paths written: {}", self.paths.join(", "))?;
        }
        Ok(())
    }
}

/// Starts `hook`'s shadow call at this point of the review: matched as if enforced (a
/// matching error only makes the shadow result an error), then spawned with the object as it
/// stands, unless the webhook has no permit left.
pub(crate) async fn start(
    review: &mut Review<'_>,
    hook: &Arc<Hook>,
    phase: Phase,
    round: u8,
    mode: ShadowMode,
) {
    let uid = &review.request.request.uid;
    let report = |result, detail: String| ShadowReport {
        hook: hook.clone(),
        phase,
        mode,
        result,
        paths: Vec::new(),
        detail,
    };
    match review.decide(hook, phase).await {
        Ok(None) => {}
        Ok(Some(skip)) => return review.skipped(hook, phase, round, &skip),
        Err(status) => {
            let report = report(ShadowResult::Error("match_error"), status.message.unwrap_or_default());
            observe::shadow(&report, uid);
            return record(&mut review.explanation, &report, round);
        }
    }
    let Ok(permit) = hook.shadow_slots.clone().try_acquire_owned() else {
        let report = report(ShadowResult::Dropped, String::new());
        observe::shadow(&report, uid);
        return record(&mut review.explanation, &report, round);
    };
    let request = review.shadow.request.get_or_insert_with(|| Arc::new(review.request.clone())).clone();
    let object: Option<Box<RawValue>> = review.object.raw().map(ToOwned::to_owned);
    let (decision, decided) = oneshot::channel();
    review.shadow.decisions.push(decision);
    let step = review.explanation.is_enabled().then(|| {
        review.explanation.record(|| Step::Shadow {
            phase,
            configuration: hook.configuration.clone(),
            webhook: hook.name.clone(),
            round,
            mode: mode.as_str(),
            outcome: "called off the critical path; the answer does not wait for it".into(),
        });
        review.explanation.steps.len() - 1
    });
    let call = ShadowCall {
        hook: hook.clone(),
        phase,
        mode,
        request,
        object,
        // The webhook's own timeout, never the caller's deadline budget.
        budget: Budget::unlimited(&review.snapshot.settings),
        object_limit: review.snapshot.settings.max_patched_object_bytes,
        decided,
        trace: review.trace.clone(),
    };
    let stop = review.shadows.stop.clone();
    let handle = tokio::spawn(async move {
        let _permit = permit;
        tokio::select! {
            report = call.run() => Some(report),
            () = stopped(stop) => None,
        }
    });
    if review.shadows.collect {
        review.shadow.handles.push((step, handle));
    }
}

/// A shadow result known without a call, in the explanation.
fn record(explanation: &mut Explanation, report: &ShadowReport, round: u8) {
    explanation.record(|| Step::Shadow {
        phase: report.phase,
        configuration: report.hook.configuration.clone(),
        webhook: report.hook.name.clone(),
        round,
        mode: report.mode.as_str(),
        outcome: report.to_string(),
    });
}

/// Resolves when the gateway shuts down; never without a signal.
async fn stopped(stop: Option<watch::Receiver<bool>>) {
    match stop {
        Some(mut stop) => {
            if stop.wait_for(|stop| *stop).await.is_ok() {
                return;
            }
            // The gateway is gone without a signal: the call's own timeout bounds it.
            std::future::pending::<()>().await
        }
        None => std::future::pending::<()>().await,
    }
}

/// One spawned shadow call, owning all it needs.
struct ShadowCall {
    hook: Arc<Hook>,
    phase: Phase,
    mode: ShadowMode,
    request: Arc<IncomingReview>,
    object: Option<Box<RawValue>>,
    budget: Budget,
    /// `maxPatchedObjectBytes`, for judging the patch as the enforced chain would.
    object_limit: u64,
    decided: oneshot::Receiver<bool>,
    /// The review's span: the call's span is its child even if it ends after it.
    trace: Parent,
}

impl ShadowCall {
    async fn run(self) -> ShadowReport {
        let mutating = self.phase == Phase::Mutating;
        let began = tokio::time::Instant::now();
        let mut called = call::call(
            &self.hook,
            &self.request,
            &self.budget,
            self.object.as_deref(),
            mutating,
            &self.trace,
        )
        .await;
        let (said, mutates, detail) = match called.attempt.verdict(&self.hook) {
            Verdict::Denied(_, status) => {
                let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
                (
                    CallOutcome::Denied { code },
                    None,
                    format!("denied: {}", status.message.unwrap_or_default()),
                )
            }
            Verdict::Allowed(response) if mutating => {
                let deadline = self.hook.timeout.map(|timeout| began + timeout);
                match would_mutate(
                    &self.hook.name,
                    response,
                    self.object.as_deref(),
                    self.object_limit,
                    deadline,
                )
                .await
                {
                    Ok(Some(paths)) => (
                        CallOutcome::Allowed { mutated: true },
                        Some(paths),
                        "allowed, with a patch that changes the object".into(),
                    ),
                    Ok(None) => {
                        (CallOutcome::Allowed { mutated: false }, None, "allowed, object unchanged".into())
                    }
                    Err(failure) => (failed(&failure), None, failure.to_string()),
                }
            }
            Verdict::Allowed(_) => (CallOutcome::Allowed { mutated: false }, None, "allowed".into()),
            Verdict::Failed(cause) => (failed(cause), None, cause.to_string()),
            Verdict::OutOfBudget(cause) => (failed(cause), None, String::new()),
            Verdict::Refused(status) => {
                (CallOutcome::DryRunRefused, None, status.message.clone().unwrap_or_default())
            }
        };
        observe::shadow_call_ended(called.span.take(), &said, self.mode, called.http_status);
        let (result, paths) = match (said, mutates) {
            (CallOutcome::Error { reason, .. }, _) => (ShadowResult::Error(reason), Vec::new()),
            (CallOutcome::DryRunRefused, _) => (ShadowResult::Error("dry_run_refused"), Vec::new()),
            (_, Some(paths)) => (ShadowResult::Disagree(Disagreement::Mutate), paths),
            // A mutating webhook that allows without changing anything has no say in the decision.
            (CallOutcome::Allowed { .. }, None) if mutating => (ShadowResult::Agree, Vec::new()),
            (said, None) => {
                let denied = matches!(said, CallOutcome::Denied { .. });
                match tokio::time::timeout(DECISION_WAIT, self.decided).await {
                    Ok(Ok(allowed)) if allowed != denied => (ShadowResult::Agree, Vec::new()),
                    Ok(Ok(_)) if denied => (ShadowResult::Disagree(Disagreement::Deny), Vec::new()),
                    Ok(Ok(_)) => (ShadowResult::Disagree(Disagreement::Allow), Vec::new()),
                    // The review ended without a decision (its caller went away).
                    Ok(Err(_)) | Err(_) => (ShadowResult::Error("no_decision"), Vec::new()),
                }
            }
        };
        let report =
            ShadowReport { hook: self.hook, phase: self.phase, mode: self.mode, result, paths, detail };
        observe::shadow(&report, &self.request.request.uid);
        report
    }
}

/// A shadow call's failure as a call outcome: never failed open, as it decides nothing.
fn failed(cause: &dyn Failure) -> CallOutcome {
    CallOutcome::Error { reason: cause.reason(), code: cause.code(), failed_open: false }
}

/// Whether an allowing mutating webhook's patch would have changed `object`, judged by the
/// chain's own patch check (`patching.rs`): `Ok(Some(paths))` if it would. `Err`: a patch
/// the chain would have failed on.
async fn would_mutate(
    webhook: &str,
    response: &WebhookResponse,
    object: Option<&RawValue>,
    object_limit: u64,
    deadline: Option<tokio::time::Instant>,
) -> Result<Option<Vec<String>>, PatchFailure> {
    let mut state = ObjectState::new(object, None).limited_to(object_limit);
    match patching::apply(webhook, response, &mut state, deadline).await? {
        Some((patch, true)) => Ok(Some(
            patch
                .written_paths()
                .into_iter()
                .take(MAX_PATHS)
                .map(|path| path.chars().take(MAX_PATH_LEN).collect())
                .collect(),
        )),
        Some((_, false)) | None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_would_be_mutation_is_judged_as_the_chain_judges_it() {
        let object = RawValue::from_string(r#"{"metadata":{"labels":{"a":"1"}}}"#.into()).unwrap();
        let response = |patch: &str| WebhookResponse {
            allowed: true,
            patch: Some(patch.as_bytes().to_vec()),
            patch_type: Some("JSONPatch".into()),
            ..WebhookResponse::default()
        };
        let changing = r#"[{"op":"add","path":"/metadata/labels/b","value":"secret"},{"op":"test","path":"/metadata","value":{}}]"#;
        let result = would_mutate("shadow", &response(changing), Some(&object), 1 << 20, None).await;
        assert!(matches!(result, Err(PatchFailure::Internal(_))), "the test operation fails: {result:?}");
        let changing = r#"[{"op":"add","path":"/metadata/labels/b","value":"secret"}]"#;
        assert_eq!(
            would_mutate("shadow", &response(changing), Some(&object), 1 << 20, None).await.unwrap(),
            Some(vec!["/metadata/labels/b".to_owned()])
        );
        let same = r#"[{"op":"replace","path":"/metadata/labels/a","value":"1"}]"#;
        assert_eq!(
            would_mutate("shadow", &response(same), Some(&object), 1 << 20, None).await.unwrap(),
            None
        );
        assert_eq!(
            would_mutate("shadow", &response("[]"), Some(&object), 1 << 20, None).await.unwrap(),
            None
        );
        let undecodable = would_mutate("shadow", &response("{"), Some(&object), 1 << 20, None).await;
        assert_eq!(undecodable.unwrap_err().reason(), "undecodable_patch");
        let yaml = WebhookResponse { patch_type: Some("JSONMergePatch".into()), ..response(changing) };
        let unsupported = would_mutate("shadow", &yaml, Some(&object), 1 << 20, None).await;
        assert_eq!(unsupported.unwrap_err().reason(), "unsupported_patch_type");
        let no_object = would_mutate("shadow", &response(changing), None, 1 << 20, None).await;
        assert!(matches!(no_object, Err(PatchFailure::Internal(_))), "{no_object:?}");
        // maxPatchedObjectBytes, as the enforced chain applies it.
        let growing = format!(r#"[{{"op":"add","path":"/metadata/labels/b","value":"{}"}}]"#, "x".repeat(64));
        assert!(would_mutate("shadow", &response(&growing), Some(&object), 1 << 20, None)
            .await
            .unwrap()
            .is_some());
        let result = would_mutate("shadow", &response(&growing), Some(&object), 64, None).await;
        assert!(
            matches!(&result, Err(failure @ PatchFailure::Internal(_)) if failure.to_string().contains("maxPatchedObjectBytes")),
            "{result:?}"
        );
    }
}
