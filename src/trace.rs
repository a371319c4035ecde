//! A readable account of one review's dispatch: which webhooks matched or were skipped and
//! why, each call's latency and outcome, the patches. Recorded only when asked for (the
//! `review` command, the demo); it never holds object contents, only patches.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Which dispatcher a step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Mutating,
    Validating,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum Step {
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
pub struct Trace {
    #[serde(skip)]
    enabled: bool,
    pub steps: Vec<Step>,
}

impl Trace {
    pub fn enabled() -> Self {
        Self { enabled: true, steps: Vec::new() }
    }

    pub fn disabled() -> Self {
        Self::default()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Records a step; `step` is only built when tracing is on.
    pub fn record(&mut self, step: impl FnOnce() -> Step) {
        if self.enabled {
            self.steps.push(step());
        }
    }

    pub fn extend(&mut self, other: Trace) {
        self.steps.extend(other.steps);
    }
}

pub fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

impl fmt::Display for Trace {
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
                    writeln!(
                        f,
                        "  {phase:?} round {round}: call {configuration}/{webhook} (timeout={timeout}): {outcome} in {latency_ms} ms{}",
                        if *mutated { ", object changed" } else { "" }
                    )?;
                    if let Some(patch) = patch {
                        writeln!(f, "      patch: {patch}")?;
                    }
                }
                Step::NotCalled { phase, configuration, webhook, round, outcome } => {
                    writeln!(f, "  {phase:?} round {round}: not called {configuration}/{webhook}: {outcome}")?
                }
            }
        }
        Ok(())
    }
}
