//! Webhook server certificates, trusted as kube-apiserver's Go client trusts them.
//!
//! webpki decides, except for a certificate that is itself in the root pool (a self-signed
//! certificate that is its own `caBundle`, typically `basicConstraints CA:TRUE`, which webpki
//! refuses as `CaUsedAsEndEntity`). Go's `Certificate.Verify` (`src/crypto/x509/verify.go`)
//! accepts such a certificate as the whole chain after its own checks: the leaf's `isValid`
//! (no unhandled critical extension, within its validity period), `VerifyHostname` (SANs only),
//! and the extended key usage (serverAuth, anyExtendedKeyUsage, or none at all). So does this
//! verifier. The handshake signature is checked as rustls checks it, whatever the certificate.
//!
//! Refusals carry Go's words ([`Refusal`]), which `error.rs` puts into the call error.

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::x509::{self, Certificate};

/// The webhook client's certificate verifier: webpki's, plus Go's rules for a certificate that
/// is byte for byte in the root pool (Go's `CertPool.contains`).
#[derive(Debug)]
pub(crate) struct WebhookVerifier {
    /// `None` for an empty pool (no system roots): nothing chains to it.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    pool: Arc<HashSet<Vec<u8>>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl WebhookVerifier {
    /// `pool` holds the certificates `roots` was made of.
    pub(crate) fn new(
        roots: Arc<RootCertStore>,
        pool: Arc<HashSet<Vec<u8>>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let algorithms = provider.signature_verification_algorithms;
        let webpki = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
        };
        Ok(Self { webpki, pool, algorithms })
    }

    /// Go's verdict on a certificate found in the root pool: the chain is the certificate alone.
    fn verify_pooled(
        leaf: &Certificate,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), X509Error> {
        leaf_checks(leaf, server_name, now)?;
        // checkChainForKeyUsage over [leaf], with the default KeyUsages (ServerAuth).
        let usages = &leaf.ext_key_usages;
        if usages.is_empty()
            || usages
                .iter()
                .any(|oid| oid == x509::OID_SERVER_AUTH || oid == x509::OID_ANY_EXTENDED_KEY_USAGE)
        {
            Ok(())
        } else {
            Err(X509Error::IncompatibleUsage)
        }
    }
}

/// Go's `isValid(leafCertificate)` and `VerifyHostname`, in `Verify`'s order.
fn leaf_checks(leaf: &Certificate, server_name: &ServerName<'_>, now: UnixTime) -> Result<(), X509Error> {
    if leaf.unhandled_critical_extension {
        return Err(X509Error::UnhandledCriticalExtension);
    }
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    if now < leaf.not_before {
        return Err(X509Error::Expired { now, bound: leaf.not_before, not_yet: true });
    }
    if now > leaf.not_after {
        return Err(X509Error::Expired { now, bound: leaf.not_after, not_yet: false });
    }
    verify_hostname(leaf, server_name).map_err(X509Error::Hostname)
}

/// Go's `Certificate.VerifyHostname`: an IP address against the IP SANs, a name against the
/// DNS SANs (a leading `*` label matching one label, for valid hostnames only); never the CN.
fn verify_hostname(leaf: &Certificate, server_name: &ServerName<'_>) -> Result<(), HostnameError> {
    if let ServerName::IpAddress(ip) = server_name {
        let ip = x509::canonical_ip(IpAddr::from(*ip));
        return if leaf.ip_addresses.contains(&ip) {
            Ok(())
        } else {
            Err(HostnameError::new(leaf, ip.to_string()))
        };
    }
    let host = server_name.to_str();
    let candidate = host.to_ascii_lowercase();
    let valid_candidate = valid_hostname(&candidate, false);
    let matches = leaf.dns_names.iter().any(|pattern| {
        if valid_candidate && valid_hostname(pattern, true) {
            match_hostnames(pattern, &candidate)
        } else {
            match_exactly(pattern, &candidate)
        }
    });
    if matches {
        Ok(())
    } else {
        Err(HostnameError::new(leaf, host.into_owned()))
    }
}

/// Go's `validHostname`.
fn valid_hostname(host: &str, is_pattern: bool) -> bool {
    let host = if is_pattern { host } else { host.strip_suffix('.').unwrap_or(host) };
    if host.is_empty() || host == "*" {
        return false;
    }
    host.split('.').enumerate().all(|(i, label)| {
        !label.is_empty()
            && ((is_pattern && i == 0 && label == "*")
                || label
                    .char_indices()
                    .all(|(j, c)| c.is_ascii_alphanumeric() || (c == '-' && j != 0) || c == '_'))
    })
}

/// Go's `matchExactly`.
fn match_exactly(a: &str, b: &str) -> bool {
    !matches!(a, "" | ".") && !matches!(b, "" | ".") && a.eq_ignore_ascii_case(b)
}

/// Go's `matchHostnames`.
fn match_hostnames(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if pattern.is_empty() || host.is_empty() {
        return false;
    }
    let (pattern, host): (Vec<_>, Vec<_>) = (pattern.split('.').collect(), host.split('.').collect());
    pattern.len() == host.len()
        && pattern.iter().zip(&host).enumerate().all(|(i, (p, h))| (i == 0 && *p == "*") || p == h)
}

impl ServerCertVerifier for WebhookVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // Parsed by our DER reader only where Go's rules or Go's words are needed.
        if self.pool.contains(end_entity.as_ref()) {
            if let Some(leaf) = Certificate::parse(end_entity) {
                return Self::verify_pooled(&leaf, server_name, now)
                    .map(|()| ServerCertVerified::assertion())
                    .map_err(|error| Refusal::Certificate(error).into());
            }
        }
        let verdict = match &self.webpki {
            Some(webpki) => {
                webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(CertificateError::UnknownIssuer.into()),
        };
        verdict.map_err(|error| match error {
            rustls::Error::InvalidCertificate(error) => {
                let leaf = Certificate::parse(end_entity);
                // Go checks the leaf before it looks for a chain: its refusal comes first.
                let go = leaf.as_ref().map_or(Ok(()), |leaf| leaf_checks(leaf, server_name, now));
                let x509 = go.err().unwrap_or_else(|| {
                    X509Error::from_webpki(&error, leaf.as_ref().map(|leaf| (leaf, server_name)))
                });
                Refusal::Certificate(x509).into()
            }
            other => other,
        })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
            .map_err(|e| handshake_signature_error(e, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
            .map_err(|e| handshake_signature_error(e, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A wrong handshake signature in crypto/tls's words (`verifyHandshakeSignature`).
fn handshake_signature_error(error: rustls::Error, dss: &DigitallySignedStruct) -> rustls::Error {
    if error != rustls::Error::InvalidCertificate(CertificateError::BadSignature) {
        return error;
    }
    let detail = match dss.scheme {
        SignatureScheme::ECDSA_NISTP256_SHA256
        | SignatureScheme::ECDSA_NISTP384_SHA384
        | SignatureScheme::ECDSA_NISTP521_SHA512
        | SignatureScheme::ECDSA_SHA1_Legacy => "ECDSA verification failure",
        SignatureScheme::ED25519 => "Ed25519 verification failure",
        _ => "crypto/rsa: verification error",
    };
    Refusal::HandshakeSignature(detail).into()
}

/// Why the webhook's TLS handshake was refused, as Go's crypto/tls words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The certificate: `tls: failed to verify certificate: x509: …`.
    Certificate(X509Error),
    /// The handshake signature does not verify with the certificate's key.
    HandshakeSignature(&'static str),
}

impl Refusal {
    /// The refusal a rustls certificate error stands for: ours, or webpki's in Go's words.
    pub(crate) fn from_certificate_error(error: &CertificateError) -> Self {
        if let CertificateError::Other(OtherError(other)) = error {
            if let Some(refusal) = other.downcast_ref::<Self>() {
                return refusal.clone();
            }
        }
        Self::Certificate(X509Error::from_webpki(error, None))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // `tls.CertificateVerificationError`.
            Self::Certificate(x509) => write!(f, "tls: failed to verify certificate: {x509}"),
            Self::HandshakeSignature(detail) => {
                write!(f, "tls: invalid signature by the server certificate: {detail}")
            }
        }
    }
}

impl std::error::Error for Refusal {}

impl From<Refusal> for rustls::Error {
    fn from(refusal: Refusal) -> Self {
        Self::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))))
    }
}

/// An error of Go's crypto/x509, which `Display` words as Go does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum X509Error {
    /// `UnknownAuthorityError` (without the hint Go adds when a candidate issuer failed).
    UnknownAuthority,
    /// `CertificateInvalidError{Reason: Expired}`; times in seconds since the Unix epoch.
    Expired {
        now: i64,
        bound: i64,
        not_yet: bool,
    },
    Hostname(HostnameError),
    /// `CertificateInvalidError{Reason: IncompatibleUsage}`.
    IncompatibleUsage,
    UnhandledCriticalExtension,
    /// What crypto/x509 says of a certificate it cannot parse.
    Malformed,
    /// A refusal with no counterpart here, in rustls' words.
    Unrecognised(String),
}

impl X509Error {
    /// webpki's refusal as Go would word it, the leaf's own checks having passed. Go looks
    /// for a chain only then, and words whatever goes wrong on the way (an intermediate's
    /// validity, a signature, a constraint) as an unknown authority.
    fn from_webpki(error: &CertificateError, leaf: Option<(&Certificate, &ServerName<'_>)>) -> Self {
        match (error, leaf) {
            (
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
                Some((leaf, host)),
            ) => Self::Hostname(HostnameError::new(leaf, host.to_str().into_owned())),
            (CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }, None) => {
                Self::Unrecognised(error.to_string())
            }
            (CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. }, _) => {
                Self::IncompatibleUsage
            }
            (CertificateError::BadEncoding, _) => Self::Malformed,
            // Without a leaf of ours, these can only be the leaf's own.
            (CertificateError::ExpiredContext { time, not_after }, None) => {
                Self::Expired { now: seconds(*time), bound: seconds(*not_after), not_yet: false }
            }
            (CertificateError::NotValidYetContext { time, not_before }, None) => {
                Self::Expired { now: seconds(*time), bound: seconds(*not_before), not_yet: true }
            }
            (CertificateError::UnhandledCriticalExtension, None) => Self::UnhandledCriticalExtension,
            _ => Self::UnknownAuthority,
        }
    }
}

fn seconds(time: UnixTime) -> i64 {
    i64::try_from(time.as_secs()).unwrap_or(i64::MAX)
}

impl fmt::Display for X509Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownAuthority => f.write_str("x509: certificate signed by unknown authority"),
            Self::Expired { now, bound, not_yet } => write!(
                f,
                "x509: certificate has expired or is not yet valid: current time {} is {} {}",
                x509::rfc3339(*now),
                if *not_yet { "before" } else { "after" },
                x509::rfc3339(*bound)
            ),
            Self::Hostname(error) => error.fmt(f),
            Self::IncompatibleUsage => f.write_str("x509: certificate specifies an incompatible key usage"),
            Self::UnhandledCriticalExtension => f.write_str("x509: unhandled critical extension"),
            Self::Malformed => f.write_str("x509: malformed certificate"),
            Self::Unrecognised(text) => write!(f, "x509: {text}"),
        }
    }
}

/// Go's `HostnameError`: the host and what the certificate offers instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostnameError {
    host: String,
    /// No SAN extension, and the CN would have matched: Go names the legacy CN field.
    legacy_common_name: bool,
    /// The IP SANs for an IP address host (`None` if there are none), else the DNS SANs.
    valid: Option<Vec<String>>,
}

impl HostnameError {
    fn new(leaf: &Certificate, host: String) -> Self {
        let legacy_common_name = !leaf.has_san_extension
            && leaf.common_name.as_deref().is_some_and(|cn| match_hostnames(cn, &host));
        let valid = if host.parse::<IpAddr>().is_ok() {
            (!leaf.ip_addresses.is_empty()).then(|| leaf.ip_addresses.iter().map(IpAddr::to_string).collect())
        } else {
            Some(leaf.dns_names.clone())
        };
        Self { host, legacy_common_name, valid }
    }
}

impl fmt::Display for HostnameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = &self.host;
        if self.legacy_common_name {
            return f.write_str("x509: certificate relies on legacy Common Name field, use SANs instead");
        }
        match &self.valid {
            None => write!(
                f,
                "x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
            ),
            Some(names) if names.join(", ").is_empty() => {
                write!(f, "x509: certificate is not valid for any names, but wanted to match {host}")
            }
            Some(names) => write!(f, "x509: certificate is valid for {}, not {host}", names.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests;
