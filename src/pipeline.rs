//! The admission pipeline: one decoded review in, one answer out.
//!
//! ```text
//! review ─▶ 1 matching (per webhook, inside each stage)
//!        ─▶ 2 mutate::run_chain   sequential, patches applied, IfNeeded round 1
//!        ─▶ 3 validate::fan_out   concurrent, on the mutated object
//!        ─▶ answer: verdict + one combined patch + annotations + warnings
//! ```

pub mod call;
pub mod matching;
pub mod mutate;
pub mod object;
pub mod record;
pub mod validate;
pub mod verdict;

use serde_json::Value;
use tokio::time::Instant;

use crate::config::Snapshot;
use crate::review::decode::IncomingReview;
use crate::review::encode::Answer;
use crate::trace::Trace;
use object::ObjectState;
use record::Records;

/// Which dispatchers a review goes through (the endpoint it arrived at).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// `/mutate`: the mutating chain only.
    Mutate,
    /// `/validate`: the validating webhooks only.
    Validate,
    /// `/admit`: the mutating chain, then the validating webhooks on its result.
    Admit,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutate => "mutate",
            Self::Validate => "validate",
            Self::Admit => "admit",
        }
    }
}

/// Everything one review produced.
#[derive(Debug)]
pub struct Outcome {
    pub answer: Answer,
    /// Annotations under their full keys, when tracing (the answer carries them encoded).
    pub full_annotations: std::collections::BTreeMap<String, String>,
    pub trace: Trace,
    /// The final object, when tracing (for the `review` trace).
    pub final_object: Option<Value>,
}

/// Dispatches one review. `deadline` is the caller's (its `?timeout=`).
pub async fn review(
    snapshot: &Snapshot,
    review: &IncomingReview,
    stage: Stage,
    deadline: Option<Instant>,
    mut trace: Trace,
) -> Outcome {
    let mut records = Records::default();
    let mut object = ObjectState::new(review.request.object.as_deref(), review.request.old_object.as_deref());
    let mut result = Ok(());
    if matches!(stage, Stage::Mutate | Stage::Admit) {
        result = mutate::run_chain(snapshot, review, &mut object, deadline, &mut records, &mut trace).await;
    }
    if result.is_ok() && matches!(stage, Stage::Validate | Stage::Admit) {
        result = validate::fan_out(snapshot, review, &mut object, deadline, &mut records, &mut trace).await;
    }
    let final_object = if trace.is_enabled() { object.tree().cloned() } else { None };
    let answer = match result {
        Ok(()) => Answer {
            allowed: true,
            status: None,
            patch: object.combined_patch(),
            audit_annotations: records.encoded_annotations(),
            warnings: records.warnings(),
        },
        Err(status) => Answer {
            allowed: false,
            status: Some(status),
            patch: None,
            audit_annotations: records.encoded_annotations(),
            warnings: records.warnings(),
        },
    };
    // Full keys are for the trace; the answer carries them encoded.
    let full_annotations =
        if trace.is_enabled() { records.annotations().clone() } else { Default::default() };
    Outcome { answer, full_annotations, trace, final_object }
}
