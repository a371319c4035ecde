//! Received AdmissionReview bytes → [`IncomingReview`], or a [`DecodeError`] saying why not
//! (the server answers those with 400; size is capped before this runs).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::frame::{self, Frame};
use super::{
    encode, AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, OutgoingRequest,
    ReviewVersion,
};

/// A decoded review whose request has every field the dispatcher relies on.
#[derive(Clone, Debug)]
pub(crate) struct IncomingReview {
    /// The caller's version: the answer is written in it.
    pub(crate) version: ReviewVersion,
    pub(crate) request: AdmissionRequest,
    /// The received body as the frame of the requests sent on, when it can be one.
    pub(crate) frame: Option<Frame>,
}

impl IncomingReview {
    /// The body of the request a webhook of `version` is sent (§6.2): the received review
    /// with the fresh `uid` and `object` put in where it can (`frame.rs`), else encoded.
    pub(crate) fn request_body(
        &self,
        version: ReviewVersion,
        uid: &str,
        object: Option<&RawValue>,
    ) -> Vec<u8> {
        self.frame
            .as_ref()
            .and_then(|frame| frame.request(version, uid, object, self.old_object()))
            .unwrap_or_else(|| encode::request(version, &self.outgoing(uid, object)))
    }

    pub(crate) fn object(&self) -> Option<&RawValue> {
        self.request.object.value.as_deref()
    }

    pub(crate) fn old_object(&self) -> Option<&RawValue> {
        self.request.old_object.value.as_deref()
    }

    /// The request a webhook is sent for this review: a fresh `uid`, `object` as it stands
    /// (for a mutating webhook, as patched so far), everything else as received.
    pub(crate) fn outgoing<'a>(&'a self, uid: &'a str, object: Option<&'a RawValue>) -> OutgoingRequest<'a> {
        let request = &self.request;
        let (kind, resource) = (self.kind(), self.resource());
        OutgoingRequest {
            uid,
            kind,
            resource,
            sub_resource: &request.sub_resource,
            request_kind: request.request_kind.as_ref().unwrap_or(kind),
            request_resource: request.request_resource.as_ref().unwrap_or(resource),
            request_sub_resource: request.request_sub_resource.as_deref().unwrap_or(&request.sub_resource),
            name: &request.name,
            namespace: &request.namespace,
            operation: self.operation(),
            user_info: self.user_info(),
            object,
            old_object: self.old_object(),
            dry_run: self.dry_run(),
            options: request.options.value.as_deref(),
        }
    }

    pub(crate) fn kind(&self) -> &GroupVersionKind {
        self.request.kind.as_ref().unwrap_or(&EMPTY_GVK)
    }
    pub(crate) fn resource(&self) -> &GroupVersionResource {
        self.request.resource.as_ref().unwrap_or(&EMPTY_GVR)
    }
    pub(crate) fn operation(&self) -> Operation {
        self.request.operation.unwrap_or(Operation::Connect)
    }
    pub(crate) fn dry_run(&self) -> bool {
        self.request.dry_run.unwrap_or(false)
    }
    pub(crate) fn user_info(&self) -> &RawValue {
        self.request.user_info.as_deref().unwrap_or(empty_object())
    }
}

static EMPTY_GVK: GroupVersionKind =
    GroupVersionKind { group: String::new(), version: String::new(), kind: String::new() };
static EMPTY_GVR: GroupVersionResource =
    GroupVersionResource { group: String::new(), version: String::new(), resource: String::new() };

fn empty_object() -> &'static RawValue {
    static EMPTY: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!()))
}

/// Why a received body is not a usable AdmissionReview. Every variant is the caller's fault.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("request body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("request body is not a valid AdmissionReview: {0}")]
    Invalid(#[source] serde_json::Error),
    #[error("expected kind AdmissionReview, got {0:?}")]
    NotAdmissionReview(String),
    #[error("unsupported apiVersion {0:?}: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1")]
    UnknownVersion(String),
    /// `serde_json` keeps such a string in a raw `object` but refuses it everywhere else (the
    /// object's tree, the request sent on), where Go reads it as U+FFFD.
    #[error("request body is not a valid AdmissionReview: a string holds a lone UTF-16 surrogate escape")]
    LoneSurrogate,
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no {0}")]
    MissingField(&'static str),
}

impl DecodeError {
    /// A bounded label for metrics and logs.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::NotJson(_) => "not_json",
            Self::Invalid(_) | Self::LoneSurrogate => "invalid",
            Self::NotAdmissionReview(_) => "not_admission_review",
            Self::UnknownVersion(_) => "unknown_version",
            Self::MissingRequest => "missing_request",
            Self::MissingField(_) => "missing_field",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<AdmissionRequest>,
}

/// Decodes one AdmissionReview. The object stays raw.
pub(crate) fn review(body: &[u8]) -> Result<IncomingReview, DecodeError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|error| {
        if error.is_syntax() || error.is_eof() {
            DecodeError::NotJson(error)
        } else {
            DecodeError::Invalid(error)
        }
    })?;
    if has_lone_surrogate(body) {
        return Err(DecodeError::LoneSurrogate);
    }
    if envelope.kind != "AdmissionReview" {
        return Err(DecodeError::NotAdmissionReview(envelope.kind));
    }
    let version = ReviewVersion::from_api_version(&envelope.api_version)
        .ok_or(DecodeError::UnknownVersion(envelope.api_version))?;
    let request = envelope.request.ok_or(DecodeError::MissingRequest)?;
    if request.uid.is_empty() {
        return Err(DecodeError::MissingField("uid"));
    }
    if request.kind.is_none() {
        return Err(DecodeError::MissingField("kind"));
    }
    if request.resource.is_none() {
        return Err(DecodeError::MissingField("resource"));
    }
    if request.operation.is_none() {
        return Err(DecodeError::MissingField("operation"));
    }
    let frame = frame_of(body, version, &request);
    Ok(IncomingReview { version, request, frame })
}

/// The frame of `body`, if the request has every field `encode::request` writes, as the API
/// server always does (docs/semantics.md §6.2; `object`, `oldObject` and `options` may be
/// `null`, an empty subresource absent), and its uid was read without escapes.
fn frame_of(body: &[u8], version: ReviewVersion, request: &AdmissionRequest) -> Option<Frame> {
    let complete = request.request_kind.is_some()
        && request.request_resource.is_some()
        && (request.request_sub_resource.is_some() || request.sub_resource.is_empty())
        && request.user_info.is_some()
        && request.dry_run.is_some()
        && request.options.at.is_some();
    if !complete {
        return None;
    }
    // The raw text as read, `null` included.
    let raw = |raw: &super::Located<Option<Box<RawValue>>>| {
        let len = raw.value.as_ref().map_or("null".len(), |value| value.get().len());
        frame::span(body, raw.at, len)
    };
    let uid = frame::span(body, request.uid.at, request.uid.len())?;
    Frame::new(body, version, uid, raw(&request.object)?, raw(&request.old_object)?)
}

/// Whether a string of `body`, valid JSON, holds a `\uXXXX` surrogate escape not in a high-low
/// pair. In valid JSON every backslash starts an escape, so no string tracking is needed.
fn has_lone_surrogate(body: &[u8]) -> bool {
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(body.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let mut at = 0;
    // memchr: most bodies have no backslash at all, and every review pays for this scan.
    while let Some(offset) = body.get(at..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        at += offset;
        if body.get(at + 1) != Some(&b'u') {
            at += 2;
            continue;
        }
        match hex(at + 2) {
            Some(0xd800..=0xdbff) => {
                let low = (body.get(at + 6..at + 8) == Some(b"\\u")).then(|| hex(at + 8)).flatten();
                if !matches!(low, Some(0xdc00..=0xdfff)) {
                    return true;
                }
                at += 12;
            }
            Some(0xdc00..=0xdfff) => return true,
            _ => at += 6,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
        "uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},
        "resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"CREATE",
        "userInfo":{"username":"alice"},"object":{"metadata":{"name":"p"}},"oldObject":null,"dryRun":false}}"#;

    #[test]
    fn a_v1_review_decodes_with_its_object_left_raw() {
        let review = review(POD.as_bytes()).unwrap();
        assert_eq!(review.version, ReviewVersion::V1);
        assert_eq!(*review.request.uid, "u1");
        assert_eq!(review.operation(), Operation::Create);
        assert_eq!(review.object().unwrap().get(), r#"{"metadata":{"name":"p"}}"#);
        assert!(review.old_object().is_none());
    }

    /// Found by fuzzing (fuzz/regressions/review_decode): a lone surrogate escape in the raw
    /// object decoded, then the request sent on (and the object's tree) did not.
    #[test]
    fn a_lone_surrogate_escape_is_refused() {
        for lone in [r"\udbed", r"\udc00", r"\ud800x", r"\ud800\u0041", r"a\\\udbed"] {
            let body = POD.replace(r#""name":"p""#, &format!(r#""name":"p","x{lone}":1"#));
            assert!(body.contains(lone), "{body}");
            assert!(matches!(review(body.as_bytes()), Err(DecodeError::LoneSurrogate)), "{body}");
        }
        for fine in [r"\ud83d\ude00", r"\\udbed", r"\u00e9\\", r"\\\\udbed"] {
            let body = POD.replace(r#""name":"p""#, &format!(r#""name":"p","x{fine}":1"#));
            assert!(body.contains(fine), "{body}");
            let decoded = review(body.as_bytes()).unwrap_or_else(|e| panic!("{body}: {e}"));
            let outgoing = decoded.outgoing("u2", decoded.object());
            let sent = super::super::encode::request(ReviewVersion::V1, &outgoing);
            serde_json::from_slice::<serde_json::Value>(&sent).expect("the request sent on is JSON");
        }
    }

    #[test]
    fn bad_input_is_named() {
        let cases: [(&str, &str); 7] = [
            ("{", "not JSON"),
            ("[1]", "not a valid AdmissionReview"),
            (r#"{"apiVersion":"v1","kind":"Pod"}"#, "expected kind AdmissionReview, got \"Pod\""),
            (
                r#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}"#,
                "unsupported apiVersion \"admission.k8s.io/v2\"",
            ),
            (r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#, "has no request"),
            (r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#, "has no uid"),
            (&POD.replace("CREATE", "GET"), "unknown variant `GET`"),
        ];
        for (body, expected) in cases {
            let error = review(body.as_bytes()).unwrap_err().to_string();
            assert!(error.contains(expected), "{body}: {error}");
        }
    }
}
