//! The real `admission-gateway` binary: run to completion, or served in the background with
//! its log lines readable.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

pub const BINARY: &str = env!("CARGO_BIN_EXE_admission-gateway");

/// POSTs `review` to the served binary's `path` over plain HTTP; the answer, which must be a
/// 200.
pub async fn post_review(address: &str, path: &str, review: &serde_json::Value) -> serde_json::Value {
    let request = http::Request::post(format!("http://{address}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(review.to_string())))
        .unwrap();
    let (status, body) = crate::support::gateway::send(&crate::support::http_client(), request)
        .await
        .expect("the binary answers");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Runs the binary to completion off the runtime's threads (the mocks keep serving).
pub async fn run<S: AsRef<str>>(args: &[S]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(BINARY)
            .args(&args)
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap()
}

/// Standard output or error as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `text` to `dir/name` and returns the path as an argument.
pub fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The binary running in the background (killed when dropped, so a failed assertion leaves
/// nothing behind), its standard error read line by line.
pub struct Served {
    child: Child,
    lines: Arc<Mutex<mpsc::Receiver<String>>>,
}

impl Served {
    /// Starts `admission-gateway ARGS…` with its default logging (for `serve`: JSON lines at
    /// info).
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Self {
        let mut child = Command::new(BINARY)
            .args(args)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        Self { child, lines: Arc::new(Mutex::new(lines)) }
    }

    /// `serve` of `fleet` over plain HTTP on loopback ports it picks, with `extra` arguments;
    /// its configuration written to `dir`.
    pub fn serve(dir: &std::path::Path, fleet: &crate::support::Fleet, extra: &[&str]) -> Self {
        let config = write(dir, "fleet.yaml", &fleet.yaml());
        let mut args = vec!["serve", "--config", &config, "--insecure-http", "--listen", "127.0.0.1:0"];
        args.extend(["--metrics-listen", "127.0.0.1:0"]);
        args.extend(extra);
        Self::start(&args)
    }

    /// The value of `field` on the next JSON log line whose message contains `marker`,
    /// waiting at most 10 s.
    pub async fn logged(&self, marker: &'static str, field: &'static str) -> Option<String> {
        let line = self
            .next_line(move |line| line["fields"]["message"].as_str()?.contains(marker).then_some(()))
            .await?;
        match &line["fields"][field] {
            serde_json::Value::String(text) => Some(text.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// The next standard-error line that is a JSON object `accept` takes, waiting at most
    /// 10 s. Lines before it are consumed.
    pub async fn next_line(
        &self,
        accept: impl Fn(&serde_json::Value) -> Option<()> + Send + 'static,
    ) -> Option<serde_json::Value> {
        let lines = self.lines.clone();
        tokio::task::spawn_blocking(move || {
            let lines = lines.lock().unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let left = deadline.checked_duration_since(std::time::Instant::now())?;
                let line = lines.recv_timeout(left).ok()?;
                let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) else {
                    panic!("a log line that is not one JSON object: {line:?}");
                };
                if accept(&json).is_some() {
                    return Some(json);
                }
            }
        })
        .await
        .unwrap()
    }

    /// Every standard-error line received within `wait`, raw.
    pub async fn drain_lines(&self, wait: Duration) -> Vec<String> {
        let lines = self.lines.clone();
        tokio::task::spawn_blocking(move || {
            let lines = lines.lock().unwrap();
            let deadline = std::time::Instant::now() + wait;
            let mut out = Vec::new();
            while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
                match lines.recv_timeout(left) {
                    Ok(line) => out.push(line),
                    Err(_) => break,
                }
            }
            out
        })
        .await
        .unwrap()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits at most `wait` for the process to exit; its status, if it did.
    pub fn terminate(&mut self, wait: Duration) -> Option<std::process::ExitStatus> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).ok()?)?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).ok()?;
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_none()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
