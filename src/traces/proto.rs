//! The OTLP trace messages the exporter (`export.rs`) sends, and the SDK's finished spans
//! turned into them. Only the fields the gateway's spans use; field numbers and types are
//! those of opentelemetry-proto's `opentelemetry/proto/trace/v1/trace.proto`,
//! `common/v1/common.proto`, `resource/v1/resource.proto` and
//! `collector/trace/v1/trace_service.proto` (tests/integration/traces.rs decodes what is sent
//! with the upstream generated messages).

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanKind, Status as SpanStatus};
use opentelemetry::{KeyValue as SdkKeyValue, Value};
use opentelemetry_sdk::trace::SpanData;

/// `ExportTraceServiceRequest`: the body of `POST /v1/traces`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub(crate) resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub(crate) attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub(crate) scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) spans: Vec<Span>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Span {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) span_id: Vec<u8>,
    #[prost(string, tag = "3")]
    pub(crate) trace_state: String,
    #[prost(bytes = "vec", tag = "4")]
    pub(crate) parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub(crate) name: String,
    /// `SpanKind`: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    #[prost(int32, tag = "6")]
    pub(crate) kind: i32,
    #[prost(fixed64, tag = "7")]
    pub(crate) start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub(crate) end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub(crate) attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "10")]
    pub(crate) dropped_attributes_count: u32,
    #[prost(message, optional, tag = "15")]
    pub(crate) status: Option<Status>,
    /// The W3C trace flags in the low byte; bit 8: whether the parent's remoteness is known,
    /// bit 9: it is remote (`SpanFlags`).
    #[prost(fixed32, tag = "16")]
    pub(crate) flags: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Status {
    #[prost(string, tag = "2")]
    pub(crate) message: String,
    /// `StatusCode`: 0 unset, 1 ok, 2 error.
    #[prost(int32, tag = "3")]
    pub(crate) code: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub(crate) key: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AnyValue {
    #[prost(oneof = "AnyKind", tags = "1, 2, 3, 4")]
    pub(crate) value: Option<AnyKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum AnyKind {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
}

/// `SpanFlags`: the parent's remoteness is known, and it is remote.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// One request for `spans`, grouped by instrumentation scope under one `resource`.
pub(crate) fn request(resource: &[SdkKeyValue], spans: Vec<SpanData>) -> ExportTraceServiceRequest {
    let mut scopes: Vec<ScopeSpans> = Vec::new();
    for span in spans {
        let scope = &span.instrumentation_scope;
        let (name, version) = (scope.name(), scope.version().unwrap_or_default());
        let index = match scopes
            .iter()
            .position(|s| s.scope.as_ref().is_some_and(|s| s.name == name && s.version == version))
        {
            Some(index) => index,
            None => {
                let scope = InstrumentationScope { name: name.to_owned(), version: version.to_owned() };
                scopes.push(ScopeSpans { scope: Some(scope), spans: Vec::new() });
                scopes.len() - 1
            }
        };
        scopes[index].spans.push(self::span(span));
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: resource.iter().map(key_value).collect() }),
            scope_spans: scopes,
        }],
    }
}

fn span(span: SpanData) -> Span {
    let context = &span.span_context;
    let parent = span.parent_span_id != opentelemetry::trace::SpanId::INVALID;
    let remote = if span.parent_span_is_remote { IS_REMOTE } else { 0 };
    let (message, code) = match &span.status {
        SpanStatus::Unset => (String::new(), 0),
        SpanStatus::Ok => (String::new(), 1),
        SpanStatus::Error { description } => (description.to_string(), 2),
    };
    Span {
        trace_id: context.trace_id().to_bytes().to_vec(),
        span_id: context.span_id().to_bytes().to_vec(),
        trace_state: context.trace_state().header(),
        parent_span_id: if parent { span.parent_span_id.to_bytes().to_vec() } else { Vec::new() },
        name: span.name.into_owned(),
        kind: match span.span_kind {
            SpanKind::Internal => 1,
            SpanKind::Server => 2,
            SpanKind::Client => 3,
            SpanKind::Producer => 4,
            SpanKind::Consumer => 5,
        },
        start_time_unix_nano: unix_nanos(span.start_time),
        end_time_unix_nano: unix_nanos(span.end_time),
        attributes: span.attributes.iter().map(key_value).collect(),
        dropped_attributes_count: span.dropped_attributes_count,
        status: Some(Status { message, code }),
        flags: u32::from(context.trace_flags().to_u8()) | HAS_IS_REMOTE | remote,
    }
}

fn key_value(pair: &SdkKeyValue) -> KeyValue {
    let value = match &pair.value {
        Value::Bool(b) => AnyKind::Bool(*b),
        Value::I64(i) => AnyKind::Int(*i),
        Value::F64(f) => AnyKind::Double(*f),
        Value::String(s) => AnyKind::String(s.to_string()),
        // The gateway's spans carry no arrays; written as text rather than lost.
        other => AnyKind::String(other.to_string()),
    };
    KeyValue { key: pair.key.to_string(), value: Some(AnyValue { value: Some(value) }) }
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
