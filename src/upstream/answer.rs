//! A webhook's answer checked as the API server checks it (docs/semantics.md §8): the
//! AdmissionReview decoded as Go decodes it (large ones off the serving thread), its type
//! against the one sent, and the response's uid and patch fields.

use bytes::Bytes;
use tokio::time::Instant;

use super::{error, CallError, HttpReply};
use crate::review::{ReviewVersion, WebhookResponse, WebhookReview};

/// What was sent, for checking the answer against it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent<'a> {
    pub(crate) uid: &'a str,
    pub(crate) version: ReviewVersion,
    pub(crate) mutating: bool,
    /// The headers naming the call's span, when tracing (src/traces.rs).
    pub(crate) trace: Option<&'a http::HeaderMap>,
}

/// A webhook's answer at least this large is decoded on the runtime's blocking threads: the
/// decoding (a patch of many operations is megabytes of base64) would otherwise hold up every
/// other review on the serving thread for as long.
pub(crate) const DECODE_ASIDE_BYTES: usize = 256 * 1024;

/// [`decode_review`], on a blocking thread for a body of [`DECODE_ASIDE_BYTES`] or more.
/// Not waited for past `deadline`: then the call has timed out, as one whose body came late.
async fn decode_review_aside(body: Bytes, deadline: Instant) -> Result<WebhookReview, CallError> {
    let decoded = if body.len() < DECODE_ASIDE_BYTES {
        decode_review(&body)
    } else {
        let decoding = tokio::task::spawn_blocking(move || decode_review(&body));
        match tokio::time::timeout_at(deadline, decoding).await {
            Ok(joined) => joined.unwrap_or_else(|error| Err(format!("decoding was stopped: {error}"))),
            Err(_) => return Err(CallError::BodyRead("context deadline exceeded".into())),
        }
    };
    decoded.map_err(|e| CallError::Decode(api_server_text(e)))
}

/// A decoding error as the API server words it: JSON it cannot read is an error of finding the
/// version and kind; a patch that is not base64, in JSON it read, is base64's own error, as
/// Go's decoder returns it (without the position serde adds).
fn api_server_text(error: String) -> String {
    if error.starts_with("illegal base64 data at input byte ") {
        return match error.rfind(" at line ") {
            Some(at) => error[..at].to_owned(),
            None => error,
        };
    }
    format!("couldn't get version/kind; json parse error: {error}")
}

/// The body as Go's decoder reads it: a syntax error in Go's words (for a JSON body, which is
/// what the API server's JSON serializer recognises: a `{` first), and the last of duplicate
/// keys kept (serde refuses them in a struct; a map keeps the last).
pub(crate) fn decode_review(body: &[u8]) -> Result<WebhookReview, String> {
    match serde_json::from_slice(body) {
        Ok(review) => Ok(review),
        Err(error) if error.to_string().starts_with("duplicate field") => {
            let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            serde_json::from_value(value).map_err(|e| e.to_string())
        }
        Err(error) => {
            let json = body.iter().find(|b| !b" \t\r\n".contains(b)) == Some(&b'{');
            Err(match crate::go::json_errors::check_valid(body) {
                Err(go) if json => go,
                _ => error.to_string(),
            })
        }
    }
}

/// §8: HTTP status, body decoding, and the response checks of the sent version.
pub(super) async fn check_reply(
    reply: HttpReply,
    sent: &Sent<'_>,
    deadline: Instant,
) -> Result<WebhookResponse, CallError> {
    if !(200..=206).contains(&reply.status.as_u16()) {
        return Err(error::http_status(reply.status, reply.content_type.as_deref(), &reply.body));
    }
    if reply.body.is_empty() {
        return Err(CallError::Decode(format!(
            "0-length response with status code: {} and content type: {}",
            reply.status.as_u16(),
            reply.content_type.as_deref().unwrap_or("application/json")
        )));
    }
    let review = decode_review_aside(reply.body, deadline).await?;
    let received = (review.api_version.as_deref().unwrap_or(""), review.kind.as_deref().unwrap_or(""));
    // A declared type must be a known one, and the one that was sent (§8.2); a missing
    // apiVersion or kind is filled in from the type sent.
    if !received.0.is_empty() || !received.1.is_empty() {
        let api_version = if received.0.is_empty() { sent.version.api_version() } else { received.0 };
        let kind = if received.1.is_empty() { "AdmissionReview" } else { received.1 };
        match ReviewVersion::from_api_version(api_version).filter(|_| kind == "AdmissionReview") {
            None => {
                return Err(CallError::Decode(format!(
                    "no kind {kind:?} is registered for version {api_version:?}"
                )));
            }
            Some(version) if version != sent.version => {
                let go_type = |v: ReviewVersion| match v {
                    ReviewVersion::V1 => "v1.AdmissionReview",
                    ReviewVersion::V1beta1 => "v1beta1.AdmissionReview",
                };
                return Err(CallError::Decode(format!(
                    "converting ({}) to ({}): unknown conversion",
                    go_type(version),
                    go_type(sent.version)
                )));
            }
            Some(_) => {}
        }
    }
    let invalid = |check: String| Err(CallError::InvalidResponse(check));
    let Some(mut response) = review.response else {
        return invalid("webhook response was absent".into());
    };
    match sent.version {
        ReviewVersion::V1 => {
            if response.uid != sent.uid {
                return invalid(format!("expected response.uid={:?}, got {:?}", sent.uid, response.uid));
            }
            if received != ("admission.k8s.io/v1", "AdmissionReview") {
                // Go's GroupVersionKind.String(): `group/version, Kind=kind`.
                let (group, version) = received.0.split_once('/').unwrap_or(("", received.0));
                return invalid(format!(
                    "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={}",
                    received.1
                ));
            }
            let has_patch = response.patch.as_ref().is_some_and(|p| !p.is_empty());
            if sent.mutating {
                match (has_patch, response.patch_type.as_deref()) {
                    (true, None) => {
                        return invalid("webhook returned response.patch but not response.patchType".into())
                    }
                    (false, Some(_)) => {
                        return invalid("webhook returned response.patchType but not response.patch".into())
                    }
                    (true, Some("")) => {
                        return invalid("webhook returned invalid response.patchType of \"\"".into())
                    }
                    _ => {}
                }
            } else {
                if has_patch {
                    return invalid("validating webhook may not return response.patch".into());
                }
                if response.patch_type.is_some() {
                    return invalid("validating webhook may not return response.patchType".into());
                }
            }
        }
        ReviewVersion::V1beta1 => {
            // Compatibility mode (§8.4): a mutating patch is always a JSONPatch; validating
            // webhooks' patch fields are ignored.
            if sent.mutating {
                if response.patch.as_ref().is_some_and(|p| !p.is_empty()) {
                    response.patch_type = Some("JSONPatch".into());
                }
            } else {
                response.patch = None;
                response.patch_type = None;
            }
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn reply(body: &str) -> HttpReply {
        HttpReply { status: http::StatusCode::OK, content_type: None, body: Bytes::from(body.to_owned()) }
    }

    #[tokio::test]
    async fn response_checks_of_v1_and_v1beta1() {
        let v1 = Sent { uid: "u", version: ReviewVersion::V1, mutating: true, trace: None };
        let validating = Sent { mutating: false, ..v1 };
        let beta = Sent { version: ReviewVersion::V1beta1, ..v1 };
        let head = r#""apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview""#;
        let cases: Vec<(Sent<'_>, String, &str)> = vec![
            (v1, format!("{{{head}}}"), "received invalid webhook response: webhook response was absent"),
            (v1, format!(r#"{{{head},"response":{{"uid":"x"}}}}"#), r#"expected response.uid="u", got "x""#),
            (
                v1,
                r#"{"response":{"uid":"u","allowed":true}}"#.into(),
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=",
            ),
            (
                v1,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patch":"W10="}}}}"#),
                "webhook returned response.patch but not response.patchType",
            ),
            (
                v1,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patchType":"JSONPatch"}}}}"#),
                "webhook returned response.patchType but not response.patch",
            ),
            (
                v1,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patch":"W10=","patchType":""}}}}"#),
                "webhook returned invalid response.patchType of \"\"",
            ),
            (
                validating,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patchType":""}}}}"#),
                "validating webhook may not return response.patchType",
            ),
            (
                validating,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patch":"W10="}}}}"#),
                "validating webhook may not return response.patch",
            ),
            (
                v1,
                r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"u"}}"#.into(),
                "converting (v1beta1.AdmissionReview) to (v1.AdmissionReview): unknown conversion",
            ),
            (beta, r#"{"kind":"AdmissionReview"}"#.into(), "webhook response was absent"),
            (
                v1,
                format!(r#"{{{head},"response":{{"uid":"u","allowed":true,"patch":"!!","patchType":"JSONPatch"}}}}"#),
                "failed to call webhook: illegal base64 data at input byte 0",
            ),
            (v1, format!("{{{head},"), "couldn't get version/kind; json parse error: "),
        ];
        for (sent, body, expected) in cases {
            let error = check_reply(reply(&body), &sent, later()).await.unwrap_err().to_string();
            assert!(error.contains(expected), "{body}: {error}");
        }
        // v1beta1 checks neither uid nor type, and treats any patch as a JSONPatch.
        let ok = check_reply(
            reply(r#"{"response":{"uid":"other","allowed":true,"patch":"W10="}}"#),
            &beta,
            later(),
        )
        .await
        .unwrap();
        assert_eq!(ok.patch_type.as_deref(), Some("JSONPatch"));
    }
}
