//! `clientConfig.caBundle`, decoded once for validation and for the client that calls the
//! webhook.
//!
//! The manifest holds the `[]byte` field's JSON form, base64, which the API server decodes
//! with Go's `StdEncoding` ([`crate::go::base64`]): line breaks, which wrapped manifests and
//! YAML block scalars leave in, are skipped. A non-empty bundle must hold at least one PEM
//! `CERTIFICATE` (what client-go's `AppendCertsFromPEM` needs to build a root pool).
//! kube-apiserver stores a bundle without one and fails every call; the gateway refuses it at
//! load.

use std::fmt::Write as _;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;

use crate::go::base64;

/// The PEM bundle of an encoded `caBundle`: `Ok(None)` if it is empty (the system's roots
/// are used), else the PEM text, which holds at least one certificate. `Err` is why it is
/// refused, the detail of an `Invalid value` error.
pub(crate) fn decode(encoded: &str) -> Result<Option<Vec<u8>>, String> {
    let pem = base64::decode(encoded).map_err(|e| e.to_string())?;
    if pem.is_empty() {
        return Ok(None);
    }
    holds_a_certificate(&pem)?;
    Ok(Some(pem))
}

/// `Ok` if the PEM text holds at least one certificate; else why not, in client-go's words.
pub(crate) fn holds_a_certificate(pem: &[u8]) -> Result<(), String> {
    let mut certificates = 0;
    let mut failure = None;
    for section in CertificateDer::pem_slice_iter(pem) {
        match section {
            // A DER certificate is a SEQUENCE; anything else x509 would refuse too.
            Ok(der) if der.first() == Some(&0x30) => certificates += 1,
            Ok(_) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if certificates > 0 {
        return Ok(());
    }
    let mut detail = String::from("unable to load root certificates: unable to parse bytes as PEM block");
    if let Some(e) = failure {
        let _ = write!(detail, " ({})", crate::upstream::x509::pem_problem(&e));
    }
    Err(detail)
}
