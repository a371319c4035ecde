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
use super::call::{self, Attempt};
use super::object::ObjectState;
use super::Review;
use crate::config::compile::Hook;
use crate::config::mode::Mode;
use crate::explain::{Explanation, Phase, Step};
use crate::review::decode::IncomingReview;
use crate::review::{Operation, WebhookResponse};
use crate::telemetry::names;
use crate::traces::{CallEnd, Parent};
use crate::upstream::CallError;

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

/// How one matched webhook is run for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallMode {
    Enforce,
    /// A denial is returned as a warning.
    Warn,
    /// A canary webhook enforced for this request.
    Canary,
    /// Called off the critical path (mode shadow, or a canary not enforced this time).
    Shadow(ShadowMode),
}

impl CallMode {
    /// `hook`'s mode for `request`; a canary is enforced for a stable share of objects.
    pub(crate) fn of(hook: &Hook, request: &IncomingReview) -> Self {
        match hook.mode {
            Mode::Enforce => Self::Enforce,
            Mode::Warn => Self::Warn,
            Mode::Shadow => Self::Shadow(ShadowMode::Shadow),
            Mode::Canary(percent) if canary_bucket(&hook.configuration, request) < u64::from(percent) => {
                Self::Canary
            }
            Mode::Canary(_) => Self::Shadow(ShadowMode::Canary),
        }
    }

    /// The `mode` label of logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
            Self::Canary => "canary",
            Self::Shadow(mode) => mode.as_str(),
        }
    }
}

/// Why a webhook is called in shadow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShadowMode {
    Shadow,
    Canary,
}

impl ShadowMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Shadow => "shadow",
            Self::Canary => "canary",
        }
    }
}

/// The canary bucket, 0–99, of the request's object for one configuration: FNV-1a of the
/// configuration name and `namespace/name` (the request uid for a CREATE whose name the API
/// server has yet to generate), so the same object always lands on the same side.
pub(crate) fn canary_bucket(configuration: &str, request: &IncomingReview) -> u64 {
    let r = &request.request;
    let key = if r.name.is_empty() && request.operation() == Operation::Create {
        r.uid.value.clone()
    } else {
        format!("{}/{}", r.namespace, r.name)
    };
    let bytes = configuration.bytes().chain([0]).chain(key.bytes());
    bytes.fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
        % 100
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
    fn labels(self) -> (&'static str, &'static str) {
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

impl ShadowReport {
    /// Counts the result and logs a disagreement (names, uid, words and paths only).
    fn emit(&self, uid: &str) {
        let uid = crate::logging::Untrusted(uid);
        let (result, disagreement) = self.result.labels();
        metrics::counter!(
            names::SHADOW_RESULTS,
            "webhook" => self.hook.name.clone(),
            "configuration" => self.hook.configuration.clone(),
            "type" => match self.phase { Phase::Mutating => "admit", Phase::Validating => "validating" },
            "mode" => self.mode.as_str(),
            "result" => result,
            "disagreement" => disagreement,
        )
        .increment(1);
        match self.result {
            ShadowResult::Disagree(_) => tracing::info!(
                webhook = %self.hook.name,
                configuration = %self.hook.configuration,
                %uid,
                mode = self.mode.as_str(),
                result,
                kind = disagreement,
                paths = ?self.paths,
                "shadow webhook disagrees with the decision"
            ),
            ShadowResult::Error(reason) => tracing::debug!(
                webhook = %self.hook.name, %uid, mode = self.mode.as_str(), reason, "shadow webhook call failed"
            ),
            ShadowResult::Dropped => tracing::debug!(
                webhook = %self.hook.name, %uid, mode = self.mode.as_str(), "shadow call dropped: in-flight limit reached"
            ),
            ShadowResult::Agree => {}
        }
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
            report.emit(uid);
            return record(&mut review.explanation, &report, round);
        }
    }
    let Ok(permit) = hook.shadow_slots.clone().try_acquire_owned() else {
        let report = report(ShadowResult::Dropped, String::new());
        report.emit(uid);
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

/// What the shadow webhook said, before comparing.
enum Said {
    Allowed,
    Denied,
    /// A mutating webhook's patch would change the object: the paths it writes.
    Mutates(Vec<String>),
    Failed(&'static str),
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
        let (said, detail) = match &called.attempt {
            Attempt::Answered(response) if !response.allowed => {
                let status = super::verdict::rejection(&self.hook.name, response.status.as_ref());
                (Said::Denied, format!("denied: {}", status.message.unwrap_or_default()))
            }
            Attempt::Answered(response) if mutating => {
                let deadline = self.hook.timeout.map(|timeout| began + timeout);
                match would_mutate(response, self.object.as_deref(), self.object_limit, deadline).await {
                    Ok(Some(paths)) => {
                        (Said::Mutates(paths), "allowed, with a patch that changes the object".into())
                    }
                    Ok(None) => (Said::Allowed, "allowed, object unchanged".into()),
                    Err((reason, why)) => (Said::Failed(reason), why),
                }
            }
            Attempt::Answered(_) => (Said::Allowed, "allowed".into()),
            Attempt::CallError(error) => (Said::Failed(error.reason()), error.to_string()),
            Attempt::Refused(status) => {
                (Said::Failed("dry_run_refused"), status.message.clone().unwrap_or_default())
            }
            Attempt::OutOfBudget { .. } => (Said::Failed("budget_exhausted"), String::new()),
        };
        if let Some(span) = called.span.take() {
            let (outcome, error) = match said {
                Said::Allowed | Said::Mutates(_) => ("allowed", None),
                Said::Denied => ("denied", None),
                Said::Failed(reason) => ("error", Some(reason)),
            };
            let mode = self.mode.as_str();
            span.end(CallEnd { round: 0, mode, outcome, error, http_status: called.http_status });
        }
        let (result, paths) = match said {
            Said::Failed(reason) => (ShadowResult::Error(reason), Vec::new()),
            Said::Mutates(paths) => (ShadowResult::Disagree(Disagreement::Mutate), paths),
            // A mutating webhook that allows without changing anything has no say in the decision.
            Said::Allowed if mutating => (ShadowResult::Agree, Vec::new()),
            Said::Allowed | Said::Denied => {
                let denied = matches!(said, Said::Denied);
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
        report.emit(&self.request.request.uid);
        report
    }
}

/// Whether an allowing mutating webhook's patch would have changed `object`, judged as the
/// chain judges it (`mutate.rs`, §10.3): `Ok(Some(paths))` if it would. `Err`: a patch the
/// chain would have failed on, with its bounded reason and words.
async fn would_mutate(
    response: &WebhookResponse,
    object: Option<&RawValue>,
    object_limit: u64,
    deadline: Option<tokio::time::Instant>,
) -> Result<Option<Vec<String>>, (&'static str, String)> {
    let Some(bytes) = response.patch.as_deref().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let patch = super::mutate::decode_patch(bytes, deadline).await.map_err(|undecoded| match undecoded {
        super::mutate::Undecoded::Invalid(e) => {
            let error = CallError::UndecodablePatch(e);
            (error.reason(), error.to_string())
        }
        super::mutate::Undecoded::OutOfTime => ("patch_out_of_time", undecoded.to_string()),
    })?;
    if patch.is_empty() {
        return Ok(None);
    }
    let mut state = ObjectState::new(object, None).limited_to(object_limit);
    if state.is_null() {
        return Err(("patch_failed", "a patch for an operation without an object".into()));
    }
    if response.patch_type.as_deref() != Some("JSONPatch") {
        return Err(("unsupported_patch_type", "unsupported patch type".into()));
    }
    match state.apply(&patch, deadline).await {
        Ok(true) => Ok(Some(
            patch
                .written_paths()
                .into_iter()
                .take(MAX_PATHS)
                .map(|path| path.chars().take(MAX_PATH_LEN).collect())
                .collect(),
        )),
        Ok(false) => Ok(None),
        Err(error @ super::object::PatchError::OutOfTime { .. }) => {
            Err(("patch_out_of_time", error.to_string()))
        }
        Err(error) => Err(("patch_failed", error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(operation: &str, namespace: &str, name: &str, uid: &str) -> IncomingReview {
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid, "operation": operation, "namespace": namespace, "name": name,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "userInfo": {"username": "alice"},
            },
        });
        crate::review::decode::review(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn canary_buckets_are_stable_per_object_and_spread_over_objects() {
        let bucket = |configuration: &str, name: &str, uid: &str| {
            canary_bucket(configuration, &review("UPDATE", "default", name, uid))
        };
        // The same object lands in the same bucket whatever the request.
        assert_eq!(bucket("fleet", "web-1", "u1"), bucket("fleet", "web-1", "u2"));
        // A CREATE without a name (generateName) is placed by its uid.
        let unnamed = |uid: &str| canary_bucket("fleet", &review("CREATE", "default", "", uid));
        assert_eq!(unnamed("u1"), unnamed("u1"));
        let spread: std::collections::HashSet<u64> = (0..200).map(|i| unnamed(&format!("uid-{i}"))).collect();
        assert!(spread.len() > 50, "{spread:?}");
        // Over many objects, a quarter of the buckets are below 25.
        let below = (0..1000).filter(|i| bucket("fleet", &format!("web-{i}"), "u") < 25).count();
        assert!((180..=320).contains(&below), "{below}");
        // Another configuration splits the same objects differently.
        let differ = (0..100)
            .filter(|i| bucket("a", &format!("w{i}"), "u") != bucket("b", &format!("w{i}"), "u"))
            .count();
        assert!(differ > 50, "{differ}");
    }

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
        let result = would_mutate(&response(changing), Some(&object), 1 << 20, None).await;
        assert!(matches!(result, Err(("patch_failed", _))), "the test operation fails: {result:?}");
        let changing = r#"[{"op":"add","path":"/metadata/labels/b","value":"secret"}]"#;
        assert_eq!(
            would_mutate(&response(changing), Some(&object), 1 << 20, None).await,
            Ok(Some(vec!["/metadata/labels/b".to_owned()]))
        );
        let same = r#"[{"op":"replace","path":"/metadata/labels/a","value":"1"}]"#;
        assert_eq!(would_mutate(&response(same), Some(&object), 1 << 20, None).await, Ok(None));
        assert_eq!(would_mutate(&response("[]"), Some(&object), 1 << 20, None).await, Ok(None));
        assert!(matches!(
            would_mutate(&response("{"), Some(&object), 1 << 20, None).await,
            Err(("undecodable_patch", _))
        ));
        // maxPatchedObjectBytes, as the enforced chain applies it.
        let growing = format!(r#"[{{"op":"add","path":"/metadata/labels/b","value":"{}"}}]"#, "x".repeat(64));
        assert_eq!(
            would_mutate(&response(&growing), Some(&object), 1 << 20, None).await.map(|p| p.is_some()),
            Ok(true)
        );
        let result = would_mutate(&response(&growing), Some(&object), 64, None).await;
        assert!(
            matches!(&result, Err(("patch_failed", why)) if why.contains("maxPatchedObjectBytes")),
            "{result:?}"
        );
    }
}
