//! `admission-gateway replay`: every review of a recording (`serve --record`, src/recording.rs)
//! sent again through a candidate fleet, and its answer compared with the recorded one.
//!
//! ```text
//! recording files ─▶ reader thread ─ bounded channel ─▶ at most --concurrency at once,
//!   (record.rs: line by line, .jsonl or .jsonl.gz)       at most --rate a second
//!     each record: [--repeat K: the baseline K times; an answer that varies sets it aside]
//!                  the candidate once ─▶ compare.rs (kind, object diff) ─▶ Summary
//!                                                     └▶ export.rs (--export)
//!     each line that is not one (torn, undecodable): skipped, counted and listed ─▶ Summary
//! ```
//!
//! On a Secret, what a fleet's patch writes under `data` is hashed with the recording's key
//! first (`redact.rs`), as the recorded patch was: the two compare, and neither is shown.
//!
//! Each review goes through the same pipeline `review` runs it through, against a snapshot
//! compiled once, with real calls to the fleet's webhooks. Nothing of a recording is held
//! beyond the reviews in flight and the differences kept for the report (at most
//! [`MAX_DIFFERENCES`]).

mod compare;
mod compared;
mod export;
mod pace;
mod record;
mod redact;
mod world;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::Value;

use compare::Said;
pub(crate) use compare::{review_holds_redacted, Change, Kind};
use compared::Compared;
use pace::Pace;
pub(crate) use record::SkippedLine;
use record::{Item, Record};
use world::{Aborted, Seen};

use crate::cluster::Cluster;
use crate::config::Snapshot;
use crate::endpoint::Endpoint;
use crate::pipeline::budget::Budget;
use crate::pipeline::outcome::{CallerKind, Outcome};
use crate::pipeline::shadow::Shadows;
use crate::review::decode::{self, IncomingReview};
use crate::upstream::Clients;

/// The report lists at most this many differences (the first in recording order); the counts
/// cover them all.
pub(crate) const MAX_DIFFERENCES: usize = 1000;
/// As many requests set aside as non-deterministic are listed at most.
const MAX_UNSTABLE_LISTED: usize = 100;
/// As many skipped lines are listed at most (the first in recording order); the count covers
/// them all.
const MAX_SKIPPED_LISTED: usize = 100;

/// What to replay, against what, how fast.
#[derive(Debug)]
pub(crate) struct Options {
    /// Recording files and directories.
    pub(crate) recordings: Vec<PathBuf>,
    /// The candidate fleet's configuration.
    pub(crate) candidate: Vec<PathBuf>,
    /// Reviews sent a second at most (baseline repeats included).
    pub(crate) rate: u32,
    /// Reviews in flight at most.
    pub(crate) concurrency: usize,
    /// Compare this webhook's or policy's own outcomes instead of the whole answer.
    pub(crate) only: Option<Only>,
    /// With `baseline`: how many times each review is first replayed against it.
    pub(crate) repeat: u32,
    /// The fleet that was recorded.
    pub(crate) baseline: Option<Vec<PathBuf>>,
    /// Where to write reviews as AdmissionReview files, and which.
    pub(crate) export: Option<(PathBuf, Export)>,
    /// Which world the fleets' namespace lookups (and, with a cluster, parameters and
    /// authorizer checks) answer from.
    pub(crate) world: World,
}

/// One webhook or policy whose own outcomes are compared (`--only-webhook`, `--only-policy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Only {
    pub(crate) kind: CallerKind,
    pub(crate) name: String,
}

impl Only {
    fn is(&self, kind: CallerKind, name: &str) -> bool {
        self.kind == kind && self.name == name
    }
}

/// Where a replayed review's world comes from.
#[derive(Clone, Debug, Default)]
pub(crate) enum World {
    /// As each record saw it: its namespace's labels (or the lookup's failure) as recorded.
    /// A namespace a record does not hold (nothing needed it when it was recorded) is looked
    /// up in the candidate configuration's Namespace objects.
    #[default]
    Recorded,
    /// The candidate configuration's Namespace objects only, whatever the records saw.
    Configuration,
    /// The live cluster (`--kube`): namespaces, policy parameters, authorizer checks.
    Cluster(crate::cluster::ClusterOptions),
}

/// Which reviews `--export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Export {
    Disagreeing,
    All,
}

/// The result of a replay, as `-o json|yaml` prints it (docs/operations.md, "Replaying a
/// recording").
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary {
    /// Reviews read from the recording and replayed.
    pub(crate) total: u64,
    pub(crate) agree: u64,
    pub(crate) disagree: u64,
    /// Set aside: the baseline's own answers varied (`--repeat`).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) unstable: u64,
    /// Lines of the recording that are not recorded reviews (torn, undecodable): not replayed,
    /// not in `total`.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) skipped: u64,
    /// Disagreements by kind, every kind present.
    pub(crate) by_kind: BTreeMap<&'static str, u64>,
    /// In recording order, at most [`MAX_DIFFERENCES`].
    pub(crate) differences: Vec<Difference>,
    /// Differences counted but not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) differences_omitted: u64,
    /// The requests set aside, the first 100 in recording order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unstable_requests: Vec<RequestId>,
    /// The lines skipped, the first 100 in recording order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) skipped_lines: Vec<SkippedLine>,
    /// AdmissionReview files written (`--export`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exported: Option<u64>,
}

/// One review on which the candidate disagrees.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Difference {
    pub(crate) request: RequestId,
    pub(crate) kind: Kind,
    /// The recorded answer (or, with `--only-webhook`, the webhook's recorded turns).
    pub(crate) recorded: Value,
    /// The candidate's.
    pub(crate) candidate: Value,
    /// Where the patched objects differ (both allowed), by JSON Pointer path.
    pub(crate) object_diff: Vec<Change>,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub(crate) object_diff_omitted: usize,
    /// The request held redacted values, or a differing value is one: the decision could
    /// depend on a value the recording does not have.
    pub(crate) depends_on_redacted: bool,
    /// `FILE:LINE` of the record.
    pub(crate) record: String,
}

/// Who a review was about.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RequestId {
    pub(crate) uid: String,
    pub(crate) endpoint: &'static str,
    pub(crate) operation: &'static str,
    pub(crate) kind: String,
    /// `RESOURCE[.GROUP][/SUBRESOURCE]`.
    pub(crate) resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) name: String,
}

/// What became of one record.
enum Replayed {
    Agree,
    Disagree(Box<Difference>),
    /// The baseline's answers varied.
    Unstable(RequestId),
    /// Not a recorded review, or not one that can be replayed.
    Skipped(SkippedLine),
}

/// What every replay of a record shares.
struct Fleets {
    candidate: Snapshot,
    baseline: Option<Snapshot>,
    repeat: u32,
    only: Option<Only>,
    pace: Pace,
    exporting: bool,
    /// The recordings' keys, to hash what a candidate's patch writes into a Secret.
    keys: redact::Keys,
    /// Take each record's namespace as it saw it.
    recorded_world: bool,
    /// The live cluster, with `--kube`.
    cluster: Option<Arc<Cluster>>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// Replays the recordings of `options`. A line that is not a replayable record is skipped and
/// listed; a recording that cannot be read, one with no record at all but lines skipped, or a
/// fleet that does not load, is an error (naming the file, and the line if any).
pub(crate) async fn run(options: &Options) -> anyhow::Result<Summary> {
    let files = record::files(&options.recordings)?;
    // Each fleet has clients of its own: a webhook ejected by the baseline's failures
    // (src/upstream/breaker.rs) is not ejected for the candidate.
    let candidate = crate::app::load_snapshot(&options.candidate, &Arc::new(Clients::default()), 1)
        .await
        .context("the candidate configuration (--config)")?;
    // A name that is not there would pass every review, and the gate with them.
    match &options.only {
        Some(Only { kind: CallerKind::Webhook, name }) => {
            let known = candidate.mutating.iter().chain(&candidate.validating).any(|hook| hook.name == *name);
            anyhow::ensure!(
                known,
                "--only-webhook {name:?}: the candidate fleet has no webhook of that name"
            );
        }
        Some(Only { kind: CallerKind::Policy, name }) => {
            let known = candidate.has_policy(name);
            anyhow::ensure!(known, "--only-policy {name:?}: the candidate fleet has no policy of that name");
        }
        None => {}
    }
    let baseline = match &options.baseline {
        Some(paths) => Some(
            crate::app::load_snapshot(paths, &Arc::new(Clients::default()), 1)
                .await
                .context("the baseline configuration (--baseline)")?,
        ),
        None => None,
    };
    if let Some((dir, _)) = &options.export {
        export::prepare(dir)?;
    }
    let (cluster, watches) = match &options.world {
        World::Cluster(cluster) => {
            let (cluster, watches) = Cluster::start(cluster).await.context("the live cluster (--kube)")?;
            (Some(cluster), watches)
        }
        World::Recorded | World::Configuration => (None, Vec::new()),
    };
    // The watches end with the replay.
    let _watches = Aborted(watches);
    let fleets = Fleets {
        candidate,
        baseline,
        repeat: options.repeat,
        only: options.only.clone(),
        pace: Pace::new(options.rate),
        exporting: options.export.is_some(),
        keys: redact::Keys::of(&files),
        recorded_world: matches!(options.world, World::Recorded),
        cluster,
    };
    let concurrency = options.concurrency.max(1);

    // The reader runs on a thread of its own (file reads and gzip block), at most a few
    // records ahead of the replays.
    let (sender, receiver) = tokio::sync::mpsc::channel(concurrency * 2);
    let reader = std::thread::Builder::new().name("replay-reader".into()).spawn(move || {
        for item in record::Reader::new(files) {
            if sender.blocking_send(item).is_err() {
                break;
            }
        }
    })?;
    let records = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    let fleets = &fleets;
    let replays = records
        .map(|item| async move {
            let (place, path, record) = match item? {
                Item::Record(place, path, record) => (place, path, record),
                Item::Skipped(place, line) => return anyhow::Ok((place, (Replayed::Skipped(line), None))),
            };
            let at = format!("{}:{}", path.display(), place.line);
            let key = fleets.keys.of_file(&path);
            let replayed = match replay(fleets, *record, key, at.clone()).await {
                Ok(replayed) => replayed,
                Err(error) => {
                    let problem = format!("not a replayable review: {error:#}");
                    (Replayed::Skipped(SkippedLine { line: at, problem }), None)
                }
            };
            anyhow::Ok((place, replayed))
        })
        .buffer_unordered(concurrency);
    let mut replays = std::pin::pin!(replays);

    let mut summary = Summary::default();
    // Both kept by where they were recorded, so the report's order does not depend on which
    // replay finished first.
    let mut differences = BTreeMap::new();
    let mut unstable = BTreeMap::new();
    let mut skipped = BTreeMap::new();
    let mut exported = 0;
    while let Some(result) = replays.next().await {
        let (place, (replayed, review)) = result?;
        if let Replayed::Skipped(line) = replayed {
            summary.skipped += 1;
            skipped.insert(place, line);
            if skipped.len() > MAX_SKIPPED_LISTED {
                skipped.pop_last();
            }
            continue;
        }
        summary.total += 1;
        let chosen = match options.export {
            Some((_, Export::All)) => true,
            Some((_, Export::Disagreeing)) => matches!(replayed, Replayed::Disagree(_)),
            None => false,
        };
        if let (true, Some((dir, _)), Some(review)) = (chosen, &options.export, review) {
            export::write(dir, &review)?;
            exported += 1;
        }
        match replayed {
            Replayed::Agree => summary.agree += 1,
            Replayed::Unstable(request) => {
                summary.unstable += 1;
                unstable.insert(place, request);
                if unstable.len() > MAX_UNSTABLE_LISTED {
                    unstable.pop_last();
                }
            }
            Replayed::Skipped(_) => unreachable!("counted above"),
            Replayed::Disagree(difference) => {
                summary.disagree += 1;
                *summary.by_kind.entry(difference.kind.as_str()).or_default() += 1;
                differences.insert(place, difference);
                if differences.len() > MAX_DIFFERENCES {
                    differences.pop_last();
                    summary.differences_omitted += 1;
                }
            }
        }
    }
    // The stream ended: the reader has sent its last record.
    let _ = reader.join();
    for kind in Kind::ALL {
        summary.by_kind.entry(kind.as_str()).or_default();
    }
    summary.unstable_requests = unstable.into_values().collect();
    summary.skipped_lines = skipped.into_values().collect();
    // Lines there were, and none was a review: nothing was compared, which no gate should
    // take for a pass.
    if let (0, Some(first)) = (summary.total, summary.skipped_lines.first()) {
        anyhow::bail!(
            "no recorded review in {} lines of the recording; the first: {}: {}",
            summary.skipped,
            first.line,
            first.problem
        );
    }
    summary.differences = differences.into_values().map(|difference| *difference).collect();
    summary.exported = options.export.as_ref().map(|_| exported);
    Ok(summary)
}

/// One record: the baseline's repeats, then the candidate, compared. Returned with it, the
/// recorded review when exporting.
async fn replay(
    fleets: &Fleets,
    record: Record,
    key: Option<&ring::hmac::Key>,
    at: String,
) -> anyhow::Result<(Replayed, Option<Value>)> {
    let endpoint = match record.endpoint.as_str() {
        "mutate" => Endpoint::Mutate,
        "validate" => Endpoint::Validate,
        "admit" => Endpoint::Admit,
        other => anyhow::bail!("unknown endpoint {other:?}"),
    };
    let body = record.request.get().as_bytes();
    let review = decode::review(body).context("the recorded request is not a usable AdmissionReview")?;
    let request: Value = serde_json::from_slice(body).context("the recorded request is not JSON")?;
    let world = Seen::of(&record.world, &review, fleets.recorded_world)?;
    let id = request_id(&review, endpoint);
    let export = fleets.exporting.then(|| request.clone());
    // What a fleet's patch writes into a Secret, hashed as the recording hashed it.
    let secret = redact::is_secret(&request);
    let pointers = &record.world.redaction.redact_pointers;
    let answered = |outcome: &Outcome| {
        let mut compared = Compared::candidate(outcome, fleets.only.as_ref());
        if let Compared::Answer(Said { patch: Some(patch), .. }) = &mut compared {
            if secret || !pointers.is_empty() {
                redact::patch(patch, key, pointers, secret);
            }
        }
        compared
    };

    let recorded = Compared::recorded(&record, fleets.only.as_ref());
    if let Some(baseline) = &fleets.baseline {
        for _ in 0..fleets.repeat {
            let outcome = dispatch(baseline, &review, endpoint, &world, fleets).await;
            let again = answered(&outcome);
            if recorded.disagrees(&again, &request).is_some() {
                return Ok((Replayed::Unstable(id), export));
            }
        }
    }
    let outcome = dispatch(&fleets.candidate, &review, endpoint, &world, fleets).await;
    let candidate = answered(&outcome);
    let Some((kind, diff)) = recorded.disagrees(&candidate, &request) else {
        return Ok((Replayed::Agree, export));
    };
    let difference = Difference {
        request: id,
        kind,
        recorded: recorded.shown(),
        candidate: candidate.shown(),
        object_diff: diff.changes,
        object_diff_omitted: diff.omitted,
        // Without its `userInfo`, any decision may have depended on who asked.
        depends_on_redacted: diff.redacted
            || review_holds_redacted(&request)
            || record.world.redaction.drop_user_info,
        record: at,
    };
    Ok((Replayed::Disagree(Box::new(difference)), export))
}

/// One review through `snapshot`, as `review` runs it: the whole pipeline, real calls, its
/// shadow calls awaited (so they never pile up), after waiting for its turn at the rate; with
/// the world it saw, and its caller's deadline budget from the moment it is sent again.
async fn dispatch(
    snapshot: &Snapshot,
    review: &IncomingReview,
    endpoint: Endpoint,
    world: &Seen,
    fleets: &Fleets,
) -> Outcome {
    fleets.pace.wait().await;
    let shadows = Shadows::awaited();
    let budget = match world.timeout {
        Some(timeout) => Budget::new(tokio::time::Instant::now(), Some(timeout), &snapshot.settings),
        None => Budget::unlimited(&snapshot.settings),
    };
    let request = crate::pipeline::Request {
        cluster: fleets.cluster.as_deref(),
        recorded_namespace: world.namespace.clone(),
        ..crate::pipeline::Request::new(snapshot, review, endpoint, budget, &shadows)
    };
    let (mut outcome, running) = crate::pipeline::review(request).await;
    running.finish(&mut outcome.explanation).await;
    outcome
}

fn request_id(review: &IncomingReview, endpoint: Endpoint) -> RequestId {
    let request = &review.request;
    let resource = review.resource();
    let mut named = resource.resource.clone();
    if !resource.group.is_empty() {
        named = format!("{named}.{}", resource.group);
    }
    if !request.sub_resource.is_empty() {
        named = format!("{named}/{}", request.sub_resource);
    }
    RequestId {
        uid: request.uid.value.clone(),
        endpoint: endpoint.as_str(),
        operation: review.operation().as_str(),
        kind: review.kind().kind.clone(),
        resource: named,
        namespace: request.namespace.clone(),
        name: request.name.clone(),
    }
}
