//! The gateway's metrics, rendered in the Prometheus text format. A minimal registry for now:
//! reviews, refused requests, configuration generation and reload failures.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::Snapshot;
use crate::pipeline::Stage;

/// Counters shared by the listeners and the reload task. Label values are bounded: stages,
/// booleans and fixed reason names, never anything from a request.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reviews answered, by stage and verdict: lock-free, as every review counts one.
    reviews: [[AtomicU64; 2]; 3],
    /// Refused requests, by stage and reason: the error path, so a lock is fine.
    bad_requests: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    pub reload_failures: AtomicU64,
    pub reload_successes: AtomicU64,
}

impl Metrics {
    pub fn review(&self, stage: Stage, allowed: bool) {
        self.reviews[stage_index(stage)][usize::from(allowed)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn bad_request(&self, stage: Stage, reason: &'static str) {
        let mut bad = self.bad_requests.lock().unwrap_or_else(|p| p.into_inner());
        *bad.entry((stage.as_str(), reason)).or_default() += 1;
    }

    pub fn render(&self, snapshot: &Snapshot) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP admission_gateway_reviews_total AdmissionReviews answered, by endpoint and verdict.\n",
        );
        out.push_str("# TYPE admission_gateway_reviews_total counter\n");
        for stage in [Stage::Mutate, Stage::Validate, Stage::Admit] {
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
        out
    }
}

fn stage_index(stage: Stage) -> usize {
    match stage {
        Stage::Mutate => 0,
        Stage::Validate => 1,
        Stage::Admit => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_are_counted_by_stage_and_verdict() {
        let metrics = Metrics::default();
        metrics.review(Stage::Validate, true);
        metrics.review(Stage::Validate, true);
        metrics.review(Stage::Mutate, false);
        let text = metrics.render(&Snapshot::empty());
        assert!(
            text.contains("admission_gateway_reviews_total{stage=\"validate\",allowed=\"true\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("admission_gateway_reviews_total{stage=\"mutate\",allowed=\"false\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("stage=\"admit\""), "{text}");
    }
}
