//! matchPolicy Equivalent (docs/semantics.md §4.0.4, §4.2): a webhook whose rules name another
//! version of the requested resource is found, and — the gateway converts no objects — judged
//! by its failurePolicy instead of being called with the object in the wrong version.

use serde_json::{json, Value};

use crate::support::binary::{run, text, write};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::Webhook;
use crate::support::{mutating, validating, webhook, Fleet, MockWebhook, TestGateway};

/// A CREATE of `resource` (`/subresource`) in `group/version`, served as `kind` of that
/// group/version, built from the pod fixture.
fn review_of(group: &str, version: &str, resource: &str, subresource: &str, kind: &str) -> Value {
    let mut review = fixtures::review(POD_CREATE);
    let request = &mut review["request"];
    let kind = json!({"group": group, "version": version, "kind": kind});
    let resource = json!({"group": group, "version": version, "resource": resource});
    request["kind"] = kind.clone();
    request["requestKind"] = kind;
    request["resource"] = resource.clone();
    request["requestResource"] = resource;
    if !subresource.is_empty() {
        request["subResource"] = json!(subresource);
        request["requestSubResource"] = json!(subresource);
    }
    let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    request["object"]["apiVersion"] = json!(api_version);
    review
}

fn deployment(group: &str, version: &str) -> Value {
    review_of(group, version, "deployments", "", "Deployment")
}

/// `webhook` with these rules, each `(group, version, resources)`, every operation.
fn with_rules(webhook: Webhook, rules: &[(&str, &str, &[&str])]) -> Webhook {
    let rules: Vec<Value> = rules
        .iter()
        .map(|(group, version, resources)| {
            json!({"operations": ["*"], "apiGroups": [group], "apiVersions": [version], "resources": resources})
        })
        .collect();
    webhook.set("rules", json!(rules))
}

fn cannot_convert(name: &str, from: &str, to: &str) -> String {
    format!(
        "Internal error occurred: failed calling webhook {name:?}: admission-gateway cannot convert {from} to {to}, the version this webhook's rules match through matchPolicy Equivalent"
    )
}

const FAILED_OPEN_VALIDATING: &str = "failed-open.validating.webhook.admission.k8s.io_round_0_index_0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_rejects_a_review_in_another_version_and_the_webhook_gets_no_call() {
    let apps = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([with_rules(
        webhook("apps.example.com", &apps),
        &[("apps", "v1", &["deployments"])],
    )])
    .await;

    let answer = gateway.validate(&deployment("extensions", "v1beta1")).await;

    assert!(!answer.allowed(), "{}", answer.body);
    assert_eq!(answer.code(), Some(500));
    assert_eq!(
        answer.message(),
        cannot_convert("apps.example.com", "extensions/v1beta1, Kind=Deployment", "apps/v1, Kind=Deployment")
    );
    assert_eq!(apps.calls(), 0, "never called with the object in a version it did not ask for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_allows_with_the_failed_open_annotation_in_both_phases() {
    let apps = MockWebhook::allowing().spawn().await;
    let rules: &[(&str, &str, &[&str])] = &[("apps", "v1", &["deployments"])];
    let gateway = TestGateway::start(Fleet::of([
        mutating("m", [with_rules(webhook("m.example.com", &apps), rules).ignore()]),
        validating("v", [with_rules(webhook("v.example.com", &apps), rules).ignore()]),
    ]))
    .await;

    let answer = gateway.admit(&deployment("extensions", "v1beta1")).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.annotation(FAILED_OPEN_VALIDATING),
        Some("v.example.com"),
        "{:?}",
        answer.annotation_keys()
    );
    assert_eq!(
        answer.annotation("failed-open.mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some("m.example.com"),
        "{:?}",
        answer.annotation_keys()
    );
    assert_eq!(apps.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_webhooks_never_match_through_equivalence() {
    let apps = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([with_rules(
        webhook("apps.example.com", &apps),
        &[("apps", "v1", &["deployments"])],
    )
    .set("matchPolicy", json!("Exact"))])
    .await;

    let answer = gateway.validate(&deployment("extensions", "v1beta1")).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert!(answer.annotation_keys().is_empty(), "skipped silently: {:?}", answer.annotation_keys());
    assert_eq!(apps.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_match_is_called_as_before_even_when_an_equivalent_would_match_too() {
    let both = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([with_rules(
        webhook("both.example.com", &both),
        &[("apps", "v1", &["deployments"]), ("extensions", "v1beta1", &["deployments"])],
    )])
    .await;

    let answer = gateway.validate(&deployment("extensions", "v1beta1")).await;

    assert!(answer.allowed(), "{}", answer.body);
    let received = both.only_request();
    assert_eq!(
        received.review["request"]["kind"],
        json!({"group": "extensions", "version": "v1beta1", "kind": "Deployment"})
    );
    assert!(answer.annotation_keys().is_empty(), "{:?}", answer.annotation_keys());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_rule_beats_a_later_one_and_subresources_keep_their_kinds() {
    let apps = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([with_rules(
        webhook("apps.example.com", &apps),
        &[("apps", "v1beta1", &["deployments", "deployments/scale"]), ("apps", "v1", &["deployments/*"])],
    )])
    .await;

    let answer = gateway.validate(&deployment("extensions", "v1beta1")).await;
    assert_eq!(
        answer.message(),
        cannot_convert(
            "apps.example.com",
            "extensions/v1beta1, Kind=Deployment",
            "apps/v1beta1, Kind=Deployment"
        )
    );

    let scale = review_of("extensions", "v1beta1", "deployments", "scale", "Scale");
    let answer = gateway.validate(&scale).await;
    assert_eq!(
        answer.message(),
        cannot_convert("apps.example.com", "extensions/v1beta1, Kind=Scale", "apps/v1beta1, Kind=Scale")
    );

    let status = review_of("extensions", "v1beta1", "deployments", "status", "Deployment");
    let answer = gateway.validate(&status).await;
    assert_eq!(
        answer.message(),
        cannot_convert("apps.example.com", "extensions/v1beta1, Kind=Deployment", "apps/v1, Kind=Deployment"),
        "only the second rule names the status subresource"
    );
    assert_eq!(apps.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equivalent_without_a_known_kind_fails_as_the_api_server_does_whatever_the_policy() {
    let apps = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([with_rules(
        webhook("apps.example.com", &apps),
        &[("apps", "v1", &["deployments/*"])],
    )
    .ignore()])
    .await;

    let answer =
        gateway.validate(&review_of("extensions", "v1beta1", "deployments", "frobnicate", "Frob")).await;

    assert!(!answer.allowed(), "{}", answer.body);
    assert_eq!(answer.code(), Some(500));
    assert_eq!(answer.reason(), "InternalError");
    assert_eq!(
        answer.message(),
        "Internal error occurred: unable to convert to apps/v1, Resource=deployments: unknown kind"
    );
    assert_eq!(apps.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_versions_are_equivalent_only_when_the_gateway_config_says_so() {
    let widgets = MockWebhook::allowing().spawn().await;
    let fleet = Fleet::of([validating(
        "v",
        [with_rules(webhook("widgets.example.com", &widgets), &[("example.com", "v1", &["widgets"])])],
    )]);
    let v1beta1 = review_of("example.com", "v1beta1", "widgets", "", "Widget");

    let gateway = TestGateway::start(fleet.clone()).await;
    let answer = gateway.validate(&v1beta1).await;
    assert!(answer.allowed(), "unknown to the gateway, the versions do not match: {}", answer.body);

    let gateway = TestGateway::start(fleet.settings(json!({
        "equivalentResources": [
            {"group": "example.com", "resource": "widgets", "kind": "Widget", "versions": ["v1", "v1beta1"]},
        ],
    })))
    .await;
    let answer = gateway.validate(&v1beta1).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.message(),
        cannot_convert(
            "widgets.example.com",
            "example.com/v1beta1, Kind=Widget",
            "example.com/v1, Kind=Widget"
        )
    );

    gateway.validate(&review_of("example.com", "v1", "widgets", "", "Widget")).await;
    assert_eq!(widgets.calls(), 1, "the version its rules name is called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_explains_the_webhook_it_could_not_call() {
    let apps = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([validating(
        "checks",
        [with_rules(webhook("apps.example.com", &apps), &[("apps", "v1", &["deployments"])]).ignore()],
    )]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());
    let review = write(dir.path(), "review.json", &deployment("extensions", "v1beta1").to_string());

    let output = run(&["review", "--config", &config, &review]).await;

    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    let expected = "checks/apps.example.com: failed open (failurePolicy Ignore): admission-gateway cannot convert extensions/v1beta1, Kind=Deployment to apps/v1, Kind=Deployment";
    assert!(stdout.contains(expected), "{expected:?} not in:\n{stdout}");
    assert_eq!(apps.calls(), 0);
}
