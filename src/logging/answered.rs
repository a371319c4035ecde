//! The review's one line, `review answered`: what was asked, what was decided, each webhook's
//! part (docs/operations.md, "Logs"). Every review writes it, so when the process writes JSON lines it is
//! formatted here straight into the log writer — the bytes the `tracing` event would give
//! (`json.rs`; the test below holds them equal), without the event's dispatch, field visitors
//! and per-character escaping of values that need none. Otherwise (text lines, a span entered
//! or a review's scope around it, a subscriber of the tests' own) it is that `tracing` event.
//! Either way it is filtered by its target, as any line (`--log-level`, `RUST_LOG`).

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::time::Duration;

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};

use super::json::{string, Escaped};
use super::{Untrusted, UNTRUSTED_MAX_BYTES};

/// The line's target, as if written by the module that answers reviews.
pub(crate) const TARGET: &str = "admission_gateway::server::routes";

/// A line of a few hundred bytes; a buffer grown beyond this by a huge line is not kept.
const KEPT_CAPACITY: usize = 4096;

/// What the line says. Request values go through [`Untrusted`]; never an object or a patch.
pub(crate) struct ReviewAnswered<'a> {
    pub(crate) uid: &'a str,
    pub(crate) stage: &'static str,
    pub(crate) operation: &'static str,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    pub(crate) allowed: bool,
    pub(crate) code: i64,
    pub(crate) mutated: bool,
    /// The review's time in the gateway, and the gateway's own share of it (`total_ms`,
    /// `gateway_ms`: milliseconds to the microsecond).
    pub(crate) total: Duration,
    pub(crate) gateway: Duration,
    pub(crate) webhooks: &'a dyn fmt::Display,
}

impl ReviewAnswered<'_> {
    /// Writes the line, if its target is enabled at `info`.
    pub(crate) fn log(&self) {
        self.log_to(super::json_writer());
    }

    /// [`Self::log`], with `json` the writer of a process that writes JSON lines.
    fn log_to(&self, json: Option<&super::writer::Batched>) {
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return;
        }
        match json {
            // Within a span or a review's scope the line names it: `json.rs` does that.
            Some(mut writer)
                if tracing::Span::current().is_none() && super::review::current(|_| ()).is_none() =>
            {
                thread_local! {
                    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
                }
                LINE.with_borrow_mut(|line| {
                    line.clear();
                    if self.write_json(line).is_ok() {
                        // Nowhere to report a lost line to but the dropped-lines count.
                        let _ = writer.write_all(line.as_bytes());
                    }
                    if line.capacity() > KEPT_CAPACITY {
                        *line = String::new();
                    }
                });
            }
            _ => self.event(),
        }
    }

    /// The line as a `tracing` event.
    fn event(&self) {
        tracing::info!(
            target: TARGET,
            uid = %Untrusted(self.uid),
            stage = self.stage,
            operation = %self.operation,
            group = %Untrusted(self.group),
            version = %Untrusted(self.version),
            resource = %Untrusted(self.resource),
            subresource = %Untrusted(self.subresource),
            namespace = %Untrusted(self.namespace),
            name = %Untrusted(self.name),
            allowed = self.allowed,
            code = self.code,
            mutated = self.mutated,
            total_ms = millis(self.total),
            gateway_ms = millis(self.gateway),
            webhooks = %self.webhooks,
            "review answered"
        );
    }

    /// The JSON line `json::JsonLines` writes for [`Self::event`] outside any span.
    fn write_json(&self, line: &mut String) -> fmt::Result {
        line.push_str("{\"timestamp\":\"");
        timestamp(line)?;
        line.push_str("\",\"level\":\"INFO\",\"fields\":{\"message\":\"review answered\",\"uid\":");
        untrusted(line, self.uid)?;
        line.push_str(",\"stage\":");
        string(line, self.stage)?;
        line.push_str(",\"operation\":");
        string(line, self.operation)?;
        for (name, value) in [
            ("group", self.group),
            ("version", self.version),
            ("resource", self.resource),
            ("subresource", self.subresource),
            ("namespace", self.namespace),
            ("name", self.name),
        ] {
            write!(line, ",\"{name}\":")?;
            untrusted(line, value)?;
        }
        write!(line, ",\"allowed\":{},\"code\":{},\"mutated\":{}", self.allowed, self.code, self.mutated)?;
        for (name, value) in [("total_ms", self.total), ("gateway_ms", self.gateway)] {
            write!(line, ",\"{name}\":{}", JsonMillis(value))?;
        }
        line.push_str(",\"webhooks\":\"");
        write!(Escaped(line), "{}", self.webhooks)?;
        line.push_str("\"},\"target\":\"");
        line.push_str(TARGET);
        line.push_str("\"}\n");
        Ok(())
    }
}

/// A duration in milliseconds to the microsecond, as the event's field records it.
fn millis(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1e3
}

/// [`millis`] as the event's `f64` field is written in a JSON line (`1.5`, `0.011`, `2`; not
/// the call records' `1.50ms` of `pipeline.rs`), with integers: the shortest decimal that
/// reads back as that `f64` is the exact one while the microseconds fit a float's mantissa
/// with room to spare, so the two agree (tested).
struct JsonMillis(Duration);

impl fmt::Display for JsonMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.0.as_micros();
        if micros >= 1 << 50 {
            return write!(f, "{}", millis(self.0));
        }
        let (whole, mut fraction, mut digits) = (micros / 1000, micros % 1000, 3);
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        while fraction % 10 == 0 {
            (fraction, digits) = (fraction / 10, digits - 1);
        }
        write!(f, "{whole}.{fraction:0digits$}")
    }
}

/// Now, as `SystemTime` writes it in `json.rs` (`2026-11-26T18:49:20.577596Z`); the date and
/// time to the second are formatted once a second per thread.
fn timestamp(line: &mut String) -> fmt::Result {
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let Some((seconds, micros)) = now.ok().map(|now| (now.as_secs(), now.subsec_micros())) else {
        return SystemTime.format_time(&mut Writer::new(line));
    };
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != seconds || text.is_empty() {
            match civil_time(seconds) {
                Some(civil) => (*second, *text) = (seconds, civil),
                // Beyond year 9999: `SystemTime`'s own.
                None => return SystemTime.format_time(&mut Writer::new(line)),
            }
        }
        line.push_str(text);
        write!(line, ".{micros:06}Z")
    })
}

/// `YYYY-MM-DDThh:mm:ss` (UTC) of a Unix time in seconds, up to year 9999 (the days to a
/// civil date: Howard Hinnant's `civil_from_days`).
fn civil_time(seconds: u64) -> Option<String> {
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    let z = days + 719_468;
    let (era, day_of_era) = (z / 146_097, z % 146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year <= 9999).then(|| {
        let (hour, minute, second) = (second_of_day / 3_600, second_of_day / 60 % 60, second_of_day % 60);
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}")
    })
}

/// A request value as a JSON string, as `Untrusted` shows it: most are short printable ASCII
/// with nothing to escape, and are copied as they are.
fn untrusted(line: &mut String, value: &str) -> fmt::Result {
    let plain = value.len() <= UNTRUSTED_MAX_BYTES
        && value.bytes().all(|byte| matches!(byte, 0x20..=0x7e) && byte != b'"' && byte != b'\\');
    line.push('"');
    if plain {
        line.push_str(value);
    } else {
        write!(Escaped(line), "{}", Untrusted(value))?;
    }
    line.push('"');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    /// The line, its timestamp taken out.
    fn untimed(line: &str) -> String {
        let (head, rest) = line.split_once("\"timestamp\":\"").unwrap();
        let (timestamp, tail) = rest.split_once('"').unwrap();
        assert!(timestamp.ends_with('Z') && timestamp.contains('T'), "{timestamp}");
        format!("{head}{tail}")
    }

    /// Through the `tracing` event and the JSON line format, as the process would without the
    /// direct path.
    fn through_tracing(answered: &ReviewAnswered<'_>) -> String {
        super::super::json::tests::json_lines_of(|| answered.event())
    }

    #[test]
    fn timestamps_are_the_json_formats() {
        for (seconds, civil) in [
            (0, "1970-01-01T00:00:00"),
            (951_782_400, "2000-02-29T00:00:00"),
            (951_868_799, "2000-02-29T23:59:59"),
            (1_767_225_599, "2025-12-31T23:59:59"),
            (4_107_542_399, "2100-02-28T23:59:59"),
            (4_107_542_400, "2100-03-01T00:00:00"),
            (253_402_300_799, "9999-12-31T23:59:59"),
        ] {
            assert_eq!(civil_time(seconds).as_deref(), Some(civil), "{seconds}");
        }
        assert_eq!(civil_time(253_402_300_800), None);
        // Against `SystemTime`'s own, now: the same second (unless one just ended).
        let same = (0..10).any(|_| {
            let mut ours = String::new();
            timestamp(&mut ours).unwrap();
            let mut theirs = String::new();
            SystemTime.format_time(&mut Writer::new(&mut theirs)).unwrap();
            ours.len() == theirs.len() && ours[..20] == theirs[..20] && ours.ends_with('Z')
        });
        assert!(same);
    }

    #[test]
    fn milliseconds_read_as_the_events_float() {
        let mut micros: Vec<u64> = (0..3_000).collect();
        micros.extend(
            (1..60).flat_map(|shift| [(1 << shift) - 1, 1 << shift, (1 << shift) + 1, 7_u64 << shift]),
        );
        micros.extend((0..2_000).map(|i| 1_000_003 * i * i + 999));
        for micros in micros.into_iter().filter(|&micros| micros < u64::MAX / 1_000) {
            // Nanoseconds beyond the microsecond are dropped, as the event's value drops them.
            let duration = Duration::from_nanos(micros * 1_000 + 999);
            assert_eq!(JsonMillis(duration).to_string(), (micros as f64 / 1e3).to_string(), "{micros} µs");
        }
    }

    fn direct(answered: &ReviewAnswered<'_>) -> String {
        let mut line = String::new();
        answered.write_json(&mut line).unwrap();
        line
    }

    #[test]
    fn the_direct_line_is_the_events_line_byte_for_byte() {
        let calls = "mutating/a.example.com#0 allowed 200 1.2ms, validating/\"b\"\\c#1 error: reset";
        let long = "n".repeat(UNTRUSTED_MAX_BYTES + 5);
        let cases = [
            ("0b7e5c1a-3f2d-4e8b", "web-7d4b9c", "team-a", "", 1_571, 11),
            ("u\n\"forged\"\u{1b}[31m", "é\u{2028}ü", "a\\b", "status", 2_000, 120),
            ("", &long, "\u{7f}", "scale", 0, 86_400_000_123),
        ];
        for (uid, name, namespace, subresource, total, gateway) in cases {
            let answered = ReviewAnswered {
                uid,
                stage: "validate",
                operation: "CREATE",
                group: "apps",
                version: "v1",
                resource: "deployments",
                subresource,
                namespace,
                name,
                allowed: false,
                code: 403,
                mutated: true,
                total: Duration::from_micros(total),
                gateway: Duration::from_micros(gateway),
                webhooks: &calls,
            };
            let (direct, traced) = (direct(&answered), through_tracing(&answered));
            assert_eq!(untimed(&direct), untimed(&traced));
            assert_eq!(direct.matches('\n').count(), 1, "{direct:?}");
            let parsed: serde_json::Value = serde_json::from_str(&direct).unwrap();
            assert_eq!(parsed["target"], TARGET);
            assert_eq!(parsed["fields"]["message"], "review answered");
        }
    }

    #[test]
    fn within_a_span_or_a_review_the_line_names_it() {
        use super::super::writer::{batched, tests::Sink};
        // The direct path writes to its own writer, the `tracing` event to the subscriber's:
        // which path each line took shows in where it lands.
        let (direct, traced) = (Sink::default(), Sink::default());
        let (direct_writer, direct_flusher) = batched(direct.clone()).unwrap();
        let (traced_writer, traced_flusher) = batched(traced.clone()).unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(traced_writer)
            .fmt_fields(super::super::json::JsonMembers)
            .event_format(super::super::json::JsonLines)
            .finish();
        let calls = "validating/a#0 allowed 200 1.0ms";
        let answered = ReviewAnswered {
            uid: "u-1",
            stage: "validate",
            operation: "CREATE",
            group: "",
            version: "v1",
            resource: "pods",
            subresource: "",
            namespace: "team-a",
            name: "web",
            allowed: true,
            code: 200,
            mutated: false,
            total: Duration::from_micros(1_500),
            gateway: Duration::from_micros(500),
            webhooks: &calls,
        };
        tracing::subscriber::with_default(subscriber, || {
            answered.log_to(Some(&direct_writer));
            super::super::review::ReviewLog::new("u-1", "validate", 7)
                .sync_scope(|| answered.log_to(Some(&direct_writer)));
            tracing::info_span!("outer").in_scope(|| answered.log_to(Some(&direct_writer)));
        });
        drop((direct_flusher, traced_flusher));
        let parse = |text: String| -> Vec<serde_json::Value> {
            text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
        };
        let (direct, traced) = (parse(direct.text()), parse(traced.text()));
        assert_eq!((direct.len(), traced.len()), (1, 2), "{direct:?}\n{traced:?}");
        assert!(direct.iter().chain(&traced).all(|line| line["fields"]["message"] == "review answered"));
        assert_eq!(direct[0].get("span"), None, "{direct:?}");
        let review = serde_json::json!({"uid": "u-1", "stage": "validate", "generation": 7, "name": "admission_review"});
        assert_eq!(traced[0]["span"], review, "{traced:?}");
        assert_eq!(traced[1]["span"], serde_json::json!({"name": "outer"}), "{traced:?}");
    }
}
