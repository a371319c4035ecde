//! Answers and downstream requests → AdmissionReview bytes.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Serialize;

use super::{OutgoingRequest, ReviewVersion, Status};

/// The gateway's answer to the caller, before it is written in the caller's version.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    pub(crate) status: Option<Status>,
    /// A JSONPatch document (JSON text), sent base64-encoded with `patchType: JSONPatch`.
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) audit_annotations: BTreeMap<String, String>,
    pub(crate) warnings: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a, R> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<Response<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// The answer as an AdmissionReview in `version`, echoing the caller's `uid`.
pub(crate) fn answer(version: ReviewVersion, uid: &str, answer: &Answer) -> Vec<u8> {
    let patch = answer.patch.as_ref().map(|patch| base64::engine::general_purpose::STANDARD.encode(patch));
    let response = Response {
        uid,
        allowed: answer.allowed,
        status: answer.status.as_ref(),
        patch_type: patch.as_ref().map(|_| "JSONPatch"),
        patch,
        audit_annotations: &answer.audit_annotations,
        warnings: &answer.warnings,
    };
    let envelope: Envelope<'_, ()> = Envelope {
        api_version: version.api_version(),
        kind: "AdmissionReview",
        request: None,
        response: Some(response),
    };
    write(Vec::with_capacity(256), &envelope)
}

/// A downstream request as an AdmissionReview in the webhook's `version`.
pub(crate) fn request(version: ReviewVersion, request: &OutgoingRequest<'_>) -> Vec<u8> {
    let envelope = Envelope {
        api_version: version.api_version(),
        kind: "AdmissionReview",
        request: Some(request),
        response: None,
    };
    // Room for the raw values and the rest, so that the object is copied once, not again at
    // every doubling of a buffer grown from empty.
    let raw: usize = [Some(request.user_info), request.object, request.old_object, request.options]
        .into_iter()
        .flatten()
        .map(|value| value.get().len())
        .sum();
    write(Vec::with_capacity(raw + 1024), &envelope)
}

fn write<T: Serialize>(mut out: Vec<u8>, value: &T) -> Vec<u8> {
    // Serializing these types cannot fail: every map key is a string and every raw value valid JSON.
    serde_json::to_writer(&mut out, value)
        .unwrap_or_else(|error| unreachable!("AdmissionReview encoding failed: {error}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn an_answer_echoes_the_uid_and_base64_encodes_the_patch() {
        let body = answer(
            ReviewVersion::V1beta1,
            "abc",
            &Answer {
                allowed: true,
                patch: Some(b"[]".to_vec()),
                warnings: vec!["w".into()],
                ..Answer::default()
            },
        );
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                   "response": {"uid": "abc", "allowed": true, "patch": "W10=", "patchType": "JSONPatch", "warnings": ["w"]}})
        );
    }
}
