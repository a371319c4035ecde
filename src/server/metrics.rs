//! The gateway's metrics, rendered in the Prometheus text format: the counters and gauges
//! kept here (reviews, refused requests, configuration generation, reloads), then everything
//! recorded through the `metrics` facade ([`webhooks`]: per-webhook families, shadow results,
//! match conditions).

pub(crate) mod webhooks;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::pipeline::Outcome;
use crate::telemetry::names;

/// Counters shared by the listeners and the reload task. Label values are bounded: stages,
/// booleans and fixed reason names, never anything from a request.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Reviews answered, by stage and verdict: lock-free, as every review counts one.
    reviews: [[AtomicU64; 2]; 3],
    /// Webhooks answered by `failurePolicy: Ignore`, by stage.
    failed_open: [AtomicU64; 3],
    /// Webhooks not called because the deadline budget was exhausted, by stage.
    budget_exhausted: [AtomicU64; 3],
    /// Refused requests, by stage and reason: the error path, so a lock is fine.
    bad_requests: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    pub(crate) reload_failures: AtomicU64,
    pub(crate) reload_successes: AtomicU64,
    /// Connections open, admission listener then admin listener.
    connections: [AtomicU64; 2],
    /// Reviews and request bytes being answered (`limits.rs`).
    pub(crate) in_flight: super::limits::InFlight,
}

/// An open connection, counted until dropped.
pub(crate) struct OpenConnection {
    metrics: std::sync::Arc<Metrics>,
    index: usize,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.metrics.connections[self.index].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counts a connection of `listener` open until the guard drops.
    pub(crate) fn connection_opened(
        self: &std::sync::Arc<Self>,
        listener: super::Listener,
    ) -> OpenConnection {
        let index = usize::from(listener != super::Listener::Admission);
        self.connections[index].fetch_add(1, Ordering::Relaxed);
        OpenConnection { metrics: self.clone(), index }
    }

    pub(crate) fn review(&self, stage: Endpoint, outcome: &Outcome) {
        let stage = stage_index(stage);
        self.reviews[stage][usize::from(outcome.answer.allowed)].fetch_add(1, Ordering::Relaxed);
        if outcome.failed_open > 0 {
            self.failed_open[stage].fetch_add(u64::from(outcome.failed_open), Ordering::Relaxed);
        }
        if outcome.budget_exhausted > 0 {
            self.budget_exhausted[stage].fetch_add(u64::from(outcome.budget_exhausted), Ordering::Relaxed);
        }
    }

    pub(crate) fn bad_request(&self, stage: Endpoint, reason: &'static str) {
        let mut bad = self.bad_requests.lock().unwrap_or_else(|p| p.into_inner());
        *bad.entry((stage.as_str(), reason)).or_default() += 1;
    }

    pub(crate) fn render(&self, snapshot: &Snapshot) -> String {
        let mut out = crate::telemetry::recorder().render();
        out.push_str(
            "# HELP admission_gateway_reviews_total AdmissionReviews answered, by endpoint and verdict.\n",
        );
        out.push_str("# TYPE admission_gateway_reviews_total counter\n");
        for stage in [Endpoint::Mutate, Endpoint::Validate, Endpoint::Admit] {
            for allowed in [false, true] {
                let count = self.reviews[stage_index(stage)][usize::from(allowed)].load(Ordering::Relaxed);
                if count > 0 {
                    let stage = stage.as_str();
                    let _ = writeln!(
                        out,
                        "admission_gateway_reviews_total{{stage=\"{stage}\",allowed=\"{allowed}\"}} {count}"
                    );
                }
            }
        }
        for (name, help, counts) in [
            (
                names::WEBHOOK_FAILED_OPEN,
                "Webhook calls answered by failurePolicy Ignore (call failed or no budget left), by endpoint.",
                &self.failed_open,
            ),
            (
                names::WEBHOOK_BUDGET_EXHAUSTED,
                "Webhooks not called because the review's deadline budget was exhausted, by endpoint.",
                &self.budget_exhausted,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for stage in [Endpoint::Mutate, Endpoint::Validate, Endpoint::Admit] {
                let count = counts[stage_index(stage)].load(Ordering::Relaxed);
                let _ = writeln!(out, "{name}{{stage=\"{}\"}} {count}", stage.as_str());
            }
        }
        out.push_str("# HELP admission_gateway_bad_requests_total Requests refused before dispatch (4xx), by reason.\n");
        out.push_str("# TYPE admission_gateway_bad_requests_total counter\n");
        for ((stage, reason), count) in self.bad_requests.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "admission_gateway_bad_requests_total{{stage=\"{stage}\",reason=\"{reason}\"}} {count}"
            );
        }
        out.push_str(
            "# HELP admission_gateway_config_generation Generation of the configuration being served.\n",
        );
        out.push_str("# TYPE admission_gateway_config_generation gauge\n");
        let _ = writeln!(out, "admission_gateway_config_generation {}", snapshot.generation);
        out.push_str(
            "# HELP admission_gateway_config_webhooks Webhooks in the configuration being served.\n",
        );
        out.push_str("# TYPE admission_gateway_config_webhooks gauge\n");
        let _ = writeln!(
            out,
            "admission_gateway_config_webhooks{{type=\"mutating\"}} {}",
            snapshot.mutating.len()
        );
        let _ = writeln!(
            out,
            "admission_gateway_config_webhooks{{type=\"validating\"}} {}",
            snapshot.validating.len()
        );
        out.push_str("# HELP admission_gateway_config_reloads_total Configuration reloads, by result.\n");
        out.push_str("# TYPE admission_gateway_config_reloads_total counter\n");
        let _ = writeln!(
            out,
            "admission_gateway_config_reloads_total{{result=\"success\"}} {}",
            self.reload_successes.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "admission_gateway_config_reloads_total{{result=\"failure\"}} {}",
            self.reload_failures.load(Ordering::Relaxed)
        );
        out.push_str(
            "# HELP admission_gateway_webhook_breaker Each webhook's breaker: 1 for its state (closed, open, half-open).\n",
        );
        out.push_str("# TYPE admission_gateway_webhook_breaker gauge\n");
        for hook in snapshot.mutating.iter().chain(&snapshot.validating) {
            let _ = writeln!(
                out,
                "admission_gateway_webhook_breaker{{configuration=\"{}\",webhook=\"{}\",state=\"{}\"}} 1",
                hook.configuration,
                hook.name,
                hook.breaker.position().as_str()
            );
        }
        for (name, help, values) in [(
            names::CONNECTIONS,
            "Connections open, by listener.",
            [("listener=\"admission\"", &self.connections[0]), ("listener=\"admin\"", &self.connections[1])],
        )] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, value) in values {
                let _ = writeln!(out, "{name}{{{labels}}} {}", value.load(Ordering::Relaxed));
            }
        }
        for (name, help, value) in [
            (
                names::REVIEWS_IN_FLIGHT,
                "Reviews being answered (maxReviewsInFlight caps it).",
                self.in_flight.reviews() as u64,
            ),
            (
                names::REQUEST_BYTES_IN_FLIGHT,
                "Bytes of the request bodies being answered (maxRequestBytesInFlight caps it).",
                self.in_flight.bytes() as u64,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        for (name, help, value) in [
            (
                names::PANICS,
                "Panics caught in the process's tasks (each one a bug; the task's connection was closed).",
                PANICS.load(Ordering::Relaxed),
            ),
            (
                names::LOG_LINES_DROPPED,
                "Log lines dropped because standard error fell behind the writer queue.",
                crate::logging::dropped_lines(),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        }
        out
    }
}

/// Panics seen by the process's panic hook ([`count_panics`]).
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

fn stage_index(stage: Endpoint) -> usize {
    match stage {
        Endpoint::Mutate => 0,
        Endpoint::Validate => 1,
        Endpoint::Admit => 2,
    }
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
            calls: Vec::new(),
        }
    }

    #[test]
    fn fail_opens_and_exhausted_budgets_are_counted_by_stage() {
        let metrics = Metrics::default();
        metrics.review(Endpoint::Mutate, &outcome(true, 2, 1));
        metrics.review(Endpoint::Mutate, &outcome(true, 1, 1));
        let text = metrics.render(&Snapshot::empty());
        assert!(text.contains("admission_gateway_webhook_failed_open_total{stage=\"mutate\"} 3\n"), "{text}");
        assert!(
            text.contains("admission_gateway_webhook_budget_exhausted_total{stage=\"mutate\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("admission_gateway_webhook_failed_open_total{stage=\"validate\"} 0\n"),
            "{text}"
        );
    }

    #[test]
    fn reviews_are_counted_by_stage_and_verdict() {
        let metrics = Metrics::default();
        metrics.review(Endpoint::Validate, &outcome(true, 0, 0));
        metrics.review(Endpoint::Validate, &outcome(true, 0, 0));
        metrics.review(Endpoint::Mutate, &outcome(false, 0, 0));
        let text = metrics.render(&Snapshot::empty());
        assert!(
            text.contains("admission_gateway_reviews_total{stage=\"validate\",allowed=\"true\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("admission_gateway_reviews_total{stage=\"mutate\",allowed=\"false\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("admission_gateway_reviews_total{stage=\"admit\""), "{text}");
    }

    #[test]
    fn panics_are_counted_and_shown() {
        count_panics();
        let before = PANICS.load(Ordering::Relaxed);
        let crashed = std::thread::spawn(|| panic!("a deliberate panic in a test thread")).join();
        assert!(crashed.is_err());
        assert!(PANICS.load(Ordering::Relaxed) > before);
        let text = Metrics::default().render(&Snapshot::empty());
        let shown = text
            .lines()
            .find_map(|line| line.strip_prefix("admission_gateway_panics_total "))
            .and_then(|value| value.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(shown > before, "{text}");
    }
}
