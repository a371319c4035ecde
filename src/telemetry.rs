//! Telemetry that every layer records into, with nothing of theirs: the name of every metric
//! family (defined once, here), the process's Prometheus recorder behind the `metrics` facade
//! with its buckets and HELP texts, and the per-webhook in-flight gauge. A leaf: the pipeline,
//! the upstream clients, the cluster watches and the server record; `/metrics` renders.
//!
//! Labels are bounded: webhook names, fixed words, codes; never a namespace, object name, uid,
//! user or error text.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The name of every metric family the gateway exports.
pub(crate) mod names {
    // kube-apiserver's own families, under their exact names (docs/semantics.md §15.1; upstream
    // staging/src/k8s.io/apiserver/pkg/admission/metrics/metrics.go).
    pub(crate) const WEBHOOK_ADMISSION_DURATION: &str =
        "apiserver_admission_webhook_admission_duration_seconds";
    pub(crate) const WEBHOOK_REQUESTS: &str = "apiserver_admission_webhook_request_total";
    pub(crate) const WEBHOOK_REJECTIONS: &str = "apiserver_admission_webhook_rejection_count";
    pub(crate) const WEBHOOK_FAIL_OPEN: &str = "apiserver_admission_webhook_fail_open_count";
    pub(crate) const MATCH_CONDITION_EXCLUSIONS: &str =
        "apiserver_admission_match_condition_exclusions_total";
    pub(crate) const MATCH_CONDITION_ERRORS: &str =
        "apiserver_admission_match_condition_evaluation_errors_total";
    pub(crate) const MATCH_CONDITION_DURATION: &str =
        "apiserver_admission_match_condition_evaluation_seconds";
    pub(crate) const INTERNAL_ERRORS: &str = "apiserver_internal_error";
    // …/plugin/policy/validating/metrics/metrics.go.
    pub(crate) const POLICY_CHECKS: &str = "apiserver_validating_admission_policy_check_total";
    pub(crate) const POLICY_CHECK_DURATION: &str =
        "apiserver_validating_admission_policy_check_duration_seconds";
    // …/plugin/policy/mutating/metrics/metrics.go.
    pub(crate) const MUTATING_POLICY_CHECKS: &str = "apiserver_mutating_admission_policy_check_total";
    pub(crate) const MUTATING_POLICY_CHECK_DURATION: &str =
        "apiserver_mutating_admission_policy_check_duration_seconds";

    // The gateway's own families.
    pub(crate) const REVIEWS: &str = "admission_gateway_reviews_total";
    pub(crate) const BAD_REQUESTS: &str = "admission_gateway_bad_requests_total";
    pub(crate) const CONFIG_GENERATION: &str = "admission_gateway_config_generation";
    pub(crate) const CONFIG_WEBHOOKS: &str = "admission_gateway_config_webhooks";
    pub(crate) const CONFIG_RELOADS: &str = "admission_gateway_config_reloads_total";
    pub(crate) const WEBHOOK_BREAKER: &str = "admission_gateway_webhook_breaker";
    pub(crate) const RECORDED: &str = "admission_gateway_recorded_reviews_total";
    pub(crate) const WEBHOOK_DURATION: &str = "admission_gateway_webhook_duration_seconds";
    pub(crate) const REVIEW_GATEWAY_DURATION: &str = "admission_gateway_review_gateway_seconds";
    pub(crate) const WEBHOOK_EJECTIONS: &str = "admission_gateway_webhook_ejections_total";
    pub(crate) const UPSTREAM_CONNECTIONS: &str = "admission_gateway_upstream_connections_total";
    pub(crate) const WEBHOOK_IN_FLIGHT: &str = "admission_gateway_webhook_in_flight";
    pub(crate) const REVIEWS_ABANDONED: &str = "admission_gateway_reviews_abandoned_total";
    pub(crate) const SHADOW_RESULTS: &str = "admission_gateway_shadow_results_total";
    pub(crate) const POLICY_SHADOW_RESULTS: &str = "admission_gateway_policy_shadow_results_total";
    pub(crate) const POLICY_AGREEMENT: &str = "admission_gateway_policy_webhook_agreement_total";
    pub(crate) const POLICY_DURATION: &str = "admission_gateway_policy_duration_seconds";
    pub(crate) const WARN_DENIALS: &str = "admission_gateway_warn_denials_total";
    pub(crate) const TRACE_SPANS_DROPPED: &str = "admission_gateway_trace_spans_dropped_total";
    pub(crate) const TRACE_SPANS_EXPORT_FAILED: &str = "admission_gateway_trace_spans_export_failed_total";
    pub(crate) const CONNECTIONS: &str = "admission_gateway_connections";
    pub(crate) const LOG_LINES_DROPPED: &str = "admission_gateway_log_lines_dropped_total";
    pub(crate) const PANICS: &str = "admission_gateway_panics_total";
    pub(crate) const REQUEST_BYTES_IN_FLIGHT: &str = "admission_gateway_request_bytes_in_flight";
    pub(crate) const REVIEWS_IN_FLIGHT: &str = "admission_gateway_reviews_in_flight";
    pub(crate) const WEBHOOK_BUDGET_EXHAUSTED: &str = "admission_gateway_webhook_budget_exhausted_total";
    pub(crate) const WEBHOOK_FAILED_OPEN: &str = "admission_gateway_webhook_failed_open_total";
    pub(crate) const NAMESPACE_CACHE_NAMESPACES: &str = "admission_gateway_namespace_cache_namespaces";
    pub(crate) const NAMESPACE_CACHE_STALE: &str = "admission_gateway_namespace_cache_stale";
    pub(crate) const NAMESPACE_CACHE_STALE_SECONDS: &str = "admission_gateway_namespace_cache_stale_seconds";
    pub(crate) const NAMESPACE_CACHE_SYNCED: &str = "admission_gateway_namespace_cache_synced";
    pub(crate) const NAMESPACE_LOOKUPS: &str = "admission_gateway_namespace_lookups_total";
    pub(crate) const NAMESPACE_WATCH_RESTARTS: &str = "admission_gateway_namespace_watch_restarts_total";
    pub(crate) const OPENAPI_GROUP_VERSIONS: &str = "admission_gateway_openapi_group_versions";
}

/// Webhook names a serving thread keeps handles for before it starts afresh (a fleet renamed
/// by reloads many times over).
pub(crate) const CACHED_WEBHOOKS: usize = 4096;

/// The API server's webhook latency buckets, with sub-millisecond ones in front: a webhook on
/// the same node answers in well under 5 ms.
const WEBHOOK_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];
/// The API server's match-condition buckets.
const CONDITION_BUCKETS: &[f64] = &[0.0001, 0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25];
/// The API server's policy check buckets (…/policy/validating/metrics/metrics.go).
const POLICY_CHECK_BUCKETS: &[f64] = &[0.0000005, 0.001, 0.01, 0.1, 1.0];
/// The gateway's own time per review.
const GATEWAY_BUCKETS: &[f64] =
    &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

/// How often buffered histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed the first time it is asked for. If another
/// recorder was installed first, the handle renders nothing of the facade's metrics (and
/// says so in a log line).
pub(crate) fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = [
            (names::WEBHOOK_ADMISSION_DURATION, WEBHOOK_BUCKETS),
            (names::WEBHOOK_DURATION, WEBHOOK_BUCKETS),
            (names::MATCH_CONDITION_DURATION, CONDITION_BUCKETS),
            (names::REVIEW_GATEWAY_DURATION, GATEWAY_BUCKETS),
            (names::POLICY_CHECK_DURATION, POLICY_CHECK_BUCKETS),
            (names::MUTATING_POLICY_CHECK_DURATION, POLICY_CHECK_BUCKETS),
            (names::POLICY_DURATION, GATEWAY_BUCKETS),
        ]
        .into_iter()
        .fold(PrometheusBuilder::new(), |builder, (name, buckets)| {
            builder
                .set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets)
                .unwrap_or_else(|_| PrometheusBuilder::new())
        });
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Into this recorder, whatever recorder the calling thread has set for itself.
        metrics::with_local_recorder(&recorder, describe);
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "another metrics recorder is installed: /metrics will lack the per-webhook families"
            );
        }
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
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_histogram!(
        names::WEBHOOK_ADMISSION_DURATION,
        Unit::Seconds,
        "Admission webhook latency, by webhook name, type (admit or validating), operation and rejected."
    );
    describe_counter!(
        names::WEBHOOK_REQUESTS,
        "Admission webhook requests, by webhook name, type, operation, HTTP code (0: no answer) and rejected."
    );
    describe_counter!(
        names::WEBHOOK_REJECTIONS,
        "Admission webhook rejections, by webhook name, type, operation, error_type and rejection_code."
    );
    describe_counter!(
        names::WEBHOOK_FAIL_OPEN,
        "Admission webhook calls that failed and were ignored (failurePolicy Ignore), by webhook name and type."
    );
    describe_counter!(
        names::MATCH_CONDITION_EXCLUSIONS,
        "Webhooks skipped because a matchCondition was false, by webhook name, kind, type and operation."
    );
    describe_counter!(
        names::MATCH_CONDITION_ERRORS,
        "matchCondition evaluation errors, by webhook name, kind, type and operation."
    );
    describe_histogram!(
        names::MATCH_CONDITION_DURATION,
        Unit::Seconds,
        "matchCondition evaluation time per webhook, by webhook name, kind, type and operation."
    );
    describe_counter!(
        names::POLICY_CHECKS,
        "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken."
    );
    describe_histogram!(
        names::POLICY_CHECK_DURATION,
        Unit::Seconds,
        "Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken."
    );
    describe_counter!(
        names::MUTATING_POLICY_CHECKS,
        "Mutation admission policy check total, labeled by policy and further identified by binding."
    );
    describe_histogram!(
        names::MUTATING_POLICY_CHECK_DURATION,
        Unit::Seconds,
        "Mutation admission latency for individual mutation expressions in seconds, labeled by policy and binding."
    );
    describe_histogram!(
        names::POLICY_DURATION,
        Unit::Seconds,
        "Time to evaluate one ValidatingAdmissionPolicy for one request (all its bindings and parameters), by policy and mode."
    );
    describe_counter!(
        names::POLICY_SHADOW_RESULTS,
        "Shadow and canary-shadowed policies' decisions compared with the request's decision, by policy, mode, result and disagreement."
    );
    describe_counter!(
        names::POLICY_AGREEMENT,
        "A policy's decision compared with the webhook it replaces (admission-gateway/replaces), by policy, configuration, webhook, result (agree, disagree, webhook_error) and disagreement (policy_denies, webhook_denies)."
    );
    describe_histogram!(
        names::WEBHOOK_DURATION,
        Unit::Seconds,
        "Downstream webhook call latency as the gateway saw it, by webhook, type and outcome (allowed, denied, error)."
    );
    describe_histogram!(
        names::REVIEW_GATEWAY_DURATION,
        Unit::Seconds,
        "Time per review spent in the gateway itself: the whole review less the time waiting for webhooks."
    );
    describe_counter!(
        names::WEBHOOK_EJECTIONS,
        "Times a webhook was ejected (fast failure) after consecutive unanswered calls, by webhook."
    );
    describe_counter!(
        names::UPSTREAM_CONNECTIONS,
        "TCP connections to webhooks, by host:port and result (opened, failed)."
    );
    describe_gauge!(
        names::WEBHOOK_IN_FLIGHT,
        "Calls sent to a webhook and not yet answered (shadow calls included), by webhook."
    );
    describe_counter!(
        names::REVIEWS_ABANDONED,
        "Reviews whose caller closed the connection before the answer."
    );
    describe_counter!(
        names::SHADOW_RESULTS,
        "Shadow and canary-shadowed webhook results compared with the enforced decision, by webhook, configuration, type, mode, result and disagreement."
    );
    describe_counter!(
        names::TRACE_SPANS_DROPPED,
        "Spans dropped because the export queue (--otlp-endpoint) was full."
    );
    describe_counter!(names::TRACE_SPANS_EXPORT_FAILED, "Spans in OTLP export requests that failed.");
    describe_counter!(
        names::WARN_DENIALS,
        "Warn-mode denials turned into warnings, by webhook and configuration."
    );
    describe_counter!(names::REVIEWS, "AdmissionReviews answered, by endpoint and verdict.");
    describe_counter!(
        names::WEBHOOK_FAILED_OPEN,
        "Webhook calls answered by failurePolicy Ignore (call failed or no budget left), by endpoint."
    );
    describe_counter!(
        names::WEBHOOK_BUDGET_EXHAUSTED,
        "Webhooks not called because the review's deadline budget was exhausted, by endpoint."
    );
    describe_counter!(
        names::RECORDED,
        "Reviews answered while recording (serve --record or the recording section), by result: written, dropped (the writer behind), failed (not writable), skipped (outside the sample or the filter)."
    );
    describe_counter!(
        names::PANICS,
        "Panics caught in the process's tasks (each one a bug; the task's connection was closed)."
    );
    describe_counter!(
        names::LOG_LINES_DROPPED,
        "Log lines dropped because standard error fell behind the writer queue."
    );
    // Series shown at zero from the start, so that a rate over them has a beginning.
    for endpoint in crate::endpoint::Endpoint::ALL {
        for name in [names::WEBHOOK_FAILED_OPEN, names::WEBHOOK_BUDGET_EXHAUSTED] {
            metrics::counter!(name, "stage" => endpoint.as_str()).absolute(0);
        }
    }
}

/// Panics seen by the process's panic hook ([`count_panics`]): kept here, not in the
/// recorder, so that a panic before the recorder is installed still counts.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// Counts every panic (then reports it as before). A panic in a connection's task ends that
/// task and closes its connection; the process goes on, and the counter tells someone.
pub(crate) fn count_panics() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            report(info);
        }));
    });
}

/// Panics counted so far.
pub(crate) fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
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
        recorder();
        let gauge = metrics::gauge!(names::WEBHOOK_IN_FLIGHT, "webhook" => name.to_owned());
        gauges.insert(name.to_owned(), gauge.clone());
        gauge
    })
}
