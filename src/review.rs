//! AdmissionReview wire types (`admission.k8s.io/v1` and `v1beta1`, which carry the same
//! fields). A leaf module: it imports nothing of the crate.
//!
//! The object and oldObject stay raw JSON ([`RawValue`]) until a stage needs them as a tree,
//! so a review that only needs forwarding is never parsed beyond its envelope.

pub mod decode;
pub mod encode;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The two AdmissionReview versions the API server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "admission.k8s.io/v1",
            Self::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }

    pub fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            "admission.k8s.io/v1" => Some(Self::V1),
            "admission.k8s.io/v1beta1" => Some(Self::V1beta1),
            _ => None,
        }
    }

    /// The name used in `admissionReviewVersions`.
    pub fn from_short(version: &str) -> Option<Self> {
        match version {
            "v1" => Some(Self::V1),
            "v1beta1" => Some(Self::V1beta1),
            _ => None,
        }
    }
}

/// An admission operation. Reads never reach admission (dispatch-semantics §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
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
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// `request` of an AdmissionReview, as received from the API server.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    #[serde(default)]
    pub uid: String,
    pub kind: Option<GroupVersionKind>,
    pub resource: Option<GroupVersionResource>,
    #[serde(default)]
    pub sub_resource: String,
    pub request_kind: Option<GroupVersionKind>,
    pub request_resource: Option<GroupVersionResource>,
    pub request_sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    pub operation: Option<Operation>,
    pub user_info: Option<Box<RawValue>>,
    pub object: Option<Box<RawValue>>,
    pub old_object: Option<Box<RawValue>>,
    pub dry_run: Option<bool>,
    pub options: Option<Box<RawValue>>,
}

/// The request sent to one downstream webhook (dispatch-semantics §6.2). Borrowed from the
/// received request, so building it copies nothing but the fresh uid.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingRequest<'a> {
    pub uid: &'a str,
    pub kind: &'a GroupVersionKind,
    pub resource: &'a GroupVersionResource,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub sub_resource: &'a str,
    pub request_kind: &'a GroupVersionKind,
    pub request_resource: &'a GroupVersionResource,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub request_sub_resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub namespace: &'a str,
    pub operation: Operation,
    pub user_info: &'a RawValue,
    pub object: Option<&'a RawValue>,
    pub old_object: Option<&'a RawValue>,
    pub dry_run: bool,
    pub options: Option<&'a RawValue>,
}

/// A metav1 `Status`, as carried in `response.status` (the "result").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

/// `response` of a downstream webhook's AdmissionReview.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResponse {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub allowed: bool,
    pub status: Option<Status>,
    /// Base64 in JSON, as Go's `[]byte`; decoded here.
    #[serde(default, deserialize_with = "decode::base64_bytes")]
    pub patch: Option<Vec<u8>>,
    pub patch_type: Option<String>,
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// A downstream webhook's whole answer body.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReview {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub response: Option<WebhookResponse>,
}
