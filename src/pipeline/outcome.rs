//! What one review produced: the answer, and what became of every webhook it matched
//! ([`CallRecord`]), which the observer (`observe.rs`) turns into metrics, the log line and
//! spans, and the `review` command into its report.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::matching::NamespaceLabels;
use super::modes::CallMode;
use crate::config::compile::Hook;
use crate::config::policy::Policy;
use crate::explain::{Explanation, Phase};
use crate::review::encode::Answer;

/// Everything one review produced.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) answer: Answer,
    /// Annotations under their full keys, when explaining (the answer carries them encoded).
    pub(crate) full_annotations: BTreeMap<String, String>,
    pub(crate) explanation: Explanation,
    /// The final object, when explaining (for the `review` report).
    pub(crate) final_object: Option<Value>,
    /// Webhooks answered by `failurePolicy: Ignore` (a failed call, or no budget left).
    pub(crate) failed_open: u32,
    /// Webhooks not called because the deadline budget was exhausted.
    pub(crate) budget_exhausted: u32,
    /// What became of every webhook the review matched, in the order they were judged.
    pub(crate) calls: Vec<CallRecord>,
    /// The request's namespace as it was looked up for the review (`NotNeeded`: nothing read
    /// it): part of the world a recording keeps.
    pub(crate) namespace: NamespaceLabels,
}

/// What became of one matched webhook, or one policy that acted on the request, in one review:
/// what metrics, logs, traces and the recording report (never anything of the object or the
/// answer's text).
#[derive(Clone, Debug)]
pub(crate) struct CallRecord {
    pub(crate) caller: Caller,
    pub(crate) phase: Phase,
    pub(crate) round: u8,
    pub(crate) outcome: CallOutcome,
    /// How long the call took (a policy: its evaluation); zero when nothing was sent.
    pub(crate) latency: std::time::Duration,
    /// Whether a request was sent (a policy: evaluated).
    pub(crate) sent: bool,
    /// How it was run: enforce, warn, or canary (enforced this time). Shadow calls are not
    /// call records: they end after the answer (`shadow.rs` reports them).
    pub(crate) mode: CallMode,
}

/// Who a call record is of.
#[derive(Clone, Debug)]
pub(crate) enum Caller {
    Webhook(Arc<Hook>),
    /// A ValidatingAdmissionPolicy, all its bindings and parameters as one turn.
    Policy(Arc<Policy>),
}

impl Caller {
    pub(crate) fn name(&self) -> &str {
        match self {
            Caller::Webhook(hook) => &hook.name,
            Caller::Policy(policy) => &policy.name,
        }
    }

    /// The webhook configuration the webhook is in; empty for a policy.
    pub(crate) fn configuration(&self) -> &str {
        match self {
            Caller::Webhook(hook) => &hook.configuration,
            Caller::Policy(_) => "",
        }
    }

    /// The webhook, if it is one.
    pub(crate) fn hook(&self) -> Option<&Arc<Hook>> {
        match self {
            Caller::Webhook(hook) => Some(hook),
            Caller::Policy(_) => None,
        }
    }

    /// `webhook` or `policy`: how the recording, `replay --only-webhook`/`--only-policy` and the
    /// log line tell them apart.
    pub(crate) fn kind(&self) -> CallerKind {
        match self {
            Caller::Webhook(_) => CallerKind::Webhook,
            Caller::Policy(_) => CallerKind::Policy,
        }
    }
}

/// A webhook or a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallerKind {
    Webhook,
    Policy,
}

impl CallerKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallerKind::Webhook => "webhook",
            CallerKind::Policy => "policy",
        }
    }
}

/// How a webhook's turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// Allowed; for a mutating webhook, whether its patch changed the object.
    Allowed { mutated: bool },
    /// Denied with this status code.
    Denied { code: u16 },
    /// No usable answer (or not called: no budget, not convertible), judged by failurePolicy:
    /// `failed_open` under Ignore. `code` is the API server's metric code for it (0: internal).
    Error { reason: &'static str, code: u16, failed_open: bool },
    /// A dry run refused because of the webhook's side effects.
    DryRunRefused,
}

impl CallOutcome {
    /// `allowed`, `denied` or `error`, and the error's bounded reason: the words of the
    /// call's span (src/traces.rs) and of the gateway's latency histogram.
    pub(crate) fn words(&self) -> (&'static str, Option<&'static str>) {
        match *self {
            CallOutcome::Allowed { .. } => ("allowed", None),
            CallOutcome::Denied { .. } => ("denied", None),
            CallOutcome::Error { reason, .. } => ("error", Some(reason)),
            CallOutcome::DryRunRefused => ("error", Some("dry_run_refused")),
        }
    }
}

impl fmt::Display for CallRecord {
    /// `mutating/name#0 allowed mutated 200 1.25ms`, `policy/name#0 denied 403 0.05ms
    /// rejected`: bounded words, no text from the answer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.caller {
            Caller::Webhook(_) => self.phase.as_str(),
            Caller::Policy(_) => "policy",
        };
        write!(f, "{what}/{}#{} ", self.caller.name(), self.round)?;
        match &self.outcome {
            CallOutcome::Allowed { mutated: true } => f.write_str("allowed mutated")?,
            CallOutcome::Allowed { mutated: false } => f.write_str("allowed")?,
            CallOutcome::Denied { .. } => f.write_str("denied")?,
            CallOutcome::Error { reason, failed_open: true, .. } => write!(f, "failed-open {reason}")?,
            CallOutcome::Error { reason, .. } => write!(f, "error {reason}")?,
            CallOutcome::DryRunRefused => f.write_str("dry-run-refused")?,
        }
        write!(f, " {}", self.code())?;
        if self.sent {
            write!(f, " {}", Millis(self.latency))?;
        }
        if self.rejected() {
            f.write_str(" rejected")?;
        }
        if self.mode != CallMode::Enforce {
            write!(f, " mode={}", self.mode.as_str())?;
        }
        Ok(())
    }
}

/// A latency in milliseconds to two decimals, rounded half up: `1.25ms`. Integer arithmetic:
/// every review's log line has one per call.
struct Millis(std::time::Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hundredths = (self.0.as_nanos() + 5_000) / 10_000;
        write!(f, "{}.{:02}ms", hundredths / 100, hundredths % 100)
    }
}

/// Several records, comma-separated, for a log field.
pub(crate) struct CallRecords<'a>(pub(crate) &'a [CallRecord]);

impl fmt::Display for CallRecords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, record) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{record}")?;
        }
        Ok(())
    }
}

impl CallRecord {
    /// Whether this webhook made the request fail (a warn-mode denial does not).
    pub(crate) fn rejected(&self) -> bool {
        match self.outcome {
            CallOutcome::Allowed { .. } => false,
            CallOutcome::Denied { .. } => self.mode != CallMode::Warn,
            CallOutcome::DryRunRefused => true,
            CallOutcome::Error { failed_open, .. } => !failed_open,
        }
    }

    /// The `code` label of `apiserver_admission_webhook_request_total` (docs/semantics.md §15.1).
    pub(crate) fn code(&self) -> u16 {
        match self.outcome {
            CallOutcome::Allowed { .. } => 200,
            CallOutcome::Denied { code } | CallOutcome::Error { code, .. } => code.min(600),
            CallOutcome::DryRunRefused => 400,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Millis;

    #[test]
    fn a_policys_record_reads_as_a_webhooks_does() {
        use super::{CallOutcome, CallRecord, Caller};
        use crate::config::policy::tests::{compile, pods_rule, policy};
        use crate::explain::Phase;
        use crate::pipeline::modes::CallMode;
        let spec =
            serde_json::json!({"matchConstraints": pods_rule(), "validations": [{"expression": "true"}]});
        let (policies, problems) = compile(vec![policy("require-team", spec)], Vec::new(), Vec::new());
        assert!(problems.is_empty(), "{problems:?}");
        let record = CallRecord {
            caller: Caller::Policy(policies.iter().next().expect("a policy").clone()),
            phase: Phase::Validating,
            round: 0,
            outcome: CallOutcome::Denied { code: 403 },
            latency: Duration::from_micros(50),
            sent: true,
            mode: CallMode::Enforce,
        };
        assert_eq!(record.to_string(), "policy/require-team#0 denied 403 0.05ms rejected");
        assert_eq!((record.caller.name(), record.caller.configuration()), ("require-team", ""));
        let warned = CallRecord { mode: CallMode::Warn, ..record };
        assert_eq!(warned.to_string(), "policy/require-team#0 denied 403 0.05ms mode=warn");
    }

    #[test]
    fn latencies_read_in_milliseconds_to_two_decimals() {
        let cases = [
            (Duration::ZERO, "0.00ms"),
            (Duration::from_nanos(4_999), "0.00ms"),
            (Duration::from_nanos(5_000), "0.01ms"),
            (Duration::from_micros(1_234), "1.23ms"),
            (Duration::from_micros(1_235), "1.24ms"),
            (Duration::from_nanos(12_999_999), "13.00ms"),
            (Duration::from_secs(3), "3000.00ms"),
        ];
        for (latency, shown) in cases {
            assert_eq!(Millis(latency).to_string(), shown, "{latency:?}");
        }
        // Away from a half-way point, what floating point formatting shows.
        for micros in (0..50_000_u64).step_by(37) {
            let latency = Duration::from_nanos(micros * 1_000 + 1_234);
            let float = format!("{:.2}ms", latency.as_secs_f64() * 1e3);
            assert_eq!(Millis(latency).to_string(), float, "{latency:?}");
        }
    }
}
