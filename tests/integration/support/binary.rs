//! The real `admission-gateway` binary: run to completion, or served in the background with
//! its log lines readable.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

pub const BINARY: &str = env!("CARGO_BIN_EXE_admission-gateway");

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
    /// Starts `admission-gateway ARGS…` logging at info.
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Self {
        let mut child = Command::new(BINARY)
            .args(args)
            .env("RUST_LOG", "info")
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

    /// The value of `field=` on the next log line containing `marker`, waiting at most 10 s.
    pub async fn logged(&self, marker: &'static str, field: &'static str) -> Option<String> {
        let lines = self.lines.clone();
        tokio::task::spawn_blocking(move || {
            let lines = lines.lock().unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let left = deadline.checked_duration_since(std::time::Instant::now())?;
                let line = lines.recv_timeout(left).ok()?;
                if line.contains(marker) {
                    return line.split_whitespace().find_map(|f| f.strip_prefix(field)).map(str::to_owned);
                }
            }
        })
        .await
        .unwrap()
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
