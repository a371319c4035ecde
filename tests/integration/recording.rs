//! Recording (`serve --record DIR`, docs/operations.md "Recording reviews") through the real
//! binary: each answered review one JSON line with the request as received, the answer and each
//! webhook's outcome; a Secret's values unreadable in every file; the files private.

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::binary::Served;
use crate::support::fixtures::{self, POD_CREATE, SECRET_CREATE};
use crate::support::gateway::send;
use crate::support::{eventually, http_client, mutating, validating, webhook, Fleet, MockWebhook};

async fn post(address: &str, path: &str, review: &Value) -> Value {
    crate::support::binary::post_review(address, path, review).await
}

async fn get(address: &str, path: &str) -> String {
    let request =
        http::Request::get(format!("http://{address}{path}")).body(Full::new(Bytes::new())).unwrap();
    send(&http_client(), request).await.expect("the binary answers").1
}

/// Every line of every recording file in `dir`, in the order written.
fn recorded(dir: &std::path::Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|item| item.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|file| std::fs::read_to_string(file).unwrap().lines().map(String::from).collect::<Vec<_>>())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_reviews_are_recorded_with_a_secrets_values_unreadable() {
    // The mutating webhook also writes a Secret value of its own: the combined patch and the
    // patch audit annotation must not show it either.
    let label = MockWebhook::patching(json!([
        {"op": "add", "path": "/metadata/labels/checked", "value": "yes"},
        {"op": "add", "path": "/data/token", "value": "aW5qZWN0ZWQtdG9rZW4="},
    ]))
    .spawn()
    .await;
    let deny = MockWebhook::denying("secrets need an owner").spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("recording");
    let fleet = Fleet::of([
        mutating("labels", [webhook("label.rec.example.com", &label).rule(&["CREATE"], &["secrets"])]),
        validating("owners", [webhook("owner.rec.example.com", &deny).rule(&["CREATE"], &["secrets"])]),
    ])
    .settings(json!({"auditPatchAnnotations": true}));
    let record_arg = record.to_string_lossy().into_owned();
    let served = Served::serve(dir.path(), &fleet, &["--record", &record_arg]);
    let serving = served
        .next_line(|line| (line["fields"]["message"] == "serving").then_some(()))
        .await
        .expect("serving within 10 s");
    let field = |name: &str| serving["fields"][name].as_str().unwrap().to_owned();
    let (address, metrics_address) = (field("address"), field("metrics_address"));

    let pod = fixtures::review(POD_CREATE);
    let secret = fixtures::review(SECRET_CREATE);
    assert_eq!(post(&address, "/validate", &pod).await["response"]["allowed"], true);
    let mutated = post(&address, "/mutate", &secret).await;
    assert!(mutated["response"]["patch"].is_string());
    let denied = post(&address, "/validate", &secret).await;
    assert_eq!(denied["response"]["allowed"], false);

    let written = eventually(Duration::from_secs(10), || async { recorded(&record).len() == 3 }).await;
    let lines = recorded(&record);
    assert!(written, "three lines within 10 s: {lines:?}");

    // Nothing of the Secret's values, nor of the value a webhook wrote into it, in any file.
    let text = lines.join("\n");
    for secret_value in ["c3VwZXItc2VjcmV0LXBhc3N3b3Jk", "d2ViYXBw", "aW5qZWN0ZWQtdG9rZW4="] {
        assert!(!text.contains(secret_value), "{secret_value} recorded: {text}");
    }
    let records: Vec<Value> = lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();

    // The Pod: the request exactly as received, allowed, no webhook matched.
    assert_eq!(records[0]["endpoint"], "validate");
    assert_eq!(records[0]["request"], pod);
    assert_eq!(records[0]["answer"], json!({"allowed": true, "code": 200}));
    assert_eq!(records[0]["webhooks"], json!([]));

    // The Secret through /mutate: its values hashed (equal values equal), the rest as received;
    // the answer's patch and patch annotation with the written value hashed.
    let mutate = &records[1];
    assert_eq!(mutate["endpoint"], "mutate");
    let data = &mutate["request"]["request"]["object"]["data"];
    assert!(data["password"].as_str().unwrap().starts_with("hmac-sha256:"), "{data}");
    assert_ne!(data["password"], data["username"]);
    assert_eq!(mutate["request"]["request"]["object"]["metadata"], secret["request"]["object"]["metadata"]);
    assert_eq!(mutate["request"]["request"]["userInfo"], secret["request"]["userInfo"]);
    let answer = &mutate["answer"];
    assert_eq!(answer["allowed"], true);
    assert_eq!(answer["patch"][0], json!({"op": "add", "path": "/metadata/labels/checked", "value": "yes"}));
    assert_eq!(answer["patch"][1]["path"], "/data/token");
    assert!(answer["patch"][1]["value"].as_str().unwrap().starts_with("hmac-sha256:"));
    let annotations = answer["auditAnnotations"].as_object().unwrap();
    assert!(
        annotations.keys().any(|key| key.starts_with("patch.webhook.admission.k8s.io")),
        "{annotations:?}"
    );
    let webhook = &mutate["webhooks"][0];
    assert_eq!(
        (&webhook["name"], &webhook["phase"], &webhook["outcome"], &webhook["mutated"], &webhook["mode"]),
        (
            &json!("label.rec.example.com"),
            &json!("mutating"),
            &json!("allowed"),
            &json!(true),
            &json!("enforce")
        )
    );

    // The Secret through /validate: denied, with the message and the webhook's code.
    let validate = &records[2];
    assert_eq!(validate["request"]["request"]["object"]["data"], *data, "the same values hash the same");
    assert_eq!(validate["answer"]["allowed"], false);
    assert_eq!(validate["answer"]["code"], 400);
    let message = validate["answer"]["message"].as_str().unwrap();
    assert!(message.contains("secrets need an owner"), "{message}");
    assert_eq!(validate["webhooks"][0]["outcome"], "denied");

    // Private files, and what the server says of them.
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&record), 0o700);
    for item in std::fs::read_dir(&record).unwrap() {
        let path = item.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{path:?}");
    }
    let readiness = get(&metrics_address, "/readyz?verbose").await;
    assert!(readiness.contains("[+]recording ok (3 written)"), "{readiness}");
    let metrics = get(&metrics_address, "/metrics").await;
    assert!(metrics.contains("admission_gateway_recorded_reviews_total{result=\"written\"} 3"), "{metrics}");
    assert!(metrics.contains("admission_gateway_recorded_reviews_total{result=\"dropped\"} 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_directory_that_cannot_be_made_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let target = blocker.join("recording");
    let target = target.to_string_lossy().into_owned();
    let output = crate::support::binary::run(&[
        "serve",
        "--config",
        "/nonexistent-but-unread.yaml",
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--record",
        &target,
    ])
    .await;
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot create the recording directory"), "{stderr}");
}
