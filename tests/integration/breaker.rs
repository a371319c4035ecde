//! Fast failure (docs/operations.md, "Failure behaviour"): a webhook whose calls keep getting no answer is
//! ejected and answered at once by its failurePolicy — the decision the API server would make,
//! without the wait — then probed, and brought back by an answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::prometheus::total;
use crate::support::{reply, validating, webhook, webhook_at, Fleet, MockWebhook, Reply, TestGateway};

const FAILED_OPEN: &str = "failed-open.validating.webhook.admission.k8s.io_round_0_index_0";

fn settings(fleet: Fleet) -> Fleet {
    fleet.settings(json!({"ejectAfterFailures": 3, "ejectFor": "1s"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_is_ejected_answered_at_once_then_probed_back() {
    let healthy = Arc::new(AtomicBool::new(false));
    let answers = healthy.clone();
    let hung = MockWebhook::answering(move |review| {
        if answers.load(Ordering::SeqCst) {
            reply::allow(review)
        } else {
            Reply::After(Duration::from_secs(10), Box::new(reply::allow(review)))
        }
    })
    .spawn()
    .await;
    let gateway = TestGateway::start(settings(Fleet::of([validating(
        "hangs",
        [webhook("hung.breaker.example.com", &hung).ignore().timeout_seconds(1)],
    )])))
    .await;

    // Three timeouts, each waited for (the 1 s timeout starts after `started`), each failing open.
    let mut waits = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
        waits.push(started.elapsed());
        assert!(waits[waits.len() - 1] >= Duration::from_secs(1), "not waited for: {waits:?}");
        assert!(answer.allowed() && answer.annotation(FAILED_OPEN).is_some(), "{}", answer.body);
    }
    // Ejected: the same decision (failed open, annotated), without the wait or a call. A call
    // cannot fail before its 1 s timeout (the waits above); an answer sooner than that is one
    // that did not wait, whatever the machine's load (no fixed bound on the round trip).
    let started = Instant::now();
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "ejected answer after {took:?}, the waits {waits:?}");
    assert!(
        answer.allowed() && answer.annotation(FAILED_OPEN) == Some("hung.breaker.example.com"),
        "{}",
        answer.body
    );
    assert_eq!(hung.calls(), 3);

    let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
    assert!(verbose.contains("[+]webhooks 1 ejected: hangs/hung.breaker.example.com since 20"), "{verbose}");
    let (code, _) = gateway.admin_get("/readyz").await;
    assert_eq!(code, 200, "an ejected webhook does not make the gateway unready");
    let (_, metrics) = gateway.admin_get("/metrics").await;
    let state = |state: &str| {
        total(
            &metrics,
            "admission_gateway_webhook_breaker",
            &[("webhook", "hung.breaker.example.com"), ("state", state)],
        )
    };
    assert_eq!(state("open"), 1.0, "{metrics}");
    assert_eq!(
        total(
            &metrics,
            "admission_gateway_webhook_ejections_total",
            &[("webhook", "hung.breaker.example.com")]
        ),
        1.0
    );

    // After ejectFor, one probe; the webhook answers now, and it is back.
    healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    assert!(answer.allowed() && answer.annotation(FAILED_OPEN).is_none(), "{}", answer.body);
    assert_eq!(hung.calls(), 4);
    let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
    assert!(verbose.contains("[+]webhooks ok"), "{verbose}");
    assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.annotation(FAILED_OPEN).is_none());
    assert_eq!(hung.calls(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_fail_webhook_rejects_as_its_last_error_did() {
    let (url, _) = crate::support::closed_port_url();
    let gateway = TestGateway::start(settings(Fleet::of([validating(
        "dead",
        [webhook_at("dead.breaker.example.com", &url)],
    )])))
    .await;

    let mut refused = Vec::new();
    for _ in 0..3 {
        refused.push(gateway.validate(&fixtures::review(POD_CREATE)).await);
    }
    let ejected = gateway.validate(&fixtures::review(POD_CREATE)).await;

    let real = &refused[2];
    assert!(!real.allowed() && real.message().contains("connection refused"), "{}", real.body);
    assert!(!ejected.allowed());
    assert_eq!(ejected.code(), real.code(), "the same status code");
    assert!(
        ejected.message().starts_with(real.message()),
        "the real error's words first:\n{}\n{}",
        ejected.message(),
        real.message()
    );
    assert!(ejected.message().contains("(ejected by admission-gateway since "), "{}", ejected.message());
    assert!(
        ejected.message().contains(" after 3 consecutive failures; not called)"),
        "{}",
        ejected.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_and_error_statuses_never_eject() {
    let deny = MockWebhook::denying("no").spawn().await;
    let broken = MockWebhook::answering(|_| reply::http(500, "text/plain", "boom")).spawn().await;
    let gateway = TestGateway::start(settings(Fleet::of([validating(
        "answers",
        [webhook("deny.breaker.example.com", &deny), webhook("broken.breaker.example.com", &broken).ignore()],
    )])))
    .await;

    for _ in 0..6 {
        assert!(!gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    }
    assert_eq!((deny.calls(), broken.calls()), (6, 6), "every call made");
    let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
    assert!(verbose.contains("[+]webhooks ok"), "{verbose}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eject_settings_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockWebhook::allowing().spawn().await;
    let fleet = Fleet::of([validating("v", [webhook("ok.breaker.example.com", &mock)])])
        .settings(json!({"ejectAfterFailures": -1, "ejectFor": "10m"}));
    let config = crate::support::binary::write(dir.path(), "fleet.yaml", &fleet.yaml());
    let output = crate::support::binary::run(&["check", "--config", &config]).await;
    let stdout = crate::support::binary::text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ejectAfterFailures: Invalid value: -1"), "{stdout}");
    assert!(stdout.contains("ejectFor: Invalid value: \"10m\""), "{stdout}");
}
