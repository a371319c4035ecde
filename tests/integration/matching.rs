//! Which webhooks are called (docs/semantics.md §3–§5) and what they receive (§6).

use serde_json::{json, Value};

use crate::support::fixtures::{
    self, NAMESPACE_CREATE, POD_CREATE, POD_CREATE_DRY_RUN, POD_CREATE_V1BETA1, POD_EXEC, POD_UPDATE,
    SECRET_CREATE,
};
use crate::support::{mutating, validating, webhook, Fleet, MockWebhook, TestGateway};

/// A fixture moved into another namespace.
fn in_namespace(name: &str, namespace: &str) -> Value {
    let mut review = fixtures::review(name);
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    review
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_slash_star_matches_the_exec_subresource_and_pods_does_not() {
    let pods = MockWebhook::allowing().spawn().await;
    let pods_star = MockWebhook::allowing().spawn().await;
    let exec = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("pods.example.com", &pods).rule(&["*"], &["pods"]),
        webhook("pods-star.example.com", &pods_star).rule(&["*"], &["pods/*"]),
        webhook("exec.example.com", &exec).rule(&["CONNECT"], &["pods/exec"]),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_EXEC)).await;

    assert!(answer.allowed());
    assert_eq!(pods.calls(), 0, "`pods` is the main resource only");
    assert_eq!(exec.calls(), 1);
    let received = pods_star.only_request();
    assert_eq!(received.review["request"]["subResource"], "exec");
    assert_eq!(received.review["request"]["requestSubResource"], "exec");
    assert_eq!(received.object()["kind"], "PodExecOptions");

    gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(pods.calls(), 1);
    assert_eq!(pods_star.calls(), 2, "`pods/*` also matches the main resource");
    assert_eq!(exec.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_cluster_and_namespaced_split_namespaces_from_pods() {
    let cluster = MockWebhook::allowing().spawn().await;
    let namespaced = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("cluster.example.com", &cluster).scope("Cluster"),
        webhook("namespaced.example.com", &namespaced).scope("Namespaced"),
    ])
    .await;

    gateway.validate(&fixtures::review(POD_CREATE)).await;
    assert_eq!((cluster.calls(), namespaced.calls()), (0, 1));

    gateway.validate(&fixtures::review(NAMESPACE_CREATE)).await;
    assert_eq!((cluster.calls(), namespaced.calls()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_selector_reads_the_labels_of_configured_namespaces() {
    let prod = MockWebhook::allowing().spawn().await;
    let staging = MockWebhook::allowing().spawn().await;
    let by_name = MockWebhook::allowing().spawn().await;
    let not_staging = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(
        Fleet::of([validating(
            "fleet",
            [
                webhook("prod.example.com", &prod)
                    .namespace_selector(json!({"matchLabels": {"env": "prod"}})),
                webhook("staging.example.com", &staging)
                    .namespace_selector(json!({"matchLabels": {"env": "staging"}})),
                webhook("by-name.example.com", &by_name)
                    .namespace_selector(json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})),
                webhook("not-staging.example.com", &not_staging).namespace_selector(json!({
                    "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["staging"]}]
                })),
            ],
        )])
        .namespace("team-a", &[("env", "prod")]),
    )
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(prod.calls(), 1);
    assert_eq!(staging.calls(), 0);
    assert_eq!(by_name.calls(), 1, "every namespace carries kubernetes.io/metadata.name");
    assert_eq!(not_staging.calls(), 1);

    // Creating a namespace: its own labels (env=staging) decide, not a configured Namespace.
    gateway.validate(&fixtures::review(NAMESPACE_CREATE)).await;

    assert_eq!((prod.calls(), staging.calls()), (1, 1));
    assert_eq!(not_staging.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_namespace_is_404_only_when_the_rules_match() {
    let picky = MockWebhook::allowing().spawn().await;
    let easy = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("picky.example.com", &picky)
            .rule(&["*"], &["secrets"])
            .namespace_selector(json!({"matchLabels": {"env": "prod"}})),
        webhook("easy.example.com", &easy).rule(&["*"], &["pods"]),
    ])
    .await;

    let pod = gateway.validate(&in_namespace(POD_CREATE, "ghost")).await;
    let secret = gateway.validate(&in_namespace(SECRET_CREATE, "ghost")).await;

    assert!(pod.allowed(), "no rule of the picky webhook matches pods: {}", pod.body);
    assert_eq!(easy.calls(), 1, "an empty selector needs no namespace");
    assert!(!secret.allowed());
    assert_eq!(secret.code(), Some(404));
    assert_eq!(secret.reason(), "NotFound");
    assert!(secret.message().starts_with(r#"namespaces "ghost" not found ("#), "{}", secret.message());
    assert!(
        secret.message().contains(r#"webhook "picky.example.com" has a namespaceSelector"#),
        "the message blames the webhook that needed the labels: {}",
        secret.message()
    );
    assert_eq!(picky.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_selector_matches_the_new_or_the_old_object() {
    let stable = MockWebhook::allowing().spawn().await;
    let canary = MockWebhook::allowing().spawn().await;
    let unlabelled = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("stable.example.com", &stable).object_selector(json!({"matchLabels": {"release": "stable"}})),
        webhook("canary.example.com", &canary).object_selector(json!({"matchLabels": {"release": "canary"}})),
        webhook("unlabelled.example.com", &unlabelled)
            .object_selector(json!({"matchExpressions": [{"key": "release", "operator": "DoesNotExist"}]})),
    ])
    .await;

    // The update drops release=stable: only the old object has it.
    gateway.validate(&fixtures::review(POD_UPDATE)).await;

    assert_eq!((stable.calls(), canary.calls()), (1, 0));
    assert_eq!(unlabelled.calls(), 1, "the new object has no release label");

    gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(stable.calls(), 1, "a CREATE has no old object");

    gateway.validate(&fixtures::review(POD_EXEC)).await;

    assert_eq!(
        unlabelled.calls(),
        2,
        "an options object without metadata matches no selector, not even DoesNotExist"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_is_sent_to_webhooks_without_side_effects_on_dry_run() {
    let careful = MockWebhook::allowing().spawn().await;
    let risky_secrets = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("careful.example.com", &careful).side_effects("NoneOnDryRun"),
        // Side effects, but no rule for pods: it does not block dry-run pods (§5.3).
        webhook("risky.example.com", &risky_secrets).side_effects("Some").rule(&["*"], &["secrets"]),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE_DRY_RUN)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(careful.only_request().review["request"]["dryRun"], true);
    assert_eq!(risky_secrets.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_to_a_webhook_with_unknown_side_effects_is_refused_even_under_ignore() {
    let unknown = MockWebhook::allowing().spawn().await;
    // Loads (with a warning): a legacy value the API server keeps on old objects.
    let gateway = TestGateway::start(Fleet::of([
        validating("legacy", [webhook("legacy.example.com", &unknown).side_effects("Unknown").ignore()]),
        mutating(
            "legacy-mutating",
            [webhook("legacy-mutating.example.com", &unknown).side_effects("Unknown").ignore()],
        ),
    ]))
    .await;

    let validated = gateway.validate(&fixtures::review(POD_CREATE_DRY_RUN)).await;
    let mutated = gateway.mutate(&fixtures::review(POD_CREATE_DRY_RUN)).await;

    for answer in [&validated, &mutated] {
        assert!(!answer.allowed());
        assert_eq!(answer.code(), Some(400));
        assert_eq!(answer.reason(), "BadRequest");
    }
    assert_eq!(validated.message(), r#"admission webhook "legacy.example.com" does not support dry run"#);
    assert_eq!(
        mutated.message(),
        r#"admission webhook "legacy-mutating.example.com" does not support dry run"#
    );
    assert_eq!(
        mutated.annotation("mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some(
            r#"{"configuration":"legacy-mutating","webhook":"legacy-mutating.example.com","mutated":false}"#
        ),
        "§5.2: the dry-run refusal still annotates the mutating webhook"
    );
    assert_eq!(unknown.calls(), 0);

    let real = gateway.admit(&fixtures::review(POD_CREATE)).await;

    assert!(real.allowed(), "{}", real.body);
    assert_eq!(unknown.calls(), 2, "without dryRun both are called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_receives_a_fresh_uid_and_the_request_in_its_own_version() {
    let beta = MockWebhook::allowing().spawn().await;
    let v1 = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("beta.example.com", &beta).review_versions(&["v1beta1", "v1"]),
        webhook("v1.example.com", &v1).review_versions(&["v2", "v1"]),
    ])
    .await;
    let sent = fixtures::review(POD_CREATE);

    let answer = gateway.validate(&sent).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(answer.uid(), fixtures::uid(POD_CREATE));
    let beta = beta.only_request().review;
    let v1 = v1.only_request().review;
    assert_eq!(beta["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(v1["apiVersion"], "admission.k8s.io/v1");
    let (beta, v1, sent) = (&beta["request"], &v1["request"], &sent["request"]);
    assert_ne!(beta["uid"], sent["uid"], "a fresh uid for every call");
    assert_ne!(beta["uid"], v1["uid"]);
    assert_eq!(beta["uid"].as_str().unwrap().len(), 36, "a UUID");
    for field in [
        "kind",
        "resource",
        "requestKind",
        "requestResource",
        "name",
        "namespace",
        "operation",
        "userInfo",
        "object",
        "options",
    ] {
        assert_eq!(beta[field], sent[field], "request.{field}");
    }
    assert_eq!(beta["oldObject"], Value::Null);
    assert_eq!(beta["dryRun"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_review_is_answered_in_v1beta1_with_the_callers_uid() {
    let v1 = MockWebhook::denying("no").spawn().await;
    let gateway = TestGateway::validating([webhook("v1.example.com", &v1)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE_V1BETA1)).await;

    assert_eq!(answer.api_version(), "admission.k8s.io/v1beta1");
    assert_eq!(answer.review["kind"], "AdmissionReview");
    assert_eq!(answer.uid(), fixtures::uid(POD_CREATE_V1BETA1));
    assert!(!answer.allowed());
    assert_eq!(
        v1.only_request().review["apiVersion"],
        "admission.k8s.io/v1",
        "the webhook gets the version it accepts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_configuration_objects_are_never_sent_to_webhooks() {
    let mutator = MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]))
        .spawn()
        .await;
    let validator = MockWebhook::denying("everything is denied").spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        mutating("all", [webhook("mutator.example.com", &mutator)]),
        validating("all", [webhook("validator.example.com", &validator)]),
    ]))
    .await;
    let mut review = fixtures::review(POD_CREATE);
    let request = &mut review["request"];
    for field in ["kind", "requestKind"] {
        request[field] = json!({"group": "admissionregistration.k8s.io", "version": "v1", "kind": "ValidatingWebhookConfiguration"});
    }
    for field in ["resource", "requestResource"] {
        request[field] = json!({"group": "admissionregistration.k8s.io", "version": "v1", "resource": "validatingwebhookconfigurations"});
    }
    request.as_object_mut().unwrap().remove("namespace");
    request["name"] = json!("some-policy");
    request["object"] = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "some-policy"},
        "webhooks": []
    });

    let exempt = gateway.admit(&review).await;

    assert!(exempt.allowed(), "{}", exempt.body);
    assert_eq!(exempt.patch(), None);
    assert_eq!((mutator.calls(), validator.calls()), (0, 0));

    let pod = gateway.admit(&fixtures::review(POD_CREATE)).await;

    assert!(!pod.allowed(), "the same webhooks do see a pod");
    assert_eq!((mutator.calls(), validator.calls()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_auth_resources_are_never_sent_to_webhooks() {
    let everything = MockWebhook::denying("everything is denied").spawn().await;
    let gateway = TestGateway::validating([webhook("everything.example.com", &everything)]).await;
    let mut review = fixtures::review(POD_CREATE);
    let request = &mut review["request"];
    for field in ["kind", "requestKind"] {
        request[field] =
            json!({"group": "authorization.k8s.io", "version": "v1", "kind": "SubjectAccessReview"});
    }
    for field in ["resource", "requestResource"] {
        request[field] =
            json!({"group": "authorization.k8s.io", "version": "v1", "resource": "subjectaccessreviews"});
    }
    request.as_object_mut().unwrap().remove("namespace");
    request["object"] = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                               "metadata": {}, "spec": {"user": "bob"}});

    let answer = gateway.validate(&review).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(everything.calls(), 0);
}
