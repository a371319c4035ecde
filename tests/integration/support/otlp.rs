//! `OtlpReceiver`: an OTLP/HTTP trace collector on 127.0.0.1, as a real one answers
//! `POST /v1/traces` (protobuf `ExportTraceServiceRequest`, decoded with the upstream
//! opentelemetry-proto messages, never the gateway's own), keeping every span it received.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One export request as received.
#[derive(Clone, Debug)]
pub struct Export {
    pub path: String,
    pub content_type: String,
    pub body: Bytes,
}

/// A listening collector. Stops listening when dropped.
pub struct OtlpReceiver {
    endpoint: String,
    exports: Arc<Mutex<Vec<Export>>>,
    accept_loop: JoinHandle<()>,
}

impl OtlpReceiver {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("collector listener");
        let port = listener.local_addr().expect("collector address").port();
        let exports = Arc::new(Mutex::new(Vec::new()));
        let recorded = exports.clone();
        let accept_loop = admission_gateway::testbed::serve(listener, None, move |request| {
            handle(request, recorded.clone())
        });
        Self { endpoint: format!("http://127.0.0.1:{port}"), exports, accept_loop }
    }

    /// What `--otlp-endpoint` takes.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    pub fn exports(&self) -> Vec<Export> {
        self.exports.lock().unwrap().clone()
    }

    /// Every request decoded; fails the test on one that is not an OTLP/HTTP protobuf export.
    pub fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.exports()
            .into_iter()
            .map(|export| {
                assert_eq!(export.path, "/v1/traces");
                assert_eq!(export.content_type, "application/x-protobuf");
                ExportTraceServiceRequest::decode(export.body).expect("an ExportTraceServiceRequest")
            })
            .collect()
    }

    /// Every span received, in arrival order.
    pub fn spans(&self) -> Vec<Span> {
        self.requests()
            .into_iter()
            .flat_map(|request| request.resource_spans)
            .flat_map(|resource| resource.scope_spans)
            .flat_map(|scope| scope.spans)
            .collect()
    }

    /// Waits (up to `within`) until at least `count` spans arrived; returns them all.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Span> {
        let arrived = super::eventually(within, || async { self.spans().len() >= count }).await;
        let spans = self.spans();
        assert!(arrived, "expected {count} spans within {within:?}, got {}: {spans:#?}", spans.len());
        spans
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

async fn handle(request: Request<Incoming>, exports: Arc<Mutex<Vec<Export>>>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    exports.lock().unwrap().push(Export { path, content_type, body });
    // An empty ExportTraceServiceResponse: everything accepted.
    Response::builder()
        .header(http::header::CONTENT_TYPE, "application/x-protobuf")
        .body(Full::new(Bytes::new()))
        .expect("collector response")
}

/// An attribute's value as text (strings as they are, numbers and booleans written out).
pub fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// Lowercase hex, as `traceparent` writes ids.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
