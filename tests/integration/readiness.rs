//! `/readyz` says 503 until the first configuration is served, and the admission endpoints are
//! not up before it: nothing is ever answered from an unloaded configuration.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::{http_client, validating, webhook, Fleet, MockWebhook};

const BINARY: &str = env!("CARGO_BIN_EXE_admission-gateway");

/// Kills the child process it holds when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of `field=` on the first log line containing `marker`, waiting at most 10 s.
fn logged(lines: &mpsc::Receiver<String>, marker: &str, field: &str) -> Option<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        let line = lines.recv_timeout(left).ok()?;
        if line.contains(marker) {
            return line.split_whitespace().find_map(|f| f.strip_prefix(field)).map(str::to_owned);
        }
    }
}

async fn get(url: String) -> u16 {
    let request = http::Request::get(url).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
    let client = http_client();
    crate::support::gateway::send(&client, request).await.map(|(status, _)| status).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_until_the_first_configuration_is_served() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    // A named pipe: reading the configuration blocks until the test writes it.
    let fifo = dir.path().join("fleet.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let mut child = Command::new(BINARY)
        .args(["serve", "--insecure-http", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--config")
        .arg(&fifo)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Running(child);
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let received = std::sync::Arc::new(std::sync::Mutex::new(received));
    let wait_for = |marker: &'static str, field: &'static str| {
        let received = received.clone();
        tokio::task::spawn_blocking(move || logged(&received.lock().unwrap(), marker, field))
    };

    let admin = wait_for("admin listener up", "metrics_address=")
        .await
        .unwrap()
        .expect("the admin listener comes up");
    assert_eq!(get(format!("http://{admin}/readyz")).await, 503, "not ready before the configuration");
    assert_eq!(get(format!("http://{admin}/healthz")).await, 200, "alive all the same");

    let fleet = Fleet::of([validating("v", [webhook("a.example.com", &allow)])]).yaml();
    tokio::task::spawn_blocking(move || std::fs::File::create(&fifo).unwrap().write_all(fleet.as_bytes()))
        .await
        .unwrap()
        .unwrap();
    let address =
        wait_for("serving", "address=").await.unwrap().expect("serving once the configuration is read");
    assert_eq!(get(format!("http://{admin}/readyz")).await, 200);
    assert_eq!(get(format!("http://{address}/readyz")).await, 200);
}
