//! The stack's floor for load tests: an HTTPS reverse proxy built on exactly what the gateway is
//! built on — one single-threaded tokio runtime per serving thread, each with a listening
//! socket of its own (`SO_REUSEPORT`), rustls with ring, hyper's HTTP/1.1 server, and per
//! thread a pooled hyper client with the gateway's connector settings — that forwards each
//! request's body to one upstream and its answer back, reading neither.
//!
//! ```text
//! cargo run --release --example passthrough -- \
//!     --listen ADDR --tls-cert CERT --tls-key KEY --upstream https://HOST:PORT --ca CA_PEM \
//!     [--threads N] [--codec]
//! ```
//!
//! A request `POST /PATH?QUERY` is sent on as `POST https://HOST:PORT/PATH?QUERY` with the
//! received body; the answer's status and body come back with `content-type:
//! application/json`. An upstream that cannot be reached gets 502. Port 0 picks a free port;
//! once bound, `listening on https://ADDR` is printed on standard output. `--threads` defaults
//! to one per core, as the gateway's `--threads`.
//!
//! `--codec` adds the codec work of a review with one validating webhook, done by the
//! gateway's own code (`src/bench.rs`): the received review decoded (400 if it is not one),
//! the webhook's request encoded from it, the webhook's answer decoded, and the caller
//! answered in the review's version with the webhook's verdict. It measures what the review's
//! JSON alone costs on this stack — what no gateway that decodes and re-encodes could shed —
//! apart from the gateway's own steps (matching, deadlines, metrics, the log line).
//!
//! `loadtest/compare.sh` runs it beside nginx: what the gateway costs above it is the cost of
//! its own work on a review (decoding, matching, encoding, the log line, metrics), not of the
//! runtime, TLS or HTTP (`loadtest/README.md`, "The stack's floor"). The integration tests
//! compile it in as a module (`tests/integration/loadtest_mock.rs`) and start it with [`start`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;
use tokio::sync::watch;

use admission_gateway::{bench, testbed};

/// The gateway's allocator (`src/main.rs`); not where this file is compiled into the tests.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub const USAGE: &str = "usage: passthrough --listen ADDR --tls-cert PATH --tls-key PATH \
                         --upstream https://HOST:PORT --ca PATH [--threads N] [--codec]";

/// Idle upstream connections a serving thread keeps (the gateway shares 256 out per thread).
const IDLE_UPSTREAM_CONNECTIONS: usize = 256;
/// The gateway's upstream read buffer (`src/upstream.rs`).
const UPSTREAM_READ_BUFFER: usize = 4096;

#[derive(Clone, Debug)]
pub struct Options {
    pub listen: SocketAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    /// `https://HOST:PORT`, no path.
    pub upstream: Uri,
    /// The upstream's certificate authority (PEM).
    pub ca: PathBuf,
    pub threads: usize,
    /// Decode the review and the answer and encode both again (`--codec`).
    pub codec: bool,
}

pub fn parse_args(args: impl IntoIterator<Item = String>) -> anyhow::Result<Options> {
    let (mut listen, mut tls_cert, mut tls_key, mut upstream, mut ca, mut threads) =
        (None, None, None, None, None, None);
    let mut codec = false;
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        if flag == "--codec" {
            codec = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--listen" => listen = Some(value.parse().with_context(|| format!("--listen {value}"))?),
            "--tls-cert" => tls_cert = Some(PathBuf::from(value)),
            "--tls-key" => tls_key = Some(PathBuf::from(value)),
            "--upstream" => {
                let uri: Uri = value.parse().with_context(|| format!("--upstream {value}"))?;
                if uri.scheme_str() != Some("https") || uri.authority().is_none() || uri.path() != "/" {
                    bail!("--upstream {value}: expected https://HOST:PORT");
                }
                upstream = Some(uri);
            }
            "--ca" => ca = Some(PathBuf::from(value)),
            "--threads" => threads = Some(value.parse().with_context(|| format!("--threads {value}"))?),
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    let missing = |flag: &str| anyhow::anyhow!("{flag} is required\n{USAGE}");
    Ok(Options {
        listen: listen.ok_or_else(|| missing("--listen"))?,
        tls_cert: tls_cert.ok_or_else(|| missing("--tls-cert"))?,
        tls_key: tls_key.ok_or_else(|| missing("--tls-key"))?,
        upstream: upstream.ok_or_else(|| missing("--upstream"))?,
        ca: ca.ok_or_else(|| missing("--ca"))?,
        threads: threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1),
        codec,
    })
}

/// The proxy, serving on its threads; dropping it stops them.
pub struct Running {
    pub address: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Binds `options.threads` sockets on one address and serves each on a thread of its own.
pub fn start(options: &Options) -> anyhow::Result<Running> {
    let read = |path: &PathBuf| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    let server_tls =
        Arc::new(testbed::server_tls(&read(&options.tls_cert)?, &read(&options.tls_key)?, testbed::HTTP1)?);
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&read(&options.ca)?) {
        roots.add(certificate.context("--ca")?).context("--ca")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let client_tls = Arc::new(client_tls);

    let (address, listeners) = bind(options.listen, options.threads)?;
    let (stop, stopped) = watch::channel(false);
    // The upstream's scheme and authority, written once: each request appends its path.
    let upstream: Arc<str> = options.upstream.to_string().trim_end_matches('/').into();
    let codec = options.codec;
    for (listener, index) in listeners.into_iter().zip(1..) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (server_tls, client_tls, upstream, mut stopped) =
            (server_tls.clone(), client_tls.clone(), upstream.clone(), stopped.clone());
        std::thread::Builder::new().name(format!("passthrough-{index}")).spawn(move || {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listening socket");
                let client = client((*client_tls).clone());
                tokio::select! {
                    () = serve(listener, server_tls, client, upstream, codec) => {}
                    _ = stopped.wait_for(|stop| *stop) => {}
                }
            });
        })?;
    }
    Ok(Running { address, stop })
}

type Client = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A thread's upstream client, set up as the gateway's (`src/upstream.rs`).
fn client(tls: rustls::ClientConfig) -> Client {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(Duration::from_secs(10)));
    let mut https = hyper_rustls::HttpsConnector::from((tcp, tls));
    https.enforce_https();
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(IDLE_UPSTREAM_CONNECTIONS)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .http1_read_buf_exact_size(UPSTREAM_READ_BUFFER)
        .build(https)
}

/// `threads` listening sockets on `address` (its port chosen once when 0), as the gateway's.
fn bind(address: SocketAddr, threads: usize) -> anyhow::Result<(SocketAddr, Vec<std::net::TcpListener>)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let address = std::net::TcpListener::bind(address)
        .and_then(|probe| probe.local_addr())
        .with_context(|| format!("cannot listen on {address}"))?;
    let listeners = (0..threads)
        .map(|_| -> std::io::Result<std::net::TcpListener> {
            let socket = Socket::new(Domain::for_address(address), Type::STREAM, Some(Protocol::TCP))?;
            socket.set_reuse_address(true)?;
            socket.set_reuse_port(true)?;
            socket.set_nonblocking(true)?;
            socket.bind(&address.into())?;
            socket.listen(1024)?;
            Ok(socket.into())
        })
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot listen on {address}"))?;
    Ok((address, listeners))
}

async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    client: Client,
    upstream: Arc<str>,
    codec: bool,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, typically: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, builder, client, upstream) =
            (acceptor.clone(), builder.clone(), client.clone(), upstream.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else { return };
            let service = hyper::service::service_fn(move |request| {
                let (client, upstream) = (client.clone(), upstream.clone());
                async move { Ok::<_, Infallible>(forward(&client, &upstream, codec, request).await) }
            });
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

async fn forward(
    client: &Client,
    upstream: &str,
    codec: bool,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let uri = format!("{upstream}{path}");
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return reply(StatusCode::BAD_REQUEST, format!("reading the request: {error}")),
    };
    let review = match codec.then(|| bench::decode(&body)).transpose() {
        Ok(review) => review,
        Err(error) => return reply(StatusCode::BAD_REQUEST, format!("decoding the review: {error}")),
    };
    let body = review.as_ref().map_or(body, |review| Bytes::from(bench::encode_webhook_request(review)));
    let sent =
        Request::post(uri).header(http::header::CONTENT_TYPE, "application/json").body(Full::new(body));
    let answer = match sent {
        Ok(sent) => client.request(sent).await,
        Err(error) => return reply(StatusCode::BAD_REQUEST, format!("request: {error}")),
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return reply(StatusCode::BAD_GATEWAY, format!("upstream: {error}")),
    };
    let status = answer.status();
    let body = match answer.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return reply(StatusCode::BAD_GATEWAY, format!("upstream answer: {error}")),
    };
    let body = match review.map(|review| bench::answer_from_webhook(&review, &body)) {
        None => body,
        Some(Ok(answer)) => Bytes::from(answer),
        Some(Err(error)) => return reply(StatusCode::BAD_GATEWAY, format!("upstream answer: {error}")),
    };
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::default()))
}

fn reply(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response
}

pub fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let running = start(&parse_args(args)?)?;
    println!("listening on https://{}", running.address);
    loop {
        std::thread::park();
    }
}
