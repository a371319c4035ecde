//! What the demo, the integration tests and the load-test mock webhook share, so each is
//! written once: a TLS server configuration from PEM, and an accept loop (HTTPS or plain HTTP)
//! that serves one async handler on a listener (a stand-in webhook). Not used by `serve`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// ALPN of a webhook as the API server calls it: HTTP/1.1 only.
pub const HTTP1: &[&[u8]] = &[b"http/1.1"];
/// ALPN of a server that also speaks HTTP/2.
pub const HTTP2_AND_HTTP1: &[&[u8]] = &[b"h2", b"http/1.1"];

/// A TLS 1.2+ server configuration (ring) serving this PEM chain and key.
pub fn server_tls(
    chain_pem: &[u8],
    key_pem: &[u8],
    alpn: &[&[u8]],
) -> Result<rustls::ServerConfig, rustls::Error> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| rustls::Error::General(format!("certificate PEM: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| rustls::Error::General(format!("key PEM: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// Serves `handler` on `listener` until the returned task is aborted: over HTTPS with `tls`
/// (HTTP/1.1, and HTTP/2 when the TLS configuration offers it), or plain HTTP without (HTTP/1.1,
/// and HTTP/2 with prior knowledge). A failed handshake drops that connection only.
pub fn serve<H, F>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: H,
) -> JoinHandle<()>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's default of 200 streams per HTTP/2 connection would cap the calls in flight to
    // one mock from an HTTP/2 client (the gateway calls over HTTP/1.1, but the tests also call
    // the mock over HTTP/2).
    builder.http2().max_concurrent_streams(10_000);
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of descriptors, typically: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (acceptor, builder, handler) = (acceptor.clone(), builder.clone(), handler.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let response = handler(request);
                    async move { Ok::<_, Infallible>(response.await) }
                });
                match acceptor {
                    Some(acceptor) => {
                        let Ok(stream) = acceptor.accept(stream).await else { return };
                        let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
            });
        }
    })
}
