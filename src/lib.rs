//! admission-gateway: one admission webhook in front of a Kubernetes webhook fleet, deciding
//! exactly as kube-apiserver's dispatcher would with the fleet registered directly.
//!
//! ```text
//! apiserver ─HTTPS─▶ server ─▶ review::decode ─▶ pipeline::review ─────────▶ review::encode ─▶ apiserver
//!                                                │ matching   which webhooks apply
//!                                                │ mutate     ─▶ upstream, in order, reinvocation
//!                                                │ validate   ─▶ upstream, concurrently
//! config::reload ─▶ LiveSnapshot (one ArcSwap) ─▶ loaded once per review
//! ```
//!
//! Dependencies flow one way, leaves at the bottom:
//!
//! ```text
//! main ─▶ cli ─▶ {demo, registration, report} ─▶ app ─▶ server ─▶ pipeline ─▶ {patch, upstream} ─▶ review
//!                                                  └─▶ config (manifests, settings, selectors) ◀── pipeline
//! go: Go-compatible parsers and texts, used by any layer; match_conditions: CEL, used by config
//! and pipeline; explain: the record a review can keep
//! ```
//!
//! `§N` in a comment is a section of `docs/semantics.md`, the API server's dispatch semantics
//! in our words, each section naming the upstream Kubernetes source it comes from.
//!
//! - `cli`: the command line and the commands (exit codes 0/1/2). `app`: the composition root.
//! - `server`: listeners, TLS, routes, body limits, `/metrics`.
//! - `review`: AdmissionReview wire types, decode and encode.
//! - `pipeline`: the per-review context and deadline budget, matching, the mutating chain, the
//!   validating fan-out, verdicts, annotations and warnings.
//! - `upstream`: pooled HTTPS clients and the downstream call with its checks.
//! - `patch`: JSON Patch with kube-apiserver's (evanphx v4) semantics.
//! - `config`: manifests and the gateway's settings → validated, compiled `Snapshot`; hot reload.
//! - `go`: ports of Go behaviour the API server's answers depend on (URLs, durations, base64, quoting).
//! - `match_conditions`: CEL for webhook `matchConditions`, compiled by `config`, evaluated by
//!   `pipeline` (a leaf, like `go`).
//! - `explain`: the readable account of one review; `report`: how commands print it.
//! - `traces`: OpenTelemetry spans of reviews and webhook calls, exported over OTLP/HTTP.
//! - `alloc`: the allocator's free memory back to the OS once a burst is over.
//! - `registration`: the gateway's own webhook registrations for a fleet.
//! - `demo`: an example fleet for `admission-gateway demo`. `certs`: generated PKI, and
//!   `testbed`: a TLS configuration and an HTTPS accept loop, shared by the demo, the tests and
//!   the load-test mock webhook.

pub mod alloc;
pub mod app;
#[doc(hidden)]
pub mod bench;
pub mod certs;
pub mod cli;
pub mod cluster;
pub(crate) mod config;
pub(crate) mod demo;
pub(crate) mod endpoint;
pub(crate) mod explain;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod go;
pub(crate) mod lanes;
pub mod logging;
pub(crate) mod match_conditions;
pub mod patch;
pub(crate) mod pipeline;
pub(crate) mod registration;
pub(crate) mod report;
pub(crate) mod review;
pub(crate) mod server;
pub(crate) mod telemetry;
pub mod testbed;
pub(crate) mod traces;
pub(crate) mod upstream;
