//! A throwaway PKI for the demo and the tests: a CA and certificates for loopback names.
//! Never used for serving real traffic (the `serve` command takes its certificates from files).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A certificate authority that lives in memory.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM: what a webhook's `caBundle` holds (base64-encoded).
    pub cert_pem: String,
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(common_name: &str) -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key)?;
        Ok(Self { issuer: Issuer::new(params, key), cert_pem: cert.pem() })
    }

    /// A server certificate for `names` (DNS names or IP addresses, e.g. `127.0.0.1`).
    pub fn issue(&self, names: &[&str]) -> Result<Leaf, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// The CA certificate as a manifest's `caBundle` value.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.cert_pem.as_bytes())
    }
}

impl Leaf {
    /// The certificate as a manifest's `caBundle` value: a self-signed one trusts itself.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.cert_pem.as_bytes())
    }
}

/// A self-signed certificate for `names`, `basicConstraints CA:TRUE` as `openssl req -x509`
/// makes them by default: its own PEM is the `caBundle` that trusts it ([`Leaf::ca_bundle`]).
/// `customize` may change anything else (validity, extended key usages…) before it is signed.
pub fn self_signed(
    names: &[&str],
    customize: impl FnOnce(&mut CertificateParams),
) -> Result<Leaf, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    customize(&mut params);
    let cert = params.self_signed(&key)?;
    Ok(Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}
