//! Limits under load (docs/operations.md, "Failure behaviour"): reviews and request bytes in flight are
//! capped with an immediate 429, connections are capped and idle ones closed.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::prometheus::total;
use crate::support::{eventually, validating, webhook, Fleet, MockWebhook, TestGateway};

/// POSTs `body` to `/validate` on a fresh TLS connection; the whole answer head and body.
async fn exchange(gateway: &TestGateway, body: &[u8]) -> String {
    let mut tls = gateway.connect_tls(Duration::from_secs(5)).await.expect("connected");
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let _ = tls.write_all(body).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_beyond_the_in_flight_cap_get_an_immediate_429() {
    // Held long enough that a loaded machine still sends the next review while they are in flight.
    let slow = MockWebhook::slow(Duration::from_secs(5)).spawn().await;
    let gateway = TestGateway::start(
        Fleet::of([validating("v", [webhook("slow.overload.example.com", &slow)])])
            .settings(json!({"maxReviewsInFlight": 2})),
    )
    .await;
    let review = fixtures::review(POD_CREATE);
    let body = review.to_string();

    let held = async { tokio::join!(gateway.validate(&review), gateway.validate(&review)) };
    let turned_away = async {
        assert!(eventually(Duration::from_secs(10), || async { slow.calls() == 2 }).await);
        let answer = exchange(&gateway, body.as_bytes()).await;
        // Whether the two held reviews could have ended by then: not before the webhook replies.
        (answer, slow.replied())
    };
    let ((first, second), (answer, replied_by_then)) = tokio::join!(held, turned_away);

    assert!(first.allowed() && second.allowed());
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(answer.contains("answering 2 reviews already (maxReviewsInFlight)"), "{answer}");
    // Not kept waiting for room: the 429 came while both held reviews were still in flight.
    assert_eq!(replied_by_then, 0, "the refusal waited for the reviews in flight to end");
    assert_eq!(slow.calls(), 2, "the refused review reached no webhook");
    // Room again once they are answered.
    assert!(gateway.validate(&review).await.allowed());
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert_eq!(
        total(
            &metrics,
            "admission_gateway_bad_requests_total",
            &[("stage", "validate"), ("reason", "too_many_reviews")]
        ),
        1.0
    );
    assert_eq!(total(&metrics, "admission_gateway_reviews_in_flight", &[]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bytes_beyond_the_cap_get_a_429() {
    // Held long enough that a loaded machine still sends the next review while they are in flight.
    let slow = MockWebhook::slow(Duration::from_secs(5)).spawn().await;
    let gateway = TestGateway::start(
        Fleet::of([validating("v", [webhook("slow.bytes.overload.example.com", &slow)])])
            .settings(json!({"maxRequestBytesInFlight": "3Mi"})),
    )
    .await;
    let review = fixtures::review(POD_CREATE);
    // A second review as large as the body limit allows does not fit beside the first.
    let mut large = review.clone();
    large["request"]["object"]["metadata"]["annotations"] = json!({"filler": ""});
    let room = 3 * 1024 * 1024 - 100 - large.to_string().len();
    large["request"]["object"]["metadata"]["annotations"] = json!({"filler": "x".repeat(room)});
    let large = large.to_string();
    assert_eq!(large.len(), 3 * 1024 * 1024 - 100);

    let held = gateway.validate(&review);
    let turned_away = async {
        assert!(eventually(Duration::from_secs(10), || async { slow.calls() == 1 }).await);
        exchange(&gateway, large.as_bytes()).await
    };
    let (first, answer) = tokio::join!(held, turned_away);

    assert!(first.allowed());
    assert!(answer.starts_with("HTTP/1.1 429 "), "{}", &answer[..answer.len().min(300)]);
    assert!(answer.contains("(maxRequestBytesInFlight)"), "{}", &answer[..answer.len().min(300)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_and_idle_ones_are_closed() {
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start_with(
        Fleet::of([validating("v", [webhook("allow.connections.overload.example.com", &allow)])]),
        |options| {
            options.max_connections = 2;
            options.idle_timeout = Duration::from_secs(1);
            // One cap for all the serving threads: a third one would accept a third connection.
            options.threads = 3;
        },
    )
    .await;

    let first = gateway.connect_tls(Duration::from_secs(5)).await.expect("first connection");
    let _second = gateway.connect_tls(Duration::from_secs(5)).await.expect("second connection");
    let third = gateway.connect_tls(Duration::from_millis(500)).await;
    assert!(third.is_err(), "a third connection was served at once");
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert_eq!(
        total(&metrics, "admission_gateway_connections", &[("listener", "admission")]),
        2.0,
        "{metrics}"
    );

    // The idle ones are closed after the idle timeout: the server ends the first one…
    let mut first = first;
    let mut byte = [0u8; 1];
    let ended = tokio::time::timeout(Duration::from_secs(10), first.read(&mut byte)).await;
    assert!(matches!(ended, Ok(Ok(0)) | Ok(Err(_))), "{ended:?}");
    // …and a new connection is served again.
    let answer = exchange(&gateway, fixtures::review(POD_CREATE).to_string().as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}
