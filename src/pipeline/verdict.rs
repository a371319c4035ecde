//! Every admission `Status` the gateway builds, and the one place a failed webhook call
//! becomes a decision (docs/semantics.md §9, §17).

use std::fmt;

use serde_json::json;

use crate::config::compile::{FailurePolicy, Hook};
use crate::review::Status;

/// What a webhook call amounted to, once judged.
#[derive(Debug)]
pub(crate) enum Judgement {
    /// Allowed (possibly after failing open); the chain goes on.
    Continue,
    /// The call failed under `failurePolicy: Ignore`: allowed, with the failed-open annotation.
    FailedOpen,
    /// The request fails with this status.
    Fail(Status),
}

/// The only place a webhook that gave no usable answer (a call error, or no deadline budget
/// left to call it) becomes a decision: its `failurePolicy` (§9.1).
pub(crate) fn from_failure(hook: &Hook, cause: &dyn fmt::Display) -> Judgement {
    match hook.failure_policy {
        FailurePolicy::Ignore => Judgement::FailedOpen,
        FailurePolicy::Fail => {
            Judgement::Fail(internal_error(&format!("failed calling webhook {:?}: {cause}", hook.name)))
        }
    }
}

/// `apierrors.NewInternalError`: 500 InternalError.
pub(crate) fn internal_error(message: &str) -> Status {
    Status {
        status: Some("Failure".into()),
        message: Some(format!("Internal error occurred: {message}")),
        reason: Some("InternalError".into()),
        details: Some(json!({"causes": [{"message": message}]})),
        code: Some(500),
        metadata: None,
    }
}

/// A webhook's `allowed: false` (§9.2, `ToStatusErr`): its status kept, code at least 400,
/// and the message naming the webhook.
pub(crate) fn rejection(hook_name: &str, result: Option<&Status>) -> Status {
    let mut status = result.cloned().unwrap_or_default();
    if status.code.is_none_or(|code| code < 400) {
        status.code = Some(400);
    }
    if status.status.as_deref().is_none_or(|s| s.is_empty() || s == "Success") {
        status.status = Some("Failure".into());
    }
    let denied_by = format!("admission webhook {hook_name:?} denied the request");
    status.message = Some(match (status.message.as_deref(), status.reason.as_deref()) {
        (Some(message), _) if !message.is_empty() => format!("{denied_by}: {message}"),
        (_, Some(reason)) if !reason.is_empty() => format!("{denied_by}: {reason}"),
        _ => format!("{denied_by} without explanation"),
    });
    status
}

/// A dry-run request to a webhook with side effects (§5.1): 400, not subject to failurePolicy.
pub(crate) fn dry_run_unsupported(hook_name: &str) -> Status {
    bad_request(&format!("admission webhook {hook_name:?} does not support dry run"))
}

fn bad_request(message: &str) -> Status {
    Status {
        status: Some("Failure".into()),
        message: Some(message.into()),
        reason: Some("BadRequest".into()),
        code: Some(400),
        ..Status::default()
    }
}

/// The API server's 404 for a request whose namespace does not exist (§4.3; for policies,
/// §3.5). `configured_for`: the webhook whose namespaceSelector needed the labels when the
/// gateway knows only the configured namespaces, whom the message then names with what to do;
/// with live namespaces the words are the API server's.
pub(crate) fn namespace_not_found(name: &str, configured_for: Option<&str>) -> Status {
    let message = match configured_for {
        None => format!("namespaces {name:?} not found"),
        Some(hook_name) => format!(
            "namespaces {name:?} not found (admission-gateway: webhook {hook_name:?} has a namespaceSelector, and the gateway's configuration lists no Namespace {name:?}: add it as a v1 Namespace object with its labels, or run with --kube)"
        ),
    };
    Status {
        status: Some("Failure".into()),
        message: Some(message),
        reason: Some("NotFound".into()),
        details: Some(json!({"name": name, "kind": "namespaces"})),
        code: Some(404),
        metadata: None,
    }
}

/// The API server could not be asked for the request's namespace, as the policies' dispatcher
/// returns the error (k8s.io/apiserver `pkg/admission/plugin/policy/validating/dispatcher.go`):
/// 500, the error's text as it is. (The webhooks' matcher wraps it: [`internal_error`].)
pub(crate) fn namespace_unavailable(message: &str) -> Status {
    Status {
        status: Some("Failure".into()),
        message: Some(message.to_owned()),
        reason: Some("InternalError".into()),
        code: Some(500),
        ..Status::default()
    }
}

/// `apierrors.NewForbidden(resource.GroupResource(), name, err)`: 403, how a matchConditions
/// error fails the request under `failurePolicy: Fail` (§4.5).
pub(crate) fn forbidden(group: &str, resource: &str, name: &str, message: &str) -> Status {
    let qualified = if group.is_empty() { resource.to_owned() } else { format!("{resource}.{group}") };
    let message = match (qualified.is_empty(), name.is_empty()) {
        (true, _) => format!("forbidden: {message}"),
        (false, true) => format!("{qualified} is forbidden: {message}"),
        (false, false) => format!("{qualified} {} is forbidden: {message}", crate::go::strconv::quote(name)),
    };
    let mut details = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
        if !value.is_empty() {
            details.insert(key.to_owned(), json!(value));
        }
    }
    Status {
        status: Some("Failure".into()),
        message: Some(message),
        reason: Some("Forbidden".into()),
        details: Some(serde_json::Value::Object(details)),
        code: Some(403),
        metadata: None,
    }
}

/// Several validating webhooks failed the request. The API server returns only the first one
/// to complete; the gateway keeps the first in configuration order and names every one.
pub(crate) fn several(mut statuses: Vec<Status>) -> Option<Status> {
    if statuses.len() <= 1 {
        return statuses.pop();
    }
    let messages: Vec<&str> = statuses.iter().filter_map(|s| s.message.as_deref()).collect();
    let message = format!("[{}]", messages.join(", "));
    let mut first = statuses.swap_remove(0);
    first.message = Some(message);
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_keep_the_webhooks_status_with_the_apiservers_fixes() {
        let cases = [
            (
                None,
                400,
                "Failure",
                "admission webhook \"v.example.com\" denied the request without explanation",
            ),
            (
                Some(Status { message: Some("no".into()), code: Some(200), ..Status::default() }),
                400,
                "Failure",
                "admission webhook \"v.example.com\" denied the request: no",
            ),
            (
                Some(Status {
                    reason: Some("Quota".into()),
                    code: Some(429),
                    status: Some("Success".into()),
                    ..Status::default()
                }),
                429,
                "Failure",
                "admission webhook \"v.example.com\" denied the request: Quota",
            ),
            (
                Some(Status {
                    message: Some("x".into()),
                    status: Some("Custom".into()),
                    code: Some(403),
                    ..Status::default()
                }),
                403,
                "Custom",
                "admission webhook \"v.example.com\" denied the request: x",
            ),
        ];
        for (result, code, status, message) in cases {
            let built = rejection("v.example.com", result.as_ref());
            assert_eq!(built.code, Some(code));
            assert_eq!(built.status.as_deref(), Some(status));
            assert_eq!(built.message.as_deref(), Some(message));
        }
    }

    #[test]
    fn internal_errors_carry_the_cause() {
        let status = internal_error("failed calling webhook \"a.b.c\": boom");
        assert_eq!(
            status.message.as_deref(),
            Some("Internal error occurred: failed calling webhook \"a.b.c\": boom")
        );
        assert_eq!(
            status.details,
            Some(json!({"causes": [{"message": "failed calling webhook \"a.b.c\": boom"}]}))
        );
        assert_eq!(status.code, Some(500));
    }

    #[test]
    fn forbidden_names_the_resource_as_the_api_server_does() {
        let pods = forbidden("", "pods", "web", "boom");
        assert_eq!(pods.message.as_deref(), Some("pods \"web\" is forbidden: boom"));
        assert_eq!((pods.code, pods.reason.as_deref()), (Some(403), Some("Forbidden")));
        assert_eq!(pods.details, Some(json!({"name": "web", "kind": "pods"})));
        let deployments = forbidden("apps", "deployments", "", "boom");
        assert_eq!(deployments.message.as_deref(), Some("deployments.apps is forbidden: boom"));
        assert_eq!(deployments.details, Some(json!({"group": "apps", "kind": "deployments"})));
        assert_eq!(forbidden("", "", "", "boom").message.as_deref(), Some("forbidden: boom"));
    }

    #[test]
    fn several_failures_are_all_named() {
        let combined = several(vec![rejection("a.x.y", None), internal_error("z")]).unwrap();
        assert_eq!(combined.code, Some(400));
        assert_eq!(
            combined.message.as_deref(),
            Some("[admission webhook \"a.x.y\" denied the request without explanation, Internal error occurred: z]")
        );
        assert_eq!(several(vec![]), None);
    }
}
