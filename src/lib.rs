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
//! - `cli`: the command line. `app`: composition of the commands.
//! - `config`: manifests → validated, compiled `Snapshot`; hot reload.
//! - `review`: AdmissionReview wire types, decode and encode.
//! - `pipeline`: matching, the mutating chain, the validating fan-out, verdicts, records.
//! - `upstream`: pooled HTTPS clients and the downstream call with its checks.
//! - `patch`: JSON Patch with kube-apiserver's (evanphx v4) semantics.
//! - `selector`: label selectors. `trace`: the readable account of one review.
//! - `server`: the HTTPS listener, routes, TLS reload, the metrics listener.
//! - `demo`: an example fleet for `admission-gateway demo`. `certs`: generated test PKI.
//! - `registration`: the gateway's own webhook configurations for a fleet.

pub mod app;
pub mod certs;
pub mod cli;
pub mod config;
pub mod demo;
pub mod patch;
pub mod pipeline;
pub mod registration;
pub mod review;
pub mod selector;
pub mod server;
pub mod trace;
pub mod upstream;
