//! The JSON line format, written straight into the line buffer: `timestamp`, `level`, `fields`
//! (with `message`), `target`, and `span` (the review's, `review.rs`, or else the current
//! span's fields and `name`), the layout of `tracing_subscriber`'s own JSON format.
//!
//! Its own because every review writes a line: `tracing_subscriber`'s JSON format builds each
//! field as a `String`, serializes them through serde, and re-parses the span's fields on
//! every line; it took about an eighth of a review's CPU (`loadtest/README.md`). Here a value
//! is escaped as it is formatted, and a span's fields are kept as a ready JSON fragment.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format (`event_format`).
pub(super) struct JsonLines;

/// The span fields format (`fmt_fields`): `"name":value` members, comma separated.
pub(super) struct JsonMembers;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        write!(writer, "\",\"level\":\"{}\",\"fields\":{{", metadata.level())?;
        let mut members = Members::new(&mut writer);
        event.record(&mut members);
        members.result?;
        writer.write_str("},\"target\":")?;
        string(&mut writer, metadata.target())?;
        if let Some(written) = super::review::current(|review| {
            writer.write_char(',')?;
            review.write_json(&mut writer)
        }) {
            written?;
        } else if let Some(span) = ctx.lookup_current() {
            writer.write_str(",\"span\":{")?;
            let extensions = span.extensions();
            if let Some(fields) = extensions.get::<FormattedFields<N>>().filter(|f| !f.fields.is_empty()) {
                writer.write_str(&fields.fields)?;
                writer.write_char(',')?;
            }
            writer.write_str("\"name\":")?;
            string(&mut writer, span.name())?;
            writer.write_char('}')?;
        }
        writer.write_str("}\n")
    }
}

impl<'writer> FormatFields<'writer> for JsonMembers {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut members = Members::new(&mut writer);
        fields.record(&mut members);
        members.result
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut members = Members::new(&mut current.fields);
        members.first = members.writer.is_empty();
        fields.record(&mut members);
        members.result
    }
}

/// Writes each recorded field as a `"name":value` member.
struct Members<'a, W: fmt::Write + ?Sized> {
    writer: &'a mut W,
    first: bool,
    result: fmt::Result,
}

impl<'a, W: fmt::Write + ?Sized> Members<'a, W> {
    fn new(writer: &'a mut W) -> Self {
        Members { writer, first: true, result: Ok(()) }
    }

    fn member(&mut self, field: &Field, value: impl FnOnce(&mut W) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        let first = std::mem::replace(&mut self.first, false);
        self.result = (|| {
            if !first {
                self.writer.write_char(',')?;
            }
            string(self.writer, field.name())?;
            self.writer.write_char(':')?;
            value(self.writer)
        })();
    }
}

impl<W: fmt::Write + ?Sized> Visit for Members<'_, W> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.member(field, |w| {
            w.write_char('"')?;
            write!(Escaped(w), "{value:?}")?;
            w.write_char('"')
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.member(field, |w| string(w, value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.member(field, |w| {
            w.write_char('"')?;
            write!(Escaped(w), "{value}")?;
            w.write_char('"')
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.member(field, |w| w.write_str(if value { "true" } else { "false" }));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity (serde_json writes null too).
        self.member(field, |w| if value.is_finite() { write!(w, "{value}") } else { w.write_str("null") });
    }
}

/// `text` as a JSON string.
pub(super) fn string<W: fmt::Write + ?Sized>(writer: &mut W, text: &str) -> fmt::Result {
    writer.write_char('"')?;
    Escaped(writer).write_str(text)?;
    writer.write_char('"')
}

/// Escapes what it is given for the inside of a JSON string.
pub(super) struct Escaped<'a, W: fmt::Write + ?Sized>(pub(super) &'a mut W);

impl<W: fmt::Write + ?Sized> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut plain = 0;
        for (at, byte) in text.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..=0x1f | 0x7f => "",
                _ => continue,
            };
            self.0.write_str(&text[plain..at])?;
            if escape.is_empty() {
                write!(self.0, "\\u{byte:04x}")?;
            } else {
                self.0.write_str(escape)?;
            }
            plain = at + 1;
        }
        self.0.write_str(&text[plain..])
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        string(&mut out, text).unwrap();
        out
    }

    #[test]
    fn every_string_is_valid_json_that_reads_back_the_same() {
        for text in
            ["", "plain", "a \"quoted\" \\ path", "line\nbreak\r\ttab", "\u{0}\u{1f}\u{7f}", "é ✓ \u{2028}"]
        {
            let json = escaped(text);
            assert_eq!(serde_json::from_str::<String>(&json).unwrap(), text, "{json}");
            assert!(!json.chars().any(|c| c.is_ascii_control()), "{json:?}");
        }
    }

    /// What `write` logs through a subscriber with this format, as text.
    pub(in crate::logging) fn json_lines_of(write: impl FnOnce()) -> String {
        let lines = super::super::writer::tests::Sink::default();
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .fmt_fields(JsonMembers)
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(subscriber, write);
        lines.text()
    }

    #[test]
    fn a_line_has_the_fields_target_and_span_of_tracing_subscribers_json() {
        let text = json_lines_of(|| {
            let span = tracing::info_span!(
                "admission_review",
                uid = "u-1",
                generation = 3_u64,
                later = tracing::field::Empty
            );
            span.record("later", true);
            let _entered = span.enter();
            tracing::info!(allowed = false, code = 403_i64, ms = 1.5_f64, nan = f64::NAN, name = %"a\"b\nc", "review {}", "answered");
        });
        tracing::info!("outside any subscriber");
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["target"], module_path!());
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z') && t.contains('T')), "{line}");
        assert_eq!(
            line["fields"],
            serde_json::json!({"message": "review answered", "allowed": false, "code": 403, "ms": 1.5,
                "nan": null, "name": "a\"b\nc"})
        );
        assert_eq!(
            line["span"],
            serde_json::json!({"uid": "u-1", "generation": 3, "later": true, "name": "admission_review"})
        );
    }
}
