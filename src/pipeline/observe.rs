//! The observer: every metric, log line and span end of one webhook call and of one review,
//! in one place. The pipeline produces records (a [`CallRecord`] per matched webhook, a
//! [`ShadowReport`] per shadow call, an [`Outcome`] per review); this file turns them into
//! kube-apiserver's own webhook metrics under their exact names and labels (docs/semantics.md
//! §15.1; upstream staging/src/k8s.io/apiserver/pkg/admission/metrics/metrics.go), the
//! gateway's own families, the review's log line and the calls' spans. A new kind of
//! validator produces the same records and is observed here, unchanged.
//!
//! Labels are bounded: webhook names, fixed words, codes; never a namespace, object name, uid,
//! user or error text. Metric names come from `telemetry::names`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use super::judge::Failure;
use super::matching::NamespaceLabels;
use super::modes::{CallMode, ShadowMode};
use super::outcome::{CallOutcome, CallRecord, CallRecords, Caller, Outcome};
use super::shadow::{ShadowReport, ShadowResult};
use crate::config::compile::Hook;
use crate::endpoint::Endpoint;
use crate::explain::Phase;
use crate::logging::{ReviewAnswered, Untrusted};
use crate::recording;
use crate::review::decode::IncomingReview;
use crate::telemetry::names;
use crate::traces::{CallEnd, CallSpan};
use crate::upstream::CallError;

mod policies;
pub(crate) use policies::{mutating_policy_evaluated, policy_evaluated, policy_paired, policy_shadow};

/// `type` of the API server's webhook metrics.
fn webhook_type(phase: Phase) -> &'static str {
    match phase {
        Phase::Mutating => "admit",
        Phase::Validating => "validating",
    }
}

/// One answered review: its webhooks' metrics, the review's counters, and its log line.
/// `elapsed` is the review's whole time in the gateway, from the request received to the
/// answer encoded.
pub(crate) fn answered(outcome: &Outcome, review: &IncomingReview, endpoint: Endpoint, elapsed: Duration) {
    let operation = review.operation().as_str();
    let in_gateway = calls(outcome, operation, elapsed);
    let answer = &outcome.answer;
    REVIEW_COUNTERS.with(|counters| counters.count(endpoint, outcome));
    let request = &review.request;
    let resource = review.resource();
    // The review's one line (`logging/answered.rs`): request values through `Untrusted`, never
    // an object.
    ReviewAnswered {
        uid: &request.uid,
        stage: endpoint.as_str(),
        operation,
        group: &resource.group,
        version: &resource.version,
        resource: &resource.resource,
        subresource: &request.sub_resource,
        namespace: &request.namespace,
        name: &request.name,
        allowed: answer.allowed,
        code: answer.status.as_ref().and_then(|s| s.code).unwrap_or(200),
        mutated: answer.patch.is_some(),
        total: elapsed,
        gateway: in_gateway,
        webhooks: &CallRecords(&outcome.calls),
    }
    .log();
}

/// The review as the recording keeps it (`recording.rs`): `request` is its body as received.
pub(crate) fn recorded(
    outcome: &Outcome,
    review: &IncomingReview,
    endpoint: Endpoint,
    request: bytes::Bytes,
    timeout: Option<Duration>,
) -> recording::Entry {
    let answer = &outcome.answer;
    let status = answer.status.as_ref();
    let webhooks = outcome.calls.iter().map(|call| {
        let (words, reason) = call.outcome.words();
        recording::Webhook {
            configuration: call.caller.configuration().to_owned(),
            name: call.caller.name().to_owned(),
            kind: matches!(call.caller, Caller::Policy(_)).then_some("policy"),
            phase: call.phase.as_str(),
            round: call.round,
            outcome: words,
            reason,
            code: call.code(),
            mutated: matches!(call.outcome, CallOutcome::Allowed { mutated: true }),
            mode: call.mode.as_str(),
            latency_micros: u64::try_from(call.latency.as_micros()).unwrap_or(u64::MAX),
        }
    });
    recording::Entry {
        time: std::time::SystemTime::now(),
        endpoint: endpoint.as_str(),
        request,
        answer: recording::Answer {
            allowed: answer.allowed,
            code: status.and_then(|s| s.code).unwrap_or(200),
            message: status.and_then(|s| s.message.clone()),
            warnings: answer.warnings.clone(),
            audit_annotations: answer.audit_annotations.clone(),
            patch: None,
            patch_text: answer.patch.clone(),
        },
        webhooks: webhooks.collect(),
        world: recording::World {
            namespace: recorded_namespace(&review.request.namespace, &outcome.namespace),
            timeout,
        },
    }
}

/// The namespace named `name` as the review looked it up, as the recording keeps it; `None`
/// when nothing needed it.
fn recorded_namespace(name: &str, looked_up: &NamespaceLabels) -> Option<recording::Namespace> {
    let mut namespace =
        recording::Namespace { name: name.to_owned(), labels: None, not_found: None, unavailable: None };
    match looked_up {
        NamespaceLabels::NotNeeded => return None,
        NamespaceLabels::Found(labels) => namespace.labels = Some(labels.as_ref().clone()),
        NamespaceLabels::Missing { live: true } => namespace.not_found = Some(recording::NotFound::Cluster),
        NamespaceLabels::Missing { live: false } => {
            namespace.not_found = Some(recording::NotFound::Configuration)
        }
        NamespaceLabels::Unavailable(error) => namespace.unavailable = Some(error.clone()),
    }
    Some(namespace)
}

/// Records every webhook of one answered review; returns the gateway's own share of `elapsed`.
fn calls(outcome: &Outcome, operation: &'static str, elapsed: Duration) -> Duration {
    let (mut sequential, mut concurrent) = (Duration::ZERO, Duration::ZERO);
    for call in &outcome.calls {
        // A policy's families are observed when it is judged (`observe/policies.rs`); its
        // evaluation is the gateway's own time.
        let Caller::Webhook(hook) = &call.caller else { continue };
        let name = &hook.name;
        let kind = webhook_type(call.phase);
        let rejected = call.rejected();
        // The API server observes every call attempt, those refused before sending included
        // (latency ~0): a dry run refused for side effects is its internal-error path, code 0.
        let (code, error_type) = match call.outcome {
            CallOutcome::DryRunRefused | CallOutcome::Error { code: 0, .. } => (0, names::INTERNAL_ERRORS),
            CallOutcome::Error { .. } => (call.code(), "calling_webhook_error"),
            CallOutcome::Allowed { .. } | CallOutcome::Denied { .. } => (call.code(), "no_error"),
        };
        let result = call.sent.then_some(call.outcome.words().0);
        let series = CallSeries { kind, operation, rejected, code, result };
        with_call_handles(name, series, |handles| {
            handles.duration.record(call.latency.as_secs_f64());
            handles.requests.increment(1);
            if let Some(gateway) = &handles.gateway {
                gateway.record(call.latency.as_secs_f64());
            }
        });
        if call.sent {
            match call.phase {
                Phase::Mutating => sequential += call.latency,
                Phase::Validating => concurrent = concurrent.max(call.latency),
            }
        }
        if rejected {
            metrics::counter!(names::WEBHOOK_REJECTIONS,
                "name" => name.clone(), "type" => kind, "operation" => operation,
                "error_type" => error_type, "rejection_code" => code.to_string())
            .increment(1);
        }
        match (&call.outcome, call.mode) {
            (CallOutcome::Error { failed_open: true, .. }, _) => {
                metrics::counter!(names::WEBHOOK_FAIL_OPEN, "name" => name.clone(), "type" => kind)
                    .increment(1)
            }
            // A warn-mode denial returned as a warning (docs/configuration.md, "Shadow,
            // canary and warn modes").
            (CallOutcome::Denied { .. }, CallMode::Warn) => metrics::counter!(
                names::WARN_DENIALS,
                "webhook" => name.clone(),
                "configuration" => hook.configuration.clone(),
            )
            .increment(1),
            _ => {}
        }
    }
    // The gateway's own share: the whole review less the time spent waiting for webhooks (the
    // mutating chain's calls one after another, the validating ones side by side).
    let in_gateway = elapsed.saturating_sub(sequential + concurrent);
    GATEWAY_SECONDS.with(|histogram| histogram.record(in_gateway.as_secs_f64()));
    in_gateway
}

/// Ends an enforced call's span as its record says.
pub(crate) fn call_ended(span: Option<CallSpan>, record: &CallRecord, http_status: Option<u16>) {
    if let Some(span) = span {
        let (outcome, error) = record.outcome.words();
        span.end(CallEnd { round: record.round, mode: record.mode.as_str(), outcome, error, http_status });
    }
}

/// Ends a shadow call's span (round 0: shadow calls are never reinvoked).
pub(crate) fn shadow_call_ended(
    span: Option<CallSpan>,
    outcome: &CallOutcome,
    mode: ShadowMode,
    http_status: Option<u16>,
) {
    if let Some(span) = span {
        let (outcome, error) = outcome.words();
        span.end(CallEnd { round: 0, mode: mode.as_str(), outcome, error, http_status });
    }
}

/// A webhook that gave no usable answer, judged (`words`): logged with the error's text
/// escaped and cut, as it comes from the network or the webhook. An ejected webhook's calls
/// are at debug: its ejection was logged once at warn.
pub(crate) fn call_failed(hook: &Hook, phase: Phase, cause: &dyn Failure, words: &str) {
    let logged = Untrusted(words);
    let (phase, reason) = (phase.as_str(), cause.reason());
    if cause.reported_before() {
        tracing::debug!(webhook = %hook.name, phase, reason, "webhook call {logged}");
    } else {
        tracing::warn!(webhook = %hook.name, phase, reason, "webhook call {logged}");
    }
}

/// A webhook ejected after consecutive unanswered calls (`upstream/breaker.rs`).
pub(crate) fn ejected(hook: &Hook, failure: Option<&CallError>) {
    metrics::counter!(names::WEBHOOK_EJECTIONS, "webhook" => hook.name.clone()).increment(1);
    tracing::warn!(
        webhook = %hook.name,
        configuration = %hook.configuration,
        reason = failure.map_or("", |e| e.reason()),
        eject_for_ms = hook.breaker_policy.eject_for.as_millis() as u64,
        "webhook ejected: failing fast by its failurePolicy until a probe gets an answer"
    );
}

/// An ejected webhook's probe got an answer.
pub(crate) fn back(hook: &Hook) {
    tracing::info!(webhook = %hook.name, configuration = %hook.configuration, "webhook back: the probe got an answer");
}

/// A shadow call's result: counted, and a disagreement logged (names, uid, words and paths
/// only).
pub(crate) fn shadow(report: &ShadowReport, uid: &str) {
    let uid = Untrusted(uid);
    let (result, disagreement) = report.result.labels();
    let hook = &report.hook;
    let mode = report.mode.as_str();
    metrics::counter!(
        names::SHADOW_RESULTS,
        "webhook" => hook.name.clone(),
        "configuration" => hook.configuration.clone(),
        "type" => webhook_type(report.phase),
        "mode" => mode,
        "result" => result,
        "disagreement" => disagreement,
    )
    .increment(1);
    match report.result {
        ShadowResult::Disagree(_) => tracing::info!(
            webhook = %hook.name,
            configuration = %hook.configuration,
            %uid,
            mode,
            result,
            kind = disagreement,
            paths = ?report.paths,
            "shadow webhook disagrees with the decision"
        ),
        ShadowResult::Error(reason) => {
            tracing::debug!(webhook = %hook.name, %uid, mode, reason, "shadow webhook call failed")
        }
        ShadowResult::Dropped => {
            tracing::debug!(webhook = %hook.name, %uid, mode, "shadow call dropped: in-flight limit reached")
        }
        ShadowResult::Agree => {}
    }
}

/// `admission_gateway_webhook_in_flight{webhook}`: calls sent and not yet answered, held by a
/// guard so a call dropped half-way (its review abandoned) is taken off as well.
pub(crate) struct InFlight(metrics::Gauge);

impl InFlight {
    pub(crate) fn enter(webhook: &str) -> Self {
        let gauge = crate::telemetry::in_flight(webhook);
        gauge.increment(1.0);
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Counts a review whose caller went away before the answer: hyper drops the request's
/// future when the connection closes, and with it this guard, still armed. The answer path
/// disarms it with [`Abandoned::answered`].
pub(crate) struct Abandoned {
    armed: bool,
}

impl Abandoned {
    pub(crate) fn armed() -> Self {
        Abandoned { armed: true }
    }

    pub(crate) fn answered(mut self) {
        self.armed = false;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.armed {
            metrics::counter!(names::REVIEWS_ABANDONED).increment(1);
        }
    }
}

/// The labels, besides the webhook's name, of the series one call is counted in.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CallSeries {
    kind: &'static str,
    operation: &'static str,
    rejected: bool,
    code: u16,
    /// `outcome` of the gateway's own latency histogram; `None`: not sent, not observed there.
    result: Option<&'static str>,
}

/// The handles of one [`CallSeries`].
struct CallHandles {
    duration: metrics::Histogram,
    requests: metrics::Counter,
    gateway: Option<metrics::Histogram>,
}

impl CallHandles {
    fn register(name: &str, series: CallSeries) -> Self {
        let CallSeries { kind, operation, rejected, code, result } = series;
        let rejected = if rejected { "true" } else { "false" };
        CallHandles {
            duration: metrics::histogram!(names::WEBHOOK_ADMISSION_DURATION,
                "name" => name.to_owned(), "type" => kind, "operation" => operation, "rejected" => rejected),
            requests: metrics::counter!(names::WEBHOOK_REQUESTS,
                "name" => name.to_owned(), "type" => kind, "operation" => operation,
                "code" => code.to_string(), "rejected" => rejected),
            gateway: result.map(|result| {
                metrics::histogram!(names::WEBHOOK_DURATION,
                    "webhook" => name.to_owned(), "type" => kind, "outcome" => result)
            }),
        }
    }
}

/// The review counters of one serving thread, by endpoint: every review counts in them.
struct ReviewCounters {
    /// `admission_gateway_reviews_total`, denied then allowed.
    reviews: [[metrics::Counter; 2]; 3],
    failed_open: [metrics::Counter; 3],
    budget_exhausted: [metrics::Counter; 3],
}

impl ReviewCounters {
    fn new() -> Self {
        crate::telemetry::recorder();
        let by_endpoint = |name: &'static str| {
            Endpoint::ALL.map(|endpoint| metrics::counter!(name, "stage" => endpoint.as_str()))
        };
        ReviewCounters {
            reviews: Endpoint::ALL.map(|endpoint| {
                [false, true].map(|allowed| {
                    metrics::counter!(names::REVIEWS,
                        "stage" => endpoint.as_str(), "allowed" => if allowed { "true" } else { "false" })
                })
            }),
            failed_open: by_endpoint(names::WEBHOOK_FAILED_OPEN),
            budget_exhausted: by_endpoint(names::WEBHOOK_BUDGET_EXHAUSTED),
        }
    }

    fn count(&self, endpoint: Endpoint, outcome: &Outcome) {
        let at = endpoint as usize;
        self.reviews[at][usize::from(outcome.answer.allowed)].increment(1);
        if outcome.failed_open > 0 {
            self.failed_open[at].increment(u64::from(outcome.failed_open));
        }
        if outcome.budget_exhausted > 0 {
            self.budget_exhausted[at].increment(u64::from(outcome.budget_exhausted));
        }
    }
}

thread_local! {
    /// The handles of the series this thread has counted calls in, by webhook name. Asking
    /// the recorder builds a key (its labels allocated) and looks it up in a shared map on
    /// every call; the handles stay valid, as the recorder never forgets a series.
    static CALL_HANDLES: RefCell<HashMap<String, Vec<(CallSeries, CallHandles)>>> =
        RefCell::new(HashMap::new());
    static GATEWAY_SECONDS: metrics::Histogram = {
        crate::telemetry::recorder();
        metrics::histogram!(names::REVIEW_GATEWAY_DURATION)
    };
    static REVIEW_COUNTERS: ReviewCounters = ReviewCounters::new();
}

fn with_call_handles(name: &str, series: CallSeries, count: impl FnOnce(&CallHandles)) {
    CALL_HANDLES.with_borrow_mut(|cache| {
        if !cache.contains_key(name) {
            if cache.len() >= crate::telemetry::CACHED_WEBHOOKS {
                cache.clear();
            }
            // Installs the recorder first: a handle taken before would count nowhere.
            crate::telemetry::recorder();
            cache.insert(name.to_owned(), Vec::new());
        }
        let Some(known) = cache.get_mut(name) else { return };
        let at = match known.iter().position(|(s, _)| *s == series) {
            Some(at) => at,
            None => {
                known.push((series, CallHandles::register(name, series)));
                known.len() - 1
            }
        };
        count(&known[at].1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(allowed: bool, failed_open: u32, budget_exhausted: u32) -> Outcome {
        Outcome {
            answer: crate::review::encode::Answer {
                allowed,
                status: None,
                patch: None,
                audit_annotations: Default::default(),
                warnings: Vec::new(),
            },
            full_annotations: Default::default(),
            explanation: crate::explain::Explanation::disabled(),
            final_object: None,
            failed_open,
            budget_exhausted,
            namespace: crate::pipeline::matching::NamespaceLabels::NotNeeded,
            calls: Vec::new(),
        }
    }

    /// Counted into a recorder of the test's own: nothing another test records shows here.
    #[test]
    fn reviews_fail_opens_and_exhausted_budgets_are_counted_by_endpoint() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let counters = ReviewCounters::new();
            counters.count(Endpoint::Mutate, &outcome(true, 2, 1));
            counters.count(Endpoint::Mutate, &outcome(true, 1, 1));
            counters.count(Endpoint::Validate, &outcome(true, 0, 0));
            counters.count(Endpoint::Validate, &outcome(true, 0, 0));
            counters.count(Endpoint::Admit, &outcome(false, 0, 0));
        });
        let text = handle.render();
        for line in [
            "admission_gateway_webhook_failed_open_total{stage=\"mutate\"} 3",
            "admission_gateway_webhook_budget_exhausted_total{stage=\"mutate\"} 2",
            "admission_gateway_webhook_failed_open_total{stage=\"validate\"} 0",
            "admission_gateway_reviews_total{stage=\"mutate\",allowed=\"true\"} 2",
            "admission_gateway_reviews_total{stage=\"validate\",allowed=\"true\"} 2",
            "admission_gateway_reviews_total{stage=\"validate\",allowed=\"false\"} 0",
            "admission_gateway_reviews_total{stage=\"admit\",allowed=\"false\"} 1",
        ] {
            assert!(text.lines().any(|shown| shown == line), "{line} in {text}");
        }
    }
}
