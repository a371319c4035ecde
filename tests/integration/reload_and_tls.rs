//! Hot reload of the fleet's configuration and of the serving certificate (docs/configuration.md, "Hot reload"), the
//! admin endpoints, and graceful shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use admission_gateway::certs::Ca;
use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{ca, eventually, https_client, validating, webhook, Fleet, MockWebhook, TestGateway};

/// How long a configuration change may take to be served (file events, else a 2 s poll).
const RELOAD_WITHIN: Duration = Duration::from_secs(6);
/// How long a certificate rotation may take to be served (a 2 s poll).
const ROTATION_WITHIN: Duration = Duration::from_secs(10);

fn healthz(address: SocketAddr) -> http::Request<Full<Bytes>> {
    http::Request::get(format!("https://{address}/healthz")).body(Full::new(Bytes::new())).unwrap()
}

/// The value of one metric line, e.g. `admission_gateway_config_generation`.
async fn metric(gateway: &TestGateway, series: &str) -> Option<u64> {
    let (status, text) = gateway.admin_get("/metrics").await;
    assert_eq!(status, 200);
    text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_configuration_is_served_within_seconds() {
    let allow = MockWebhook::allowing().spawn().await;
    let deny = MockWebhook::denying("new policy").spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;
    let review = fixtures::review(POD_CREATE);
    assert!(gateway.validate(&review).await.allowed());

    gateway.reconfigure(&Fleet::of([validating(
        "fleet",
        [webhook("allow.example.com", &allow), webhook("deny.example.com", &deny)],
    )]));

    let denied = eventually(RELOAD_WITHIN, || async { !gateway.validate(&review).await.allowed() }).await;
    assert!(denied, "the new validator is not served after {RELOAD_WITHIN:?}");
    let answer = gateway.validate(&review).await;
    assert_eq!(answer.message(), r#"admission webhook "deny.example.com" denied the request: new policy"#);
    assert_eq!(
        metric(&gateway, r#"admission_gateway_config_reloads_total{result="success"}"#).await,
        Some(1)
    );
    assert_eq!(metric(&gateway, "admission_gateway_config_generation").await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_configuration_is_refused_and_the_last_good_one_keeps_serving() {
    let deny = MockWebhook::denying("still here").spawn().await;
    let gateway = TestGateway::validating([webhook("deny.example.com", &deny)]).await;
    let review = fixtures::review(POD_CREATE);
    let failures = r#"admission_gateway_config_reloads_total{result="failure"}"#;
    assert_eq!(metric(&gateway, failures).await, Some(0));

    // Valid YAML, invalid configuration: timeoutSeconds must be 1–30.
    gateway.reconfigure(&Fleet::of([validating(
        "fleet",
        [webhook("deny.example.com", &deny).timeout_seconds(99)],
    )]));

    let refused = eventually(RELOAD_WITHIN, || async { metric(&gateway, failures).await == Some(1) }).await;
    assert!(refused, "the refusal is not counted after {RELOAD_WITHIN:?}");
    let answer = gateway.validate(&review).await;
    assert!(!answer.allowed(), "the last good configuration still denies");
    assert_eq!(answer.message(), r#"admission webhook "deny.example.com" denied the request: still here"#);
    assert_eq!(metric(&gateway, "admission_gateway_config_generation").await, Some(1));

    // Not even YAML: refused as well, still serving.
    gateway.write_config("webhooks: [unclosed");
    let refused_again =
        eventually(RELOAD_WITHIN, || async { metric(&gateway, failures).await == Some(2) }).await;
    assert!(refused_again);
    assert!(!gateway.validate(&review).await.allowed());

    // A good configuration again is picked up.
    let allow = MockWebhook::allowing().spawn().await;
    gateway.reconfigure(&Fleet::of([validating("fleet", [webhook("allow.example.com", &allow)])]));
    let recovered = eventually(RELOAD_WITHIN, || async { gateway.validate(&review).await.allowed() }).await;
    assert!(recovered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_answer_200() {
    let gateway = TestGateway::validating([]).await;

    for path in ["/healthz", "/readyz"] {
        assert_eq!(gateway.admin_get(path).await.0, 200, "admin {path}");
        assert_eq!(gateway.get(path).await.0, 200, "admission listener {path}");
    }
    let (status, metrics) = gateway.admin_get("/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains(r#"admission_gateway_config_webhooks{type="validating"} 0"#), "{metrics}");
    assert_eq!(gateway.get("/metrics").await.0, 404, "metrics only on the admin listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_serving_certificate_is_served_without_a_restart() {
    let gateway = TestGateway::validating([]).await;
    let second = Ca::new("the next CA").unwrap();
    let trusts_second = https_client(&second);
    let trusts_first = https_client(ca());
    assert!(
        send(&trusts_second, healthz(gateway.address())).await.is_err(),
        "before the rotation the gateway serves the first CA's certificate"
    );

    gateway.rotate_certificate(&second);

    let rotated = eventually(ROTATION_WITHIN, || async {
        send(&trusts_second, healthz(gateway.address())).await.is_ok()
    })
    .await;
    assert!(rotated, "the new certificate is not served after {ROTATION_WITHIN:?}");
    let error = send(&trusts_first, healthz(gateway.address())).await.unwrap_err();
    assert!(error.contains("UnknownIssuer"), "{error}");
}

/// The serving certificate renewed (same CA, new key) three times while clients open a new TLS
/// connection for every review: not one handshake or review fails, and the new certificates are
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_renewals_under_load_fail_no_handshake() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let allow = MockWebhook::allowing().spawn().await;
    let gateway = Arc::new(TestGateway::validating([webhook("allow.rotation.example.com", &allow)]).await);
    let body = fixtures::review(POD_CREATE).to_string();
    let (served, failed, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(std::sync::Mutex::new(Vec::<String>::new())),
        Arc::new(AtomicBool::new(false)),
    );
    let certificates = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (gateway, body, served, failed, stop, certificates) = (
            gateway.clone(),
            body.clone(),
            served.clone(),
            failed.clone(),
            stop.clone(),
            certificates.clone(),
        );
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let outcome = async {
                    let mut tls = gateway.connect_tls(Duration::from_secs(5)).await?;
                    let leaf = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec());
                    certificates.lock().unwrap().extend(leaf);
                    let head = format!(
                        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    tls.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
                    tls.write_all(body.as_bytes()).await.map_err(|e| e.to_string())?;
                    let mut answer = Vec::new();
                    let _ = tls.read_to_end(&mut answer).await;
                    let answer = String::from_utf8_lossy(&answer).into_owned();
                    if answer.starts_with("HTTP/1.1 200 ") && answer.contains("\"allowed\":true") {
                        Ok(())
                    } else {
                        Err(answer.chars().take(200).collect())
                    }
                }
                .await;
                match outcome {
                    Ok(()) => served.fetch_add(1, Ordering::Relaxed),
                    Err(error) => {
                        failed.lock().unwrap().push(error);
                        0
                    }
                };
            }
        }));
    }

    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        gateway.rotate_certificate(ca());
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }

    let failed = failed.lock().unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} failed: {:?}",
        failed.len(),
        served.load(Ordering::Relaxed),
        &failed[..failed.len().min(3)]
    );
    assert!(served.load(Ordering::Relaxed) > 100, "load ran: {}", served.load(Ordering::Relaxed));
    let seen = certificates.lock().unwrap().len();
    assert!(seen >= 3, "the renewed certificates were served: {seen} distinct");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_the_review_in_flight_then_stops_listening() {
    let slow = MockWebhook::slow(Duration::from_millis(500)).spawn().await;
    let gateway = TestGateway::validating([webhook("slow.example.com", &slow)]).await;
    let address = gateway.address();
    let in_flight = tokio::spawn(async move {
        let request = http::Request::post(format!("https://{address}/validate"))
            .body(Full::new(Bytes::from(fixtures::review(POD_CREATE).to_string())))
            .unwrap();
        send(&https_client(ca()), request).await
    });
    assert!(eventually(Duration::from_secs(2), || async { slow.calls() == 1 }).await);

    gateway.shutdown().await;

    let (status, body) = in_flight.await.unwrap().expect("the review in flight is answered");
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], json!(true));
    assert!(send(&https_client(ca()), healthz(address)).await.is_err(), "no longer listening");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_listener_also_speaks_http2() {
    use http_body_util::BodyExt as _;

    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;
    let mut tls = crate::support::client_tls(ca());
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(gateway.address()).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls)).connect(name, tcp).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "h2 is offered by ALPN");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let request = http::Request::post(format!("https://{}/validate", gateway.address()))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(fixtures::review(POD_CREATE).to_string())))
        .unwrap();

    let response = sender.send_request(request).await.expect("an HTTP/2 answer");

    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], json!(true));
    assert_eq!(allow.calls(), 1);
}
