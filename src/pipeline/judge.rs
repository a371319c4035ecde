//! The one judge: what a webhook's attempt amounts to. [`Verdict`] reads an attempt alike for
//! the enforced dispatchers and for shadow calls; [`Review::judge`] turns an enforced call's
//! verdict into the review's decision — its failurePolicy (§9.1), a denial (§9.2) or a
//! warn-mode warning, its patch (`patching.rs`), its annotations and warnings — and records
//! the call for the observer (`observe.rs`) and the explanation. A policy's evaluation is
//! judged here too ([`Review::judge_policy`]): the same call record, observer and explanation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::call::{Attempt, Called};
use super::context::Review;
use super::modes::CallMode;
use super::outcome::{CallOutcome, CallRecord, Caller};
use super::policy::mutating::MutatingResult;
use super::policy::{self, PolicyResult};
use super::verdict::{self, Judgement};
use super::{observe, patching};
use crate::config::compile::Hook;
use crate::explain::{millis, Phase, Step};
use crate::review::{Status, WebhookResponse};

/// Prefixed to a warn-mode webhook's denial returned as a warning.
pub(crate) const WARN_MODE_PREFIX: &str = "admission-gateway warn mode: ";

/// Why a webhook gave no usable answer: words for the message, and a bounded reason for logs
/// and metrics.
pub(crate) trait Failure: fmt::Display + Sync {
    fn reason(&self) -> &'static str;
    /// The status code the API server's metrics record for it (0: an internal error).
    fn code(&self) -> u16;
    /// Logged at debug rather than warn: the cause was reported once already (an ejected
    /// webhook's calls, whose ejection was logged when it happened).
    fn reported_before(&self) -> bool {
        false
    }
}

impl Failure for crate::upstream::CallError {
    fn reason(&self) -> &'static str {
        crate::upstream::CallError::reason(self)
    }

    fn code(&self) -> u16 {
        crate::upstream::CallError::code(self)
    }

    fn reported_before(&self) -> bool {
        matches!(self, crate::upstream::CallError::Ejected { .. })
    }
}

/// Not called: the deadline budget could not give the webhook a useful minimum.
#[derive(Debug)]
pub(crate) struct BudgetExhausted {
    pub(crate) left: Duration,
    pub(crate) minimum: Duration,
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

/// What a webhook's attempt says, read alike for enforced and shadow calls.
pub(crate) enum Verdict<'a> {
    /// Allowed: the answer, for its patch, annotations and warnings.
    Allowed(&'a mut WebhookResponse),
    /// `allowed: false`: the answer, and the status the request fails with (§9.2).
    Denied(&'a mut WebhookResponse, Status),
    /// No usable answer: judged by `failurePolicy`.
    Failed(&'a dyn Failure),
    /// Not called, the deadline budget being spent: judged by `failurePolicy`.
    OutOfBudget(&'a BudgetExhausted),
    /// Refused before calling whatever the `failurePolicy` (a dry run with side effects).
    Refused(&'a Status),
}

impl Attempt {
    /// What this attempt to call `hook` says.
    pub(crate) fn verdict(&mut self, hook: &Hook) -> Verdict<'_> {
        match self {
            Attempt::Answered(response) => {
                if response.allowed {
                    return Verdict::Allowed(response);
                }
                let status = verdict::rejection(&hook.name, response.status.as_ref());
                Verdict::Denied(response, status)
            }
            Attempt::CallError(error) => Verdict::Failed(error),
            Attempt::OutOfBudget(exhausted) => Verdict::OutOfBudget(exhausted),
            Attempt::Refused(status) => Verdict::Refused(status),
        }
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

    fn denied(status: Status) -> Self {
        let outcome = format!("denied: {}", status.message.as_deref().unwrap_or_default());
        let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        Self { judgement: Judgement::Fail(status), outcome, kind: CallOutcome::Denied { code } }
    }

    /// A warn-mode webhook's denial: the request goes on, the denial is returned as a warning.
    fn warned(status: Status) -> Self {
        let outcome = format!(
            "denied, returned as a warning (mode warn): {}",
            status.message.as_deref().unwrap_or_default()
        );
        let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        Self { judgement: Judgement::Continue, outcome, kind: CallOutcome::Denied { code } }
    }

    fn dry_run_refused(status: Status) -> Self {
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

/// Where one enforced webhook's turn stands in the review.
#[derive(Clone, Copy)]
pub(crate) struct Turn {
    pub(crate) phase: Phase,
    pub(crate) round: u8,
    /// The index of its audit annotations (docs/semantics.md §14.3, §12.4).
    pub(crate) index: usize,
}

impl Review<'_> {
    /// The one place an enforced webhook's attempt becomes the review's decision, for both
    /// dispatchers: judged, its answer's annotations and warnings kept, a mutating webhook's
    /// patch applied, and the call recorded. Returns how the review goes on and whether the
    /// object changed.
    pub(crate) async fn judge(
        &mut self,
        hook: &Arc<Hook>,
        turn: Turn,
        called: &mut Called,
    ) -> (Judgement, bool) {
        let mode = CallMode::of(hook, self.request);
        let mut mutation = Mutation::default();
        let judged = match called.attempt.verdict(hook) {
            Verdict::Refused(status) => Judged::dry_run_refused(status.clone()),
            Verdict::Failed(cause) => self.failed(hook, turn, cause),
            Verdict::OutOfBudget(cause) => {
                self.budget_exhausted += 1;
                self.failed(hook, turn, cause)
            }
            Verdict::Denied(response, status) => {
                self.keep_records(hook, response);
                if mode == CallMode::Warn {
                    let message = status.message.as_deref().unwrap_or_default();
                    self.records.warn(Some(vec![format!("{WARN_MODE_PREFIX}{message}")]));
                    Judged::warned(status)
                } else {
                    Judged::denied(status)
                }
            }
            Verdict::Allowed(response) => {
                self.keep_records(hook, response);
                match turn.phase {
                    Phase::Mutating => match self.apply_patch(hook, turn.round, response).await {
                        Ok(applied) => {
                            mutation = applied;
                            Judged::allowed()
                        }
                        Err(patching::PatchFailure::Internal(status)) => {
                            Judged::internal(status, "patch_failed")
                        }
                        Err(failure) => self.failed(hook, turn, &failure),
                    },
                    Phase::Validating => Judged::allowed(),
                }
            }
        };
        let changed = mutation.mutated;
        (self.record_call(hook, turn, mode, called, judged, mutation), changed)
    }

    /// A webhook that gave no usable answer (`cause`), judged by its `failurePolicy`:
    /// annotated when it fails open (docs/semantics.md §14.3) and logged.
    fn failed(&mut self, hook: &Hook, turn: Turn, cause: &dyn Failure) -> Judged {
        let judgement = verdict::from_failure(hook, cause);
        let failed_open = matches!(judgement, Judgement::FailedOpen);
        let outcome = if failed_open {
            self.failed_open += 1;
            let Turn { phase, round, index } = turn;
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
        } else {
            format!("failed (failurePolicy Fail): {cause}")
        };
        observe::call_failed(hook, turn.phase, cause, &outcome);
        let kind = CallOutcome::Error { reason: cause.reason(), code: cause.code(), failed_open };
        Judged { judgement, outcome, kind }
    }

    /// Records one webhook's turn for the observer, ends its span, and puts it into the
    /// explanation.
    fn record_call(
        &mut self,
        hook: &Arc<Hook>,
        turn: Turn,
        mode: CallMode,
        called: &mut Called,
        judged: Judged,
        mutation: Mutation,
    ) -> Judgement {
        let Judged { judgement, outcome, kind } = judged;
        let Turn { phase, round, .. } = turn;
        let Mutation { patch, mutated } = mutation;
        let kind = match kind {
            CallOutcome::Allowed { .. } => CallOutcome::Allowed { mutated },
            other => other,
        };
        let record = CallRecord {
            caller: Caller::Webhook(hook.clone()),
            phase,
            round,
            outcome: kind,
            latency: called.latency,
            sent: called.timeout.is_some(),
            mode,
        };
        observe::call_ended(called.span.take(), &record, called.http_status);
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

    /// The one place a policy's evaluation is judged, as a webhook's attempt is in
    /// [`Review::judge`]: observed (the API server's policy families, its span), explained,
    /// and by its mode — enforced (`true`: its decisions join the enforced policies' verdict,
    /// `policies.rs`), its denial returned as a warning (warn), or compared once the review is
    /// decided (shadow, and a policy that replaces a webhook). It becomes a call record for the
    /// log line, the recording and replay when it acted on the request (a binding matched, or
    /// an error denied or was ignored), unless shadowed: a shadow call is no call record.
    pub(crate) fn judge_policy(&mut self, result: &PolicyResult, mode: CallMode) -> bool {
        observe::policy_evaluated(result, mode, self.request.operation().as_str(), &self.trace);
        self.explanation.record(|| Step::Policy {
            phase: Phase::Validating,
            policy: result.policy.name.clone(),
            mode: mode.as_str(),
            steps: result.steps.clone(),
        });
        let denial = result.denials.first();
        if result.policy.replaces.is_some() {
            self.policies.paired(&result.policy, denial.is_some());
        }
        let enforced = match mode {
            CallMode::Enforce | CallMode::Canary => true,
            CallMode::Warn => {
                let verdict = policy::aggregate([result]);
                let mut warnings = verdict.warnings;
                if let Some(message) = verdict.denial.and_then(|status| status.message) {
                    warnings.push(format!("{WARN_MODE_PREFIX}{message}"));
                }
                self.records.warn(Some(warnings));
                for (key, value) in verdict.audit_annotations {
                    self.records.annotate(key, value);
                }
                false
            }
            CallMode::Shadow(shadow) => {
                self.policies.shadowed(&result.policy, shadow, denial.is_some());
                return false;
            }
        };
        let acted = result.matched || result.failed_open || denial.is_some();
        if acted {
            let outcome = match (denial, result.failed_open) {
                (Some(denial), _) => {
                    CallOutcome::Denied { code: denial.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0) }
                }
                (None, true) => CallOutcome::Error { reason: "policy_error", code: 0, failed_open: true },
                (None, false) => CallOutcome::Allowed { mutated: false },
            };
            self.calls.push(CallRecord {
                caller: Caller::Policy(Arc::clone(&result.policy)),
                phase: Phase::Validating,
                round: 0,
                outcome,
                latency: result.elapsed,
                sent: true,
                mode,
            });
        }
        enforced
    }

    /// A mutating policy's turn in round `round`, judged as [`Review::judge_policy`] judges a
    /// validating one: observed, explained, and a call record when it acted on the request
    /// (a binding matched, or an error was collected or ignored). Its mutations reached the
    /// object already when its mode applies them (`policy::mutating::dispatch`).
    pub(crate) fn judge_mutating_policy(&mut self, result: &MutatingResult, mode: CallMode, round: u8) {
        observe::mutating_policy_evaluated(result, mode, self.request.operation().as_str(), &self.trace);
        self.explanation.record(|| Step::Policy {
            phase: Phase::Mutating,
            policy: result.policy.name.clone(),
            mode: mode.as_str(),
            steps: result.steps.clone(),
        });
        if matches!(mode, CallMode::Shadow(_)) || !(result.matched || result.failed_open || result.errors > 0)
        {
            return;
        }
        let outcome = match (result.errors > 0, result.failed_open) {
            (true, _) => CallOutcome::Denied { code: 403 },
            (false, true) => CallOutcome::Error { reason: "policy_error", code: 0, failed_open: true },
            (false, false) => CallOutcome::Allowed { mutated: result.mutated },
        };
        self.calls.push(CallRecord {
            caller: Caller::Policy(Arc::clone(&result.policy)),
            phase: Phase::Mutating,
            round,
            outcome,
            latency: result.elapsed,
            sent: true,
            mode,
        });
    }

    /// What a webhook's answer leaves behind whatever its verdict: its audit annotations and
    /// warnings (docs/semantics.md §13, §14.2).
    fn keep_records(&mut self, hook: &Hook, response: &mut WebhookResponse) {
        self.records.webhook_annotations(&hook.name, response.audit_annotations.take());
        self.records.warn(response.warnings.take());
    }
}
