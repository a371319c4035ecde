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
use std::time::Duration;

use crate::explain::Phase;
use crate::pipeline::{CallOutcome, Outcome};
use crate::telemetry::names;

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
            CallOutcome::DryRunRefused | CallOutcome::Error { code: 0, .. } => (0, names::INTERNAL_ERRORS),
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
            metrics::counter!(names::WEBHOOK_REJECTIONS,
                "name" => name.clone(), "type" => kind, "operation" => operation,
                "error_type" => error_type, "rejection_code" => code.to_string())
            .increment(1);
        }
        if matches!(call.outcome, CallOutcome::Error { failed_open: true, .. }) {
            metrics::counter!(names::WEBHOOK_FAIL_OPEN, "name" => name.clone(), "type" => kind).increment(1);
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
