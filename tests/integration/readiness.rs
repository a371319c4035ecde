//! `/readyz` says 503 until the first configuration is served, and the admission endpoints are
//! not up before it: nothing is ever answered from an unloaded configuration.

use std::io::Write as _;
use std::process::Command;

use crate::support::binary::Served;
use crate::support::{http_client, validating, webhook, Fleet, MockWebhook};

async fn get(url: String) -> u16 {
    let request = http::Request::get(url).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
    crate::support::gateway::send(&http_client(), request).await.map(|(status, _)| status).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_until_the_first_configuration_is_served() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    // A named pipe: reading the configuration blocks until the test writes it.
    let fifo = dir.path().join("fleet.yaml");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs").success());
    let fifo_arg = fifo.display().to_string();
    let served = Served::start(&[
        "serve",
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--config",
        &fifo_arg,
    ]);

    let admin =
        served.logged("admin listener up", "metrics_address").await.expect("the admin listener comes up");
    assert_eq!(get(format!("http://{admin}/readyz")).await, 503, "not ready before the configuration");
    assert_eq!(get(format!("http://{admin}/healthz")).await, 200, "alive all the same");

    let fleet = Fleet::of([validating("v", [webhook("a.example.com", &allow)])]).yaml();
    tokio::task::spawn_blocking(move || std::fs::File::create(&fifo).unwrap().write_all(fleet.as_bytes()))
        .await
        .unwrap()
        .unwrap();
    let address = served.logged("serving", "address").await.expect("serving once the configuration is read");
    assert_eq!(get(format!("http://{admin}/readyz")).await, 200);
    assert_eq!(get(format!("http://{address}/readyz")).await, 200);
}
