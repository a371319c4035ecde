//! Why a downstream webhook gave no usable answer: the "call error" class of
//! docs/semantics.md §9.1, with the API server's reason texts.

use std::error::Error as _;

use super::verify::Refusal;
use crate::review::Status;

/// A call error. `Display` is the `<reason>` of `failed calling webhook "<hook>": <reason>`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)")]
    NoKnownReviewVersion,
    #[error("could not get REST client: {0}")]
    NoClient(String),
    #[error("Webhook SideEffects is nil")]
    SideEffectsNil,
    #[error("failed to call webhook: Post {url:?}: {message}")]
    Transport { url: String, message: String },
    #[error("failed to call webhook: Post {url:?}: context deadline exceeded")]
    Timeout { url: String },
    /// The answer's head arrived, its body could not be read (client-go's `transformResponse`).
    #[error("failed to call webhook: unexpected error when reading response body. Please retry. Original error: {0}")]
    BodyRead(String),
    /// The webhook's certificate or handshake signature refused, in crypto/tls's words
    /// (`tls: failed to verify certificate: x509: …`).
    #[error("failed to call webhook: Post {url:?}: {message}")]
    Tls { url: String, message: String },
    /// An answer outside 200–206 (§8.1), as client-go words it.
    #[error("failed to call webhook: {message}")]
    HttpStatus { code: u16, message: String },
    /// A body that does not decode as the AdmissionReview version sent (§8.2).
    #[error("failed to call webhook: {0}")]
    Decode(String),
    #[error("received invalid webhook response: {0}")]
    InvalidResponse(String),
    #[error("received undecodable patch in webhook response: {0}")]
    UndecodablePatch(String),
    /// Carries the rejection-style status the API server builds for it (for its code).
    #[error("unsupported patch type {patch_type:?}")]
    UnsupportedPatchType { patch_type: String, status: Box<Status> },
    /// Not called: its rules match the request only through `matchPolicy: Equivalent`, in a
    /// version the gateway cannot convert the object to (docs/semantics.md §4.2).
    #[error("admission-gateway cannot convert {from} to {to}, the version this webhook's rules match through matchPolicy Equivalent")]
    NotConvertible { from: String, to: String },
    /// Not called: its breaker is open (`breaker.rs`). The last real error, and since when.
    #[error("{last} (ejected by admission-gateway since {since} after {failures} consecutive failures; not called)")]
    Ejected { last: String, code: u16, last_reason: &'static str, since: String, failures: u32 },
}

impl CallError {
    /// The status code the API server records for this error (metrics only, §15.1).
    pub(crate) fn code(&self) -> u16 {
        match self {
            Self::NoKnownReviewVersion | Self::SideEffectsNil => 400,
            Self::NoClient(_) | Self::NotConvertible { .. } => 500,
            Self::HttpStatus { code, .. } => *code,
            Self::UnsupportedPatchType { status, .. } => {
                status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(400)
            }
            Self::Transport { .. }
            | Self::Timeout { .. }
            | Self::BodyRead(_)
            | Self::Tls { .. }
            | Self::Decode(_)
            | Self::InvalidResponse(_)
            | Self::UndecodablePatch(_) => 503,
            Self::Ejected { code, .. } => *code,
        }
    }

    /// A bounded label for metrics and logs; never the Display text.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::NoKnownReviewVersion => "no_known_review_version",
            Self::NoClient(_) => "no_client",
            Self::SideEffectsNil => "side_effects_nil",
            Self::Transport { .. } => "transport",
            Self::Timeout { .. } => "timeout",
            Self::BodyRead(_) => "body_read",
            Self::Tls { .. } => "tls",
            Self::HttpStatus { .. } => "http_status",
            Self::Decode(_) => "undecodable_response",
            Self::InvalidResponse(_) => "invalid_response",
            Self::UndecodablePatch(_) => "undecodable_patch",
            Self::UnsupportedPatchType { .. } => "unsupported_patch_type",
            Self::NotConvertible { .. } => "not_convertible",
            Self::Ejected { .. } => "ejected",
        }
    }
}

#[derive(serde::Deserialize)]
struct StatusKind {
    kind: Option<String>,
}

/// client-go's error for an answer outside 200–206 (`NewGenericServerResponse`): a JSON
/// `Status` with `status: Failure` is used as-is, otherwise a fixed text per code, into which
/// a text body (at most 2 KiB, trimmed) is quoted for 403, 415 and 5xx.
pub(super) fn http_status(status: http::StatusCode, content_type: Option<&str>, body: &[u8]) -> CallError {
    let code = status.as_u16();
    // Go decodes the body as a Status only when it says `kind: Status` (any apiVersion: Status
    // is an unversioned kind of the webhook client's scheme).
    let is_status =
        serde_json::from_slice::<StatusKind>(body).is_ok_and(|k| k.kind.as_deref() == Some("Status"));
    if let (true, Ok(Status { status: Some(s), message, .. })) =
        (is_status, serde_json::from_slice::<Status>(body))
    {
        if s == "Failure" {
            return CallError::HttpStatus { code, message: message.unwrap_or_default() };
        }
    }
    let is_text = content_type.is_none_or(|ct| ct.trim().is_empty() || ct.trim_start().starts_with("text/"));
    let server_message = if is_text {
        String::from_utf8_lossy(&body[..body.len().min(2048)]).trim().to_owned()
    } else {
        "unknown".to_owned()
    };
    let message = match code {
        409 => "the server reported a conflict".to_owned(),
        404 => "the server could not find the requested resource".to_owned(),
        400 => "the server rejected our request for an unknown reason".to_owned(),
        401 => "the server has asked for the client to provide credentials".to_owned(),
        403 | 415 => server_message,
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".to_owned()
        }
        406 => server_message,
        405 => "the server does not allow this method on the requested resource".to_owned(),
        422 => "the server rejected our request due to an error in our request".to_owned(),
        503 => "the server is currently unable to handle the request".to_owned(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request"
            .to_owned(),
        429 => "the server has received too many requests and has asked us to try again later".to_owned(),
        500.. => format!("an error on the server ({server_message:?}) has prevented the request from succeeding"),
        _ => format!("the server responded with the status code {code} but did not return more information"),
    };
    CallError::HttpStatus { code, message }
}

/// Go's words for a socket error where they differ from Rust's (`syscall.Errno` texts).
fn go_io_text(io: &std::io::Error) -> Option<&'static str> {
    match io.kind() {
        std::io::ErrorKind::ConnectionReset => Some("read: connection reset by peer"),
        std::io::ErrorKind::UnexpectedEof => Some("unexpected EOF"),
        _ => None,
    }
}

/// Why a response body could not be read whole: the socket error in Go's words when there is
/// one, else the error chain joined by `: `.
pub(super) fn body_read_failed(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = Vec::new();
    let mut source = Some(error);
    while let Some(cause) = source {
        if let Some(text) = cause.downcast_ref::<std::io::Error>().and_then(go_io_text) {
            return text.to_owned();
        }
        chain.push(cause.to_string());
        source = cause.source();
    }
    if chain.iter().any(|c| c.contains("IncompleteBody") || c.contains("end of file before message length")) {
        return "unexpected EOF".to_owned();
    }
    chain.join(": ")
}

/// The rustls error behind `cause`, if it is one. tokio-rustls reports TLS failures as
/// io::Errors wrapping (io::Errors wrapping) the rustls::Error; io::Error::source() skips what
/// it wraps, so unwrap by hand.
fn tls_error<'e>(cause: &'e (dyn std::error::Error + 'static)) -> Option<&'e rustls::Error> {
    let mut tls = cause.downcast_ref::<rustls::Error>();
    let mut io = cause.downcast_ref::<std::io::Error>();
    while let (None, Some(wrapper)) = (tls, io) {
        let inner = wrapper.get_ref();
        tls = inner.and_then(|e| e.downcast_ref::<rustls::Error>());
        io = inner.and_then(|e| e.downcast_ref::<std::io::Error>());
    }
    tls
}

/// Whether the server refused the handshake for want of a protocol in common: offered
/// `http/1.1` alone, a server that speaks only HTTP/2 says so (`no_application_protocol`).
pub(super) fn no_common_protocol(error: &hyper_util::client::legacy::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = error.source();
    while let Some(cause) = source {
        if let Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)) =
            tls_error(cause)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A request that got no answer, in the words Go's net/http and crypto/tls would use where they
/// are well known (refused connections, refused certificates); otherwise the error chain joined
/// by `: `.
pub(super) fn request_failed(
    error: &hyper_util::client::legacy::Error,
    url: &str,
    authority: &str,
) -> CallError {
    let transport = |message: String| CallError::Transport { url: url.to_owned(), message };
    let mut chain = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return transport(format!("dial tcp {authority}: connect: connection refused"));
            }
            if let Some(text) = go_io_text(io) {
                return transport(text.to_owned());
            }
        }
        if let Some(tls) = tls_error(cause) {
            if let rustls::Error::InvalidCertificate(certificate) = tls {
                let message = Refusal::from_certificate_error(certificate).to_string();
                return CallError::Tls { url: url.to_owned(), message };
            }
            // A first record that is no TLS record at all: a plain HTTP server, typically.
            if matches!(tls, rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) {
                return transport("tls: first record does not look like a TLS handshake".into());
            }
            return transport(format!("tls: {tls}"));
        }
        chain.push(cause.to_string());
        source = cause.source();
    }
    if chain.is_empty() {
        transport(error.to_string())
    } else {
        chain.dedup();
        transport(chain.join(": "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_errors_read_like_client_go() {
        let cases: [(u16, Option<&str>, &str, &str); 6] = [
            (
                500,
                Some("text/plain; charset=utf-8"),
                "boom\n",
                r#"an error on the server ("boom") has prevented the request from succeeding"#,
            ),
            (
                500,
                Some("application/json"),
                "boom",
                r#"an error on the server ("unknown") has prevented the request from succeeding"#,
            ),
            (403, None, "nope", "nope"),
            (404, Some("text/plain"), "x", "the server could not find the requested resource"),
            (
                418,
                Some("text/plain"),
                "x",
                "the server responded with the status code 418 but did not return more information",
            ),
            (
                500,
                Some("application/json"),
                r#"{"kind":"Status","status":"Failure","message":"x","code":500}"#,
                "x",
            ),
        ];
        for (code, content_type, body, expected) in cases {
            let error = http_status(http::StatusCode::from_u16(code).unwrap(), content_type, body.as_bytes());
            assert_eq!(error.to_string(), format!("failed to call webhook: {expected}"), "{code} {body}");
            assert_eq!(error.code(), code);
        }
    }
}
