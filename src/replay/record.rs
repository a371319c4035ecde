//! The read side of a recording (`serve --record`, src/recording.rs writes it): its files in
//! name order, each line one [`Record`], plain (`.jsonl`) or gzip (`.jsonl.gz`), read one
//! line at a time so a recording of any size is never held whole.
//!
//! A line that is not a record is skipped, said where and why, and the reading goes on: the
//! last line of a file torn by a crash or a full disk, a compressed file cut short (the lines
//! before the cut are read), a line too long, anything the writer never wrote. Only a file
//! that cannot be opened or read stops the reading.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A line longer than this is skipped unread: a review is capped well below it
/// (src/server/body.rs), so such a line is not one the gateway wrote.
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

/// Why a recording could not be read at all; every message names the file, and the line if any.
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

/// What the reader found at one place of a recording.
#[derive(Debug)]
pub(crate) enum Item {
    /// A recorded review, and the file it is in.
    Record(Place, PathBuf, Box<Record>),
    /// A line that is not one: skipped, and said where and why.
    Skipped(Place, SkippedLine),
}

/// A line of a recording that is not a recorded review: torn by a crash or a full disk, cut
/// short with its compressed file, or anything else the writer never wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct SkippedLine {
    /// `FILE:LINE`.
    pub(crate) line: String,
    pub(crate) problem: String,
}

/// The records of `files`, in order, one line at a time. A line that is not a record is
/// skipped ([`Item::Skipped`]) and the reading goes on; a file that cannot be opened or read
/// stops it, the error last.
pub(crate) struct Reader {
    files: std::vec::IntoIter<(usize, PathBuf)>,
    current: Option<Open>,
    line: Vec<u8>,
}

/// The file being read.
struct Open {
    /// Its index among the files read.
    file: usize,
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    /// Read through gzip: its data can end short or be corrupt, which ends the file, not the
    /// reading.
    gzip: bool,
    /// The last line read, from 1.
    line: u64,
}

impl Reader {
    pub(crate) fn new(files: Vec<PathBuf>) -> Self {
        let files: Vec<_> = files.into_iter().enumerate().collect();
        Reader { files: files.into_iter(), current: None, line: Vec::new() }
    }

    /// `path` for reading, through gzip when it ends in `.gz`.
    fn open(file: usize, path: PathBuf) -> Result<Open, ReadError> {
        let opened = File::open(&path)
            .map_err(|source| ReadError::File { path: path.display().to_string(), source })?;
        let gzip = path.extension().is_some_and(|e| e == "gz");
        let reader: Box<dyn BufRead + Send> = if gzip {
            // Several members, as a file compressed in parts would have.
            Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(opened)))
        } else {
            Box::new(BufReader::new(opened))
        };
        Ok(Open { file, path, reader, gzip, line: 0 })
    }
}

impl Iterator for Reader {
    type Item = Result<Item, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some(open) = &mut self.current else {
                let (file, path) = self.files.next()?;
                match Reader::open(file, path) {
                    Ok(open) => self.current = Some(open),
                    Err(error) => {
                        self.files = Vec::new().into_iter();
                        return Some(Err(error));
                    }
                }
                continue;
            };
            open.line += 1;
            let place = Place { file: open.file, line: open.line };
            let at = format!("{}:{}", open.path.display(), open.line);
            let problem = match read_line(open.reader.as_mut(), &mut self.line, open.gzip) {
                Ok(Next::End) => {
                    self.current = None;
                    continue;
                }
                Ok(Next::Line) if self.line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Next::Line) => match serde_json::from_slice::<Record>(&self.line) {
                    Ok(record) => return Some(Ok(Item::Record(place, open.path.clone(), Box::new(record)))),
                    Err(error) => format!("not a recorded review: {error}"),
                },
                Ok(Next::TooLong) => format!("not a recorded review: longer than {MAX_LINE_BYTES} bytes"),
                Ok(Next::Cut(error)) => {
                    self.current = None;
                    format!("the compressed data is cut short or corrupt here ({error}): the rest of the file cannot be read")
                }
                Err(error) => {
                    let problem = format!("cannot be read: {error}");
                    let error =
                        ReadError::Line { path: open.path.display().to_string(), line: open.line, problem };
                    self.current = None;
                    self.files = Vec::new().into_iter();
                    return Some(Err(error));
                }
            };
            return Some(Ok(Item::Skipped(place, SkippedLine { line: at, problem })));
        }
    }
}

/// What reading the next line gave.
enum Next {
    /// The end of the file.
    End,
    /// A line, in the buffer without its newline (the last one may have none: torn).
    Line,
    /// A line longer than [`MAX_LINE_BYTES`], read past without being held.
    TooLong,
    /// The compressed data ends short or is corrupt here: nothing more can be read of the file.
    Cut(std::io::Error),
}

/// The next line into `line`. A line past [`MAX_LINE_BYTES`] is read past, never held whole.
/// Through gzip, data that is cut short or corrupt ends the file ([`Next::Cut`]); any other
/// error (the disk's) is the error.
fn read_line(reader: &mut dyn BufRead, line: &mut Vec<u8>, gzip: bool) -> std::io::Result<Next> {
    let cut = |error: std::io::Error| {
        use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
        match error.kind() {
            InvalidData | InvalidInput | UnexpectedEof if gzip => Ok(Next::Cut(error)),
            _ => Err(error),
        }
    };
    line.clear();
    let read = match (&mut *reader).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', line) {
        Ok(read) => read,
        Err(error) => return cut(error),
    };
    if read == 0 {
        return Ok(Next::End);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(Next::Line);
    }
    if line.len() <= MAX_LINE_BYTES {
        return Ok(Next::Line); // the file's last line, without its newline
    }
    line.clear();
    loop {
        let buffer = match reader.fill_buf() {
            Ok([]) => return Ok(Next::TooLong),
            Ok(buffer) => buffer,
            Err(error) => return cut(error),
        };
        match memchr::memchr(b'\n', buffer) {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(Next::TooLong);
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    const LINE: &str = r#"{"time":"2026-01-01T00:00:00Z","endpoint":"validate","request":{"request":{"uid":"a"}},"answer":{"allowed":true,"code":200},"webhooks":[]}"#;

    /// The uids of the records read, and the skipped lines as `LINE: PROBLEM` (the file's
    /// name left out).
    fn read(files: Vec<PathBuf>) -> (Vec<String>, Vec<String>) {
        let (mut uids, mut skipped) = (Vec::new(), Vec::new());
        for item in Reader::new(files) {
            match item.unwrap() {
                Item::Record(_, _, record) => {
                    let request: serde_json::Value = serde_json::from_str(record.request.get()).unwrap();
                    uids.push(request["request"]["uid"].as_str().unwrap().to_owned());
                }
                Item::Skipped(place, line) => {
                    let (_, number) = line.line.rsplit_once(':').unwrap();
                    assert_eq!(number, place.line.to_string());
                    skipped.push(format!("{number}: {}", line.problem));
                }
            }
        }
        (uids, skipped)
    }

    fn uids(files: Vec<PathBuf>) -> Vec<String> {
        let (uids, skipped) = read(files);
        assert_eq!(skipped, Vec::<String>::new());
        uids
    }

    fn line(uid: &str) -> String {
        LINE.replace("\"a\"", &format!("{uid:?}"))
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

    /// Garbage, a line that is JSON but no record, a line too long and a last line torn
    /// (no newline) are each skipped with their line, and every record around them is read.
    /// Without the skipping, the first of them ended the reading.
    #[test]
    fn lines_that_are_not_records_are_skipped_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reviews-1.jsonl");
        let long = format!("{{\"padding\":\"{}\"}}", "x".repeat(MAX_LINE_BYTES));
        let torn = &LINE[..LINE.len() / 2];
        let text = [
            line("a"),
            "{\"endpoint\": \"validate\", \"request".to_owned(),
            line("b"),
            "{\"endpoint\": \"validate\"}".to_owned(),
            long,
            line("c"),
            torn.to_owned(),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let (uids, skipped) = read(vec![path.clone()]);
        assert_eq!(uids, ["a", "b", "c"]);
        let numbers: Vec<&str> = skipped.iter().map(|s| s.split(':').next().unwrap()).collect();
        assert_eq!(numbers, ["2", "4", "5", "7"], "{skipped:?}");
        assert!(skipped[0].starts_with("2: not a recorded review: EOF while parsing"), "{skipped:?}");
        assert!(skipped[1].contains("missing field"), "{skipped:?}");
        assert!(skipped[2].contains(&format!("longer than {MAX_LINE_BYTES} bytes")), "{skipped:?}");
        assert!(skipped[3].starts_with("7: not a recorded review"), "{skipped:?}");
        let first = Reader::new(vec![path.clone()]).find_map(|item| match item.unwrap() {
            Item::Skipped(_, line) => Some(line.line),
            Item::Record(..) => None,
        });
        assert_eq!(first, Some(format!("{}:2", path.display())));
    }

    /// A compressed file cut short (a crash while it was copied, a full disk): the lines before
    /// the cut are read, the cut is one skipped line, and the next file is read on. Without it,
    /// the cut ended the reading.
    #[test]
    fn a_compressed_file_cut_short_is_read_up_to_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        // Lines that do not compress to nothing, so that the cut falls among them.
        let lines: String = (0..200)
            .map(|i| {
                let noise: String =
                    (0..40).map(|j| char::from(b'a' + ((i * 7 + j * 13) % 26) as u8)).collect();
                line(&format!("u{i:03}-{noise}")) + "\n"
            })
            .collect();
        gzip.write_all(lines.as_bytes()).unwrap();
        let bytes = gzip.finish().unwrap();
        let cut = dir.path().join("reviews-1.jsonl.gz");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let after = dir.path().join("reviews-2.jsonl");
        std::fs::write(&after, line("after") + "\n").unwrap();
        let (uids, skipped) = read(vec![cut.clone(), after]);
        let before = uids.len() - 1;
        assert!((50..200).contains(&before), "the lines before the cut: {before}");
        for (i, uid) in uids[..before].iter().enumerate() {
            assert!(uid.starts_with(&format!("u{i:03}-")), "in order: {uid} at {i}");
        }
        assert_eq!(uids.last().map(String::as_str), Some("after"), "the next file is read on");
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].starts_with(&format!("{}: the compressed data is cut short", before + 1)),
            "{skipped:?}"
        );

        // Only the trailer missing: every line is read, and the cut is still said.
        let trailer = dir.path().join("reviews-3.jsonl.gz");
        std::fs::write(&trailer, &bytes[..bytes.len() - 4]).unwrap();
        let (uids, skipped) = read(vec![trailer]);
        assert_eq!((uids.len(), skipped.len()), (200, 1), "{skipped:?}");
    }

    /// A plain file that cannot be read on is an error, not a skipped line: a directory
    /// named as a file.
    #[test]
    fn a_file_that_cannot_be_read_stops_the_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reviews-1.jsonl");
        std::fs::create_dir(&path).unwrap();
        let later = dir.path().join("reviews-2.jsonl");
        std::fs::write(&later, line("later") + "\n").unwrap();
        let items: Vec<_> = Reader::new(vec![path.clone(), later]).collect();
        assert_eq!(items.len(), 1, "nothing read after the error");
        let Err(error) = &items[0] else { panic!("{items:?}") };
        let error = error.to_string();
        assert!(error.starts_with(&format!("{}:1: cannot be read", path.display())), "{error}");
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
