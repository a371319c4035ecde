//! admission-gateway: one admission webhook in front of a Kubernetes webhook fleet, deciding
//! exactly as kube-apiserver's dispatcher would with the fleet registered directly.
//!
//! ```text
//! apiserver ─HTTPS─▶ server ─▶ review::decode ─▶ pipeline::review ─────────▶ review::encode ─▶ apiserver
//!                                                │ matching   which webhooks apply
//!                                                │ mutate     ─▶ upstream, in order, reinvocation
//!                                                │ validate   ─▶ upstream, concurrently
//!                                                │ judge      each call's verdict, one place
//!                                                └▶ observe   metrics, log line, spans
//! config::reload ─▶ LiveSnapshot (one ArcSwap) ─▶ loaded once per review
//! ```
//!
//! No top-level module imports, directly or through others, one that imports it (the test
//! `map::no_import_cycle_between_top_level_modules` holds this). Who imports whom, roughly top
//! to bottom:
//!
//! ```text
//! main ─▶ cli ─▶ {demo, registration, replay, report} ─▶ app (the composition root)
//! app ─▶ server ─▶ pipeline ─▶ {cluster, traces} ─▶ config ─▶ upstream ─▶ review ─▶ go
//!                  pipeline ─▶ patch ─▶ go         (each also imports what is below it)
//! leaves: endpoint (the endpoint a review arrived at), explain, go, lanes (the serving
//!         threads), logging, cel, telemetry (metric names, the recorder)
//! ```
//!
//! A compiled webhook (`config::compile::Hook`) carries handles to its client and breaker,
//! taken from the long-lived `upstream::Clients` the composition root hands to every
//! compilation (docs/architecture.md, "Runtime handles and the plain configuration").
//!
//! `§N` in a comment is a section of `docs/semantics.md`, the API server's dispatch semantics
//! in our words, each section naming the upstream Kubernetes source it comes from.
//!
//! - `cli`: the command line and the commands (exit codes 0/1/2). `app`: the composition root.
//! - `server`: listeners, TLS, routes, body limits, `/metrics`.
//! - `review`: AdmissionReview wire types, decode and encode.
//! - `pipeline`: one review in, one outcome out: the request (`pipeline.rs`), the per-review
//!   context (`context.rs`), matching, the mutating chain, the validating fan-out, the one
//!   judge of a call (`judge.rs`) and patch check (`patching.rs`), shadow calls, and the
//!   observer (`observe.rs`) that turns calls and reviews into metrics, log lines and spans.
//! - `upstream`: pooled HTTPS clients and the downstream call with its checks.
//! - `patch`: JSON Patch with kube-apiserver's (evanphx v4) semantics.
//! - `config`: manifests and the gateway's settings → validated, compiled `Snapshot`; hot reload.
//! - `go`: ports of Go behaviour the API server's answers depend on (URLs, durations, base64, quoting).
//! - `cel`: CEL for webhook `matchConditions` and admission policies, compiled by `config`,
//!   evaluated by `pipeline` (a leaf, like `go`).
//! - `explain`: the readable account of one review; `report`: how commands print it.
//! - `traces`: OpenTelemetry spans of reviews and webhook calls, exported over OTLP/HTTP.
//! - `telemetry`: every metric family's name, the Prometheus recorder behind the `metrics`
//!   facade, the per-webhook in-flight gauge. `lanes`: which serving thread code runs on.
//! - `endpoint`: `/mutate`, `/validate` or `/admit`, which decides the dispatchers a review
//!   goes through.
//! - `recording`: answered reviews written to files (`serve --record`), a Secret's values
//!   redacted, off the request path.
//! - `replay`: a recording's reviews sent through a candidate fleet and compared (`replay`).
//! - `alloc`: the allocator's free memory back to the OS once a burst is over.
//! - `registration`: the gateway's own webhook registrations for a fleet.
//! - `demo`: an example fleet for `admission-gateway demo`. `certs`: generated PKI, and
//!   `testbed`: a TLS configuration and an HTTPS accept loop, shared by the demo, the tests and
//!   the load-test mock webhook.

pub mod alloc;
pub mod app;
#[doc(hidden)]
pub mod bench;
pub(crate) mod cel;
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
pub mod patch;
pub(crate) mod pipeline;
pub mod recording;
pub(crate) mod registration;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod review;
pub(crate) mod schemas;
pub(crate) mod server;
pub(crate) mod telemetry;
pub mod testbed;
pub(crate) mod traces;
pub(crate) mod upstream;

#[cfg(test)]
mod map {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Every `crate::NAME` a top-level module's files name (comments aside).
    fn edges() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut edges = BTreeMap::new();
        for entry in std::fs::read_dir(&src).expect("src/") {
            let path = entry.expect("an entry").path();
            let Some(module) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else { continue };
            if path.extension().is_none_or(|e| e != "rs") || module == "main" || module == "lib" {
                continue;
            }
            let mut files = vec![path.clone()];
            let mut dirs = vec![src.join(&module)];
            while let Some(dir) = dirs.pop() {
                for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        dirs.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        files.push(path);
                    }
                }
            }
            let named: &mut BTreeSet<String> = edges.entry(module.clone()).or_default();
            for file in files {
                let text = std::fs::read_to_string(&file).expect("a source file");
                for line in text.lines().filter(|line| !line.trim_start().starts_with("//")) {
                    for (at, _) in line.match_indices("crate::") {
                        let name: String = line[at + 7..]
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                            .collect();
                        if !name.is_empty() && name != module {
                            named.insert(name);
                        }
                    }
                }
            }
        }
        edges
    }

    /// The map `src/lib.rs` and docs/architecture.md draw holds: no top-level module imports,
    /// directly or through others, one that imports it.
    #[test]
    fn no_import_cycle_between_top_level_modules() {
        let edges = edges();
        assert!(edges.len() > 20 && edges["pipeline"].contains("upstream"), "{edges:?}");
        for (module, named) in &edges {
            // Everything `module` reaches; it must not be among it.
            let mut reached: BTreeSet<&str> = BTreeSet::new();
            let mut next: Vec<&str> = named.iter().map(String::as_str).collect();
            while let Some(name) = next.pop() {
                if reached.insert(name) {
                    next.extend(edges.get(name).into_iter().flatten().map(String::as_str));
                }
            }
            assert!(!reached.contains(module.as_str()), "{module} imports itself through {named:?}");
        }
    }
}
