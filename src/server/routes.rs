//! Routing, and the one place every request becomes a response: a review gets its answer, an
//! oversized body 413, a body that is not a usable AdmissionReview 400 with the reason.
//! Bodies are never logged.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::body::{self, ReadError, MAX_REVIEW_BYTES};
use super::{ExplainedReview, State};
use crate::endpoint::Endpoint;
use crate::explain::Explanation;
use crate::logging::{ReviewLog, Untrusted};
use crate::pipeline::budget::Budget;
use crate::pipeline::observe::{self, Abandoned};
use crate::pipeline::{self, Request as Dispatch};
use crate::review::{decode, encode};

/// Which of the two listeners a request arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    /// `/mutate`, `/validate`, `/admit`, `/healthz`, `/readyz`.
    Admission,
    /// `/metrics`, `/healthz`, `/readyz`.
    Admin,
}

pub(crate) async fn route(
    state: &State,
    request: Request<Incoming>,
    listener: Listener,
) -> Response<Full<Bytes>> {
    let mut response = dispatch(state, request, listener).await;
    if state.draining.load(Ordering::Relaxed) {
        // HTTP/1.1: the client closes this connection after the answer and opens its next one
        // to a replica that is not going away (HTTP/2 gets a GOAWAY when the listener stops).
        response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    response
}

async fn dispatch(state: &State, request: Request<Incoming>, listener: Listener) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let endpoint = match path {
        "/mutate" => Some(Endpoint::Mutate),
        "/validate" => Some(Endpoint::Validate),
        "/admit" => Some(Endpoint::Admit),
        _ => None,
    };
    let admission = listener == Listener::Admission;
    match (request.method(), path, endpoint) {
        (&Method::GET, "/healthz", _) => text(StatusCode::OK, "ok"),
        (&Method::GET, "/readyz", _) => readiness(state, request.uri().query()),
        (&Method::GET, "/metrics", _) if !admission => {
            let snapshot = state.live.load();
            let mut body = state.metrics.render(&snapshot);
            if let Some(cluster) = state.cluster.get() {
                cluster.render_metrics(&mut body);
            }
            let mut response = text(StatusCode::OK, &body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        (&Method::POST, _, Some(endpoint)) if admission => review(state, endpoint, request).await,
        (_, _, Some(_)) if admission => {
            text(StatusCode::METHOD_NOT_ALLOWED, "use POST with an AdmissionReview body")
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// One AdmissionReview: read (capped), decode, dispatch within the deadline budget, answer in
/// the caller's version.
async fn review(state: &State, endpoint: Endpoint, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let received = Instant::now();
    // Tracing on: the server span, child of the caller's `traceparent` (src/traces.rs).
    let mut span = state.traces.as_ref().map(|traces| traces.review(request.headers(), endpoint));
    let timeout = match body::caller_timeout(request.uri().query()) {
        Ok(timeout) => timeout,
        Err(message) => {
            return reject(state, endpoint, StatusCode::BAD_REQUEST, "invalid_timeout", &message, span)
        }
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // One load per review: every stage sees the same configuration even if a reload lands.
    let snapshot = state.live.load_full();
    // A place among the reviews in flight before the body is read; none left: 429 at once.
    let size = declared.map_or(MAX_REVIEW_BYTES, |length| length.min(MAX_REVIEW_BYTES as u64) as usize);
    let settings = &snapshot.settings;
    let admitted = state.metrics.in_flight.admit(
        size,
        settings.max_reviews_in_flight,
        settings.max_request_bytes_in_flight,
    );
    let _admitted = match admitted {
        Ok(admitted) => admitted,
        Err(overload) => return overloaded(state, endpoint, &overload, span),
    };
    let body = match body::read_capped(request.into_body(), declared).await {
        Ok(body) => body,
        Err(ReadError::TooLarge) => {
            let message = format!("request body is larger than {MAX_REVIEW_BYTES} bytes");
            return reject(state, endpoint, StatusCode::PAYLOAD_TOO_LARGE, "too_large", &message, span);
        }
        Err(ReadError::Unreadable(message)) => {
            return reject(state, endpoint, StatusCode::BAD_REQUEST, "unreadable_body", &message, span);
        }
    };
    let review = match decode::review(&body) {
        Ok(review) => review,
        Err(error) => {
            return reject(state, endpoint, StatusCode::BAD_REQUEST, error.reason(), &error.to_string(), span)
        }
    };
    // Kept for the recording only, if it takes this review: the same bytes, not a copy.
    let recorded = state.recording.take(&review.request).map(|taken| (taken, body.clone()));
    drop(body);
    let abandoned = Abandoned::armed();
    let budget = Budget::new(received, timeout, &snapshot.settings);
    let request = &review.request;
    // Lines written while the review is judged carry its uid (`logging/review.rs`).
    let review_log = ReviewLog::new(&request.uid, endpoint.as_str(), snapshot.generation);
    if let Some(span) = &mut span {
        span.request(&review);
    }
    let dispatch = Dispatch {
        cluster: state.cluster.get().map(|c| &**c),
        explanation: if state.explained.is_some() { Explanation::enabled() } else { Explanation::disabled() },
        trace: span.as_ref().map(|span| span.parent().clone()).unwrap_or_default(),
        ..Dispatch::new(&snapshot, &review, endpoint, budget, &state.shadows)
    };
    // Shadow calls still running go on by themselves (`pipeline/shadow.rs`). The pipeline's
    // future (kilobytes) is boxed: hyper keeps room for the route's future in every
    // connection, idle ones included, and moves it in; this one is then a pointer.
    let (outcome, _) = review_log.scope(Box::pin(pipeline::review(dispatch))).await;
    let answer = &outcome.answer;
    if let Some(span) = span {
        let code = answer.status.as_ref().and_then(|s| s.code).unwrap_or(200);
        span.answered(answer.allowed, u16::try_from(code).unwrap_or(0));
    }
    // Its metrics and its one log line (`pipeline/observe.rs`).
    observe::answered(&outcome, &review, endpoint, received.elapsed());
    if let Some((taken, body)) = recorded {
        taken.offer(observe::recorded(&outcome, &review, endpoint, body, timeout));
    }
    abandoned.answered();
    let body = encode::answer(review.version, &request.uid, answer);
    if let Some(explained) = &state.explained {
        let _ = explained.send(ExplainedReview { endpoint, uid: request.uid.value.clone(), outcome });
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

/// `/readyz`: 200 `ok` once the configuration is served (and, in cluster mode, the namespace
/// cache has synced), else 503; `?verbose` lists each check as the API server's own `/readyz`
/// does (`[+]name ok`, `[-]name reason`).
fn readiness(state: &State, query: Option<&str>) -> Response<Full<Bytes>> {
    let serving = state.ready.load(Ordering::SeqCst);
    let draining = state.draining.load(Ordering::SeqCst);
    let mut checks = vec![
        ("config", serving, if serving { "ok".to_owned() } else { "not serving yet".to_owned() }),
        ("shutdown", !draining, if draining { "draining".to_owned() } else { "ok".to_owned() }),
    ];
    if let Some(cluster) = state.cluster.get() {
        checks.extend(cluster.checks());
    }
    let ready = checks.iter().all(|(_, passed, _)| *passed);
    // Informational: an ejected webhook is the fleet's problem, not a reason to take this
    // replica out of the Service.
    checks.push(("webhooks", true, ejected_webhooks(&state.live.load())));
    if let Some(recording) = state.recording.check() {
        checks.push(("recording", true, recording));
    }
    let code = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let verbose =
        query.is_some_and(|q| q.split('&').any(|pair| pair == "verbose" || pair.starts_with("verbose=")));
    if !verbose {
        return text(code, if ready { "ok" } else { "not ready" });
    }
    let mut body = String::new();
    for (name, passed, detail) in &checks {
        body.push_str(&format!("[{}]{name} {detail}\n", if *passed { '+' } else { '-' }));
    }
    body.push_str(if ready { "readyz check passed\n" } else { "readyz check failed\n" });
    text(code, &body)
}

/// `ok`, or `N ejected: CONFIGURATION/WEBHOOK since RFC3339, …`.
fn ejected_webhooks(snapshot: &crate::config::Snapshot) -> String {
    let ejected: Vec<String> = snapshot
        .mutating
        .iter()
        .chain(&snapshot.validating)
        .filter_map(|hook| {
            let since =
                hook.breaker.ejected_since()?.duration_since(std::time::SystemTime::UNIX_EPOCH).ok()?;
            let since = crate::upstream::x509::rfc3339(since.as_secs() as i64);
            Some(format!("{}/{} since {since}", hook.configuration, hook.name))
        })
        .collect();
    if ejected.is_empty() {
        "ok".to_owned()
    } else {
        format!("{} ejected: {}", ejected.len(), ejected.join(", "))
    }
}

/// 429 with `Retry-After: 1`: counted, logged at debug only (a flood of them must not
/// become a flood of log lines).
fn overloaded(
    state: &State,
    endpoint: Endpoint,
    overload: &super::limits::Overload,
    span: Option<crate::traces::ReviewSpan>,
) -> Response<Full<Bytes>> {
    if let Some(span) = span {
        span.refused(StatusCode::TOO_MANY_REQUESTS.as_u16(), overload.reason());
    }
    tracing::debug!(stage = endpoint.as_str(), reason = overload.reason(), "review refused: overloaded");
    state.metrics.refused(endpoint, overload.reason());
    let mut response = text(StatusCode::TOO_MANY_REQUESTS, &overload.message());
    response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    response
}

fn reject(
    state: &State,
    endpoint: Endpoint,
    code: StatusCode,
    reason: &'static str,
    message: &str,
    span: Option<crate::traces::ReviewSpan>,
) -> Response<Full<Bytes>> {
    if let Some(span) = span {
        span.refused(code.as_u16(), reason);
    }
    tracing::warn!(
        stage = endpoint.as_str(),
        reason,
        code = code.as_u16(),
        "bad admission request: {}",
        Untrusted(message)
    );
    state.metrics.refused(endpoint, reason);
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
