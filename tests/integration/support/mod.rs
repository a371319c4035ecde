//! What every scenario is built from: a throwaway PKI, the shared review fixtures, real HTTPS
//! mock webhooks ([`MockWebhook`]) and the real gateway started in process ([`TestGateway`]).

pub mod binary;
pub mod control_plane;
pub mod differential;
pub mod gateway;
pub mod mock_webhook;
pub mod otlp;
pub mod prometheus;
pub mod provision;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use admission_gateway::certs::{Ca, Leaf};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::time::Instant;

pub use gateway::{mutating, validating, webhook, webhook_at, Answer, Fleet, TestGateway};
pub use mock_webhook::{reply, MockWebhook, Reply};

/// A free loopback port (bound, then released: another process may take it first).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A webhook URL on a loopback port nobody listens on, and the port.
pub fn closed_port_url() -> (String, u16) {
    let port = free_port();
    (format!("https://127.0.0.1:{port}/webhook"), port)
}

/// An HTTPS client (HTTP/1.1) trusting one CA, as the API server would call the gateway.
pub type HttpsClient =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;
/// A plain HTTP client, for the admin listener and `serve --insecure-http`.
pub type HttpClient = hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>;

/// The CA behind every mock webhook's certificate and the gateway's serving certificate; the
/// `caBundle` of every webhook the tests configure.
pub fn ca() -> &'static Ca {
    static CA: OnceLock<Ca> = OnceLock::new();
    CA.get_or_init(|| Ca::new("admission-gateway integration tests").expect("test CA"))
}

/// A certificate for 127.0.0.1 issued by [`ca`], made once and shared by every mock webhook.
pub fn loopback_certificate() -> &'static Leaf {
    static LEAF: OnceLock<Leaf> = OnceLock::new();
    LEAF.get_or_init(|| ca().issue(&["127.0.0.1"]).expect("loopback certificate"))
}

/// A TLS server configuration serving `leaf` with these ALPN protocols.
pub fn server_tls(leaf: &Leaf, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let config =
        admission_gateway::testbed::server_tls(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes(), alpn);
    Arc::new(config.expect("server certificate"))
}

/// A TLS server configuration presenting `certificate` but signing the handshake with the
/// private key of `key`: a server that has a copy of a certificate, not its key.
pub fn server_tls_with_foreign_key(
    certificate: &Leaf,
    key: &Leaf,
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    let chain = CertificateDer::pem_slice_iter(certificate.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate PEM");
    let key = PrivateKeyDer::from_pem_slice(key.key_pem.as_bytes()).expect("key PEM");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let signing_key = provider.key_provider.load_private_key(key).expect("signing key");
    let resolver = rustls::sign::SingleCertAndKey::from(rustls::sign::CertifiedKey::new(chain, signing_key));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A TLS client configuration that trusts only `ca`.
pub fn client_tls(ca: &Ca) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// An HTTPS client that trusts only `ca`.
pub fn https_client(ca: &Ca) -> HttpsClient {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client_tls(ca))
        .https_only()
        .enable_http1()
        .build();
    hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https)
}

pub fn http_client() -> HttpClient {
    hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http()
}

/// Standard base64, as Go encodes `[]byte` in JSON (`response.patch`).
pub fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Polls `check` every 100 ms until it holds or `within` has passed; returns whether it held.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The real AdmissionReviews in `tests/fixtures/reviews`, shared with the unit tests.
pub mod fixtures {
    use std::path::PathBuf;

    use serde_json::Value;

    pub const POD_CREATE: &str = "pod-create";
    pub const POD_CREATE_PRIVILEGED: &str = "pod-create-privileged";
    pub const POD_CREATE_DRY_RUN: &str = "pod-create-dry-run";
    pub const POD_CREATE_V1BETA1: &str = "pod-create-v1beta1";
    pub const POD_UPDATE: &str = "pod-update";
    pub const POD_DELETE: &str = "pod-delete";
    pub const POD_EXEC: &str = "pod-exec-connect";
    pub const NAMESPACE_CREATE: &str = "namespace-create";
    pub const SECRET_CREATE: &str = "secret-create";

    pub fn path(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reviews").join(format!("{name}.json"))
    }

    /// A fixture review as JSON.
    pub fn review(name: &str) -> Value {
        let text = std::fs::read_to_string(path(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
    }

    /// `request.object` of a fixture.
    pub fn object(name: &str) -> Value {
        review(name)["request"]["object"].clone()
    }

    /// `request.uid` of a fixture.
    pub fn uid(name: &str) -> String {
        review(name)["request"]["uid"].as_str().expect("fixture uid").to_owned()
    }
}
