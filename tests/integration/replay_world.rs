//! A recording carries the world its decisions saw (docs/operations.md, "Replaying a
//! recording"): the namespace labels the webhooks and policies read, the caller's timeout and
//! the recording's redaction settings. Replayed against the fleet's manifests alone, as a fleet
//! sits in git, with no Namespace objects and no cluster, every decision comes out as it was
//! recorded: in static mode, and in cluster mode against a real kube-apiserver. A mutating
//! policy's turns and patches are recorded and replayed as a webhook's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::binary::{post_review, run, text, write, Served};
use crate::support::control_plane::{ControlPlane, Identity};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::mock_webhook::Mock;
use crate::support::{eventually, mutating, reply, validating, webhook, Fleet, MockWebhook};

const PROD_ONLY: &str = "prod-only.world.example.com";
const TOKEN: &str = "token.world.example.com";
const SLOW: &str = "slow.world.example.com";

/// A pod CREATE review named `name` in `namespace`, with a uid of its own.
fn pod(namespace: &str, name: &str) -> Value {
    let mut review = fixtures::review(POD_CREATE);
    let request = &mut review["request"];
    request["uid"] = json!(format!("uid-{namespace}-{name}"));
    request["name"] = json!(name);
    request["namespace"] = json!(namespace);
    request["object"]["metadata"]["name"] = json!(name);
    request["object"]["metadata"]["namespace"] = json!(namespace);
    review
}

/// Five pods in each of `prod` and `dev`, two of each named `bad-*`.
fn pods() -> Vec<Value> {
    let names = ["web-1", "web-2", "web-3", "bad-1", "bad-2"];
    ["prod", "dev"].iter().flat_map(|namespace| names.iter().map(move |name| pod(namespace, name))).collect()
}

/// Denies `bad-*` pods: a webhook that only prod namespaces send to.
async fn strict() -> Mock {
    MockWebhook::answering(|review| {
        let name = review["request"]["name"].as_str().unwrap_or_default();
        match name.starts_with("bad-") {
            true => reply::deny(review, "bad pods are not allowed in prod"),
            false => reply::allow(review),
        }
    })
    .spawn()
    .await
}

/// The fleet: the strict webhook for `tier: prod` namespaces, and a policy denying `bad-*` pods
/// in `tier: dev` namespaces (its namespaceSelector read from the same lookup).
fn fleet(strict: &Mock) -> Fleet {
    fleet_denying(strict, "!object.metadata.name.startsWith('bad-')")
}

/// The fleet, its policy allowing what `expression` allows.
fn fleet_denying(strict: &Mock, expression: &str) -> Fleet {
    Fleet::of([validating(
        "tiers",
        [webhook(PROD_ONLY, strict)
            .rule(&["CREATE"], &["pods"])
            .namespace_selector(json!({"matchLabels": {"tier": "prod"}}))],
    )])
    .object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "dev-names"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                }],
                "namespaceSelector": {"matchLabels": {"tier": "dev"}},
            },
            "validations": [{
                "expression": expression,
                "message": "bad pods are not allowed in dev",
            }],
        },
    }))
    .object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "dev-names"},
        "spec": {"policyName": "dev-names", "validationActions": ["Deny"]},
    }))
}

/// `reviews` sent to `served` (recording into `DIR/recording`) at `path`; their answers, and
/// the recording's lines once every one is written.
async fn record(served: Served, dir: &Path, path: &str, reviews: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let recording = dir.join("recording");
    let address = served.logged("serving", "address").await.expect("serving within 10 s");
    let mut answers = Vec::new();
    for review in reviews {
        answers.push(post_review(&address, path, review).await);
    }
    let lines = || -> Vec<Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&recording)
            .map(|items| items.flatten().map(|item| item.path()).collect())
            .unwrap_or_default();
        files.retain(|path| {
            path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("reviews-"))
        });
        files.sort();
        files
            .iter()
            .flat_map(|path| {
                std::fs::read_to_string(path)
                    .unwrap_or_default()
                    .lines()
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .filter_map(|line| serde_json::from_str(&line).ok())
            .collect()
    };
    let written = eventually(Duration::from_secs(10), || async { lines().len() == reviews.len() }).await;
    assert!(written, "{} of {} reviews recorded within 10 s", lines().len(), reviews.len());
    drop(served);
    (answers, lines())
}

/// The pods sent at `path` through the fleet with its Namespace objects (static mode), recorded
/// into `DIR/recording`: their answers, the recording's lines, and its directory.
async fn record_static(dir: &Path, strict: &Mock, path: &str) -> (Vec<Value>, Vec<Value>, PathBuf) {
    let recorded_fleet =
        fleet(strict).namespace("prod", &[("tier", "prod")]).namespace("dev", &[("tier", "dev")]);
    let recording = dir.join("recording");
    let served = Served::serve(dir, &recorded_fleet, &["--record", recording.to_str().unwrap()]);
    let (answers, lines) = record(served, dir, path, &pods()).await;
    (answers, lines, recording)
}

/// How many of `answers` deny.
fn denied(answers: &[Value]) -> usize {
    answers.iter().filter(|answer| answer["response"]["allowed"] == false).count()
}

/// `replay ARGS… -o json`: the exit code and the report.
async fn replay_json(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["replay"];
    all.extend(args);
    all.extend(["-o", "json"]);
    let output = run(&all).await;
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", text(&output.stdout), text(&output.stderr)));
    (output.status.code(), report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_replays_with_the_namespaces_it_saw_and_none_configured() {
    let dir = tempfile::tempdir().unwrap();
    let strict = strict().await;
    let (answers, lines, recording) = record_static(dir.path(), &strict, "/validate?timeout=7s").await;
    assert_eq!(denied(&answers), 4, "the bad pods of both tiers: {answers:?}");
    for line in &lines {
        let namespace = line["request"]["request"]["namespace"].as_str().unwrap();
        let world = &line["world"];
        assert_eq!(world["namespace"]["name"], namespace, "{line}");
        assert_eq!(world["namespace"]["labels"]["tier"], namespace, "the labels the selectors read: {line}");
        assert_eq!(world["timeout"], "7s", "{line}");
        assert!(world.get("redaction").is_none(), "nothing redacted beyond Secrets: {line}");
    }

    // The fleet as it sits in git: no Namespace objects.
    let config = write(dir.path(), "manifests.yaml", &fleet(&strict).yaml());
    let calls_before = strict.calls();
    let (code, report) = replay_json(&[recording.to_str().unwrap(), "--config", &config]).await;
    assert_eq!((report["total"].as_u64(), report["agree"].as_u64()), (Some(10), Some(10)), "{report:#}");
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(strict.calls() - calls_before, 5, "the prod pods, and only they, went to the prod webhook");

    // The configuration's world instead: no such namespaces, so every review fails on them.
    let (code, report) =
        replay_json(&[recording.to_str().unwrap(), "--config", &config, "--world", "config"]).await;
    assert_eq!(report["disagree"].as_u64(), Some(10), "{report:#}");
    assert_eq!(code, Some(1));
    // And with Namespace objects that say otherwise, the recorded world still wins by default.
    let swapped = write(
        dir.path(),
        "swapped.yaml",
        &fleet(&strict).namespace("prod", &[("tier", "dev")]).namespace("dev", &[("tier", "prod")]).yaml(),
    );
    let (code, report) = replay_json(&[recording.to_str().unwrap(), "--config", &swapped]).await;
    assert_eq!((code, report["disagree"].as_u64()), (Some(0), Some(0)), "{report:#}");
    let (code, report) =
        replay_json(&[recording.to_str().unwrap(), "--config", &swapped, "--world", "config"]).await;
    assert_eq!(
        (code, report["disagree"].as_u64()),
        (Some(1), Some(4)),
        "the bad pods swap denials: {report:#}"
    );
}

/// Slower than the caller's timeout, for pods labelled `slow: "true"`.
fn slow_hook(slow: &Mock) -> crate::support::gateway::Webhook {
    webhook(SLOW, slow).rule(&["CREATE"], &["pods"]).object_selector(json!({"matchLabels": {"slow": "true"}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_timeout_and_the_redaction_settings_are_replayed() {
    let dir = tempfile::tempdir().unwrap();
    // Writes a token at a redacted pointer; a webhook slower than the caller's timeout fails
    // the review (failurePolicy Fail) once the deadline budget is spent.
    let token = MockWebhook::patching(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"token": "s3cret-value"}},
    ]))
    .spawn()
    .await;
    let slow = MockWebhook::allowing().after(Duration::from_millis(2500)).spawn().await;
    let recorded_fleet = Fleet::of([
        mutating("tokens", [webhook(TOKEN, &token).rule(&["CREATE"], &["pods"])]),
        validating("slow", [slow_hook(&slow)]),
    ])
    .settings(json!({"recording": {"redactPointers": ["/metadata/annotations/token"]}}));
    let recording = dir.path().join("recording");
    let served = Served::serve(dir.path(), &recorded_fleet, &["--record", recording.to_str().unwrap()]);
    let mut late = pod("default", "web-2");
    late["request"]["object"]["metadata"]["labels"]["slow"] = json!("true");
    let reviews = [pod("default", "web-1"), late];
    let (answers, lines) = record(served, dir.path(), "/admit?timeout=2s", &reviews).await;
    assert_eq!(denied(&answers), 1, "the deadline passed on the slow one: {answers:?}");
    let line = &lines[0];
    assert!(!line.to_string().contains("s3cret-value"), "redacted on disk: {line}");
    assert_eq!(line["world"]["timeout"], "2s", "{line}");
    assert_eq!(
        line["world"]["redaction"]["redactPointers"],
        json!(["/metadata/annotations/token"]),
        "{line}"
    );
    assert!(line["world"].get("namespace").is_none(), "nothing read the namespace: {line}");
    assert!(line["answer"]["patch"].to_string().contains("hmac-sha256:"), "{line}");
    assert_eq!(lines[1]["webhooks"][1]["outcome"], "error", "the slow webhook timed out: {}", lines[1]);

    // The same manifests, no settings: the recorded pointers and deadline still apply.
    let config = write(
        dir.path(),
        "manifests.yaml",
        &Fleet::of([
            mutating("tokens", [webhook(TOKEN, &token).rule(&["CREATE"], &["pods"])]),
            validating("slow", [slow_hook(&slow)]),
        ])
        .yaml(),
    );
    let output = run(&["replay", recording.to_str().unwrap(), "--config", &config, "-o", "json"]).await;
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((report["total"].as_u64(), report["agree"].as_u64()), (Some(2), Some(2)), "{report:#}");
    assert_eq!(output.status.code(), Some(0));
    assert!(!text(&output.stdout).contains("s3cret-value") && !text(&output.stderr).contains("s3cret-value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_made_in_cluster_mode_replays_without_the_cluster() {
    let cluster = ControlPlane::start().await;
    cluster.kubectl_ok(Identity::Admin, &["create", "namespace", "admission-gateway"]).await;
    let rbac = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml");
    cluster
        .kubectl_ok(Identity::Admin, &["apply", "-n", "admission-gateway", "-f", rbac.to_str().unwrap()])
        .await;
    for (namespace, tier) in [("prod", "tier=prod"), ("dev", "tier=dev")] {
        cluster.kubectl_ok(Identity::Admin, &["create", "namespace", namespace]).await;
        cluster.kubectl_ok(Identity::Admin, &["label", "namespace", namespace, tier]).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let strict = strict().await;
    let recording = dir.path().join("recording");
    let kubeconfig = cluster.kubeconfig(Identity::Gateway);
    let served = Served::serve(
        dir.path(),
        &fleet(&strict),
        &["--record", recording.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()],
    );
    // And a namespace the API server does not know: its 404, recorded as such.
    let mut reviews = pods();
    reviews.push(pod("ghost", "web-1"));
    let (answers, lines) = record(served, dir.path(), "/validate?timeout=10s", &reviews).await;
    assert_eq!(denied(&answers), 5, "the bad pods of both tiers, and the ghost's: {answers:?}");
    let ghost =
        lines.iter().find(|line| line["world"]["namespace"]["name"] == "ghost").expect("the ghost review");
    assert_eq!(ghost["world"]["namespace"]["notFound"], "cluster", "{ghost}");
    let message = ghost["answer"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#"namespaces "ghost" not found"#), "{ghost}");

    let config = write(dir.path(), "manifests.yaml", &fleet(&strict).yaml());
    let (code, report) = replay_json(&[recording.to_str().unwrap(), "--config", &config]).await;
    assert_eq!((report["total"].as_u64(), report["agree"].as_u64()), (Some(11), Some(11)), "{report:#}");
    assert_eq!(code, Some(0), "{report:#}");

    // `--kube`: the live cluster instead, relabelled since: the swapped tiers swap the denials.
    cluster.kubectl_ok(Identity::Admin, &["label", "--overwrite", "namespace", "prod", "tier=dev"]).await;
    let (code, report) = replay_json(&[
        recording.to_str().unwrap(),
        "--config",
        &config,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
    .await;
    assert_eq!(
        report["disagree"].as_u64(),
        Some(2),
        "prod's bad pods now meet the dev policy's message: {report:#}"
    );
    assert_eq!(code, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_are_recorded_and_compared_like_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let strict = strict().await;
    let (_, lines, recording) = record_static(dir.path(), &strict, "/validate").await;
    let turn = |line: &Value, kind: Option<&str>, name: &str| -> Option<Value> {
        let calls = line["webhooks"].as_array().unwrap();
        calls.iter().find(|call| call["name"] == name && call["kind"].as_str() == kind).cloned()
    };
    for line in &lines {
        let request = &line["request"]["request"];
        let (namespace, name) = (request["namespace"].as_str().unwrap(), request["name"].as_str().unwrap());
        let policy = turn(line, Some("policy"), "dev-names");
        let webhook = turn(line, None, PROD_ONLY);
        match namespace {
            // The policy acts on dev pods only, as the webhook on prod pods only.
            "dev" => {
                let policy = policy.unwrap_or_else(|| panic!("the policy's turn: {line}"));
                let expected = if name.starts_with("bad-") { "denied" } else { "allowed" };
                assert_eq!(policy["outcome"], expected, "{line}");
                assert!(policy.get("configuration").is_none(), "{line}");
                assert!(webhook.is_none(), "{line}");
            }
            _ => {
                assert!(policy.is_none(), "{line}");
                assert!(webhook.is_some(), "{line}");
            }
        }
    }

    // A candidate policy that lets `bad-2` through: seen by --only-policy, not --only-webhook.
    let candidate = write(
        dir.path(),
        "candidate.yaml",
        &fleet_denying(&strict, "!object.metadata.name.startsWith('bad-1')").yaml(),
    );
    let recording = recording.to_str().unwrap();
    let (code, report) =
        replay_json(&[recording, "--config", &candidate, "--only-policy", "dev-names"]).await;
    assert_eq!(kinds(&report), vec![("dev/bad-2".to_owned(), "deny_to_allow".to_owned())], "{report:#}");
    assert_eq!(report["differences"][0]["recorded"]["policy"], "dev-names", "{report:#}");
    assert_eq!(code, Some(1));
    let (code, report) = replay_json(&[recording, "--config", &candidate, "--only-webhook", PROD_ONLY]).await;
    assert_eq!((code, report["disagree"].as_u64()), (Some(0), Some(0)), "{report:#}");
    // The whole answer: the same one disagreement.
    let (code, report) = replay_json(&[recording, "--config", &candidate]).await;
    assert_eq!(kinds(&report), vec![("dev/bad-2".to_owned(), "deny_to_allow".to_owned())], "{report:#}");
    assert_eq!(code, Some(1));
    // A policy is not a webhook, nor the other way round.
    let output = run(&["replay", recording, "--config", &candidate, "--only-webhook", "dev-names"]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let output = run(&["replay", recording, "--config", &candidate, "--only-policy", "absent"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr)
        .contains(r#"--only-policy "absent": the candidate fleet has no policy of that name"#));
}

/// A report's differences: `namespace/name` and kind, in recording order.
fn kinds(report: &Value) -> Vec<(String, String)> {
    let differences = report["differences"].as_array().unwrap();
    differences
        .iter()
        .map(|d| {
            let request = &d["request"];
            let name =
                format!("{}/{}", request["namespace"].as_str().unwrap(), request["name"].as_str().unwrap());
            (name, d["kind"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// A fleet of one MutatingAdmissionPolicy labelling pods of `tier: dev` namespaces with `team`.
fn labelling(team: &str) -> Fleet {
    Fleet::of([])
        .object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "team-label"},
            "spec": {
                "reinvocationPolicy": "Never",
                "matchConstraints": {
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
                    "namespaceSelector": {"matchLabels": {"tier": "dev"}},
                },
                "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                    "expression": format!("Object{{metadata: Object.metadata{{labels: {{'team': '{team}'}}}}}}"),
                }}],
            },
        }))
        .object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "team-label"},
            "spec": {"policyName": "team-label"},
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_policies_are_recorded_and_their_patches_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = labelling("a").namespace("prod", &[("tier", "prod")]).namespace("dev", &[("tier", "dev")]);
    let recording = dir.path().join("recording");
    let served = Served::serve(dir.path(), &recorded, &["--record", recording.to_str().unwrap()]);
    let (answers, lines) = record(served, dir.path(), "/mutate", &pods()).await;
    let patched = answers.iter().filter(|answer| answer["response"]["patch"].is_string()).count();
    assert_eq!(patched, 5, "the dev pods are labelled: {answers:?}");
    for line in &lines {
        let dev = line["request"]["request"]["namespace"] == "dev";
        let calls = line["webhooks"].as_array().unwrap();
        let turn = calls.iter().find(|call| call["kind"] == "policy" && call["name"] == "team-label");
        assert_eq!(turn.is_some(), dev, "{line}");
        if let Some(turn) = turn {
            assert_eq!((&turn["outcome"], &turn["mutated"]), (&json!("allowed"), &json!(true)), "{line}");
        }
    }
    let recording = recording.to_str().unwrap();
    // The same policy: every patch again, from the recorded namespaces alone.
    let same = write(dir.path(), "same.yaml", &labelling("a").yaml());
    let (code, report) = replay_json(&[recording, "--config", &same]).await;
    assert_eq!((code, report["disagree"].as_u64()), (Some(0), Some(0)), "{report:#}");
    // Another label value: each dev pod's patch differs.
    let other = write(dir.path(), "other.yaml", &labelling("b").yaml());
    let (code, report) = replay_json(&[recording, "--config", &other]).await;
    assert_eq!(code, Some(1), "{report:#}");
    let differing: Vec<(String, String)> = kinds(&report);
    assert_eq!(differing.len(), 5, "{report:#}");
    assert!(differing.iter().all(|(name, _)| name.starts_with("dev/")), "{report:#}");
    let (code, _) = replay_json(&[recording, "--config", &other, "--only-policy", "team-label"]).await;
    assert_eq!(code, Some(0), "the policy's own turns (allowed, mutated) are the same");
}
