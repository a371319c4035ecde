//! The admission pipeline: one decoded review in, one answer out.
//!
//! ```text
//! review ─▶ 1 matching (per webhook, inside each stage)
//!        ─▶ 2 mutate::run_chain   sequential, patches applied, IfNeeded round 1
//!        ─▶ 3 validate::fan_out   concurrent, on the mutated object
//!        ─▶ answer: verdict + one combined patch + annotations + warnings
//! ```
//!
//! Both stages work on one [`Review`]: the request, the snapshot it is judged against, the
//! deadline budget, the object as patched so far, the annotations and warnings, the trace.
//! What the two stages do alike with a webhook's outcome is written once, below.

pub(crate) mod budget;
pub(crate) mod call;
pub(crate) mod conditions;
pub(crate) mod matching;
pub(crate) mod mutate;
pub(crate) mod object;
pub(crate) mod record;
pub(crate) mod shadow;
pub(crate) mod validate;
pub(crate) mod verdict;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::cluster::Cluster;
use crate::config::compile::Hook;
use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::explain::{millis, Explanation, Phase, Step};
use crate::review::decode::IncomingReview;
use crate::review::encode::Answer;
use crate::review::{Status, WebhookResponse};
use crate::traces::{CallEnd, Parent};
use budget::Budget;
use call::Called;
use matching::{NamespaceLabels, Skip};
use object::ObjectState;
use record::Records;
use shadow::{CallMode, Shadows};
use verdict::Judgement;

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
}

/// What became of one matched webhook in one review: what metrics, logs and traces report
/// (never anything of the object or the answer's text).
#[derive(Clone, Debug)]
pub(crate) struct CallRecord {
    pub(crate) hook: Arc<Hook>,
    pub(crate) phase: Phase,
    pub(crate) round: u8,
    pub(crate) outcome: CallOutcome,
    /// How long the call took; zero when nothing was sent.
    pub(crate) latency: std::time::Duration,
    /// Whether a request was sent.
    pub(crate) sent: bool,
    /// How it was run: enforce, warn, or canary (enforced this time). Shadow calls are not
    /// call records: they end after the answer (`shadow.rs` reports them).
    pub(crate) mode: CallMode,
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

impl fmt::Display for CallRecord {
    /// `mutating/name#0 allowed mutated 200 1.25ms`: bounded words, no text from the answer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}#{} ", self.phase.as_str(), self.hook.name, self.round)?;
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

    /// How the call ends in its span (src/traces.rs): bounded words only.
    fn span_end(&self, http_status: Option<u16>) -> CallEnd {
        let (outcome, error) = match self.outcome {
            CallOutcome::Allowed { .. } => ("allowed", None),
            CallOutcome::Denied { .. } => ("denied", None),
            CallOutcome::Error { reason, .. } => ("error", Some(reason)),
            CallOutcome::DryRunRefused => ("error", Some("dry_run_refused")),
        };
        CallEnd { round: self.round, mode: self.mode.as_str(), outcome, error, http_status }
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

/// One review on its way through the stages.
pub(crate) struct Review<'r> {
    pub(crate) snapshot: &'r Snapshot,
    pub(crate) request: &'r IncomingReview,
    pub(crate) budget: Budget,
    pub(crate) object: ObjectState<'r>,
    pub(crate) records: Records,
    pub(crate) explanation: Explanation,
    /// The CEL variables of matchConditions, converted once per object version.
    pub(crate) conditions: conditions::State,
    /// Live cluster state, in cluster mode.
    cluster: Option<&'r Cluster>,
    /// The request's namespace labels, looked up once, when a candidate needs them.
    namespace: NamespaceLabels,
    failed_open: u32,
    budget_exhausted: u32,
    calls: Vec<CallRecord>,
    /// Where shadow calls are cancelled and whether they are awaited.
    shadows: &'r Shadows,
    /// The shadow calls this review started.
    shadow: shadow::Pending,
    /// The review's span, parent of its calls' spans (none when not tracing).
    pub(crate) trace: Parent,
}

/// Dispatches one review within `budget`. `explanation` records the steps when enabled;
/// `cluster` is the live cluster state in cluster mode; the calls' spans are children of
/// `trace`. Shadow calls go on after the answer: returned with the outcome are those still
/// running (the `review` command awaits them to show their results; the server lets them go).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn review(
    snapshot: &Snapshot,
    cluster: Option<&Cluster>,
    request: &IncomingReview,
    stage: Endpoint,
    budget: Budget,
    explanation: Explanation,
    shadows: &Shadows,
    trace: Parent,
) -> (Outcome, shadow::Running) {
    let mut review = Review {
        snapshot,
        request,
        budget,
        object: ObjectState::new(request.object(), request.old_object())
            .limited_to(snapshot.settings.max_patched_object_bytes),
        records: Records::default(),
        explanation,
        conditions: conditions::State::default(),
        cluster,
        namespace: NamespaceLabels::NotNeeded,
        failed_open: 0,
        budget_exhausted: 0,
        calls: Vec::new(),
        shadows,
        shadow: shadow::Pending::default(),
        trace,
    };
    let mut result = Ok(());
    if matches!(stage, Endpoint::Mutate | Endpoint::Admit) {
        result = mutate::run_chain(&mut review).await;
    }
    if result.is_ok() && matches!(stage, Endpoint::Validate | Endpoint::Admit) {
        result = validate::fan_out(&mut review).await;
    }
    review.finish(result)
}

impl<'r> Review<'r> {
    fn finish(mut self, result: Result<(), Status>) -> (Outcome, shadow::Running) {
        let explaining = self.explanation.is_enabled();
        let final_object = if explaining { self.object.tree().cloned() } else { None };
        let (allowed, status, patch) = match result {
            Ok(()) => (true, None, self.object.combined_patch()),
            Err(status) => (false, Some(status), None),
        };
        let shadows = shadow::Running(self.shadow.decided(allowed));
        let answer = Answer {
            allowed,
            status,
            patch,
            audit_annotations: self.records.encoded_annotations(),
            warnings: self.records.warnings(),
        };
        // Full keys are for the explanation; the answer carries them encoded.
        let full_annotations = if explaining { self.records.annotations().clone() } else { BTreeMap::new() };
        let outcome = Outcome {
            answer,
            full_annotations,
            explanation: self.explanation,
            final_object,
            failed_open: self.failed_open,
            budget_exhausted: self.budget_exhausted,
            calls: self.calls,
        };
        (outcome, shadows)
    }

    /// The webhooks of one phase that may match: the index narrows the fleet to those whose
    /// rules can match; when explaining, every webhook, so the explanation says why each was
    /// skipped.
    /// Borrowed from the snapshot, which outlives the review.
    fn candidates(&self, phase: Phase) -> Vec<&'r Arc<Hook>> {
        let (snapshot, resource) = (self.snapshot, self.request.resource());
        match (phase, self.explanation.is_enabled()) {
            (Phase::Mutating, true) => snapshot.mutating.iter().collect(),
            (Phase::Validating, true) => snapshot.validating.iter().collect(),
            (Phase::Mutating, false) => {
                snapshot.mutating_candidates(&resource.group, &resource.resource).collect()
            }
            (Phase::Validating, false) => {
                snapshot.validating_candidates(&resource.group, &resource.resource).collect()
            }
        }
    }

    /// Looks up the labels of the request's namespace, once per review, if one of
    /// `candidates` has a namespaceSelector that reads them (§4.3): from the cluster in cluster
    /// mode (cache, else the API server, within the deadline budget), else from the
    /// configured Namespaces.
    async fn look_up_namespace(&mut self, candidates: &[&Arc<Hook>]) {
        if !matches!(self.namespace, NamespaceLabels::NotNeeded)
            || !matching::reads_namespace_labels(self.request)
            || !candidates.iter().any(|hook| matching::has_namespace_selector(hook))
        {
            return;
        }
        let name = &self.request.request.namespace;
        self.namespace = match self.cluster {
            None => match self.snapshot.namespaces.get(name) {
                Some(labels) => NamespaceLabels::Found(labels.clone()),
                None => NamespaceLabels::Missing { live: false },
            },
            Some(cluster) => {
                let lookup = cluster.namespaces.labels(name);
                let found = match self.budget.deadline() {
                    Some(deadline) => tokio::time::timeout_at(deadline, lookup).await.unwrap_or_else(|_| {
                        Err(format!(
                            "getting namespace {name:?} from the API server: deadline budget exhausted"
                        ))
                    }),
                    None => lookup.await,
                };
                match found {
                    Ok(Some(labels)) => NamespaceLabels::Found(labels),
                    Ok(None) => NamespaceLabels::Missing { live: true },
                    Err(message) => NamespaceLabels::Unavailable(message),
                }
            }
        };
    }

    /// `Ok(true)` if `hook` is to be called; a skip is explained. `Err`: the request fails.
    /// Rules and selectors first, then matchConditions (§4.0.7).
    async fn matches(&mut self, hook: &Hook, phase: Phase, round: u8) -> Result<bool, Status> {
        match self.decide(hook, phase).await {
            Ok(None) => Ok(true),
            Ok(Some(skip)) => {
                self.skipped(hook, phase, round, &skip);
                Ok(false)
            }
            Err(status) => {
                let message = status.message.clone().unwrap_or_default();
                tracing::warn!(webhook = %hook.name, phase = phase.as_str(), "request rejected: {}", crate::logging::Untrusted(&message));
                self.explanation.record(|| Step::NotCalled {
                    phase,
                    configuration: hook.configuration.clone(),
                    webhook: hook.name.clone(),
                    round,
                    outcome: format!("request rejected before any call: {message}"),
                });
                Err(status)
            }
        }
    }

    /// Whether `hook` matches: `Ok(None)` to call it, the skip, or `Err` if matching failed the
    /// request.
    async fn decide(&mut self, hook: &Hook, phase: Phase) -> Result<Option<Skip>, Status> {
        if let Some(skip) = matching::should_call(hook, self.request, &self.object, &self.namespace)? {
            return Ok(Some(skip));
        }
        conditions::evaluate(hook, self.request, &mut self.object, &mut self.conditions, self.cluster, phase)
            .await
    }

    fn skipped(&mut self, hook: &Hook, phase: Phase, round: u8, skip: &Skip) {
        self.explanation.record(|| Step::Skipped {
            phase,
            configuration: hook.configuration.clone(),
            webhook: hook.name.clone(),
            round,
            reason: skip.to_string(),
        });
    }

    /// What a webhook's answer leaves behind whatever its verdict: its audit annotations and
    /// warnings (docs/semantics.md §13, §14.2).
    fn keep_records(&mut self, hook: &Hook, response: &mut WebhookResponse) {
        self.records.webhook_annotations(&hook.name, response.audit_annotations.take());
        self.records.warn(response.warnings.take());
    }

    /// A webhook that gave no usable answer (`cause`), judged by its `failurePolicy`: the one
    /// place both stages turn a failure into a decision, annotate a fail-open and log it.
    /// `index` is the audit annotation's index (docs/semantics.md §14.3).
    fn failed(&mut self, hook: &Hook, phase: Phase, round: u8, index: usize, cause: &dyn Failure) -> Judged {
        let judgement = verdict::from_failure(hook, cause);
        let outcome = match &judgement {
            Judgement::FailedOpen => {
                self.failed_open += 1;
                let key = match phase {
                    Phase::Mutating => {
                        format!("failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{index}")
                    }
                    Phase::Validating => {
                        format!("failed-open.validating.webhook.admission.k8s.io/round_{round}_index_{index}")
                    }
                };
                self.records.annotate(key, hook.name.clone());
                format!("failed open (failurePolicy Ignore): {cause}")
            }
            _ => format!("failed (failurePolicy Fail): {cause}"),
        };
        // The error's text comes from the network or the webhook: escaped and cut. An ejected
        // webhook's calls are at debug: its ejection was logged once at warn.
        let logged = crate::logging::Untrusted(&outcome);
        if cause.reason() == "ejected" {
            tracing::debug!(webhook = %hook.name, phase = phase.as_str(), reason = cause.reason(), "webhook call {logged}");
        } else {
            tracing::warn!(webhook = %hook.name, phase = phase.as_str(), reason = cause.reason(), "webhook call {logged}");
        }
        let kind = CallOutcome::Error {
            reason: cause.reason(),
            code: cause.code(),
            failed_open: matches!(judgement, Judgement::FailedOpen),
        };
        Judged { judgement, outcome, kind }
    }

    /// A webhook the budget could not cover: answered by its failurePolicy without a call.
    fn out_of_budget(
        &mut self,
        hook: &Hook,
        phase: Phase,
        round: u8,
        index: usize,
        left: std::time::Duration,
    ) -> Judged {
        self.budget_exhausted += 1;
        let cause = BudgetExhausted { left, minimum: self.budget.minimum_call() };
        self.failed(hook, phase, round, index, &cause)
    }

    /// Records one webhook's turn, ends its span, and puts it into the explanation.
    fn explain_call(
        &mut self,
        hook: &Arc<Hook>,
        phase: Phase,
        round: u8,
        called: &mut Called,
        judged: Judged,
        mutation: Mutation,
    ) -> Judgement {
        let Judged { judgement, outcome, kind } = judged;
        let Mutation { patch, mutated } = mutation;
        let kind = match kind {
            CallOutcome::Allowed { .. } => CallOutcome::Allowed { mutated },
            other => other,
        };
        let record = CallRecord {
            hook: hook.clone(),
            phase,
            round,
            outcome: kind,
            latency: called.latency,
            sent: called.timeout.is_some(),
            mode: CallMode::of(hook, self.request),
        };
        if let Some(span) = called.span.take() {
            span.end(record.span_end(called.http_status));
        }
        self.calls.push(record);
        self.explanation.record(|| match &called.timeout {
            Some(timeout) => Step::Called {
                phase,
                configuration: hook.configuration.clone(),
                webhook: hook.name.clone(),
                round,
                timeout: timeout.clone(),
                latency_ms: millis(called.latency),
                outcome,
                patch: patch.as_ref().map(crate::patch::Patch::annotation_json),
                mutated,
            },
            None => Step::NotCalled {
                phase,
                configuration: hook.configuration.clone(),
                webhook: hook.name.clone(),
                round,
                outcome,
            },
        });
        judgement
    }
}

/// Why a webhook gave no usable answer: words for the message, and a bounded reason for logs
/// and metrics.
pub(crate) trait Failure: fmt::Display {
    fn reason(&self) -> &'static str;
    /// The status code the API server's metrics record for it (0: an internal error).
    fn code(&self) -> u16;
}

impl Failure for crate::upstream::CallError {
    fn reason(&self) -> &'static str {
        crate::upstream::CallError::reason(self)
    }

    fn code(&self) -> u16 {
        crate::upstream::CallError::code(self)
    }
}

/// Not called: the deadline budget could not give the webhook a useful minimum.
struct BudgetExhausted {
    left: std::time::Duration,
    minimum: std::time::Duration,
}

impl fmt::Display for BudgetExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not called: deadline budget exhausted ({} ms of the caller's timeout left, less than minimumCallTimeout {} ms)",
            self.left.as_millis(),
            self.minimum.as_millis()
        )
    }
}

impl Failure for BudgetExhausted {
    fn reason(&self) -> &'static str {
        "budget_exhausted"
    }

    /// The API server would have timed out calling it: a transport error, 503.
    fn code(&self) -> u16 {
        503
    }
}

/// What a mutating webhook's call did to the object, for the explanation.
#[derive(Default)]
pub(crate) struct Mutation {
    /// The patch applied; written out only for an explanation.
    pub(crate) patch: Option<crate::patch::Patch>,
    /// Whether it changed the object.
    pub(crate) mutated: bool,
}

/// A judged webhook outcome, its words for the explanation, and what is recorded of it.
pub(crate) struct Judged {
    pub(crate) judgement: Judgement,
    pub(crate) outcome: String,
    pub(crate) kind: CallOutcome,
}

impl Judged {
    pub(crate) fn allowed() -> Self {
        Self {
            judgement: Judgement::Continue,
            outcome: "allowed".into(),
            kind: CallOutcome::Allowed { mutated: false },
        }
    }

    pub(crate) fn denied(status: Status) -> Self {
        let outcome = format!("denied: {}", status.message.as_deref().unwrap_or_default());
        let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        Self { judgement: Judgement::Fail(status), outcome, kind: CallOutcome::Denied { code } }
    }

    /// A warn-mode webhook's denial: the request goes on, the denial is returned as a warning.
    pub(crate) fn warned(status: Status) -> Self {
        let outcome = format!(
            "denied, returned as a warning (mode warn): {}",
            status.message.as_deref().unwrap_or_default()
        );
        let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        Self { judgement: Judgement::Continue, outcome, kind: CallOutcome::Denied { code } }
    }

    pub(crate) fn dry_run_refused(status: Status) -> Self {
        Self {
            judgement: Judgement::Fail(status),
            outcome: "refused: dry run".into(),
            kind: CallOutcome::DryRunRefused,
        }
    }

    /// An internal error of the API server's own making (metric code 0).
    pub(crate) fn internal(status: Status, reason: &'static str) -> Self {
        let outcome = format!("error: {}", status.message.as_deref().unwrap_or_default());
        Self {
            judgement: Judgement::Fail(status),
            outcome,
            kind: CallOutcome::Error { reason, code: 0, failed_open: false },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Millis;

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
