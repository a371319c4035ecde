//! A mock admission webhook *fleet* for load tests: one process, many webhooks told apart by
//! URL path, over HTTPS (rustls/ring, HTTP/1.1 and HTTP/2, keep-alive; the crate's
//! `testbed::server_tls` and `testbed::serve`) and/or plain HTTP, plus an optional address
//! that refuses connections.
//!
//! ```text
//! cargo run --release --example mock-webhook -- \
//!     [--listen ADDR --tls-cert CERT --tls-key KEY]   # HTTPS
//!     [--listen-http ADDR]                            # plain HTTP (same webhooks)
//!     [--refuse ADDR]                                 # a port that refuses connections
//!     [--hook PATH=SPEC]... [--hooks FILE] [--threads N]
//! ```
//!
//! At least one of `--listen`/`--listen-http` is needed; port 0 picks a free port. Once bound,
//! each listener is printed on standard output, one line each, in this order:
//! `listening on https://ADDR`, `listening on http://ADDR`, `refusing on ADDR`.
//! `--refuse` binds a TCP socket without listening on it: the port stays reserved for the
//! process's lifetime and every connection to it is refused (a dead webhook).
//! `--threads` sets the tokio worker threads (default: one per core).
//!
//! **Webhooks.** `--hook PATH=SPEC` (repeatable), or `--hooks FILE` with one `PATH=SPEC` a line
//! (blank lines and `#` comments skipped). `PATH` is matched exactly (the query is ignored);
//! `*` answers every path no other hook has. Without any hook, every path allows. Another
//! path gets 404. `SPEC` is comma-separated items, one action (default `allow`) and at most
//! one `delay`:
//!
//! | item | answer |
//! | --- | --- |
//! | `allow` | `allowed: true` |
//! | `deny` | `allowed: false`, `status.code` 403, message `denied by mock-webhook PATH` |
//! | `label:KEY=VALUE` | `allowed: true` with a JSONPatch adding that label (creating `metadata.labels` if absent) |
//! | `labels:N` | `allowed: true` with a JSONPatch of N operations, each adding one label `many-I` = `I` (after one creating `metadata.labels` if absent) |
//! | `status:CODE` | HTTP status CODE, text body (an erroring webhook) |
//! | `hang` | never answers (the caller times out) |
//! | `reset` | drops the connection without an answer (the caller sees it closed) |
//! | `delay:DIST` | waits before the action: `20ms` (fixed), `uniform:5ms..20ms`, `exp:10ms` (exponential, that mean), `lognormal:5ms..50ms` (that p50 and p99) |
//!
//! Durations are a decimal number and `us`, `ms` or `s`. Example:
//! `--hook /mutate-team=label:team=a,delay:uniform:1ms..3ms --hook /validate=allow --hook /down=status:500`.
//!
//! The body must be an AdmissionReview (up to 3 MiB); only `apiVersion`, `request.uid` and
//! whether `request.object.metadata.labels` exists are read, the rest is skipped. The answer
//! echoes the review's `apiVersion` and `uid`. `GET /_stats` lists `PATH CALLS IN_FLIGHT` per
//! webhook (calls received; calls not answered yet).
//!
//! The module is also compiled into the integration tests (`tests/integration/loadtest_mock.rs`),
//! which start it in process through [`start`].

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher as _, Hasher as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinHandle;

use admission_gateway::testbed;

/// The API server's own limit on an AdmissionReview body.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub const USAGE: &str = "usage: mock-webhook [--listen ADDR --tls-cert PATH --tls-key PATH] \
[--listen-http ADDR] [--refuse ADDR] [--hook PATH=SPEC]... [--hooks FILE] [--threads N]
SPEC: comma-separated: allow | deny | label:KEY=VALUE | labels:N | status:CODE | hang | reset,
      and delay:DIST with DIST = 20ms | uniform:5ms..20ms | exp:10ms | lognormal:P50..P99";

// ---------------------------------------------------------------------------------------------
// Configuration

/// The command line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// HTTPS listener, with `tls_cert` and `tls_key`.
    pub https: Option<SocketAddr>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Plain HTTP listener.
    pub http: Option<SocketAddr>,
    /// A bound, never listening socket.
    pub refuse: Option<SocketAddr>,
    pub hooks: Vec<HookSpec>,
    pub threads: Option<usize>,
}

/// What a webhook answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    Deny,
    Label {
        key: String,
        value: String,
    },
    /// A patch of this many operations, each adding one label.
    Labels(usize),
    Status(u16),
    Hang,
    Reset,
}

/// How long a webhook waits before it acts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delay {
    Fixed(Duration),
    Uniform(Duration, Duration),
    Exponential { mean: Duration },
    LogNormal { p50: Duration, p99: Duration },
}

/// One webhook: its path (or `*`), action and delay.
#[derive(Clone, Debug, PartialEq)]
pub struct HookSpec {
    pub path: String,
    pub action: Action,
    pub delay: Option<Delay>,
}

/// Parses the arguments after the program name.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> anyhow::Result<Options> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        let address = |text: String| -> anyhow::Result<SocketAddr> {
            text.parse().with_context(|| format!("{flag}: expected HOST:PORT, got {text:?}"))
        };
        match flag.as_str() {
            "--listen" => options.https = Some(address(value()?)?),
            "--listen-http" => options.http = Some(address(value()?)?),
            "--refuse" => options.refuse = Some(address(value()?)?),
            "--tls-cert" => options.tls_cert = Some(PathBuf::from(value()?)),
            "--tls-key" => options.tls_key = Some(PathBuf::from(value()?)),
            "--hook" => options.hooks.push(parse_hook(&value()?)?),
            "--hooks" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
                for (number, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let hook = parse_hook(line).with_context(|| format!("{path}:{}", number + 1))?;
                    options.hooks.push(hook);
                }
            }
            "--threads" => {
                let threads: usize = value()?.parse().context("--threads: expected a number")?;
                ensure!(threads > 0, "--threads: at least 1");
                options.threads = Some(threads);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    ensure!(
        options.https.is_some() || options.http.is_some(),
        "--listen or --listen-http is required\n{USAGE}"
    );
    ensure!(
        options.https.is_none() || (options.tls_cert.is_some() && options.tls_key.is_some()),
        "--listen (HTTPS) needs --tls-cert and --tls-key\n{USAGE}"
    );
    let mut seen = std::collections::HashSet::new();
    for hook in &options.hooks {
        ensure!(seen.insert(hook.path.as_str()), "webhook path {} given twice", hook.path);
    }
    Ok(options)
}

/// Parses `PATH=SPEC`.
pub fn parse_hook(text: &str) -> anyhow::Result<HookSpec> {
    let (path, spec) = text.split_once('=').with_context(|| format!("{text:?}: expected PATH=SPEC"))?;
    let path = path.trim();
    ensure!(path == "*" || path.starts_with('/'), "{text:?}: the path must start with / (or be *)");
    let (mut action, mut delay) = (None, None);
    for item in spec.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let (name, argument) = match item.split_once(':') {
            Some((name, argument)) => (name, Some(argument)),
            None => (item, None),
        };
        let parsed = match (name, argument) {
            ("allow", None) => Action::Allow,
            ("deny", None) => Action::Deny,
            ("hang", None) => Action::Hang,
            ("reset", None) => Action::Reset,
            ("status", Some(code)) => {
                let code: u16 = code.parse().with_context(|| format!("{item:?}: expected a status code"))?;
                ensure!((100..=599).contains(&code), "{item:?}: expected a status code");
                Action::Status(code)
            }
            ("label", Some(label)) => {
                let (key, value) =
                    label.split_once('=').with_context(|| format!("{item:?}: expected label:KEY=VALUE"))?;
                ensure!(!key.is_empty(), "{item:?}: empty label key");
                Action::Label { key: key.to_owned(), value: value.to_owned() }
            }
            ("labels", Some(count)) => {
                Action::Labels(count.parse().with_context(|| format!("{item:?}: expected labels:COUNT"))?)
            }
            ("delay", Some(distribution)) => {
                ensure!(delay.is_none(), "{text:?}: more than one delay");
                delay = Some(parse_delay(distribution).with_context(|| format!("{item:?}"))?);
                continue;
            }
            _ => bail!("{text:?}: unknown item {item:?}\n{USAGE}"),
        };
        ensure!(action.is_none(), "{text:?}: more than one action");
        action = Some(parsed);
    }
    Ok(HookSpec { path: path.to_owned(), action: action.unwrap_or(Action::Allow), delay })
}

fn parse_delay(text: &str) -> anyhow::Result<Delay> {
    let range = |range: &str| -> anyhow::Result<(Duration, Duration)> {
        let (low, high) = range.split_once("..").context("expected LOW..HIGH")?;
        Ok((parse_duration(low)?, parse_duration(high)?))
    };
    Ok(match text.split_once(':') {
        None => Delay::Fixed(parse_duration(text)?),
        Some(("uniform", arguments)) => {
            let (low, high) = range(arguments)?;
            ensure!(low <= high, "uniform: LOW must not exceed HIGH");
            Delay::Uniform(low, high)
        }
        Some(("exp", mean)) => Delay::Exponential { mean: parse_duration(mean)? },
        Some(("lognormal", arguments)) => {
            let (p50, p99) = range(arguments)?;
            ensure!(!p50.is_zero() && p50 <= p99, "lognormal: need 0 < P50 <= P99");
            Delay::LogNormal { p50, p99 }
        }
        Some((other, _)) => bail!("unknown distribution {other:?}"),
    })
}

/// `1.5ms`, `20us`, `2s`.
fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let (number, scale) = if let Some(number) = text.strip_suffix("us") {
        (number, 1e-6)
    } else if let Some(number) = text.strip_suffix("ms") {
        (number, 1e-3)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1.0)
    } else {
        bail!("{text:?}: expected a duration such as 20ms (units us, ms, s)")
    };
    let number: f64 = number.parse().with_context(|| format!("{text:?}: expected a number"))?;
    ensure!(number.is_finite() && number >= 0.0, "{text:?}: expected a non-negative duration");
    Ok(Duration::from_secs_f64(number * scale))
}

// ---------------------------------------------------------------------------------------------
// Delays

thread_local! {
    /// xorshift64* state, seeded per thread from the standard library's random hash keys.
    static RNG: Cell<u64> = Cell::new(std::collections::hash_map::RandomState::new().build_hasher().finish() | 1);
}

/// Uniform in [0, 1).
fn unit() -> f64 {
    RNG.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    })
}

impl Delay {
    /// One sample (capped at an hour).
    pub fn sample(&self) -> Duration {
        let seconds = match *self {
            Delay::Fixed(delay) => return delay,
            Delay::Uniform(low, high) => low.as_secs_f64() + (high - low).as_secs_f64() * unit(),
            Delay::Exponential { mean } => -mean.as_secs_f64() * (1.0 - unit()).ln(),
            Delay::LogNormal { p50, p99 } => {
                // 2.326…: the standard normal's 99th percentile.
                let sigma = (p99.as_secs_f64() / p50.as_secs_f64()).ln() / 2.326_347_874_040_841;
                let normal = (-2.0 * (1.0 - unit()).ln()).sqrt() * (std::f64::consts::TAU * unit()).cos();
                p50.as_secs_f64() * (sigma * normal).exp()
            }
        };
        Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))
    }
}

// ---------------------------------------------------------------------------------------------
// The fleet

/// A configured webhook, with what it answers precomputed, its call count and the calls it
/// has not answered yet.
struct Hook {
    spec: HookSpec,
    /// For `label:`: base64 JSONPatch when `metadata.labels` exists, and when it does not.
    patches: Option<(String, String)>,
    calls: AtomicU64,
    in_flight: AtomicU64,
}

/// Counts one call in flight until dropped (answered, or abandoned by the connection).
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Every webhook of the process, by path.
pub struct Fleet {
    by_path: HashMap<String, Hook>,
    fallback: Option<Hook>,
}

impl Fleet {
    pub fn new(specs: &[HookSpec]) -> Self {
        let mut specs = specs.to_vec();
        if specs.is_empty() {
            specs.push(HookSpec { path: "*".into(), action: Action::Allow, delay: None });
        }
        let mut by_path = HashMap::new();
        let mut fallback = None;
        for spec in specs {
            let patches = match &spec.action {
                Action::Label { key, value } => {
                    let pointer = key.replace('~', "~0").replace('/', "~1");
                    let existing = serde_json::json!([
                        {"op": "add", "path": format!("/metadata/labels/{pointer}"), "value": value}
                    ]);
                    let absent = serde_json::json!([
                        {"op": "add", "path": "/metadata/labels", "value": {key.as_str(): value}}
                    ]);
                    let encode = |patch: serde_json::Value| {
                        base64::engine::general_purpose::STANDARD.encode(patch.to_string())
                    };
                    Some((encode(existing), encode(absent)))
                }
                Action::Labels(count) => {
                    let adds: Vec<serde_json::Value> = (0..*count)
                        .map(|i| serde_json::json!({"op": "add", "path": format!("/metadata/labels/many-{i}"), "value": i.to_string()}))
                        .collect();
                    let mut absent =
                        vec![serde_json::json!({"op": "add", "path": "/metadata/labels", "value": {}})];
                    absent.extend(adds.iter().cloned());
                    let encode = |patch: Vec<serde_json::Value>| {
                        base64::engine::general_purpose::STANDARD
                            .encode(serde_json::Value::Array(patch).to_string())
                    };
                    Some((encode(adds), encode(absent)))
                }
                _ => None,
            };
            let hook = Hook { patches, spec, calls: AtomicU64::new(0), in_flight: AtomicU64::new(0) };
            if hook.spec.path == "*" {
                fallback = Some(hook);
            } else {
                by_path.insert(hook.spec.path.clone(), hook);
            }
        }
        Fleet { by_path, fallback }
    }

    fn hook(&self, path: &str) -> Option<&Hook> {
        self.by_path.get(path).or(self.fallback.as_ref())
    }

    /// `(path, calls, in flight)` of every webhook, sorted by path.
    pub fn calls(&self) -> Vec<(String, u64, u64)> {
        let mut calls: Vec<_> = self
            .by_path
            .values()
            .chain(&self.fallback)
            .map(|hook| {
                let (calls, in_flight) = (&hook.calls, &hook.in_flight);
                (hook.spec.path.clone(), calls.load(Ordering::Relaxed), in_flight.load(Ordering::Relaxed))
            })
            .collect();
        calls.sort();
        calls
    }
}

/// The only parts of an AdmissionReview the mock reads; everything else is skipped.
#[derive(Deserialize)]
struct ReviewIn<'a> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(Deserialize)]
struct RequestIn<'a> {
    #[serde(borrow)]
    uid: Cow<'a, str>,
    #[serde(default)]
    object: Option<ObjectIn>,
}

#[derive(Deserialize)]
struct ObjectIn {
    #[serde(default)]
    metadata: Option<MetadataIn>,
}

#[derive(Deserialize)]
struct MetadataIn {
    #[serde(default)]
    labels: Option<IgnoredAny>,
}

#[derive(Serialize)]
struct ReviewOut<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut>,
    #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a str>,
}

#[derive(Serialize)]
struct StatusOut {
    code: u16,
    message: String,
}

/// The panic payload that tears a connection down without an answer (`reset`); silenced by
/// the panic hook [`start`] installs.
struct ResetConnection;

/// Answers one request.
pub async fn handle(fleet: Arc<Fleet>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() == Method::GET && request.uri().path() == "/_stats" {
        let text: String = fleet
            .calls()
            .iter()
            .map(|(path, calls, in_flight)| format!("{path} {calls} {in_flight}\n"))
            .collect();
        return reply(StatusCode::OK, "text/plain", Bytes::from(text));
    }
    if request.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", Bytes::from_static(b"use POST"));
    }
    let Some(hook) = fleet.hook(request.uri().path()) else {
        return reply(StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"no such webhook"));
    };
    hook.calls.fetch_add(1, Ordering::Relaxed);
    let _in_flight = InFlight::enter(&hook.in_flight);
    let path = request.uri().path().to_owned();
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return reply(StatusCode::BAD_REQUEST, "text/plain", Bytes::from(error.to_string())),
    };
    let review: ReviewIn<'_> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(error) => return reply(StatusCode::BAD_REQUEST, "text/plain", Bytes::from(error.to_string())),
    };
    if let Some(delay) = &hook.spec.delay {
        tokio::time::sleep(delay.sample()).await;
    }
    let request = review.request.as_ref();
    let mut response = ResponseOut {
        uid: request.map_or("", |r| &r.uid),
        allowed: true,
        status: None,
        patch_type: None,
        patch: None,
    };
    match &hook.spec.action {
        Action::Allow => {}
        Action::Deny => {
            response.allowed = false;
            response.status =
                Some(StatusOut { code: 403, message: format!("denied by mock-webhook {path}") });
        }
        Action::Label { .. } | Action::Labels(_) => {
            let has_labels = request
                .and_then(|r| r.object.as_ref())
                .and_then(|o| o.metadata.as_ref())
                .is_some_and(|m| m.labels.is_some());
            let (existing, absent) = hook.patches.as_ref().expect("label hooks have patches");
            response.patch_type = Some("JSONPatch");
            response.patch = Some(if has_labels { existing } else { absent });
        }
        Action::Status(code) => {
            let code = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return reply(code, "text/plain", Bytes::from(format!("mock-webhook: status {}", code.as_u16())));
        }
        Action::Hang => return std::future::pending().await,
        Action::Reset => std::panic::panic_any(ResetConnection),
    }
    let answer = ReviewOut {
        api_version: review.api_version.as_deref().unwrap_or("admission.k8s.io/v1"),
        kind: "AdmissionReview",
        response,
    };
    match serde_json::to_vec(&answer) {
        Ok(json) => reply(StatusCode::OK, "application/json", Bytes::from(json)),
        Err(error) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", Bytes::from(error.to_string())),
    }
}

fn reply(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}

// ---------------------------------------------------------------------------------------------
// Listeners

/// The mock, serving. Its accept loops stop when it is dropped.
pub struct Running {
    pub https: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub refusing: Option<SocketAddr>,
    pub fleet: Arc<Fleet>,
    accept_loops: Vec<JoinHandle<()>>,
    /// Bound, never listening: keeps the refusing port reserved.
    _refusing_socket: Option<TcpSocket>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for accept_loop in &self.accept_loops {
            accept_loop.abort();
        }
    }
}

/// Binds every listener of `options` and serves the fleet on them.
pub async fn start(options: &Options) -> anyhow::Result<Running> {
    silence_resets();
    let fleet = Arc::new(Fleet::new(&options.hooks));
    let handler = {
        let fleet = fleet.clone();
        move |request| handle(fleet.clone(), request)
    };
    let mut running = Running {
        https: None,
        http: None,
        refusing: None,
        fleet: fleet.clone(),
        accept_loops: Vec::new(),
        _refusing_socket: None,
    };
    if let Some(address) = options.https {
        let (cert, key) = options.tls_cert.as_deref().zip(options.tls_key.as_deref()).context("TLS files")?;
        let tls = Arc::new(tls_config(cert, key)?);
        let listener = bind(address).await?;
        running.https = Some(listener.local_addr()?);
        running.accept_loops.push(testbed::serve(listener, Some(tls), handler.clone()));
    }
    if let Some(address) = options.http {
        let listener = bind(address).await?;
        running.http = Some(listener.local_addr()?);
        running.accept_loops.push(testbed::serve(listener, None, handler));
    }
    if let Some(address) = options.refuse {
        let socket = if address.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        socket.bind(address).with_context(|| format!("cannot bind {address}"))?;
        running.refusing = Some(socket.local_addr()?);
        running._refusing_socket = Some(socket);
    }
    Ok(running)
}

async fn bind(address: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))
}

fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let read = |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    Ok(testbed::server_tls(&read(cert)?, &read(key)?, testbed::HTTP2_AND_HTTP1)?)
}

/// `reset` tears its connection down by panicking in the connection's task; keep those panics
/// off standard error, and every other panic on it.
fn silence_resets() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<ResetConnection>() {
                previous(info);
            }
        }));
    });
}

pub fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let options = parse_args(args)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = options.threads {
        runtime.worker_threads(threads);
    }
    runtime.enable_all().build()?.block_on(async {
        let running = start(&options).await?;
        if let Some(address) = running.https {
            println!("listening on https://{address}");
        }
        if let Some(address) = running.http {
            println!("listening on http://{address}");
        }
        if let Some(address) = running.refusing {
            println!("refusing on {address}");
        }
        std::future::pending::<()>().await;
        Ok(())
    })
}
