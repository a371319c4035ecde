//! The deadline budget of one review: what is left of the caller's `?timeout=`, less a safety
//! margin, shared by every webhook call so the answer reaches the caller before it gives up.
//!
//! Each call gets the smaller of its own `timeoutSeconds` and what is left. A webhook that can
//! no longer be given [`Settings::minimum_call_timeout`] is not called: its `failurePolicy`
//! answers at once. This is a deliberate difference from kube-apiserver, which lets the calls
//! run into the request's deadline and then fails the whole request, even when every slow
//! webhook is `Ignore` (docs/differences.md, "Deadline budget").

use std::time::Duration;

use tokio::time::Instant;

use crate::config::Settings;

/// A caller's timeout above this is taken as this (the API server never sends more than 30 s;
/// the cap keeps `received + timeout` far from `Instant`'s limits).
pub(crate) const MAX_CALLER_TIMEOUT: Duration = Duration::from_secs(3600);
/// The margin is never more than this fraction of the caller's timeout (1/10).
const MARGIN_DIVISOR: u32 = 10;

/// How long the calls of one review may take, in total.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// `None`: the caller gave no timeout; only each webhook's own applies.
    deadline: Option<Instant>,
    minimum_call: Duration,
}

/// What the budget allows one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Call, and give up at this instant (`None`: no limit but the client's own).
    Until(Option<Instant>),
    /// Not worth calling: this little was left.
    Exhausted { left: Duration },
}

impl Budget {
    /// The budget of a review received at `received` with the caller's `timeout`.
    pub(crate) fn new(received: Instant, timeout: Option<Duration>, settings: &Settings) -> Self {
        let deadline = timeout.map(|timeout| {
            let timeout = timeout.min(MAX_CALLER_TIMEOUT);
            let margin = settings.deadline_margin.min(timeout / MARGIN_DIVISOR);
            received + (timeout - margin)
        });
        Self { deadline, minimum_call: settings.minimum_call_timeout }
    }

    /// No caller deadline (the `review` command without `--timeout`).
    pub(crate) fn unlimited(settings: &Settings) -> Self {
        Self { deadline: None, minimum_call: settings.minimum_call_timeout }
    }

    /// When the budget runs out; `None` without a caller deadline.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The least a call is worth making with.
    pub(crate) fn minimum_call(&self) -> Duration {
        self.minimum_call
    }

    /// What a webhook with this own timeout gets, at `now`.
    pub(crate) fn grant(&self, own_timeout: Option<Duration>, now: Instant) -> Grant {
        let own = own_timeout.and_then(|timeout| now.checked_add(timeout));
        let Some(deadline) = self.deadline else { return Grant::Until(own) };
        if own.is_some_and(|own| own <= deadline) {
            return Grant::Until(own);
        }
        let left = deadline.saturating_duration_since(now);
        if left < self.minimum_call {
            Grant::Exhausted { left }
        } else {
            Grant::Until(Some(deadline))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn settings(margin: Duration, minimum: Duration) -> Settings {
        Settings { deadline_margin: margin, minimum_call_timeout: minimum, ..Settings::default() }
    }

    #[test]
    fn the_margin_is_kept_back_and_is_at_most_a_tenth_of_the_timeout() {
        let now = Instant::now();
        let default = Settings::default();
        // 30 s from the API server: 29 s of budget.
        let budget = Budget::new(now, Some(30 * S), &default);
        assert_eq!(budget.grant(Some(60 * S), now), Grant::Until(Some(now + 29 * S)));
        // 2 s: the margin shrinks to 200 ms.
        let budget = Budget::new(now, Some(2 * S), &default);
        assert_eq!(budget.grant(Some(10 * S), now), Grant::Until(Some(now + Duration::from_millis(1800))));
    }

    #[test]
    fn a_call_gets_its_own_timeout_when_it_fits_and_what_is_left_otherwise() {
        let now = Instant::now();
        let budget = Budget::new(now, Some(30 * S), &settings(S, Duration::from_millis(100)));
        assert_eq!(budget.grant(Some(8 * S), now), Grant::Until(Some(now + 8 * S)));
        let later = now + 24 * S;
        assert_eq!(budget.grant(Some(8 * S), later), Grant::Until(Some(now + 29 * S)));
        assert_eq!(budget.grant(None, later), Grant::Until(Some(now + 29 * S)));
    }

    #[test]
    fn less_than_the_minimum_left_exhausts_the_budget() {
        let now = Instant::now();
        let budget = Budget::new(now, Some(10 * S), &settings(S, Duration::from_millis(500)));
        let late = now + Duration::from_millis(8600);
        assert_eq!(budget.grant(Some(5 * S), late), Grant::Exhausted { left: Duration::from_millis(400) });
        // Past the deadline: nothing left.
        assert_eq!(budget.grant(Some(5 * S), now + 20 * S), Grant::Exhausted { left: Duration::ZERO });
        // A webhook whose own timeout still fits is called, however little is left overall.
        let tight = Budget::new(now, Some(10 * S), &settings(Duration::ZERO, 2 * S));
        assert_eq!(
            tight.grant(Some(S), now + 8500 * Duration::from_millis(1)),
            Grant::Until(Some(now + 9500 * Duration::from_millis(1)))
        );
    }

    /// The budget against the clock itself, with paused time (`start_paused`): the test moves
    /// `tokio::time::Instant::now()`, which is what `Budget::new` and `grant` are given.
    #[tokio::test(start_paused = true)]
    async fn the_budget_runs_down_with_the_clock() {
        let budget = Budget::new(Instant::now(), Some(5 * S), &settings(S / 2, S / 2));
        assert_eq!(budget.grant(Some(2 * S), Instant::now()), Grant::Until(Some(Instant::now() + 2 * S)));
        tokio::time::advance(4 * S).await;
        // 4.5 s of budget, 4 s gone: what is left, not the call's own 2 s.
        assert_eq!(budget.grant(Some(2 * S), Instant::now()), Grant::Until(budget.deadline()));
        tokio::time::advance(S / 10).await;
        assert_eq!(
            budget.grant(Some(2 * S), Instant::now()),
            Grant::Exhausted { left: Duration::from_millis(400) }
        );
    }

    #[test]
    fn a_hostile_timeout_cannot_overflow_the_clock() {
        let now = Instant::now();
        let budget = Budget::new(now, Some(Duration::MAX), &Settings::default());
        assert_eq!(budget.grant(Some(10 * S), now), Grant::Until(Some(now + 10 * S)));
        assert_eq!(budget.grant(Some(Duration::MAX), now), Grant::Until(Some(now + MAX_CALLER_TIMEOUT - S)));
        assert_eq!(
            Budget::unlimited(&Settings::default()).grant(Some(Duration::MAX), now),
            Grant::Until(None)
        );
    }
}
