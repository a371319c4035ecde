//! Logs: `tracing` events to standard error, one JSON object a line (the default for `serve`)
//! or plain text, at `--log-level` (an `EnvFilter` directive; `RUST_LOG` wins when set).
//!
//! Lines are written to standard error in batches by a thread of their own (`writer.rs`), so a
//! slow standard error never holds up a review; beyond a bounded buffer lines are dropped and
//! counted (`admission_gateway_log_lines_dropped_total`).
//!
//! Every value that comes from a request and reaches a log line goes through [`Untrusted`]:
//! control characters escaped, at most [`UNTRUSTED_MAX_BYTES`] kept. Objects, patches and
//! bodies never reach a log line at all (Secrets pass through admission).

mod answered;
mod json;
mod review;
mod writer;

pub(crate) use answered::ReviewAnswered;
pub(crate) use review::ReviewLog;

use std::fmt;
use std::sync::OnceLock;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object a line: `timestamp`, `level`, `fields` (with `message`), `target`,
    /// and `span` (`json.rs`).
    Json,
    /// For people at a terminal.
    Text,
}

/// The process's log writer, once logging is set up (for its dropped-lines count).
static WRITER: OnceLock<writer::Batched> = OnceLock::new();
/// The process's line format, once logging is set up.
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Keeps the writer thread; dropping it writes the lines still waiting.
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard(#[allow(dead_code)] writer::Flusher);

/// Sets up the process's subscriber. `level` is an `EnvFilter` directive (`info`,
/// `admission_gateway=debug,kube=warn`…), overridden by `RUST_LOG` when that is set.
pub fn init(format: LogFormat, level: &str) -> Result<LogGuard, String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => {
            EnvFilter::try_new(&directives).map_err(|error| format!("RUST_LOG {directives:?}: {error}"))?
        }
        _ => EnvFilter::try_new(level).map_err(|error| format!("--log-level {level:?}: {error}"))?,
    };
    let (writer, guard) = writer::batched(std::io::stderr())
        .map_err(|error| format!("cannot start the log writer: {error}"))?;
    let _ = WRITER.set(writer.clone());
    let _ = FORMAT.set(format);
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let installed = match format {
        LogFormat::Json => builder.fmt_fields(json::JsonMembers).event_format(json::JsonLines).try_init(),
        LogFormat::Text => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let format = tracing_subscriber::fmt::format().with_ansi(ansi);
            builder.with_ansi(ansi).event_format(review::TextLines(format)).try_init()
        }
    };
    installed.map_err(|error| format!("cannot set up logging: {error}"))?;
    Ok(LogGuard(guard))
}

/// The log writer, when the process writes JSON lines (`answered.rs` writes to it directly).
fn json_writer() -> Option<&'static writer::Batched> {
    (FORMAT.get() == Some(&LogFormat::Json)).then(|| WRITER.get()).flatten()
}

/// Log lines dropped because standard error fell behind.
pub(crate) fn dropped_lines() -> u64 {
    WRITER.get().map_or(0, writer::Batched::dropped)
}

/// Bytes of an untrusted value kept in a log line.
pub(crate) const UNTRUSTED_MAX_BYTES: usize = 256;

/// A value from a request (uid, name, namespace, a decode error quoting the input…) as it may
/// appear in a log line: control characters escaped Rust-style (`\n`, `\u{1b}`), cut after
/// [`UNTRUSTED_MAX_BYTES`] with `…(+N bytes)`, so no request can forge a line or flood the
/// log.
pub(crate) struct Untrusted<'a>(pub(crate) &'a str);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        let mut end = text.len().min(UNTRUSTED_MAX_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        // Written in runs between the characters to escape: this runs for every review.
        let kept = &text[..end];
        let mut plain = 0;
        for (at, c) in kept.char_indices() {
            if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
                f.write_str(&kept[plain..at])?;
                write!(f, "{}", c.escape_default())?;
                plain = at + c.len_utf8();
            }
        }
        f.write_str(&kept[plain..])?;
        if end < text.len() {
            write!(f, "…(+{} bytes)", text.len() - end)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_values_cannot_forge_lines_or_flood_the_log() {
        let forged = "web\n2026-01-01T00:00:00Z  INFO admission_gateway: review allowed\r\x1b[31m";
        let shown = Untrusted(forged).to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(shown, "web\\n2026-01-01T00:00:00Z  INFO admission_gateway: review allowed\\r\\u{1b}[31m");

        let huge = "é".repeat(1024 * 1024);
        let shown = Untrusted(&huge).to_string();
        assert!(shown.len() < UNTRUSTED_MAX_BYTES + 32, "{} bytes", shown.len());
        assert!(shown.ends_with(&format!("…(+{} bytes)", huge.len() - UNTRUSTED_MAX_BYTES)), "{shown}");

        assert_eq!(Untrusted("é\u{2028}ü\u{85}z\u{2029}").to_string(), "é\\u{2028}ü\\u{85}z\\u{2029}");
        assert_eq!(Untrusted("kube-system").to_string(), "kube-system");
        assert_eq!(Untrusted("").to_string(), "");
    }
}
