//! Fast failure: a breaker per webhook. After `ejectAfterFailures` consecutive calls that got
//! no answer at all (refused or reset connections, TLS failures, timeouts) the webhook is
//! ejected for `ejectFor`: its calls fail at once, as [`CallError::Ejected`] carrying the last
//! real error, and `failurePolicy` judges them exactly as it judged that error — the API
//! server's decision without the wait. Then one call is let through as a probe (half-open):
//! an answer of any kind closes the breaker, another failure ejects it again. Denials and
//! error statuses are answers: they never count.
//!
//! Breakers live in the [`Clients`](super::Clients) registry, keyed by webhook id and URL,
//! so they outlast configuration reloads that keep the webhook.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::CallError;

/// `ejectAfterFailures` and `ejectFor` of the GatewayConfig.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Consecutive failures that eject; 0 turns the breaker off.
    pub(crate) failures: u32,
    pub(crate) eject_for: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { failures: 5, eject_for: Duration::from_secs(10) }
    }
}

/// What a breaker reports of itself (`/metrics`, `/readyz?verbose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    Closed,
    Open,
    HalfOpen,
}

impl Position {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Position::Closed => "closed",
            Position::Open => "open",
            Position::HalfOpen => "half-open",
        }
    }
}

#[derive(Debug)]
enum State {
    Closed {
        failures: u32,
    },
    /// Ejected until `until`; `probing` once a probe is out.
    Open {
        since: SystemTime,
        until: Instant,
        probing: bool,
        failures: u32,
        last: Last,
    },
}

/// The last real error, replayed by ejected calls.
#[derive(Clone, Debug)]
struct Last {
    text: String,
    code: u16,
    reason: &'static str,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    state: Mutex<State>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker { state: Mutex::new(State::Closed { failures: 0 }) }
    }
}

/// Leave to call, from [`Breaker::admit`]. Report the attempt with [`Permit::done`]; a permit
/// dropped unreported (its review abandoned) frees the probe slot for the next call.
pub(crate) struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
}

impl Breaker {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Leave to call now, or the error an ejected webhook answers with at once.
    pub(crate) fn admit(&self, policy: Policy) -> Result<Permit<'_>, CallError> {
        if policy.failures == 0 {
            return Ok(Permit { breaker: self, probe: false });
        }
        let mut state = self.lock();
        match &mut *state {
            State::Closed { .. } => Ok(Permit { breaker: self, probe: false }),
            State::Open { until, probing, .. } if !*probing && Instant::now() >= *until => {
                *probing = true;
                Ok(Permit { breaker: self, probe: true })
            }
            State::Open { since, failures, last, .. } => Err(CallError::Ejected {
                last: last.text.clone(),
                code: last.code,
                last_reason: last.reason,
                since: crate::upstream::x509::rfc3339(
                    since.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
                ),
                failures: *failures,
            }),
        }
    }

    pub(crate) fn position(&self) -> Position {
        match &*self.lock() {
            State::Closed { .. } => Position::Closed,
            State::Open { probing: true, .. } => Position::HalfOpen,
            State::Open { .. } => Position::Open,
        }
    }

    /// Since when it has been ejected, for `/readyz?verbose`.
    pub(crate) fn ejected_since(&self) -> Option<SystemTime> {
        match &*self.lock() {
            State::Open { since, .. } => Some(*since),
            State::Closed { .. } => None,
        }
    }
}

/// Whether an error means the webhook could not be reached or did not answer in time.
pub(crate) fn counts(error: &CallError) -> bool {
    matches!(
        error,
        CallError::Transport { .. }
            | CallError::Timeout { .. }
            | CallError::Tls { .. }
            | CallError::BodyRead(_)
    )
}

impl Permit<'_> {
    /// Reports how the call went: `None` for an answer (of any kind), else its error.
    pub(crate) fn done(self, policy: Policy, failure: Option<&CallError>) -> Transition {
        let breaker = self.breaker;
        let probe = self.probe;
        std::mem::forget(self);
        if policy.failures == 0 {
            return Transition::None;
        }
        let mut state = breaker.lock();
        match (failure.filter(|error| counts(error)), &mut *state) {
            (None, State::Closed { failures }) => {
                *failures = 0;
                Transition::None
            }
            (None, State::Open { .. }) if probe => {
                *state = State::Closed { failures: 0 };
                Transition::Closed
            }
            // A call let through before the ejection answered: the probe decides.
            (None, State::Open { .. }) => Transition::None,
            (Some(error), State::Closed { failures }) => {
                *failures += 1;
                if *failures >= policy.failures {
                    let failures = *failures;
                    *state = open(policy, failures, error);
                    Transition::Ejected
                } else {
                    Transition::None
                }
            }
            (Some(error), State::Open { failures, .. }) if probe => {
                let failures = *failures + 1;
                *state = open(policy, failures, error);
                Transition::Ejected
            }
            (Some(_), State::Open { .. }) => Transition::None,
        }
    }
}

fn open(policy: Policy, failures: u32, error: &CallError) -> State {
    State::Open {
        since: SystemTime::now(),
        until: Instant::now() + policy.eject_for,
        probing: false,
        failures,
        last: Last { text: error.to_string(), code: error.code(), reason: error.reason() },
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe {
            if let State::Open { probing, .. } = &mut *self.breaker.lock() {
                *probing = false;
            }
        }
    }
}

/// What a reported call changed, for the log line and the ejection counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    None,
    Ejected,
    Closed,
}

/// Breakers by webhook id and URL.
#[derive(Default)]
pub(crate) struct Breakers {
    by_webhook: Mutex<std::collections::HashMap<(String, String), Arc<Breaker>>>,
}

impl Breakers {
    pub(crate) fn get(&self, id: &str, url: &str) -> Arc<Breaker> {
        let mut map = self.by_webhook.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry((id.to_owned(), url.to_owned())).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> CallError {
        CallError::Transport {
            url: "https://127.0.0.1:1/v".into(),
            message: "dial tcp 127.0.0.1:1: connect: connection refused".into(),
        }
    }

    fn call(breaker: &Breaker, policy: Policy, failure: Option<CallError>) -> Result<Transition, CallError> {
        let permit = breaker.admit(policy)?;
        Ok(permit.done(policy, failure.as_ref()))
    }

    /// Paused time (`start_paused`): the breaker reads `tokio::time::Instant::now()`, so the
    /// test moves the clock itself and each step is exact, however loaded the machine.
    #[tokio::test(start_paused = true)]
    async fn ejects_after_consecutive_failures_probes_and_closes() {
        let policy = Policy { failures: 3, eject_for: Duration::from_secs(10) };
        let just_before = policy.eject_for - Duration::from_millis(1);
        let breaker = Breaker::default();
        // Answers in between reset the count; denials and error statuses are answers.
        call(&breaker, policy, Some(refused())).unwrap();
        call(&breaker, policy, Some(refused())).unwrap();
        call(&breaker, policy, Some(CallError::HttpStatus { code: 500, message: "x".into() })).unwrap();
        call(&breaker, policy, Some(refused())).unwrap();
        call(&breaker, policy, Some(refused())).unwrap();
        assert_eq!(breaker.position(), Position::Closed);
        assert_eq!(call(&breaker, policy, Some(refused())).unwrap(), Transition::Ejected);
        assert_eq!(breaker.position(), Position::Open);

        // Ejected: the last real error, at once.
        let error = call(&breaker, policy, None).unwrap_err();
        assert_eq!(error.reason(), "ejected");
        assert_eq!(error.code(), refused().code());
        let text = error.to_string();
        assert!(text.starts_with(&refused().to_string()), "{text}");
        assert!(text.contains("ejected by admission-gateway since 20"), "{text}");
        assert!(text.contains("after 3 consecutive failures"), "{text}");

        // Still ejected a millisecond before ejectFor is over.
        tokio::time::advance(just_before).await;
        assert!(breaker.admit(policy).is_err(), "probed before ejectFor");
        assert_eq!(breaker.position(), Position::Open);

        // At ejectFor: one probe; the others still fail fast while it is out.
        tokio::time::advance(Duration::from_millis(1)).await;
        let probe = breaker.admit(policy).expect("the probe");
        assert_eq!(breaker.position(), Position::HalfOpen);
        assert!(breaker.admit(policy).is_err());
        // A failed probe ejects again, for another whole ejectFor from the failure.
        assert_eq!(probe.done(policy, Some(&refused())), Transition::Ejected);
        tokio::time::advance(just_before).await;
        assert!(breaker.admit(policy).is_err(), "the second ejection was shorter than ejectFor");
        tokio::time::advance(Duration::from_millis(1)).await;
        // A probe dropped unreported (abandoned review) frees the slot.
        drop(breaker.admit(policy).expect("a probe"));
        assert_eq!(breaker.position(), Position::Open);
        assert_eq!(call(&breaker, policy, None).unwrap(), Transition::Closed);
        assert_eq!(breaker.position(), Position::Closed);
        assert!(breaker.ejected_since().is_none());
    }

    /// A call let through before the ejection that answers afterwards does not close the
    /// breaker: only the probe decides (paused time, as above).
    #[tokio::test(start_paused = true)]
    async fn only_the_probe_closes_an_ejected_breaker() {
        let policy = Policy { failures: 1, eject_for: Duration::from_secs(10) };
        let breaker = Breaker::default();
        let early = breaker.admit(policy).expect("closed");
        assert_eq!(call(&breaker, policy, Some(refused())).unwrap(), Transition::Ejected);
        assert_eq!(early.done(policy, None), Transition::None);
        assert_eq!(breaker.position(), Position::Open);
        tokio::time::advance(policy.eject_for).await;
        assert_eq!(call(&breaker, policy, None).unwrap(), Transition::Closed);
    }

    #[test]
    fn zero_failures_turns_it_off() {
        let policy = Policy { failures: 0, eject_for: Duration::from_secs(10) };
        let breaker = Breaker::default();
        for _ in 0..100 {
            call(&breaker, policy, Some(refused())).unwrap();
        }
        assert_eq!(breaker.position(), Position::Closed);
    }
}
