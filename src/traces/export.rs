//! Getting finished spans out without ever holding up a review: the SDK hands each ended span
//! to [`Queue`] (a bounded channel: a span that does not fit is dropped and counted), one task
//! batches them and POSTs each batch as OTLP/HTTP protobuf ([`OtlpHttp`], over the hyper
//! client the gateway already has) to `<endpoint>/v1/traces`; on shutdown it sends what is
//! left (`Exporting::flush`, from `Running::shutdown` in src/app.rs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prost::Message as _;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::proto;
use crate::telemetry::names;

/// Spans waiting for export beyond this many are dropped.
const QUEUE_SPANS: usize = 8192;
/// At most this many spans in one request.
const BATCH_SPANS: usize = 512;
/// A partial batch waits at most this long.
const BATCH_DELAY: Duration = Duration::from_secs(2);
/// One export request's limit.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for the last spans to be sent.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The SDK's span processor: every ended span into the bounded queue, never waiting.
#[derive(Debug)]
pub(crate) struct Queue {
    sender: mpsc::Sender<SpanData>,
    /// Spans dropped so far (also the `admission_gateway_trace_spans_dropped_total` counter).
    dropped: Arc<AtomicU64>,
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.sender.try_send(span).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(names::TRACE_SPANS_DROPPED).increment(1);
        }
    }

    /// Flushing is the export task's (`Exporting::flush`): the SDK's hooks are synchronous.
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The running export task, and the means to flush and stop it.
pub(crate) struct Exporting {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    dropped: Arc<AtomicU64>,
}

impl Exporting {
    /// Sends every span queued so far, then stops; gives up after [`FLUSH_TIMEOUT`].
    pub(crate) async fn flush(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(FLUSH_TIMEOUT, &mut task).await.is_err() {
            tracing::warn!("traces: the last spans were not exported in time");
            task.abort();
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "traces: spans dropped because the export queue was full");
        }
    }
}

/// The queue for the SDK, and the task that drains it into `exporter`.
pub(crate) fn start(exporter: OtlpHttp) -> (Queue, Exporting) {
    let (queue, receiver) = queue(QUEUE_SPANS);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(run(exporter, receiver, stopped));
    let dropped = queue.dropped.clone();
    (queue, Exporting { stop, task, dropped })
}

/// A queue of `capacity` spans, and its receiving end.
fn queue(capacity: usize) -> (Queue, mpsc::Receiver<SpanData>) {
    let (sender, receiver) = mpsc::channel(capacity);
    (Queue { sender, dropped: Arc::default() }, receiver)
}

async fn run(exporter: OtlpHttp, mut receiver: mpsc::Receiver<SpanData>, mut stopped: oneshot::Receiver<()>) {
    let mut batch = Vec::with_capacity(BATCH_SPANS);
    let mut tick = tokio::time::interval(BATCH_DELAY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Never 0: a full batch is sent before the next turn.
        let room = BATCH_SPANS - batch.len();
        let received = tokio::select! {
            received = receiver.recv_many(&mut batch, room) => Some(received),
            _ = tick.tick() => None,
            _ = &mut stopped => break,
        };
        match received {
            Some(0) => break,
            Some(_) if batch.len() < BATCH_SPANS => {}
            _ => send(&exporter, &mut batch).await,
        }
    }
    // Shutting down: what is queued now is the last of it.
    receiver.close();
    while let Some(span) = receiver.recv().await {
        batch.push(span);
        if batch.len() >= BATCH_SPANS {
            send(&exporter, &mut batch).await;
        }
    }
    send(&exporter, &mut batch).await;
}

async fn send(exporter: &OtlpHttp, batch: &mut Vec<SpanData>) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::replace(batch, Vec::with_capacity(BATCH_SPANS));
    let count = spans.len() as u64;
    if let Err(error) = exporter.export(spans).await {
        metrics::counter!(names::TRACE_SPANS_EXPORT_FAILED).increment(count);
        tracing::warn!(spans = count, "traces: export failed: {error}");
    }
}

type Client = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An OTLP/HTTP protobuf exporter over hyper (`http://` or `https://` with the system's roots
/// and the ring provider, as every other client of the gateway).
#[derive(Clone)]
pub(crate) struct OtlpHttp {
    client: Client,
    url: http::Uri,
    resource: Arc<[KeyValue]>,
}

impl std::fmt::Debug for OtlpHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpHttp").field("url", &self.url).finish_non_exhaustive()
    }
}

impl OtlpHttp {
    /// An exporter to `<endpoint>/v1/traces`, whose spans come from `resource`.
    pub(crate) fn new(endpoint: &str, resource: Vec<KeyValue>) -> anyhow::Result<Self> {
        let url: http::Uri = format!("{}/v1/traces", endpoint.trim_end_matches('/'))
            .parse()
            .map_err(|e| anyhow::anyhow!("--otlp-endpoint {endpoint:?}: {e}"))?;
        if !matches!(url.scheme_str(), Some("http" | "https")) || url.host().is_none() {
            anyhow::bail!("--otlp-endpoint {endpoint:?}: expected http://HOST:PORT or https://HOST:PORT");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(EXPORT_TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { client, url, resource: resource.into() })
    }
}

impl SpanExporter for OtlpHttp {
    fn export(&self, batch: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let body = proto::request(&self.resource, batch).encode_to_vec();
        let request = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(body)));
        let client = self.client.clone();
        async move {
            let request = request.map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
            let exported = async {
                let response = client.request(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                // The answer (an ExportTraceServiceResponse, or an error Status) is read whole
                // so that the connection can be reused.
                let _ = response.into_body().collect().await;
                if status.is_success() {
                    Ok(())
                } else {
                    Err(format!("the collector answered {status}"))
                }
            };
            match tokio::time::timeout(EXPORT_TIMEOUT, exported).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(message)) => Err(OTelSdkError::InternalFailure(message)),
                Err(_) => Err(OTelSdkError::Timeout(EXPORT_TIMEOUT)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_spans_without_waiting() {
        let (queue, mut receiver) = queue(2);
        let dropped = queue.dropped.clone();
        let provider = SdkTracerProvider::builder().with_span_processor(queue).build();
        let tracer = provider.tracer("test");
        for _ in 0..5 {
            tracer.start("review").end();
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 3);
        let mut queued = Vec::new();
        assert_eq!(receiver.try_recv().map(|span| queued.push(span)), Ok(()));
        assert_eq!(receiver.try_recv().map(|span| queued.push(span)), Ok(()));
        assert!(receiver.try_recv().is_err());
        assert!(queued.iter().all(|span| span.name == "review"));
    }
}
