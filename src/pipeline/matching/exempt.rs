//! Requests some webhooks or policies never see, from one table: the authentication and
//! authorization reviews (virtual resources, never stored) and the admission configuration
//! itself. Webhooks and policies read it differently, as upstream does:
//! - webhooks (k8s.io/apiserver `pkg/admission/plugin/webhook/generic/webhook.go`, `Dispatch`,
//!   and `…/webhook/predicates/rules/rules.go`, `IsExemptAdmissionConfigurationResource`;
//!   docs/semantics.md §3.2, §3.3): the reviews by the resource received, the webhook
//!   configurations and the admission policies and bindings by the kind received;
//! - policies (`pkg/admission/plugin/policy/generic/plugin.go`, `Dispatch`): by the resource as
//!   requested, the reviews for every policy, the admission policies and bindings (not the
//!   webhook configurations) for the policies that are not static.

use crate::review::decode::IncomingReview;

/// The authentication and authorization reviews, by group.
const REVIEWS: [(&str, &[&str]); 2] = [
    ("authentication.k8s.io", &["tokenreviews", "selfsubjectreviews"]),
    (
        "authorization.k8s.io",
        &[
            "subjectaccessreviews",
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
        ],
    ),
];

/// The group of the admission configuration.
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// The admission configuration: (kind, resource, whether it is a policy or a binding, which
/// static policies still see).
const ADMISSION_CONFIGURATION: [(&str, &str, bool); 6] = [
    ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false),
    ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false),
    ("ValidatingAdmissionPolicy", "validatingadmissionpolicies", true),
    ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", true),
    ("MutatingAdmissionPolicy", "mutatingadmissionpolicies", true),
    ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", true),
];

fn is_review(group: &str, resource: &str) -> bool {
    REVIEWS.iter().any(|(g, resources)| *g == group && resources.contains(&resource))
}

/// Why no webhook is sent `review` (§3.2, §3.3), if none is.
pub(crate) fn from_webhooks(review: &IncomingReview) -> Option<&'static str> {
    let kind = review.kind();
    if kind.group == ADMISSION_GROUP && ADMISSION_CONFIGURATION.iter().any(|(k, ..)| *k == kind.kind) {
        return Some("admission configuration objects are never sent to webhooks");
    }
    let resource = review.resource();
    is_review(&resource.group, &resource.resource)
        .then_some("virtual authentication/authorization resources are never sent to webhooks")
}

/// Why a policy (`is_static`: named `*.static.k8s.io`) does not admit `review`, if it does not.
pub(crate) fn from_policy(review: &IncomingReview, is_static: bool) -> Option<&'static str> {
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    if is_review(&resource.group, &resource.resource) {
        return Some("authentication and authorization reviews are never admitted by policies");
    }
    let policy_resource = resource.group == ADMISSION_GROUP
        && ADMISSION_CONFIGURATION.iter().any(|(_, r, policy)| *policy && *r == resource.resource);
    (!is_static && policy_resource)
        .then_some("admission policies and their bindings are exempt from policies that are not static")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(group: &str, kind: &str, resource: &str) -> IncomingReview {
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "operation": "CREATE", "name": "x",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": resource},
                "userInfo": {"username": "alice"},
            },
        });
        crate::review::decode::review(body.to_string().as_bytes()).unwrap()
    }

    /// What each reader of the one table exempts: (group, kind, resource), then whether
    /// webhooks, a policy and a static policy see the request.
    #[test]
    fn webhooks_and_policies_read_the_one_table_each_their_way() {
        let cases = [
            ("", "Pod", "pods", (true, true, true)),
            ("authentication.k8s.io", "TokenReview", "tokenreviews", (false, false, false)),
            (
                "authorization.k8s.io",
                "LocalSubjectAccessReview",
                "localsubjectaccessreviews",
                (false, false, false),
            ),
            // Webhook configurations: exempt from webhooks only.
            (
                ADMISSION_GROUP,
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
                (false, true, true),
            ),
            (
                ADMISSION_GROUP,
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
                (false, true, true),
            ),
            // Admission policies and bindings: seen by static policies only.
            (
                ADMISSION_GROUP,
                "ValidatingAdmissionPolicy",
                "validatingadmissionpolicies",
                (false, false, true),
            ),
            (
                ADMISSION_GROUP,
                "MutatingAdmissionPolicyBinding",
                "mutatingadmissionpolicybindings",
                (false, false, true),
            ),
            // Another group's resource of the same name is not the admission configuration.
            ("example.com", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", (true, true, true)),
        ];
        for (group, kind, resource, expected) in cases {
            let review = review(group, kind, resource);
            let seen = (
                from_webhooks(&review).is_none(),
                from_policy(&review, false).is_none(),
                from_policy(&review, true).is_none(),
            );
            assert_eq!(seen, expected, "{group} {kind} {resource}");
        }
    }
}
