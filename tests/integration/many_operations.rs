//! A mutating webhook's patch of many operations, through the real binary: applied in time
//! linear in its size and within the review's deadline budget, the reviews of other
//! connections on the same serving thread answered meanwhile, and a stop that ends the process
//! whatever is being patched (src/pipeline/object.rs, `ObjectState::apply`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::binary::Served;
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{http_client, mutating, reply, validating, webhook, Answer, Fleet, MockWebhook};

/// `count` operations, each adding one label to the Pod.
fn label_operations(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"op": "add", "path": format!("/metadata/labels/l{i}"), "value": format!("v{i}")}))
        .collect()
}

/// An array of `elements` at `/spec/inserted`, then `count` insertions at its front: each
/// moves every element after it (32 bytes each), as in Go's json-patch, so the patch takes
/// seconds to apply whatever the build: (50,000, 20,000) moves about 40 GB, (1,000,000,
/// 100,000) more than 3 TB, minutes on any machine.
fn front_insertions(elements: usize, count: usize) -> Value {
    let mut operations = vec![json!({"op": "add", "path": "/spec/inserted", "value": vec![0; elements]})];
    operations.extend((0..count).map(|i| json!({"op": "add", "path": "/spec/inserted/0", "value": i})));
    Value::Array(operations)
}

/// The fixture Pod's review with its own uid and, as a label, how many operations the
/// patching webhook should answer with.
fn review_asking_for(uid: &str, operations: usize) -> Value {
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["uid"] = json!(uid);
    review["request"]["object"]["metadata"]["labels"]["operations"] = json!(operations.to_string());
    review
}

/// The address the served binary listens on, from its `serving` line.
async fn serving_address(served: &Served) -> String {
    let serving = served
        .next_line(|line| (line["fields"]["message"] == "serving").then_some(()))
        .await
        .expect("serving within 10 s");
    serving["fields"]["address"].as_str().expect("an address").to_owned()
}

/// POSTs `review` to `http://address{path}` on a new connection; the answer and how long it
/// took.
async fn post(address: &str, path: &str, review: &Value) -> (Answer, Duration) {
    let request = http::Request::post(format!("http://{address}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .unwrap();
    let began = Instant::now();
    let (http_status, body) = send(&http_client(), request).await.expect("the gateway answers");
    let took = began.elapsed();
    (Answer { http_status, review: serde_json::from_str(&body).unwrap_or(Value::Null), body }, took)
}

/// 1,000, 10,000 and 100,000 `add` operations: each review allowed within its budget, the next
/// webhook sent the object with every label, and the combined patch answered replaying to
/// that same object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_of_many_operations_are_applied_within_the_budget() {
    let patching = MockWebhook::answering(|review| {
        let count = review["request"]["object"]["metadata"]["labels"]["operations"]
            .as_str()
            .and_then(|count| count.parse().ok())
            .unwrap_or(0);
        reply::patch(review, &Value::Array(label_operations(count)))
    })
    .spawn()
    .await;
    let after = MockWebhook::allowing().spawn().await;
    let fleet = Fleet::of([mutating(
        "many",
        [
            webhook("patch.many.example.com", &patching).timeout_seconds(30),
            webhook("after.many.example.com", &after).timeout_seconds(30),
        ],
    )]);
    let dir = tempfile::tempdir().unwrap();
    let served = Served::serve(dir.path(), &fleet, &["--drain-delay", "0s"]);
    let address = serving_address(&served).await;

    for (i, count) in [1_000, 10_000, 100_000].into_iter().enumerate() {
        let review = review_asking_for(&format!("many-{count}"), count);
        let (answer, took) = post(&address, "/admit?timeout=30s", &review).await;
        assert!(answer.allowed(), "{count} operations: {}", answer.message());
        let mut expected = review["request"]["object"].clone();
        for i in 0..count {
            expected["metadata"]["labels"][format!("l{i}")] = json!(format!("v{i}"));
        }
        let sent = &after.requests()[i];
        assert_eq!(sent.uid().len(), 36, "the next webhook's own uid");
        assert!(sent.object() == &expected, "{count} operations: the next webhook was sent another object");
        assert!(
            answer.patched(&review["request"]["object"]) == expected,
            "{count} operations: the combined patch replays to another object"
        );
        eprintln!("{count} operations: answered in {took:?}");
    }
}

/// While a patch that takes seconds to apply runs on the only serving thread, reviews on new
/// connections are answered without waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_on_other_connections_are_answered_while_a_long_patch_is_applied() {
    let patching = MockWebhook::patching(front_insertions(50_000, 20_000)).spawn().await;
    let allow = MockWebhook::allowing().spawn().await;
    let fleet = Fleet::of([
        mutating("long", [webhook("patch.long.example.com", &patching).timeout_seconds(30)]),
        validating("small", [webhook("allow.small.example.com", &allow)]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let served = Served::serve(dir.path(), &fleet, &["--threads", "1", "--drain-delay", "0s"]);
    let address = serving_address(&served).await;

    let long = tokio::spawn({
        let address = address.clone();
        async move { post(&address, "/admit?timeout=30s", &review_asking_for("long", 0)).await }
    });
    while patching.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let small = fixtures::review(POD_CREATE);
    let mut latencies = Vec::new();
    while !long.is_finished() {
        let (answer, took) = post(&address, "/validate?timeout=10s", &small).await;
        assert!(answer.allowed(), "{}", answer.body);
        if !long.is_finished() {
            latencies.push(took);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (answer, long_took) = long.await.unwrap();
    assert!(answer.allowed(), "{}", answer.message());
    assert!(latencies.len() >= 3, "the long patch ended too soon to tell ({long_took:?}): {latencies:?}");
    // Each small review is a loopback call in a debug build: milliseconds. Waiting for the
    // long one would take most of its time.
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(slowest < long_took / 4, "a small review took {slowest:?} while the long one took {long_took:?}");
    eprintln!("{} small reviews during {long_took:?}, the slowest {slowest:?}", latencies.len());
}

/// A patch that cannot be applied before the caller's deadline (10 s): the webhook's failurePolicy
/// answers before that deadline, saying so; with `Ignore` nothing of the patch is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_cannot_be_applied_in_time_ends_with_the_failure_policy_before_the_deadline() {
    let patching = MockWebhook::patching(front_insertions(1_000_000, 100_000)).spawn().await;
    let after = MockWebhook::allowing().spawn().await;
    let fleet = |ignore: bool| {
        let (hook, next) = (
            webhook("patch.late.example.com", &patching).timeout_seconds(30),
            webhook("after.late.example.com", &after),
        );
        let (hook, next) = if ignore { (hook.ignore(), next.ignore()) } else { (hook, next) };
        Fleet::of([mutating("late", [hook, next])])
    };
    let dir = tempfile::tempdir().unwrap();
    let served = Served::serve(dir.path(), &fleet(false), &["--drain-delay", "0s"]);
    let address = serving_address(&served).await;
    let review = review_asking_for("late", 0);

    let (answer, took) = post(&address, "/admit?timeout=10s", &review).await;
    assert!(took < Duration::from_secs(10), "answered after the caller's deadline: {took:?}");
    assert!(!answer.allowed(), "allowed after {took:?}");
    assert_eq!(answer.code(), Some(500));
    let message = answer.message();
    assert!(message.starts_with(r#"Internal error occurred: failed calling webhook "patch.late.example.com": admission-gateway could not apply the patch before the review's deadline ("#), "{message}");
    assert_eq!(after.calls(), 0, "the chain stopped");

    let dir = tempfile::tempdir().unwrap();
    let served = Served::serve(dir.path(), &fleet(true), &["--drain-delay", "0s"]);
    let address = serving_address(&served).await;
    let (answer, took) = post(&address, "/admit?timeout=10s", &review).await;
    assert!(took < Duration::from_secs(10), "answered after the caller's deadline: {took:?}");
    assert!(answer.allowed(), "{}", answer.message());
    assert_eq!(answer.patch(), None, "nothing of the stopped patch is answered");
    assert_eq!(
        answer.annotation("failed-open.mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some("patch.late.example.com")
    );
    // The deadline has come: the next webhook is answered by its failurePolicy too.
    assert_eq!(
        answer.annotation("failed-open.mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some("after.late.example.com")
    );
    assert_eq!(after.calls(), 0);
}

/// SIGTERM while a long patch is being applied: the process exits within the drain delay, the
/// in-flight grace and a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_long_patch_ends_the_process_within_its_bound() {
    let patching = MockWebhook::patching(front_insertions(1_000_000, 100_000)).spawn().await;
    let fleet =
        Fleet::of([mutating("stop", [webhook("patch.stop.example.com", &patching).timeout_seconds(30)])]);
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--threads", "1", "--drain-delay", "0s", "--in-flight-grace", "1s"];
    let mut served = Served::serve(dir.path(), &fleet, &extra);
    let address = serving_address(&served).await;

    let long = tokio::spawn(async move {
        let request = http::Request::post(format!("http://{address}/admit?timeout=30s"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(review_asking_for("stop", 0).to_string())))
            .unwrap();
        // Not answered: the process ends first.
        send(&http_client(), request).await
    });
    while patching.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The answer has reached the gateway and is being decoded or applied.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!long.is_finished(), "the long review ended before the stop");
    let began = Instant::now();
    let status = tokio::task::block_in_place(|| served.terminate(Duration::from_secs(20)));
    let took = began.elapsed();
    assert!(status.is_some(), "still running 20 s after SIGTERM");
    // 0 s of drain delay, 1 s of grace, and the stop's slack of 5 s.
    assert!(took < Duration::from_secs(6), "exited {took:?} after SIGTERM");
    long.abort();
}
