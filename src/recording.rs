//! Recording reviews (`serve --record DIR`, or the `recording` section of the GatewayConfig):
//! each answered review as one line of JSON — when, at which endpoint, the request as received
//! (redacted), the answer given and each webhook's own outcome — for replaying against a
//! candidate fleet later.
//!
//! ```text
//! review decoded ─▶ Recording::take ─ off, not sampled, filtered out: nothing (counted skipped)
//! review answered ─▶ Taken::offer ─ try_send ─▶ bounded queue ─▶ writer thread ─▶ DIR/reviews-….jsonl
//!                     (full: dropped, counted)    every 10 ms, up to 256 entries: redact, encode
//!                                                 into one buffer, one write; rotate
//!                                                                   └▶ compressor (nice 19) ─▶ reviews-….jsonl.gz
//! ```
//!
//! It never slows or fails a review: the request path decides from the review already decoded
//! (a hash of its uid, its resource and namespace) and hands the entry to a bounded queue (its
//! body is the `Bytes` already received, not a copy); everything else — parsing, redaction,
//! encoding, writing, rotation, compression — is off it. A full queue drops the entry, an
//! unwritable directory fails it; both are counted, and the last error shows on
//! `/readyz?verbose` (informational: a replica that cannot record still admits).
//!
//! Off the request path is still on the replica's cores, so the writer spends as little as it
//! can per entry: it takes the queue's entries in batches, every few milliseconds rather than
//! woken for each (`writer.rs`), serializes each line straight from the entry into one buffer
//! and writes the batch with one `write`; the compressor, the largest cost, runs at the lowest
//! priority, in the cores' idle time (`compress.rs`).
//!
//! The settings are hot-reloaded ([`Recording::apply`]): each entry travels with the plan it was
//! taken under, and the one writer thread writes entries in order, so an entry queued before a
//! reload is written as it was taken (into the old directory, with the old redaction) and none
//! is lost; the wait for it is the queue's, bounded. Turned off, the writer closes its file
//! once the queue is empty.
//!
//! Redaction (`redact.rs`) happens before anything reaches the disk: a Secret's `data` and
//! `stringData` values, and the values at the settings' `redactPointers`, in the object, the
//! old object, the combined patch and the audit annotations that can hold a patch, are replaced
//! by a keyed hash (HMAC-SHA256 with a key kept in `DIR/.key`), so equal values stay equal and
//! none can be read. Files and the key are created 0600, the directory 0700.

mod compress;
pub(crate) mod redact;
mod world_line;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use serde::Serialize;

use crate::config::settings;
use crate::telemetry::names;

/// Entries waiting for the writer at most: beyond, an entry is dropped rather than waited for.
const QUEUE: usize = 4096;

/// Where and how much to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) dir: PathBuf,
    /// A new file is begun when the next line would take the current one past this.
    pub(crate) max_file_bytes: u64,
    /// When a file begins, the oldest are removed while the others hold more than this.
    pub(crate) max_total_bytes: u64,
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
    /// What the decision depended on beyond the request and the fleet's manifests.
    pub(crate) world: World,
}

/// The world a decision saw (written as the line's `world`; the recording's redaction settings
/// are added by the writer, which knows the plan): what a replay needs to reproduce it
/// without the cluster or the configuration it was made with.
#[derive(Debug, Default)]
pub(crate) struct World {
    /// The request's namespace as the webhooks and policies saw it: only when one of them
    /// needed it.
    pub(crate) namespace: Option<Namespace>,
    /// The caller's `?timeout=`, which the deadline budget is made from.
    pub(crate) timeout: Option<Duration>,
}

/// The request's namespace as it was looked up: its labels, or why there were none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Namespace {
    pub(crate) name: String,
    /// Found, with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) labels: Option<crate::config::selector::Labels>,
    /// Not found: `cluster` (the API server said so) or `configuration` (no Namespace object
    /// configured, outside cluster mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) not_found: Option<NotFound>,
    /// The API server could not be asked: the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) unavailable: Option<String>,
}

/// Who said a namespace does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum NotFound {
    Cluster,
    Configuration,
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

/// What one matched webhook, or one policy that acted on the request, did.
#[derive(Debug, Serialize)]
pub(crate) struct Webhook {
    /// The webhook's configuration; none for a policy.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) configuration: String,
    pub(crate) name: String,
    /// `policy` for a policy; none for a webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<&'static str>,
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

/// The recording of one server, on or off, as the settings and `serve --record` say.
#[derive(Debug)]
pub(crate) struct Recording {
    /// `serve --record DIR`: on, in DIR, whatever the settings say of the directory.
    flag: Option<PathBuf>,
    /// Test-only (`serve --record-write-delay`): the writer sleeps this long before each line,
    /// a slow disk that needs no root.
    write_delay: Option<Duration>,
    /// What the request path reads: `None` when off.
    taking: ArcSwapOption<Taking>,
    /// Changes to the plan, one at a time.
    control: Mutex<Control>,
    status: Arc<Status>,
}

/// The recording as last applied.
#[derive(Debug, Default)]
struct Control {
    /// The settings applied, to tell a reload that changed them from one that did not.
    applied: Option<settings::Recording>,
    /// The writer's queue, from the first time recording is on.
    writer: Option<SyncSender<Queued>>,
    /// The directory prepared and its key.
    key: Option<(PathBuf, Arc<Vec<u8>>)>,
}

/// What an entry is recorded under: where, with which bounds, redacted how.
#[derive(Debug)]
pub(crate) struct Plan {
    limits: Limits,
    key: Arc<Vec<u8>>,
    sample: settings::Sample,
    filter: settings::Filter,
    redact_pointers: Vec<String>,
    drop_user_info: bool,
}

/// The recording on: the plan reviews are taken under, and the writer's queue.
#[derive(Debug)]
struct Taking {
    plan: Arc<Plan>,
    queue: SyncSender<Queued>,
    /// The request path's counts, their handles kept: a key is not built and looked up for
    /// each review skipped or dropped.
    skipped: metrics::Counter,
    dropped: metrics::Counter,
    failed: metrics::Counter,
}

/// A review the recording takes: hand it its entry once answered.
#[derive(Debug)]
pub(crate) struct Taken {
    taking: Arc<Taking>,
    secret: bool,
}

/// An entry in the queue, with the plan it was taken under.
#[derive(Debug)]
struct Queued {
    plan: Arc<Plan>,
    entry: Entry,
    /// About a Secret (as decoded on the request path): its values must be redacted.
    secret: bool,
}

/// What the writer reports back.
#[derive(Debug, Default)]
pub(crate) struct Status {
    written: AtomicU64,
    /// Recording is on: when off, the writer closes its file once the queue is empty.
    on: AtomicBool,
    /// The last write that failed, until one succeeds.
    error: Mutex<Option<String>>,
}

impl Recording {
    /// The recording of a server started with `serve --record flag` (`None`: only as the
    /// settings say). The flag's directory is made (0700) and its key read or made now, so a
    /// directory that cannot be made refuses the start.
    pub(crate) fn new(flag: Option<PathBuf>, write_delay: Option<Duration>) -> anyhow::Result<Self> {
        let mut control = Control::default();
        if let Some(dir) = &flag {
            control.key = Some((dir.clone(), Arc::new(writer::prepare(dir)?)));
        }
        Ok(Recording {
            flag,
            write_delay,
            taking: ArcSwapOption::empty(),
            control: Mutex::new(control),
            status: Arc::new(Status::default()),
        })
    }

    /// Turns recording on, off or to another plan as `wanted` (the settings' section) and the
    /// flag say; nothing when they say what is already applied. Entries already queued are
    /// written under the plan they were taken with. A directory that cannot be made leaves the
    /// recording as it was, and is the error.
    pub(crate) fn apply(&self, wanted: &settings::Recording) -> anyhow::Result<()> {
        let mut control = self.control.lock().unwrap_or_else(|p| p.into_inner());
        if control.applied.as_ref() == Some(wanted) {
            return Ok(());
        }
        let Some(dir) = self.flag.clone().or_else(|| wanted.directory.clone()) else {
            if self.taking.swap(None).is_some() {
                tracing::info!("recording: off");
            }
            self.status.on.store(false, Ordering::Relaxed);
            control.applied = Some(wanted.clone());
            return Ok(());
        };
        let key = match &control.key {
            Some((prepared, key)) if *prepared == dir => key.clone(),
            _ => match writer::prepare(&dir) {
                Ok(key) => Arc::new(key),
                Err(error) => {
                    self.status.report(format!("{error:#}"));
                    return Err(error);
                }
            },
        };
        control.key = Some((dir.clone(), key.clone()));
        let limits =
            Limits { dir, max_file_bytes: wanted.max_file_bytes, max_total_bytes: wanted.max_total_bytes };
        let plan = Arc::new(Plan {
            limits,
            key,
            sample: wanted.sample,
            filter: wanted.filter.clone(),
            redact_pointers: wanted.redact_pointers.clone(),
            drop_user_info: wanted.drop_user_info,
        });
        let queue = match &control.writer {
            Some(queue) => queue.clone(),
            None => {
                let queue = self.start_writer()?;
                control.writer = Some(queue.clone());
                queue
            }
        };
        tracing::info!(directory = %plan.limits.dir.display(), "recording: on");
        let counter = |result: &'static str| metrics::counter!(names::RECORDED, "result" => result);
        let (skipped, dropped, failed) = (counter("skipped"), counter("dropped"), counter("failed"));
        self.status.on.store(true, Ordering::Relaxed);
        self.taking.store(Some(Arc::new(Taking { plan, queue, skipped, dropped, failed })));
        control.applied = Some(wanted.clone());
        Ok(())
    }

    /// The writer thread, and the metric's values shown from the start.
    fn start_writer(&self) -> anyhow::Result<SyncSender<Queued>> {
        let (queue, entries) = mpsc::sync_channel(QUEUE);
        let reporting = self.status.clone();
        let delay = self.write_delay;
        std::thread::Builder::new()
            .name("recording".into())
            .spawn(move || writer::run(entries, &reporting, delay))?;
        crate::telemetry::recorder();
        // `increment(0)`, not `absolute(0)`: the counters are the process's, and another
        // recorder started in it must not reset them.
        for result in ["written", "dropped", "failed", "skipped"] {
            metrics::counter!(names::RECORDED, "result" => result).increment(0);
        }
        Ok(queue)
    }

    /// On the request path, once the review is decoded: whether it is recorded (on, in the
    /// sample, through the filter). Reviews not taken are counted `skipped`, never `dropped`.
    pub(crate) fn take(&self, request: &crate::review::AdmissionRequest) -> Option<Taken> {
        let taking = self.taking.load();
        let taking = taking.as_ref()?;
        let plan = &taking.plan;
        let (group, resource) =
            request.resource.as_ref().map_or(("", ""), |r| (r.group.as_str(), r.resource.as_str()));
        if plan.sample.takes(&request.uid.value) && plan.filter.takes(group, resource, &request.namespace) {
            let secret =
                request.kind.as_ref().is_some_and(|kind| kind.group.is_empty() && kind.kind == "Secret");
            Some(Taken { taking: taking.clone(), secret })
        } else {
            taking.skipped.increment(1);
            None
        }
    }

    /// `/readyz?verbose`'s line once recording has been on: `ok (N written)`, `off (N
    /// written)` or the last error; `None` before.
    pub(crate) fn check(&self) -> Option<String> {
        let control = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let error = self.status.error.lock().unwrap_or_else(|p| p.into_inner());
        let written = self.status.written.load(Ordering::Relaxed);
        match (&*error, self.taking.load().is_some()) {
            (Some(error), _) => Some(format!("failing: {error}")),
            (None, true) => Some(format!("ok ({written} written)")),
            (None, false) => control.writer.as_ref().map(|_| format!("off ({written} written)")),
        }
    }
}

impl Taken {
    /// Hands `entry` to the writer, or drops it (counted) if the writer is behind.
    pub(crate) fn offer(self, entry: Entry) {
        let queued = Queued { plan: self.taking.plan.clone(), entry, secret: self.secret };
        match self.taking.queue.try_send(queued) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.taking.dropped.increment(1),
            Err(TrySendError::Disconnected(_)) => self.taking.failed.increment(1),
        }
    }
}

/// For the benches (`src/bench.rs`): the line the writer appends to `out` for an allowed
/// review of `request` with nothing to redact, as the writer encodes it.
pub(crate) fn bench_line(request: Bytes, out: &mut Vec<u8>) -> anyhow::Result<()> {
    let entry = Entry {
        time: SystemTime::now(),
        endpoint: "validate",
        request,
        answer: Answer {
            allowed: true,
            code: 200,
            message: None,
            warnings: Vec::new(),
            audit_annotations: Default::default(),
            patch: None,
            patch_text: None,
        },
        webhooks: vec![Webhook {
            configuration: "loadtest".into(),
            name: "allow.loadtest.example.com".into(),
            kind: None,
            phase: "validating",
            round: 0,
            outcome: "allowed",
            reason: None,
            code: 200,
            mutated: false,
            mode: "enforce",
            latency_micros: 250,
        }],
        world: World { namespace: None, timeout: Some(Duration::from_secs(10)) },
    };
    writer::encode_line(entry, out)
}

/// For the benches (`src/bench.rs`): `lines` gzip-compressed as the compressor compresses a
/// finished file.
pub(crate) fn bench_gzip(lines: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut encoder = compress::encoder(Vec::new());
    encoder.write_all(lines)?;
    encoder.finish()
}

impl Status {
    /// `lines` entries written (one batch).
    fn wrote(&self, lines: u64) {
        self.written.fetch_add(lines, Ordering::Relaxed);
        metrics::counter!(names::RECORDED, "result" => "written").increment(lines);
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_some() {
            tracing::info!("recording: writing again");
            *error = None;
        }
    }

    /// `lines` entries that could not be written, for `message`.
    fn failed(&self, lines: u64, message: String) {
        metrics::counter!(names::RECORDED, "result" => "failed").increment(lines);
        self.report(message);
    }

    /// Shows `message` on `/readyz?verbose` until a line is written; logged once.
    fn report(&self, message: String) {
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

    const POD_CREATE: &[u8] = include_bytes!("../tests/fixtures/reviews/pod-create.json");

    /// The fixture's review with `uid`, as the request path has it decoded, and its body.
    fn review(uid: &str) -> (crate::review::decode::IncomingReview, Bytes) {
        let mut review: serde_json::Value = serde_json::from_slice(POD_CREATE).unwrap();
        review["request"]["uid"] = serde_json::json!(uid);
        let body = Bytes::from(serde_json::to_vec(&review).unwrap());
        (crate::review::decode::review(&body).unwrap(), body)
    }

    fn entry(request: Bytes) -> Entry {
        Entry {
            time: SystemTime::now(),
            endpoint: "validate",
            request,
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
            world: World::default(),
        }
    }

    /// Offers the review of `uid` as the request path does; whether it was taken.
    fn offer(recording: &Recording, uid: &str) -> bool {
        let (review, body) = review(uid);
        let taken = recording.take(&review.request);
        let took = taken.is_some();
        if let Some(taken) = taken {
            taken.offer(entry(body));
        }
        took
    }

    fn into(dir: &std::path::Path) -> settings::Recording {
        settings::Recording { directory: Some(dir.to_path_buf()), ..settings::Recording::default() }
    }

    /// Polls `wanted` until it holds, for at most 10 s.
    fn until(wanted: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !wanted() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Every line of the recording files in `dir`, compressed ones read through gzip.
    fn lines(dir: &std::path::Path) -> Vec<String> {
        use std::io::Read as _;
        let mut lines = Vec::new();
        for (path, _) in writer::recordings(dir).unwrap() {
            let mut text = String::new();
            let file = std::fs::File::open(&path).unwrap();
            if path.extension().is_some_and(|e| e == "gz") {
                flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
            } else {
                std::io::BufReader::new(file).read_to_string(&mut text).unwrap();
            }
            lines.extend(text.lines().map(String::from));
        }
        lines
    }

    /// A directory gone from under the recorder fails the writes, which are reported, and
    /// recording goes on once it can write again; no review waits for any of it.
    #[test]
    fn a_failing_directory_is_reported_and_recording_resumes() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("recording");
        let recording = Recording::new(Some(dir.clone()), None).unwrap();
        assert_eq!(recording.check(), None, "no line before it is applied");
        recording.apply(&settings::Recording::default()).unwrap();
        assert!(offer(&recording, "u1"));
        assert!(until(|| recording.check().as_deref() == Some("ok (1 written)")), "{:?}", recording.check());

        // The file being written is gone with its directory: the next write begins a new file
        // there, and cannot.
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, "not a directory").unwrap();
        let began = Instant::now();
        offer(&recording, "u2");
        let offered = began.elapsed();
        assert!(until(|| recording.check().unwrap().starts_with("failing:")));
        let said = recording.check().unwrap();
        assert!(said.starts_with("failing: cannot"), "{said}");
        assert!(offered < Duration::from_secs(1), "offering never waits for the disk: {offered:?}");

        std::fs::remove_file(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        offer(&recording, "u3");
        assert!(until(|| recording.check().unwrap().starts_with("ok")));
        assert_eq!(recording.check().unwrap(), "ok (2 written)");
        assert_eq!(writer::recordings(&dir).unwrap().len(), 1, "a new file in the directory made again");
    }

    /// A change of settings takes the next review into the new directory while the entries
    /// queued before it are written as they were taken, into the old one (the writer slowed
    /// so that they are still queued); turned off, nothing is taken and the last file is
    /// closed and compressed. Without the plan carried by each entry, the queued ones went to
    /// the new directory.
    #[test]
    fn a_reload_moves_the_recording_without_losing_what_was_queued() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let recording = Recording::new(None, Some(Duration::from_millis(20))).unwrap();
        recording.apply(&settings::Recording::default()).unwrap();
        assert_eq!(
            (offer(&recording, "before"), recording.check()),
            (false, None),
            "off without a directory"
        );

        recording.apply(&into(first.path())).unwrap();
        for i in 0..5 {
            assert!(offer(&recording, &format!("first-{i}")));
        }
        recording.apply(&into(second.path())).unwrap();
        for i in 0..5 {
            assert!(offer(&recording, &format!("second-{i}")));
        }
        assert!(until(|| recording.check().as_deref() == Some("ok (10 written)")), "{:?}", recording.check());
        let uids = |dir: &std::path::Path| -> Vec<String> {
            lines(dir)
                .iter()
                .map(|line| {
                    serde_json::from_str::<serde_json::Value>(line).unwrap()["request"]["request"]["uid"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect()
        };
        assert_eq!(uids(first.path()), ["first-0", "first-1", "first-2", "first-3", "first-4"]);
        assert_eq!(uids(second.path()), ["second-0", "second-1", "second-2", "second-3", "second-4"]);

        recording.apply(&settings::Recording::default()).unwrap();
        assert!(!offer(&recording, "after"), "off: nothing taken");
        assert_eq!(recording.check().as_deref(), Some("off (10 written)"));
        let compressed = |dir: &std::path::Path| {
            writer::recordings(dir)
                .unwrap()
                .iter()
                .all(|(path, _)| path.extension().is_some_and(|e| e == "gz"))
        };
        assert!(
            until(|| compressed(first.path()) && compressed(second.path())),
            "{:?}",
            writer::recordings(second.path())
        );
        assert_eq!(uids(second.path()).len(), 5);
    }

    /// A Secret's review is redacted however it is taken: the request path says it is one, and
    /// the writer parses it. Without that, its values went to the file as received.
    #[test]
    fn a_secret_taken_on_the_request_path_is_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let recording = Recording::new(None, None).unwrap();
        recording.apply(&into(dir.path())).unwrap();
        // Compact, as the API server sends it (a review spanning lines is always parsed).
        let fixture: serde_json::Value =
            serde_json::from_slice(include_bytes!("../tests/fixtures/reviews/secret-create.json")).unwrap();
        let body = Bytes::from(serde_json::to_vec(&fixture).unwrap());
        let review = crate::review::decode::review(&body).unwrap();
        recording.take(&review.request).unwrap().offer(entry(body.clone()));
        assert!(until(|| lines(dir.path()).len() == 1));
        let text = lines(dir.path()).concat();
        let object = &serde_json::from_slice::<serde_json::Value>(&body).unwrap()["request"]["object"];
        for value in object["data"].as_object().unwrap().values() {
            assert!(!text.contains(value.as_str().unwrap()), "{value} in {text}");
        }
        assert!(text.contains("hmac-sha256:"), "{text}");
    }

    /// The sample and the filter are decided on the request path; what they leave is not taken
    /// (counted skipped, not dropped).
    #[test]
    fn the_sample_and_the_filter_decide_what_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let recording = Recording::new(None, None).unwrap();
        let none = settings::Recording { sample: settings::Sample::of(0.0), ..into(dir.path()) };
        recording.apply(&none).unwrap();
        assert!(!offer(&recording, "u"));
        let half = settings::Recording { sample: settings::Sample::of(0.5), ..into(dir.path()) };
        recording.apply(&half).unwrap();
        let taken = (0..200).filter(|i| offer(&recording, &format!("uid-{i}"))).count();
        assert!((70..=130).contains(&taken), "{taken} of 200");
        assert_eq!(offer(&recording, "uid-7"), offer(&recording, "uid-7"), "the same uid, the same decision");
        // The fixture is a Pod in `team-a`.
        let filtered = |filter: settings::Filter| {
            recording.apply(&settings::Recording { filter, ..into(dir.path()) }).unwrap();
            offer(&recording, "f")
        };
        let resources = |list: &[(&str, &str)]| settings::Filter {
            resources: list.iter().map(|(g, r)| (g.to_string(), r.to_string())).collect(),
            ..settings::Filter::default()
        };
        assert!(filtered(resources(&[("", "pods")])));
        assert!(!filtered(resources(&[("apps", "*")])));
        assert!(!filtered(settings::Filter {
            exclude_namespaces: vec!["team-a".into()],
            ..Default::default()
        }));
        assert!(filtered(settings::Filter { namespaces: vec!["team-a".into()], ..Default::default() }));
    }
}
