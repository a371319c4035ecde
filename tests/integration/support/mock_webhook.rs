//! `MockWebhook`: a real HTTPS admission webhook on 127.0.0.1, with a certificate from the test
//! CA. Its answer is a closure of the AdmissionReview it receives; it records every request
//! (the review, the `?timeout=`, the path and the headers) so a scenario can count calls and
//! read what the gateway sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admission_gateway::certs::Leaf;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What the mock answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// HTTP 200 with this JSON body.
    Json(Value),
    /// Any status, content type and body.
    Http { status: u16, content_type: &'static str, body: String },
    /// This reply, after a pause.
    After(Duration, Box<Reply>),
}

type Behaviour = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A mock webhook, before it listens.
pub struct MockWebhook {
    behaviour: Behaviour,
}

/// One request the mock received.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    /// The `timeout` query parameter, as sent (`10s`).
    pub timeout: Option<String>,
    /// The body: an AdmissionReview (`Null` if it was not JSON).
    pub review: Value,
    pub headers: http::HeaderMap,
    /// When it arrived (its body read), for tests that compare times measured in the test.
    pub at: tokio::time::Instant,
}

impl Received {
    /// A request header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn uid(&self) -> &str {
        self.review["request"]["uid"].as_str().unwrap_or_default()
    }

    /// `request.object`.
    pub fn object(&self) -> &Value {
        &self.review["request"]["object"]
    }

    /// A label of `request.object`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.object()["metadata"]["labels"][key].as_str()
    }
}

/// A listening mock webhook. Stops listening when dropped.
pub struct Mock {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    replied: Arc<AtomicUsize>,
    accept_loop: JoinHandle<()>,
}

impl MockWebhook {
    /// Answers every review with what `behaviour` makes of it.
    pub fn answering(behaviour: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        Self { behaviour: Arc::new(behaviour) }
    }

    /// `allowed: true`, nothing else.
    pub fn allowing() -> Self {
        Self::answering(reply::allow)
    }

    /// `allowed: false` with `status.message`.
    pub fn denying(message: &str) -> Self {
        let message = message.to_owned();
        Self::answering(move |review| reply::deny(review, &message))
    }

    /// `allowed: true` with this JSONPatch.
    pub fn patching(operations: Value) -> Self {
        Self::answering(move |review| reply::patch(review, &operations))
    }

    /// Allows, after `delay`.
    pub fn slow(delay: Duration) -> Self {
        Self::allowing().after(delay)
    }

    /// The same answers, each after `delay`.
    pub fn after(self, delay: Duration) -> Self {
        let behaviour = self.behaviour;
        Self::answering(move |review| Reply::After(delay, Box::new(behaviour(review))))
    }

    /// Starts listening on 127.0.0.1 (a free port).
    pub async fn spawn(self) -> Mock {
        self.spawn_with_tls(super::server_tls(super::loopback_certificate(), &[b"http/1.1"])).await
    }

    /// Starts listening on 127.0.0.1, serving `leaf` instead of the shared loopback certificate.
    pub async fn spawn_serving(self, leaf: &Leaf) -> Mock {
        self.spawn_with_tls(super::server_tls(leaf, &[b"http/1.1"])).await
    }

    /// Starts listening on 127.0.0.1 with this TLS configuration.
    pub async fn spawn_with_tls(self, tls: Arc<rustls::ServerConfig>) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("mock webhook listener");
        let port = listener.local_addr().expect("mock address").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let replied = Arc::new(AtomicUsize::new(0));
        let (behaviour, recorded, answered) = (self.behaviour, received.clone(), replied.clone());
        let accept_loop = admission_gateway::testbed::serve(listener, Some(tls), move |request| {
            handle(request, behaviour.clone(), recorded.clone(), answered.clone())
        });
        Mock { url: format!("https://127.0.0.1:{port}/webhook"), received, replied, accept_loop }
    }
}

impl Mock {
    /// The URL to put in `clientConfig.url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many requests arrived (timed-out ones included).
    pub fn calls(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// How many answers it has finished (after their `Reply::After` pauses). A slow mock's
    /// `replied() == 0` when the gateway answers is the causal fact that the gateway did not wait
    /// for it, whatever the machine's load.
    pub fn replied(&self) -> usize {
        self.replied.load(Ordering::SeqCst)
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The only request received; fails the test if there was not exactly one.
    pub fn only_request(&self) -> Received {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{} should have been called exactly once", self.url);
        requests.into_iter().next().unwrap()
    }

    /// The `?timeout=` of every request, in arrival order.
    pub fn timeouts(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.timeout.unwrap_or_else(|| "<none>".into())).collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

async fn handle(
    request: Request<Incoming>,
    behaviour: Behaviour,
    received: Arc<Mutex<Vec<Received>>>,
    replied: Arc<AtomicUsize>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let timeout = request
        .uri()
        .query()
        .and_then(|query| query.split('&').find_map(|pair| pair.strip_prefix("timeout=")).map(str::to_owned));
    let headers = request.headers().clone();
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut reply = behaviour(&review);
    let at = tokio::time::Instant::now();
    received.lock().unwrap().push(Received { path, timeout, review, headers, at });
    loop {
        match reply {
            Reply::After(delay, then) => {
                tokio::time::sleep(delay).await;
                reply = *then;
            }
            Reply::Json(value) => {
                replied.fetch_add(1, Ordering::SeqCst);
                return response(200, "application/json", value.to_string());
            }
            Reply::Http { status, content_type, body } => {
                replied.fetch_add(1, Ordering::SeqCst);
                return response(status, content_type, body);
            }
        }
    }
}

fn response(status: u16, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("mock response")
}

/// Answers as a webhook writes them: an AdmissionReview in the version received, echoing the
/// request's uid.
pub mod reply {
    use base64::Engine as _;
    use serde_json::{json, Value};

    use super::Reply;

    /// `{"apiVersion": <as received>, "kind": "AdmissionReview", "response": {"uid": <uid>, ..fields}}`.
    pub fn respond(review: &Value, fields: Value) -> Reply {
        let mut response = json!({"uid": review["request"]["uid"]});
        if let (Some(response), Value::Object(fields)) = (response.as_object_mut(), fields) {
            response.extend(fields);
        }
        Reply::Json(json!({
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": response,
        }))
    }

    pub fn allow(review: &Value) -> Reply {
        respond(review, json!({"allowed": true}))
    }

    pub fn deny(review: &Value, message: &str) -> Reply {
        respond(review, json!({"allowed": false, "status": {"message": message}}))
    }

    /// Allows with this JSONPatch (base64, `patchType: JSONPatch`).
    pub fn patch(review: &Value, operations: &Value) -> Reply {
        respond(
            review,
            json!({
                "allowed": true,
                "patch": base64::engine::general_purpose::STANDARD.encode(operations.to_string()),
                "patchType": "JSONPatch",
            }),
        )
    }

    /// A non-AdmissionReview HTTP answer.
    pub fn http(status: u16, content_type: &'static str, body: &str) -> Reply {
        Reply::Http { status, content_type, body: body.to_owned() }
    }
}
