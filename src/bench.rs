//! Entry points for the Criterion benches in `benches/` (not a stable API: hidden from the
//! docs). Each wraps one step of a review's path through the crate's own code, so a bench
//! measures exactly what `serve` runs: decoding a received review, matching a fleet,
//! the mutating chain's combined patch, encoding the answer and a webhook's request, and the
//! recording's line and compression.
//! Nothing here is used by the gateway itself.

use std::path::PathBuf;

use serde_json::value::RawValue;

use crate::config::compile;
use crate::config::Snapshot;
use crate::patch::Patch;
use crate::pipeline::matching;
use crate::pipeline::object::ObjectState;
use crate::review::decode::{self, IncomingReview};
use crate::review::encode::{self, Answer};
use crate::review::ReviewVersion;
use crate::upstream::Clients;

/// A decoded AdmissionReview (`review::decode`).
pub struct Review(IncomingReview);

/// Decodes a received AdmissionReview as the server does; `Err` is the 400's reason.
pub fn decode(body: &[u8]) -> Result<Review, String> {
    decode::review(body).map(Review).map_err(|e| e.to_string())
}

/// A compiled fleet (`config::compile::load`).
pub struct Fleet(Snapshot);

/// Loads and compiles the configuration at `paths` as `serve` does.
pub fn fleet(paths: &[PathBuf]) -> Result<Fleet, String> {
    compile::load(paths, &Clients::default(), 1)
        .map(Fleet)
        .map_err(|e| e.problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
}

/// The validating webhooks of `fleet` that `review` would be sent to: the rule index's
/// candidates, then rules, scope and selectors (`pipeline/matching.rs`). Counts them.
pub fn matching_validating(fleet: &Fleet, review: &Review) -> usize {
    let (snapshot, request) = (&fleet.0, &review.0);
    let resource = request.resource();
    let object = ObjectState::new(request.object(), request.old_object());
    let namespace = match snapshot.namespaces.get(&request.request.namespace) {
        Some(labels) => matching::NamespaceLabels::Found(labels.clone()),
        None => matching::NamespaceLabels::Missing { live: false },
    };
    snapshot
        .validating_candidates(&resource.group, &resource.resource)
        .filter(|hook| matches!(matching::should_call(hook, request, &object, &namespace), Ok(None)))
        .count()
}

/// Applies `patches` in order to `object` as the mutating chain does (`pipeline/object.rs`)
/// and returns the one combined patch answered to the API server.
pub fn combined_patch(object: &RawValue, patches: &[Patch]) -> Option<Vec<u8>> {
    let mut state = ObjectState::new(Some(object), None);
    for patch in patches {
        state.apply_now(patch).ok()?;
    }
    state.combined_patch()
}

/// Applies one `patch` to `object` as the mutating chain does, then makes the text the next
/// webhook would be sent; `on_tree` takes the whole-tree path whatever the patch (the chain
/// takes the text path for a few operations). Whether the object changed.
pub fn patch_object(object: &RawValue, patch: &Patch, on_tree: bool) -> Option<bool> {
    let mut state = ObjectState::new(Some(object), None);
    let changed = if on_tree { state.apply_now_to_tree(patch) } else { state.apply_now(patch) }.ok()?;
    state.raw()?;
    Some(changed)
}

/// The answer to `review` in its version, with `patch` (JSON Patch text) if any
/// (`review::encode::answer`).
pub fn encode_answer(review: &Review, patch: Option<Vec<u8>>) -> Vec<u8> {
    let answer = Answer { allowed: true, patch, ..Answer::default() };
    encode::answer(review.0.version, &review.0.request.uid, &answer)
}

/// A webhook's answer `body` decoded as the gateway decodes one (`upstream.rs`), then the
/// answer to `review` in its version with that verdict: the codec work of a review with one
/// validating webhook, without the gateway's own (`loadtest/passthrough.rs --codec`).
pub fn answer_from_webhook(review: &Review, body: &[u8]) -> Result<Vec<u8>, String> {
    let webhook = crate::upstream::decode_review(body)?;
    let allowed = webhook.response.is_some_and(|response| response.allowed);
    let answer = Answer { allowed, ..Answer::default() };
    Ok(encode::answer(review.0.version, &review.0.request.uid, &answer))
}

/// The request a v1 webhook is sent for `review`, its object unchanged, as the gateway makes
/// it (`pipeline/call.rs`): from the received body where it can (`review/frame.rs`).
pub fn encode_webhook_request(review: &Review) -> Vec<u8> {
    review.0.request_body(ReviewVersion::V1, "6f1c4a2e-0d3b-4c5a-8e7f-9a0b1c2d3e4f", review.0.object())
}

/// The same request written by the encoder (`review::encode::request`): what a webhook of
/// another review version is sent, and any webhook when the received body cannot be a frame.
pub fn encode_webhook_request_anew(review: &Review) -> Vec<u8> {
    let review = &review.0;
    let outgoing = review.outgoing("6f1c4a2e-0d3b-4c5a-8e7f-9a0b1c2d3e4f", review.object());
    encode::request(ReviewVersion::V1, &outgoing)
}

/// The recording's line for an allowed review of `body` (nothing to redact), appended to `out`
/// as the writer thread appends it to its batch (`recording/writer.rs`).
pub fn record_line(body: bytes::Bytes, out: &mut Vec<u8>) -> Result<(), String> {
    crate::recording::bench_line(body, out).map_err(|e| format!("{e:#}"))
}

/// `lines` gzip-compressed as the recording's compressor does a finished file
/// (`recording/compress.rs`).
pub fn record_gzip(lines: &[u8]) -> Vec<u8> {
    crate::recording::bench_gzip(lines).unwrap_or_default()
}
