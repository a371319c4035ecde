//! The serving-thread lanes: which of the admission listener's threads (`server/threads.rs`)
//! the running code is on. An upstream client keeps a pool of connections per lane
//! (`upstream.rs`; as many as the server's `Clients` were made for), so that a review and its
//! calls stay on one thread. A leaf: the server marks its threads, the upstream clients read
//! the mark. Nothing here is process-wide: several servers in one process (the tests) each
//! have their own threads and clients.

use std::cell::Cell;

thread_local! {
    /// This thread's place among the serving threads: 1..=n, or 0 on any other thread.
    static LANE: Cell<usize> = const { Cell::new(0) };
}

/// The serving thread this code runs on (1..=n), or 0 for any other thread.
pub(crate) fn lane() -> usize {
    LANE.get()
}

/// Marks the calling thread as serving thread `index` (1..=n).
pub(crate) fn enter(index: usize) {
    LANE.set(index);
}

/// `--threads` when unset: the CPUs this process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
