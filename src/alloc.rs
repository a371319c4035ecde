//! Memory back to the operating system once a burst is over.
//!
//! The binary's allocator (mimalloc, `main.rs`) keeps what a thread frees in that thread's
//! heap, and returns it only when that thread allocates or frees again. A runtime worker that
//! parks after a burst would keep the burst's memory until the next one: with 2,000 reviews in
//! flight the process grew from 25 to about 170 MiB and stayed there (`loadtest/README.md`,
//! inflight-2000). So once no review has been admitted for a second ([`note_review`],
//! [`watch`]), every worker is woken and, as it parks again ([`on_park`]), has its heap
//! collected and the free memory purged. Twice, a second apart, for the blocks other threads
//! freed into a heap after it was collected. Under load nothing is done (the memory is reused),
//! and an idle gateway is not woken at all.
//!
//! The binary installs the collection ([`install`]); without it (tests, the library used
//! elsewhere) nothing is done.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How often [`watch`] looks for the end of a burst.
const TICK: Duration = Duration::from_secs(1);
/// Quiet ticks after a burst that each collect every worker.
const COLLECTIONS: u32 = 2;

static COLLECT: OnceLock<fn(bool)> = OnceLock::new();
/// Reviews admitted so far.
static REVIEWS: AtomicU64 = AtomicU64::new(0);
/// Bumped to ask every worker for a collection when it next parks.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Sets the allocator's collection: `collect(force)` frees what the calling thread's heap
/// holds empty and purges free memory (all of it if `force`). The first call wins.
pub fn install(collect: fn(bool)) {
    let _ = COLLECT.set(collect);
}

/// A review was admitted: a burst is going on.
pub(crate) fn note_review() {
    REVIEWS.fetch_add(1, Ordering::Relaxed);
}

/// A runtime worker is parking: collect its heap if a collection was asked for since its last.
pub(crate) fn on_park() {
    thread_local! {
        static DONE: Cell<u64> = const { Cell::new(0) };
    }
    let epoch = EPOCH.load(Ordering::Relaxed);
    if DONE.get() != epoch {
        DONE.set(epoch);
        if let Some(collect) = COLLECT.get() {
            collect(true);
        }
    }
}

/// Every [`TICK`], sees whether reviews were admitted; after a burst, on each of the next
/// [`COLLECTIONS`] quiet ticks, asks for a collection and gives each of the runtime's
/// `workers` a task, so that each wakes and parks. Runs until dropped; does nothing without
/// [`install`].
pub(crate) async fn watch(workers: usize) {
    if COLLECT.get().is_none() {
        return;
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut bursts = Bursts::new(REVIEWS.load(Ordering::Relaxed));
    loop {
        tick.tick().await;
        if bursts.collect_now(REVIEWS.load(Ordering::Relaxed)) {
            EPOCH.fetch_add(1, Ordering::Relaxed);
            for _ in 0..workers {
                tokio::spawn(async {});
            }
        }
    }
}

/// When to collect, from the count of reviews admitted seen at each tick.
struct Bursts {
    seen: u64,
    /// Collections still owed to the last burst.
    owed: u32,
}

impl Bursts {
    fn new(reviews: u64) -> Self {
        Bursts { seen: reviews, owed: 0 }
    }

    /// Whether this tick should collect: a quiet tick after a burst, [`COLLECTIONS`] times.
    fn collect_now(&mut self, reviews: u64) -> bool {
        if reviews != self.seen {
            (self.seen, self.owed) = (reviews, COLLECTIONS);
            return false;
        }
        if self.owed == 0 {
            return false;
        }
        self.owed -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker collects once per request for it, when it parks; and not otherwise.
    #[test]
    fn a_parking_thread_collects_once_per_request() {
        static COLLECTED: AtomicU64 = AtomicU64::new(0);
        install(|force| {
            assert!(force);
            COLLECTED.fetch_add(1, Ordering::SeqCst);
        });
        std::thread::spawn(|| {
            on_park();
            assert_eq!(COLLECTED.load(Ordering::SeqCst), 0, "nothing asked yet");
            EPOCH.fetch_add(1, Ordering::SeqCst);
            on_park();
            on_park();
            assert_eq!(COLLECTED.load(Ordering::SeqCst), 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn quiet_ticks_after_a_burst_collect_twice_then_never_until_the_next() {
        let mut bursts = Bursts::new(0);
        let ticks: Vec<bool> = [0, 0, 5, 9, 9, 9, 9, 10, 10, 10, 10].map(|n| bursts.collect_now(n)).to_vec();
        assert_eq!(ticks, [false, false, false, false, true, true, false, false, true, true, false]);
    }
}
