//! matchConditions (docs/semantics.md §4.5): CEL after rules and selectors; a false condition
//! skips, an error goes to failurePolicy, and in the mutating chain conditions see the object
//! as patched so far.

use serde_json::{json, Value};

use crate::support::binary::{run, text, write};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::Webhook;
use crate::support::{mutating, validating, webhook, Fleet, MockWebhook, TestGateway};

fn conditions(hook: Webhook, conditions: &[(&str, &str)]) -> Webhook {
    let list: Vec<Value> =
        conditions.iter().map(|(name, expression)| json!({"name": name, "expression": expression})).collect();
    hook.set("matchConditions", json!(list))
}

const MISSING: &str = "object.spec.missing == 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn true_conditions_call_a_false_one_skips_and_false_beats_errors() {
    let skipped = MockWebhook::allowing().spawn().await;
    let called = MockWebhook::allowing().spawn().await;
    let false_and_errors = MockWebhook::denying("must not be called").spawn().await;
    let gateway = TestGateway::validating([
        conditions(webhook("db-only.example.com", &skipped), &[("is-db", "object.metadata.labels.app == 'db'")]),
        conditions(
            webhook("registry.example.com", &called),
            &[
                ("alice", "request.userInfo.username == 'alice@example.com' && 'platform-team' in request.userInfo.groups"),
                ("images", "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))"),
                ("create", "request.operation == 'CREATE' && oldObject == null && request.kind.kind == 'Pod'"),
                ("memory", "quantity(object.spec.containers[0].resources.limits.memory).isLessThan(quantity('1Gi'))"),
            ],
        ),
        // failurePolicy Fail, but a false condition skips it whatever the others do.
        conditions(
            webhook("mixed.example.com", &false_and_errors),
            &[("errs", MISSING), ("never", "request.dryRun"), ("authz", "authorizer.requestResource.check('create').allowed()")],
        ),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!((skipped.calls(), called.calls(), false_and_errors.calls()), (0, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_under_fail_rejects_the_request_with_the_api_servers_403() {
    let mock = MockWebhook::allowing().spawn().await;
    let later = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        conditions(webhook("strict.example.com", &mock), &[("fine", "true"), ("broken", MISSING)]),
        webhook("later.example.com", &later),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(403));
    assert_eq!(answer.reason(), "Forbidden");
    assert_eq!(
        answer.message(),
        "pods \"web-7d4b9c\" is forbidden: expression 'object.spec.missing == 1' resulted in error: no such key: missing"
    );
    assert_eq!((mock.calls(), later.calls()), (0, 0), "matching ends before any validating call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_under_ignore_skips_the_webhook_without_a_failed_open_annotation() {
    let mock = MockWebhook::denying("must not be called").spawn().await;
    let gateway = TestGateway::validating([conditions(
        webhook("lenient.example.com", &mock).ignore(),
        &[("authz", "authorizer.group('').resource('pods').check('create').allowed()"), ("broken", MISSING)],
    )])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(mock.calls(), 0);
    assert!(!answer.body.contains("failed-open"), "not a call error: {}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhooks_conditions_see_the_patches_of_earlier_ones() {
    let team =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/team", "value": "payments"}]))
            .spawn()
            .await;
    let payments = MockWebhook::allowing().spawn().await;
    let unlabelled = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([mutating(
        "chain",
        [
            conditions(
                webhook("team.example.com", &team),
                &[("no-team-yet", "!has(object.metadata.labels.team)")],
            ),
            conditions(
                webhook("payments.example.com", &payments),
                &[("payments", "object.metadata.?labels.?team.orValue('') == 'payments'")],
            ),
            conditions(
                webhook("unlabelled.example.com", &unlabelled),
                &[("no-team", "!has(object.metadata.labels.team)")],
            ),
        ],
    )]))
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(team.calls(), 1, "the received pod has no team label");
    assert_eq!(payments.calls(), 1, "the condition sees the label the first webhook added");
    assert_eq!(unlabelled.calls(), 0, "skipped on the patched object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_explains_which_condition_skipped_a_webhook() {
    let mock = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "fleet.yaml",
        &Fleet::of([validating(
            "checks",
            [
                conditions(
                    webhook("db.example.com", &mock),
                    &[("always", "true"), ("is-db", "object.metadata.labels.app == 'db'")],
                ),
                conditions(
                    webhook("authz.example.com", &mock).ignore(),
                    &[("authz", "authorizer.requestResource.check('create').allowed()")],
                ),
            ],
        )])
        .yaml(),
    );
    let fixture = fixtures::path(POD_CREATE).display().to_string();

    let output = run(&["review", "--config", &config, &fixture]).await;

    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(stdout.contains("skip checks/db.example.com: matchCondition \"is-db\" is false"), "{stdout}");
    assert!(
        stdout.contains("skip checks/authz.example.com: matchCondition \"authz\" failed to evaluate and failurePolicy is Ignore: expression 'authorizer.requestResource.check('create').allowed()' resulted in error: authorizer is not available"),
        "{stdout}"
    );
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_conditions_that_do_not_compile_naming_each() {
    let mock = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let many: Vec<(String, String)> = (0..65).map(|i| (format!("c{i}"), "true".to_owned())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, e)| (n.as_str(), e.as_str())).collect();
    let config = write(
        dir.path(),
        "fleet.yaml",
        &Fleet::of([validating(
            "cel",
            [
                conditions(
                    webhook("broken.example.com", &mock),
                    &[("syntax", "object.metadata.name =="), ("unknown", "foo == 1"), ("number", "1 + 1")],
                ),
                conditions(webhook("many.example.com", &mock), &many),
            ],
        )])
        .yaml(),
    );

    let output = run(&["check", "--config", &config]).await;

    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let file = format!("{}/fleet.yaml", dir.path().display());
    let object = "ValidatingWebhookConfiguration \"cel\"";
    for expected in [
        format!("error: {file}: {object}: webhook \"broken.example.com\": webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name ==\": compilation failed: ERROR: <input>:1:"),
        format!("error: {file}: {object}: webhook \"broken.example.com\": webhooks[0].matchConditions[1].expression: Invalid value: \"foo == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^ (matchCondition \"unknown\")"),
        format!("error: {file}: {object}: webhook \"broken.example.com\": webhooks[0].matchConditions[2].expression: Invalid value: \"1 + 1\": must evaluate to bool but got int (matchCondition \"number\")"),
        format!("error: {file}: {object}: webhook \"many.example.com\": webhooks[1].matchConditions: Too many: 65: must have at most 64 items"),
    ] {
        assert!(stdout.contains(&expected), "missing {expected}\nin {stdout}");
    }
}
