//! The pace of a replay (`--rate`).

use std::time::Duration;

/// At most `rate` reviews a second, whoever sends them.
pub(super) struct Pace {
    ticks: tokio::sync::Mutex<tokio::time::Interval>,
}

impl Pace {
    pub(super) fn new(rate: u32) -> Self {
        let period = Duration::from_secs(1) / rate.max(1);
        let mut ticks = tokio::time::interval(period);
        // Late ticks are not made up for with a burst.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Pace { ticks: tokio::sync::Mutex::new(ticks) }
    }

    pub(super) async fn wait(&self) {
        self.ticks.lock().await.tick().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_pace_sends_at_most_rate_a_second() {
        let pace = Pace::new(10);
        let began = tokio::time::Instant::now();
        for _ in 0..21 {
            pace.wait().await;
        }
        assert_eq!(began.elapsed(), Duration::from_secs(2), "the first at once, then one each 100 ms");
    }
}
