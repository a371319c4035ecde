//! `/metrics`: what the process records through the `metrics` facade (`telemetry.rs`; the
//! calls' and reviews' families are recorded by `pipeline/observe.rs`), rendered by the
//! Prometheus exporter, then this server's own state read at the scrape: the configuration it
//! serves, its reloads, the requests it refused, its connections, the reviews and bytes in
//! flight, its webhooks' breakers.
//!
//! Why the server's state is written here rather than kept in the recorder: the recorder is one
//! per process, and a process may run several servers (the tests run dozens side by side), so a
//! server's own counts kept there would mix with the others' (measured: a test's reload
//! counter read 4 after its one reload, another's 429 count 2 after its one); and a webhook's series must go when a reload takes it
//! out of the fleet, which the exporter, keeping every series it was given, cannot do.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::telemetry::names;

/// What one server counts as plain state, read at each scrape.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Connections open, admission listener then admin listener.
    connections: [AtomicU64; 2],
    /// Reviews and request bytes being answered (`limits.rs`).
    pub(crate) in_flight: super::limits::InFlight,
    pub(crate) reload_successes: AtomicU64,
    pub(crate) reload_failures: AtomicU64,
    /// Requests refused before dispatch, by endpoint and reason: the error path, so a lock is
    /// fine.
    refused: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
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

    /// Counts a request refused before dispatch (a 4xx or 429) with its bounded reason.
    pub(crate) fn refused(&self, endpoint: Endpoint, reason: &'static str) {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        *refused.entry((endpoint.as_str(), reason)).or_default() += 1;
    }

    /// The exposition: the recorder's, then this server's own families.
    pub(crate) fn render(&self, snapshot: &Snapshot) -> String {
        let recorder = crate::telemetry::recorder();
        // Process-wide by nature: the panic hook's count and the log writer's drops.
        metrics::counter!(names::PANICS).absolute(crate::telemetry::panics());
        metrics::counter!(names::LOG_LINES_DROPPED).absolute(crate::logging::dropped_lines());
        let mut out = recorder.render();
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        let mut family = Family { out: &mut out };
        family.write(
            names::CONFIG_GENERATION,
            "gauge",
            "Generation of the configuration being served.",
            [(String::new(), snapshot.generation)],
        );
        family.write(
            names::CONFIG_WEBHOOKS,
            "gauge",
            "Webhooks in the configuration being served.",
            [
                ("type=\"mutating\"".to_owned(), snapshot.mutating.len() as u64),
                ("type=\"validating\"".to_owned(), snapshot.validating.len() as u64),
            ],
        );
        family.write(
            names::CONFIG_RELOADS,
            "counter",
            "Configuration reloads, by result.",
            [
                ("result=\"success\"".to_owned(), load(&self.reload_successes)),
                ("result=\"failure\"".to_owned(), load(&self.reload_failures)),
            ],
        );
        let refused: Vec<(String, u64)> = {
            let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
            let sample = |((stage, reason), count): (&(&str, &str), &u64)| {
                (format!("stage=\"{stage}\",reason=\"{reason}\""), *count)
            };
            refused.iter().map(sample).collect()
        };
        family.write(
            names::BAD_REQUESTS,
            "counter",
            "Requests refused before dispatch (4xx), by reason.",
            refused,
        );
        family.write(
            names::CONNECTIONS,
            "gauge",
            "Connections open, by listener.",
            [
                ("listener=\"admission\"".to_owned(), load(&self.connections[0])),
                ("listener=\"admin\"".to_owned(), load(&self.connections[1])),
            ],
        );
        family.write(
            names::REVIEWS_IN_FLIGHT,
            "gauge",
            "Reviews being answered (maxReviewsInFlight caps it).",
            [(String::new(), self.in_flight.reviews() as u64)],
        );
        family.write(
            names::REQUEST_BYTES_IN_FLIGHT,
            "gauge",
            "Bytes of the request bodies being answered (maxRequestBytesInFlight caps it).",
            [(String::new(), self.in_flight.bytes() as u64)],
        );
        let breakers = snapshot.mutating.iter().chain(&snapshot.validating).map(|hook| {
            let state = hook.breaker.position().as_str();
            let labels = format!(
                "configuration=\"{}\",webhook=\"{}\",state=\"{state}\"",
                hook.configuration, hook.name
            );
            (labels, 1)
        });
        family.write(
            names::WEBHOOK_BREAKER,
            "gauge",
            "Each webhook's breaker: 1 for its state (closed, open, half-open).",
            breakers,
        );
        out
    }
}

/// Writes families in the Prometheus text format.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    /// `samples`: each sample's labels (`a="x",b="y"`, or none) and value.
    fn write(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, u64)>,
    ) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = match labels.is_empty() {
                true => writeln!(self.out, "{name} {value}"),
                false => writeln!(self.out, "{name}{{{labels}}} {value}"),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_configuration_panics_and_breakers_are_shown() {
        crate::telemetry::count_panics();
        let before = crate::telemetry::panics();
        let crashed = std::thread::spawn(|| panic!("a deliberate panic in a test thread")).join();
        assert!(crashed.is_err());
        assert!(crate::telemetry::panics() > before);
        let metrics = Metrics::default();
        metrics.refused(Endpoint::Validate, "not_json");
        metrics.refused(Endpoint::Validate, "not_json");
        metrics.refused(Endpoint::Mutate, "too_large");
        let text = metrics.render(&Snapshot::empty());
        let value = |prefix: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(prefix))
                .and_then(|value| value.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {prefix}in {text}"))
        };
        assert!(value("admission_gateway_panics_total ") > before, "{text}");
        assert_eq!(value("admission_gateway_config_generation "), Snapshot::empty().generation, "{text}");
        assert_eq!(value("admission_gateway_config_webhooks{type=\"validating\"} "), 0, "{text}");
        assert!(text.contains("# TYPE admission_gateway_webhook_breaker gauge\n"), "{text}");
        assert_eq!(value("admission_gateway_bad_requests_total{stage=\"validate\",reason=\"not_json\"} "), 2);
        assert_eq!(value("admission_gateway_bad_requests_total{stage=\"mutate\",reason=\"too_large\"} "), 1);
        for stage in ["mutate", "validate", "admit"] {
            let zero = format!("admission_gateway_webhook_budget_exhausted_total{{stage=\"{stage}\"}} ");
            assert!(text.contains(&zero), "shown from the start: {zero} in {text}");
        }
    }
}
