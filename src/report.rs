//! The report of one review, as the `review` command and the demo print it: the verdict, the
//! explanation, the combined patch, the audit annotations under their full keys, the warnings
//! and (for `review`) the final object and the response.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::endpoint::Endpoint;
use crate::pipeline::Outcome;
use crate::review::{encode, ReviewVersion};

/// For people. `full` adds the final object and the response.
pub(crate) fn text(
    endpoint: Endpoint,
    uid: &str,
    version: ReviewVersion,
    outcome: &Outcome,
    full: bool,
) -> String {
    let mut out = String::new();
    let verdict = if outcome.answer.allowed { "allowed" } else { "denied" };
    let _ = writeln!(out, "== /{} {uid}: {verdict}", endpoint.as_str());
    if let Some(status) = &outcome.answer.status {
        let code = status.code.unwrap_or_default();
        let _ = writeln!(out, "   {code} {}", status.message.as_deref().unwrap_or_default());
    }
    let _ = writeln!(out, "-- explanation");
    let _ = write!(out, "{}", outcome.explanation);
    if outcome.explanation.steps.is_empty() {
        let _ = writeln!(out, "  no webhook's rules match this request");
    }
    if let Some(patch) = &outcome.answer.patch {
        let _ = writeln!(out, "-- combined patch\n  {}", String::from_utf8_lossy(patch));
    }
    if !outcome.full_annotations.is_empty() {
        let _ = writeln!(out, "-- audit annotations (full keys)");
        for (key, value) in &outcome.full_annotations {
            let _ = writeln!(out, "  {key}: {value}");
        }
    }
    if !outcome.answer.warnings.is_empty() {
        let _ = writeln!(out, "-- warnings");
        for warning in &outcome.answer.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    if !full {
        return out;
    }
    if let Some(object) = &outcome.final_object {
        let _ =
            writeln!(out, "-- final object\n{}", serde_json::to_string_pretty(object).unwrap_or_default());
    }
    let _ = writeln!(
        out,
        "-- response\n{}",
        serde_json::to_string_pretty(&response(version, uid, outcome)).unwrap_or_default()
    );
    out
}

/// For programs (`-o json|yaml`): the same content as [`text`] with `full`.
pub(crate) fn structured(endpoint: Endpoint, uid: &str, version: ReviewVersion, outcome: &Outcome) -> Value {
    let answer = &outcome.answer;
    let patch = answer.patch.as_deref().and_then(|p| serde_json::from_slice::<Value>(p).ok());
    json!({
        "stage": endpoint.as_str(),
        "uid": uid,
        "allowed": answer.allowed,
        "status": answer.status,
        "explanation": outcome.explanation.steps,
        "patch": patch,
        "auditAnnotations": outcome.full_annotations,
        "warnings": answer.warnings,
        "finalObject": outcome.final_object,
        "response": response(version, uid, outcome),
    })
}

/// The AdmissionReview the endpoint would have answered.
fn response(version: ReviewVersion, uid: &str, outcome: &Outcome) -> Value {
    serde_json::from_slice(&encode::answer(version, uid, &outcome.answer)).unwrap_or_default()
}
