//! `admission-gateway demo`: a small example fleet (the manifests in `config/demo/fleet.yaml`,
//! the webhooks below) on loopback with a generated CA, the gateway in front of it, and the
//! sample reviews of `tests/fixtures/reviews/` sent through it with their traces printed.
//!
//! The fleet: `audit-stamp` (mutating, IfNeeded: annotates pods that carry a team label),
//! `team-label` (mutating: adds the team label in `env: prod` namespaces), `no-privileged`
//! (validating: denies privileged containers) and `slow` (validating, answers after 2 s with a
//! 1 s timeout and failurePolicy Ignore: fails open).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::app::{self, ServeOptions};
use crate::certs::Ca;
use crate::report;
use crate::review::{decode, ReviewVersion};
use crate::testbed;
use crate::upstream::Clients;

/// The fleet's manifests, with `${FLEET_URL}` and `${CA_BUNDLE}` to fill in.
const FLEET: &str = include_str!("../config/demo/fleet.yaml");
/// Every review fixture the repository ships, as the API server would send them.
const SAMPLES: [(&str, &str); 9] = [
    ("pod-create.json", include_str!("../tests/fixtures/reviews/pod-create.json")),
    ("pod-create-privileged.json", include_str!("../tests/fixtures/reviews/pod-create-privileged.json")),
    ("pod-create-dry-run.json", include_str!("../tests/fixtures/reviews/pod-create-dry-run.json")),
    ("pod-create-v1beta1.json", include_str!("../tests/fixtures/reviews/pod-create-v1beta1.json")),
    ("pod-update.json", include_str!("../tests/fixtures/reviews/pod-update.json")),
    ("pod-delete.json", include_str!("../tests/fixtures/reviews/pod-delete.json")),
    ("pod-exec-connect.json", include_str!("../tests/fixtures/reviews/pod-exec-connect.json")),
    ("secret-create.json", include_str!("../tests/fixtures/reviews/secret-create.json")),
    ("namespace-create.json", include_str!("../tests/fixtures/reviews/namespace-create.json")),
];
/// How long the `slow` webhook takes (its timeoutSeconds is 1).
const SLOW_WEBHOOK_DELAY: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Address of the gateway's HTTPS listener.
    #[arg(long, default_value = "127.0.0.1:8443", value_name = "HOST:PORT")]
    pub(crate) listen: String,
    /// Send the sample reviews, print their explanations and exit instead of serving until Ctrl-C.
    #[arg(long)]
    pub(crate) once: bool,
}

/// Runs the demo. Its temporary directory (it holds a TLS key) is removed however the demo
/// ends: done, failed, or interrupted with Ctrl-C or SIGTERM.
pub(crate) async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let directory = TempDir::create()?;
    tokio::select! {
        result = demo(&args, &directory.0) => result,
        () = app::shutdown_signal() => Ok(()),
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn create() -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!("admission-gateway-demo-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn demo(args: &DemoArgs, directory: &Path) -> anyhow::Result<()> {
    let ca = Ca::new("admission-gateway demo CA")?;
    let leaf = ca.issue(&["127.0.0.1", "localhost"])?;
    let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
        let path = directory.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let cert = write("tls.crt", &leaf.cert_pem)?;
    let key = write("tls.key", &leaf.key_pem)?;
    write("ca.crt", &ca.cert_pem)?;

    let fleet_address = start_fleet(&cert, &key).await?;
    let fleet = FLEET
        .replace("${FLEET_URL}", &format!("https://{fleet_address}"))
        .replace("${CA_BUNDLE}", &ca.ca_bundle());
    let config = write("fleet.yaml", &fleet)?;

    let (explained, mut reviews) = mpsc::unbounded_channel();
    let mut options = ServeOptions::new(
        vec![config.clone()],
        app::resolve(&args.listen).await?,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Some((cert, key)),
    );
    options.explained = Some(explained);
    let running = app::start(options).await?;
    println!("admission-gateway demo");
    println!("  fleet:   https://{fleet_address} (4 webhooks, config {})", config.display());
    println!("  gateway: https://{} (CA {})", running.address, directory.join("ca.crt").display());
    println!("  metrics: http://{}/metrics\n", running.metrics_address);

    let client = Clients::default().client(Some(ca.cert_pem.as_bytes())).map_err(anyhow::Error::msg)?;
    for (name, sample) in SAMPLES {
        let url = format!("https://{}/admit?timeout=10s", running.address);
        let (status, _) =
            client.post_json(&url, sample.as_bytes().to_vec()).await.map_err(anyhow::Error::msg)?;
        println!("POST /admit {name} → HTTP {status}");
        if let Some(review) = reviews.recv().await {
            let version = decode::review(sample.as_bytes())?.version;
            println!("{}", report::text(review.endpoint, &review.uid, version, &review.outcome, false));
        }
    }
    if args.once {
        running.shutdown().await;
        return Ok(());
    }
    println!("Serving until Ctrl-C. Try:");
    println!(
        "  curl --cacert {} -H 'Content-Type: application/json' --data @tests/fixtures/reviews/pod-update.json https://{}/admit",
        directory.join("ca.crt").display(),
        running.address
    );
    while let Some(review) = reviews.recv().await {
        println!("{}", report::text(review.endpoint, &review.uid, ReviewVersion::V1, &review.outcome, false));
    }
    running.shutdown().await;
    Ok(())
}

/// Starts the demo webhooks on one HTTPS listener on loopback.
async fn start_fleet(cert: &Path, key: &Path) -> anyhow::Result<SocketAddr> {
    // The fleet serves the gateway's own certificate: both are 127.0.0.1 under the demo CA.
    let tls = testbed::server_tls(&std::fs::read(cert)?, &std::fs::read(key)?, testbed::HTTP1)?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    // Detached: the fleet lives as long as the demo process.
    drop(testbed::serve(
        listener,
        Some(Arc::new(tls)),
        |request: hyper::Request<hyper::body::Incoming>| async move {
            let path = request.uri().path().to_owned();
            let body = Limited::new(request.into_body(), 4 * 1024 * 1024).collect().await;
            let review: Value =
                body.ok().and_then(|b| serde_json::from_slice(&b.to_bytes()).ok()).unwrap_or(Value::Null);
            hyper::Response::new(Full::new(Bytes::from(answer(&path, &review).await.to_string())))
        },
    ));
    Ok(address)
}

/// One demo webhook's answer to a review.
async fn answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let object = &request["object"];
    let labels = &object["metadata"]["labels"];
    let mut response = json!({"uid": request["uid"], "allowed": true});
    match path {
        "/audit-stamp" => {
            let stamped = object["metadata"]["annotations"]["demo.example.com/audited"].is_string();
            if labels["team"].is_string() && !stamped {
                let patch = if object["metadata"]["annotations"].is_object() {
                    json!([{"op": "add", "path": "/metadata/annotations/demo.example.com~1audited", "value": "true"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/annotations", "value": {"demo.example.com/audited": "true"}}])
                };
                with_patch(&mut response, &patch);
            }
        }
        "/team-label" => {
            if !labels["team"].is_string() {
                let patch = if labels.is_object() {
                    json!([{"op": "add", "path": "/metadata/labels/team", "value": "platform"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "platform"}}])
                };
                with_patch(&mut response, &patch);
            }
            response["auditAnnotations"] = json!({"labelled-by": "team-label"});
        }
        "/no-privileged" => {
            let containers = ["initContainers", "containers"]
                .iter()
                .filter_map(|field| object["spec"][field].as_array())
                .flatten();
            let mut warnings = Vec::new();
            for container in containers {
                let name = container["name"].as_str().unwrap_or("?");
                if container["securityContext"]["privileged"] == json!(true) {
                    response["allowed"] = json!(false);
                    response["status"] = json!({"code": 403, "reason": "Forbidden",
                        "message": format!("privileged container {name:?} is not allowed")});
                }
                if container["resources"]["limits"]["cpu"].is_null() {
                    warnings.push(format!("container {name:?} has no CPU limit"));
                }
            }
            response["warnings"] = json!(warnings);
        }
        "/slow" => tokio::time::sleep(SLOW_WEBHOOK_DELAY).await,
        _ => {
            response["allowed"] = json!(false);
            response["status"] = json!({"code": 404, "message": format!("no demo webhook at {path}")});
        }
    }
    let api_version = review["apiVersion"].as_str().unwrap_or("admission.k8s.io/v1");
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})
}

fn with_patch(response: &mut Value, patch: &Value) {
    response["patchType"] = json!("JSONPatch");
    response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
}
