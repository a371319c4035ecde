//! `replay` (docs/operations.md, "Replaying a recording") through the real binary: a recording
//! made by `serve --record` in front of real HTTPS webhooks, replayed against a candidate
//! fleet of real webhooks; the disagreements, their kinds, the exit codes, the filter of
//! answers that vary on their own, `--only-webhook`, and fixtures exported for `review`.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::binary::{post_review, run, text, write, Served};
use crate::support::fixtures::{self, POD_CREATE, SECRET_CREATE};
use crate::support::mock_webhook::Mock;
use crate::support::{
    closed_port_url, eventually, mutating, reply, validating, webhook, webhook_at, Fleet, MockWebhook,
};

const LABEL: &str = "label.replay.example.com";
const POLICY: &str = "policy.replay.example.com";
const PROBE: &str = "probe.replay.example.com";

/// The pods recorded, by name; `web-4` carries the label the candidate's probe selects.
const PODS: [&str; 6] = ["web-1", "web-2", "web-3", "web-4", "bad-1", "bad-2"];

/// A pod CREATE review named `name`, with a uid of its own.
fn pod(name: &str) -> Value {
    let mut review = fixtures::review(POD_CREATE);
    let request = &mut review["request"];
    request["uid"] = json!(format!("uid-{name}"));
    request["name"] = json!(name);
    request["object"]["metadata"]["name"] = json!(name);
    if name == "web-4" {
        request["object"]["metadata"]["labels"]["probe"] = json!("true");
    }
    review
}

fn name_of(review: &Value) -> String {
    review["request"]["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned()
}

/// The label webhook: `team: a`, or what `team` makes of the pod's name.
fn labeller(team: impl Fn(&str) -> &'static str + Send + Sync + 'static) -> MockWebhook {
    MockWebhook::answering(move |review| {
        let patch = json!([{"op": "add", "path": "/metadata/labels/team", "value": team(&name_of(review))}]);
        reply::patch(review, &patch)
    })
}

/// The recorded fleet: `team: a` on every pod, `bad-*` pods denied.
async fn baseline_mocks() -> (Mock, Mock) {
    let label = labeller(|_| "a").spawn().await;
    let policy = MockWebhook::answering(|review| match name_of(review).starts_with("bad-") {
        true => reply::deny(review, "bad pods are not allowed"),
        false => reply::allow(review),
    })
    .spawn()
    .await;
    (label, policy)
}

fn fleet(label: &Mock, policy: &Mock) -> Fleet {
    Fleet::of([
        mutating("labels", [webhook(LABEL, label).rule(&["CREATE"], &["pods"])]),
        validating("policies", [webhook(POLICY, policy).rule(&["CREATE"], &["pods", "secrets"])]),
    ])
}

/// The candidate: `web-2` labelled `team: b` (patch), `web-3` denied (allow_to_deny), `bad-1`
/// denied with another message (message), `bad-2` allowed (deny_to_allow), and a probe at a
/// closed port for `web-4` (call_error, failing open).
struct Candidate {
    _label: Mock,
    _policy: Mock,
    config: String,
}

async fn candidate(dir: &Path) -> Candidate {
    let label = labeller(|name| if name == "web-2" { "b" } else { "a" }).spawn().await;
    let policy = MockWebhook::answering(|review| match name_of(review).as_str() {
        "web-3" => reply::deny(review, "bad pods are not allowed"),
        "bad-1" => reply::deny(review, "bad pods are refused"),
        _ => reply::allow(review),
    })
    .spawn()
    .await;
    let (closed, _) = closed_port_url();
    let fleet = Fleet::of([
        mutating("labels", [webhook(LABEL, &label).rule(&["CREATE"], &["pods"])]),
        validating(
            "policies",
            [
                webhook(POLICY, &policy).rule(&["CREATE"], &["pods", "secrets"]),
                webhook_at(PROBE, &closed)
                    .rule(&["CREATE"], &["pods"])
                    .object_selector(json!({"matchLabels": {"probe": "true"}}))
                    .ignore(),
            ],
        ),
    ]);
    let config = write(dir, "candidate.yaml", &fleet.yaml());
    Candidate { _label: label, _policy: policy, config }
}

/// `reviews` sent through `serve --record DIR/recording` of `fleet` at `/admit`; the
/// recording directory once every one is written.
async fn record(dir: &Path, fleet: &Fleet, reviews: &[Value]) -> PathBuf {
    let recording = dir.join("recording");
    let argument = recording.to_string_lossy().into_owned();
    let served = Served::serve(dir, fleet, &["--record", &argument]);
    let address = served.logged("serving", "address").await.expect("serving within 10 s");
    for review in reviews {
        post_review(&address, "/admit", review).await;
    }
    let lines = || {
        std::fs::read_dir(&recording)
            .map(|items| {
                items
                    .flatten()
                    .filter(|item| item.file_name().to_string_lossy().starts_with("reviews-"))
                    .map(|item| std::fs::read_to_string(item.path()).unwrap_or_default().lines().count())
                    .sum::<usize>()
            })
            .unwrap_or(0)
    };
    let written = eventually(Duration::from_secs(10), || async { lines() == reviews.len() }).await;
    assert!(written, "{} of {} reviews recorded within 10 s", lines(), reviews.len());
    recording
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

/// The differences of a report: pod name → kind.
fn kinds(report: &Value) -> BTreeMap<String, String> {
    report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["request"]["name"].as_str().unwrap().to_owned(), d["kind"].as_str().unwrap().to_owned()))
        .collect()
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(name, kind)| ((*name).to_owned(), (*kind).to_owned())).collect()
}

fn reviews() -> Vec<Value> {
    let mut reviews: Vec<Value> = PODS.iter().map(|name| pod(name)).collect();
    reviews.push(fixtures::review(SECRET_CREATE));
    reviews
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_is_reported_on_exactly_the_reviews_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = record(dir.path(), &fleet(&label, &policy), &reviews()).await;
    let candidate = candidate(dir.path()).await;
    let recording = recording.to_string_lossy().into_owned();

    let (code, report) = replay_json(&[&recording, "--config", &candidate.config]).await;
    assert_eq!(code, Some(1), "{report:#}");
    let expected = expect(&[
        ("web-2", "patch"),
        ("web-3", "allow_to_deny"),
        ("web-4", "call_error"),
        ("bad-1", "message"),
        ("bad-2", "deny_to_allow"),
    ]);
    assert_eq!(kinds(&report), expected, "{report:#}");
    assert_eq!((&report["total"], &report["agree"], &report["disagree"]), (&json!(7), &json!(2), &json!(5)));
    assert_eq!(report["byKind"]["patch"], 1);
    assert!(report.get("unstable").is_none(), "no unstable field without --repeat");
    assert!(report.get("skipped").is_none(), "no line skipped");

    let by_name = |name: &str| {
        report["differences"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["request"]["name"] == name)
            .unwrap()
            .clone()
    };
    let patch = by_name("web-2");
    assert_eq!(
        patch["objectDiff"],
        json!([{"path": "/metadata/labels/team", "recorded": "a", "candidate": "b"}])
    );
    assert_eq!(
        patch["request"],
        json!({"uid": "uid-web-2", "endpoint": "admit", "operation": "CREATE", "kind": "Pod",
               "resource": "pods", "namespace": "team-a", "name": "web-2"})
    );
    assert_eq!(patch["dependsOnRedacted"], false);
    let message = by_name("bad-1");
    assert!(
        message["recorded"]["message"].as_str().unwrap().contains("bad pods are not allowed"),
        "{message}"
    );
    assert!(message["candidate"]["message"].as_str().unwrap().contains("bad pods are refused"), "{message}");
    let call_error = by_name("web-4");
    assert_eq!(call_error["candidate"]["allowed"], true, "failing open: {call_error}");
    assert!(call_error["candidate"]["callErrors"][0].as_str().unwrap().starts_with(PROBE), "{call_error}");

    // The same recording rotated and compressed (`reviews-*.jsonl.gz`), its key beside it.
    let rotated = dir.path().join("rotated");
    std::fs::create_dir(&rotated).unwrap();
    for item in std::fs::read_dir(&recording).unwrap().flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(item.path()).unwrap();
        if name.ends_with(".jsonl") {
            let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut gzip, &bytes).unwrap();
            std::fs::write(rotated.join(format!("{name}.gz")), gzip.finish().unwrap()).unwrap();
        } else {
            std::fs::write(rotated.join(name), bytes).unwrap();
        }
    }
    let (code, again) = replay_json(&[&rotated.to_string_lossy(), "--config", &candidate.config]).await;
    assert_eq!((code, kinds(&again)), (Some(1), kinds(&report)), "{again:#}");

    // The thresholds: a count, a percent of the 7 reviews (5 are 71.4 %).
    for (threshold, expected) in [("5", 0), ("4", 1), ("72%", 0), ("71%", 1)] {
        let (code, _) =
            replay_json(&[&recording, "--config", &candidate.config, "--max-disagreement", threshold]).await;
        assert_eq!(code, Some(expected), "--max-disagreement {threshold}");
    }

    // Against the recorded fleet itself: nothing to report, exit 0; text by default.
    let baseline = dir.path().join("fleet.yaml").to_string_lossy().into_owned();
    let output = run(&["replay", &recording, "--config", &baseline]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let said = text(&output.stdout);
    assert!(said.starts_with("replayed 7 reviews: 7 agree, 0 disagree\n"), "{said}");

    // YAML: the same fields.
    let output = run(&["replay", &recording, "--config", &candidate.config, "-o", "yaml"]).await;
    let yaml = text(&output.stdout);
    for field in ["agree: 2\n", "disagree: 5\n", "total: 7\n", "kind: patch\n"] {
        assert!(yaml.contains(field), "{field:?} in {yaml}");
    }

    // Text: each difference with its kind, both answers and the object's differing paths.
    let output = run(&["replay", &recording, "--config", &candidate.config, "--rate", "200/s"]).await;
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stdout);
    assert!(said.contains("-- allow_to_deny: admit CREATE Pod team-a/web-3 (uid uid-web-3)"), "{said}");
    assert!(said.contains("   /metadata/labels/team: \"a\" → \"b\""), "{said}");
}

/// The recording file of `dir` still plain (`reviews-*.jsonl`).
fn plain_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|item| item.path())
        .find(|path| path.to_string_lossy().ends_with(".jsonl"))
        .unwrap()
}

/// A recording torn by a crash (its last line cut short), with garbage in the middle and a
/// compressed file cut short: every line that is not a recorded review is skipped and listed
/// by file and line, the others replayed and compared as ever; the exit code is the
/// comparison's. A recording of which no line is a review is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_and_undecodable_lines_are_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let pods = [pod("web-1"), pod("web-2"), pod("web-3")];
    let recording = record(dir.path(), &fleet(&label, &policy), &pods).await;
    let config = dir.path().join("fleet.yaml").to_string_lossy().into_owned();
    let file = plain_file(&recording);
    let whole = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 3);
    // Line 2 garbage, line 4 JSON but not a record, line 6 the first line cut short (no newline).
    let torn = &lines[0][..lines[0].len() / 2];
    let damaged = format!(
        "{}\nnot json at all\n{}\n{{\"endpoint\": \"admit\"}}\n{}\n{torn}",
        lines[0], lines[1], lines[2]
    );
    std::fs::write(&file, damaged).unwrap();
    let at = |line: u64| format!("{}:{line}", file.display());

    let (code, report) = replay_json(&[&recording.to_string_lossy(), "--config", &config]).await;
    assert_eq!(code, Some(0), "skipped lines alone do not fail the replay: {report:#}");
    assert_eq!(
        (&report["total"], &report["agree"], &report["disagree"], &report["skipped"]),
        (&json!(3), &json!(3), &json!(0), &json!(3)),
        "{report:#}"
    );
    assert!(report.get("unstable").is_none(), "{report:#}");
    let skipped: Vec<(String, String)> = report["skippedLines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["line"].as_str().unwrap().to_owned(), s["problem"].as_str().unwrap().to_owned()))
        .collect();
    let places: Vec<&str> = skipped.iter().map(|(line, _)| line.as_str()).collect();
    assert_eq!(places, [at(2), at(4), at(6)], "{report:#}");
    assert!(skipped.iter().all(|(_, problem)| problem.starts_with("not a recorded review")), "{skipped:?}");
    assert!(skipped[1].1.contains("missing field"), "{skipped:?}");

    // The text report says so too, each line by file and line.
    let output = run(&["replay", &recording.to_string_lossy(), "--config", &config]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let said = text(&output.stdout);
    assert!(said.starts_with("replayed 3 reviews: 3 agree, 0 disagree\n"), "{said}");
    assert!(said.contains("skipped 3 lines that are not recorded reviews"), "{said}");
    assert!(said.contains(&format!("-- skipped {}: not a recorded review", at(6))), "{said}");

    // A compressed file cut short (a copy made by a crash): the lines before the cut are
    // replayed, the cut is one skipped line of that file.
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let many: String = (0..40).map(|_| format!("{}\n", lines[0])).collect();
    std::io::Write::write_all(&mut gzip, many.as_bytes()).unwrap();
    let bytes = gzip.finish().unwrap();
    let gz = cut.join("reviews-000000000001-000001.jsonl.gz");
    std::fs::write(&gz, &bytes[..bytes.len() * 2 / 3]).unwrap();
    std::fs::copy(recording.join(".key"), cut.join(".key")).unwrap();
    let (code, report) = replay_json(&[&cut.to_string_lossy(), "--config", &config]).await;
    assert_eq!(code, Some(0), "{report:#}");
    let total = report["total"].as_u64().unwrap();
    assert!((1..40).contains(&total), "the lines before the cut: {report:#}");
    assert_eq!(report["skipped"], 1, "{report:#}");
    let line = report["skippedLines"][0]["line"].as_str().unwrap();
    assert_eq!(line, format!("{}:{}", gz.display(), total + 1), "{report:#}");

    // Nothing but garbage: no review to replay, an error naming the first line.
    let garbage = dir.path().join("reviews-000000000009-000001.jsonl");
    std::fs::write(&garbage, "not json\n{\"endpoint\": \"admit\"}\n").unwrap();
    let output = run(&["replay", &garbage.to_string_lossy(), "--config", &config]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("no recorded review in 2 lines"), "{stderr}");
    assert!(stderr.contains(&format!("{}:1: not a recorded review", garbage.display())), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_exit_2_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = record(dir.path(), &fleet(&label, &policy), &[pod("web-1"), pod("web-2")]).await;
    let config = dir.path().join("fleet.yaml").to_string_lossy().into_owned();
    let file = plain_file(&recording);

    // A directory without recording files, an unreadable file.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let output = run(&["replay", &empty.to_string_lossy(), "--config", &config]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no recording files"), "{}", text(&output.stderr));
    let locked = dir.path().join("reviews-000000000001-000001.jsonl");
    std::fs::copy(&file, &locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::File::open(&locked).is_err() {
        // (root reads it anyway)
        let output = run(&["replay", &locked.to_string_lossy(), "--config", &config]).await;
        assert_eq!(output.status.code(), Some(2));
        let stderr = text(&output.stderr);
        assert!(stderr.contains(&format!("cannot read {}", locked.display())), "{stderr}");
    }

    // No such recording; a candidate that does not load; a bad threshold.
    let output = run(&["replay", "/nonexistent/reviews.jsonl", "--config", &config]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("/nonexistent/reviews.jsonl"), "{}", text(&output.stderr));
    let broken = write(dir.path(), "broken.yaml", "kind: ValidatingWebhookConfiguration\nwebhooks: 7\n");
    let output = run(&["replay", &file.to_string_lossy(), "--config", &broken]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("candidate configuration"), "{}", text(&output.stderr));
    let output =
        run(&["replay", &file.to_string_lossy(), "--config", &config, "--max-disagreement", "lots"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--max-disagreement \"lots\""), "{}", text(&output.stderr));
    // A webhook the candidate does not have would agree on everything: refused.
    let output =
        run(&["replay", &file.to_string_lossy(), "--config", &config, "--only-webhook", "typo.example.com"])
            .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no webhook of that name"), "{}", text(&output.stderr));
}

/// Answers that vary on their own: for each request, the webhook allows and denies in turn
/// (a random webhook, made deterministic so the test cannot be lucky).
fn flapping() -> MockWebhook {
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    MockWebhook::answering(move |review| {
        let name = name_of(review);
        if !name.starts_with("flaky-") {
            return reply::allow(review);
        }
        let mut seen = seen.lock().unwrap();
        let count = seen.entry(name).or_default();
        *count += 1;
        if *count % 2 == 1 {
            reply::allow(review)
        } else {
            reply::deny(review, "the coin says no")
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_vary_on_their_own_are_set_aside_with_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let coin = flapping().spawn().await;
    let fleet = Fleet::of([validating(
        "coins",
        [webhook("coin.replay.example.com", &coin).rule(&["CREATE"], &["pods"])],
    )]);
    let reviews = [pod("stable-1"), pod("flaky-1"), pod("stable-2"), pod("flaky-2")];
    let recording = record(dir.path(), &fleet, &reviews).await;
    let recording = recording.to_string_lossy().into_owned();
    let config = dir.path().join("fleet.yaml").to_string_lossy().into_owned();

    // Without --repeat, the recorded fleet against itself reports the flaky ones.
    let (code, report) = replay_json(&[&recording, "--config", &config]).await;
    assert_eq!(code, Some(1), "{report:#}");
    let flaky = expect(&[("flaky-1", "allow_to_deny"), ("flaky-2", "allow_to_deny")]);
    assert_eq!(kinds(&report), flaky);

    // With it, they are set aside and the replay passes.
    let (code, report) =
        replay_json(&[&recording, "--config", &config, "--baseline", &config, "--repeat", "2"]).await;
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        (&report["total"], &report["agree"], &report["disagree"], &report["unstable"]),
        (&json!(4), &json!(2), &json!(0), &json!(2))
    );
    let unstable: Vec<&str> =
        report["unstableRequests"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(unstable, ["flaky-1", "flaky-2"]);
    assert!(report.get("skipped").is_none(), "set aside is not skipped: {report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_webhook_compares_that_webhooks_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = record(dir.path(), &fleet(&label, &policy), &reviews()).await;
    let candidate = candidate(dir.path()).await;
    let recording = recording.to_string_lossy().into_owned();

    // The policy webhook alone: its new denial and its new allowance; not the label's patch,
    // the probe's failure nor the message (the recording keeps a webhook's code, not its text).
    let (code, report) =
        replay_json(&[&recording, "--config", &candidate.config, "--only-webhook", POLICY]).await;
    assert_eq!(code, Some(1), "{report:#}");
    let expected = expect(&[("web-3", "allow_to_deny"), ("bad-2", "deny_to_allow")]);
    assert_eq!(kinds(&report), expected, "{report:#}");
    let web3 =
        &report["differences"].as_array().unwrap().iter().find(|d| d["request"]["name"] == "web-3").unwrap();
    assert_eq!(web3["recorded"]["webhook"], POLICY);
    assert_eq!(web3["recorded"]["turns"][0]["outcome"], "allowed");
    assert_eq!(web3["candidate"]["turns"][0]["outcome"], "denied");

    // The label webhook alone: it patched before and patches now (another value: the recording
    // does not keep one webhook's patch), so it agrees; the probe was not matched before.
    let (code, report) =
        replay_json(&[&recording, "--config", &candidate.config, "--only-webhook", LABEL]).await;
    assert_eq!((code, report["disagree"].clone()), (Some(0), json!(0)), "{report:#}");
    let (code, report) =
        replay_json(&[&recording, "--config", &candidate.config, "--only-webhook", PROBE]).await;
    assert_eq!(code, Some(1));
    assert_eq!(kinds(&report), expect(&[("web-4", "call_error")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_fixtures_are_read_back_by_review() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = record(dir.path(), &fleet(&label, &policy), &reviews()).await;
    let candidate = candidate(dir.path()).await;
    let recording = recording.to_string_lossy().into_owned();
    let baseline = dir.path().join("fleet.yaml").to_string_lossy().into_owned();

    let disagreeing = dir.path().join("disagreeing");
    let (code, report) =
        replay_json(&[&recording, "--config", &candidate.config, "--export", &disagreeing.to_string_lossy()])
            .await;
    assert_eq!((code, &report["exported"]), (Some(1), &json!(5)), "{report:#}");
    let mut names: Vec<String> = std::fs::read_dir(&disagreeing)
        .unwrap()
        .flatten()
        .map(|i| i.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "pod-team-a-bad-1-uid-bad-1.json",
            "pod-team-a-bad-2-uid-bad-2.json",
            "pod-team-a-web-2-uid-web-2.json",
            "pod-team-a-web-3-uid-web-3.json",
            "pod-team-a-web-4-uid-web-4.json"
        ]
    );
    assert_eq!(std::fs::metadata(&disagreeing).unwrap().permissions().mode() & 0o777, 0o700);
    let web3 = disagreeing.join("pod-team-a-web-3-uid-web-3.json");
    assert_eq!(std::fs::metadata(&web3).unwrap().permissions().mode() & 0o777, 0o600);
    let fixture: Value = serde_json::from_slice(&std::fs::read(&web3).unwrap()).unwrap();
    assert_eq!(fixture["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(fixture["request"], pod("web-3")["request"], "the request as recorded");

    // `review` reads them: web-3 allowed by the recorded fleet (0), denied by the candidate (1).
    let web3 = web3.to_string_lossy().into_owned();
    let output = run(&["review", "--config", &baseline, &web3]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let output = run(&["review", "--config", &candidate.config, &web3]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(!text(&output.stderr).contains("redacted"), "a Pod carries nothing redacted");

    // Every review, the Secret's with its values as hashes: `review` says so.
    let all = dir.path().join("all");
    let (code, report) = replay_json(&[
        &recording,
        "--config",
        &baseline,
        "--export",
        &all.to_string_lossy(),
        "--export-only",
        "all",
    ])
    .await;
    assert_eq!((code, &report["exported"]), (Some(0), &json!(7)), "{report:#}");
    let secret = std::fs::read_dir(&all)
        .unwrap()
        .flatten()
        .map(|i| i.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("secret-"))
        .unwrap();
    let text_of_secret = std::fs::read_to_string(&secret).unwrap();
    assert!(text_of_secret.contains("hmac-sha256:"), "{text_of_secret}");
    let output = run(&["review", "--config", &baseline, &secret.to_string_lossy()]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("could depend on a redacted value"), "{}", text(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_difference_on_a_secret_says_it_could_depend_on_a_redacted_value() {
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = record(dir.path(), &fleet(&label, &policy), &[fixtures::review(SECRET_CREATE)]).await;
    // A candidate that denies every Secret.
    let deny = MockWebhook::denying("no secrets").spawn().await;
    let fleet = Fleet::of([validating("policies", [webhook(POLICY, &deny).rule(&["CREATE"], &["secrets"])])]);
    let config = write(dir.path(), "strict.yaml", &fleet.yaml());
    let (code, report) = replay_json(&[&recording.to_string_lossy(), "--config", &config]).await;
    assert_eq!(code, Some(1));
    assert_eq!(report["differences"][0]["dependsOnRedacted"], true, "{report:#}");
    let output = run(&["replay", &recording.to_string_lossy(), "--config", &config]).await;
    assert!(text(&output.stdout).contains("could depend on a redacted value"), "{}", text(&output.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_and_the_concurrency_bound_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let slow = MockWebhook::slow(Duration::from_millis(300)).spawn().await;
    let fleet = Fleet::of([validating(
        "slow",
        [webhook("slow.replay.example.com", &slow).rule(&["CREATE"], &["pods"])],
    )]);
    let reviews: Vec<Value> = (1..=6).map(|i| pod(&format!("web-{i}"))).collect();
    let recording = record(dir.path(), &fleet, &reviews).await;
    let (recording, config) = (recording.to_string_lossy().into_owned(), dir.path().join("fleet.yaml"));
    let config = config.to_string_lossy().into_owned();

    // Two at a time, 300 ms each: three rounds at least, whatever the rate allows.
    let began = std::time::Instant::now();
    let (code, report) =
        replay_json(&[&recording, "--config", &config, "--concurrency", "2", "--rate", "1000/s"]).await;
    assert_eq!((code, &report["agree"]), (Some(0), &json!(6)), "{report:#}");
    assert!(began.elapsed() >= Duration::from_millis(900), "{:?}", began.elapsed());

    // Six at once, but 4 a second: the sixth sent 1.25 s after the first.
    let began = std::time::Instant::now();
    let (code, _) =
        replay_json(&[&recording, "--config", &config, "--concurrency", "6", "--rate", "4/s"]).await;
    assert_eq!(code, Some(0));
    assert!(began.elapsed() >= Duration::from_millis(1250), "{:?}", began.elapsed());
}

/// A webhook writing `token` into a Secret's data.
fn token_writer(token: &'static str) -> MockWebhook {
    MockWebhook::patching(json!([{"op": "add", "path": "/data/token", "value": token}]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_values_written_by_a_patch_compare_by_their_hashes_and_are_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let writer = token_writer("aW5qZWN0ZWQ=").spawn().await;
    let fleet = Fleet::of([mutating("tokens", [webhook(LABEL, &writer).rule(&["CREATE"], &["secrets"])])]);
    let recording = record(dir.path(), &fleet, &[fixtures::review(SECRET_CREATE)]).await;
    let file = std::fs::read_dir(&recording)
        .unwrap()
        .flatten()
        .map(|item| item.path())
        .find(|path| path.to_string_lossy().ends_with(".jsonl"))
        .unwrap();
    let config = dir.path().join("fleet.yaml").to_string_lossy().into_owned();

    // The same fleet writes the same value: hashed with the recording's key, it agrees.
    let (code, report) = replay_json(&[&recording.to_string_lossy(), "--config", &config]).await;
    assert_eq!((code, &report["agree"]), (Some(0), &json!(1)), "{report:#}");

    // Another value: a patch difference, both sides hashes.
    let other = token_writer("b3RoZXItdG9rZW4=").spawn().await;
    let fleet = Fleet::of([mutating("tokens", [webhook(LABEL, &other).rule(&["CREATE"], &["secrets"])])]);
    let candidate = write(dir.path(), "other.yaml", &fleet.yaml());
    let output = run(&["replay", &recording.to_string_lossy(), "--config", &candidate, "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stdout);
    assert!(!said.contains("b3RoZXItdG9rZW4=") && !said.contains("aW5qZWN0ZWQ="), "{said}");
    let report: Value = serde_json::from_str(&said).unwrap();
    let difference = &report["differences"][0];
    assert_eq!((&difference["kind"], &difference["dependsOnRedacted"]), (&json!("patch"), &json!(true)));
    let change = &difference["objectDiff"][0];
    assert_eq!(change["path"], "/data/token");
    for side in ["recorded", "candidate"] {
        assert!(change[side].as_str().unwrap().starts_with("hmac-sha256:"), "{change}");
    }

    // A recording copied without its key: nothing to hash with, so nothing shown and no agreement claimed.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let copied = copy.join(file.file_name().unwrap());
    std::fs::copy(&file, &copied).unwrap();
    let output = run(&["replay", &copied.to_string_lossy(), "--config", &config]).await;
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stdout);
    assert!(!said.contains("aW5qZWN0ZWQ="), "{said}");
    assert!(said.contains("the recording's key is not readable"), "{said}");
    assert!(said.contains("could depend on a redacted value"), "{said}");
}

/// The whole loop: a recording made by `serve` under concurrent load (and rotated into
/// compressed files by a small file bound) replays against the candidate with exactly the
/// changed reviews reported, each with its kind, and no secret readable in any file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_made_under_load_replays_to_exactly_the_changed_reviews() {
    const ROUNDS: usize = 80;
    let dir = tempfile::tempdir().unwrap();
    let (label, policy) = baseline_mocks().await;
    let recording = dir.path().join("recording");
    let fleet = fleet(&label, &policy).settings(json!({"recording": {"maxFileBytes": "1Mi"}}));
    let argument = recording.to_string_lossy().into_owned();
    let served = Served::serve(dir.path(), &fleet, &["--record", &argument]);
    let address = served.logged("serving", "address").await.expect("serving within 10 s");
    // ROUNDS copies of the six pods (their own uids) and the Secret, 32 at a time.
    let mut sent: Vec<Value> = Vec::new();
    for round in 0..ROUNDS {
        for mut review in reviews() {
            review["request"]["uid"] =
                json!(format!("{}-{round}", review["request"]["uid"].as_str().unwrap()));
            sent.push(review);
        }
    }
    use futures_util::StreamExt as _;
    let answered =
        futures_util::stream::iter(sent.iter().map(|review| post_review(&address, "/admit", review)))
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
    assert!(answered.iter().all(|answer| answer["response"]["uid"].is_string()), "every review answered");
    let files = || -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&recording)
            .unwrap()
            .flatten()
            .map(|item| item.path())
            .filter(|path| path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("reviews-")))
            .collect();
        files.sort();
        files
    };
    let count = |files: &[PathBuf]| -> usize {
        files
            .iter()
            .map(|file| {
                let bytes = std::fs::read(file).unwrap_or_default();
                let text = if file.extension().is_some_and(|e| e == "gz") {
                    let mut out = String::new();
                    let _ = std::io::Read::read_to_string(
                        &mut flate2::read::GzDecoder::new(&bytes[..]),
                        &mut out,
                    );
                    out
                } else {
                    String::from_utf8_lossy(&bytes).into_owned()
                };
                text.lines().count()
            })
            .sum()
    };
    let written = eventually(Duration::from_secs(20), || async { count(&files()) == sent.len() }).await;
    assert!(written, "{} of {} reviews recorded", count(&files()), sent.len());
    assert!(files().len() >= 2, "rotated at 1 MiB: {:?}", files());
    // Rotated files are compressed off the writer's path: wait until only the current one is plain.
    let plain = || files().iter().filter(|file| file.extension().is_some_and(|e| e == "jsonl")).count();
    assert!(eventually(Duration::from_secs(20), || async { plain() == 1 }).await, "{:?}", files());
    // The Secret's value is in no file, compressed or not.
    let secret = fixtures::review(SECRET_CREATE)["request"]["object"]["data"].clone();
    for file in files() {
        let bytes = std::fs::read(&file).unwrap();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if file.extension().is_some_and(|e| e == "gz") {
            text.clear();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
        }
        for value in secret.as_object().unwrap().values() {
            assert!(!text.contains(value.as_str().unwrap()), "{} holds a Secret value", file.display());
        }
    }

    let candidate = candidate(dir.path()).await;
    let rate = "10000/s";
    let (code, report) =
        replay_json(&[&argument, "--config", &candidate.config, "--rate", rate, "--concurrency", "16"]).await;
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(
        (&report["total"], &report["disagree"]),
        (&json!(sent.len()), &json!(5 * ROUNDS)),
        "{report:#}"
    );
    for (kind, expected) in
        [("patch", 1), ("allow_to_deny", 1), ("call_error", 1), ("message", 1), ("deny_to_allow", 1)]
    {
        assert_eq!(report["byKind"][kind], json!(expected * ROUNDS), "{kind}: {report:#}");
    }
    let names: HashMap<String, usize> =
        report["differences"].as_array().unwrap().iter().fold(HashMap::new(), |mut names, d| {
            *names.entry(d["request"]["name"].as_str().unwrap().to_owned()).or_default() += 1;
            names
        });
    let expected: HashMap<String, usize> = ["web-2", "web-3", "web-4", "bad-1", "bad-2"]
        .iter()
        .map(|name| ((*name).to_owned(), ROUNDS))
        .collect();
    assert_eq!(names, expected);
}
