//! Compression of finished recording files, off the writer: `reviews-….jsonl` becomes
//! `reviews-….jsonl.gz` (gzip, 0600) on a thread of its own with a bounded backlog (full: the
//! file stays plain, which a replay reads as well). Level 1, the fastest: recorded reviews are
//! repetitive JSON and still shrink twentyfold or more. Even so it is the recording's largest
//! cost, more than encoding and writing the lines, so the thread runs at the lowest scheduling
//! priority (nice 19): on a replica whose cores are busy with reviews it compresses in their
//! idle time, and a file waits plain meanwhile (the `recording` load scenario measures it,
//! loadtest/README.md).
//!
//! A file is compressed into `….jsonl.gz.tmp`, synced, renamed to `….jsonl.gz`, and only then
//! is the plain file removed: a crash at any point leaves the plain file whole (with, at worst,
//! a partial `.tmp`, or a whole `.gz` beside it), never a half-written `.gz` alone. When a
//! directory is opened again its leftovers are mended: a plain file beside its `.gz` is
//! removed, any other plain file compressed (its `.tmp` written afresh).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};

use anyhow::Context as _;
use flate2::write::GzEncoder;
use flate2::Compression;

use super::writer;
use super::Limits;

/// Finished files waiting for compression at most.
const BACKLOG: usize = 16;

/// The compressing thread's queue; `None` if the thread could not start (files stay plain).
pub(super) struct Compressor {
    jobs: Option<SyncSender<Job>>,
}

/// A finished plain file, and the bounds of its directory (trimmed after compressing).
struct Job {
    plain: PathBuf,
    limits: Limits,
}

impl Compressor {
    pub(super) fn start() -> Self {
        let (jobs, received) = mpsc::sync_channel(BACKLOG);
        let started = std::thread::Builder::new().name("recording-gzip".into()).spawn(move || {
            lowest_priority();
            run(received)
        });
        if let Err(error) = &started {
            tracing::warn!(%error, "recording: no thread to compress files; they stay plain");
        }
        Compressor { jobs: started.ok().map(|_| jobs) }
    }

    /// None: files stay plain (tests of rotation alone).
    #[cfg(test)]
    pub(super) fn none() -> Self {
        Compressor { jobs: None }
    }

    /// Compresses `plain` when it can; with the backlog full it stays plain.
    pub(super) fn compress(&self, plain: PathBuf, limits: &Limits) {
        if let Some(jobs) = &self.jobs {
            if jobs.try_send(Job { plain, limits: limits.clone() }).is_err() {
                tracing::debug!("recording: compression backlog full, a file stays plain");
            }
        }
    }
}

/// The calling thread at nice 19, the lowest priority: on Linux `setpriority(PRIO_PROCESS,
/// tid)` sets one thread's. Without it (not permitted), it compresses at the process's own.
fn lowest_priority() {
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), 19) {
        tracing::debug!(%error, "recording: the compressor keeps the process's priority");
    }
}

fn run(jobs: Receiver<Job>) {
    for Job { plain, limits } in jobs {
        if let Err(error) = gzip(&plain) {
            tracing::warn!(
                error = format!("{error:#}"),
                "recording: a file could not be compressed; it stays plain"
            );
            continue;
        }
        if let Err(error) = writer::trim(&limits) {
            tracing::warn!(error = format!("{error:#}"), "recording: old files could not be removed");
        }
    }
}

/// The plain files `dir` holds before a file is begun there, to be compressed (or, beside their
/// `.gz`, removed), and those of a `.tmp` left alone (its file gone: the `.tmp` removed).
pub(super) fn recover(dir: &Path) -> Vec<PathBuf> {
    let Ok(items) = fs::read_dir(dir) else { return Vec::new() };
    let mut left = Vec::new();
    for item in items.flatten() {
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("reviews-") {
            continue;
        }
        if let Some(plain) = name.strip_suffix(".gz.tmp") {
            left.push(dir.join(plain));
        } else if name.ends_with(".jsonl") {
            left.push(item.path());
        }
    }
    left.sort();
    left.dedup();
    left
}

/// `plain` compressed into `plain.gz` and removed; a whole `.gz` beside it already: removed.
pub(super) fn gzip(plain: &Path) -> anyhow::Result<()> {
    let gz = with_suffix(plain, ".gz");
    let tmp = with_suffix(plain, ".gz.tmp");
    let input = match File::open(plain) {
        Ok(input) => input,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // Trimmed, or compressed already: only a `.tmp` may be left.
            return remove(&tmp);
        }
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", plain.display())),
    };
    if gz.exists() {
        // Renamed whole before the plain file's removal was cut short.
        return remove(plain);
    }
    let written = (|| -> anyhow::Result<()> {
        let output = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut encoder = encoder(BufWriter::new(output));
        io::copy(&mut BufReader::new(input), &mut encoder)
            .with_context(|| format!("cannot compress {}", plain.display()))?;
        let output = encoder.finish()?.into_inner().map_err(io::IntoInnerError::into_error)?;
        output.sync_all().with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &gz).with_context(|| format!("cannot rename {}", tmp.display()))
    })();
    if let Err(error) = written {
        let _ = fs::remove_file(&tmp);
        return Err(error);
    }
    match fs::remove_file(plain) {
        Ok(()) => Ok(()),
        // Trimmed while being compressed: it was meant to be gone.
        Err(error) if error.kind() == io::ErrorKind::NotFound => remove(&gz),
        Err(error) => Err(error).with_context(|| format!("cannot remove {}", plain.display())),
    }
}

/// The gzip encoder of every file, at the level chosen (the module's doc says why).
pub(super) fn encoder<W: io::Write>(output: W) -> GzEncoder<W> {
    GzEncoder::new(output, Compression::fast())
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes `path` if it is there.
fn remove(path: &Path) -> anyhow::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("cannot remove {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn gunzip(path: &Path) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(File::open(path).unwrap()).read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn a_file_compresses_to_exactly_its_lines_privately_and_the_plain_one_goes() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("reviews-000000000001-000001.jsonl");
        let lines: String = (0..500).map(|i| format!("{{\"line\":{i},\"text\":\"é\"}}\n")).collect();
        fs::write(&plain, &lines).unwrap();
        gzip(&plain).unwrap();
        let gz = dir.path().join("reviews-000000000001-000001.jsonl.gz");
        assert_eq!(gunzip(&gz), lines);
        assert!(!plain.exists(), "the plain file is removed once compressed");
        assert!(!with_suffix(&plain, ".gz.tmp").exists());
        assert_eq!(fs::metadata(&gz).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(fs::metadata(&gz).unwrap().len() < lines.len() as u64 / 4);
    }

    /// What a crash leaves is mended when the directory is opened again: a partial `.tmp` is
    /// written afresh from the plain file, which was never removed; a whole `.gz` beside its
    /// plain file (the removal cut short) is kept and the plain one removed.
    #[test]
    fn a_crash_mid_compression_leaves_the_plain_file_and_is_mended() {
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("reviews-000000000001-000001.jsonl");
        fs::write(&cut, "{\"a\":1}\n").unwrap();
        fs::write(with_suffix(&cut, ".gz.tmp"), [0x1f, 0x8b, 0x08]).unwrap();
        let renamed = dir.path().join("reviews-000000000001-000002.jsonl");
        fs::write(&renamed, "{\"b\":2}\n").unwrap();
        gzip(&renamed).unwrap();
        fs::write(&renamed, "{\"b\":2}\n").unwrap(); // as if its removal never happened
        let orphan = dir.path().join("reviews-000000000001-000003.jsonl.gz.tmp");
        fs::write(&orphan, [0x1f]).unwrap();

        let left = recover(dir.path());
        assert_eq!(left.len(), 3, "{left:?}");
        for plain in left {
            gzip(&plain).unwrap();
        }
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|i| i.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["reviews-000000000001-000001.jsonl.gz", "reviews-000000000001-000002.jsonl.gz"]);
        assert_eq!(gunzip(&with_suffix(&cut, ".gz")), "{\"a\":1}\n");
        assert_eq!(gunzip(&with_suffix(&renamed, ".gz")), "{\"b\":2}\n");
    }

    /// A compression that fails leaves the plain file and no `.gz`.
    #[test]
    fn a_failed_compression_keeps_the_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("reviews-000000000001-000001.jsonl");
        fs::write(&plain, "{\"a\":1}\n").unwrap();
        // The `.tmp` cannot be made: a directory stands in its place.
        fs::create_dir(with_suffix(&plain, ".gz.tmp")).unwrap();
        assert!(gzip(&plain).is_err());
        assert_eq!(fs::read_to_string(&plain).unwrap(), "{\"a\":1}\n");
        assert!(!with_suffix(&plain, ".gz").exists());
    }
}
