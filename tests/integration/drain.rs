//! The graceful stop of a rollout (`serve --drain-delay`, docs/deploying.md "Stopping"): not ready
//! at once, still serving — with `Connection: close` — for the delay, then no new connections.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{ca, eventually, http_client, https_client, webhook, MockWebhook, TestGateway};

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

    let drain = tokio::spawn(gateway.drain(Duration::from_secs(3)));
    // Not ready as soon as the drain starts: waited for as an event (the first 503, polled with
    // a bounded deadline), which must come while the drain is still in its delay.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut readiness = Vec::new();
    loop {
        let status = readyz().await;
        readiness.push(status.clone());
        if status == Ok(503) || drain.is_finished() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = |readiness: &[Result<u16, String>]| {
        format!("{} polls, the last {:?}", readiness.len(), readiness.last())
    };
    assert_eq!(readiness.last(), Some(&Ok(503)), "readiness during the drain: {}", seen(&readiness));
    assert!(!drain.is_finished(), "not ready only once the delay was over: {}", seen(&readiness));
    let during = post(https_client(ca())).await.expect("still served during the delay");
    assert_eq!(during.status(), 200);
    assert_eq!(during.headers().get(http::header::CONNECTION).map(|v| v.to_str().unwrap()), Some("close"));
    // The checks above ran inside the delay (a causal fact: the drain had not ended), however
    // slowly the machine ran them.
    assert!(!drain.is_finished(), "the checks did not all run inside the delay");

    drain.await.unwrap();
    let after = post(https_client(ca())).await;
    assert!(after.is_err(), "no new connections once drained: {after:?}");
    assert_eq!(deny.calls(), 2);
}

/// A rolling restart under load, as a Service in front of two replicas makes it: each client
/// keeps a keep-alive connection to a replica; when it must open a new one (the first, or after
/// `Connection: close`, or after an error) it picks a replica whose `/readyz` is 200 (the
/// endpoints controller's view). Replica A drains while the clients run: not one review is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_loses_no_review() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    let allow = MockWebhook::allowing().spawn().await;
    let a = TestGateway::validating([webhook("allow.rolling.example.com", &allow)]).await;
    let b = TestGateway::validating([webhook("allow.rolling.example.com", &allow)]).await;
    let replicas = [(a.address(), a.metrics_address()), (b.address(), b.metrics_address())];
    let review = Bytes::from(fixtures::review(POD_CREATE).to_string());
    let (answered, lost, reconnects) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(AtomicBool::new(false));

    let mut clients = Vec::new();
    for client in 0..8usize {
        let (review, answered, lost, reconnects, stop) =
            (review.clone(), answered.clone(), lost.clone(), reconnects.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut connection: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> = None;
            let mut turn = client;
            while !stop.load(Ordering::Relaxed) {
                if connection.as_ref().is_none_or(|c| c.is_closed()) {
                    reconnects.fetch_add(1, Ordering::Relaxed);
                    connection = connect_to_a_ready_replica(&replicas, &mut turn).await;
                    if connection.is_none() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                }
                let sender = connection.as_mut().unwrap();
                let request = http::Request::post("/validate")
                    .header(http::header::HOST, "127.0.0.1")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(review.clone()))
                    .unwrap();
                match sender.send_request(request).await {
                    Ok(response) if response.status() == 200 => {
                        answered.fetch_add(1, Ordering::Relaxed);
                        if response.headers().get(http::header::CONNECTION).is_some_and(|v| v == "close") {
                            connection = None;
                        }
                    }
                    _ => {
                        lost.fetch_add(1, Ordering::Relaxed);
                        connection = None;
                    }
                }
            }
        }));
    }

    // Events, not sleeps: the load is running (20 answers), then A drains while it runs, then
    // 20 more answers arrive after A has stopped.
    let answers_reach = |count: usize| {
        let answered = answered.clone();
        eventually(Duration::from_secs(30), move || {
            let answered = answered.clone();
            async move { answered.load(Ordering::Relaxed) >= count }
        })
    };
    assert!(answers_reach(21).await, "the load did not start: {answered:?}");
    let before = answered.load(Ordering::Relaxed);
    a.drain(Duration::from_millis(1000)).await;
    let drained = answered.load(Ordering::Relaxed);
    let went_on = answers_reach(drained + 21).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }

    let (answered, lost) = (answered.load(Ordering::Relaxed), lost.load(Ordering::Relaxed));
    assert!(went_on && answered > drained + 20, "load ran throughout: {before}, {drained} then {answered}");
    assert_eq!(lost, 0, "{lost} reviews lost of {answered}");
    assert!(reconnects.load(Ordering::Relaxed) > 8, "the clients moved to replica B");
    drop(b);
}

/// A new HTTP/1.1 TLS connection to the next replica (round robin from `turn`) whose
/// `/readyz` answers 200.
async fn connect_to_a_ready_replica(
    replicas: &[(std::net::SocketAddr, std::net::SocketAddr)],
    turn: &mut usize,
) -> Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    for _ in 0..replicas.len() {
        *turn += 1;
        let (address, metrics) = replicas[*turn % replicas.len()];
        let readyz =
            http::Request::get(format!("http://{metrics}/readyz")).body(Full::new(Bytes::new())).unwrap();
        if !matches!(send(&http_client(), readyz).await, Ok((200, _))) {
            continue;
        }
        let connector =
            tokio_rustls::TlsConnector::from(std::sync::Arc::new(crate::support::client_tls(ca())));
        let Ok(tcp) = tokio::net::TcpStream::connect(address).await else { continue };
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let Ok(tls) = connector.connect(name, tcp).await else { continue };
        let Ok((sender, connection)) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await
        else {
            continue;
        };
        tokio::spawn(connection);
        return Some(sender);
    }
    None
}
