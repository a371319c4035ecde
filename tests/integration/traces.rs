//! Traces (docs/operations.md, "Traces"): with `--otlp-endpoint` every review is a server span continuing
//! the caller's W3C `traceparent`, every webhook call a client span beneath it whose id the
//! webhook receives in its own `traceparent`; spans reach a real OTLP/HTTP receiver
//! (support/otlp.rs) in batches and on shutdown, and carry no object content.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{json, Value};

use crate::support::fixtures::{self, POD_CREATE, SECRET_CREATE};
use crate::support::gateway::send;
use crate::support::otlp::{attribute, hex, OtlpReceiver};
use crate::support::{self, mutating, reply, validating, webhook, Fleet, MockWebhook, TestGateway};

const MODE: &str = "admission-gateway/mode";
/// The caller's trace, as kube-apiserver's request carries it.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const TRACESTATE: &str = "apiserver=t61rcWkgMzE";

/// Every attribute key a span may carry: identifiers and bounded words, nothing else.
const ALLOWED_KEYS: &[&str] = &[
    "http.request.method",
    "url.path",
    "admission.stage",
    "k8s.admission.uid",
    "k8s.admission.operation",
    "k8s.resource",
    "k8s.subresource",
    "k8s.namespace.name",
    "admission.allowed",
    "admission.status_code",
    "http.response.status_code",
    "error.type",
    "admission.webhook.name",
    "admission.webhook.configuration",
    "admission.webhook.round",
    "admission.webhook.mode",
    "admission.webhook.outcome",
    "server.address",
    "server.port",
    "admission.policy.name",
    "admission.policy.mode",
    "admission.policy.decision",
];

async fn traced(fleet: Fleet, receiver: &OtlpReceiver) -> TestGateway {
    let endpoint = receiver.endpoint();
    TestGateway::start_with(fleet, |options| options.otlp_endpoint = Some(endpoint)).await
}

/// POSTs `review` to `path` with these extra headers; the status and the answer.
async fn post(
    gateway: &TestGateway,
    path: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = http::Request::post(format!("https://{}{path}", gateway.address()))
        .header(http::header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body.into())).expect("request");
    let (status, body) = send(&support::https_client(support::ca()), request).await.expect("an answer");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn attr(span: &Span, key: &str) -> Option<String> {
    attribute(&span.attributes, key)
}

fn server_spans(spans: &[Span]) -> Vec<&Span> {
    spans.iter().filter(|s| s.kind == SpanKind::Server as i32).collect()
}

/// The client span of the call to `webhook`.
fn call_span<'a>(spans: &'a [Span], webhook: &str) -> &'a Span {
    let found: Vec<_> =
        spans.iter().filter(|s| attr(s, "admission.webhook.name").as_deref() == Some(webhook)).collect();
    assert_eq!(found.len(), 1, "one span for {webhook}: {spans:#?}");
    assert_eq!(found[0].kind, SpanKind::Client as i32, "{webhook}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_continues_the_callers_trace_and_every_call_is_a_child_span_the_webhook_is_told_of() {
    let receiver = OtlpReceiver::start().await;
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}]))
            .spawn()
            .await;
    let allow = MockWebhook::allowing().spawn().await;
    let shadow = MockWebhook::allowing().spawn().await;
    let gateway = traced(
        Fleet::of([
            mutating("m", [webhook("label.traces.example.com", &label)]),
            validating("v", [webhook("allow.traces.example.com", &allow)]),
            validating("shadowed", [webhook("shadow.traces.example.com", &shadow)]).annotate(MODE, "shadow"),
        ]),
        &receiver,
    )
    .await;

    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let review = fixtures::review(POD_CREATE);
    let headers = [("traceparent", traceparent.as_str()), ("tracestate", TRACESTATE)];
    let (status, answer) = post(&gateway, "/admit", review.to_string(), &headers).await;
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["allowed"], json!(true), "{answer}");

    // Batched: they arrive within the batch delay, without a shutdown.
    let spans = receiver.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let servers = server_spans(&spans);
    assert_eq!(servers.len(), 1, "{spans:#?}");
    let server = servers[0];
    assert_eq!(server.name, "POST /admit");
    assert_eq!(hex(&server.trace_id), TRACE_ID, "the caller's trace is continued");
    assert_eq!(hex(&server.parent_span_id), CALLER_SPAN, "the review is a child of the caller's span");
    assert_eq!(server.trace_state, TRACESTATE);
    let expected = [
        ("k8s.admission.uid", fixtures::uid(POD_CREATE)),
        ("k8s.admission.operation", "CREATE".into()),
        ("k8s.resource", "v1/pods".into()),
        ("k8s.namespace.name", review["request"]["namespace"].as_str().unwrap().into()),
        ("admission.stage", "admit".into()),
        ("admission.allowed", "true".into()),
        ("http.response.status_code", "200".into()),
    ];
    for (key, value) in expected {
        assert_eq!(attr(server, key).as_deref(), Some(value.as_str()), "{key} of {server:#?}");
    }

    let calls = [
        ("label.traces.example.com", "m", "enforce", &label),
        ("allow.traces.example.com", "v", "enforce", &allow),
        ("shadow.traces.example.com", "shadowed", "shadow", &shadow),
    ];
    for (name, configuration, mode, mock) in calls {
        let span = call_span(&spans, name);
        assert_eq!(span.trace_id, server.trace_id, "{name}: same trace");
        assert_eq!(span.parent_span_id, server.span_id, "{name}: a child of the review span");
        for (key, value) in [
            ("admission.webhook.configuration", configuration),
            ("admission.webhook.round", "0"),
            ("admission.webhook.mode", mode),
            ("admission.webhook.outcome", "allowed"),
            ("http.response.status_code", "200"),
            ("server.address", "127.0.0.1"),
        ] {
            assert_eq!(attr(span, key).as_deref(), Some(value), "{key} of {name}: {span:#?}");
        }
        assert_eq!(attr(span, "error.type"), None, "{name}");
        // The webhook was told which span called it.
        let request = mock.only_request();
        let sent = format!("00-{TRACE_ID}-{}-01", hex(&span.span_id));
        assert_eq!(request.header("traceparent"), Some(sent.as_str()), "{name}");
        assert_eq!(request.header("tracestate"), Some(TRACESTATE), "{name}");
    }
    let resource = receiver.requests()[0].resource_spans[0].resource.clone().expect("a resource");
    assert_eq!(attribute(&resource.attributes, "service.name").as_deref(), Some("admission-gateway"));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_traceparent_a_trace_starts_failures_carry_bounded_reasons_and_shutdown_flushes() {
    let receiver = OtlpReceiver::start().await;
    let deny = MockWebhook::denying("no").spawn().await;
    let broken = MockWebhook::answering(|_| reply::http(500, "text/plain", "boom")).spawn().await;
    let gateway = traced(
        Fleet::of([validating(
            "v",
            [
                webhook("deny.traces.example.com", &deny),
                webhook("broken.traces.example.com", &broken).ignore(),
            ],
        )]),
        &receiver,
    )
    .await;

    let (status, answer) = post(&gateway, "/validate", fixtures::review(POD_CREATE).to_string(), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["allowed"], json!(false), "{answer}");
    let (status, _) = post(&gateway, "/validate", "not a review", &[]).await;
    assert_eq!(status, 400);
    // No waiting for the batch: shutting down sends what is queued.
    gateway.shutdown().await;
    let spans = receiver.spans();
    assert_eq!(spans.len(), 4, "flushed on shutdown: {spans:#?}");

    let servers = server_spans(&spans);
    let reviewed = servers.iter().find(|s| attr(s, "k8s.admission.uid").is_some()).expect("the review span");
    let refused = servers.iter().find(|s| attr(s, "k8s.admission.uid").is_none()).expect("the 400's span");
    assert!(reviewed.parent_span_id.is_empty(), "a new trace: no parent");
    assert_ne!(hex(&reviewed.trace_id), "0".repeat(32));
    assert_ne!(reviewed.trace_id, refused.trace_id, "each request its own trace");
    assert_eq!(attr(reviewed, "admission.allowed").as_deref(), Some("false"));
    assert_eq!(attr(refused, "http.response.status_code").as_deref(), Some("400"));
    assert!(
        attr(refused, "error.type").is_some_and(|t| t.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    );

    let denied = call_span(&spans, "deny.traces.example.com");
    assert_eq!(attr(denied, "admission.webhook.outcome").as_deref(), Some("denied"));
    assert_eq!(attr(denied, "error.type"), None);
    let failed = call_span(&spans, "broken.traces.example.com");
    assert_eq!(attr(failed, "admission.webhook.outcome").as_deref(), Some("error"));
    assert_eq!(
        attr(failed, "error.type").as_deref(),
        Some("http_status"),
        "CallError::reason(), not its text"
    );
    assert_eq!(attr(failed, "http.response.status_code").as_deref(), Some("500"));
    for (span, mock) in [(denied, &deny), (failed, &broken)] {
        assert_eq!(span.trace_id, reviewed.trace_id);
        assert_eq!(span.parent_span_id, reviewed.span_id);
        let sent = format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id));
        assert_eq!(mock.only_request().header("traceparent"), Some(sent.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_object_content_patch_or_message_reaches_a_span() {
    let receiver = OtlpReceiver::start().await;
    let patch = MockWebhook::patching(
        json!([{"op": "add", "path": "/data/zebratoken", "value": "cGF0Y2hlZC12YWx1ZQ=="}]),
    )
    .spawn()
    .await;
    let deny = MockWebhook::denying("refused because of quagga-reason").spawn().await;
    let gateway = traced(
        Fleet::of([
            mutating("m", [webhook("patch.content.example.com", &patch).rule(&["CREATE"], &["secrets"])]),
            validating("v", [webhook("deny.content.example.com", &deny).rule(&["CREATE"], &["secrets"])]),
        ]),
        &receiver,
    )
    .await;
    let (status, answer) = post(&gateway, "/admit", fixtures::review(SECRET_CREATE).to_string(), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["allowed"], json!(false), "{answer}");
    gateway.shutdown().await;
    let spans = receiver.spans();
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert_eq!(attr(server_spans(&spans)[0], "k8s.resource").as_deref(), Some("v1/secrets"));

    // The object's name, its keys and values, the user, the patch and the denial's words.
    let secrets = [
        "db-credentials",
        "password",
        "username",
        "c3VwZXItc2VjcmV0LXBhc3N3b3Jk",
        "d2ViYXBw",
        "alice@example.com",
        "kubectl-client-side-apply",
        "zebratoken",
        "cGF0Y2hlZC12YWx1ZQ==",
        "quagga",
    ];
    for export in receiver.exports() {
        let text = String::from_utf8_lossy(&export.body);
        for secret in secrets {
            assert!(!text.contains(secret), "{secret:?} was exported: {spans:#?}");
        }
    }
    let keys: BTreeSet<&str> =
        spans.iter().flat_map(|s| s.attributes.iter().map(|kv| kv.key.as_str())).collect();
    let unknown: Vec<_> = keys.iter().filter(|key| !ALLOWED_KEYS.contains(key)).collect();
    assert!(unknown.is_empty(), "attributes beyond the documented ones: {unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_and_no_traceparent_is_sent() {
    let allow = MockWebhook::allowing().spawn().await;
    let gateway =
        TestGateway::start(Fleet::of([validating("v", [webhook("allow.off.example.com", &allow)])])).await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let headers = [("traceparent", traceparent.as_str())];
    let (status, _) = post(&gateway, "/validate", fixtures::review(POD_CREATE).to_string(), &headers).await;
    assert_eq!(status, 200);
    assert_eq!(allow.only_request().header("traceparent"), None);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_never_holds_up_a_review() {
    let allow = MockWebhook::allowing().spawn().await;
    // A port nothing listens on: every export fails at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let gateway = TestGateway::start_with(
        Fleet::of([validating("v", [webhook("allow.down.example.com", &allow)])]),
        |options| options.otlp_endpoint = Some(format!("http://{closed}")),
    )
    .await;
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let (status, answer) =
            post(&gateway, "/validate", fixtures::review(POD_CREATE).to_string(), &[]).await;
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], json!(true));
    }
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(allow.requests().iter().all(|r| r.header("traceparent").is_some()));
    let stopping = std::time::Instant::now();
    gateway.shutdown().await;
    assert!(stopping.elapsed() < Duration::from_secs(10), "shutdown waited {:?}", stopping.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_is_not_an_http_url_is_refused_at_start() {
    for endpoint in ["grpc://127.0.0.1:4317", "127.0.0.1:4318", "http://"] {
        let local = "127.0.0.1:0".parse().unwrap();
        let mut options = admission_gateway::app::ServeOptions::new(Vec::new(), local, local, None);
        options.otlp_endpoint = Some(endpoint.into());
        let error = admission_gateway::app::start(options).await.err().expect("refused");
        assert!(error.to_string().contains("--otlp-endpoint"), "{endpoint}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_refused_for_overload_has_a_span_saying_so() {
    let receiver = OtlpReceiver::start().await;
    let slow = MockWebhook::slow(std::time::Duration::from_millis(800)).spawn().await;
    let gateway = traced(
        Fleet::of([validating("v", [webhook("slow.overload.traces.example.com", &slow)])])
            .settings(json!({"maxReviewsInFlight": 1})),
        &receiver,
    )
    .await;

    let review = fixtures::review(POD_CREATE).to_string();
    let held = post(&gateway, "/validate", review.clone(), &[]);
    let refused = async {
        assert!(
            crate::support::eventually(std::time::Duration::from_secs(2), || async { slow.calls() == 1 })
                .await
        );
        post(&gateway, "/validate", review.clone(), &[]).await
    };
    let ((held, _), (refused, _)) = tokio::join!(held, refused);
    assert_eq!((held, refused), (200, 429));
    gateway.shutdown().await;

    let spans = receiver.spans();
    let servers = server_spans(&spans);
    let overloaded = servers
        .iter()
        .find(|s| attr(s, "http.response.status_code").as_deref() == Some("429"))
        .unwrap_or_else(|| panic!("no 429 span: {servers:#?}"));
    assert_eq!(attr(overloaded, "error.type").as_deref(), Some("too_many_reviews"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_evaluated_is_a_child_span_of_the_review() {
    let receiver = OtlpReceiver::start().await;
    let policy = |name: &str, expression: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                }]},
                "validations": [{"expression": expression}],
            },
        })
    };
    let binding = |name: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        })
    };
    let mut shadowed = policy("never", "false");
    shadowed["metadata"]["annotations"] = json!({MODE: "shadow"});
    let fleet = Fleet::default()
        .object(policy("always", "true"))
        .object(binding("always"))
        .object(shadowed)
        .object(binding("never"));
    let gateway = traced(fleet, &receiver).await;
    let (status, answer) = post(&gateway, "/validate", fixtures::review(POD_CREATE).to_string(), &[]).await;
    assert_eq!((status, &answer["response"]["allowed"]), (200, &json!(true)), "{answer}");

    let spans = receiver.wait_for(3, Duration::from_secs(10)).await;
    let server = server_spans(&spans)[0];
    for (name, mode, decision) in [("always", "enforce", "allowed"), ("never", "shadow", "denied")] {
        let found: Vec<_> =
            spans.iter().filter(|s| attr(s, "admission.policy.name").as_deref() == Some(name)).collect();
        assert_eq!(found.len(), 1, "one span for {name}: {spans:#?}");
        let span = found[0];
        assert_eq!(span.name, "admission.policy.evaluate");
        assert_eq!(span.kind, SpanKind::Internal as i32);
        assert_eq!(span.parent_span_id, server.span_id, "{name}: a child of the review span");
        assert_eq!(attr(span, "admission.policy.mode").as_deref(), Some(mode), "{name}");
        assert_eq!(attr(span, "admission.policy.decision").as_deref(), Some(decision), "{name}");
        assert!(span.start_time_unix_nano <= span.end_time_unix_nano, "{span:#?}");
        assert!(span.start_time_unix_nano >= server.start_time_unix_nano, "{span:#?}");
    }
    gateway.shutdown().await;
}
