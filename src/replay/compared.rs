//! What is compared of a replayed review: the whole answer, or one webhook's or policy's own
//! turns (`--only-webhook`, `--only-policy`), read alike from a record and from an outcome.

use super::compare::{self, Kind, Said, Turn};
use super::record::{self, Record};
use super::Only;
use crate::pipeline::outcome::{CallOutcome, CallerKind, Outcome};
use serde_json::Value;

/// What is compared of an answer: all of it, or one webhook's or policy's turns.
pub(super) enum Compared {
    Answer(Said),
    Turns(Only, Vec<Turn>),
}

impl Compared {
    pub(super) fn recorded(record: &Record, only: Option<&Only>) -> Self {
        let kind_of = |w: &record::RecordedWebhook| match w.kind.as_deref() {
            Some("policy") => CallerKind::Policy,
            _ => CallerKind::Webhook,
        };
        if let Some(only) = only {
            let turns = record.webhooks.iter().filter(|w| only.is(kind_of(w), &w.name)).map(|w| Turn {
                round: w.round,
                outcome: w.outcome.clone(),
                code: w.code,
                mutated: w.mutated,
                reason: w.reason.clone(),
            });
            return Compared::Turns(only.clone(), turns.collect());
        }
        let answer = &record.answer;
        let errors = record.webhooks.iter().filter(|w| w.outcome == "error");
        Compared::Answer(Said {
            allowed: answer.allowed,
            code: answer.code,
            message: answer.message.as_deref().map(compare::cut),
            warnings: answer.warnings.iter().map(|w| compare::cut(w)).collect(),
            call_errors: errors.map(|w| call_error(kind_of(w), &w.name, w.reason.as_deref())).collect(),
            patch: answer.patch.clone(),
        })
    }

    pub(super) fn candidate(outcome: &Outcome, only: Option<&Only>) -> Self {
        if let Some(only) = only {
            let turns = outcome.calls.iter().filter(|call| only.is(call.caller.kind(), call.caller.name()));
            let turns = turns.map(|call| {
                let (words, reason) = call.outcome.words();
                Turn {
                    round: call.round,
                    outcome: words.to_owned(),
                    code: call.code(),
                    mutated: matches!(call.outcome, CallOutcome::Allowed { mutated: true }),
                    reason: reason.map(str::to_owned),
                }
            });
            return Compared::Turns(only.clone(), turns.collect());
        }
        let answer = &outcome.answer;
        let status = answer.status.as_ref();
        let errors = outcome.calls.iter().filter_map(|call| match call.outcome.words() {
            ("error", reason) => Some(call_error(call.caller.kind(), call.caller.name(), reason)),
            _ => None,
        });
        Compared::Answer(Said {
            allowed: answer.allowed,
            code: status.and_then(|s| s.code).unwrap_or(200),
            message: status.and_then(|s| s.message.as_deref()).map(compare::cut),
            warnings: answer.warnings.iter().map(|w| compare::cut(w)).collect(),
            call_errors: errors.collect(),
            patch: answer.patch.as_deref().and_then(|patch| serde_json::from_slice(patch).ok()),
        })
    }

    /// How `other` disagrees with this (the recorded) one, on `review`.
    pub(super) fn disagrees(&self, other: &Compared, review: &Value) -> Option<(Kind, compare::ObjectDiff)> {
        match (self, other) {
            (Compared::Answer(recorded), Compared::Answer(candidate)) => {
                let object = Some(&review["request"]["object"]).filter(|o| !o.is_null());
                compare::answers(recorded, candidate, object)
            }
            (Compared::Turns(_, recorded), Compared::Turns(_, candidate)) => {
                compare::turns(recorded, candidate).map(|kind| (kind, compare::ObjectDiff::default()))
            }
            _ => None,
        }
    }

    /// As the report shows it.
    pub(super) fn shown(&self) -> Value {
        match self {
            Compared::Answer(said) => serde_json::to_value(said).unwrap_or_default(),
            Compared::Turns(only, turns) => serde_json::json!({
                only.kind.as_str(): only.name,
                "matched": !turns.is_empty(),
                "turns": turns,
            }),
        }
    }
}

/// A call error as compared: `NAME: reason` for a webhook, `policy NAME: reason` for a policy.
fn call_error(kind: CallerKind, name: &str, reason: Option<&str>) -> String {
    let reason = reason.unwrap_or("error");
    match kind {
        CallerKind::Webhook => format!("{name}: {reason}"),
        CallerKind::Policy => format!("policy {name}: {reason}"),
    }
}
