//! Call errors and `failurePolicy` (docs/semantics.md §9), deadlines and the `?timeout=` sent
//! (§7.3, §7.4), response checks (§8) and TLS trust (§7.1).

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{
    base64, mutating, reply, validating, webhook, webhook_at, Fleet, MockWebhook, TestGateway,
};
use admission_gateway::certs::Ca;

/// `response.status.details.causes[0].message`.
fn cause(answer: &crate::support::Answer) -> &str {
    answer.review["response"]["status"]["details"]["causes"][0]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_under_fail_is_an_internal_error() {
    let (url, port) = crate::support::closed_port_url();
    let gateway = TestGateway::validating([webhook_at("dead.example.com", &url)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    assert_eq!(answer.reason(), "InternalError");
    let expected = format!(
        r#"Internal error occurred: failed calling webhook "dead.example.com": failed to call webhook: Post "https://127.0.0.1:{port}/"#
    );
    assert!(answer.message().starts_with(&expected), "{}", answer.message());
    assert!(answer.message().contains("connection refused"), "{}", answer.message());
    assert_eq!(
        Some(cause(&answer)),
        answer.message().strip_prefix("Internal error occurred: "),
        "details.causes[0] is the message without the prefix"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_under_ignore_fails_open_at_its_index_among_matching_webhooks() {
    let (url, _) = crate::support::closed_port_url();
    let secrets = MockWebhook::allowing().spawn().await;
    let fine = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("secrets.example.com", &secrets).rule(&["*"], &["secrets"]),
        webhook("fine.example.com", &fine),
        webhook_at("dead.example.com", &url).ignore(),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.annotation("failed-open.validating.webhook.admission.k8s.io_round_0_index_1"),
        Some("dead.example.com"),
        "K counts matching webhooks only: {:?}",
        answer.annotation_keys()
    );
    assert_eq!(answer.annotation("failed-open.validating.webhook.admission.k8s.io_round_0_index_2"), None);
    assert_eq!(fine.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mutating_webhook_under_ignore_fails_open_at_its_index_in_the_full_list() {
    let (url, _) = crate::support::closed_port_url();
    let secrets = MockWebhook::allowing().spawn().await;
    let after = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::mutating([
        webhook("secrets.example.com", &secrets).rule(&["*"], &["secrets"]),
        webhook_at("dead.example.com", &url).ignore(),
        webhook("after.example.com", &after),
    ])
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.annotation("failed-open.mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some("dead.example.com"),
        "{:?}",
        answer.annotation_keys()
    );
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some(r#"{"configuration":"fleet","webhook":"dead.example.com","mutated":false}"#)
    );
    assert_eq!(after.calls(), 1, "the chain goes on after failing open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_under_ignore_is_given_up_after_its_timeout() {
    let hanging = MockWebhook::slow(Duration::from_secs(3)).spawn().await;
    let gateway =
        TestGateway::validating([webhook("hanging.example.com", &hanging).timeout_seconds(1).ignore()]).await;

    let started = Instant::now();
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    let (took, replied) = (started.elapsed(), hanging.replied());

    assert!(answer.allowed(), "{}", answer.body);
    // No wall-clock window: the call's timer starts after `started`, so the answer cannot come
    // before the 1 s timeout; and it came while the webhook was still holding its 3 s answer.
    assert!(took >= Duration::from_secs(1), "given up before its 1 s timeout: {took:?}");
    assert_eq!(replied, 0, "the gateway waited for the webhook's own answer ({took:?})");
    assert_eq!(hanging.timeouts(), ["1s"]);
    assert_eq!(
        answer.annotation("failed-open.validating.webhook.admission.k8s.io_round_0_index_0"),
        Some("hanging.example.com")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_under_fail_is_an_internal_error_after_its_timeout() {
    let hanging = MockWebhook::slow(Duration::from_secs(3)).spawn().await;
    let gateway =
        TestGateway::validating([webhook("hanging.example.com", &hanging).timeout_seconds(1)]).await;

    let started = Instant::now();
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    let (took, replied) = (started.elapsed(), hanging.replied());

    assert!(took >= Duration::from_secs(1), "given up before its 1 s timeout: {took:?}");
    assert_eq!(replied, 0, "the gateway waited for the webhook's own answer ({took:?})");
    assert_eq!(answer.code(), Some(500));
    let expected = format!(
        r#"Internal error occurred: failed calling webhook "hanging.example.com": failed to call webhook: Post "{}?timeout=1s": "#,
        hanging.url()
    );
    assert!(answer.message().starts_with(&expected), "{}", answer.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_with_the_default_timeout_is_sent_timeout_10s() {
    let plain = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("plain.example.com", &plain)]).await;

    gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(plain.timeouts(), ["10s"]);
    assert_eq!(plain.only_request().path, "/webhook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_timeout_bounds_each_webhooks_timeout_as_it_runs_down() {
    let first = MockWebhook::slow(Duration::from_secs(1)).spawn().await;
    let second = MockWebhook::slow(Duration::from_secs(1)).spawn().await;
    let gateway = TestGateway::mutating([
        webhook("first.example.com", &first).timeout_seconds(10),
        webhook("second.example.com", &second).timeout_seconds(10),
    ])
    .await;

    let answer = gateway.review("/mutate?timeout=5s", &fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(first.timeouts(), ["5s"]);
    assert_eq!(second.timeouts(), ["4s"], "5 s less the first call's 1 s");
}

/// Four hanging `Ignore` webhooks of 2 s each behind a caller that waits 5 s: the API server
/// would time the whole request out (8 s of calls); the gateway spends its budget (5 s less
/// the 500 ms margin), fails the rest open at once, and answers in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_ignore_webhooks_cannot_make_the_answer_miss_the_callers_deadline() {
    let mut mocks = Vec::new();
    for _ in 0..4 {
        mocks.push(MockWebhook::slow(Duration::from_secs(10)).spawn().await);
    }
    let hooks = mocks
        .iter()
        .enumerate()
        .map(|(i, mock)| webhook(&format!("hang-{i}.example.com"), mock).timeout_seconds(2).ignore());
    let gateway = TestGateway::mutating(hooks).await;

    let started = Instant::now();
    let answer = gateway.review("/mutate?timeout=5s", &fixtures::review(POD_CREATE)).await;
    let took = started.elapsed();

    assert!(answer.allowed(), "{}", answer.body);
    // The bounds are the request's own: the caller gives up 5 s after it sent the review (and
    // `started` is before that), and the gateway's budget (5 s less the 500 ms margin) starts
    // when it received the review, after `started`: spending it all cannot end sooner.
    let (caller, budget) = (Duration::from_secs(5), Duration::from_millis(4500));
    assert!(took < caller, "answered after {took:?}, past the caller's {caller:?}");
    assert!(took >= budget, "the budget ({budget:?}) was not spent: {took:?}");
    let calls: Vec<usize> = mocks.iter().map(|mock| mock.calls()).collect();
    assert_eq!(calls, [1, 1, 1, 0], "the third call gets the 0.5 s left; the fourth is not called");
    assert_eq!(mocks[2].timeouts(), ["1s"], "0.5 s left, rounded up as the API server writes it");
    for i in 0..4 {
        assert_eq!(
            answer.annotation(&format!("failed-open.mutation.webhook.admission.k8s.io_round_0_index_{i}")),
            Some(format!("hang-{i}.example.com").as_str()),
            "every webhook failed open, called or not"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_webhook_the_budget_cannot_cover_rejects_the_request_naming_it() {
    let slow = MockWebhook::slow(Duration::from_secs(10)).spawn().await;
    let strict = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::mutating([
        webhook("slow.example.com", &slow).timeout_seconds(2).ignore(),
        webhook("strict.example.com", &strict).timeout_seconds(5),
    ])
    .await;

    let answer = gateway.review("/mutate?timeout=2s", &fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    assert!(
        answer.message().starts_with(
            r#"Internal error occurred: failed calling webhook "strict.example.com": not called: deadline budget exhausted"#
        ),
        "{}",
        answer.message()
    );
    assert_eq!(strict.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_timeout_is_refused_and_a_huge_one_is_capped_never_a_panic() {
    let allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([webhook("allow.example.com", &allow)]).await;

    let (status, body) = gateway
        .post("/validate?timeout=9300000000000000000s", fixtures::review(POD_CREATE).to_string())
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.starts_with("invalid timeout query parameter"), "{body}");
    let (status, body) =
        gateway.post("/validate?timeout=-5s", fixtures::review(POD_CREATE).to_string()).await;
    assert_eq!(status, 400, "{body}");

    let answer = gateway.review("/validate?timeout=2562047h", &fixtures::review(POD_CREATE)).await;
    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(allow.timeouts(), ["10s"], "the webhook's own timeout, the caller's being larger");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_keeps_its_code_and_reason_and_ignore_does_not_turn_it_into_an_allow() {
    let forbid = MockWebhook::answering(|review| {
        reply::respond(
            review,
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "not in this namespace"}}),
        )
    })
    .spawn()
    .await;
    let gateway = TestGateway::validating([webhook("forbid.example.com", &forbid).ignore()]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(403));
    assert_eq!(answer.reason(), "Forbidden");
    assert_eq!(answer.review["response"]["status"]["status"], "Failure");
    assert_eq!(
        answer.message(),
        r#"admission webhook "forbid.example.com" denied the request: not in this namespace"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_500_from_a_webhook_under_fail_quotes_its_body() {
    let broken = MockWebhook::answering(|_| {
        reply::http(500, "text/plain; charset=utf-8", "webhook internal server error\n")
    })
    .spawn()
    .await;
    let gateway = TestGateway::validating([webhook("broken.example.com", &broken)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(answer.code(), Some(500));
    assert_eq!(
        answer.message(),
        r#"Internal error occurred: failed calling webhook "broken.example.com": failed to call webhook: an error on the server ("webhook internal server error") has prevented the request from succeeding"#
    );
}

/// Answers with `response` built from the received review, then the message the gateway gave.
async fn message_for_response(
    mutating_webhook: bool,
    answer: impl Fn(&Value) -> Value + Send + Sync + 'static,
) -> (String, String) {
    let odd = MockWebhook::answering(move |review| crate::support::Reply::Json(answer(review))).spawn().await;
    let hook = webhook("odd.example.com", &odd);
    let gateway = if mutating_webhook {
        TestGateway::mutating([hook]).await
    } else {
        TestGateway::validating([hook]).await
    };
    let answer = gateway
        .review(if mutating_webhook { "/mutate" } else { "/validate" }, &fixtures::review(POD_CREATE))
        .await;
    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    (answer.message().to_owned(), odd.only_request().uid().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_with_another_uid_is_invalid() {
    let (message, sent) = message_for_response(false, |review| {
        json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
               "response": {"uid": "not-the-one-sent", "allowed": true}})
    })
    .await;

    assert_eq!(
        message,
        format!(
            r#"Internal error occurred: failed calling webhook "odd.example.com": received invalid webhook response: expected response.uid="{sent}", got "not-the-one-sent""#
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_response_without_api_version_is_invalid() {
    let (message, _) = message_for_response(false, |review| {
        json!({"kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true}})
    })
    .await;

    assert_eq!(
        message,
        r#"Internal error occurred: failed calling webhook "odd.example.com": received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=AdmissionReview"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validating_webhook_may_not_return_a_patch() {
    let (message, _) = message_for_response(false, |review| {
        match reply::patch(review, &json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])) {
            crate::support::Reply::Json(body) => body,
            _ => unreachable!(),
        }
    })
    .await;

    assert_eq!(
        message,
        r#"Internal error occurred: failed calling webhook "odd.example.com": received invalid webhook response: validating webhook may not return response.patch"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhook_must_say_its_patch_type() {
    let (message, _) = message_for_response(true, |review| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true, "patch": base64("[]")}})
    })
    .await;

    assert_eq!(
        message,
        r#"Internal error occurred: failed calling webhook "odd.example.com": received invalid webhook response: webhook returned response.patch but not response.patchType"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_type_other_than_json_patch_is_a_call_error() {
    let (message, _) = message_for_response(true, |review| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true,
                            "patch": base64(r#"[{"op":"add","path":"/metadata/labels/x","value":"y"}]"#),
                            "patchType": "JSONMergePatch"}})
    })
    .await;

    assert_eq!(
        message,
        r#"Internal error occurred: failed calling webhook "odd.example.com": unsupported patch type "JSONMergePatch""#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_is_not_json_is_a_call_error() {
    let (message, _) = message_for_response(true, |review| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true,
                            "patch": base64("not json"), "patchType": "JSONPatch"}})
    })
    .await;

    assert!(
        message.starts_with(
            r#"Internal error occurred: failed calling webhook "odd.example.com": received undecodable patch in webhook response: "#
        ),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_whose_certificate_its_ca_bundle_does_not_trust_fails_the_call() {
    let other = Ca::new("some other CA").unwrap();
    let mock = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(Fleet::of([
        validating("closed", [webhook("strict.example.com", &mock).ca_bundle(&other.ca_bundle())]),
        mutating("open", [webhook("lenient.example.com", &mock).ca_bundle(&other.ca_bundle()).ignore()]),
    ]))
    .await;

    let mutated = gateway.mutate(&fixtures::review(POD_CREATE)).await;
    let validated = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(mutated.allowed(), "Ignore fails open: {}", mutated.body);
    assert_eq!(
        mutated.annotation("failed-open.mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some("lenient.example.com")
    );
    assert!(!validated.allowed());
    assert_eq!(validated.code(), Some(500));
    let expected = format!(
        r#"Internal error occurred: failed calling webhook "strict.example.com": failed to call webhook: Post "{}?timeout=10s": "#,
        mock.url()
    );
    assert!(validated.message().starts_with(&expected), "{}", validated.message());
    assert!(
        validated
            .message()
            .ends_with("tls: failed to verify certificate: x509: certificate signed by unknown authority"),
        "the reason in Go's words: {}",
        validated.message()
    );
    assert_eq!(mock.calls(), 0, "no request goes past a failed handshake");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_webhook_certificate_is_reported_in_the_apiservers_words() {
    let other = Ca::new("some other CA").unwrap();
    let mock = MockWebhook::allowing().spawn().await;
    let gateway =
        TestGateway::validating([webhook("strict.example.com", &mock).ca_bundle(&other.ca_bundle())]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(
        answer.message(),
        format!(
            r#"Internal error occurred: failed calling webhook "strict.example.com": failed to call webhook: Post "{}?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#,
            mock.url()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_accepting_no_known_review_version_fails_every_call() {
    let future = MockWebhook::allowing().spawn().await;
    // Loads with a warning (a legacy value); no request can be built for it.
    let gateway = TestGateway::validating([
        webhook("future.example.com", &future).review_versions(&["v2"]),
        webhook("future-open.example.com", &future).review_versions(&["v2"]).ignore(),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(answer.code(), Some(500));
    assert_eq!(
        answer.message(),
        r#"Internal error occurred: failed calling webhook "future.example.com": could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"#
    );
    assert_eq!(
        answer.annotation("failed-open.validating.webhook.admission.k8s.io_round_0_index_1"),
        Some("future-open.example.com")
    );
    assert_eq!(future.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_answer_is_checked_for_nothing_but_its_response() {
    let careless = MockWebhook::answering(|_| {
        crate::support::Reply::Json(json!({"response": {"uid": "whatever", "allowed": true}}))
    })
    .spawn()
    .await;
    let gateway =
        TestGateway::validating([webhook("careless.example.com", &careless).review_versions(&["v1beta1"])])
            .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "§8.4: uid and type are not checked in v1beta1: {}", answer.body);
    assert_eq!(careless.calls(), 1);
}
