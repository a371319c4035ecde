//! The serving certificate, reloaded when its files change (including the kubelet's `..data`
//! symlink swap of a mounted Secret): the files are re-read on a short poll and swapped in
//! only when both parse; a broken rotation keeps the previous certificate serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How often the certificate files are checked for a change.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: invalid PEM: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("{path}: unusable private key: {source}")]
    Key { path: PathBuf, source: rustls::Error },
}

/// Serves whichever certificate was loaded last.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    current: ArcSwap<CertifiedKey>,
    cert_path: PathBuf,
    key_path: PathBuf,
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl ReloadingCert {
    pub(crate) fn load(cert_path: &Path, key_path: &Path) -> Result<Self, TlsError> {
        let (cert, key) = (read(cert_path)?, read(key_path)?);
        Ok(Self {
            current: ArcSwap::from_pointee(certified_key(cert_path, &cert, key_path, &key)?),
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
        })
    }

    /// Polls the files forever, swapping in a new certificate when they change and parse.
    pub(crate) async fn watch(self: Arc<Self>) {
        let mut last = (read(&self.cert_path).ok(), read(&self.key_path).ok());
        loop {
            tokio::time::sleep(POLL_INTERVAL).await;
            let now = (read(&self.cert_path).ok(), read(&self.key_path).ok());
            if now == last {
                continue;
            }
            if let (Some(cert), Some(key)) = &now {
                match certified_key(&self.cert_path, cert, &self.key_path, key) {
                    Ok(certified) => {
                        self.current.store(Arc::new(certified));
                        tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded");
                    }
                    Err(error) => {
                        tracing::warn!(%error, "new serving certificate refused; the previous one keeps serving")
                    }
                }
            }
            last = now;
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })
}

fn certified_key(
    cert_path: &Path,
    cert: &[u8],
    key_path: &Path,
    key: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { path: cert_path.to_path_buf(), message: e.to_string() })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_path.to_path_buf() });
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| TlsError::Pem { path: key_path.to_path_buf(), message: e.to_string() })?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key, &provider)
        .map_err(|source| TlsError::Key { path: key_path.to_path_buf(), source })?;
    Ok(certified)
}

/// The server's TLS configuration (TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1).
/// `client_ca`: PEM certificates; when given, every client must present a certificate they
/// issued (the API server's `--admission-control-config-file` kubeconfig for webhooks gives it
/// one), and a handshake without one fails.
pub(crate) fn server_config(
    resolver: Arc<ReloadingCert>,
    client_ca: Option<&[u8]>,
) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            use rustls_pki_types::pem::PemObject as _;
            let mut roots = rustls::RootCertStore::empty();
            for certificate in rustls_pki_types::CertificateDer::pem_slice_iter(pem) {
                let certificate =
                    certificate.map_err(|e| anyhow::anyhow!("--client-ca: not PEM certificates: {e}"))?;
                roots.add(certificate).map_err(|e| anyhow::anyhow!("--client-ca: {e}"))?;
            }
            if roots.is_empty() {
                anyhow::bail!("--client-ca: no certificate in the file");
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| anyhow::anyhow!("--client-ca: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
