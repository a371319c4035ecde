//! Memory back to the operating system once a burst is over.
//!
//! The binary's allocator (mimalloc, `main.rs`) keeps what a thread frees in that thread's
//! heap, and returns it only when that thread allocates or frees again. A runtime worker that
//! parks after a burst would keep the burst's memory until the next one: with 2,000 reviews in
//! flight the process grew from 25 to about 170 MiB and stayed there (`loadtest/README.md`,
//! inflight-2000). So once no review has been admitted for a second ([`note_review`],
//! [`watch`]), every runtime thread (the serving threads of `server/threads.rs` and the control
//! runtime's workers) is woken and, as it parks again ([`on_park`]), has its heap
//! collected and the free memory purged. Twice, a second apart, for the blocks other threads
//! freed into a heap after it was collected; and twice more, 95 and 190 s after, as the
//! upstream connections the burst left idle in the pools are closed (between 90 and 180 s
//! after: [`AFTER_IDLE_CONNECTIONS`]). Under load nothing is done
//! (the memory is reused), and an idle gateway is woken by nothing but the one-second tick.
//!
//! The binary installs the collection ([`install`]); without it (tests, the library used
//! elsewhere) nothing is done.
//!
//! Transparent huge pages are turned off for the process ([`disable_transparent_huge_pages`],
//! and mimalloc's `no_thp` feature keeps it from asking for them). With them, the kernel backs
//! the allocator's sparse, partly purged regions with whole 2 MiB pages, in the background:
//! measured on inflight-2000, idle RSS 22 against 13 MiB, peak 282 against 206 MiB, and after
//! the burst the RSS crept from 49 to 106 MiB in 90 s with no review at all, where without
//! them it stayed at 26 MiB.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How often [`watch`] looks for the end of a burst.
const TICK: Duration = Duration::from_secs(1);
/// Quiet ticks after a burst that each collect every worker.
const COLLECTIONS: u32 = 2;
/// The quiet ticks that collect once more, for the upstream connections the burst left idle in
/// the pools: they are closed 90 s after they went idle at the earliest (`upstream.rs`), and
/// at the latest at the pool's first eviction round after that — hyper-util's rounds run every
/// 90 s, so up to 180 s after (`hyper-util/src/client/legacy/pool.rs`, `spawn_idle_interval`).
/// Measured (inflight-2000): 42 connections left idle were still open at +130 s and closed by
/// +190 s, and the one collection at 95 s had given nothing back.
const AFTER_IDLE_CONNECTIONS: [u64; 2] = [95, 190];

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

/// Turns transparent huge pages off for the whole process (`prctl(PR_SET_THP_DISABLE)`, which
/// applies to every mapping of the process, existing ones too). Best effort: on failure, or
/// off Linux, nothing changes.
pub fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
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
/// `workers`, and each of the `others` runtimes (the serving threads'), a task, so that each
/// wakes and parks. Runs until dropped; does nothing without [`install`].
pub(crate) async fn watch(workers: usize, others: Vec<tokio::runtime::Handle>) {
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
            for runtime in &others {
                runtime.spawn(async {});
            }
        }
    }
}

/// When to collect, from the count of reviews admitted seen at each tick.
struct Bursts {
    seen: u64,
    /// Quiet ticks since the last review, if there was one since the start.
    quiet: Option<u64>,
}

impl Bursts {
    fn new(reviews: u64) -> Self {
        Bursts { seen: reviews, quiet: None }
    }

    /// Whether this tick should collect: the first [`COLLECTIONS`] quiet ticks after a burst,
    /// and once more when the idle upstream connections it left have been closed.
    fn collect_now(&mut self, reviews: u64) -> bool {
        if reviews != self.seen {
            (self.seen, self.quiet) = (reviews, Some(0));
            return false;
        }
        let Some(quiet) = self.quiet.as_mut() else { return false };
        *quiet += 1;
        *quiet <= u64::from(COLLECTIONS) || AFTER_IDLE_CONNECTIONS.contains(quiet)
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
    fn quiet_ticks_after_a_burst_collect_twice_and_once_after_the_pools_idle_out() {
        let mut bursts = Bursts::new(0);
        let ticks: Vec<bool> = [0, 0, 5, 9, 9, 9, 9, 10, 10, 10, 10].map(|n| bursts.collect_now(n)).to_vec();
        assert_eq!(ticks, [false, false, false, false, true, true, false, false, true, true, false]);
        let later: Vec<usize> = (4..300).filter(|_| bursts.collect_now(10)).collect();
        assert_eq!(
            later,
            AFTER_IDLE_CONNECTIONS.map(|tick| tick as usize),
            "the quiet ticks after the last burst, counted from 4"
        );
        assert!(!bursts.collect_now(10));
    }
}
