//! The listeners: admission endpoints (HTTPS, or plain HTTP when asked) and the admin
//! endpoints (`/metrics`, `/healthz`, `/readyz`) on a second listener.
//!
//! Every error becomes a response here: an oversized body 413, a body that is not a usable
//! AdmissionReview 400 with the reason. Bodies are never logged.

pub mod metrics;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::config::LiveSnapshot;
use crate::pipeline::{self, Stage};
use crate::review::{decode, encode};
use crate::trace::Trace;
use metrics::Metrics;

/// The API server's own limit on an AdmissionReview body.
pub const MAX_REVIEW_BYTES: usize = 3 * 1024 * 1024;
/// An oversized body is read and discarded up to this size before the 413 is sent.
const DRAIN_BYTES: usize = 4 * MAX_REVIEW_BYTES;
/// How long reading a request body may take.
const READ_TIME: Duration = Duration::from_secs(10);
/// Draining an oversized body stops when no data arrives for this long.
const DRAIN_IDLE: Duration = Duration::from_millis(200);
/// A TLS handshake or request head taking longer than this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight reviews get to finish on shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A review seen by the server, for the demo's printed traces.
#[derive(Debug)]
pub struct TracedReview {
    pub stage: Stage,
    pub uid: String,
    pub outcome: pipeline::Outcome,
}

/// What every request handler shares.
pub struct State {
    pub live: Arc<LiveSnapshot>,
    pub metrics: Arc<Metrics>,
    /// False until serving, and again once shutting down.
    pub ready: AtomicBool,
    /// When set, every review is traced and its outcome sent here.
    pub traces: Option<mpsc::UnboundedSender<TracedReview>>,
}

/// Accepts connections until `shutdown` turns true, then drains in-flight requests.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: Arc<State>,
    admin: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HANDSHAKE_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
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
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let service = service_fn(move |request| {
            let state = state.clone();
            async move { Ok::<_, Infallible>(route(&state, request, admin).await) }
        });
        match &acceptor {
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls_stream)) => {
                            let connection =
                                builder.serve_connection(TokioIo::new(tls_stream), service).into_owned();
                            if let Err(error) = watcher.watch(connection).await {
                                tracing::debug!(%peer, %error, "connection ended with an error");
                            }
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
            None => {
                let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                });
            }
        }
    }
    state.ready.store(false, Ordering::SeqCst);
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {DRAIN_TIMEOUT:?}");
    }
}

/// Binds a listener, saying which address in the error.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))
}

async fn route(state: &State, request: Request<Incoming>, admin: bool) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let stage = match path {
        "/mutate" => Some(Stage::Mutate),
        "/validate" => Some(Stage::Validate),
        "/admit" => Some(Stage::Admit),
        _ => None,
    };
    match (request.method(), path, stage) {
        (&Method::GET, "/healthz", _) => text(StatusCode::OK, "ok"),
        (&Method::GET, "/readyz", _) if state.ready.load(Ordering::SeqCst) => text(StatusCode::OK, "ok"),
        (&Method::GET, "/readyz", _) => text(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        (&Method::GET, "/metrics", _) if admin => {
            let snapshot = state.live.load();
            let mut response = text(StatusCode::OK, &state.metrics.render(&snapshot));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        (&Method::POST, _, Some(stage)) if !admin => admission(state, stage, request).await,
        (_, _, Some(_)) if !admin => {
            text(StatusCode::METHOD_NOT_ALLOWED, "use POST with an AdmissionReview body")
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// One AdmissionReview: read (capped), decode, dispatch, answer in the caller's version.
async fn admission(state: &State, stage: Stage, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let received = Instant::now();
    let deadline = match caller_deadline(request.uri().query(), received) {
        Ok(deadline) => deadline,
        Err(message) => return reject(state, stage, StatusCode::BAD_REQUEST, "invalid_timeout", &message),
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = match read_capped(request.into_body(), declared).await {
        Ok(body) => body,
        Err(ReadError::TooLarge) => return too_large(state, stage),
        Err(ReadError::Unreadable(message)) => {
            return reject(state, stage, StatusCode::BAD_REQUEST, "unreadable_body", &message);
        }
    };
    let review = match decode::review(&body) {
        Ok(review) => review,
        Err(error) => {
            return reject(state, stage, StatusCode::BAD_REQUEST, error.reason(), &error.to_string())
        }
    };
    drop(body);
    // One load per review: every stage sees the same configuration even if a reload lands.
    let snapshot = state.live.load_full();
    let request = &review.request;
    let resource = review.resource();
    let span = tracing::debug_span!(
        "admission_review",
        uid = %request.uid,
        stage = stage.as_str(),
        operation = %review.operation(),
        resource = %resource.resource,
        namespace = %request.namespace,
        generation = snapshot.generation,
    );
    let trace = if state.traces.is_some() { Trace::enabled() } else { Trace::disabled() };
    let outcome = pipeline::review(&snapshot, &review, stage, deadline, trace).instrument(span.clone()).await;
    let answer = &outcome.answer;
    let code = answer.status.as_ref().and_then(|s| s.code).unwrap_or(200);
    span.in_scope(|| {
        // Debug: at thousands of reviews a second an info line each costs a third of the
        // throughput. Failed webhook calls are logged at warn by the stages, bad requests here.
        tracing::debug!(
            allowed = answer.allowed,
            code,
            patched = answer.patch.is_some(),
            elapsed_ms = received.elapsed().as_secs_f64() * 1e3,
            "review answered"
        );
    });
    state.metrics.review(stage, answer.allowed);
    let body = encode::answer(review.version, &request.uid, answer);
    if let Some(traces) = &state.traces {
        let _ = traces.send(TracedReview { stage, uid: request.uid.clone(), outcome });
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

enum ReadError {
    TooLarge,
    Unreadable(String),
}

/// Reads a body of at most [`MAX_REVIEW_BYTES`]. An oversized body (declared or found) is read
/// on and discarded, up to [`DRAIN_BYTES`] and while it keeps arriving, so a client that sends
/// it whole before reading gets its 413 rather than a connection reset; one that stops sending
/// gets it after [`DRAIN_IDLE`].
async fn read_capped(mut body: Incoming, declared: Option<u64>) -> Result<Bytes, ReadError> {
    let unreadable = |e: hyper::Error| ReadError::Unreadable(format!("cannot read the request body: {e}"));
    let mut received = 0usize;
    // Sized from Content-Length when it is within the cap, so a body is copied once.
    let mut collected = Vec::with_capacity(declared.map_or(0, |n| n.min(MAX_REVIEW_BYTES as u64) as usize));
    if declared.is_none_or(|length| length <= MAX_REVIEW_BYTES as u64) {
        let read = async {
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map_err(unreadable)?.into_data() else { continue };
                received += data.len();
                if received > MAX_REVIEW_BYTES {
                    return Ok(());
                }
                collected.extend_from_slice(&data);
            }
            Ok(())
        };
        tokio::time::timeout(READ_TIME, read)
            .await
            .map_err(|_| ReadError::Unreadable("timed out reading the request body".into()))??;
        if received <= MAX_REVIEW_BYTES {
            return Ok(Bytes::from(collected));
        }
    }
    while received <= DRAIN_BYTES {
        match tokio::time::timeout(DRAIN_IDLE, body.frame()).await {
            Ok(Some(Ok(frame))) => received += frame.data_ref().map_or(0, Bytes::len),
            _ => break,
        }
    }
    Err(ReadError::TooLarge)
}

/// The caller's `?timeout=` (a Go duration, as the API server writes it) as a deadline.
fn caller_deadline(query: Option<&str>, received: Instant) -> Result<Option<Instant>, String> {
    let Some(value) =
        query.into_iter().flat_map(|q| q.split('&')).find_map(|pair| pair.strip_prefix("timeout="))
    else {
        return Ok(None);
    };
    parse_go_duration(value)
        .map(|timeout| Some(received + timeout))
        .ok_or_else(|| format!("invalid timeout query parameter {value:?}: expected a duration such as 10s"))
}

/// Parses Go's `time.Duration` text (`10s`, `1m0s`, `1.5s`, `500ms`); `None` if invalid.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

fn too_large(state: &State, stage: Stage) -> Response<Full<Bytes>> {
    let message = format!("request body is larger than {MAX_REVIEW_BYTES} bytes");
    reject(state, stage, StatusCode::PAYLOAD_TOO_LARGE, "too_large", &message)
}

fn reject(
    state: &State,
    stage: Stage,
    code: StatusCode,
    reason: &'static str,
    message: &str,
) -> Response<Full<Bytes>> {
    tracing::warn!(stage = stage.as_str(), reason, code = code.as_u16(), "bad admission request: {message}");
    state.metrics.bad_request(stage, reason);
    text(code, message)
}

fn text(code: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("10s", Some(10_000)),
            ("1m0s", Some(60_000)),
            ("1h2m3s", Some(3_723_000)),
            ("1.5s", Some(1_500)),
            ("500ms", Some(500)),
            ("0", Some(0)),
            ("", None),
            ("10", None),
            ("ten", None),
            ("5d", None),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_go_duration(text).map(|d| d.as_millis() as u64), millis, "{text}");
        }
    }
}
