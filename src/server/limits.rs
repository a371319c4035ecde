//! What the admission listener may hold at once, so a flood or a stuck webhook cannot take
//! the process down with it:
//! - connections: at most `--max-connections` (never above the open-file limit, whose soft
//!   value is raised to the hard one at start); beyond it new connections wait unserved,
//!   one accepted per listener, the others in the kernel's backlog;
//! - idle connections: closed after [`IDLE_TIMEOUT`] without a byte either way and with no
//!   request in flight (HTTP/1 keep-alive and HTTP/2 alike; hyper's own timers only cover a
//!   request head once its first byte arrived);
//! - reviews and request bytes in flight: at most the GatewayConfig's `maxReviewsInFlight`
//!   and `maxRequestBytesInFlight`; beyond either, an immediate 429 with `Retry-After`.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// A connection with no traffic and no request for this long is closed. Longer than the
/// 90 s a Go client (the API server) keeps an idle connection, so the client closes first.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often an idle connection is looked at.
const IDLE_CHECK: Duration = Duration::from_secs(5);
/// What one listener holds open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionLimits {
    pub(crate) max: usize,
    pub(crate) idle: Duration,
}

/// `--max-connections` when unset.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Descriptors kept back from the connection cap: files, sockets to webhooks and the API
/// server, the admin listener.
const RESERVED_DESCRIPTORS: u64 = 256;
/// HTTP/2 streams one connection may have open (Go's default).
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 250;

/// Raises the soft open-file limit to the hard one; returns the soft limit in force.
pub(crate) fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    match limit.maximum {
        Some(maximum) if current < maximum => {
            match setrlimit(Resource::Nofile, Rlimit { current: Some(maximum), maximum: Some(maximum) }) {
                Ok(()) => maximum,
                Err(_) => current,
            }
        }
        _ => current,
    }
}

/// The connection cap: `wanted`, lowered to fit under the open-file limit `fds`.
pub(crate) fn connection_cap(wanted: usize, fds: u64) -> usize {
    let fit = fds.saturating_sub(RESERVED_DESCRIPTORS).max(16);
    wanted.min(usize::try_from(fit).unwrap_or(usize::MAX)).max(1)
}

/// Milliseconds since the first call, a cheap clock for activity stamps.
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One connection's traffic: when a byte last moved, and requests being answered.
#[derive(Debug)]
pub(crate) struct Activity {
    last: AtomicU64,
    requests: AtomicUsize,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Activity { last: AtomicU64::new(now_ms()), requests: AtomicUsize::new(0) })
    }

    fn touch(&self) {
        self.last.store(now_ms(), Ordering::Relaxed);
    }

    /// Marks a request in flight until the guard drops.
    pub(crate) fn request(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::Relaxed);
        RequestGuard(self.clone())
    }

    /// Whether the connection has had no traffic and no request for `timeout`.
    fn idle_for(&self, timeout: Duration) -> bool {
        self.requests.load(Ordering::Relaxed) == 0
            && now_ms().saturating_sub(self.last.load(Ordering::Relaxed)) >= timeout.as_millis() as u64
    }

    /// Resolves once the connection has been idle for `timeout`.
    pub(crate) async fn idle(&self, timeout: Duration) {
        let check = IDLE_CHECK.min(timeout);
        loop {
            tokio::time::sleep(check).await;
            if self.idle_for(timeout) {
                return;
            }
        }
    }
}

pub(crate) struct RequestGuard(Arc<Activity>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.requests.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that stamps its [`Activity`] whenever bytes move.
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Reviews and their request bytes being answered, across connections.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    reviews: AtomicUsize,
    bytes: AtomicUsize,
}

/// Why a review was turned away.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Overload {
    Reviews(usize),
    Bytes(usize),
}

impl Overload {
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Overload::Reviews(_) => "too_many_reviews",
            Overload::Bytes(_) => "too_many_bytes",
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Overload::Reviews(limit) => {
                format!("admission-gateway is answering {limit} reviews already (maxReviewsInFlight); retry")
            }
            Overload::Bytes(limit) => format!(
                "admission-gateway holds {limit} bytes of reviews already (maxRequestBytesInFlight); retry"
            ),
        }
    }
}

/// A review's place among those in flight, given back on drop.
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    in_flight: &'a InFlight,
    bytes: usize,
}

impl InFlight {
    /// Room for one more review of `bytes`, or why not.
    pub(crate) fn admit(
        &self,
        bytes: usize,
        max_reviews: usize,
        max_bytes: usize,
    ) -> Result<Admitted<'_>, Overload> {
        if self.reviews.fetch_add(1, Ordering::AcqRel) >= max_reviews {
            self.reviews.fetch_sub(1, Ordering::AcqRel);
            return Err(Overload::Reviews(max_reviews));
        }
        let held = self.bytes.fetch_add(bytes, Ordering::AcqRel);
        // One review alone is always let in (it is within the body limit).
        if held > 0 && held + bytes > max_bytes {
            self.bytes.fetch_sub(bytes, Ordering::AcqRel);
            self.reviews.fetch_sub(1, Ordering::AcqRel);
            return Err(Overload::Bytes(max_bytes));
        }
        crate::alloc::note_review();
        Ok(Admitted { in_flight: self, bytes })
    }

    pub(crate) fn reviews(&self) -> usize {
        self.reviews.load(Ordering::Relaxed)
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.in_flight.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        self.in_flight.reviews.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_and_bytes_in_flight_are_capped_and_given_back() {
        let in_flight = InFlight::default();
        let a = in_flight.admit(600, 2, 1000).unwrap();
        assert_eq!(in_flight.admit(600, 2, 1000).unwrap_err(), Overload::Bytes(1000));
        let b = in_flight.admit(300, 2, 1000).unwrap();
        assert_eq!(in_flight.admit(1, 2, 1000).unwrap_err(), Overload::Reviews(2));
        assert_eq!((in_flight.reviews(), in_flight.bytes()), (2, 900));
        drop(a);
        drop(b);
        assert_eq!((in_flight.reviews(), in_flight.bytes()), (0, 0));
        // A single review larger than the byte cap still gets in when nothing else is held.
        let big = in_flight.admit(5000, 2, 1000).unwrap();
        assert!(in_flight.admit(1, 2, 1000).is_err());
        drop(big);
    }

    #[test]
    fn the_connection_cap_fits_under_the_descriptor_limit() {
        assert_eq!(connection_cap(4096, 1024), 768);
        assert_eq!(connection_cap(100, 1 << 20), 100);
        assert_eq!(connection_cap(4096, 10), 16);
        assert!(raise_fd_limit() >= 16);
    }
}
