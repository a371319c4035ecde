//! Requests that are not usable AdmissionReviews are refused with a 4xx and the reason, before
//! any webhook is called, and the gateway goes on serving.

use serde_json::json;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{webhook, MockWebhook, TestGateway};

const MAX_REVIEW_BYTES: usize = 3 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_3_mib_is_413_before_any_body_is_read() {
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        MAX_REVIEW_BYTES + 1
    );

    let status_line = gateway.raw_exchange(head, Vec::new()).await;

    assert!(status_line.starts_with("HTTP/1.1 413"), "{status_line:?}");
    assert_eq!(allow.calls(), 0);
    assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    assert_eq!(allow.calls(), 1, "the gateway keeps serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_growing_over_3_mib_is_413() {
    let gateway = TestGateway::validating([]).await;
    let head = "POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_owned();
    let chunk = vec![b' '; 64 * 1024];
    let mut body = Vec::new();
    for _ in 0..(MAX_REVIEW_BYTES / chunk.len() + 1) {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(&chunk);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");

    let status_line = gateway.raw_exchange(head, body).await;

    assert!(status_line.starts_with("HTTP/1.1 413"), "{status_line:?}");
    assert!(gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_sent_in_full_still_gets_its_413() {
    let gateway = TestGateway::validating([]).await;
    let oversized = json!({"apiVersion": "admission.k8s.io/v1", "padding": "x".repeat(MAX_REVIEW_BYTES)});

    for attempt in 0..5 {
        let (status, body) = gateway.post("/validate", oversized.to_string()).await;
        assert_eq!(status, 413, "attempt {attempt}: {body}");
        assert_eq!(
            body,
            format!("request body is larger than {MAX_REVIEW_BYTES} bytes"),
            "the reason, as text"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_exactly_3_mib_is_read() {
    let gateway = TestGateway::validating([]).await;
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["object"]["metadata"]["annotations"]["padding"] = json!("");
    let padding = MAX_REVIEW_BYTES - review.to_string().len();
    review["request"]["object"]["metadata"]["annotations"]["padding"] = json!("x".repeat(padding));
    assert_eq!(review.to_string().len(), MAX_REVIEW_BYTES);

    let answer = gateway.validate(&review).await;

    assert!(answer.allowed(), "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_reviews_are_400_with_the_reason() {
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;
    let review = fixtures::review(POD_CREATE);
    let with = |pointer: &str, value: serde_json::Value| {
        let mut changed = review.clone();
        *changed.pointer_mut(pointer).unwrap() = value;
        changed.to_string()
    };
    let without_request = {
        let mut changed = review.clone();
        changed.as_object_mut().unwrap().remove("request");
        changed.to_string()
    };
    let without_uid = {
        let mut changed = review.clone();
        changed["request"].as_object_mut().unwrap().remove("uid");
        changed.to_string()
    };
    let cases = [
        ("not json {".to_owned(), "request body is not JSON"),
        (with("/kind", json!("Pod")), r#"expected kind AdmissionReview, got "Pod""#),
        (
            with("/apiVersion", json!("admission.k8s.io/v2")),
            r#"unsupported apiVersion "admission.k8s.io/v2""#,
        ),
        (without_request, "AdmissionReview has no request"),
        (without_uid, "AdmissionReview request has no uid"),
        (with("/request/operation", json!("GET")), "request body is not a valid AdmissionReview"),
    ];

    for (body, reason) in cases {
        let (status, text) = gateway.post("/validate", body).await;
        assert_eq!(status, 400, "{reason}: {text}");
        assert!(text.contains(reason), "expected {reason:?} in {text:?}");
    }

    let (status, text) = gateway.post("/validate?timeout=soon", review.to_string()).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("invalid timeout"), "{text}");
    assert_eq!(allow.calls(), 0);
    assert!(gateway.validate(&review).await.allowed());
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert!(
        metrics.contains(r#"admission_gateway_bad_requests_total{stage="validate",reason="not_json"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_post_is_allowed_on_admission_endpoints() {
    let gateway = TestGateway::validating([]).await;

    for endpoint in ["/mutate", "/validate", "/admit"] {
        let (status, _) = gateway.get(endpoint).await;
        assert_eq!(status, 405, "GET {endpoint}");
    }
    let (status, _) = gateway.post("/elsewhere", "{}").await;
    assert_eq!(status, 404);
    assert!(gateway.mutate(&fixtures::review(POD_CREATE)).await.allowed());
}
