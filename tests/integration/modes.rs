//! Shadow, canary and warn modes (docs/configuration.md, "Shadow, canary and warn modes"): a shadow webhook is
//! called but never waited for nor obeyed, its results counted; a canary is enforced for a
//! stable share of objects; a warn-mode denial becomes a warning.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::support::binary::{run, text, write};
use crate::support::fixtures::{self, POD_CREATE, POD_UPDATE};
use crate::support::prometheus;
use crate::support::{
    eventually, mutating, reply, validating, webhook, webhook_at, Fleet, MockWebhook, TestGateway,
};

const MODE: &str = "admission-gateway/mode";
const PERCENT: &str = "admission-gateway/canary-percent";

// ---------------------------------------------------------------------------------------------
// The metrics the gateway emits, scraped from its /metrics. The registry is the process's, so
// each test reads the series of its own webhooks (their names are unique to the test).

type Labels = Vec<(String, String)>;

/// The counter `name` for this webhook: labels other than `webhook` → value.
async fn counted(gateway: &TestGateway, name: &str, webhook: &str) -> Vec<(Labels, u64)> {
    let (_, text) = gateway.admin_get("/metrics").await;
    let mut found: Vec<_> = prometheus::matching(&text, name, &[("webhook", webhook)])
        .into_iter()
        .map(|(labels, value)| {
            (labels.into_iter().filter(|(k, _)| k != "webhook").collect::<Labels>(), value as u64)
        })
        .collect();
    found.sort();
    found
}

/// `result/disagreement` → count of this webhook's shadow results.
async fn shadow_results(gateway: &TestGateway, webhook: &str) -> HashMap<String, u64> {
    counted(gateway, "admission_gateway_shadow_results_total", webhook)
        .await
        .into_iter()
        .map(|(labels, value)| {
            let label = |name: &str| labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap();
            (format!("{}/{}", label("result"), label("disagreement")), value)
        })
        .collect()
}

/// Waits (up to 10 s) until this webhook's shadow results are `expected`.
async fn expect_results(gateway: &TestGateway, webhook: &str, expected: &[(&str, u64)]) {
    let expected: HashMap<String, u64> = expected.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    let reached = eventually(Duration::from_secs(10), || {
        let expected = expected.clone();
        async move { shadow_results(gateway, webhook).await == expected }
    })
    .await;
    assert!(
        reached,
        "{webhook}: expected {expected:?}, counted {:?}",
        shadow_results(gateway, webhook).await
    );
}

/// A pod review named `name` (UPDATE: the name decides the canary side).
fn pod_named(name: &str) -> Value {
    let mut review = fixtures::review(POD_UPDATE);
    review["request"]["name"] = json!(name);
    review["request"]["uid"] = json!(format!("uid-{name}"));
    review
}

// ---------------------------------------------------------------------------------------------
// Shadow

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_shadow_webhook_does_not_delay_the_answer() {
    let delay = Duration::from_secs(3);
    let slow = MockWebhook::denying("too late to matter").after(delay).spawn().await;
    let enforced = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        validating("enforced", [webhook("enforced.slow.example.com", &enforced)]),
        validating("shadowed", [webhook("shadow.slow.example.com", &slow)]).annotate(MODE, "shadow"),
    ]))
    .await;

    let started = Instant::now();
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    let (took, replied) = (started.elapsed(), slow.replied());

    assert!(answer.allowed(), "{}", answer.body);
    // The causal fact, not a window: the shadow had not answered when the answer came.
    assert_eq!(replied, 0, "the answer waited for the {delay:?} shadow webhook: {took:?}");
    assert!(
        eventually(Duration::from_secs(10), || async { slow.calls() == 1 }).await,
        "the shadow was called"
    );
    // Once it answers, its denial is compared with the decision (allowed).
    expect_results(&gateway, "shadow.slow.example.com", &[("disagree/would_deny", 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denying_shadow_webhook_does_not_deny_and_results_are_compared_with_the_decision() {
    let deny = MockWebhook::denying("no").spawn().await;
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([validating(
        "shadowed",
        [webhook("deny.compare.example.com", &deny), webhook("allow.compare.example.com", &allow)],
    )
    .annotate(MODE, "shadow")]))
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert!(answer.warnings().is_empty(), "{:?}", answer.warnings());
    assert!(answer.annotation_keys().is_empty(), "{:?}", answer.annotation_keys());
    expect_results(&gateway, "deny.compare.example.com", &[("disagree/would_deny", 1)]).await;
    expect_results(&gateway, "allow.compare.example.com", &[("agree/", 1)]).await;
    let labels =
        &counted(&gateway, "admission_gateway_shadow_results_total", "allow.compare.example.com").await[0].0;
    for label in [("configuration", "shadowed"), ("type", "validating"), ("mode", "shadow")] {
        assert!(labels.contains(&(label.0.to_owned(), label.1.to_owned())), "{label:?} not in {labels:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_webhook_that_would_allow_a_denied_request_is_counted() {
    let deny = MockWebhook::denying("enforced no").spawn().await;
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        validating("enforced", [webhook("deny.would-allow.example.com", &deny)]),
        validating("shadowed", [webhook("allow.would-allow.example.com", &allow)]).annotate(MODE, "shadow"),
    ]))
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(
        answer.message(),
        r#"admission webhook "deny.would-allow.example.com" denied the request: enforced no"#
    );
    expect_results(&gateway, "allow.would-allow.example.com", &[("disagree/would_allow", 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_shadow_webhook_does_not_fail_the_request_even_under_failure_policy_fail() {
    let refused_url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("https://{}/webhook", listener.local_addr().unwrap())
    };
    let broken = MockWebhook::answering(|_| reply::http(500, "text/plain", "boom")).spawn().await;
    let gateway = TestGateway::start(Fleet::of([validating(
        "shadowed",
        [
            webhook_at("refused.failing.example.com", &refused_url).set("failurePolicy", json!("Fail")),
            webhook("broken.failing.example.com", &broken).set("failurePolicy", json!("Fail")),
        ],
    )
    .annotate(MODE, "shadow")]))
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert!(answer.annotation_keys().is_empty(), "no failed-open annotation: {:?}", answer.annotation_keys());
    expect_results(&gateway, "refused.failing.example.com", &[("error/", 1)]).await;
    expect_results(&gateway, "broken.failing.example.com", &[("error/", 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patching_shadow_mutating_webhook_does_not_patch_and_later_webhooks_do_not_see_its_patch() {
    let shadow =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/shadowed", "value": "yes"}]))
            .spawn()
            .await;
    let later = MockWebhook::allowing().spawn().await;
    // Configurations run in name order: the shadow one first.
    let gateway = TestGateway::start(Fleet::of([
        mutating("a-shadowed", [webhook("patch.shadow.example.com", &shadow).if_needed()])
            .annotate(MODE, "shadow"),
        mutating("b-enforced", [webhook("later.shadow.example.com", &later)]),
    ]))
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(answer.patch(), None, "the shadow's patch reached the answer");
    let keys = answer.annotation_keys();
    assert!(keys.iter().all(|k| !k.ends_with("round_0_index_0")), "the shadow left an annotation: {keys:?}");
    assert_eq!(later.only_request().label("shadowed"), None, "the later webhook saw the shadow's patch");
    expect_results(&gateway, "patch.shadow.example.com", &[("disagree/would_mutate", 1)]).await;
    assert_eq!(shadow.calls(), 1, "a shadow webhook is never reinvoked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_calls_beyond_the_in_flight_limit_are_dropped_and_counted() {
    let slow = MockWebhook::slow(Duration::from_secs(2)).spawn().await;
    let gateway = TestGateway::start(
        Fleet::of([
            validating("shadowed", [webhook("slow.limit.example.com", &slow)]).annotate(MODE, "shadow")
        ])
        .settings(json!({"shadowInFlightLimit": 1})),
    )
    .await;

    for _ in 0..3 {
        assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    }

    expect_results(&gateway, "slow.limit.example.com", &[("dropped/", 2), ("agree/", 1)]).await;
    assert_eq!(slow.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_shadow_calls_in_flight() {
    let delay = Duration::from_millis(1500);
    let slow = MockWebhook::denying("no").after(delay).spawn().await;
    let gateway = TestGateway::start(Fleet::of([validating(
        "shadowed",
        [webhook("slow.shutdown.example.com", &slow)],
    )
    .annotate(MODE, "shadow")]))
    .await;
    assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    assert!(eventually(Duration::from_secs(10), || async { slow.calls() == 1 }).await);

    // A second gateway of this process to read the (process-wide) registry once the first is gone.
    let observer = TestGateway::start(Fleet::of([validating(
        "observer",
        [webhook("observer.shutdown.example.com", &slow)],
    )]))
    .await;
    let started = Instant::now();
    gateway.shutdown().await;

    let replied = slow.replied();
    assert_eq!(replied, 0, "shutdown waited for the shadow call's answer: {:?}", started.elapsed());
    // Had the call gone on, its answer would have been compared and counted by now: a second
    // past the moment the webhook, from when the call reached it, would have answered.
    tokio::time::sleep_until(slow.only_request().at + delay + Duration::from_secs(1)).await;
    assert_eq!(shadow_results(&observer, "slow.shutdown.example.com").await, HashMap::new());
}

// ---------------------------------------------------------------------------------------------
// Canary

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_is_enforced_for_a_stable_share_of_objects() {
    let deny = MockWebhook::denying("canary says no").spawn().await;
    let gateway =
        TestGateway::start(Fleet::of([validating("canaried", [webhook("deny.canary.example.com", &deny)])
            .annotate(MODE, "canary")
            .annotate(PERCENT, "25")]))
        .await;

    let mut denied = Vec::new();
    for i in 0..400 {
        let answer = gateway.validate(&pod_named(&format!("web-{i}"))).await;
        if !answer.allowed() {
            assert_eq!(
                answer.message(),
                r#"admission webhook "deny.canary.example.com" denied the request: canary says no"#
            );
        }
        denied.push(!answer.allowed());
    }

    let share = denied.iter().filter(|d| **d).count();
    assert!((60..=140).contains(&share), "enforced for {share} of 400 objects, expected about 100");
    // Another request (another uid) for the same object lands on the same side.
    for i in (0..400).step_by(7) {
        let mut review = pod_named(&format!("web-{i}"));
        review["request"]["uid"] = json!(format!("again-{i}"));
        let again = gateway.validate(&review).await;
        assert_eq!(!again.allowed(), denied[i], "web-{i} changed sides");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_at_0_percent_is_only_shadowed_and_at_100_always_enforced() {
    let never = MockWebhook::denying("no").spawn().await;
    let always = MockWebhook::denying("no").spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        validating("canary-0", [webhook("zero.canary.example.com", &never)])
            .annotate(MODE, "canary")
            .annotate(PERCENT, "0"),
        validating("canary-100", [webhook("hundred.canary.example.com", &always)])
            .annotate(MODE, "canary")
            .annotate(PERCENT, "100"),
    ]))
    .await;

    for i in 0..5 {
        let answer = gateway.validate(&pod_named(&format!("db-{i}"))).await;
        assert_eq!(
            answer.message(),
            r#"admission webhook "hundred.canary.example.com" denied the request: no"#,
            "only the 100 % canary decides"
        );
    }

    // The shadowed side is compared with the decision, labelled canary.
    expect_results(&gateway, "zero.canary.example.com", &[("agree/", 5)]).await;
    let labels =
        &counted(&gateway, "admission_gateway_shadow_results_total", "zero.canary.example.com").await[0].0;
    assert!(labels.contains(&("mode".to_owned(), "canary".to_owned())), "{labels:?}");
    assert!(shadow_results(&gateway, "hundred.canary.example.com").await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Warn

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warn_mode_denial_becomes_a_warning() {
    let deny = MockWebhook::denying("image tag is mutable").spawn().await;
    let gateway =
        TestGateway::start(Fleet::of([
            validating("warned", [webhook("tags.warn.example.com", &deny)]).annotate(MODE, "warn")
        ]))
        .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.warnings(),
        [
            r#"admission-gateway warn mode: admission webhook "tags.warn.example.com" denied the request: image tag is mutable"#
        ]
    );
    assert_eq!(
        counted(&gateway, "admission_gateway_warn_denials_total", "tags.warn.example.com").await[0].1,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warn_mode_call_error_still_follows_failure_policy() {
    let broken = MockWebhook::answering(|_| reply::http(500, "text/plain", "boom")).spawn().await;
    let gateway = TestGateway::start(Fleet::of([validating(
        "warned",
        [webhook("broken.warn.example.com", &broken).set("failurePolicy", json!("Fail"))],
    )
    .annotate(MODE, "warn")]))
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    assert!(
        answer.message().contains(r#"failed calling webhook "broken.warn.example.com""#),
        "{}",
        answer.message()
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_mode_annotations_are_refused_naming_file_object_and_field() {
    let mock = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([
        validating("typo", [webhook("a.example.com", &mock)]).annotate(MODE, "shadw"),
        validating("half", [webhook("b.example.com", &mock)])
            .annotate(MODE, "canary")
            .annotate(PERCENT, "150"),
        mutating("loud", [webhook("c.example.com", &mock)]).annotate(MODE, "warn"),
        validating("stray", [webhook("d.example.com", &mock)]).annotate(PERCENT, "10"),
    ]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());

    let output = run(&["check", "--config", &config]).await;

    assert!(!output.status.success());
    let stdout = text(&output.stdout);
    for (object, field, words) in [
        (
            r#"ValidatingWebhookConfiguration "typo""#,
            "metadata.annotations[admission-gateway/mode]",
            r#"Unsupported value: "shadw""#,
        ),
        (
            r#"ValidatingWebhookConfiguration "half""#,
            "metadata.annotations[admission-gateway/canary-percent]",
            r#"Invalid value: "150""#,
        ),
        (
            r#"MutatingWebhookConfiguration "loud""#,
            "metadata.annotations[admission-gateway/mode]",
            r#"Unsupported value: "warn""#,
        ),
        (
            r#"ValidatingWebhookConfiguration "stray""#,
            "metadata.annotations[admission-gateway/canary-percent]",
            "Forbidden",
        ),
    ] {
        let line = stdout
            .lines()
            .find(|line| line.contains(object))
            .unwrap_or_else(|| panic!("no problem for {object} in:\n{stdout}"));
        for part in [config.as_str(), field, words] {
            assert!(line.contains(part), "{part:?} not in {line:?}");
        }
    }
    assert!(stdout.contains("configuration refused: 4 error(s)"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_awaits_and_shows_shadow_results() {
    let deny = MockWebhook::denying("would say no").after(Duration::from_millis(300)).spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([
        validating("shadowed", [webhook("deny.review.example.com", &deny)]).annotate(MODE, "shadow")
    ]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());
    let fixture = fixtures::path(POD_CREATE).display().to_string();

    let output = run(&["review", "--config", &config, "--stage", "validate", &fixture]).await;

    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    let expected = "Validating round 0: shadow shadowed/deny.review.example.com: shadow disagree (would_deny): denied: admission webhook \"deny.review.example.com\" denied the request: would say no";
    assert!(stdout.contains(expected), "{expected:?} not in:\n{stdout}");
}
