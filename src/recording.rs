//! Recording reviews (`serve --record DIR`): each answered review as one line of JSON — when,
//! at which endpoint, the request as received (redacted), the answer given and each webhook's
//! own outcome — for replaying against a candidate fleet later.
//!
//! ```text
//! review answered ─▶ Recorder::offer ─ try_send ─▶ bounded queue ─▶ writer thread ─▶ DIR/reviews-….jsonl
//!                     (full: dropped, counted)                       redact, encode, write, rotate
//! ```
//!
//! It never slows or fails a review: the request path only hands the entry to a bounded queue
//! (its body is the `Bytes` already received, not a copy); everything else — parsing,
//! redaction, encoding, writing, rotation — is the writer thread's. A full queue drops the
//! entry, an unwritable directory fails it; both are counted, and the last error shows on
//! `/readyz?verbose` (informational: a replica that cannot record still admits).
//!
//! Redaction (`redact.rs`) happens before anything reaches the disk: a Secret's `data` and
//! `stringData` values, in the object, the old object, the combined patch and the audit
//! annotations that can hold a patch, are replaced by a keyed hash (HMAC-SHA256 with a key kept
//! in `DIR/.key`), so equal values stay equal and none can be read. Files and the key are
//! created 0600, the directory 0700.

mod redact;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use serde::Serialize;

use crate::telemetry::names;

/// Entries waiting for the writer at most: beyond, an entry is dropped rather than waited for.
const QUEUE: usize = 4096;

/// Where and how much to record.
#[derive(Clone, Debug)]
pub struct Limits {
    pub dir: PathBuf,
    /// A new file is begun when the next line would take the current one past this.
    pub max_file_bytes: u64,
    /// When a file begins, the oldest are removed while the others hold more than this.
    pub max_total_bytes: u64,
}

impl Limits {
    /// 64 MiB files, 1 GiB in all.
    pub fn in_dir(dir: PathBuf) -> Self {
        Limits { dir, max_file_bytes: 64 << 20, max_total_bytes: 1 << 30 }
    }
}

/// One answered review, as handed to the recorder.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) time: SystemTime,
    pub(crate) endpoint: &'static str,
    /// The AdmissionReview as received.
    pub(crate) request: Bytes,
    pub(crate) answer: Answer,
    pub(crate) webhooks: Vec<Webhook>,
}

/// The answer the gateway gave.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    pub(crate) code: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) audit_annotations: std::collections::BTreeMap<String, String>,
    /// The combined JSON Patch, as JSON (not base64): read from `patch_text` by the writer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch: Option<serde_json::Value>,
    #[serde(skip)]
    pub(crate) patch_text: Option<Vec<u8>>,
}

/// What one matched webhook did.
#[derive(Debug, Serialize)]
pub(crate) struct Webhook {
    pub(crate) configuration: String,
    pub(crate) name: String,
    /// `mutating` or `validating`.
    pub(crate) phase: &'static str,
    pub(crate) round: u8,
    /// `allowed`, `denied` or `error`.
    pub(crate) outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<&'static str>,
    pub(crate) code: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) mutated: bool,
    pub(crate) mode: &'static str,
    #[serde(rename = "latencyMicros")]
    pub(crate) latency_micros: u64,
}

/// The recorder of one server: the queue's sending end and what the writer reports.
#[derive(Clone, Debug)]
pub(crate) struct Recorder {
    queue: SyncSender<Entry>,
    status: Arc<Status>,
}

/// What the writer reports back.
#[derive(Debug, Default)]
pub(crate) struct Status {
    written: AtomicU64,
    /// The last write that failed, until one succeeds.
    error: Mutex<Option<String>>,
}

impl Recorder {
    /// Opens `limits.dir` (made 0700 if missing), its key, and starts the writer thread.
    pub(crate) fn start(limits: Limits) -> anyhow::Result<Self> {
        let key = writer::prepare(&limits.dir)?;
        let (queue, entries) = mpsc::sync_channel(QUEUE);
        let status = Arc::new(Status::default());
        let reporting = status.clone();
        std::thread::Builder::new()
            .name("recording".into())
            .spawn(move || writer::run(entries, limits, key, &reporting))?;
        crate::telemetry::recorder();
        // Shown from the start; `increment(0)`, not `absolute(0)`: the counters are the
        // process's, and another recorder started in it must not reset them.
        for result in ["written", "dropped", "failed"] {
            metrics::counter!(names::RECORDED, "result" => result).increment(0);
        }
        Ok(Recorder { queue, status })
    }

    /// Hands `entry` to the writer, or drops it (counted) if the writer is behind.
    pub(crate) fn offer(&self, entry: Entry) {
        let result = match self.queue.try_send(entry) {
            Ok(()) => return,
            Err(TrySendError::Full(_)) => "dropped",
            Err(TrySendError::Disconnected(_)) => "failed",
        };
        metrics::counter!(names::RECORDED, "result" => result).increment(1);
    }

    /// `/readyz?verbose`'s line: `ok (N written)` or the last error.
    pub(crate) fn check(&self) -> String {
        let error = self.status.error.lock().unwrap_or_else(|p| p.into_inner());
        match &*error {
            Some(error) => format!("failing: {error}"),
            None => format!("ok ({} written)", self.status.written.load(Ordering::Relaxed)),
        }
    }
}

impl Status {
    fn wrote(&self) {
        self.written.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(names::RECORDED, "result" => "written").increment(1);
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_some() {
            tracing::info!("recording: writing again");
            *error = None;
        }
    }

    fn failed(&self, message: String) {
        metrics::counter!(names::RECORDED, "result" => "failed").increment(1);
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if error.as_deref() != Some(message.as_str()) {
            tracing::warn!(error = %message, "recording: a review could not be written");
            *error = Some(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn entry() -> Entry {
        Entry {
            time: SystemTime::now(),
            endpoint: "validate",
            request: Bytes::from_static(br#"{"kind":"AdmissionReview","request":{"uid":"u"}}"#),
            answer: Answer {
                allowed: true,
                code: 200,
                message: None,
                warnings: Vec::new(),
                audit_annotations: Default::default(),
                patch: None,
                patch_text: None,
            },
            webhooks: Vec::new(),
        }
    }

    /// Polls `check` until it says what `wanted` accepts, for at most 10 s.
    fn until(recorder: &Recorder, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let said = recorder.check();
            if wanted(&said) || Instant::now() > deadline {
                return said;
            }
            std::thread::yield_now();
        }
    }

    /// A directory gone from under the recorder fails the writes, which are reported, and
    /// recording goes on once it can write again; no review waits for any of it.
    #[test]
    fn a_failing_directory_is_reported_and_recording_resumes() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("recording");
        let recorder = Recorder::start(Limits::in_dir(dir.clone())).unwrap();
        recorder.offer(entry());
        assert_eq!(until(&recorder, |said| said == "ok (1 written)"), "ok (1 written)");

        // The file being written is gone with its directory: the next write begins a new file
        // there, and cannot.
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, "not a directory").unwrap();
        let began = Instant::now();
        recorder.offer(entry());
        let offered = began.elapsed();
        let said = until(&recorder, |said| said.starts_with("failing:"));
        assert!(said.starts_with("failing: cannot"), "{said}");
        assert!(offered < Duration::from_secs(1), "offering never waits for the disk: {offered:?}");

        std::fs::remove_file(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        recorder.offer(entry());
        assert_eq!(until(&recorder, |said| said.starts_with("ok")), "ok (2 written)");
        assert_eq!(writer::recordings(&dir).unwrap().len(), 1, "a new file in the directory made again");
    }
}
