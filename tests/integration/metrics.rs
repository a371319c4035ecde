//! The per-webhook metrics on `/metrics` (docs/operations.md, "Metrics"): kube-apiserver's own webhook
//! families under their exact names and labels, so its dashboards work pointed at the
//! gateway, and the gateway's own. The registry is the process's: every test reads only the
//! series of webhooks named for it.

use std::time::Duration;

use serde_json::json;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::prometheus::{self, total};
use crate::support::{eventually, mutating, reply, validating, webhook, Fleet, MockWebhook, TestGateway};

async fn scrape(gateway: &TestGateway) -> String {
    let (code, text) = gateway.admin_get("/metrics").await;
    assert_eq!(code, 200, "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_calls_are_counted_under_the_api_servers_names_and_labels() {
    let allow = MockWebhook::allowing().spawn().await;
    let deny = MockWebhook::denying("no").spawn().await;
    let broken = MockWebhook::answering(|_| reply::http(500, "text/plain", "boom")).spawn().await;
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}]))
            .spawn()
            .await;
    let gateway = TestGateway::start(Fleet::of([
        mutating("m", [webhook("label.metrics.example.com", &label)]),
        validating(
            "v",
            [
                webhook("allow.metrics.example.com", &allow),
                webhook("open.metrics.example.com", &broken).ignore(),
                webhook("closed.metrics.example.com", &broken).set("failurePolicy", json!("Fail")),
                webhook("deny.metrics.example.com", &deny),
            ],
        ),
    ]))
    .await;

    assert!(gateway.mutate(&fixtures::review(POD_CREATE)).await.allowed());
    for _ in 0..2 {
        assert!(!gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    }
    let text = scrape(&gateway).await;

    let requests = |name: &str, kind: &str, code: &str, rejected: &str| {
        total(
            &text,
            "apiserver_admission_webhook_request_total",
            &[
                ("name", name),
                ("type", kind),
                ("operation", "CREATE"),
                ("code", code),
                ("rejected", rejected),
            ],
        )
    };
    assert_eq!(requests("label.metrics.example.com", "admit", "200", "false"), 1.0);
    assert_eq!(requests("allow.metrics.example.com", "validating", "200", "false"), 2.0);
    // A denial without a code is a 400 (upstream webhook/errors/statuserror.go).
    assert_eq!(requests("deny.metrics.example.com", "validating", "400", "true"), 2.0);
    // A webhook answering HTTP 500: a calling error, rejected only under Fail.
    assert_eq!(requests("open.metrics.example.com", "validating", "500", "false"), 2.0);
    assert_eq!(requests("closed.metrics.example.com", "validating", "500", "true"), 2.0);

    let rejections = |name: &str, error_type: &str, code: &str| {
        total(
            &text,
            "apiserver_admission_webhook_rejection_count",
            &[
                ("name", name),
                ("type", "validating"),
                ("operation", "CREATE"),
                ("error_type", error_type),
                ("rejection_code", code),
            ],
        )
    };
    assert_eq!(rejections("deny.metrics.example.com", "no_error", "400"), 2.0);
    assert_eq!(rejections("closed.metrics.example.com", "calling_webhook_error", "500"), 2.0);
    assert!(prometheus::matching(
        &text,
        "apiserver_admission_webhook_rejection_count",
        &[("name", "open.metrics.example.com")]
    )
    .is_empty());
    assert!(prometheus::matching(
        &text,
        "apiserver_admission_webhook_rejection_count",
        &[("name", "allow.metrics.example.com")]
    )
    .is_empty());

    let fail_open = |name: &str| {
        total(&text, "apiserver_admission_webhook_fail_open_count", &[("name", name), ("type", "validating")])
    };
    assert_eq!(fail_open("open.metrics.example.com"), 2.0);
    assert_eq!(fail_open("closed.metrics.example.com"), 0.0);

    // Latency histograms: one observation a call, in the API server's family and the gateway's.
    let observed = total(
        &text,
        "apiserver_admission_webhook_admission_duration_seconds_count",
        &[
            ("name", "deny.metrics.example.com"),
            ("type", "validating"),
            ("operation", "CREATE"),
            ("rejected", "true"),
        ],
    );
    assert_eq!(observed, 2.0);
    let buckets = prometheus::matching(
        &text,
        "apiserver_admission_webhook_admission_duration_seconds_bucket",
        &[("name", "label.metrics.example.com"), ("type", "admit")],
    );
    assert!(buckets.iter().any(|(labels, _)| labels["le"] == "0.0025"), "sub-5 ms buckets: {buckets:?}");
    assert!(buckets.iter().any(|(labels, _)| labels["le"] == "+Inf"));
    let gateway_view = |name: &str, outcome: &str| {
        total(
            &text,
            "admission_gateway_webhook_duration_seconds_count",
            &[("webhook", name), ("type", "validating"), ("outcome", outcome)],
        )
    };
    assert_eq!(gateway_view("deny.metrics.example.com", "denied"), 2.0);
    assert_eq!(gateway_view("allow.metrics.example.com", "allowed"), 2.0);
    assert_eq!(gateway_view("closed.metrics.example.com", "error"), 2.0);
    assert!(total(&text, "admission_gateway_review_gateway_seconds_count", &[]) >= 3.0);
    assert!(text.contains("# HELP apiserver_admission_webhook_request_total "), "described families");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_webhooks_calls_that_end_differently_are_counted_apart() {
    // Allows, denies, allows, denies: one serving thread, so its cached series handles
    // (src/pipeline/observe.rs) must tell the calls apart.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flip = MockWebhook::answering(move |review| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst).is_multiple_of(2) {
            reply::allow(review)
        } else {
            reply::deny(review, "every other one")
        }
    })
    .spawn()
    .await;
    let name = "flip.metrics.example.com";
    let gateway = TestGateway::start_with(Fleet::of([validating("v", [webhook(name, &flip)])]), |options| {
        options.threads = 1
    })
    .await;
    for expected in [true, false, true, false] {
        assert_eq!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed(), expected);
    }
    let text = scrape(&gateway).await;
    let requests = |code: &str, rejected: &str| {
        total(
            &text,
            "apiserver_admission_webhook_request_total",
            &[
                ("name", name),
                ("type", "validating"),
                ("operation", "CREATE"),
                ("code", code),
                ("rejected", rejected),
            ],
        )
    };
    assert_eq!((requests("200", "false"), requests("400", "true")), (2.0, 2.0));
    let gateway_view = |outcome: &str| {
        total(
            &text,
            "admission_gateway_webhook_duration_seconds_count",
            &[("webhook", name), ("type", "validating"), ("outcome", outcome)],
        )
    };
    assert_eq!((gateway_view("allowed"), gateway_view("denied")), (2.0, 2.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_condition_exclusions_errors_and_time_are_counted() {
    let mock = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        validating(
            "v",
            [
                webhook("skipped.conditions.metrics.example.com", &mock)
                    .set("matchConditions", json!([{"name": "never", "expression": "request.dryRun"}])),
                webhook("broken.conditions.metrics.example.com", &mock).ignore().set(
                    "matchConditions",
                    json!([{"name": "missing", "expression": "object.spec.missing == 1"}]),
                ),
            ],
        ),
        mutating(
            "m",
            [webhook("skipped.conditions.metrics.example.com", &mock)
                .set("matchConditions", json!([{"name": "never", "expression": "request.dryRun"}]))],
        ),
    ]))
    .await;

    assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    assert!(gateway.mutate(&fixtures::review(POD_CREATE)).await.allowed());
    let text = scrape(&gateway).await;

    let exclusions = |kind: &str| {
        total(
            &text,
            "apiserver_admission_match_condition_exclusions_total",
            &[
                ("name", "skipped.conditions.metrics.example.com"),
                ("kind", "webhook"),
                ("type", kind),
                ("operation", "CREATE"),
            ],
        )
    };
    assert_eq!(exclusions("validate"), 1.0);
    assert_eq!(exclusions("admit"), 1.0);
    assert_eq!(
        total(
            &text,
            "apiserver_admission_match_condition_evaluation_errors_total",
            &[("name", "broken.conditions.metrics.example.com"), ("kind", "webhook"), ("type", "validating")],
        ),
        1.0
    );
    assert_eq!(
        total(
            &text,
            "apiserver_admission_match_condition_evaluation_seconds_count",
            &[("name", "broken.conditions.metrics.example.com"), ("type", "validating")],
        ),
        1.0
    );
    assert_eq!(mock.calls(), 0, "neither webhook is called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_whose_caller_goes_away_is_counted_as_abandoned() {
    let slow = MockWebhook::slow(Duration::from_secs(2)).spawn().await;
    let gateway = TestGateway::validating([webhook("slow.abandoned.metrics.example.com", &slow)]).await;
    let before = total(&scrape(&gateway).await, "admission_gateway_reviews_abandoned_total", &[]);

    // The client gives up (the connection closes) while the webhook is still thinking.
    let review = fixtures::review(POD_CREATE);
    let in_flight = |text: &str| {
        total(
            text,
            "admission_gateway_webhook_in_flight",
            &[("webhook", "slow.abandoned.metrics.example.com")],
        )
    };
    let gave_up = tokio::time::timeout(Duration::from_millis(300), gateway.validate(&review)).await;
    assert!(gave_up.is_err(), "the review was answered before the webhook did");

    let counted = eventually(Duration::from_secs(5), || async {
        total(&scrape(&gateway).await, "admission_gateway_reviews_abandoned_total", &[]) > before
    })
    .await;
    assert!(counted, "{}", scrape(&gateway).await);
    // The abandoned call is no longer in flight.
    assert_eq!(in_flight(&scrape(&gateway).await), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_and_connections_opened_are_counted_per_webhook() {
    // Held long enough for a loaded machine to read the gauge while the calls are out.
    let slow = MockWebhook::slow(Duration::from_secs(5)).spawn().await;
    let gateway = TestGateway::validating([webhook("slow.inflight.metrics.example.com", &slow)]).await;
    let host = slow.url().trim_start_matches("https://").split('/').next().unwrap().to_owned();
    let in_flight = |text: &str| {
        total(
            text,
            "admission_gateway_webhook_in_flight",
            &[("webhook", "slow.inflight.metrics.example.com")],
        )
    };

    let review = fixtures::review(POD_CREATE);
    let (answers, during) = tokio::join!(
        async { futures_util::future::join_all((0..3).map(|_| gateway.validate(&review))).await },
        async {
            // The event: the three calls have reached the webhook (which holds them).
            let arrived = eventually(Duration::from_secs(5), || async { slow.calls() == 3 }).await;
            let during = in_flight(&scrape(&gateway).await);
            (arrived, during, slow.replied())
        }
    );
    assert!(answers.iter().all(|answer| answer.allowed()));
    let (arrived, during, replied) = during;
    assert!(arrived && replied == 0, "the three calls were not all held at once ({replied} replied)");
    assert_eq!(during, 3.0, "three calls in flight while the webhook holds them");
    assert_eq!(in_flight(&scrape(&gateway).await), 0.0);

    // Three concurrent calls opened three connections; three more one after another reuse them.
    for _ in 0..3 {
        assert!(gateway.validate(&review).await.allowed());
    }
    let text = scrape(&gateway).await;
    let opened = total(
        &text,
        "admission_gateway_upstream_connections_total",
        &[("host", &host), ("result", "opened")],
    );
    assert_eq!(opened, 3.0, "{host}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_refused_before_sending_are_observed_as_the_api_server_does() {
    let unknown = MockWebhook::allowing().spawn().await;
    // A legacy `Unknown` side effect: a dry run is refused before any call, which the API
    // server counts as an attempt on its internal-error path (code 0).
    let gateway = TestGateway::start(Fleet::of([validating(
        "legacy",
        [webhook("unknown.dryrun.metrics.example.com", &unknown).side_effects("Unknown")],
    )]))
    .await;

    assert!(!gateway
        .validate(&fixtures::review(crate::support::fixtures::POD_CREATE_DRY_RUN))
        .await
        .allowed());
    let text = scrape(&gateway).await;

    let name = ("name", "unknown.dryrun.metrics.example.com");
    assert_eq!(
        total(
            &text,
            "apiserver_admission_webhook_request_total",
            &[name, ("code", "0"), ("rejected", "true")]
        ),
        1.0,
        "{:?}",
        prometheus::matching(&text, "apiserver_admission_webhook_request_total", &[name])
    );
    assert_eq!(
        total(
            &text,
            "apiserver_admission_webhook_admission_duration_seconds_count",
            &[name, ("rejected", "true")]
        ),
        1.0
    );
    assert_eq!(
        total(
            &text,
            "apiserver_admission_webhook_rejection_count",
            &[name, ("error_type", "apiserver_internal_error"), ("rejection_code", "0")]
        ),
        1.0
    );
    // Not a call the gateway made: not in its own latency family.
    assert!(prometheus::matching(
        &text,
        "admission_gateway_webhook_duration_seconds_count",
        &[("webhook", name.1)]
    )
    .is_empty());
    assert_eq!(unknown.calls(), 0);
}
