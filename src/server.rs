//! The listeners: admission endpoints (HTTPS, or plain HTTP when asked) and the admin
//! endpoints (`/metrics`, `/healthz`, `/readyz`) on a second listener; the accept loop, TLS
//! handshakes, connection limits and graceful shutdown.
//!
//! `routes.rs` turns every request into a response, `body.rs` reads a review within its
//! limits, `tls.rs` serves the (reloaded) certificate, `metrics.rs` renders `/metrics`.

pub(crate) mod body;
pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod routes;
pub(crate) mod threads;
pub(crate) mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::config::LiveSnapshot;
use crate::endpoint::Endpoint;
use crate::pipeline;
use metrics::Metrics;
pub(crate) use routes::Listener;

/// A TLS handshake or request head taking longer than this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight reviews get to finish on shutdown, unless `serve --in-flight-grace`
/// says otherwise.
pub(crate) const DEFAULT_IN_FLIGHT_GRACE: Duration = Duration::from_secs(30);

/// A review seen by the server with its explanation, for the demo's printed reports.
#[derive(Debug)]
pub(crate) struct ExplainedReview {
    pub(crate) endpoint: Endpoint,
    pub(crate) uid: String,
    pub(crate) outcome: pipeline::Outcome,
}

/// What every request handler shares.
pub(crate) struct State {
    pub(crate) live: Arc<LiveSnapshot>,
    pub(crate) metrics: Arc<Metrics>,
    /// False until serving, and again once shutting down.
    pub(crate) ready: AtomicBool,
    /// When set, every review is explained and its outcome sent here (the demo).
    pub(crate) explained: Option<mpsc::UnboundedSender<ExplainedReview>>,
    /// Live cluster state, in cluster mode (set once it is connected).
    pub(crate) cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    /// Shadow calls, cancelled on shutdown.
    pub(crate) shadows: pipeline::shadow::Shadows,
    /// Shutting down: `/readyz` fails, and every answer asks the client to close its
    /// keep-alive connection (`Connection: close`), so it reconnects to another replica.
    pub(crate) draining: AtomicBool,
    /// Tracing, with `--otlp-endpoint` (src/traces.rs); `None`: no span is made.
    pub(crate) traces: Option<Arc<crate::traces::Traces>>,
    /// How long in-flight requests get to finish once the listeners stop accepting.
    pub(crate) in_flight_grace: Duration,
    /// Where answered reviews are recorded (`--record`, the settings' `recording`), if at all.
    pub(crate) recording: crate::recording::Recording,
}

/// Accepts connections (within `limits`) until `shutdown` turns true, then drains in-flight
/// requests.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: Arc<State>,
    kind: Listener,
    limits: limits::ConnectionLimits,
    shutdown: watch::Receiver<bool>,
) {
    let slots = Slots { slots: Arc::new(tokio::sync::Semaphore::new(limits.max)), idle: limits.idle };
    serve_with(listener, tls, state, kind, slots, shutdown).await;
}

/// A connection cap shared by the listeners (or threads) holding it, and the idle timeout.
pub(crate) struct Slots {
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    pub(crate) idle: Duration,
}

/// [`serve`] within a connection cap that others may share (`threads.rs`).
pub(crate) async fn serve_with(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: Arc<State>,
    kind: Listener,
    limits: Slots,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HANDSHAKE_TIMEOUT);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(limits::MAX_CONCURRENT_STREAMS);
    let Slots { slots, idle } = limits;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = async { let _ = shutdown.wait_for(|stop| *stop).await; } => break,
        };
        // Then a free connection slot: beyond the cap, this connection waits unserved and the
        // next ones in the backlog. Accepted first, because listeners sharing one cap
        // (`threads.rs`) each have a backlog of their own: a slot must go to a listener that
        // has a connection to serve.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = async { let _ = shutdown.wait_for(|stop| *stop).await; } => break,
        };
        let _ = stream.set_nodelay(true);
        let activity = limits::Activity::new();
        let stream = limits::Tracked::new(stream, activity.clone());
        let open = state.metrics.connection_opened(kind);
        let service = {
            let (state, activity) = (state.clone(), activity.clone());
            service_fn(move |request| {
                let state = state.clone();
                let in_flight = activity.request();
                async move {
                    let response = routes::route(&state, request, kind).await;
                    drop(in_flight);
                    Ok::<_, Infallible>(response)
                }
            })
        };
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _held = (slot, open);
            let served = async {
                match acceptor {
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                            Ok(Ok(tls_stream)) => {
                                let connection =
                                    builder.serve_connection(TokioIo::new(tls_stream), service).into_owned();
                                watcher.watch(connection).await
                            }
                            Ok(Err(error)) => {
                                tracing::debug!(%peer, %error, "TLS handshake failed");
                                Ok(())
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                Ok(())
                            }
                        }
                    }
                    None => {
                        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                        watcher.watch(connection).await
                    }
                }
            };
            tokio::select! {
                served = served => if let Err(error) = served {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                },
                () = activity.idle(idle) => tracing::debug!(%peer, "idle connection closed"),
            }
        });
    }
    state.ready.store(false, Ordering::SeqCst);
    drop(listener);
    let grace = state.in_flight_grace;
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {grace:?}: stopped");
    }
}

/// Binds a listener, saying which address in the error.
pub(crate) async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))
}
