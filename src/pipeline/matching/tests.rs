//! The one matcher through a review's stages: the namespace is looked up only for a webhook or
//! policy whose rules match the request (outside cluster mode, the lookup of a namespace the
//! configuration does not list is what would fail the request).

use serde_json::json;

use super::NamespaceLabels;
use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::pipeline::budget::Budget;
use crate::pipeline::context::Review;
use crate::pipeline::shadow::Shadows;
use crate::pipeline::{mutate, policies, validate, Request};
use crate::review::decode::IncomingReview;
use crate::review::Status;

/// The snapshot of `documents` (JSON objects, one file).
fn snapshot(documents: &[serde_json::Value]) -> Snapshot {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": documents});
    std::fs::write(&path, list.to_string()).unwrap();
    crate::config::compile::load(&[path], &crate::upstream::Clients::default(), 1).unwrap()
}

/// A webhook configuration of `kind` with one webhook on pods CREATE, selecting the namespaces
/// labelled `env: prod`, whose URL nothing listens on.
fn webhooks(kind: &str) -> serde_json::Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": "picky"}, "webhooks": [{"name": "picky.example.com",
        "clientConfig": {"url": "https://127.0.0.1:1/"}, "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "namespaceSelector": {"matchLabels": {"env": "prod"}}}]})
}

/// A request on `resource` (of `group`) in the namespace `ghost`, which no configuration lists.
fn in_ghost(operation: &str, group: &str, resource: &str) -> IncomingReview {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": operation, "namespace": "ghost", "name": "web",
        "kind": {"group": group, "version": "v1", "kind": "Object"},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "userInfo": {"username": "alice"}, "object": {"metadata": {"name": "web"}}}});
    crate::review::decode::review(body.to_string().as_bytes()).unwrap()
}

fn review<'r>(snapshot: &'r Snapshot, request: &'r IncomingReview, shadows: &'r Shadows) -> Review<'r> {
    let budget = Budget::unlimited(&snapshot.settings);
    Review::new(Request::new(snapshot, request, Endpoint::Admit, budget, shadows))
}

/// The phase of the webhooks of `kind`.
async fn run(kind: &str, review: &mut Review<'_>) -> Result<(), Status> {
    match kind {
        "MutatingWebhookConfiguration" => mutate::run_chain(review).await,
        _ => validate::fan_out(review).await,
    }
}

#[tokio::test]
async fn a_webhook_looks_the_namespace_up_only_when_its_rules_match() {
    let shadows = Shadows::default();
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        let snapshot = snapshot(&[webhooks(kind)]);
        // A candidate (a pod) whose rules do not match (DELETE): skipped, nothing looked up.
        let delete = in_ghost("DELETE", "", "pods");
        let mut skipped = review(&snapshot, &delete, &shadows);
        assert!(run(kind, &mut skipped).await.is_ok(), "{kind}");
        assert!(matches!(skipped.namespace, NamespaceLabels::NotNeeded), "{kind}: {:?}", skipped.namespace);

        // Its rules match: the namespace is looked up, and its absence is the 404.
        let create = in_ghost("CREATE", "", "pods");
        let mut matched = review(&snapshot, &create, &shadows);
        let status = run(kind, &mut matched).await.expect_err("the namespace is unknown");
        assert_eq!(status.code, Some(404), "{kind}");
        assert!(matches!(matched.namespace, NamespaceLabels::Missing { live: false }), "{kind}");
    }
}

/// A policy on pods CREATE whose namespaceSelector reads the namespace's labels.
fn selective_policy(resources: serde_json::Value) -> [serde_json::Value; 2] {
    let spec = json!({"matchConstraints": {
        "resourceRules": [{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": resources}],
        "namespaceSelector": {"matchLabels": {"env": "prod"}}},
        "validations": [{"expression": "true"}]});
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"}, "spec": spec}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "p-binding"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}}),
    ]
}

#[tokio::test]
async fn the_policies_look_the_namespace_up_only_for_a_candidate_whose_rules_match() {
    let shadows = Shadows::default();
    let cases = [
        // Not a candidate.
        (json!(["pods"]), in_ghost("CREATE", "", "configmaps"), false),
        // A candidate whose rules do not match.
        (json!(["pods"]), in_ghost("DELETE", "", "pods"), false),
        // Rules that match every resource, on a request exempt from every policy.
        (json!(["*"]), in_ghost("CREATE", "authorization.k8s.io", "localsubjectaccessreviews"), false),
        (json!(["pods"]), in_ghost("CREATE", "", "pods"), true),
    ];
    for (resources, request, looked_up) in cases {
        let snapshot = snapshot(&selective_policy(resources));
        let mut review = review(&snapshot, &request, &shadows);
        let result = policies::run(&mut review).await;
        let resource = request.resource();
        let case = format!("{} {}", request.operation().as_str(), resource.resource);
        if looked_up {
            assert!(matches!(review.namespace, NamespaceLabels::Missing { live: false }), "{case}");
            // Outside cluster mode an unconfigured namespace is unknown: the selector's match
            // error, under the policy's failurePolicy.
            let message = result.expect_err("a match error under Fail").message.unwrap_or_default();
            assert!(
                message.contains(r#"failed to configure policy: namespaces "ghost" not found"#),
                "{message}"
            );
        } else {
            assert!(result.is_ok(), "{case}: {result:?}");
            assert!(matches!(review.namespace, NamespaceLabels::NotNeeded), "{case}: {:?}", review.namespace);
        }
    }
}
