//! Distributed traces (`serve --otlp-endpoint`; docs/operations.md, "Traces"): a server span per review
//! (`routes.rs`), a client span per webhook call (`pipeline/call.rs`, ended once the call is
//! judged, by `pipeline/observe.rs`), W3C `traceparent` continued
//! from the API server's request and sent on with every call (`upstream.rs`).
//!
//! Spans carry bounded identifiers only: never an object, a patch, a body, an answer's message
//! or an error's text. With the flag unset there is no [`Traces`] and every hook below is a
//! check of `None`. `export.rs` queues and sends the spans, `proto.rs` encodes them.

mod export;
mod proto;

use std::sync::Arc;
use std::time::SystemTime;

use http::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, Span, SpanLimits};

pub(crate) use export::Exporting;

use crate::config::compile::Hook;
use crate::endpoint::Endpoint;
use crate::review::decode::IncomingReview;

const SERVICE_NAME: &str = "admission-gateway";

/// The tracer of a gateway with `--otlp-endpoint`.
pub(crate) struct Traces {
    tracer: SdkTracer,
    /// Kept so the SDK's pipeline lives as long as the gateway.
    _provider: SdkTracerProvider,
}

impl Traces {
    /// Tracing to the OTLP/HTTP collector at `endpoint` (`http://HOST:PORT`); the export task
    /// runs on the current runtime until [`Exporting::flush`].
    pub(crate) fn start(endpoint: &str) -> anyhow::Result<(Arc<Self>, Exporting)> {
        let resource = vec![
            KeyValue::new("service.name", SERVICE_NAME),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ];
        let exporter = export::OtlpHttp::new(endpoint, resource)?;
        let (queue, exporting) = export::start(exporter);
        // Set here rather than from the SDK's OTEL_* environment defaults: the gateway reads
        // nothing else from the environment (docs/configuration.md, "The command line").
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
            .with_span_limits(SpanLimits::default())
            .with_span_processor(queue)
            .build();
        let scope = opentelemetry::InstrumentationScope::builder(SERVICE_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let tracer = provider.tracer_with_scope(scope);
        Ok((Arc::new(Self { tracer, _provider: provider }), exporting))
    }

    /// The server span of one review at `stage`'s endpoint: the child of the caller's
    /// `traceparent` if it sent one, else the root of a new trace.
    pub(crate) fn review(&self, headers: &HeaderMap, endpoint: Endpoint) -> ReviewSpan {
        let (name, path) = match endpoint {
            Endpoint::Mutate => ("POST /mutate", "/mutate"),
            Endpoint::Validate => ("POST /validate", "/validate"),
            Endpoint::Admit => ("POST /admit", "/admit"),
        };
        let incoming = TraceContextPropagator::new().extract(&Headers(headers));
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(SystemTime::now())
            .with_attributes([
                KeyValue::new("http.request.method", "POST"),
                KeyValue::new("url.path", path),
                KeyValue::new("admission.stage", endpoint.as_str()),
            ])
            .start_with_context(&self.tracer, &incoming);
        let parent = Context::new().with_remote_span_context(span.span_context().clone());
        ReviewSpan { span, parent: Parent(Some(Arc::new((self.tracer.clone(), parent)))) }
    }
}

/// The server span of one review, open until its answer.
pub(crate) struct ReviewSpan {
    span: Span,
    parent: Parent,
}

impl ReviewSpan {
    /// What the webhook calls' spans are children of.
    pub(crate) fn parent(&self) -> &Parent {
        &self.parent
    }

    /// The request's identifiers: uid, operation, resource, namespace. Nothing of the object.
    pub(crate) fn request(&mut self, review: &IncomingReview) {
        let resource = review.resource();
        let resource = if resource.group.is_empty() {
            format!("{}/{}", resource.version, resource.resource)
        } else {
            format!("{}/{}/{}", resource.group, resource.version, resource.resource)
        };
        let request = &review.request;
        self.span.set_attribute(KeyValue::new("k8s.admission.uid", request.uid.value.clone()));
        self.span.set_attribute(KeyValue::new("k8s.admission.operation", review.operation().as_str()));
        self.span.set_attribute(KeyValue::new("k8s.resource", resource));
        if !request.sub_resource.is_empty() {
            self.span.set_attribute(KeyValue::new("k8s.subresource", request.sub_resource.clone()));
        }
        if !request.namespace.is_empty() {
            self.span.set_attribute(KeyValue::new("k8s.namespace.name", request.namespace.clone()));
        }
    }

    /// Ends the span with the review's verdict: `allowed` and the answer's status `code` (its
    /// HTTP response is 200), or for a request refused before review, its HTTP `code` and the
    /// bounded `reason`.
    pub(crate) fn answered(mut self, allowed: bool, code: u16) {
        self.span.set_attribute(KeyValue::new("admission.allowed", allowed));
        self.span.set_attribute(KeyValue::new("admission.status_code", i64::from(code)));
        self.span.set_attribute(KeyValue::new("http.response.status_code", 200));
        self.span.end();
    }

    /// Ends the span of a request answered with an HTTP error before any review.
    pub(crate) fn refused(mut self, code: u16, reason: &'static str) {
        self.span.set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
        self.span.set_attribute(KeyValue::new("error.type", reason));
        self.span.set_status(Status::error(reason));
        self.span.end();
    }
}

/// The review's span context for the calls it makes; `None` when tracing is off. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct Parent(Option<Arc<(SdkTracer, Context)>>);

impl Parent {
    /// Starts the client span of one call to `hook`, with the headers that carry it.
    pub(crate) fn call(&self, hook: &Hook) -> Option<CallSpan> {
        let (tracer, parent) = self.0.as_deref()?;
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("admission.webhook.name", hook.name.clone()),
            KeyValue::new("admission.webhook.configuration", hook.configuration.clone()),
        ];
        if let Ok(url) = hook.url.parse::<http::Uri>() {
            if let Some(host) = url.host() {
                attributes.push(KeyValue::new("server.address", host.to_owned()));
            }
            let port = url.port_u16().unwrap_or(if url.scheme_str() == Some("http") { 80 } else { 443 });
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        let span = tracer
            .span_builder("admission.webhook.call")
            .with_kind(SpanKind::Client)
            .with_start_time(SystemTime::now())
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        let mut headers = HeaderMap::new();
        let current = Context::new().with_remote_span_context(span.span_context().clone());
        TraceContextPropagator::new().inject_context(&current, &mut HeadersMut(&mut headers));
        Some(CallSpan { span, headers })
    }
}

impl Parent {
    /// The span of one policy's evaluation, which took `elapsed` and has just ended.
    pub(crate) fn policy(
        &self,
        policy: &str,
        mode: &'static str,
        decision: &'static str,
        elapsed: std::time::Duration,
    ) {
        let Some((tracer, parent)) = self.0.as_deref() else { return };
        let end = SystemTime::now();
        let mut span = tracer
            .span_builder("admission.policy.evaluate")
            .with_kind(SpanKind::Internal)
            .with_start_time(end.checked_sub(elapsed).unwrap_or(end))
            .with_attributes([
                KeyValue::new("admission.policy.name", policy.to_owned()),
                KeyValue::new("admission.policy.mode", mode),
                KeyValue::new("admission.policy.decision", decision),
            ])
            .start_with_context(tracer, parent);
        span.end_with_timestamp(end);
    }
}

/// The client span of one webhook call, ended once the call is judged.
pub(crate) struct CallSpan {
    span: Span,
    headers: HeaderMap,
}

impl std::fmt::Debug for CallSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallSpan")
    }
}

/// How a call ended, for its span: the bounded words of logs and metrics.
pub(crate) struct CallEnd {
    pub(crate) round: u8,
    /// `enforce`, `warn`, `canary`, `shadow`.
    pub(crate) mode: &'static str,
    /// `allowed`, `denied` or `error`.
    pub(crate) outcome: &'static str,
    /// `CallError::reason()` (src/upstream/error.rs) or the gateway's own reason, for an error.
    pub(crate) error: Option<&'static str>,
    /// The webhook's HTTP status, if it answered.
    pub(crate) http_status: Option<u16>,
}

impl CallSpan {
    /// `traceparent` (and `tracestate`) naming this span, for the outgoing request.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    pub(crate) fn end(mut self, end: CallEnd) {
        self.span.set_attribute(KeyValue::new("admission.webhook.round", i64::from(end.round)));
        self.span.set_attribute(KeyValue::new("admission.webhook.mode", end.mode));
        self.span.set_attribute(KeyValue::new("admission.webhook.outcome", end.outcome));
        if let Some(status) = end.http_status {
            self.span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status)));
        }
        if let Some(reason) = end.error {
            self.span.set_attribute(KeyValue::new("error.type", reason));
            self.span.set_status(Status::error(reason));
        }
        self.span.end();
    }
}

/// Request headers as the propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Outgoing headers as the propagator writes them.
struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value))
        {
            self.0.insert(name, value);
        }
    }
}
