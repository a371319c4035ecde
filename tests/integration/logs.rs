//! Logs of the real binary (docs/operations.md, "Logs"): one JSON object a line on standard error, one
//! `review answered` line per review with its decision and each webhook's part, request values
//! escaped and cut, and never an object or a patch.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::binary::{text, write, Served, BINARY};
use crate::support::fixtures::{self, POD_CREATE, SECRET_CREATE};
use crate::support::gateway::send;
use crate::support::{http_client, mutating, validating, webhook, Fleet, MockWebhook};

/// The binary serving `fleet` over plain HTTP, and its address (from its JSON log).
async fn serve(dir: &std::path::Path, fleet: &Fleet, extra: &[&str]) -> (Served, String) {
    let served = Served::serve(dir, fleet, extra);
    let address = served.logged("serving", "address").await.expect("serving within 10 s");
    (served, address)
}

async fn post(address: &str, path: &str, review: &Value) -> Value {
    crate::support::binary::post_review(address, path, review).await
}

/// The next `review answered` line.
async fn review_line(served: &Served) -> Value {
    served
        .next_line(|line| (line["fields"]["message"] == "review answered").then_some(()))
        .await
        .expect("a review line within 10 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_review_is_one_json_line_with_its_decision_and_webhooks() {
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/checked", "value": "yes"}]))
            .spawn()
            .await;
    let deny = MockWebhook::denying("secrets need an owner").spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([
        mutating(
            "labels",
            [webhook("label.logs.example.com", &label).rule(&["CREATE"], &["pods", "secrets"])],
        ),
        validating("owners", [webhook("owner.logs.example.com", &deny).rule(&["CREATE"], &["secrets"])]),
    ]);
    let (served, address) = serve(dir.path(), &fleet, &[]).await;

    let secret = fixtures::review(SECRET_CREATE);
    let mutated = post(&address, "/mutate", &secret).await;
    assert!(mutated["response"]["patch"].is_string());
    let line = review_line(&served).await;
    let fields = &line["fields"];
    assert_eq!(line["level"], "INFO");
    assert_eq!(fields["uid"], json!(fixtures::uid(SECRET_CREATE)));
    assert_eq!(fields["stage"], "mutate");
    assert_eq!(fields["operation"], "CREATE");
    assert_eq!(fields["resource"], "secrets");
    assert_eq!(fields["namespace"], "team-a");
    assert_eq!(fields["name"], "db-credentials");
    assert_eq!(fields["allowed"], true);
    assert_eq!(fields["mutated"], true);
    assert!(fields["total_ms"].as_f64().unwrap() >= fields["gateway_ms"].as_f64().unwrap());
    for field in ["total_ms", "gateway_ms"] {
        let shown = fields[field].to_string();
        assert!(shown.split('.').nth(1).is_none_or(|decimals| decimals.len() <= 3), "{field}: {shown}");
    }
    let webhooks = fields["webhooks"].as_str().unwrap();
    assert!(webhooks.starts_with("mutating/label.logs.example.com#0 allowed mutated 200 "), "{webhooks}");

    let denied = post(&address, "/validate", &secret).await;
    assert_eq!(denied["response"]["allowed"], false);
    let line = review_line(&served).await;
    assert_eq!(line["fields"]["allowed"], false);
    assert_eq!(line["fields"]["code"], 400);
    let webhooks = line["fields"]["webhooks"].as_str().unwrap();
    assert!(webhooks.starts_with("validating/owner.logs.example.com#0 denied 400 "), "{webhooks}");
    assert!(webhooks.ends_with(" rejected"), "{webhooks}");

    // Nothing of the Secret's data, nor the patch, nor the webhook's message reached the log.
    let rest = served.drain_lines(Duration::from_millis(300)).await;
    let everything = format!("{line}\n{}", rest.join("\n"));
    for secret_value in
        ["c3VwZXItc2VjcmV0LXBhc3N3b3Jk", "d2ViYXBw", "super-secret", "checked", "secrets need an owner"]
    {
        assert!(!everything.contains(secret_value), "{secret_value:?} logged:\n{everything}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_request_values_cannot_forge_or_flood_log_lines() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let (served, address) = serve(
        dir.path(),
        &Fleet::of([validating("fleet", [webhook("allow.logs.example.com", &allow)])]),
        &[],
    )
    .await;

    let mut review = fixtures::review(POD_CREATE);
    let forged = "x\n{\"level\":\"INFO\",\"fields\":{\"message\":\"forged\"}}";
    review["request"]["name"] = json!(forged);
    review["request"]["namespace"] = json!("n".repeat(1 << 20));
    post(&address, "/validate", &review).await;

    let line = review_line(&served).await;
    let name = line["fields"]["name"].as_str().unwrap();
    assert_eq!(name, forged.replace('\n', "\\n"), "escaped, not a second line");
    let namespace = line["fields"]["namespace"].as_str().unwrap();
    assert!(
        namespace.len() < 300 && namespace.ends_with(&format!("…(+{} bytes)", (1 << 20) - 256)),
        "{namespace}"
    );
    // A malformed review's reason is cut too (it quotes the input).
    let request = http::Request::post(format!("http://{address}/validate"))
        .body(Full::new(Bytes::from(format!("{{\"kind\": \"{}\n", "A".repeat(100_000)))))
        .unwrap();
    let (status, _) = send(&http_client(), request).await.unwrap();
    assert_eq!(status, 400);
    let rest = served.drain_lines(Duration::from_millis(500)).await;
    assert!(
        rest.iter().all(|line| line.len() < 2048),
        "a line of {} bytes",
        rest.iter().map(String::len).max().unwrap_or(0)
    );
    assert!(rest.iter().all(|line| serde_json::from_str::<Value>(line).is_ok()), "{rest:?}");
    assert!(!rest.iter().any(|line| line.contains("\"forged\"")), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_format_and_level_are_flags() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let (dead, _) = crate::support::closed_port_url();
    let fleet = Fleet::of([validating(
        "fleet",
        [
            webhook("allow.text.logs.example.com", &allow),
            crate::support::webhook_at("dead.text.logs.example.com", &dead).ignore(),
        ],
    )]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());

    // A bad level is a usage error naming the flag (RUST_LOG unset: it would win).
    let bad = std::process::Command::new(BINARY)
        .args(["check", "--config", &config, "--log-level", "info,=="])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("--log-level \"info,==\": invalid filter directive"),
        "{}",
        text(&bad.stderr)
    );

    // At warn (but the start-up lines, to learn the address), no per-review line.
    let (served, address) =
        serve(dir.path(), &fleet, &["--log-level", "warn,admission_gateway::app=info"]).await;
    post(&address, "/validate", &fixtures::review(POD_CREATE)).await;
    let lines = served.drain_lines(Duration::from_millis(500)).await;
    assert!(!lines.iter().any(|line| line.contains("review answered")), "{lines:?}");
    drop(served);

    // Text: key=value lines for people, the same review line.
    let served = Served::serve(dir.path(), &fleet, &["--log-format", "text"]);
    let started = served.drain_lines(Duration::from_secs(3)).await;
    let serving =
        started.iter().find(|line| line.contains(" serving ")).unwrap_or_else(|| panic!("{started:#?}"));
    assert!(!serving.starts_with('{') && serving.contains(" INFO "), "{serving}");
    let address = serving.split_whitespace().find_map(|f| f.strip_prefix("address=")).unwrap().to_owned();
    post(&address, "/validate", &fixtures::review(POD_CREATE)).await;
    let lines = served.drain_lines(Duration::from_millis(500)).await;
    let line =
        lines.iter().find(|line| line.contains("review answered")).unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(
        line.contains(&format!("uid={}", fixtures::uid(POD_CREATE))) && line.contains("allowed=true"),
        "{line}"
    );
    // A line written while the review was judged ends with the review.
    let failed =
        lines.iter().find(|line| line.contains("webhook call ")).unwrap_or_else(|| panic!("{lines:#?}"));
    let review = format!("admission_review{{uid={} stage=validate generation=", fixtures::uid(POD_CREATE));
    assert!(failed.contains(" WARN ") && failed.contains(&review) && failed.ends_with('}'), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_webhook_logs_its_ejection_once_not_every_review() {
    let dir = tempfile::tempdir().unwrap();
    let (dead, _) = crate::support::closed_port_url();
    let fleet =
        Fleet::of([validating("v", [crate::support::webhook_at("dead.logs.example.com", &dead).ignore()])])
            .settings(json!({"ejectAfterFailures": 2, "ejectFor": "5m"}));
    let (served, address) = serve(dir.path(), &fleet, &[]).await;

    for _ in 0..8 {
        post(&address, "/validate", &fixtures::review(POD_CREATE)).await;
    }
    let lines = served.drain_lines(Duration::from_millis(500)).await;
    let warnings: Vec<&String> = lines.iter().filter(|line| line.contains("\"level\":\"WARN\"")).collect();
    assert_eq!(warnings.len(), 3, "two failed calls and one ejection: {warnings:#?}");
    assert_eq!(warnings.iter().filter(|line| line.contains("webhook ejected")).count(), 1, "{warnings:#?}");
    // Written while a review was judged: each says which review (docs/operations.md, "Logs").
    for line in &warnings {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["span"]["uid"], json!(fixtures::uid(POD_CREATE)), "{line}");
        assert_eq!(
            (&line["span"]["stage"], &line["span"]["name"]),
            (&json!("validate"), &json!("admission_review"))
        );
        assert!(line["span"]["generation"].is_u64(), "{line}");
    }
    assert_eq!(lines.iter().filter(|line| line.contains("review answered")).count(), 8);
}
