//! The graceful stop of a rollout (`serve --drain-delay`, README "Failure behaviour"): not ready
//! at once, still serving — with `Connection: close` — for the delay, then no new connections.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{ca, http_client, https_client, webhook, MockWebhook, TestGateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_fails_readiness_at_once_keeps_serving_for_the_delay_then_stops_accepting() {
    let deny = MockWebhook::denying("guarded").spawn().await;
    let gateway = TestGateway::validating([webhook("deny.example.com", &deny)]).await;
    let (address, metrics) = (gateway.address(), gateway.metrics_address());
    let review = fixtures::review(POD_CREATE).to_string();
    let readyz = || async {
        let request =
            http::Request::get(format!("http://{metrics}/readyz")).body(Full::new(Bytes::new())).unwrap();
        send(&http_client(), request).await.map(|(status, _)| status)
    };
    let post = |client: crate::support::HttpsClient| {
        let review = review.clone();
        async move {
            let request = http::Request::post(format!("https://{address}/validate"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(review)))
                .unwrap();
            client.request(request).await
        }
    };
    assert_eq!(readyz().await, Ok(200));
    let before = post(https_client(ca())).await.expect("served");
    assert!(before.headers().get(http::header::CONNECTION).is_none(), "keep-alive while serving");

    let started = Instant::now();
    let drain = tokio::spawn(gateway.drain(Duration::from_millis(1500)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(readyz().await, Ok(503), "not ready as soon as the drain starts");
    let during = post(https_client(ca())).await.expect("still served during the delay");
    assert_eq!(during.status(), 200);
    assert_eq!(during.headers().get(http::header::CONNECTION).map(|v| v.to_str().unwrap()), Some("close"));
    assert!(started.elapsed() < Duration::from_millis(1500), "the checks ran inside the delay");

    drain.await.unwrap();
    let after = post(https_client(ca())).await;
    assert!(after.is_err(), "no new connections once drained: {after:?}");
    assert_eq!(deny.calls(), 2);
}
