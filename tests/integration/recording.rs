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

/// Every line of every recording file in `dir`, in the order written, compressed files
/// (`.jsonl.gz`) read through gzip.
fn recorded(dir: &std::path::Path) -> Vec<String> {
    let Ok(items) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<_> = items
        .map(|item| item.unwrap().path())
        .filter(|path| {
            let name = path.to_string_lossy();
            name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")
        })
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for file in files {
        let mut text = String::new();
        let Ok(opened) = std::fs::File::open(&file) else { continue }; // compressed meanwhile
        if file.extension().is_some_and(|e| e == "gz") {
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(opened), &mut text).unwrap();
        } else {
            std::io::Read::read_to_string(&mut std::io::BufReader::new(opened), &mut text).unwrap();
        }
        lines.extend(text.lines().map(String::from));
    }
    lines
}

/// The value of the metric line starting with `series`, if shown.
async fn metric(metrics_address: &str, series: &str) -> Option<u64> {
    let metrics = get(metrics_address, "/metrics").await;
    metrics.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// The binary serving `fleet` from `dir` with `extra` arguments: its admission and metrics
/// addresses.
async fn serve(dir: &std::path::Path, fleet: &Fleet, extra: &[&str]) -> (Served, String, String) {
    let served = Served::serve(dir, fleet, extra);
    let serving = served
        .next_line(|line| (line["fields"]["message"] == "serving").then_some(()))
        .await
        .expect("serving within 10 s");
    let field = |name: &str| serving["fields"][name].as_str().unwrap().to_owned();
    let (address, metrics_address) = (field("address"), field("metrics_address"));
    (served, address, metrics_address)
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

/// The `recording` section is hot-reloaded through the real binary: on into one directory,
/// moved to another with a filter, pointers and `dropUserInfo`, then off; each change served
/// once the reload is counted, without a restart, and nothing recorded before it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recording_section_is_reloaded_on_moved_and_off() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let fleet = |recording: Value| {
        let fleet = Fleet::of([validating(
            "pods",
            [webhook("allow.rec.example.com", &allow).rule(&["CREATE"], &["pods", "secrets"])],
        )]);
        if recording.is_null() {
            fleet
        } else {
            fleet.settings(json!({"recording": recording}))
        }
    };
    let (_served, address, metrics_address) =
        serve(dir.path(), &fleet(json!({"directory": first})), &[]).await;
    let reloads = r#"admission_gateway_config_reloads_total{result="success"}"#;
    let reconfigure = |recording: Value| {
        crate::support::binary::write(dir.path(), "fleet.yaml", &fleet(recording).yaml());
    };
    let reloaded = |count: u64| {
        let metrics_address = metrics_address.clone();
        async move {
            eventually(Duration::from_secs(10), || async {
                metric(&metrics_address, reloads).await == Some(count)
            })
            .await
        }
    };
    let pod = fixtures::review(POD_CREATE);
    let secret = fixtures::review(SECRET_CREATE);

    post(&address, "/validate", &pod).await;
    post(&address, "/validate", &pod).await;
    assert!(eventually(Duration::from_secs(10), || async { recorded(&first).len() == 2 }).await);

    // Moved, with a filter taking pods only, the image hashed and no userInfo.
    reconfigure(json!({
        "directory": second, "resources": ["pods"],
        "redactPointers": ["/spec/containers/0/image"], "dropUserInfo": true,
    }));
    assert!(reloaded(1).await, "the reload is counted within 10 s");
    post(&address, "/validate", &pod).await;
    post(&address, "/validate", &secret).await;
    post(&address, "/validate", &pod).await;
    assert!(eventually(Duration::from_secs(10), || async { recorded(&second).len() == 2 }).await);
    let lines = recorded(&second);
    let records: Vec<Value> = lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();
    let image = pod["request"]["object"]["spec"]["containers"][0]["image"].as_str().unwrap().to_owned();
    for record in &records {
        let request = &record["request"]["request"];
        assert_eq!(request["kind"]["kind"], "Pod", "the Secret is filtered out");
        assert_eq!(request.get("userInfo"), None);
        let recorded_image = request["object"]["spec"]["containers"][0]["image"].as_str().unwrap();
        assert!(recorded_image.starts_with("hmac-sha256:"), "{recorded_image}");
    }
    assert!(!lines.join("\n").contains(&image), "the value at the pointer is not in the file");
    assert_eq!(recorded(&first).len(), 2, "the first directory keeps what it was given");
    assert_eq!(
        metric(&metrics_address, r#"admission_gateway_recorded_reviews_total{result="skipped"}"#).await,
        Some(1)
    );

    // Off: nothing more is taken, and the last file is closed and compressed.
    reconfigure(Value::Null);
    assert!(reloaded(2).await);
    post(&address, "/validate", &pod).await;
    let compressed = || {
        std::fs::read_dir(&second).unwrap().all(|item| {
            let name = item.unwrap().file_name().into_string().unwrap();
            name == ".key" || name.ends_with(".jsonl.gz")
        })
    };
    assert!(eventually(Duration::from_secs(10), || async { compressed() }).await, "compressed once off");
    assert_eq!(recorded(&second).len(), 2);
    let readiness = get(&metrics_address, "/readyz?verbose").await;
    assert!(readiness.contains("[+]recording off (4 written)"), "{readiness}");
    let metrics = get(&metrics_address, "/metrics").await;
    assert!(metrics.contains("admission_gateway_recorded_reviews_total{result=\"dropped\"} 0"), "{metrics}");
}

/// A disk slower than the reviews (the test-only `--record-write-delay`: no small or slow
/// filesystem can be made without root) fills the queue: the entries beyond it are dropped and
/// counted, and every review is answered as if nothing were recorded. Latency is measured by
/// the load scenario `recording` (loadtest/README.md), not here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_drops_entries_counted_and_never_a_review() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("recording").to_string_lossy().into_owned();
    let fleet = Fleet::of([validating(
        "pods",
        [webhook("allow.rec.example.com", &allow).rule(&["CREATE"], &["pods"])],
    )]);
    let (_served, address, metrics_address) =
        serve(dir.path(), &fleet, &["--record", &record, "--record-write-delay", "1s"]).await;
    // More reviews than the queue (4096) and the writer's batch (256) hold, sixteen at a time,
    // each with the API server's deadline.
    const REVIEWS: usize = 4700;
    let body = bytes::Bytes::from(fixtures::review(POD_CREATE).to_string());
    let client = http_client();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut senders = Vec::new();
    for sender in 0..16 {
        let (client, body, address, answered) =
            (client.clone(), body.clone(), address.clone(), answered.clone());
        senders.push(tokio::spawn(async move {
            for _ in (sender..REVIEWS).step_by(16) {
                let request = http::Request::post(format!("http://{address}/validate?timeout=10s"))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let (status, text) = send(&client, request).await.expect("the binary answers");
                assert_eq!(status, 200, "{text}");
                let answer: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(answer["response"]["allowed"], true, "{text}");
                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    for sender in senders {
        sender.await.unwrap();
    }
    assert_eq!(answered.load(std::sync::atomic::Ordering::Relaxed), REVIEWS, "every review answered");
    let count = |result: &'static str| {
        let metrics_address = metrics_address.clone();
        async move {
            metric(
                &metrics_address,
                &format!("admission_gateway_recorded_reviews_total{{result=\"{result}\"}}"),
            )
            .await
            .unwrap_or(0)
        }
    };
    let (dropped, written, failed) = (count("dropped").await, count("written").await, count("failed").await);
    // At most the queue and the batch being written are not dropped.
    assert!(
        dropped as usize >= REVIEWS - 4096 - 256 - written as usize,
        "dropped {dropped}, written {written}"
    );
    assert_eq!(failed, 0);
    let webhook_calls = allow.calls();
    assert_eq!(webhook_calls, REVIEWS, "the fleet saw every review");
}

/// A recorder killed mid-line (a crash, a full disk) leaves its file plain, its last line cut
/// short. Started again on the directory, the recorder cuts that partial line before the file
/// is compressed and records on in a file of its own: no torn line is left in any file, and
/// the recording replays whole. Without the cut, the torn line stayed at the end of the
/// compressed file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_torn_by_a_crash_is_cut_when_recording_starts_again() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("recording");
    let argument = record.to_string_lossy().into_owned();
    let fleet = Fleet::of([validating(
        "pods",
        [webhook("allow.rec.example.com", &allow).rule(&["CREATE"], &["pods"])],
    )]);
    let pod = |uid: &str| {
        let mut review = fixtures::review(POD_CREATE);
        review["request"]["uid"] = json!(uid);
        review
    };

    let (served, address, _) = serve(dir.path(), &fleet, &["--record", &argument]).await;
    for uid in ["before-1", "before-2"] {
        post(&address, "/validate", &pod(uid)).await;
    }
    assert!(eventually(Duration::from_secs(10), || async { recorded(&record).len() == 2 }).await);
    drop(served); // SIGKILL: nothing closed, nothing compressed
    let plain: Vec<_> = std::fs::read_dir(&record)
        .unwrap()
        .map(|item| item.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".jsonl"))
        .collect();
    assert_eq!(plain.len(), 1, "{plain:?}");
    let whole = std::fs::read(&plain[0]).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(&whole[..whole.len() / 3]); // half a line, no newline
    std::fs::write(&plain[0], &torn).unwrap();

    let (_served, address, _) = serve(dir.path(), &fleet, &["--record", &argument]).await;
    for uid in ["after-1", "after-2"] {
        post(&address, "/validate", &pod(uid)).await;
    }
    // The old file compressed, whole lines only; the new one beside it.
    let settled = || {
        let lines = recorded(&record);
        let names: Vec<String> = std::fs::read_dir(&record)
            .unwrap()
            .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        lines.len() >= 4 && names.iter().any(|name| name.ends_with(".jsonl.gz"))
    };
    assert!(eventually(Duration::from_secs(10), || async { settled() }).await, "{:?}", recorded(&record));
    let uids: Vec<String> = recorded(&record)
        .iter()
        .map(|line| {
            let record: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("a torn line is left: {e}: {line}"));
            record["request"]["request"]["uid"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(uids, ["before-1", "before-2", "after-1", "after-2"]);
    for item in std::fs::read_dir(&record).unwrap() {
        let path = item.unwrap().path();
        if path.to_string_lossy().ends_with(".jsonl") {
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.last(), Some(&b'\n'), "{} ends with a whole line", path.display());
        }
    }
}
