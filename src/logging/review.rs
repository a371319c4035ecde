//! The review a log line is written for: lines written while a review is judged (a warning, a
//! call error) carry its `uid`, `stage` and configuration `generation`, as a span named
//! `admission_review` (docs/operations.md, "Logs").
//!
//! A task-local the line formats read, not a `tracing` span: a span per review cost about
//! 3 µs of the ~45 µs of CPU a review takes (a registry slot, its fields formatted, entered
//! and left on every poll; `loadtest/README.md`), for lines that most reviews never write.

use std::fmt;
use std::future::Future;

use crate::logging::Untrusted;

/// What a line written during a review says of it.
#[derive(Debug)]
pub(crate) struct ReviewLog {
    uid: String,
    stage: &'static str,
    generation: u64,
}

tokio::task_local! {
    static REVIEW: ReviewLog;
}

impl ReviewLog {
    pub(crate) fn new(uid: &str, stage: &'static str, generation: u64) -> Self {
        ReviewLog { uid: uid.to_owned(), stage, generation }
    }

    /// Runs `future` with the lines it writes attributed to this review.
    pub(crate) async fn scope<F: Future>(self, future: F) -> F::Output {
        REVIEW.scope(self, future).await
    }

    /// Runs `write` with the lines it writes attributed to this review, outside a task.
    #[cfg(test)]
    pub(super) fn sync_scope<R>(self, write: impl FnOnce() -> R) -> R {
        REVIEW.sync_scope(self, write)
    }

    /// `"span":{"uid":…,"stage":…,"generation":…,"name":"admission_review"}`, the members a
    /// `tracing` span of that name would have in a JSON line (`json.rs`).
    pub(super) fn write_json(&self, writer: &mut impl fmt::Write) -> fmt::Result {
        writer.write_str("\"span\":{\"uid\":")?;
        super::json::string(writer, &Untrusted(&self.uid).to_string())?;
        write!(
            writer,
            ",\"stage\":\"{}\",\"generation\":{},\"name\":\"admission_review\"}}",
            self.stage, self.generation
        )
    }
}

impl fmt::Display for ReviewLog {
    /// `admission_review{uid=… stage=… generation=…}`, as a text line shows a span.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admission_review{{uid={} stage={} generation={}}}",
            Untrusted(&self.uid),
            self.stage,
            self.generation
        )
    }
}

/// Calls `write` with the review whose task writes this line, if there is one.
pub(super) fn current<R>(write: impl FnOnce(&ReviewLog) -> R) -> Option<R> {
    REVIEW.try_with(write).ok()
}

/// The text format: `tracing_subscriber`'s own, with the review (if any) at the end of the line.
pub(super) struct TextLines(pub(super) tracing_subscriber::fmt::format::Format);

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for TextLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let Some(review) = current(ToString::to_string) else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, tracing_subscriber::fmt::format::Writer::new(&mut line), event)?;
        let line = line.strip_suffix('\n').unwrap_or(&line);
        writeln!(writer, "{line} {review}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_review_shows_as_a_span_in_json_and_at_the_end_of_a_text_line() {
        let review = ReviewLog::new("u-1\n\"", "validate", 3);
        let mut json = String::from("{");
        review.write_json(&mut json).unwrap();
        json.push('}');
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            parsed["span"],
            serde_json::json!({"uid": "u-1\\n\"", "stage": "validate", "generation": 3, "name": "admission_review"})
        );
        assert_eq!(review.to_string(), "admission_review{uid=u-1\\n\" stage=validate generation=3}");
    }

    #[tokio::test]
    async fn only_the_reviews_own_task_sees_it() {
        assert_eq!(current(|r| r.generation), None);
        let seen = ReviewLog::new("u-2", "mutate", 7)
            .scope(async {
                tokio::task::yield_now().await;
                let spawned = tokio::spawn(async { current(|r| r.generation) }).await.unwrap();
                (current(|r| (r.uid.clone(), r.stage, r.generation)), spawned)
            })
            .await;
        assert_eq!(seen, (Some(("u-2".to_owned(), "mutate", 7)), None));
        assert_eq!(current(|r| r.generation), None);
    }
}
