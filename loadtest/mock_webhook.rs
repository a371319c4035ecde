//! A small, fast mock admission webhook for load tests: HTTPS (rustls, ring), HTTP/1.1 and
//! HTTP/2 with keep-alive, answering every POSTed AdmissionReview with `allowed: true` (or
//! `false` with `--deny`), after `--delay-ms` if given. Only `apiVersion` and `request.uid`
//! are read from the body.
//!
//! ```text
//! cargo run --release --example mock-webhook -- --listen 127.0.0.1:PORT \
//!     --tls-cert CERT --tls-key KEY [--delay-ms N] [--deny]
//! ```
//!
//! Prints `listening on ADDRESS` once bound (`--listen 127.0.0.1:0` picks a free port).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use admission_gateway::testbed;

/// The API server's own limit on an AdmissionReview body.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

const USAGE: &str =
    "usage: mock-webhook --listen ADDR --tls-cert PATH --tls-key PATH [--delay-ms N] [--deny]";

struct Args {
    listen: SocketAddr,
    tls_cert: PathBuf,
    tls_key: PathBuf,
    delay: Option<Duration>,
    deny: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let (mut listen, mut tls_cert, mut tls_key, mut delay, mut deny) = (None, None, None, None, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--listen" => listen = Some(value()?.parse().context("--listen: expected HOST:PORT")?),
            "--tls-cert" => tls_cert = Some(PathBuf::from(value()?)),
            "--tls-key" => tls_key = Some(PathBuf::from(value()?)),
            "--delay-ms" => {
                let millis: u64 = value()?.parse().context("--delay-ms: expected an integer")?;
                delay = (millis > 0).then(|| Duration::from_millis(millis));
            }
            "--deny" => deny = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(Args {
        listen: listen.with_context(|| format!("--listen is required\n{USAGE}"))?,
        tls_cert: tls_cert.with_context(|| format!("--tls-cert is required\n{USAGE}"))?,
        tls_key: tls_key.with_context(|| format!("--tls-key is required\n{USAGE}"))?,
        delay,
        deny,
    })
}

/// The only parts of an AdmissionReview the mock reads; everything else is skipped.
#[derive(Deserialize)]
struct ReviewIn<'a> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(Deserialize)]
struct RequestIn<'a> {
    #[serde(borrow)]
    uid: Cow<'a, str>,
}

#[derive(Serialize)]
struct ReviewOut<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut>,
}

#[derive(Serialize)]
struct StatusOut {
    code: u16,
    message: &'static str,
}

fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let read = |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    Ok(testbed::server_tls(&read(cert)?, &read(key)?, testbed::HTTP2_AND_HTTP1)?)
}

async fn handle(request: Request<Incoming>, delay: Option<Duration>, deny: bool) -> Response<Full<Bytes>> {
    if request.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", Bytes::from_static(b"use POST"));
    }
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return reply(StatusCode::BAD_REQUEST, "text/plain", Bytes::from(error.to_string())),
    };
    let review: ReviewIn<'_> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(error) => return reply(StatusCode::BAD_REQUEST, "text/plain", Bytes::from(error.to_string())),
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let answer = ReviewOut {
        api_version: review.api_version.as_deref().unwrap_or("admission.k8s.io/v1"),
        kind: "AdmissionReview",
        response: ResponseOut {
            uid: review.request.as_ref().map_or("", |r| &r.uid),
            allowed: !deny,
            status: deny.then_some(StatusOut { code: 403, message: "denied by mock-webhook --deny" }),
        },
    };
    match serde_json::to_vec(&answer) {
        Ok(json) => reply(StatusCode::OK, "application/json", Bytes::from(json)),
        Err(error) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", Bytes::from(error.to_string())),
    }
}

fn reply(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let tls = Arc::new(tls_config(&args.tls_cert, &args.tls_key)?);
    let listener =
        TcpListener::bind(args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
    println!("listening on {}", listener.local_addr()?);
    let (delay, deny) = (args.delay, args.deny);
    testbed::serve(listener, tls, move |request| handle(request, delay, deny)).await?;
    Ok(())
}
