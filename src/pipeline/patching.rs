//! The one patch check (docs/semantics.md §10.3, in the API server's order): an allowing
//! mutating webhook's patch decoded, checked and applied, within the review's deadline. The
//! mutating chain applies it to the review's object ([`Review::apply_patch`]); a shadow call
//! to a copy, to learn whether it would have changed anything (`shadow.rs`).

use std::fmt;

use serde_json::json;
use tokio::time::Instant;

use super::context::Review;
use super::judge::{Failure, Mutation};
use super::object::{ObjectState, PatchError};
use super::verdict;
use crate::config::compile::Hook;
use crate::patch::Patch;
use crate::review::{Status, WebhookResponse};
use crate::upstream::CallError;

/// Why a webhook's patch was not applied.
#[derive(Debug)]
pub(crate) enum PatchFailure {
    /// Not a usable patch (undecodable, an unsupported type): a failed call, judged by
    /// `failurePolicy`.
    Call(CallError),
    /// The review's deadline came first: judged by `failurePolicy`, as a call that timed out,
    /// with the object as it was before the patch.
    OutOfTime(String),
    /// The patch could not be applied (or there was no object to apply it to): the API
    /// server's internal error, whatever the `failurePolicy`.
    Internal(Status),
}

impl fmt::Display for PatchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Call(error) => error.fmt(f),
            Self::OutOfTime(words) => f.write_str(words),
            Self::Internal(status) => f.write_str(status.message.as_deref().unwrap_or_default()),
        }
    }
}

impl Failure for PatchFailure {
    fn reason(&self) -> &'static str {
        match self {
            Self::Call(error) => error.reason(),
            Self::OutOfTime(_) => "patch_out_of_time",
            Self::Internal(_) => "patch_failed",
        }
    }

    /// A call's own code; the API server's code for a call that ran into its deadline (503);
    /// an internal error (0).
    fn code(&self) -> u16 {
        match self {
            Self::Call(error) => error.code(),
            Self::OutOfTime(_) => 503,
            Self::Internal(_) => 0,
        }
    }
}

/// Applies the patch of an allowing webhook (named `webhook`) to `object` before `deadline`:
/// `Ok(None)` when it sent none (or an empty one), else the patch and whether it changed the
/// object.
pub(crate) async fn apply(
    webhook: &str,
    response: &WebhookResponse,
    object: &mut ObjectState<'_>,
    deadline: Option<Instant>,
) -> Result<Option<(Patch, bool)>, PatchFailure> {
    let Some(bytes) = response.patch.as_deref().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let patch = decode(bytes, deadline).await.map_err(|undecoded| match undecoded {
        Undecoded::Invalid(error) => PatchFailure::Call(CallError::UndecodablePatch(error)),
        Undecoded::OutOfTime => PatchFailure::OutOfTime(undecoded.to_string()),
    })?;
    if patch.is_empty() {
        return Ok(None);
    }
    if object.is_null() {
        return Err(PatchFailure::Internal(verdict::internal_error(&format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            webhook
        ))));
    }
    let patch_type = response.patch_type.as_deref().unwrap_or_default();
    if patch_type != "JSONPatch" {
        return Err(PatchFailure::Call(CallError::UnsupportedPatchType {
            patch_type: patch_type.to_owned(),
            status: Box::new(verdict::rejection(webhook, response.status.as_ref())),
        }));
    }
    let changed = object.apply(&patch, deadline).await.map_err(|error| match error {
        PatchError::OutOfTime { .. } => PatchFailure::OutOfTime(error.to_string()),
        error => PatchFailure::Internal(verdict::internal_error(&error.to_string())),
    })?;
    Ok(Some((patch, changed)))
}

impl Review<'_> {
    /// Applies an allowing mutating webhook's patch to the review's object. The
    /// `patch.webhook…` annotation holds the patch itself and is only written when the
    /// settings ask for it (`auditPatchAnnotations`, `config/settings.rs`).
    pub(crate) async fn apply_patch(
        &mut self,
        hook: &Hook,
        round: u8,
        response: &WebhookResponse,
    ) -> Result<Mutation, PatchFailure> {
        let deadline = self.budget.deadline();
        let Some((patch, mutated)) = apply(&hook.name, response, &mut self.object, deadline).await? else {
            return Ok(Mutation::default());
        };
        if self.snapshot.settings.audit_patch_annotations {
            let patch_json = patch.annotation_json();
            // Built by hand so the patch stays verbatim and the keys keep the API server's order.
            let value = format!(
                r#"{{"configuration":{},"webhook":{},"patch":{patch_json},"patchType":"JSONPatch"}}"#,
                json!(hook.configuration),
                json!(hook.name)
            );
            let key = format!("patch.webhook.admission.k8s.io/round_{round}_index_{}", hook.position);
            self.records.annotate(key, value);
        }
        Ok(Mutation { patch: Some(patch), mutated })
    }
}

/// Why a webhook's patch was not decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Undecoded {
    /// Not a JSON Patch: the text of `patch::DecodeError`.
    #[error("{0}")]
    Invalid(String),
    #[error("admission-gateway could not decode the patch before the review's deadline")]
    OutOfTime,
}

/// [`Patch::decode`], on the runtime's blocking threads for a patch as large as
/// `upstream::DECODE_ASIDE_BYTES` or more, so that other reviews on the serving thread go on;
/// not waited for past `deadline`.
pub(crate) async fn decode(bytes: &[u8], deadline: Option<Instant>) -> Result<Patch, Undecoded> {
    if bytes.len() < crate::upstream::DECODE_ASIDE_BYTES {
        return Patch::decode(bytes).map_err(|e| Undecoded::Invalid(e.to_string()));
    }
    let bytes = bytes.to_vec();
    let decoding = tokio::task::spawn_blocking(move || Patch::decode(&bytes));
    let joined = match deadline {
        Some(deadline) => {
            tokio::time::timeout_at(deadline, decoding).await.map_err(|_| Undecoded::OutOfTime)?
        }
        None => decoding.await,
    };
    match joined {
        Ok(decoded) => decoded.map_err(|e| Undecoded::Invalid(e.to_string())),
        Err(error) => Err(Undecoded::Invalid(format!("decoding was stopped: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large patch is decoded aside and not waited for past the deadline; a small one, or
    /// one with time left, decodes as `Patch::decode` decodes it.
    #[tokio::test]
    async fn a_large_patch_is_not_waited_for_past_the_deadline() {
        let operation = r#"{"op":"add","path":"/metadata/labels/a","value":"b"}"#;
        let count = crate::upstream::DECODE_ASIDE_BYTES / operation.len() + 1;
        let large = format!("[{}]", vec![operation; count].join(","));
        let past = Some(Instant::now());
        assert!(matches!(decode(large.as_bytes(), past).await, Err(Undecoded::OutOfTime)));
        let later = Some(Instant::now() + std::time::Duration::from_secs(3600));
        assert_eq!(decode(large.as_bytes(), later).await.unwrap().len(), count);
        assert_eq!(decode(large.as_bytes(), None).await.unwrap().len(), count);
        let small = format!("[{operation}]");
        assert_eq!(decode(small.as_bytes(), past).await.unwrap().len(), 1, "decoded at once");
        let error = decode(b"{", later).await.unwrap_err().to_string();
        assert_eq!(error, Patch::decode(b"{").unwrap_err().to_string());
    }
}
