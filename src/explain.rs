//! The explanation of one review's dispatch, for people: which webhooks matched or were
//! skipped and why, each call's latency and outcome, the patches. Recorded only when asked for
//! (the `review` command, the demo); it never holds object contents, only patches. (Not to be
//! confused with distributed tracing.)

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Which dispatcher a step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    Mutating,
    Validating,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Mutating => "mutating",
            Self::Validating => "validating",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub(crate) enum Step {
    /// The request is never sent to webhooks.
    Exempt {
        phase: Phase,
        reason: String,
    },
    Skipped {
        phase: Phase,
        configuration: String,
        webhook: String,
        round: u8,
        reason: String,
    },
    Called {
        phase: Phase,
        configuration: String,
        webhook: String,
        round: u8,
        /// The `timeout` query parameter sent.
        timeout: String,
        #[serde(rename = "latencyMs")]
        latency_ms: f64,
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
        mutated: bool,
    },
    /// A webhook called in shadow (mode shadow, or a canary not enforced this time): off the
    /// critical path, its outcome compared with the decision, never obeyed.
    Shadow {
        phase: Phase,
        configuration: String,
        webhook: String,
        round: u8,
        mode: &'static str,
        outcome: String,
    },
    /// A ValidatingAdmissionPolicy evaluated: which bindings matched, and why each
    /// validation passed or failed.
    Policy {
        phase: Phase,
        policy: String,
        mode: &'static str,
        steps: Vec<String>,
    },
    /// A webhook not called because of a pre-call check (dry run, missing client...).
    NotCalled {
        phase: Phase,
        configuration: String,
        webhook: String,
        round: u8,
        outcome: String,
    },
}

/// The steps of one review, in order.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Explanation {
    #[serde(skip)]
    enabled: bool,
    pub(crate) steps: Vec<Step>,
}

impl Explanation {
    pub(crate) fn enabled() -> Self {
        Self { enabled: true, steps: Vec::new() }
    }

    pub(crate) fn disabled() -> Self {
        Self::default()
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Records a step; `step` is only built when tracing is on.
    pub(crate) fn record(&mut self, step: impl FnOnce() -> Step) {
        if self.enabled {
            self.steps.push(step());
        }
    }
}

pub(crate) fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.steps {
            match step {
                Step::Exempt { phase, reason } => writeln!(f, "  {phase:?}: exempt: {reason}")?,
                Step::Skipped { phase, configuration, webhook, round, reason } => {
                    writeln!(f, "  {phase:?} round {round}: skip {configuration}/{webhook}: {reason}")?
                }
                Step::Called {
                    phase,
                    configuration,
                    webhook,
                    round,
                    timeout,
                    latency_ms,
                    outcome,
                    patch,
                    mutated,
                } => {
                    // The latency stands apart from the outcome: a denial's message is quoted whole.
                    writeln!(
                        f,
                        "  {phase:?} round {round}: call {configuration}/{webhook} (timeout={timeout}, {latency_ms} ms{}): {outcome}",
                        if *mutated { ", object changed" } else { "" }
                    )?;
                    if let Some(patch) = patch {
                        writeln!(f, "      patch: {patch}")?;
                    }
                }
                Step::Shadow { phase, configuration, webhook, round, mode, outcome } => {
                    writeln!(f, "  {phase:?} round {round}: {mode} {configuration}/{webhook}: {outcome}")?
                }
                Step::NotCalled { phase, configuration, webhook, round, outcome } => {
                    writeln!(f, "  {phase:?} round {round}: not called {configuration}/{webhook}: {outcome}")?
                }
                Step::Policy { phase, policy, mode, steps } => {
                    let mode = if *mode == "enforce" { String::new() } else { format!(" (mode {mode})") };
                    let phase = match phase {
                        Phase::Mutating => "Mutating",
                        Phase::Validating => "Validating",
                    };
                    writeln!(f, "  {phase}: policy {policy}{mode}")?;
                    for step in steps {
                        writeln!(f, "      {step}")?;
                    }
                }
            }
        }
        Ok(())
    }
}
