//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (and the parameter objects a
//! `paramKind` names), loaded from the same sources as the fleet: defaulted and validated as the
//! API server does on create (`pkg/apis/admissionregistration/{v1/defaults.go,validation/validation.go}`
//! in kubernetes/kubernetes), every problem named, expressions compiled once. Evaluated by
//! `pipeline::policy`.

#![allow(dead_code)] // until the stage uses every part (removed when wired)

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::Problem;

/// One document of a kind the policies use, and where it was found.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub(crate) file: PathBuf,
    /// `Kind "name"`, as every problem names the object.
    pub(crate) object: String,
    pub(crate) value: Value,
}

/// What the configuration sources held for policies, in file order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Documents {
    /// `ValidatingAdmissionPolicy`, v1 or v1beta1.
    pub(crate) policies: Vec<Found>,
    /// `ValidatingAdmissionPolicyBinding`, v1 or v1beta1.
    pub(crate) bindings: Vec<Found>,
    /// Every object of another kind: a parameter when a policy's `paramKind` names its kind,
    /// else refused as an unsupported object.
    pub(crate) others: Vec<Found>,
}

/// Every policy, binding and parameter, compiled; empty when none is configured.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    policies: Vec<Arc<Policy>>,
}

/// One policy with its bindings, compiled.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) name: String,
    /// `admission-gateway/mode` and `admission-gateway/canary-percent`, as on webhook
    /// configurations.
    pub(crate) mode: super::mode::Mode,
    /// `admission-gateway/replaces`: the validating webhook (configuration, webhook) this
    /// policy is meant to replace; both are then compared on live traffic.
    pub(crate) replaces: Option<(String, String)>,
}

impl Policies {
    /// Compiles `documents`; every problem goes to `problems`, naming file, object, field and,
    /// for an expression, the expression.
    pub(crate) fn compile(documents: Documents, problems: &mut Vec<Problem>) -> Policies {
        for other in documents.others {
            problems.push(unsupported(&other));
        }
        Policies::default()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Every policy in evaluation order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policies.iter()
    }
}

/// The problem of an object of a kind nothing here reads.
fn unsupported(found: &Found) -> Problem {
    let api_version = found.value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = found.value.get("kind").and_then(Value::as_str).unwrap_or("");
    Problem {
        severity: super::Severity::Error,
        file: found.file.clone(),
        object: Some(found.object.clone()),
        webhook: None,
        field: None,
        message: format!(
            "unsupported object {api_version}, Kind={kind}: expected admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, ValidatingWebhookConfiguration, ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding, v1 Namespace, an object a policy's paramKind names, {} {}, or a v1 List of them",
            super::settings::API_VERSION,
            super::settings::KIND
        ),
    }
}
