//! The admission listener served by a few threads, each running a single-threaded runtime of
//! its own, as nginx runs its workers: a connection, the reviews on it and the calls they make
//! to webhooks all stay on the thread that accepted it, with that thread's own pools of
//! upstream connections (`upstream.rs` picks the pool by [`lane`]). Nothing of a review hops
//! between threads, where the work-stealing runtime woke another thread for about every
//! second step of a review (`loadtest/README.md`, "Profile hints").
//!
//! The threads share one listening socket (each registers its own duplicate of it), the
//! connection cap and everything in `State`. The price: one connection's reviews never spread
//! over two cores — what an HTTP/2 client, which sends everything over one connection, would
//! notice; the API server calls a webhook over a pool of HTTP/1.1 connections.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Semaphore};

use super::{limits, Listener, State};

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

/// The running serving threads.
pub(crate) struct ServingThreads {
    /// To wake each thread's runtime (`crate::alloc::watch`).
    pub(crate) handles: Vec<tokio::runtime::Handle>,
    finished: Vec<oneshot::Receiver<()>>,
}

impl ServingThreads {
    /// Resolves once every thread has drained its connections and stopped.
    pub(crate) async fn finished(self) {
        for finished in self.finished {
            let _ = finished.await;
        }
    }
}

/// Starts `threads` serving threads on `listener`, within one connection cap, until `shutdown`.
pub(crate) fn start(
    threads: usize,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: &Arc<State>,
    connection_limits: limits::ConnectionLimits,
    shutdown: &watch::Receiver<bool>,
) -> std::io::Result<ServingThreads> {
    let threads = threads.max(1);
    let listener = listener.into_std()?;
    let slots = Arc::new(Semaphore::new(connection_limits.max));
    let (mut handles, mut finished) = (Vec::with_capacity(threads), Vec::with_capacity(threads));
    for index in 1..=threads {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(crate::alloc::on_park)
            .build()?;
        handles.push(runtime.handle().clone());
        let listener = listener.try_clone()?;
        let (tls, state, slots, shutdown) = (tls.clone(), state.clone(), slots.clone(), shutdown.clone());
        let (done, finished_rx) = oneshot::channel();
        finished.push(finished_rx);
        std::thread::Builder::new().name(format!("admission-{index}")).spawn(move || {
            LANE.set(index);
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        let limits = super::Slots { slots, idle: connection_limits.idle };
                        super::serve_with(listener, tls, state, Listener::Admission, limits, shutdown).await;
                    }
                    Err(error) => tracing::error!(%error, "serving thread {index} cannot use the listener"),
                }
            });
            // Dropping the runtime here ends what the thread's reviews left behind (idle
            // upstream connections, cancelled shadow calls) before saying it is done.
            drop(runtime);
            let _ = done.send(());
        })?;
    }
    Ok(ServingThreads { handles, finished })
}
