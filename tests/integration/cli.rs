//! The real binary: `check`, `review` and `serve`.

use std::path::Path;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::binary::{run, text, write, Served};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{http_client, mutating, validating, webhook, Fleet, MockWebhook};

fn write_fleet(dir: &Path, fleet: &Fleet) -> String {
    write(dir, "fleet.yaml", &fleet.yaml())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_accepts_a_valid_configuration() {
    let mock = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_fleet(
        dir.path(),
        &Fleet::of([
            mutating("m", [webhook("m.example.com", &mock)]),
            validating("v", [webhook("v.example.com", &mock)]),
        ])
        .namespace("team-a", &[("env", "prod")]),
    );

    let output = run(&["check", "--config", &config]).await;

    assert!(output.status.success(), "{}", text(&output.stdout));
    assert!(
        text(&output.stdout)
            .contains("configuration is valid: 1 mutating and 1 validating webhooks, 1 namespaces"),
        "{}",
        text(&output.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_file_object_webhook_and_field_of_every_problem() {
    let mock = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_fleet(
        dir.path(),
        &Fleet::of([validating(
            "limits",
            [
                webhook("fine.example.com", &mock),
                webhook("slow.example.com", &mock).timeout_seconds(31),
                webhook("odd.example.com", &mock).set("failurePolicy", json!("Sometimes")),
            ],
        )]),
    );

    let output = run(&["check", "--config", &config]).await;

    assert!(!output.status.success());
    let stdout = text(&output.stdout);
    let timeout_line = stdout
        .lines()
        .find(|line| line.contains("timeoutSeconds"))
        .unwrap_or_else(|| panic!("no timeoutSeconds problem in:\n{stdout}"));
    for part in [
        config.as_str(),
        r#"ValidatingWebhookConfiguration "limits""#,
        r#"webhook "slow.example.com""#,
        "webhooks[1].timeoutSeconds",
        "31",
    ] {
        assert!(timeout_line.contains(part), "{part:?} not in {timeout_line:?}");
    }
    let policy_line = stdout
        .lines()
        .find(|line| line.contains("failurePolicy"))
        .unwrap_or_else(|| panic!("no failurePolicy problem in:\n{stdout}"));
    assert!(
        policy_line.contains(r#"webhook "odd.example.com""#)
            && policy_line.contains("webhooks[2].failurePolicy")
            && policy_line.contains(r#""Sometimes""#),
        "{policy_line}"
    );
    assert!(stdout.contains("configuration refused: 2 error(s)"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_prints_the_trace_and_the_response() {
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/team", "value": "payments"}]))
            .spawn()
            .await;
    let check = MockWebhook::allowing().spawn().await;
    let skipped = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_fleet(
        dir.path(),
        &Fleet::of([
            mutating("labels", [webhook("label.example.com", &label)]),
            validating(
                "checks",
                [
                    webhook("check.example.com", &check),
                    webhook("canary.example.com", &skipped)
                        .object_selector(json!({"matchLabels": {"track": "canary"}})),
                ],
            ),
        ]),
    );
    let fixture = fixtures::path(POD_CREATE).display().to_string();

    let output = run(&["review", "--config", &config, "--stage", "admit", &fixture]).await;

    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    let uid = fixtures::uid(POD_CREATE);
    for expected in
        [format!("== /admit {uid}: allowed"), "mutation.webhook.admission.k8s.io/round_0_index_0".to_owned()]
    {
        assert!(stdout.contains(&expected), "{expected:?} not in:\n{stdout}");
    }
    // Each call: its timeout and latency in parentheses, then the outcome alone.
    for (call, outcome) in [
        ("Mutating round 0: call labels/label.example.com (timeout=10s, ", " ms, object changed): allowed"),
        ("Validating round 0: call checks/check.example.com (timeout=10s, ", " ms): allowed"),
    ] {
        assert!(
            stdout.lines().any(|line| line.trim_start().starts_with(call) && line.ends_with(outcome)),
            "{call:?}…{outcome:?} not in:\n{stdout}"
        );
    }
    // The patch a call applied, as the audit annotation would hold it.
    let patch = r#"patch: [{"op":"add","path":"/metadata/labels/team","value":"payments"}]"#;
    assert!(stdout.lines().any(|line| line.trim_start() == patch), "{patch:?} not in:\n{stdout}");
    assert!(
        stdout.contains(
            "Validating round 0: skip checks/canary.example.com: objectSelector matches neither object nor oldObject"
        ),
        "the trace says why a webhook was skipped:\n{stdout}"
    );
    let response: Value = serde_json::from_str(
        stdout.split("-- response\n").nth(1).unwrap_or_else(|| panic!("no response in:\n{stdout}")),
    )
    .expect("the response is JSON");
    assert_eq!(response["response"]["uid"], json!(uid));
    assert_eq!(response["response"]["allowed"], json!(true));
    assert_eq!(response["response"]["patchType"], json!("JSONPatch"));
    assert_eq!((label.calls(), check.calls(), skipped.calls()), (1, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_a_review_over_plain_http() {
    let deny = MockWebhook::denying("served by the binary").spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Served::serve(
        dir.path(),
        &Fleet::of([validating("fleet", [webhook("deny.example.com", &deny)])]),
        &[],
    );

    let address =
        server.logged("serving", "address").await.expect("a \"serving\" line with address= within 10 s");
    let request = http::Request::post(format!("http://{address}/validate"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(fixtures::review(POD_CREATE).to_string())))
        .unwrap();
    let (status, body) = send(&http_client(), request).await.expect("the binary answers");

    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["uid"], json!(fixtures::uid(POD_CREATE)));
    assert_eq!(answer["response"]["allowed"], json!(false));
    assert_eq!(
        answer["response"]["status"]["message"],
        json!(r#"admission webhook "deny.example.com" denied the request: served by the binary"#)
    );
    assert_eq!(deny.calls(), 1);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_traces_webhooks_skipped_by_their_rules() {
    let secrets = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_fleet(
        dir.path(),
        &Fleet::of([validating(
            "checks",
            [webhook("secrets.example.com", &secrets).rule(&["*"], &["secrets"])],
        )]),
    );
    let fixture = fixtures::path(POD_CREATE).display().to_string();

    let output = run(&["review", "--config", &config, &fixture]).await;

    let stdout = text(&output.stdout);
    assert!(stdout.contains("skip checks/secrets.example.com: no rule matches"), "{stdout}");
}

/// The demo's fleet is a template (`${FLEET_URL}`, `${CA_BUNDLE}`): checked as it is, every
/// webhook's URL and caBundle are refused, and a note says why, once for the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_of_a_template_says_its_placeholders_were_never_filled_in() {
    let template = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo/fleet.yaml");
    let output = run(&["check", "--config", template]).await;
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    let notes: Vec<&str> = stdout.lines().filter(|line| line.starts_with("note: ")).collect();
    assert_eq!(
        notes,
        [format!(
            "note: {template} holds placeholders never filled in (${{CA_BUNDLE}}, ${{FLEET_URL}}): a template? \
             (`admission-gateway demo` fills config/demo/fleet.yaml's)"
        )],
        "{stdout}"
    );
    // A refused file without placeholders gets no note.
    let dir = tempfile::tempdir().unwrap();
    let plain = crate::support::binary::write(dir.path(), "broken.yaml", "kind: Nothing\n");
    let output = run(&["check", "--config", &plain]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(!text(&output.stdout).contains("note: "), "{}", text(&output.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reads_the_openapi_documents_it_is_given_and_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let document = json!({"openapi": "3.0.0", "components": {"schemas": {"com.example.v1.Widget": {
        "type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
        "properties": {"spec": {"type": "object"}}}}}});
    write(dir.path(), "widgets.json", &document.to_string());
    let fleet = |documents: Value| Fleet::default().settings(json!({"openAPIDocuments": documents})).yaml();
    let config = write(dir.path(), "fleet.yaml", &fleet(json!(["widgets.json"])));
    let output = run(&["check", "--allow-empty", "--config", &config]).await;
    assert!(output.status.success(), "{}", text(&output.stdout));
    let widgets = dir.path().join("widgets.json");
    assert!(
        text(&output.stdout).contains(&format!("schemas of example.com/v1 from {}", widgets.display())),
        "{}",
        text(&output.stdout)
    );

    let config = write(dir.path(), "fleet.yaml", &fleet(json!(["widgets.json", "gone.json"])));
    let output = run(&["check", "--allow-empty", "--config", &config]).await;
    assert!(!output.status.success(), "{}", text(&output.stdout));
    assert!(
        text(&output.stdout).contains("openAPIDocuments[1]: Invalid value: \"gone.json\""),
        "{}",
        text(&output.stdout)
    );
}
