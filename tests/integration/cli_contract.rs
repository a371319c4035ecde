//! What scripts and CI pipelines may rely on: exit codes (0 allowed / valid, 1 denied /
//! refused, 2 error), `-o json|yaml`, errors on standard error without doubled prefixes,
//! `--config` taking several values, names as listen addresses.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::binary::{run, text, write, Served};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{mutating, validating, webhook, Fleet, MockWebhook};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_exits_0_when_allowed_1_when_denied_and_2_on_error() {
    let allow = MockWebhook::allowing().spawn().await;
    let deny = MockWebhook::denying("no").spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let allowing = write(
        dir.path(),
        "allow.yaml",
        &Fleet::of([validating("v", [webhook("a.example.com", &allow)])]).yaml(),
    );
    let denying = write(
        dir.path(),
        "deny.yaml",
        &Fleet::of([validating("v", [webhook("d.example.com", &deny)])]).yaml(),
    );
    let review = fixtures::path(POD_CREATE).display().to_string();

    let allowed = run(&["review", "--config", &allowing, &review]).await;
    let denied = run(&["review", "--config", &denying, &review]).await;
    let missing = run(&["review", "--config", &allowing, "/nonexistent/review.json"]).await;

    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed.stderr));
    assert_eq!(denied.status.code(), Some(1), "{}", text(&denied.stderr));
    assert_eq!(missing.status.code(), Some(2));
    let stderr = text(&missing.stderr);
    assert!(stderr.starts_with("error: cannot read /nonexistent/review.json"), "{stderr}");
    assert!(missing.stdout.is_empty(), "errors go to standard error only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_and_check_print_json_and_yaml() {
    let label = MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/team", "value": "x"}]))
        .spawn()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "fleet.yaml",
        &Fleet::of([mutating("m", [webhook("label.example.com", &label)])]).yaml(),
    );
    let review = fixtures::path(POD_CREATE).display().to_string();

    let json_out = run(&["review", "--config", &config, "-o", "json", &review]).await;
    let report: Value = serde_json::from_slice(&json_out.stdout).expect("review -o json prints JSON");
    assert_eq!(report["allowed"], json!(true));
    assert_eq!(report["patch"], json!([{"op": "add", "path": "/metadata/labels/team", "value": "x"}]));
    assert_eq!(report["explanation"][0]["step"], json!("called"));
    assert_eq!(report["explanation"][0]["webhook"], json!("label.example.com"));
    assert_eq!(report["response"]["response"]["uid"], json!(fixtures::uid(POD_CREATE)));

    let yaml_out = run(&["check", "--config", &config, "-o", "yaml"]).await;
    assert_eq!(yaml_out.status.code(), Some(0), "{}", text(&yaml_out.stderr));
    let check: Value = serde_norway::from_slice(&yaml_out.stdout).expect("check -o yaml prints YAML");
    assert_eq!(check["valid"], json!(true));
    assert_eq!(check["webhooks"]["mutating"], json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_takes_several_values_and_may_be_repeated() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let a =
        write(dir.path(), "a.yaml", &Fleet::of([validating("a", [webhook("a.example.com", &allow)])]).yaml());
    let b =
        write(dir.path(), "b.yaml", &Fleet::of([validating("b", [webhook("b.example.com", &allow)])]).yaml());
    let review = fixtures::path(POD_CREATE).display().to_string();

    let spaced = run(&["check", "--config", &a, &b]).await;
    let repeated = run(&["check", "--config", &a, "--config", &b]).await;
    let reviewed = run(&["review", "--config", &a, &b, &review]).await;

    for output in [&spaced, &repeated] {
        assert!(text(&output.stdout).contains("2 validating webhooks"), "{}", text(&output.stdout));
    }
    assert_eq!(reviewed.status.code(), Some(0), "{}", text(&reviewed.stderr));
    assert_eq!(allow.calls(), 2, "both configurations were loaded and the last value read as the review");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_every_problem_once_without_doubled_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n- name: a.example.com\n  clientConfig: {url: \"https://127.0.0.1:1/\"}\n  sideEffect: None\n  admissionReviewVersion: [v1]\n---\n- not an object\n",
    );

    let checked = run(&["check", "--config", &config]).await;
    let served = run(&["serve", "--config", &config, "--insecure-http", "--listen", "127.0.0.1:0"]).await;

    assert_eq!(checked.status.code(), Some(1));
    let stdout = text(&checked.stdout);
    for expected in [
        r#"webhooks[0].sideEffect: unknown field "sideEffect" (did you mean "sideEffects"?)"#,
        r#"webhooks[0].admissionReviewVersion: unknown field "admissionReviewVersion" (did you mean "admissionReviewVersions"?)"#,
        "bad.yaml: document 1: not a Kubernetes object",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not in:\n{stdout}");
    }
    assert!(!stdout.contains("\"\":"), "no empty object names:\n{stdout}");
    assert_eq!(served.status.code(), Some(2));
    let stderr = text(&served.stderr);
    assert!(stderr.contains("configuration refused with 3 error(s)"), "{stderr}");
    assert!(!stderr.contains("error: error:"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_configuration_is_an_error_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.yaml", "");

    let refused = run(&["check", "--config", &empty]).await;
    let allowed = run(&["check", "--config", &empty, "--allow-empty"]).await;

    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stdout).contains("holds no webhook"), "{}", text(&refused.stdout));
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_when_namespace_selectors_have_no_namespaces_to_read() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let picky =
        || webhook("picky.example.com", &allow).namespace_selector(json!({"matchLabels": {"env": "prod"}}));
    let without = write(dir.path(), "a.yaml", &Fleet::of([validating("v", [picky()])]).yaml());
    let with = write(
        dir.path(),
        "b.yaml",
        &Fleet::of([validating("v", [picky()])]).namespace("prod", &[("env", "prod")]).yaml(),
    );

    let warned = run(&["check", "--config", &without]).await;
    let quiet = run(&["check", "--config", &with]).await;

    assert_eq!(warned.status.code(), Some(0), "a warning, not an error");
    let stdout = text(&warned.stdout);
    assert!(
        stdout.contains(r#"warning: "#) && stdout.contains("no Namespace objects are configured"),
        "{stdout}"
    );
    assert!(stdout.contains(r#"webhook "picky.example.com""#), "{stdout}");
    assert!(!text(&quiet.stdout).contains("no Namespace objects"), "{}", text(&quiet.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_listens_on_a_name() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "fleet.yaml",
        &Fleet::of([validating("v", [webhook("a.example.com", &allow)])]).yaml(),
    );
    let mut served = Served::start(&[
        "serve",
        "--config",
        &config,
        "--insecure-http",
        "--listen",
        "localhost:0",
        "--metrics-listen",
        "localhost:0",
    ]);

    let address = served.logged("serving", "address").await;
    assert!(served.is_running(), "a name is a valid listen address");
    let address = address.expect("serving");
    assert!(address.starts_with("127.0.0.1:") || address.starts_with("[::1]:"), "{address}");
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_sends_every_fixture_and_removes_its_directory() {
    let output = run(&["demo", "--once", "--listen", "127.0.0.1:0"]).await;

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for fixture in std::fs::read_dir(fixtures::path(POD_CREATE).parent().unwrap()).unwrap() {
        let name = fixture.unwrap().file_name().to_string_lossy().into_owned();
        assert!(stdout.contains(&format!("POST /admit {name} ")), "{name} was not sent:\n{stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" ms): denied: admission webhook \"no-privileged.demo.example.com\"")),
        "the latency stands apart from the denial:\n{stdout}"
    );
    let directory = stdout
        .lines()
        .find_map(|line| line.split("(CA ").nth(1))
        .and_then(|rest| rest.strip_suffix(')'))
        .map(|ca| Path::new(ca).parent().unwrap().to_path_buf())
        .expect("the demo prints its CA path");
    assert!(!directory.exists(), "{} (holding a TLS key) was left behind", directory.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_names_the_webhook_whose_namespace_selector_needed_an_unknown_namespace() {
    let picky = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let selector = json!({"matchLabels": {"env": "prod"}});
    let fleet = Fleet::of([validating(
        "policy",
        [webhook("picky.example.com", &picky).namespace_selector(selector)],
    )])
    .namespace("prod", &[("env", "prod")]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["namespace"] = json!("ghost");
    let review = write(dir.path(), "review.json", &review.to_string());

    let output = run(&["review", "--config", &config, &review]).await;

    assert_eq!(output.status.code(), Some(1), "rejected 404, as the API server does");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("Validating round 0: not called policy/picky.example.com: request rejected before any call: namespaces \"ghost\" not found"),
        "the explanation blames the webhook, not \"no webhook matched\":\n{stdout}"
    );
    assert!(stdout.contains("add it as a v1 Namespace object"), "and says what to do:\n{stdout}");
    assert_eq!(picky.calls(), 0);
}
