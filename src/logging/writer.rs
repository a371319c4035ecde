//! Where log lines go: a shared buffer that a thread of its own writes to standard error in
//! batches — every [`FLUSH_EVERY`], or sooner once [`FLUSH_AT`] bytes are waiting — so a
//! review pays for formatting its line and a short lock, never for a system call or a thread
//! wake-up, and a slow standard error (a full pipe, a stalled log shipper) never holds one up.
//! Beyond [`MAX_BUFFERED`] bytes waiting, lines are dropped and counted.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest a line waits before it is written.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Bytes waiting that wake the writer at once.
const FLUSH_AT: usize = 64 * 1024;
/// Bytes that may wait; a line that does not fit is dropped.
const MAX_BUFFERED: usize = 4 * 1024 * 1024;

#[derive(Default)]
struct Shared {
    buffer: Mutex<Vec<u8>>,
    wake: Condvar,
    stop: AtomicBool,
    dropped: AtomicU64,
}

/// The writer end handed to the subscriber (`MakeWriter`).
#[derive(Clone)]
pub(crate) struct Batched {
    shared: Arc<Shared>,
}

/// The thread writing the batches; stopping it (dropping) writes what is left.
pub(crate) struct Flusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A writer to `out` and the thread that drains it.
pub(crate) fn batched(out: impl Write + Send + 'static) -> std::io::Result<(Batched, Flusher)> {
    batched_every(out, FLUSH_EVERY)
}

/// [`batched`], with lines below the mark waiting up to `every`.
fn batched_every(
    mut out: impl Write + Send + 'static,
    every: Duration,
) -> std::io::Result<(Batched, Flusher)> {
    let shared = Arc::new(Shared::default());
    let thread = {
        let shared = shared.clone();
        std::thread::Builder::new().name("log-writer".into()).spawn(move || {
            let mut batch = Vec::with_capacity(FLUSH_AT);
            loop {
                let stopping = {
                    let buffer = shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
                    // Until the mark, the stop or `every`: a spurious wake-up waits on.
                    let below_mark = |buffer: &mut Vec<u8>| {
                        buffer.len() < FLUSH_AT && !shared.stop.load(Ordering::Acquire)
                    };
                    let (mut buffer, _) = shared
                        .wake
                        .wait_timeout_while(buffer, every, below_mark)
                        .unwrap_or_else(|p| p.into_inner());
                    std::mem::swap(&mut *buffer, &mut batch);
                    shared.stop.load(Ordering::Acquire)
                };
                if !batch.is_empty() {
                    // Nowhere to report a failed write to: the line is lost, as on a closed stderr.
                    let _ = out.write_all(&batch).and_then(|()| out.flush());
                    batch.clear();
                }
                if stopping && shared.buffer.lock().map_or(true, |b| b.is_empty()) {
                    return;
                }
            }
        })?
    };
    Ok((Batched { shared: shared.clone() }, Flusher { shared, thread: Some(thread) }))
}

impl Batched {
    pub(crate) fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Write for &Batched {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut buffer = self.shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.len() + line.len() > MAX_BUFFERED {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            let before = buffer.len();
            buffer.extend_from_slice(line);
            // Once, as the buffer reaches the mark: each notification is a system call, and
            // lines go on arriving until the writer has woken and taken the buffer.
            if before < FLUSH_AT && buffer.len() >= FLUSH_AT {
                self.shared.wake.notify_one();
            }
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Batched {
    type Writer = &'a Batched;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        {
            // Under the lock, so the writer cannot miss the wake-up between its check and its wait.
            let _buffer = self.shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `Write` the logging tests can read back.
    #[derive(Clone, Default)]
    pub(in crate::logging) struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Sink {
        /// Everything written so far.
        pub(in crate::logging) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Sink {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_arrive_whole_in_order_and_all_on_stop() {
        let sink = Sink::default();
        let (writer, flusher) = batched(sink.clone()).unwrap();
        for i in 0..1000 {
            (&writer).write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        // Written without a stop, by the interval's wake-up: waited for as an event (all 1000
        // lines in the sink), polled up to a deadline far above `FLUSH_EVERY` for a loaded machine.
        let lines = || sink.0.lock().unwrap().iter().filter(|b| **b == b'\n').count();
        assert!(eventually(|| lines() == 1000), "{} lines written without a stop", lines());
        (&writer).write_all(b"last\n").unwrap();
        drop(flusher);
        let written = sink.text();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 1001);
        assert_eq!((lines[0], lines[999], lines[1000]), ("line 0", "line 999", "last"));
        assert_eq!(writer.dropped(), 0);
    }

    /// Polls `done` every 10 ms until it holds or 20 s have passed (a bound for a loaded
    /// machine, never reached when the writer works); whether it held.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// A `Write` that keeps each batch the writer hands it apart.
    #[derive(Clone, Default)]
    struct Batches(Arc<Mutex<Vec<usize>>>);

    impl Write for Batches {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(data.len());
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn reaching_the_mark_wakes_the_writer() {
        let batches = Batches::default();
        // Lines below the mark would wait an hour: only the wake-up at the mark writes them.
        let (writer, flusher) = batched_every(batches.clone(), Duration::from_secs(3600)).unwrap();
        let line = [b'x'; 1023].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        let below = FLUSH_AT / line.len() - 1;
        assert!(below * line.len() < FLUSH_AT && (below + 1) * line.len() >= FLUSH_AT);
        for _ in 0..below {
            (&writer).write_all(&line).unwrap();
        }
        // One more line reaches the mark; the write it wakes is waited for as an event.
        (&writer).write_all(&line).unwrap();
        let written = || batches.0.lock().unwrap().clone();
        assert!(eventually(|| !written().is_empty()), "not woken at the mark");
        // Nothing was written before the mark, however long the lines took to arrive: the first
        // (and only) batch holds every line.
        assert_eq!(written(), [(below + 1) * line.len()], "batches written");
        drop(flusher);
    }

    #[test]
    fn beyond_the_bound_lines_are_dropped_and_counted() {
        /// A standard error that never drains.
        struct Stuck;
        impl Write for Stuck {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(0)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (writer, flusher) = batched(Stuck).unwrap();
        let line = vec![b'x'; 1024];
        for _ in 0..(2 * MAX_BUFFERED / 1024 + 100) {
            (&writer).write_all(&line).unwrap();
        }
        assert!(writer.dropped() >= 100, "{} dropped", writer.dropped());
        std::mem::forget(flusher); // its thread is stuck by design
    }
}
