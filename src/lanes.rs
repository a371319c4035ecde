//! The serving-thread lanes: which of the admission listener's threads (`server/threads.rs`)
//! the running code is on, and how many there are. An upstream client keeps a pool of
//! connections per lane (`upstream.rs`), so that a review and its calls stay on one thread.
//! A leaf: the server sets the lanes up, the upstream clients read them.

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// This thread's place among the serving threads: 1..=n, or 0 on any other thread.
    static LANE: Cell<usize> = const { Cell::new(0) };
}

/// How many serving threads the process runs (set once, before the configuration is first
/// compiled, so every upstream client has a pool for each).
static LANES: OnceLock<usize> = OnceLock::new();

/// The serving thread this code runs on (1..=n), or 0 for any other thread.
pub(crate) fn lane() -> usize {
    LANE.get()
}

/// Marks the calling thread as serving thread `index` (1..=n).
pub(crate) fn enter(index: usize) {
    LANE.set(index);
}

/// Pools an upstream client keeps: one per serving thread, and one for every other thread.
pub(crate) fn pools() -> usize {
    LANES.get().copied().unwrap_or(0) + 1
}

/// `--threads` when unset: the CPUs this process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Fixes the number of serving threads, before any upstream client is built; the first call
/// wins (tests run several gateways in one process: a client then shares pools between
/// threads, correct but slower). Returns the number to start.
pub(crate) fn plan(threads: usize) -> usize {
    let threads = threads.max(1);
    let _ = LANES.set(threads);
    threads
}
