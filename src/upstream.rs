//! Calls to downstream webhooks: pooled HTTPS clients, deadlines, and the strict response
//! checks of kube-apiserver (docs/semantics.md §6–§8).
//!
//! A [`Client`] exists once per distinct client configuration (CA bundle) and is shared by
//! every webhook with that configuration and across configuration reloads, so kept-alive TLS
//! connections survive both.

mod answer;
pub(crate) mod breaker;
pub(crate) mod error;
mod redirect;
mod verify;
pub(crate) mod x509;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;
use tokio::time::Instant;

use answer::check_reply;
pub(crate) use answer::{decode_review, Sent, DECODE_ASIDE_BYTES};
pub(crate) use error::CallError;

use crate::review::WebhookResponse;
use crate::telemetry::names;

/// The API server's HTTP client gives every webhook call at most this long (§7.3).
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// A webhook answer larger than this is refused instead of buffered.
pub(crate) const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes read from an upstream connection at a time.
const UPSTREAM_READ_BUFFER: usize = 4096;
/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per webhook `host:port`, shared out between the serving threads'
/// pools (client-go keeps 25; the calls in flight, and so the connections open, are bounded
/// by `maxReviewsInFlight`).
const POOL_MAX_IDLE_PER_HOST: usize = 256;
/// Loopback webhooks remembered as speaking only HTTP/2 (beyond, each call tries HTTP/1.1 first).
const MAX_HTTP2_ONLY: usize = 1024;
/// TCP connect limit (the request deadline applies as well).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

type HttpsClient = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Counted>, Full<Bytes>>;

/// The TCP connector, counting each connection it opens by upstream `host:port`
/// (`admission_gateway_upstream_connections_total`): a count climbing with steady traffic
/// means connections are not being reused (an upstream closing them, a pool too small).
#[derive(Clone)]
struct Counted(HttpConnector);

impl tower_service::Service<http::Uri> for Counted {
    type Response = <HttpConnector as tower_service::Service<http::Uri>>::Response;
    type Error = <HttpConnector as tower_service::Service<http::Uri>>::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let host = uri.authority().map_or_else(String::new, |a| a.as_str().to_owned());
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let connected = connecting.await;
            let result = if connected.is_ok() { "opened" } else { "failed" };
            metrics::counter!(names::UPSTREAM_CONNECTIONS, "host" => host, "result" => result).increment(1);
            connected
        })
    }
}

/// A pooled HTTPS client for one client configuration. Cheap to clone.
///
/// Each client is kept once per serving thread (and once for the other threads), so that a
/// review's calls use connections owned by its own thread (`server/threads.rs`).
#[derive(Clone)]
pub(crate) struct Client {
    /// HTTP/1.1 only, over a pool of connections: every webhook is called this way first.
    http: Arc<[HttpsClient]>,
    /// `h2` and `http/1.1` offered by ALPN: for a webhook at a loopback or `localhost` URL
    /// that refused `http/1.1` alone (see [`Client::post`]).
    loopback: Arc<[HttpsClient]>,
    /// The `host:port`s of such webhooks, called with `loopback` from then on.
    http2_only: Arc<Http2Only>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}

/// Every client built so far, by CA bundle (`None`: the system's roots).
#[derive(Default)]
pub(crate) struct Clients {
    by_ca_bundle: Mutex<HashMap<Option<Vec<u8>>, Client>>,
    /// Each webhook's breaker (fast failure), kept across reloads like the clients.
    pub(crate) breakers: breaker::Breakers,
    /// The serving threads each client keeps a pool of connections for (`lanes.rs`); 0 for a
    /// one-off command, whose calls run on no serving thread.
    serving_threads: usize,
}

impl Clients {
    /// Clients for a server of `serving_threads` threads: each keeps a pool per serving thread,
    /// and one for every other thread.
    pub(crate) fn for_threads(serving_threads: usize) -> Self {
        Clients { serving_threads, ..Clients::default() }
    }

    /// The client for this CA bundle, built on first use.
    pub(crate) fn client(&self, ca_bundle: Option<&[u8]>) -> Result<Client, String> {
        let key = ca_bundle.map(<[u8]>::to_vec);
        let mut cache = self.by_ca_bundle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = cache.get(&key) {
            return Ok(client.clone());
        }
        let client = build_client(ca_bundle, self.serving_threads + 1)?;
        cache.insert(key, client.clone());
        Ok(client)
    }
}

/// A root pool: the trust anchors, and the certificates they were made of (for Go's rule on a
/// server certificate that is itself in the pool, see `verify.rs`).
#[derive(Clone)]
struct Roots {
    anchors: Arc<RootCertStore>,
    certificates: Arc<HashSet<Vec<u8>>>,
}

/// A client with `pools` pools of connections: one per serving thread, and one for the rest.
fn build_client(ca_bundle: Option<&[u8]>, pools: usize) -> Result<Client, String> {
    let roots = match ca_bundle {
        // A CA bundle replaces the system trust store (§7.1).
        Some(pem) => {
            let mut anchors = RootCertStore::empty();
            let mut certificates = HashSet::new();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert =
                    cert.map_err(|e| format!("unable to load root certificates: {}", x509::pem_problem(&e)))?;
                anchors.add(cert.clone()).map_err(|e| format!("unable to load root certificates: {e}"))?;
                certificates.insert(cert.to_vec());
            }
            if anchors.is_empty() {
                return Err("unable to load root certificates: no certificates found in caBundle".into());
            }
            Roots { anchors: Arc::new(anchors), certificates: Arc::new(certificates) }
        }
        None => system_roots(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = verify::WebhookVerifier::new(roots.anchors, roots.certificates, provider.clone())?;
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let http = Counted(tcp);
    // kube-apiserver offers only `http/1.1` by ALPN (§7.1), but at loopback URLs; the gateway
    // at all of them (see `Client::post`). hyper-rustls' builder would offer no ALPN at all for
    // HTTP/1.1; an `h2`-only server must be able to refuse, as it refuses the API server.
    let mut http1_tls = tls.clone();
    http1_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut https = hyper_rustls::HttpsConnector::from((http.clone(), http1_tls));
    https.enforce_https();
    // For loopback URLs whose server refused that: `h2` and `http/1.1` by ALPN.
    let loopback = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_all_versions()
        .wrap_connector(http);
    // Lane 0 (any other thread) is rarely used: the serving threads share the budget.
    let idle_per_pool = POOL_MAX_IDLE_PER_HOST.div_ceil((pools - 1).max(1));
    let pooled = || {
        let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
        builder
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(idle_per_pool)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            // Answers are small, and a connection keeps its read buffer while it waits for one:
            // 4 KiB per read (hyper starts at 8) is 8 MiB less with 2,000 calls in flight.
            // A larger answer takes more reads, not a larger buffer.
            .http1_read_buf_exact_size(UPSTREAM_READ_BUFFER);
        builder
    };
    Ok(Client {
        http: (0..pools).map(|_| pooled().build(https.clone())).collect(),
        loopback: (0..pools).map(|_| pooled().build(loopback.clone())).collect(),
        http2_only: Arc::default(),
    })
}

/// `isLocalHost` of staging/src/k8s.io/apiserver/pkg/util/webhook/client.go: `localhost` (any
/// case) or a loopback IP address.
fn is_local_host(uri: &http::Uri) -> bool {
    let host = uri.host().unwrap_or_default();
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The system trust store, read once.
fn system_roots() -> Roots {
    static ROOTS: OnceLock<Roots> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut anchors = RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let certificates = found.certs.iter().map(|cert| cert.to_vec()).collect();
            anchors.add_parsable_certificates(found.certs);
            Roots { anchors: Arc::new(anchors), certificates: Arc::new(certificates) }
        })
        .clone()
}

/// The `timeout` query value for a call with this much time left: rounded up to whole seconds
/// and written as Go writes a `time.Duration` (§7.3).
pub(crate) fn timeout_param(remaining: Duration) -> String {
    let mut seconds = remaining.as_secs();
    if remaining.subsec_nanos() > 0 {
        seconds += 1;
    }
    let (hours, minutes, seconds) = (seconds / 3600, (seconds / 60) % 60, seconds % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// The `host:port`s of loopback webhooks that refused HTTP/1.1 (at most [`MAX_HTTP2_ONLY`]).
/// Almost always empty: a call reads one flag, and takes the lock only if some were found.
#[derive(Default)]
struct Http2Only {
    any: std::sync::atomic::AtomicBool,
    known: Mutex<HashSet<String>>,
}

impl Http2Only {
    fn contains(&self, authority: &str) -> bool {
        self.any.load(std::sync::atomic::Ordering::Acquire)
            && self.known.lock().is_ok_and(|known| known.contains(authority))
    }

    fn insert(&self, authority: &str) {
        if let Ok(mut known) = self.known.lock() {
            if known.len() < MAX_HTTP2_ONLY {
                known.insert(authority.to_owned());
                self.any.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }
}

/// One call's result at the HTTP level.
struct HttpReply {
    status: http::StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl Client {
    /// This thread's HTTP/1.1 pool.
    fn http(&self) -> &HttpsClient {
        &self.http[crate::lanes::lane() % self.http.len()]
    }

    /// This thread's client for HTTP/2-only loopback webhooks.
    fn loopback(&self) -> &HttpsClient {
        &self.loopback[crate::lanes::lane() % self.loopback.len()]
    }

    /// POSTs the body `encode` makes to `url?timeout=<query>` and checks the answer as the API
    /// server does; with the answer's HTTP status, if one came.
    /// `deadline` is the effective one (webhook timeout and request deadline combined); the
    /// 30 s client limit applies on top.
    pub(crate) async fn call(
        &self,
        url: &str,
        query: &str,
        encode: impl Fn() -> Vec<u8>,
        deadline: Option<Instant>,
        sent: &Sent<'_>,
    ) -> (Option<u16>, Result<WebhookResponse, CallError>) {
        let full_url = format!("{url}?timeout={query}");
        let hard_deadline = Instant::now() + CLIENT_TIMEOUT;
        let deadline = deadline.map_or(hard_deadline, |d| d.min(hard_deadline));
        match self.post(&full_url, encode, deadline, sent.trace).await {
            Ok(reply) => (Some(reply.status.as_u16()), check_reply(reply, sent, deadline).await),
            Err(error) => (None, Err(error)),
        }
    }

    /// A plain JSON POST (the demo's client); returns the status and body.
    pub(crate) async fn post_json(&self, url: &str, body: Vec<u8>) -> Result<(u16, Bytes), String> {
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        let reply = self.post(url, || body.clone(), deadline, None).await.map_err(|e| e.to_string())?;
        Ok((reply.status.as_u16(), reply.body))
    }

    /// Sends the request, following redirects (`upstream/redirect.rs`), and reads the answer
    /// whole, all before `deadline`. As in client-go, a failure while reading the body is not
    /// reported as one of the request (§8.1).
    /// `encode` makes the body for each request sent (the first, and again after a redirect
    /// that keeps it or a switch to HTTP/2): the encoded review is not held while the webhook
    /// takes its time, which is most of a review's memory in flight besides the connections.
    /// `trace`: the call span's `traceparent` and `tracestate` (src/traces.rs).
    ///
    /// HTTP/1.1 over a pool of connections, for every webhook. The API server offers `h2` too
    /// at a loopback or `localhost` URL (§7.1), but hyper keeps a single HTTP/2 connection
    /// per host, which the server's stream limit caps, where a pool grows with the calls in
    /// flight (and costs less per call: `loadtest/README.md`). A loopback webhook that speaks
    /// only HTTP/2 refuses `http/1.1` in the handshake, before anything is sent; it is then
    /// called over HTTP/2, as the API server would, from that call on.
    async fn post(
        &self,
        url: &str,
        encode: impl Fn() -> Vec<u8>,
        deadline: Instant,
        trace: Option<&http::HeaderMap>,
    ) -> Result<HttpReply, CallError> {
        let mut uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| CallError::Transport {
            url: url.to_owned(),
            message: e.to_string(),
        })?;
        let (mut method, mut with_body) = (http::Method::POST, true);
        let mut redirects = 0;
        loop {
            // Owned only after a redirect: the first hop's URL is borrowed.
            let current: std::borrow::Cow<'_, str> =
                if redirects == 0 { url.into() } else { uri.to_string().into() };
            let transport =
                |message: String| CallError::Transport { url: current.clone().into_owned(), message };
            let request = || {
                let mut request = http::Request::builder()
                    .method(method.clone())
                    .uri(uri.clone())
                    .header(http::header::ACCEPT, "application/json, */*")
                    .header(http::header::USER_AGENT, "kube-apiserver-admission");
                if with_body {
                    request = request.header(http::header::CONTENT_TYPE, "application/json");
                }
                let mut request = request
                    .body(Full::new(if with_body { Bytes::from(encode()) } else { Bytes::new() }))
                    .map_err(|e| transport(e.to_string()))?;
                if let Some(trace) = trace {
                    request
                        .headers_mut()
                        .extend(trace.iter().map(|(name, value)| (name.clone(), value.clone())));
                }
                Ok::<_, CallError>(request)
            };
            let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
            let local = is_local_host(&uri);
            let http2_only = local && self.http2_only.contains(&authority);
            let http = if http2_only { self.loopback() } else { self.http() };
            let mut sent = tokio::time::timeout_at(deadline, http.request(request()?))
                .await
                .map_err(|_| CallError::Timeout { url: current.clone().into_owned() })?;
            if let Err(error) = &sent {
                if local && !http2_only && error::no_common_protocol(error) {
                    self.http2_only.insert(&authority);
                    sent = tokio::time::timeout_at(deadline, self.loopback().request(request()?))
                        .await
                        .map_err(|_| CallError::Timeout { url: current.clone().into_owned() })?;
                }
            }
            let response = sent.map_err(|e| error::request_failed(&e, &current, &authority))?;
            let status = response.status();
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .filter(|location| !location.is_empty());
            if let (Some((next_method, next_body)), Some(location)) =
                (redirect::follow(status, &method), location)
            {
                let next = redirect::resolve(&uri, location).map_err(|e| {
                    transport(format!(
                        "failed to parse Location header {}: {e}",
                        crate::go::strconv::quote(location)
                    ))
                })?;
                redirects += 1;
                if redirects == redirect::MAX_REDIRECTS {
                    return Err(CallError::Transport {
                        url: location.to_owned(),
                        message: format!("stopped after {} redirects", redirect::MAX_REDIRECTS),
                    });
                }
                (uri, method, with_body) = (next, next_method, with_body && next_body);
                continue;
            }
            let content_type = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = tokio::time::timeout_at(
                deadline,
                Limited::new(response.into_body(), MAX_RESPONSE_BYTES).collect(),
            )
            .await
            .map_err(|_| CallError::BodyRead("context deadline exceeded".into()))?
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    transport(format!("reading the response body: {e}"))
                } else {
                    CallError::BodyRead(error::body_read_failed(e.as_ref()))
                }
            })?
            .to_bytes();
            return Ok(HttpReply { status, content_type, body });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_localhost_urls_are_local() {
        for (url, local) in [
            ("https://127.0.0.1:8443/x", true),
            ("https://127.9.9.9/x", true),
            ("https://[::1]:443/x", true),
            ("https://LocalHost/x", true),
            ("https://10.0.0.1/x", false),
            ("https://webhook.default.svc:443/x", false),
            ("https://localhost.example.com/x", false),
        ] {
            assert_eq!(is_local_host(&url.parse().unwrap()), local, "{url}");
        }
    }

    #[test]
    fn timeout_param_rounds_up_and_reads_like_go() {
        let cases = [
            (Duration::from_secs(10), "10s"),
            (Duration::from_millis(7_001), "8s"),
            (Duration::from_millis(1), "1s"),
            (Duration::ZERO, "0s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(3_725), "1h2m5s"),
        ];
        for (remaining, expected) in cases {
            assert_eq!(timeout_param(remaining), expected, "{remaining:?}");
        }
    }
}
