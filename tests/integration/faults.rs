//! The fault-class suite: every way a webhook can fail to give a usable answer, against real
//! upstreams on 127.0.0.1 (real TLS with the test CA unless the class is about TLS), each under
//! `failurePolicy: Fail` (the validating configuration `closed`, through `/validate`) and
//! `Ignore` (the mutating configuration `open`, through `/mutate`): the decision is the API
//! server's (docs/semantics.md §7–§10) and it comes within the webhook's timeout.
//!
//! Fail: 500 `Internal error occurred: failed calling webhook "closed.example.com": <reason>`,
//! `<reason>` in the API server's words. Ignore: allowed, no patch, and the
//! `failed-open.mutation.webhook.admission.k8s.io_round_0_index_0` annotation.
//!
//! | fault class                               | Fail                                                                                  | Ignore      | test |
//! | ----------------------------------------- | ------------------------------------------------------------------------------------- | ----------- | ---- |
//! | connection refused                         | 500 `… Post "URL": dial tcp …: connect: connection refused`                            | failed open | `failure_policy::a_refused_connection_under_fail_is_an_internal_error`, `failure_policy::a_refused_connection_under_ignore_fails_open_at_its_index_among_matching_webhooks` |
//! | reset mid-request (RST after the head)     | 500 `… Post "URL": …connection reset by peer`                                          | failed open | [`a_connection_reset_mid_request`] |
//! | reset mid-response (RST inside the body)   | 500 `failed to call webhook: unexpected error when reading response body. Please retry. Original error: …` | failed open | [`a_connection_reset_mid_response`] |
//! | hang before the headers                    | 500 `… Post "URL?timeout=1s": context deadline exceeded`                               | failed open | `failure_policy::a_hanging_webhook_under_fail_is_an_internal_error_after_its_timeout`, `failure_policy::a_hanging_webhook_under_ignore_is_given_up_after_its_timeout` |
//! | hang mid-body                              | 500 `… unexpected error when reading response body. Please retry. Original error: context deadline exceeded` | failed open | [`a_hang_mid_body`] |
//! | body trickling slower than the timeout     | the same                                                                              | failed open | [`a_body_trickling_past_the_timeout`] |
//! | certificate from another CA                | 500 `… tls: failed to verify certificate: x509: certificate signed by unknown authority` | failed open | `failure_policy::a_webhook_whose_certificate_its_ca_bundle_does_not_trust_fails_the_call`, `upstream_tls::a_certificate_from_an_unrelated_ca_is_signed_by_an_unknown_authority` |
//! | expired certificate (issued by a CA)       | 500 `… x509: certificate has expired or is not yet valid: current time … is after …`  | failed open | [`an_expired_certificate_issued_by_the_ca_bundle`] (self-signed: `upstream_tls::an_expired_self_signed_certificate_is_refused_with_gos_validity_error`) |
//! | wrong SAN (DNS names only, IP URL)         | 500 `… x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs` | failed open | [`a_certificate_without_the_ip_san`] (other IP: `upstream_tls::a_self_signed_certificate_for_another_address_is_refused_with_gos_hostname_error`) |
//! | plain HTTP on an https URL                 | 500 `… Post "URL": tls: first record does not look like a TLS handshake`               | failed open | [`plain_http_on_an_https_url`] |
//! | HTTP/2-only upstream (ALPN `h2` only)      | called over HTTP/2: a loopback URL is offered `h2` (since Kubernetes 1.30)             | called (after `http/1.1` alone is refused) | [`an_http2_only_upstream_on_a_loopback_url_is_called_over_http2`], [`a_loopback_upstream_speaking_both_is_called_over_http1`] |
//! | redirect (307 to a working webhook)        | followed, as Go's `http.Client` does: the target's answer (301–303: followed with a `GET` and no body; the tenth in a row: `Post "<Location>": stopped after 10 redirects`) | the same | [`a_temporary_redirect_is_followed_with_the_review`], [`a_see_other_redirect_is_followed_without_the_review`], [`a_redirect_loop_stops_after_ten_redirects`] |
//! | `Connection: close` in an answer           | the connection is not used again (Go's transport neither)                            | the same    | [`a_connection_the_webhook_said_to_close_is_not_reused`] |
//! | 4xx/5xx, text or no body                   | 500 `… failed to call webhook: <client-go's text for the code>`                        | failed open | [`http_errors_without_a_status_body`] (500 with text: `failure_policy::an_http_500_from_a_webhook_under_fail_quotes_its_body`) |
//! | 4xx/5xx with a `metav1.Status` body        | 500 `… failed to call webhook: <Status.message>`                                       | failed open | [`http_errors_with_a_status_body`] |
//! | 50 MiB body                                | (gateway limit, docs/differences.md "Limits") 500 `… Post "URL": reading the response body: length limit exceeded` | failed open | [`a_50_mib_answer`] |
//! | invalid JSON                               | 500 `… failed to call webhook: couldn't get version/kind; json parse error: <Go's text>` | failed open | [`an_answer_that_is_not_json`] |
//! | wrong kind / apiVersion                    | 500 `… no kind "…" is registered for version "…"`; v1 without apiVersion: `received invalid webhook response: expected webhook response of …` | failed open | [`an_answer_of_another_kind`], `failure_policy::a_v1_response_without_api_version_is_invalid` |
//! | wrong uid                                  | 500 `… received invalid webhook response: expected response.uid="…", got "…"`          | failed open | `failure_policy::a_response_with_another_uid_is_invalid` |
//! | duplicate keys in the answer               | the last one wins (Go's decoder): not a fault                                          | the same    | [`duplicate_keys_in_the_answer_the_last_one_wins`] |
//! | patch that fails to apply                  | 500 `Internal error occurred: <json-patch error>` (internal error, no policy)           | the same    | `mutating::a_patch_that_does_not_apply_is_an_internal_error_whatever_the_policy` |
//! | patch on DELETE                            | 500 `… attempted to modify the object, which is not supported for this operation`     | the same    | `mutating::a_patch_on_delete_is_an_internal_error`, [`a_patch_on_delete_is_an_internal_error_under_ignore_too`] |
//! | copy bomb                                  | 500 `Unable to complete the copy, …` (internal error, no policy)                       | the same    | `mutating::a_copy_bomb_is_stopped_at_the_api_servers_copy_limit_whatever_the_failure_policy` |
//!
//! And: the gateway's own serving certificate rotated under load, with no failed handshake
//! ([`serving_certificate_rotation_under_load_fails_no_handshake`]).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admission_gateway::certs::Leaf;
use admission_gateway::testbed::HTTP1;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::fixtures::{self, POD_CREATE, POD_DELETE};
use crate::support::{
    ca, client_tls, loopback_certificate, mutating, reply, server_tls, validating, webhook, webhook_at,
    Answer, Fleet, MockWebhook, Reply, TestGateway,
};

const CLOSED: &str = "closed.example.com";
const OPEN: &str = "open.example.com";
const FAILED_OPEN: &str = "failed-open.mutation.webhook.admission.k8s.io_round_0_index_0";
/// Every webhook of this suite has `timeoutSeconds: 2`...
const TIMEOUT_SECONDS: u64 = 2;
/// ...and its answer must come well within twice that.
const ANSWERED_WITHIN: Duration = Duration::from_secs(4);

// ---------------------------------------------------------------------------------------------
// Both policies at once

/// The gateway's answers for one upstream under both policies.
struct Outcome {
    /// `failurePolicy: Fail`, validating.
    fail: Answer,
    /// `failurePolicy: Ignore`, mutating.
    ignore: Answer,
    /// The URL called, with its `?timeout=`.
    called: String,
}

/// Calls `url` (trusting `ca_bundle`, the test CA when `None`) once under each policy,
/// concurrently, each answer within [`ANSWERED_WITHIN`].
async fn under_both_policies(url: &str, ca_bundle: Option<&str>) -> Outcome {
    let hook = |name: &str| {
        let hook = webhook_at(name, url).timeout_seconds(TIMEOUT_SECONDS);
        match ca_bundle {
            Some(bundle) => hook.ca_bundle(bundle),
            None => hook,
        }
    };
    let gateway = TestGateway::start(Fleet::of([
        validating("closed", [hook(CLOSED)]),
        mutating("open", [hook(OPEN).ignore()]),
    ]))
    .await;
    let timed = |endpoint: &'static str| {
        let gateway = &gateway;
        async move {
            let started = Instant::now();
            let answer = gateway.review(endpoint, &fixtures::review(POD_CREATE)).await;
            let took = started.elapsed();
            assert!(took < ANSWERED_WITHIN, "{endpoint} answered after {took:?}: {}", answer.body);
            answer
        }
    };
    let (fail, ignore) = tokio::join!(timed("/validate"), timed("/mutate"));
    gateway.shutdown().await;
    Outcome { fail, ignore, called: format!("{url}?timeout={TIMEOUT_SECONDS}s") }
}

impl Outcome {
    /// The Fail answer's `<reason>`, after checking the rest of the API server's 500.
    fn fail_reason(&self) -> &str {
        let answer = &self.fail;
        assert!(!answer.allowed(), "Fail must reject: {}", answer.body);
        assert_eq!(answer.code(), Some(500), "{}", answer.body);
        assert_eq!(answer.reason(), "InternalError", "{}", answer.body);
        let prefix = format!(r#"Internal error occurred: failed calling webhook "{CLOSED}": "#);
        let reason = answer.message().strip_prefix(&prefix).unwrap_or_else(|| panic!("{}", answer.message()));
        assert_eq!(
            answer.review["response"]["status"]["details"]["causes"][0]["message"].as_str(),
            answer.message().strip_prefix("Internal error occurred: "),
            "details.causes[0] is the message without the prefix"
        );
        reason
    }

    /// The reason after `failed to call webhook: Post "URL?timeout=2s": `.
    fn transport_reason(&self) -> &str {
        let prefix = format!("failed to call webhook: Post {:?}: ", self.called);
        let reason = self.fail_reason();
        reason.strip_prefix(&prefix).unwrap_or_else(|| panic!("not a transport error: {reason}"))
    }

    /// Ignore: allowed, unchanged, annotated as failed open.
    fn assert_failed_open(&self) {
        let answer = &self.ignore;
        assert!(answer.allowed(), "Ignore must fail open: {}", answer.body);
        assert_eq!(answer.patch(), None);
        assert_eq!(answer.annotation(FAILED_OPEN), Some(OPEN), "{:?}", answer.annotation_keys());
    }
}

// ---------------------------------------------------------------------------------------------
// Raw upstreams

/// A connection as the raw upstream sees it (TLS or plain).
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A listener on 127.0.0.1 that hands every accepted connection to a misbehaving closure.
struct RawUpstream {
    url: String,
    connections: Arc<AtomicUsize>,
    accept_loop: JoinHandle<()>,
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Wire {
    /// TLS with the shared loopback certificate (HTTP/1.1).
    Tls,
    /// TLS, and the TCP connection is reset (SO_LINGER 0) when `behave` drops it.
    TlsResetOnClose,
    /// No TLS at all.
    Plain,
}

async fn raw_upstream<F, Fut>(wire: Wire, behave: F) -> RawUpstream
where
    F: Fn(Box<dyn Io>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("raw upstream listener");
    let port = listener.local_addr().unwrap().port();
    let acceptor = (wire != Wire::Plain)
        .then(|| tokio_rustls::TlsAcceptor::from(server_tls(loopback_certificate(), HTTP1)));
    let behave = Arc::new(behave);
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    let accept_loop = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            if wire == Wire::TlsResetOnClose {
                tcp.set_zero_linger().expect("SO_LINGER 0");
            }
            let (acceptor, behave) = (acceptor.clone(), behave.clone());
            tokio::spawn(async move {
                let io: Box<dyn Io> = match acceptor {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(tls) => Box::new(tls),
                        Err(_) => return,
                    },
                    None => Box::new(tcp),
                };
                behave(io).await;
            });
        }
    });
    RawUpstream { url: format!("https://127.0.0.1:{port}/webhook"), connections, accept_loop }
}

/// Reads an HTTP/1.1 request head (through the blank line); `None` if the peer went away.
async fn read_head(io: &mut Box<dyn Io>) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = data.split_off(end + 4);
            return Some((String::from_utf8_lossy(&data).into_owned(), rest));
        }
        match io.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    }
}

/// Reads a whole request with a `Content-Length` body; returns the body as JSON.
async fn read_review(io: &mut Box<dyn Io>) -> Option<Value> {
    let (head, mut body) = read_head(io).await?;
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut buffer = [0u8; 8192];
    while body.len() < length {
        match io.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    serde_json::from_slice(&body).ok()
}

/// Waits until the peer closes (or resets) the connection.
async fn until_closed(io: &mut Box<dyn Io>) {
    let mut buffer = [0u8; 1024];
    while let Ok(n) = io.read(&mut buffer).await {
        if n == 0 {
            break;
        }
    }
}

/// The head of a 200 answer with a JSON body of `length` bytes.
fn ok_head(length: usize) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n")
}

/// An upstream answering every request, on kept-alive connections, with a redirect of this
/// `status` to `location(n)` (n: the requests so far).
async fn redirecting(
    status: &'static str,
    location: impl Fn(usize) -> String + Send + Sync + 'static,
) -> RawUpstream {
    let location = Arc::new(location);
    let requests = Arc::new(AtomicUsize::new(0));
    raw_upstream(Wire::Tls, move |mut io| {
        let (location, requests) = (location.clone(), requests.clone());
        async move {
            while read_review(&mut io).await.is_some() {
                let n = requests.fetch_add(1, Ordering::SeqCst);
                let head =
                    format!("HTTP/1.1 {status}\r\nLocation: {}\r\nContent-Length: 0\r\n\r\n", location(n));
                if io.write_all(head.as_bytes()).await.is_err() || io.flush().await.is_err() {
                    return;
                }
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Connections that break or stall

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_request() {
    let upstream = raw_upstream(Wire::TlsResetOnClose, |mut io| async move {
        // The head is read, the body is not: the connection is reset under the client's feet.
        let _ = read_head(&mut io).await;
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    // Go: `read tcp 127.0.0.1:A->127.0.0.1:B: read: connection reset by peer` (ports vary).
    let reason = outcome.transport_reason();
    assert!(reason.contains("connection reset by peer"), "{reason}");
    outcome.assert_failed_open();
    assert_eq!(upstream.connections.load(Ordering::SeqCst), 2, "no retry of a POST on a fresh connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_response() {
    let upstream = raw_upstream(Wire::TlsResetOnClose, |mut io| async move {
        if read_review(&mut io).await.is_some() {
            let _ = io.write_all(ok_head(1000).as_bytes()).await;
            let _ = io.write_all(br#"{"apiVersion":"admission.k8s.io/v1","#).await;
            let _ = io.flush().await;
            // Long enough for the client to have read the head and this much of the body.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    // client-go's transformResponse: a failed body read is not a url.Error (no `Post "URL"`).
    let reason = outcome.fail_reason();
    let original = reason
        .strip_prefix(
            "failed to call webhook: unexpected error when reading response body. Please retry. Original error: ",
        )
        .unwrap_or_else(|| panic!("{reason}"));
    assert!(original.contains("connection reset by peer"), "{reason}");
    outcome.assert_failed_open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hang_mid_body() {
    let upstream = raw_upstream(Wire::Tls, |mut io| async move {
        if read_review(&mut io).await.is_some() {
            let _ = io.write_all(ok_head(1000).as_bytes()).await;
            let _ = io.write_all(br#"{"apiVersion":"admission.k8s.io/v1","#).await;
            let _ = io.flush().await;
            until_closed(&mut io).await;
        }
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    // The request context's deadline cancels the body read: Go's transport returns the
    // context's error, which client-go wraps.
    assert_eq!(
        outcome.fail_reason(),
        "failed to call webhook: unexpected error when reading response body. Please retry. Original error: context deadline exceeded"
    );
    outcome.assert_failed_open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_trickling_past_the_timeout() {
    let upstream = raw_upstream(Wire::Tls, |mut io| async move {
        if read_review(&mut io).await.is_some() {
            let _ = io.write_all(ok_head(1_000_000).as_bytes()).await;
            // One byte of (leading) whitespace every 200 ms: never idle, never done in time.
            loop {
                if io.write_all(b" ").await.is_err() || io.flush().await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    assert_eq!(
        outcome.fail_reason(),
        "failed to call webhook: unexpected error when reading response body. Please retry. Original error: context deadline exceeded"
    );
    outcome.assert_failed_open();
}

// ---------------------------------------------------------------------------------------------
// TLS

/// A CA of its own and a certificate it issued for 127.0.0.1, valid in 2020 only.
fn expired_leaf_and_its_ca() -> (Leaf, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let cert = params.signed_by(&key, &issuer).unwrap();
    let leaf = Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem() };
    (leaf, crate::support::base64(&ca_cert.pem()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_issued_by_the_ca_bundle() {
    let (leaf, ca_bundle) = expired_leaf_and_its_ca();
    let mock = MockWebhook::allowing().spawn_serving(&leaf).await;

    let outcome = under_both_policies(mock.url(), Some(&ca_bundle)).await;

    let reason = outcome.transport_reason();
    let now = reason
        .strip_prefix(
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time ",
        )
        .and_then(|rest| rest.strip_suffix(" is after 2021-01-01T00:00:00Z"))
        .unwrap_or_else(|| panic!("{reason}"));
    assert!(now.len() == 20 && now.ends_with('Z'), "RFC 3339 in UTC: {reason}");
    outcome.assert_failed_open();
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_without_the_ip_san() {
    let leaf = ca().issue(&["webhook.default.svc"]).unwrap();
    let mock = MockWebhook::allowing().spawn_serving(&leaf).await;

    let outcome = under_both_policies(mock.url(), None).await;

    assert_eq!(
        outcome.transport_reason(),
        "tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"
    );
    outcome.assert_failed_open();
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_an_https_url() {
    let upstream = raw_upstream(Wire::Plain, |mut io| async move {
        // What a plain HTTP server answers to a TLS ClientHello.
        let mut buffer = [0u8; 1024];
        let _ = io.read(&mut buffer).await;
        let _ =
            io.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        let _ = io.shutdown().await;
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    // crypto/tls, on a first record that is neither a handshake nor an alert.
    assert_eq!(outcome.transport_reason(), "tls: first record does not look like a TLS handshake");
    outcome.assert_failed_open();
}

/// The API server offers `h2` by ALPN to webhooks at a loopback or `localhost` URL (only those:
/// `isLocalHost` in staging/src/k8s.io/apiserver/pkg/util/webhook/client.go, Kubernetes 1.30+);
/// an upstream that speaks nothing but HTTP/2 is called over HTTP/2 and answers normally. The
/// gateway offers `http/1.1` first (docs/differences.md, "HTTP/1.1 to loopback webhooks too"); refused, it calls over HTTP/2, and
/// goes straight to HTTP/2 for that webhook from then on: one refused handshake, whatever the
/// number of calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_only_upstream_on_a_loopback_url_is_called_over_http2() {
    let upstream = versioned_upstream(&[b"h2"]).await;
    let outcome = under_both_policies(&upstream.url, None).await;
    for answer in [&outcome.fail, &outcome.ignore] {
        assert!(!answer.allowed());
        assert_eq!(answer.code(), Some(400), "{}", answer.body);
        assert!(answer.message().ends_with("denied the request: reached over HTTP/2.0"), "{}", answer.body);
    }
    assert_eq!(upstream.versions(), [http::Version::HTTP_2; 2]);

    let upstream = versioned_upstream(&[b"h2"]).await;
    let gateway =
        TestGateway::validating([webhook_at(CLOSED, &upstream.url).timeout_seconds(TIMEOUT_SECONDS)]).await;
    for _ in 0..3 {
        let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
        assert!(answer.message().ends_with("denied the request: reached over HTTP/2.0"), "{}", answer.body);
    }
    assert_eq!(upstream.versions(), [http::Version::HTTP_2; 3]);
    assert_eq!(upstream.refused_handshakes(), 1, "HTTP/1.1 offered once, then remembered");
}

/// A loopback upstream that speaks both is called over HTTP/1.1 (where the API server would
/// use HTTP/2): one pooled connection per call in flight rather than one shared connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_upstream_speaking_both_is_called_over_http1() {
    let upstream = versioned_upstream(&[b"h2", b"http/1.1"]).await;
    let outcome = under_both_policies(&upstream.url, None).await;

    for answer in [&outcome.fail, &outcome.ignore] {
        assert!(!answer.allowed());
        assert!(answer.message().ends_with("denied the request: reached over HTTP/1.1"), "{}", answer.body);
    }
    assert_eq!(upstream.versions(), [http::Version::HTTP_11; 2]);
}

/// An HTTPS webhook on 127.0.0.1 offering `alpn`, denying with the HTTP version it was called
/// over, which it records.
struct VersionedUpstream {
    url: String,
    seen: Arc<std::sync::Mutex<Vec<http::Version>>>,
    refused: Arc<AtomicUsize>,
    server: JoinHandle<()>,
}

impl VersionedUpstream {
    fn versions(&self) -> Vec<http::Version> {
        self.seen.lock().unwrap().clone()
    }

    /// TLS handshakes that failed (no protocol in common).
    fn refused_handshakes(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }
}

impl Drop for VersionedUpstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn versioned_upstream(alpn: &[&[u8]]) -> VersionedUpstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://127.0.0.1:{}/webhook", listener.local_addr().unwrap().port());
    let acceptor = tokio_rustls::TlsAcceptor::from(server_tls(loopback_certificate(), alpn));
    let versions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let (seen, failed) = (versions.clone(), refused.clone());
    let server = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen, failed) = (acceptor.clone(), seen.clone(), failed.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    failed.fetch_add(1, Ordering::SeqCst);
                    return;
                };
                let http2 = tls.get_ref().1.alpn_protocol() == Some(&b"h2"[..]);
                let service =
                    hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let version = request.version();
                            seen.lock().unwrap().push(version);
                            let body = request.into_body().collect().await?.to_bytes();
                            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            let Reply::Json(answer) =
                                reply::deny(&review, &format!("reached over {version:?}"))
                            else {
                                unreachable!()
                            };
                            Ok::<_, hyper::Error>(http::Response::new(Full::new(Bytes::from(
                                answer.to_string(),
                            ))))
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(tls);
                if http2 {
                    let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(io, service)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                }
            });
        }
    });
    VersionedUpstream { url, seen: versions, refused, server }
}

// ---------------------------------------------------------------------------------------------
// HTTP answers

/// client-go's rest client uses a plain `http.Client` (no `CheckRedirect`): a 307 is followed
/// with the same method and body (Go's net/http `Client.Do`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_redirect_is_followed_with_the_review() {
    let target = MockWebhook::denying("reached through the redirect").spawn().await;
    let location = target.url().to_owned();
    let upstream = redirecting("307 Temporary Redirect", move |_| location.clone()).await;

    let outcome = under_both_policies(&upstream.url, None).await;

    for answer in [&outcome.fail, &outcome.ignore] {
        assert!(!answer.allowed());
        assert!(
            answer.message().ends_with("denied the request: reached through the redirect"),
            "{}",
            answer.body
        );
    }
    let requests = target.requests();
    assert_eq!(requests.len(), 2);
    for request in requests {
        assert_eq!(request.review["kind"], "AdmissionReview", "the body went along");
        assert_eq!(request.timeout, None, "the Location as given: the ?timeout= does not go along");
    }
}

/// A webhook that answers `Connection: close` gets the next call on a new connection, even
/// when it leaves the old one open (a webhook replica shutting down says so; reusing the
/// connection would fail the next call, kubernetes/kubernetes#127335).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_webhook_said_to_close_is_not_reused() {
    let upstream = raw_upstream(Wire::Tls, |mut io| async move {
        if let Some(review) = read_review(&mut io).await {
            let Reply::Json(answer) = reply::allow(&review) else { unreachable!() };
            let answer = answer.to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            );
            let _ = io.write_all(format!("{head}{answer}").as_bytes()).await;
            let _ = io.flush().await;
            // Left open: a request sent on it now would never be answered.
            until_closed(&mut io).await;
        }
    })
    .await;
    let gateway = TestGateway::validating([
        webhook_at("closing.example.com", &upstream.url).timeout_seconds(TIMEOUT_SECONDS)
    ])
    .await;

    for _ in 0..3 {
        let started = Instant::now();
        let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
        assert!(answer.allowed(), "{}", answer.body);
        // A call that waited for the never-coming answer cannot end before its timeout.
        let took = started.elapsed();
        assert!(took < Duration::from_secs(TIMEOUT_SECONDS), "answered after a timeout: {took:?}");
    }
    assert_eq!(upstream.connections.load(Ordering::SeqCst), 3, "one connection per call");
}

/// A 303 (like 301 and 302) is followed with a `GET` and no body, as Go's client does: the
/// review does not reach the target, whose answer then cannot be for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_see_other_redirect_is_followed_without_the_review() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = seen.clone();
    let target = raw_upstream(Wire::Tls, move |mut io| {
        let recorded = recorded.clone();
        async move {
            // Bodiless requests, one after another on a kept-alive connection.
            while let Some((head, body)) = read_head(&mut io).await {
                recorded
                    .lock()
                    .unwrap()
                    .push((head.lines().next().unwrap_or_default().to_owned(), body.len()));
                let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": "not-the-review's", "allowed": true}})
                .to_string();
                let written = io.write_all(format!("{}{answer}", ok_head(answer.len())).as_bytes()).await;
                if written.is_err() || io.flush().await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    let location = format!("{}/elsewhere", target.url);
    let upstream = redirecting("303 See Other", move |_| location.clone()).await;

    let outcome = under_both_policies(&upstream.url, None).await;

    assert_eq!(outcome.fail.code(), Some(500));
    let message = outcome.fail.message();
    assert!(message.contains("received invalid webhook response: expected response.uid="), "{message}");
    assert!(message.ends_with(r#", got "not-the-review's""#), "{message}");
    assert!(outcome.ignore.allowed(), "{}", outcome.ignore.body);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (request_line, body) in seen {
        assert!(request_line.starts_with("GET /webhook/elsewhere "), "{request_line}");
        assert_eq!(body, 0, "no body after a 303");
    }
}

/// A webhook that redirects to itself: the tenth redirect is not followed, and the call fails
/// with Go's error, naming the last `Location` as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_stops_after_ten_redirects() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let upstream = redirecting("307 Temporary Redirect", move |_| {
        format!("/loop/{}", counted.fetch_add(1, Ordering::SeqCst))
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    let message = outcome.fail.message();
    assert!(message.contains(r#"failed to call webhook: Post "/loop/"#), "{message}");
    assert!(message.ends_with(r#"": stopped after 10 redirects"#), "{message}");
    assert!(outcome.ignore.allowed(), "{}", outcome.ignore.body);
    assert_eq!(requests.load(Ordering::SeqCst), 20, "ten requests per call, two calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_without_a_status_body() {
    let cases: [(u16, &'static str, &'static str, &str); 5] = [
        (
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n",
            "the server could not find the requested resource",
        ),
        (403, "text/plain", "only the API server may call\n", "only the API server may call"),
        (401, "", "", "the server has asked for the client to provide credentials"),
        (
            502,
            "text/html",
            "<html>bad gateway</html>",
            r#"an error on the server ("<html>bad gateway</html>") has prevented the request from succeeding"#,
        ),
        (
            500,
            "application/json",
            // Looks like a Status, but without `kind` Go's decoder cannot take it for one.
            r#"{"status":"Failure","message":"not a Status","code":500}"#,
            r#"an error on the server ("unknown") has prevented the request from succeeding"#,
        ),
    ];
    for (code, content_type, body, expected) in cases {
        let mock = MockWebhook::answering(move |_| reply::http(code, content_type, body)).spawn().await;

        let outcome = under_both_policies(mock.url(), None).await;

        assert_eq!(outcome.fail_reason(), format!("failed to call webhook: {expected}"), "HTTP {code}");
        outcome.assert_failed_open();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_with_a_status_body() {
    let cases: [(u16, &'static str, &str); 2] = [
        (
            503,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"webhook is draining","reason":"ServiceUnavailable","code":503}"#,
            "webhook is draining",
        ),
        (422, r#"{"kind":"Status","status":"Failure","message":"bad review","code":422}"#, "bad review"),
    ];
    for (code, body, expected) in cases {
        let mock = MockWebhook::answering(move |_| reply::http(code, "application/json", body)).spawn().await;

        let outcome = under_both_policies(mock.url(), None).await;

        assert_eq!(outcome.fail_reason(), format!("failed to call webhook: {expected}"), "HTTP {code}");
        outcome.assert_failed_open();
    }
}

/// The API server reads any answer whole; the gateway refuses one over 16 MiB (docs/differences.md,
/// "Limits") instead of buffering it, as a call error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mib_answer() {
    const SIZE: usize = 50 * 1024 * 1024;
    let upstream = raw_upstream(Wire::Tls, |mut io| async move {
        let Some(review) = read_review(&mut io).await else { return };
        let answer = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": true},
        })
        .to_string();
        let _ = io.write_all(ok_head(SIZE).as_bytes()).await;
        let _ = io.write_all(answer.as_bytes()).await;
        // Then trailing whitespace, valid JSON, until 50 MiB or the reader gives up.
        let padding = vec![b' '; 64 * 1024];
        let mut written = answer.len();
        while written < SIZE {
            let n = padding.len().min(SIZE - written);
            if io.write_all(&padding[..n]).await.is_err() {
                break;
            }
            written += n;
        }
        let _ = io.flush().await;
    })
    .await;

    let outcome = under_both_policies(&upstream.url, None).await;

    assert_eq!(outcome.transport_reason(), "reading the response body: length limit exceeded");
    outcome.assert_failed_open();
}

/// A 200 answer with this body (the request's uid in place of `UID`).
async fn answering_200(body: &'static str) -> crate::support::mock_webhook::Mock {
    MockWebhook::answering(move |review| Reply::Http {
        status: 200,
        content_type: "application/json",
        body: body.replace("UID", review["request"]["uid"].as_str().unwrap_or_default()),
    })
    .spawn()
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_is_not_json() {
    let cases = [
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true}"#,
            "unexpected end of JSON input",
        ),
        (
            r#"{apiVersion: admission.k8s.io/v1}"#,
            "invalid character 'a' looking for beginning of object key string",
        ),
    ];
    for (body, go_error) in cases {
        let mock = answering_200(body).await;

        let outcome = under_both_policies(mock.url(), None).await;

        assert_eq!(
            outcome.fail_reason(),
            format!("failed to call webhook: couldn't get version/kind; json parse error: {go_error}"),
            "{body}"
        );
        outcome.assert_failed_open();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_another_kind() {
    let mock = answering_200(
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionResponse","response":{"uid":"UID","allowed":true}}"#,
    )
    .await;

    let outcome = under_both_policies(mock.url(), None).await;

    // Go adds ` in scheme "<file:line of the scheme's creation>"`, which varies by release.
    let reason = outcome.fail_reason();
    assert!(
        reason.starts_with(
            r#"failed to call webhook: no kind "AdmissionResponse" is registered for version "admission.k8s.io/v1""#
        ),
        "{reason}"
    );
    outcome.assert_failed_open();
}

/// Go's decoder (sigs.k8s.io/json, like encoding/json) keeps the last of duplicate keys: such
/// an answer is no fault at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_in_the_answer_the_last_one_wins() {
    let allows_last = answering_200(
        r#"{"kind":"Status","apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"other","uid":"UID","allowed":false,"allowed":true}}"#,
    )
    .await;
    let denies_last = answering_200(
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"status":{"message":"first"},"allowed":false,"status":{"message":"last"}}}"#,
    )
    .await;

    let allowed = under_both_policies(allows_last.url(), None).await;
    let denied = under_both_policies(denies_last.url(), None).await;

    for answer in [&allowed.fail, &allowed.ignore] {
        assert!(answer.allowed(), "{}", answer.body);
        assert_eq!(answer.annotation(FAILED_OPEN), None);
    }
    for answer in [&denied.fail, &denied.ignore] {
        assert!(!answer.allowed());
        assert!(answer.message().ends_with("denied the request: last"), "{}", answer.body);
    }
}

// ---------------------------------------------------------------------------------------------
// Patches

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_on_delete_is_an_internal_error_under_ignore_too() {
    let patcher =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/gone", "value": "yes"}]))
            .spawn()
            .await;
    let gateway = TestGateway::mutating([webhook(OPEN, &patcher).ignore()]).await;

    let answer = gateway.mutate(&fixtures::review(POD_DELETE)).await;

    assert!(!answer.allowed(), "an internal error: failurePolicy does not apply");
    assert_eq!(answer.code(), Some(500));
    assert_eq!(
        answer.message(),
        format!(
            r#"Internal error occurred: admission webhook "{OPEN}" attempted to modify the object, which is not supported for this operation"#
        )
    );
}

// ---------------------------------------------------------------------------------------------
// The gateway's own serving certificate

/// One review on a fresh connection (a full handshake each time); the certificate served.
async fn review_on_a_new_connection(
    address: std::net::SocketAddr,
    review: &Value,
) -> Result<Vec<u8>, String> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(ca())));
    let tcp = tokio::net::TcpStream::connect(address).await.map_err(|e| format!("connect: {e}"))?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.map_err(|e| format!("handshake: {e}"))?;
    let served = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec());
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = http::Request::post(format!("https://{address}/validate"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .unwrap();
    let response = sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    let answer: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    if status != 200 || answer["response"]["allowed"] != json!(true) {
        return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
    }
    served.ok_or_else(|| "no certificate served".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serving_certificate_rotation_under_load_fails_no_handshake() {
    const ROTATIONS: usize = 3;
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;
    let address = gateway.address();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut senders = Vec::new();
    for _ in 0..4 {
        let stop = stop.clone();
        senders.push(tokio::spawn(async move {
            let review = fixtures::review(POD_CREATE);
            let (mut served, mut failures) = (Vec::new(), Vec::new());
            while !stop.load(Ordering::SeqCst) {
                match review_on_a_new_connection(address, &review).await {
                    Ok(certificate) => {
                        if served.last() != Some(&certificate) {
                            served.push(certificate);
                        }
                    }
                    Err(error) => failures.push(error),
                }
            }
            (served, failures)
        }));
    }

    let mut certificates =
        vec![review_on_a_new_connection(address, &fixtures::review(POD_CREATE)).await.unwrap()];
    for _ in 0..ROTATIONS {
        gateway.rotate_certificate(ca());
        let rotated = crate::support::eventually(Duration::from_secs(10), || async {
            let served = review_on_a_new_connection(address, &fixtures::review(POD_CREATE)).await;
            served.is_ok_and(|c| Some(&c) != certificates.last())
        })
        .await;
        assert!(rotated, "the rotated certificate is not served");
        certificates.push(review_on_a_new_connection(address, &fixtures::review(POD_CREATE)).await.unwrap());
        // Some load on the new certificate before the next rotation.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.store(true, Ordering::SeqCst);

    let mut reviews_served_by = std::collections::HashSet::new();
    for sender in senders {
        let (served, failures) = sender.await.unwrap();
        assert!(failures.is_empty(), "{} failed: {:?}", failures.len(), &failures[..failures.len().min(3)]);
        reviews_served_by.extend(served);
    }
    assert_eq!(certificates.len(), ROTATIONS + 1);
    assert!(reviews_served_by.len() > ROTATIONS, "the load saw the rotations: {}", reviews_served_by.len());
    assert!(allow.calls() > 10, "{} reviews", allow.calls());
}
