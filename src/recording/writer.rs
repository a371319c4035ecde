//! The writer thread: each entry redacted, encoded as one line and appended to the current
//! file; a new file when the next line would take the current one past `max_file_bytes`; when
//! a file begins, the oldest removed while the others hold more than `max_total_bytes`. Files are `reviews-SECONDS-SEQUENCE.jsonl`, so their names
//! sort as they were written.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde_json::Value;

use super::redact::Redactor;
use super::{Entry, Limits, Status};

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

/// Writes every entry until the server's recorder is dropped.
pub(super) fn run(entries: Receiver<Entry>, limits: Limits, key: Vec<u8>, status: &Status) {
    let redactor = Redactor::new(&key);
    let mut files = Files { limits, current: None, sequence: 0 };
    for entry in entries {
        let written = encode(entry, &redactor).and_then(|line| files.append(&line));
        match written {
            Ok(()) => status.wrote(),
            Err(error) => status.failed(format!("{error:#}")),
        }
    }
}

/// One entry as one line of JSON, redacted. A request that does not read again as JSON (it
/// was read once to be answered) fails the entry, counted, rather than being written as null.
fn encode(entry: Entry, redactor: &Redactor) -> anyhow::Result<Vec<u8>> {
    let Entry { time, endpoint, request, mut answer, webhooks } = entry;
    let mut review: Value =
        serde_json::from_slice(&request).context("the review could not be read again for its redaction")?;
    answer.patch = answer.patch_text.take().and_then(|text| serde_json::from_slice(&text).ok());
    if redactor.review(&mut review) {
        if let Some(patch) = &mut answer.patch {
            redactor.patch(patch);
        }
        redactor.annotations(&mut answer.audit_annotations);
    }
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let line = serde_json::json!({
        "time": crate::upstream::x509::rfc3339(seconds as i64),
        "endpoint": endpoint,
        "request": review,
        "answer": answer,
        "webhooks": webhooks,
    });
    let mut line = serde_json::to_vec(&line).context("the record could not be encoded")?;
    line.push(b'\n');
    Ok(line)
}

/// The files of one recording directory.
struct Files {
    limits: Limits,
    /// The file written to, and how many bytes it holds.
    current: Option<Current>,
    sequence: u64,
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
    fn append(&mut self, line: &[u8]) -> anyhow::Result<()> {
        // A line never splits: a file is full when the next line would take it past its bound.
        let bound = self.limits.max_file_bytes;
        let full = |current: &Current| current.size > 0 && current.size + line.len() as u64 > bound;
        if self.current.as_ref().is_none_or(|current| full(current) || !current.still_there()) {
            self.current = None;
            self.current = Some(self.begin()?);
            self.trim()?;
        }
        let Some(current) = &mut self.current else { unreachable!("a file was just begun") };
        if let Err(error) = current.file.write_all(line) {
            // Begin afresh next time: the file may hold part of this line.
            self.current = None;
            return Err(error).context("cannot write the recording");
        }
        current.size += line.len() as u64;
        Ok(())
    }

    /// A new file, named after the time and a sequence number.
    fn begin(&mut self) -> anyhow::Result<Current> {
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.sequence += 1;
        let path = self.limits.dir.join(format!("reviews-{seconds:012}-{:06}.jsonl", self.sequence));
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let inode = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.ino();
        Ok(Current { file, size: 0, path, inode })
    }

    /// Removes the oldest files while all of them hold more than `max_total_bytes`; never the
    /// one being written, so the directory holds at most that plus the current file.
    fn trim(&self) -> anyhow::Result<()> {
        let mut files = recordings(&self.limits.dir)?;
        let mut total: u64 = files.iter().map(|(_, size)| size).sum();
        files.pop(); // the newest: the one just begun
        for (path, size) in files {
            if total <= self.limits.max_total_bytes {
                break;
            }
            fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            total -= size;
        }
        Ok(())
    }
}

/// The recording files in `dir`, oldest first, with their sizes.
pub(crate) fn recordings(dir: &Path) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for item in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let item = item?;
        let name = item.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("reviews-") && name.ends_with(".jsonl") {
            files.push((item.path(), item.metadata()?.len()));
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn files_rotate_at_their_bound_and_the_oldest_go_past_the_total() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits { dir: dir.path().to_path_buf(), max_file_bytes: 100, max_total_bytes: 350 };
        let mut files = Files { limits, current: None, sequence: 0 };
        let line = [b'x'; 49];
        for _ in 0..20 {
            files.append(&line).unwrap();
        }
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
        };
        let redactor = Redactor::new(b"key");
        let error = encode(entry(b"{not json"), &redactor).unwrap_err().to_string();
        assert!(error.contains("could not be read again"), "{error}");
        let line = encode(entry(br#"{"request":{"uid":"u"}}"#), &redactor).unwrap();
        let record: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(record["request"]["request"]["uid"], "u");
        assert_eq!(record["answer"]["patch"][0]["path"], "/a");
        assert_eq!(line.last(), Some(&b'\n'));
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
