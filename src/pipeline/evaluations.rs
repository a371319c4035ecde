//! The threads CEL evaluations run on (webhook matchConditions, policies), apart from the
//! serving threads (`server/threads.rs`) and their small blocking pools, which decode large
//! bodies: a comprehension over thousands of labels or a selector over hundreds of parameters
//! runs beside them, and a review with a short evaluation does not wait for it. The API
//! server runs each evaluation on the request's own goroutine, time-sliced with every other;
//! here as many run at once as there are [`SLOTS_PER_CORE`] × cores, each on an operating-
//! system thread of its own, time-sliced alike. A review finding every slot taken waits for
//! one only until its deadline.

use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Evaluations at once per core: enough that a few evaluations that run for seconds leave
/// slots to the short ones of other reviews (an evaluation waiting on the authorizer's
/// SubjectAccessReviews holds its slot too).
const SLOTS_PER_CORE: usize = 8;

/// Why an evaluation did not give its result.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unfinished {
    /// Every slot stayed taken until the review's deadline.
    NoSlot,
    /// Its thread ended without a result (cancelled at shutdown; the CEL library's own panics
    /// are errors of their expression, `cel/runtime.rs`).
    Ended,
}

/// Runs `work` on an evaluation thread once a slot is free, waiting for one at most until
/// `deadline`.
pub(crate) async fn run<T: Send + 'static>(
    deadline: Option<Instant>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unfinished> {
    let permit = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, slots().acquire()).await.ok(),
        None => Some(slots().acquire().await),
    };
    let Some(Ok(permit)) = permit else { return Err(Unfinished::NoSlot) };
    let work = move || {
        let _permit = permit;
        work()
    };
    let running = match pool() {
        Some(pool) => pool.spawn_blocking(work),
        None => tokio::task::spawn_blocking(work),
    };
    running.await.map_err(|_| Unfinished::Ended)
}

fn slot_count() -> usize {
    SLOTS_PER_CORE * std::thread::available_parallelism().map_or(2, usize::from)
}

fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| Semaphore::new(slot_count()))
}

/// The evaluation threads: a runtime's blocking pool with a thread per slot (started as
/// needed, ended after ten idle seconds). `None` if the runtime could not be made: then the
/// caller's runtime's blocking pool.
fn pool() -> Option<&'static Handle> {
    static POOL: OnceLock<Option<Runtime>> = OnceLock::new();
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(slot_count())
            .thread_name("cel-evaluation")
            .build()
            .map_err(|error| tracing::error!("no threads of their own for CEL evaluations: {error}"))
            .ok()
    })
    .as_ref()
    .map(Runtime::handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn evaluations_run_beside_the_callers_thread_and_wait_for_a_slot_only_until_the_deadline() {
        let caller = std::thread::current().id();
        let ran_on = run(None, move || std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, caller);

        // Every slot held by an evaluation still running: the next one finds none by its deadline.
        let release = std::sync::Arc::new(std::sync::Barrier::new(slot_count() + 1));
        let held: Vec<_> = (0..slot_count())
            .map(|_| {
                let release = release.clone();
                tokio::spawn(run(None, move || {
                    release.wait();
                }))
            })
            .collect();
        while slots().available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let soon = Instant::now() + std::time::Duration::from_millis(50);
        assert_eq!(run(Some(soon), || ()).await, Err(Unfinished::NoSlot));
        tokio::task::spawn_blocking(move || release.wait()).await.unwrap();
        for evaluation in held {
            evaluation.await.unwrap().unwrap();
        }
        assert_eq!(run(Some(Instant::now() + std::time::Duration::from_secs(5)), || 7).await, Ok(7));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_panicking_evaluation_is_unfinished_never_a_result() {
        let outcome: Result<bool, Unfinished> =
            run(None, || panic!("an evaluation that ends abruptly")).await;
        assert_eq!(outcome, Err(Unfinished::Ended));
    }
}
