//! AdmissionReview wire types (`admission.k8s.io/v1` and `v1beta1`, which carry the same
//! fields). It imports only `go` (Go's texts and decoders) of the crate.
//!
//! The object and oldObject stay raw JSON ([`RawValue`]) until a stage needs them as a tree,
//! so a review that only needs forwarding is never parsed beyond its envelope.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod frame;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The two AdmissionReview versions the API server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub(crate) fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "admission.k8s.io/v1",
            Self::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }

    pub(crate) fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            "admission.k8s.io/v1" => Some(Self::V1),
            "admission.k8s.io/v1beta1" => Some(Self::V1beta1),
            _ => None,
        }
    }

    /// The name used in `admissionReviewVersions`.
    pub(crate) fn from_short(version: &str) -> Option<Self> {
        match version {
            "v1" => Some(Self::V1),
            "v1beta1" => Some(Self::V1beta1),
            _ => None,
        }
    }
}

/// An admission operation. Reads never reach admission (docs/semantics.md §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupVersionKind {
    #[serde(default)]
    pub(crate) group: String,
    #[serde(default)]
    pub(crate) version: String,
    #[serde(default)]
    pub(crate) kind: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupVersionResource {
    #[serde(default)]
    pub(crate) group: String,
    #[serde(default)]
    pub(crate) version: String,
    #[serde(default)]
    pub(crate) resource: String,
}

/// `request` of an AdmissionReview, as received from the API server.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionRequest {
    #[serde(default)]
    pub(crate) uid: Located<String>,
    pub(crate) kind: Option<GroupVersionKind>,
    pub(crate) resource: Option<GroupVersionResource>,
    #[serde(default)]
    pub(crate) sub_resource: String,
    pub(crate) request_kind: Option<GroupVersionKind>,
    pub(crate) request_resource: Option<GroupVersionResource>,
    pub(crate) request_sub_resource: Option<String>,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: String,
    pub(crate) operation: Option<Operation>,
    pub(crate) user_info: Option<Box<RawValue>>,
    /// These three: `value` `None` when `null` or absent, `at` `None` only when absent.
    #[serde(default)]
    pub(crate) object: Located<Option<Box<RawValue>>>,
    #[serde(default)]
    pub(crate) old_object: Located<Option<Box<RawValue>>>,
    pub(crate) dry_run: Option<bool>,
    #[serde(default)]
    pub(crate) options: Located<Option<Box<RawValue>>>,
}

/// A value of the received request with the address its text had in the received body while
/// that was decoded (`None`: not borrowed from it, as a string with escapes is not), from
/// which `decode.rs` learns where to put another uid or object into the body (`frame.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Located<T> {
    pub(crate) value: T,
    pub(crate) at: Option<usize>,
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de> Deserialize<'de> for Located<String> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Located<String>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Located { value: text.to_owned(), at: Some(text.as_ptr() as usize) })
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Located { value: text.to_owned(), at: None })
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// A raw value, `null` read as none. Raw values are always borrowed from the body decoded
/// (`decode::review` reads a slice).
impl<'de> Deserialize<'de> for Located<Option<Box<RawValue>>> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let value = (raw.get() != "null").then(|| raw.to_owned());
        Ok(Located { value, at: Some(raw.get().as_ptr() as usize) })
    }
}

/// The request sent to one downstream webhook (docs/semantics.md §6.2). Borrowed from the
/// received request, so building it copies nothing but the fresh uid.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OutgoingRequest<'a> {
    pub(crate) uid: &'a str,
    pub(crate) kind: &'a GroupVersionKind,
    pub(crate) resource: &'a GroupVersionResource,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) sub_resource: &'a str,
    pub(crate) request_kind: &'a GroupVersionKind,
    pub(crate) request_resource: &'a GroupVersionResource,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) request_sub_resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) namespace: &'a str,
    pub(crate) operation: Operation,
    pub(crate) user_info: &'a RawValue,
    pub(crate) object: Option<&'a RawValue>,
    pub(crate) old_object: Option<&'a RawValue>,
    pub(crate) dry_run: bool,
    pub(crate) options: Option<&'a RawValue>,
}

/// A metav1 `Status`, as carried in `response.status` (the "result").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<i64>,
}

/// `response` of a downstream webhook's AdmissionReview.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookResponse {
    #[serde(default)]
    pub(crate) uid: String,
    #[serde(default)]
    pub(crate) allowed: bool,
    pub(crate) status: Option<Status>,
    /// Base64 in JSON, as Go's `[]byte`; decoded here.
    // A `[]byte` field: base64 as Go decodes it (line breaks ignored, trailing bits tolerated).
    #[serde(default, deserialize_with = "crate::go::base64::deserialize_option")]
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) patch_type: Option<String>,
    #[serde(default)]
    pub(crate) audit_annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) warnings: Option<Vec<String>>,
}

/// A downstream webhook's whole answer body.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookReview {
    pub(crate) api_version: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) response: Option<WebhookResponse>,
}
