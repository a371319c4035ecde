//! Per-webhook metrics through the `metrics` facade, rendered by the Prometheus recorder the
//! process installs once ([`handle`]): kube-apiserver's own webhook metrics under their exact
//! names and labels (docs/semantics.md §15.1; upstream
//! staging/src/k8s.io/apiserver/pkg/admission/metrics/metrics.go), so dashboards and alerts
//! written for the API server work pointed at the gateway — now per downstream webhook — and
//! the gateway's own. The shadow/warn counters (pipeline/shadow.rs) and the match-condition
//! metrics (pipeline/conditions.rs) go through the same recorder. Labels are bounded: webhook
//! names, fixed words, codes; never a namespace, object name, uid, user or error text.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::explain::Phase;
use crate::pipeline::{CallOutcome, Outcome};

/// The API server's webhook latency buckets, with sub-millisecond ones in front: a webhook on
/// the same node answers in well under 5 ms.
const WEBHOOK_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];
/// The API server's match-condition buckets.
const CONDITION_BUCKETS: &[f64] = &[0.0001, 0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25];
/// The gateway's own time per review.
const GATEWAY_BUCKETS: &[f64] =
    &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

/// How often buffered histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed the first time it is asked for. If another
/// recorder was installed first, the handle renders nothing of the facade's metrics (and
/// says so in a log line).
pub(crate) fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = [
            ("apiserver_admission_webhook_admission_duration_seconds", WEBHOOK_BUCKETS),
            ("admission_gateway_webhook_duration_seconds", WEBHOOK_BUCKETS),
            ("apiserver_admission_match_condition_evaluation_seconds", CONDITION_BUCKETS),
            ("admission_gateway_review_gateway_seconds", GATEWAY_BUCKETS),
        ]
        .into_iter()
        .fold(PrometheusBuilder::new(), |builder, (name, buckets)| {
            builder
                .set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets)
                .unwrap_or_else(|_| PrometheusBuilder::new())
        });
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "another metrics recorder is installed: /metrics will lack the per-webhook families"
            );
        }
        describe();
        // Histogram samples are buffered raw until drained into their buckets: by a render,
        // or by this upkeep, so that without scrapes the buffer holds at most a few seconds.
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            upkeep.run_upkeep();
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the metrics upkeep thread: histograms drain only on scrapes");
        }
        handle
    })
}

/// The HELP lines of every family recorded through the facade.
fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_histogram!(
        "apiserver_admission_webhook_admission_duration_seconds",
        Unit::Seconds,
        "Admission webhook latency, by webhook name, type (admit or validating), operation and rejected."
    );
    describe_counter!(
        "apiserver_admission_webhook_request_total",
        "Admission webhook requests, by webhook name, type, operation, HTTP code (0: no answer) and rejected."
    );
    describe_counter!(
        "apiserver_admission_webhook_rejection_count",
        "Admission webhook rejections, by webhook name, type, operation, error_type and rejection_code."
    );
    describe_counter!(
        "apiserver_admission_webhook_fail_open_count",
        "Admission webhook calls that failed and were ignored (failurePolicy Ignore), by webhook name and type."
    );
    describe_counter!(
        "apiserver_admission_match_condition_exclusions_total",
        "Webhooks skipped because a matchCondition was false, by webhook name, kind, type and operation."
    );
    describe_counter!(
        "apiserver_admission_match_condition_evaluation_errors_total",
        "matchCondition evaluation errors, by webhook name, kind, type and operation."
    );
    describe_histogram!(
        "apiserver_admission_match_condition_evaluation_seconds",
        Unit::Seconds,
        "matchCondition evaluation time per webhook, by webhook name, kind, type and operation."
    );
    describe_histogram!(
        "admission_gateway_webhook_duration_seconds",
        Unit::Seconds,
        "Downstream webhook call latency as the gateway saw it, by webhook, type and outcome (allowed, denied, error)."
    );
    describe_histogram!(
        "admission_gateway_review_gateway_seconds",
        Unit::Seconds,
        "Time per review spent in the gateway itself: the whole review less the time waiting for webhooks."
    );
    describe_counter!(
        "admission_gateway_webhook_ejections_total",
        "Times a webhook was ejected (fast failure) after consecutive unanswered calls, by webhook."
    );
    describe_counter!(
        "admission_gateway_upstream_connections_total",
        "TCP connections to webhooks, by host:port and result (opened, failed)."
    );
    metrics::describe_gauge!(
        "admission_gateway_webhook_in_flight",
        "Calls sent to a webhook and not yet answered (shadow calls included), by webhook."
    );
    describe_counter!(
        "admission_gateway_reviews_abandoned_total",
        "Reviews whose caller closed the connection before the answer."
    );
    describe_counter!(
        crate::pipeline::shadow::RESULTS_METRIC,
        "Shadow and canary-shadowed webhook results compared with the enforced decision, by webhook, configuration, type, mode, result and disagreement."
    );
    describe_counter!(
        crate::traces::DROPPED_METRIC,
        "Spans dropped because the export queue (--otlp-endpoint) was full."
    );
    describe_counter!(crate::traces::FAILED_METRIC, "Spans in OTLP export requests that failed.");
    describe_counter!(
        crate::pipeline::shadow::WARN_DENIALS_METRIC,
        "Warn-mode denials turned into warnings, by webhook and configuration."
    );
}

/// `type` of the API server's webhook metrics.
fn webhook_type(phase: Phase) -> &'static str {
    match phase {
        Phase::Mutating => "admit",
        Phase::Validating => "validating",
    }
}

/// Records every webhook of one answered review. `elapsed` is the review's whole time in the
/// gateway, from the request received to the answer encoded. Returns the gateway's own share.
pub(crate) fn record(outcome: &Outcome, operation: &'static str, elapsed: Duration) -> Duration {
    let (mut sequential, mut concurrent) = (Duration::ZERO, Duration::ZERO);
    for call in &outcome.calls {
        let name = &call.hook.name;
        let kind = webhook_type(call.phase);
        let rejected = call.rejected();
        // The API server observes every call attempt, those refused before sending included
        // (latency ~0): a dry run refused for side effects is its internal-error path, code 0.
        let (code, error_type) = match call.outcome {
            CallOutcome::DryRunRefused | CallOutcome::Error { code: 0, .. } => {
                (0, "apiserver_internal_error")
            }
            CallOutcome::Error { .. } => (call.code(), "calling_webhook_error"),
            CallOutcome::Allowed { .. } | CallOutcome::Denied { .. } => (call.code(), "no_error"),
        };
        let result = call.sent.then_some(match call.outcome {
            CallOutcome::Allowed { .. } => "allowed",
            CallOutcome::Denied { .. } => "denied",
            CallOutcome::Error { .. } | CallOutcome::DryRunRefused => "error",
        });
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
            metrics::counter!("apiserver_admission_webhook_rejection_count",
                "name" => name.clone(), "type" => kind, "operation" => operation,
                "error_type" => error_type, "rejection_code" => code.to_string())
            .increment(1);
        }
        if matches!(call.outcome, CallOutcome::Error { failed_open: true, .. }) {
            metrics::counter!("apiserver_admission_webhook_fail_open_count", "name" => name.clone(), "type" => kind)
                .increment(1);
        }
    }
    // The gateway's own share: the whole review less the time spent waiting for webhooks (the
    // mutating chain's calls one after another, the validating ones side by side).
    let in_gateway = elapsed.saturating_sub(sequential + concurrent);
    GATEWAY_SECONDS.with(|histogram| histogram.record(in_gateway.as_secs_f64()));
    in_gateway
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
            duration: metrics::histogram!("apiserver_admission_webhook_admission_duration_seconds",
                "name" => name.to_owned(), "type" => kind, "operation" => operation, "rejected" => rejected),
            requests: metrics::counter!("apiserver_admission_webhook_request_total",
                "name" => name.to_owned(), "type" => kind, "operation" => operation,
                "code" => code.to_string(), "rejected" => rejected),
            gateway: result.map(|result| {
                metrics::histogram!("admission_gateway_webhook_duration_seconds",
                    "webhook" => name.to_owned(), "type" => kind, "outcome" => result)
            }),
        }
    }
}

/// Webhook names a serving thread keeps handles for before it starts afresh (a fleet renamed
/// by reloads many times over).
const CACHED_WEBHOOKS: usize = 4096;

thread_local! {
    /// The handles of the series this thread has counted calls in, by webhook name. Asking
    /// the recorder builds a key (its labels allocated) and looks it up in a shared map on
    /// every call; the handles stay valid, as the recorder never forgets a series.
    static CALL_HANDLES: RefCell<HashMap<String, Vec<(CallSeries, CallHandles)>>> =
        RefCell::new(HashMap::new());
    static GATEWAY_SECONDS: metrics::Histogram = {
        handle();
        metrics::histogram!("admission_gateway_review_gateway_seconds")
    };
}

/// `admission_gateway_webhook_in_flight{webhook}`, from this thread's handles.
pub(crate) fn in_flight(name: &str) -> metrics::Gauge {
    thread_local! {
        static GAUGES: RefCell<HashMap<String, metrics::Gauge>> = RefCell::new(HashMap::new());
    }
    GAUGES.with_borrow_mut(|gauges| {
        if let Some(gauge) = gauges.get(name) {
            return gauge.clone();
        }
        if gauges.len() >= CACHED_WEBHOOKS {
            gauges.clear();
        }
        handle();
        let gauge = metrics::gauge!("admission_gateway_webhook_in_flight", "webhook" => name.to_owned());
        gauges.insert(name.to_owned(), gauge.clone());
        gauge
    })
}

fn with_call_handles(name: &str, series: CallSeries, count: impl FnOnce(&CallHandles)) {
    CALL_HANDLES.with_borrow_mut(|cache| {
        if !cache.contains_key(name) {
            if cache.len() >= CACHED_WEBHOOKS {
                cache.clear();
            }
            // Installs the recorder first: a handle taken before would count nowhere.
            handle();
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
            metrics::counter!("admission_gateway_reviews_abandoned_total").increment(1);
        }
    }
}
