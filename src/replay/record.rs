//! The read side of a recording (`serve --record`, src/recording.rs writes it): its files in
//! name order, each line one [`Record`], plain (`.jsonl`) or gzip (`.jsonl.gz`), read one
//! line at a time so a recording of any size is never held whole.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

/// A line longer than this is refused: a review is capped well below it (src/server/limits.rs),
/// so such a line is not one the gateway wrote.
pub(crate) const MAX_LINE_BYTES: usize = 32 << 20;

/// One recorded review, as `src/recording/writer.rs` writes it.
#[derive(Debug, Deserialize)]
pub(crate) struct Record {
    /// `mutate`, `validate` or `admit`.
    pub(crate) endpoint: String,
    /// The AdmissionReview as received, a Secret's values redacted.
    pub(crate) request: Box<RawValue>,
    pub(crate) answer: RecordedAnswer,
    #[serde(default)]
    pub(crate) webhooks: Vec<RecordedWebhook>,
    /// What the decision saw beyond the request and the fleet (none in recordings made before
    /// it was kept).
    #[serde(default)]
    pub(crate) world: RecordedWorld,
}

/// A record's `world` (src/recording/writer.rs writes it).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecordedWorld {
    /// The request's namespace as the webhooks and policies saw it, when one needed it.
    #[serde(default)]
    pub(crate) namespace: Option<crate::recording::Namespace>,
    /// The caller's `?timeout=`, a Go duration.
    #[serde(default)]
    pub(crate) timeout: Option<String>,
    /// How the record was redacted beyond a Secret's values.
    #[serde(default)]
    pub(crate) redaction: RecordedRedaction,
}

/// The recording's redaction settings when the record was written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecordedRedaction {
    #[serde(default)]
    pub(crate) redact_pointers: Vec<String>,
    /// The request's `userInfo` was left out.
    #[serde(default)]
    pub(crate) drop_user_info: bool,
}

/// The answer the gateway gave.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecordedAnswer {
    pub(crate) allowed: bool,
    pub(crate) code: i64,
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
    /// The combined JSON Patch, as JSON.
    #[serde(default)]
    pub(crate) patch: Option<serde_json::Value>,
}

/// What one matched webhook, or one policy that acted on the request, did.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct RecordedWebhook {
    pub(crate) name: String,
    /// `policy` for a policy; none for a webhook.
    #[serde(default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) round: u8,
    /// `allowed`, `denied` or `error`.
    pub(crate) outcome: String,
    #[serde(default)]
    pub(crate) reason: Option<String>,
    pub(crate) code: u16,
    #[serde(default)]
    pub(crate) mutated: bool,
}

/// Where a record was read: the file and its line (from 1).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Place {
    pub(crate) file: usize,
    pub(crate) line: u64,
}

/// Why a recording could not be read; every message names the file, and the line if any.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("cannot read {path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("{path}: no recording files (reviews-*.jsonl or reviews-*.jsonl.gz) in it")]
    Empty { path: String },
    #[error("{path}:{line}: {problem}")]
    Line { path: String, line: u64, problem: String },
}

/// The files of the recordings named on the command line: a file as it is, a directory as its
/// `reviews-*.jsonl` and `reviews-*.jsonl.gz` files in name order (the order written).
pub(crate) fn files(arguments: &[PathBuf]) -> Result<Vec<PathBuf>, ReadError> {
    let mut files = Vec::new();
    for argument in arguments {
        let unreadable = |source| ReadError::File { path: argument.display().to_string(), source };
        if !std::fs::metadata(argument).map_err(unreadable)?.is_dir() {
            files.push(argument.clone());
            continue;
        }
        let mut found = Vec::new();
        for item in std::fs::read_dir(argument).map_err(unreadable)? {
            let path = item.map_err(unreadable)?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.starts_with("reviews-") && (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")) {
                found.push(path);
            }
        }
        if found.is_empty() {
            return Err(ReadError::Empty { path: argument.display().to_string() });
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// The records of `files`, in order, one line at a time; stops at the first error.
pub(crate) struct Reader {
    files: std::vec::IntoIter<(usize, PathBuf)>,
    current: Option<(usize, PathBuf, Box<dyn BufRead + Send>, u64)>,
    line: Vec<u8>,
}

impl Reader {
    pub(crate) fn new(files: Vec<PathBuf>) -> Self {
        let files: Vec<_> = files.into_iter().enumerate().collect();
        Reader { files: files.into_iter(), current: None, line: Vec::new() }
    }

    /// `path` for reading, through gzip when it ends in `.gz`.
    pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead + Send>, ReadError> {
        let file = File::open(path)
            .map_err(|source| ReadError::File { path: path.display().to_string(), source })?;
        let gzip = path.extension().is_some_and(|e| e == "gz");
        Ok(if gzip {
            // Several members, as a file compressed in parts would have.
            Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
        } else {
            Box::new(BufReader::new(file))
        })
    }
}

impl Iterator for Reader {
    type Item = Result<(Place, PathBuf, Record), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some((file, path, reader, line)) = &mut self.current else {
                let (file, path) = self.files.next()?;
                match Reader::open(&path) {
                    Ok(reader) => self.current = Some((file, path, reader, 0)),
                    Err(error) => return Some(Err(error)),
                }
                continue;
            };
            *line += 1;
            let problem =
                |problem: String| ReadError::Line { path: path.display().to_string(), line: *line, problem };
            match read_line(reader.as_mut(), &mut self.line) {
                Ok(false) => {
                    self.current = None;
                    continue;
                }
                Ok(true) => {}
                Err(error) => {
                    let error = problem(error);
                    self.current = None;
                    self.files = Vec::new().into_iter();
                    return Some(Err(error));
                }
            }
            if self.line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let place = Place { file: *file, line: *line };
            return Some(match serde_json::from_slice::<Record>(&self.line) {
                Ok(record) => Ok((place, path.clone(), record)),
                Err(error) => {
                    let error = problem(format!("not a recorded review: {error}"));
                    self.current = None;
                    self.files = Vec::new().into_iter();
                    Err(error)
                }
            });
        }
    }
}

/// The next line into `line` (without its newline); `false` at the end of the file. A line
/// past [`MAX_LINE_BYTES`] is an error, found without holding more than that.
fn read_line(reader: &mut dyn BufRead, line: &mut Vec<u8>) -> Result<bool, String> {
    line.clear();
    let mut limited = reader.take(MAX_LINE_BYTES as u64 + 1);
    let read = limited.read_until(b'\n', line).map_err(|e| format!("cannot be read: {e}"))?;
    if read == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > MAX_LINE_BYTES {
        return Err(format!("a line longer than {MAX_LINE_BYTES} bytes"));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    const LINE: &str = r#"{"time":"2026-01-01T00:00:00Z","endpoint":"validate","request":{"request":{"uid":"a"}},"answer":{"allowed":true,"code":200},"webhooks":[]}"#;

    fn uids(files: Vec<PathBuf>) -> Vec<String> {
        Reader::new(files)
            .map(|item| {
                let (_, _, record) = item.unwrap();
                let request: serde_json::Value = serde_json::from_str(record.request.get()).unwrap();
                request["request"]["uid"].as_str().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn plain_and_gzip_files_are_read_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("reviews-000000000002-000002.jsonl"),
            LINE.replace("\"a\"", "\"c\"") + "\n",
        )
        .unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all((LINE.to_owned() + "\n\n" + &LINE.replace("\"a\"", "\"b\"") + "\n").as_bytes())
            .unwrap();
        std::fs::write(dir.path().join("reviews-000000000001-000001.jsonl.gz"), gzip.finish().unwrap())
            .unwrap();
        std::fs::write(dir.path().join(".key"), "not a recording").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a recording").unwrap();
        let files = files(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(uids(files), ["a", "b", "c"]);
    }

    #[test]
    fn a_corrupt_line_is_named_by_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reviews-1.jsonl");
        std::fs::write(&path, format!("{LINE}\n{LINE}\n{{\"endpoint\": \"validate\", \"request\n{LINE}\n"))
            .unwrap();
        let results: Vec<_> = Reader::new(vec![path.clone()]).collect();
        assert_eq!(results.len(), 3, "the reading stops at the error");
        let error = results[2].as_ref().unwrap_err().to_string();
        assert!(error.starts_with(&format!("{}:3: not a recorded review", path.display())), "{error}");

        // A gzip file cut short: named, with the line it reached.
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(format!("{LINE}\n{LINE}\n").as_bytes()).unwrap();
        let bytes = gzip.finish().unwrap();
        let cut = dir.path().join("reviews-2.jsonl.gz");
        std::fs::write(&cut, &bytes[..bytes.len() - 12]).unwrap();
        let error = Reader::new(vec![cut.clone()]).find_map(Result::err).unwrap().to_string();
        assert!(error.starts_with(&cut.display().to_string()), "{error}");
    }

    #[test]
    fn missing_and_empty_recordings_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let error = files(&[dir.path().to_path_buf()]).unwrap_err().to_string();
        assert!(error.contains("no recording files"), "{error}");
        let error = files(&[dir.path().join("absent.jsonl")]).unwrap_err().to_string();
        assert!(error.starts_with("cannot read") && error.contains("absent.jsonl"), "{error}");
    }
}
