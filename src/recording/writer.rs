//! The writer thread: each entry redacted, encoded as one line and appended to the current
//! file; a new file when the next line would take the current one past `max_file_bytes` (the
//! finished one handed to the compressor); when a file begins, the oldest removed while the
//! others hold more than `max_total_bytes`. Files are `reviews-SECONDS-SEQUENCE.jsonl`
//! (`.jsonl.gz` once compressed), so their names sort as they were written.
//!
//! Entries are taken from the queue in batches, in order: the lines of a batch are encoded
//! into one buffer and written with one `write`, and counted written (or failed) together.
//! A file holds whole lines only: a write that fails is cut back to the lines before it, and
//! when a directory is opened, the partial last line a crash left in a plain file is cut
//! before the file is compressed.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde_json::Value;

use super::compress::{self, Compressor};
use super::redact::Redactor;
use super::world_line::WorldLine;
use super::{Answer, Entry, Limits, Plan, Queued, Status, Webhook};

const KEY_FILE: &str = ".key";
const KEY_BYTES: usize = 32;

/// Makes `dir` (0700) if missing and returns the redaction key kept in it, made (0600) the
/// first time: one key per directory, so a recording's hashes compare across restarts.
pub(super) fn prepare(dir: &Path) -> anyhow::Result<Vec<u8>> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create the recording directory {}", dir.display()))?;
    let path = dir.join(KEY_FILE);
    match fs::read(&path) {
        Ok(key) if key.len() == KEY_BYTES => return Ok(key),
        Ok(_) => anyhow::bail!(
            "{} is not a recording key ({KEY_BYTES} bytes): remove it to make a new one",
            path.display()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
    let mut key = vec![0; KEY_BYTES];
    getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness for the recording key: {e}"))?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(&key).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(key)
}

/// How long the queue may be empty before a recording turned off closes its file.
const IDLE: Duration = Duration::from_millis(250);
/// Entries taken from the queue at once at most: their lines go to the disk in one `write`
/// (or one per [`BATCH_BYTES`]).
const BATCH_ENTRIES: usize = 256;
/// A batch's lines are written once they hold this many bytes (a line is never split).
const BATCH_BYTES: usize = 1 << 20;
/// How long the writer lets entries gather before taking a batch, unless the last one was
/// full. A sender wakes the writer only when it waits on an empty queue: taking the entries
/// every few milliseconds instead of one by one spares the serving threads a wake-up (a
/// system call and a switch of thread) per review; at most this late, and the queue holds
/// many times what arrives meanwhile.
const GATHER: Duration = Duration::from_millis(10);

/// Writes every entry, each under the plan it was taken with, until the server's recording is
/// dropped; `delay` (test-only) before each line. Entries are taken in batches: each one's
/// line is encoded into one buffer, written with one `write`.
pub(super) fn run(entries: Receiver<Queued>, status: &Status, delay: Option<Duration>) {
    let compressor = Compressor::start();
    let mut writing: Option<Writing> = None;
    let mut batch = Vec::with_capacity(BATCH_ENTRIES);
    let mut full = false;
    loop {
        match entries.recv_timeout(IDLE) {
            Ok(queued) => batch.push(queued),
            Err(RecvTimeoutError::Timeout) => {
                if !status.on.load(Ordering::Relaxed) {
                    if let Some(writing) = writing.take() {
                        writing.files.close(&compressor, status);
                    }
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if !full {
            std::thread::sleep(GATHER);
        }
        batch.extend(entries.try_iter().take(BATCH_ENTRIES - 1));
        full = batch.len() == BATCH_ENTRIES;
        for queued in batch.drain(..) {
            write(queued, &mut writing, &compressor, status, delay);
        }
        if let Some(writing) = &mut writing {
            writing.files.flush(&compressor, status);
        }
    }
    if let Some(writing) = writing {
        writing.files.close(&compressor, status);
    }
}

/// One entry into the batch of the files of its plan.
fn write(
    Queued { plan, entry, secret }: Queued,
    writing: &mut Option<Writing>,
    compressor: &Compressor,
    status: &Status,
    delay: Option<Duration>,
) {
    // Another plan: the same directory keeps its file under the new bounds; another one
    // closes it (its batch written first) and begins there.
    let current = writing.take_if(|writing| !Arc::ptr_eq(&writing.plan, &plan));
    if let Some(mut previous) = current {
        if previous.plan.limits.dir == plan.limits.dir && previous.plan.key == plan.key {
            previous.files.limits = plan.limits.clone();
            *writing = Some(Writing {
                redactor: Redactor::new(&plan.key, &plan.redact_pointers),
                plan: plan.clone(),
                files: previous.files,
            });
        } else {
            previous.files.close(compressor, status);
        }
    }
    let writing = writing.get_or_insert_with(|| Writing {
        redactor: Redactor::new(&plan.key, &plan.redact_pointers),
        files: Files::open(plan.limits.clone(), compressor),
        plan: plan.clone(),
    });
    if let Some(delay) = delay {
        std::thread::sleep(delay);
    }
    // Only a review with something to redact or leave out is parsed (`encode`).
    let parse = secret || plan.drop_user_info || !plan.redact_pointers.is_empty();
    let redactor = &writing.redactor;
    let added = writing.files.add(
        |buffer| encode(entry, redactor, plan.drop_user_info, parse, buffer),
        compressor,
        status,
    );
    if let Err(error) = added {
        status.failed(1, format!("{error:#}"));
    }
}

/// The plan being written and its files.
struct Writing {
    plan: Arc<Plan>,
    redactor: Redactor,
    files: Files,
}

/// One entry as one line of JSON, redacted, appended to `out` (nothing appended if it fails).
/// With `parse`, the request is read into a tree, redacted and written again; without
/// (nothing to redact or leave out), it is written as received, unless it spans lines. A
/// request that does not read again as JSON (it was read once to be answered) fails the entry,
/// counted, rather than being written as null. The line is serialized straight into `out`,
/// each field from the entry itself: no tree of the answer or the webhooks, no copy of the
/// request but the one into the line.
fn encode(
    entry: Entry,
    redactor: &Redactor,
    drop_user_info: bool,
    parse: bool,
    out: &mut Vec<u8>,
) -> anyhow::Result<()> {
    let Entry { time, endpoint, request, mut answer, webhooks, world } = entry;
    const UNREADABLE: &str = "the review could not be read again for its redaction";
    let as_received = !parse && memchr::memchr2(b'\n', b'\r', &request).is_none();
    let (review, secret) = if as_received {
        (Request::AsReceived(serde_json::from_slice(&request).context(UNREADABLE)?), false)
    } else {
        let mut review: Value = serde_json::from_slice(&request).context(UNREADABLE)?;
        // Whether it is a Secret's is read again from the review itself, whatever the request
        // path said.
        let secret = redactor.review(&mut review);
        if drop_user_info {
            if let Some(Value::Object(request)) = review.get_mut("request") {
                request.remove("userInfo");
            }
        }
        (Request::Parsed(review), secret)
    };
    answer.patch = answer.patch_text.take().and_then(|text| serde_json::from_slice(&text).ok());
    if let Some(patch) = &mut answer.patch {
        redactor.patch(patch, secret);
    }
    redactor.annotations(&mut answer.audit_annotations, secret);
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let line = Line {
        answer: &answer,
        endpoint,
        request: review,
        time: crate::upstream::x509::rfc3339(seconds as i64),
        webhooks: &webhooks,
        world: WorldLine::of(&world, redactor.pointers(), drop_user_info),
    };
    let start = out.len();
    if let Err(error) = serde_json::to_writer(&mut *out, &line) {
        out.truncate(start);
        return Err(error).context("the record could not be encoded");
    }
    out.push(b'\n');
    Ok(())
}

/// For the benches (`super::bench_line`): `entry` encoded with nothing to redact, as the writer
/// encodes it.
pub(super) fn encode_line(entry: Entry, out: &mut Vec<u8>) -> anyhow::Result<()> {
    encode(entry, &Redactor::new(b"bench", &[]), false, false, out)
}

/// One recorded review, as written: its fields in the order they have always been written
/// (sorted), each one's own fields in the order of its type.
#[derive(serde::Serialize)]
struct Line<'a> {
    answer: &'a Answer,
    endpoint: &'static str,
    request: Request<'a>,
    time: String,
    webhooks: &'a [Webhook],
    #[serde(skip_serializing_if = "WorldLine::is_empty")]
    world: WorldLine<'a>,
}

/// The request as received, or read and redacted.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Request<'a> {
    AsReceived(&'a serde_json::value::RawValue),
    Parsed(Value),
}

/// The files of one recording directory, and the batch of lines on its way to them.
struct Files {
    limits: Limits,
    /// The file written to, and how many bytes it holds.
    current: Option<Current>,
    sequence: u64,
    /// Lines encoded for the current file (or the one to begin) and not yet written: written
    /// with one `write` by [`Files::flush`].
    batch: Vec<u8>,
    /// How many lines `batch` holds.
    lines: u64,
}

/// The file being written.
struct Current {
    file: File,
    size: u64,
    path: PathBuf,
    /// Its inode: a file removed or replaced under the writer is noticed, not written into.
    inode: u64,
}

impl Current {
    /// Whether `path` still names the file written to: a file removed (or the directory with
    /// it) would otherwise take every line while nothing reaches the disk.
    fn still_there(&self) -> bool {
        fs::metadata(&self.path).is_ok_and(|metadata| metadata.ino() == self.inode)
    }
}

impl Files {
    /// The files of `limits.dir`, numbered on from the last one there; what a crash left is
    /// mended: a partial last line cut ([`cut_partial_line`]), the plain files left finished
    /// compressed (`compress::recover`).
    fn open(limits: Limits, compressor: &Compressor) -> Self {
        let mut sequence = 0;
        if let Ok(files) = recordings(&limits.dir) {
            sequence = files.iter().filter_map(|(path, _)| sequence_of(path)).max().unwrap_or(0);
        }
        for left in compress::recover(&limits.dir) {
            if let Err(error) = cut_partial_line(&left) {
                tracing::warn!(error = format!("{error:#}"), "recording: a file left could not be mended");
            }
            compressor.compress(left, &limits);
        }
        Files { limits, current: None, sequence, batch: Vec::new(), lines: 0 }
    }

    /// Encodes one line into the batch with `encode`, which appends it (or nothing, failing).
    /// A line never splits: when it would take the file past its bound, the lines before it
    /// are written and the file finished, and it begins the next one. A batch of
    /// [`BATCH_BYTES`] is written at once.
    fn add(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> anyhow::Result<()>,
        compressor: &Compressor,
        status: &Status,
    ) -> anyhow::Result<()> {
        let start = self.batch.len();
        encode(&mut self.batch)?;
        let before = self.current.as_ref().map_or(0, |current| current.size) + start as u64;
        let line = (self.batch.len() - start) as u64;
        if before > 0 && before + line > self.limits.max_file_bytes {
            let next = self.batch.split_off(start);
            self.flush(compressor, status);
            self.finish(compressor);
            self.batch = next;
        }
        self.lines += 1;
        if self.batch.len() >= BATCH_BYTES {
            self.flush(compressor, status);
        }
        Ok(())
    }

    /// Writes the batch with one `write` to the current file (begun if there is none, or if it
    /// is gone), and counts its lines written or failed.
    fn flush(&mut self, compressor: &Compressor, status: &Status) {
        if self.lines == 0 {
            return;
        }
        let lines = std::mem::take(&mut self.lines);
        let written = self.write_batch(compressor);
        self.batch.clear();
        match written {
            Ok(()) => status.wrote(lines),
            Err(error) => status.failed(lines, format!("{error:#}")),
        }
    }

    fn write_batch(&mut self, compressor: &Compressor) -> anyhow::Result<()> {
        if self.current.as_ref().is_none_or(|current| !current.still_there()) {
            self.finish(compressor);
            self.current = Some(self.begin()?);
            self.trim()?;
        }
        let Some(current) = &mut self.current else { unreachable!("a file was just begun") };
        if let Err(error) = current.file.write_all(&self.batch) {
            // What was written of the batch is cut, so that no partial line stays; the next
            // batch begins a new file.
            let _ = current.file.set_len(current.size);
            if current.size == 0 {
                let _ = fs::remove_file(&current.path);
            }
            self.current = None;
            return Err(error).context("cannot write the recording");
        }
        current.size += self.batch.len() as u64;
        Ok(())
    }

    /// Hands the current file, if still there, to the compressor: the next line begins another.
    fn finish(&mut self, compressor: &Compressor) {
        if let Some(finished) = self.current.take() {
            if finished.still_there() {
                compressor.compress(finished.path, &self.limits);
            }
        }
    }

    /// Writes the batch, closes the current file and hands it to the compressor.
    fn close(mut self, compressor: &Compressor, status: &Status) {
        self.flush(compressor, status);
        self.finish(compressor);
    }

    /// A new file, named after the time and a sequence number.
    fn begin(&mut self) -> anyhow::Result<Current> {
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        loop {
            self.sequence += 1;
            let path = self.limits.dir.join(format!("reviews-{seconds:012}-{:06}.jsonl", self.sequence));
            let file = match OpenOptions::new().append(true).create_new(true).mode(0o600).open(&path) {
                Ok(file) => file,
                // A file of that name (a second in which files were begun before): the next one.
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error).with_context(|| format!("cannot create {}", path.display())),
            };
            let inode = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.ino();
            return Ok(Current { file, size: 0, path, inode });
        }
    }

    fn trim(&self) -> anyhow::Result<()> {
        trim(&self.limits)
    }
}

/// Cuts a partial last line from the plain file `path` left by a crash or a full disk (a line
/// is whole when it ends with its newline), so that the file holds whole lines only before it
/// is compressed; a file left with nothing is removed. A file already gone is fine.
fn cut_partial_line(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("cannot open {}", path.display())),
    };
    let size = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    // The last newline, read backwards a block at a time.
    let mut block = vec![0; 64 << 10];
    let mut end = size;
    let mut whole = 0;
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let part = &mut block[..(end - start) as usize];
        file.read_exact_at(part, start).with_context(|| format!("cannot read {}", path.display()))?;
        if let Some(at) = memchr::memrchr(b'\n', part) {
            whole = start + at as u64 + 1;
            break;
        }
        end = start;
    }
    if whole == size {
        return Ok(());
    }
    tracing::warn!(
        file = %path.display(),
        bytes = size - whole,
        "recording: a partial last line, left by a crash or a full disk, is cut"
    );
    if whole == 0 {
        return fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()));
    }
    file.set_len(whole).with_context(|| format!("cannot cut {}", path.display()))
}

/// Removes the oldest files while all of them (compressed ones by their compressed size) hold
/// more than `max_total_bytes`; never the newest, the one being written, so the directory holds
/// at most that plus the current file. A file already gone (the compressor trims too) is fine.
pub(super) fn trim(limits: &Limits) -> anyhow::Result<()> {
    let mut files = recordings(&limits.dir)?;
    let mut total: u64 = files.iter().map(|(_, size)| size).sum();
    files.pop(); // the newest: the one just begun
    for (path, size) in files {
        if total <= limits.max_total_bytes {
            break;
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("cannot remove {}", path.display())),
        }
        total -= size;
    }
    Ok(())
}

/// The recording files in `dir`, plain (`.jsonl`) and compressed (`.jsonl.gz`), oldest first,
/// with their sizes on disk.
pub(crate) fn recordings(dir: &Path) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for item in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let item = item?;
        let name = item.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("reviews-") && (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")) {
            match item.metadata() {
                Ok(metadata) => files.push((item.path(), metadata.len())),
                // Removed or compressed since listed.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    files.sort();
    Ok(files)
}

/// `reviews-SECONDS-SEQUENCE.jsonl[.gz]`'s sequence.
fn sequence_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gz").unwrap_or(name).strip_suffix(".jsonl")?;
    stem.rsplit('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// Files of `limits` with nothing in them yet, as `Files::open` makes them for an empty
    /// directory.
    fn files(limits: Limits) -> Files {
        Files { limits, current: None, sequence: 0, batch: Vec::new(), lines: 0 }
    }

    /// Adds `line` to the batch as an encoded entry would be.
    fn add(files: &mut Files, line: &[u8], compressor: &Compressor, status: &Status) {
        files
            .add(
                |batch| {
                    batch.extend_from_slice(line);
                    Ok(())
                },
                compressor,
                status,
            )
            .unwrap();
    }

    /// One entry encoded alone, as `encode` appends it.
    fn line(entry: Entry, redactor: &Redactor, drop_user_info: bool, parse: bool) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        encode(entry, redactor, drop_user_info, parse, &mut out)?;
        Ok(out)
    }

    /// Lines are bounded by file even within one batch: 20 lines of 49 bytes added at once
    /// and written with one flush fill 10 files of two.
    #[test]
    fn files_rotate_at_their_bound_and_the_oldest_go_past_the_total() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits { dir: dir.path().to_path_buf(), max_file_bytes: 100, max_total_bytes: 350 };
        let mut files = files(limits);
        let (compressor, status) = (Compressor::none(), Status::default());
        let line = [b'x'; 49];
        for _ in 0..20 {
            add(&mut files, &line, &compressor, &status);
        }
        files.flush(&compressor, &status);
        assert_eq!(status.written.load(Ordering::Relaxed), 20);
        let kept = recordings(dir.path()).unwrap();
        // 20 lines of 49 bytes, two to a file: 10 files begun, the oldest removed until the
        // total (with the newest) is within 350 bytes.
        let sizes: Vec<u64> = kept.iter().map(|(_, size)| *size).collect();
        assert_eq!(sizes, [98, 98, 98, 98], "{kept:?}");
        let names: Vec<String> =
            kept.iter().map(|(path, _)| path.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(names[0].ends_with("-000007.jsonl") && names[3].ends_with("-000010.jsonl"), "{names:?}");
        for (path, _) in &kept {
            assert_eq!(fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{path:?}");
        }
    }

    /// Rotated files are compressed off the writer, each to exactly the lines written into
    /// it, and the total bound counts them by their compressed size: 3 KiB of plain lines fit
    /// a 1 KiB bound once compressed. Without the compression, the oldest files went.
    #[test]
    fn rotated_files_are_compressed_and_counted_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits { dir: dir.path().to_path_buf(), max_file_bytes: 500, max_total_bytes: 1024 };
        let compressor = Compressor::start();
        let mut files = Files::open(limits, &compressor);
        let written: Vec<String> =
            (0..60).map(|i| format!("{{\"line\":{i:02},\"padding\":\"{}\"}}\n", "a".repeat(20))).collect();
        // Only the file being written is plain, once the compressor has caught up.
        let caught_up = || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let kept = recordings(dir.path()).unwrap();
                let plain =
                    kept.iter().filter(|(path, _)| path.extension().is_some_and(|e| e == "jsonl")).count();
                if plain <= 1 || std::time::Instant::now() > deadline {
                    return kept;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let status = Status::default();
        for line in &written {
            add(&mut files, line.as_bytes(), &compressor, &status);
            files.flush(&compressor, &status);
            caught_up();
        }
        let kept = caught_up();
        let names: Vec<String> =
            kept.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 6, "every file kept: {names:?}");
        assert!(
            names[..5].iter().all(|n| n.ends_with(".jsonl.gz")) && names[5].ends_with(".jsonl"),
            "{names:?}"
        );
        let mut read = String::new();
        for (path, _) in &kept {
            let file = fs::File::open(path).unwrap();
            if path.extension().is_some_and(|e| e == "gz") {
                std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut read).unwrap();
            } else {
                std::io::Read::read_to_string(&mut std::io::BufReader::new(file), &mut read).unwrap();
            }
            assert_eq!(fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{path:?}");
        }
        assert_eq!(read, written.concat(), "exactly the lines written, in order");
    }

    /// With nothing to redact, the request is written as received, byte for byte, and the
    /// line reads as the parsed one does; a request spanning lines is parsed, so that a line
    /// stays one line.
    #[test]
    fn a_request_with_nothing_to_redact_is_written_as_received() {
        let entry = |request: &'static [u8]| Entry {
            time: SystemTime::UNIX_EPOCH,
            endpoint: "validate",
            request: bytes::Bytes::from_static(request),
            answer: super::super::Answer {
                allowed: true,
                code: 200,
                message: None,
                warnings: vec!["w".into()],
                audit_annotations: Default::default(),
                patch: None,
                patch_text: None,
            },
            webhooks: Vec::new(),
            world: Default::default(),
        };
        let redactor = Redactor::new(b"key", &[]);
        let received = br#"{"request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"}},"apiVersion":"admission.k8s.io/v1"}"#;
        let raw = line(entry(received), &redactor, false, false).unwrap();
        let text = String::from_utf8(raw.clone()).unwrap();
        assert!(text.contains(std::str::from_utf8(received).unwrap()), "{text}");
        let parsed = line(entry(received), &redactor, false, true).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&raw).unwrap(),
            serde_json::from_slice::<Value>(&parsed).unwrap()
        );
        assert!(
            text.starts_with(
                r#"{"answer":{"allowed":true,"code":200,"warnings":["w"]},"endpoint":"validate","request":"#
            ),
            "{text}"
        );
        let spanning = line(entry(b"{\"request\":\n{\"uid\":\"u\"}}"), &redactor, false, false).unwrap();
        assert_eq!(spanning.iter().filter(|byte| **byte == b'\n').count(), 1, "one line");
    }

    /// A request that does not read as JSON is not written as a record of nothing.
    #[test]
    fn an_unreadable_request_fails_its_entry() {
        let entry = |request: &'static [u8]| Entry {
            time: SystemTime::now(),
            endpoint: "validate",
            request: bytes::Bytes::from_static(request),
            answer: super::super::Answer {
                allowed: true,
                code: 200,
                message: None,
                warnings: Vec::new(),
                audit_annotations: Default::default(),
                patch: None,
                patch_text: Some(br#"[{"op":"add","path":"/a","value":1}]"#.to_vec()),
            },
            webhooks: Vec::new(),
            world: Default::default(),
        };
        let redactor = Redactor::new(b"key", &[]);
        for parse in [false, true] {
            // Nothing of it in the batch it would have been added to.
            let mut batch = b"{\"before\":1}\n".to_vec();
            let error =
                encode(entry(b"{not json"), &redactor, false, parse, &mut batch).unwrap_err().to_string();
            assert!(error.contains("could not be read again"), "{error}");
            assert_eq!(batch, b"{\"before\":1}\n");
        }
        let request = br#"{"request":{"uid":"u","userInfo":{"username":"alice"}}}"#;
        let written = line(entry(request), &redactor, false, true).unwrap();
        let record: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(record["request"]["request"]["uid"], "u");
        assert_eq!(record["request"]["request"]["userInfo"]["username"], "alice", "kept by default");
        let dropped: Value =
            serde_json::from_slice(&line(entry(request), &redactor, true, true).unwrap()).unwrap();
        assert_eq!(dropped["request"]["request"].get("userInfo"), None, "dropUserInfo");
        assert_eq!(record["answer"]["patch"][0]["path"], "/a");
        assert_eq!(written.last(), Some(&b'\n'));
    }

    /// A batch's lines reach the disk together, with one write when it is flushed, and are
    /// counted written then; a batch past `BATCH_BYTES` is written without waiting. Without
    /// the batch, each line was written as it was added.
    #[test]
    fn a_batch_is_written_at_once_when_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let limits =
            Limits { dir: dir.path().to_path_buf(), max_file_bytes: 64 << 20, max_total_bytes: 1 << 30 };
        let mut files = files(limits);
        let (compressor, status) = (Compressor::none(), Status::default());
        for i in 0..3 {
            add(&mut files, format!("{{\"line\":{i}}}\n").as_bytes(), &compressor, &status);
        }
        assert_eq!(recordings(dir.path()).unwrap(), [], "nothing on the disk before the flush");
        assert_eq!(status.written.load(Ordering::Relaxed), 0);
        files.flush(&compressor, &status);
        let kept = recordings(dir.path()).unwrap();
        assert_eq!(fs::read_to_string(&kept[0].0).unwrap(), "{\"line\":0}\n{\"line\":1}\n{\"line\":2}\n");
        assert_eq!(status.written.load(Ordering::Relaxed), 3);

        let big = vec![b'y'; BATCH_BYTES / 2];
        add(&mut files, &big, &compressor, &status);
        assert_eq!(status.written.load(Ordering::Relaxed), 3);
        add(&mut files, &big, &compressor, &status);
        assert_eq!(status.written.load(Ordering::Relaxed), 5, "a full batch is written at once");
        assert_eq!(fs::metadata(&kept[0].0).unwrap().len(), 3 * 11 + BATCH_BYTES as u64);
    }

    /// A partial last line (no newline: a crash or a full disk cut it) is cut, wherever the
    /// last newline is; a whole file is left as it is, a file with no whole line removed, a
    /// file gone is fine. Opening the directory mends its files so before compressing them.
    #[test]
    fn a_partial_last_line_is_cut_when_the_directory_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("a\nb\npart".to_owned(), "a\nb\n"),
            ("a\nb\n".to_owned(), "a\nb\n"),
            // The last newline more than one block from the end.
            (format!("a\n{}", "z".repeat(200_000)), "a\n"),
        ];
        for (i, (text, kept)) in cases.iter().enumerate() {
            let path = dir.path().join(format!("reviews-000000000001-{i:06}.jsonl"));
            fs::write(&path, text).unwrap();
            cut_partial_line(&path).unwrap();
            assert_eq!(fs::read_to_string(&path).unwrap(), *kept, "case {i}");
        }
        let nothing_whole = dir.path().join("reviews-000000000001-000009.jsonl");
        fs::write(&nothing_whole, "{\"torn\":").unwrap();
        cut_partial_line(&nothing_whole).unwrap();
        assert!(!nothing_whole.exists());
        cut_partial_line(&nothing_whole).unwrap();

        let torn = dir.path().join("reviews-000000000002-000001.jsonl");
        fs::write(&torn, "{\"whole\":1}\n{\"whole\":2}\n{\"tor").unwrap();
        let limits =
            Limits { dir: dir.path().to_path_buf(), max_file_bytes: 1 << 20, max_total_bytes: 1 << 30 };
        let files = Files::open(limits, &Compressor::none());
        assert_eq!(fs::read_to_string(&torn).unwrap(), "{\"whole\":1}\n{\"whole\":2}\n");
        assert_eq!(files.sequence, 2, "numbered on from the last file there");
    }

    #[test]
    fn the_key_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let recording = dir.path().join("r");
        let key = prepare(&recording).unwrap();
        assert_eq!(key.len(), KEY_BYTES);
        assert_eq!(prepare(&recording).unwrap(), key, "the same key on a restart");
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&recording.join(KEY_FILE)), 0o600);
        assert_eq!(mode(&recording), 0o700);
        fs::write(recording.join(KEY_FILE), b"short").unwrap();
        let error = prepare(&recording).unwrap_err().to_string();
        assert!(error.contains("is not a recording key"), "{error}");
    }
}
