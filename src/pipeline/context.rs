//! One review on its way through the dispatchers: the request, the snapshot it is judged
//! against, the deadline budget, the object as patched so far, the annotations and warnings,
//! the calls made, the trace; what the dispatchers ask of it alike (the candidates, the
//! namespace's labels, whether a webhook matches); and the outcome it ends in.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::budget::Budget;
use super::conditions;
use super::matching::{self, NamespaceLabels, Skip};
use super::object::ObjectState;
use super::outcome::{CallRecord, Outcome};
use super::policies;
use super::record::Records;
use super::shadow::{self, Shadows};
use super::Request;
use crate::cluster::Cluster;
use crate::config::compile::Hook;
use crate::config::Snapshot;
use crate::explain::{Explanation, Phase, Step};
use crate::review::decode::IncomingReview;
use crate::review::encode::Answer;
use crate::review::Status;
use crate::traces::Parent;

/// One review on its way through the stages.
pub(crate) struct Review<'r> {
    pub(crate) snapshot: &'r Snapshot,
    pub(crate) request: &'r IncomingReview,
    pub(crate) budget: Budget,
    pub(crate) object: ObjectState<'r>,
    pub(crate) records: Records,
    pub(crate) explanation: Explanation,
    /// The CEL variables of matchConditions, converted once per object version.
    pub(crate) conditions: conditions::State,
    /// Live cluster state, in cluster mode.
    pub(crate) cluster: Option<&'r Cluster>,
    /// The request's namespace labels, looked up once, when a candidate whose rules match needs
    /// them.
    pub(crate) namespace: NamespaceLabels,
    /// The lookup's answer known in advance: a replay's recorded world.
    pub(crate) recorded_namespace: Option<NamespaceLabels>,
    pub(crate) failed_open: u32,
    pub(crate) budget_exhausted: u32,
    pub(crate) calls: Vec<CallRecord>,
    /// Where shadow calls are cancelled and whether they are awaited.
    pub(crate) shadows: &'r Shadows,
    /// The shadow calls this review started.
    pub(crate) shadow: shadow::Pending,
    /// The policies compared once the review is decided (shadowed, or replacing a webhook).
    pub(crate) policies: policies::Pending,
    /// The review's span, parent of its calls' spans (none when not tracing).
    pub(crate) trace: Parent,
}

impl<'r> Review<'r> {
    /// The review `request` asks for, before any webhook is judged.
    pub(crate) fn new(request: Request<'r>) -> Self {
        let Request {
            snapshot,
            cluster,
            review,
            budget,
            explanation,
            shadows,
            trace,
            recorded_namespace,
            ..
        } = request;
        Review {
            snapshot,
            request: review,
            budget,
            object: ObjectState::new(review.object(), review.old_object())
                .limited_to(snapshot.settings.max_patched_object_bytes),
            records: Records::default(),
            explanation,
            conditions: conditions::State::default(),
            cluster,
            namespace: NamespaceLabels::NotNeeded,
            recorded_namespace,
            failed_open: 0,
            budget_exhausted: 0,
            calls: Vec::new(),
            shadows,
            shadow: shadow::Pending::default(),
            policies: policies::Pending::default(),
            trace,
        }
    }

    pub(crate) fn finish(mut self, result: Result<(), Status>) -> (Outcome, shadow::Running) {
        let explaining = self.explanation.is_enabled();
        let final_object = if explaining { self.object.tree().cloned() } else { None };
        let (allowed, status, patch) = match result {
            Ok(()) => (true, None, self.object.combined_patch()),
            Err(status) => (false, Some(status), None),
        };
        let shadows = shadow::Running(self.shadow.decided(allowed));
        self.policies.settle(allowed, &self.calls, self.request);
        let answer = Answer {
            allowed,
            status,
            patch,
            audit_annotations: self.records.encoded_annotations(),
            warnings: self.records.warnings(),
        };
        // Full keys are for the explanation; the answer carries them encoded.
        let full_annotations = if explaining { self.records.annotations().clone() } else { BTreeMap::new() };
        let outcome = Outcome {
            answer,
            full_annotations,
            explanation: self.explanation,
            final_object,
            failed_open: self.failed_open,
            budget_exhausted: self.budget_exhausted,
            calls: self.calls,
            namespace: self.namespace,
        };
        (outcome, shadows)
    }

    /// The webhooks of one phase that may match: the index narrows the fleet to those whose
    /// rules can match; when explaining, every webhook, so the explanation says why each was
    /// skipped.
    /// Borrowed from the snapshot, which outlives the review.
    pub(crate) fn candidates(&self, phase: Phase) -> Vec<&'r Arc<Hook>> {
        let (snapshot, resource) = (self.snapshot, self.request.resource());
        match (phase, self.explanation.is_enabled()) {
            (Phase::Mutating, true) => snapshot.mutating.iter().collect(),
            (Phase::Validating, true) => snapshot.validating.iter().collect(),
            (Phase::Mutating, false) => {
                snapshot.mutating_candidates(&resource.group, &resource.resource).collect()
            }
            (Phase::Validating, false) => {
                snapshot.validating_candidates(&resource.group, &resource.resource).collect()
            }
        }
    }

    /// Looks up the request's namespace once per review, whoever needs it: a webhook's
    /// namespaceSelector, or the policies (their selectors and `namespaceObject`). A replay
    /// gives the recorded answer, which is taken as it is.
    pub(crate) async fn fetch_namespace(&mut self) {
        if !matches!(self.namespace, NamespaceLabels::NotNeeded)
            || !matching::reads_namespace_labels(self.request)
        {
            return;
        }
        if let Some(recorded) = self.recorded_namespace.take() {
            self.namespace = recorded;
            return;
        }
        let name = &self.request.request.namespace;
        self.namespace = match self.cluster {
            None => match self.snapshot.namespaces.get(name) {
                Some(labels) => NamespaceLabels::Found(labels.clone()),
                None => NamespaceLabels::Missing { live: false },
            },
            Some(cluster) => {
                let lookup = cluster.namespaces.labels(name);
                let found = match self.budget.deadline() {
                    Some(deadline) => tokio::time::timeout_at(deadline, lookup).await.unwrap_or_else(|_| {
                        Err(format!(
                            "getting namespace {name:?} from the API server: deadline budget exhausted"
                        ))
                    }),
                    None => lookup.await,
                };
                match found {
                    Ok(Some(labels)) => NamespaceLabels::Found(labels),
                    Ok(None) => NamespaceLabels::Missing { live: true },
                    Err(message) => NamespaceLabels::Unavailable(message),
                }
            }
        };
    }

    /// `Ok(true)` if `hook` is to be called; a skip is explained. `Err`: the request fails.
    /// Rules and selectors first, then matchConditions (§4.0.7).
    pub(crate) async fn matches(&mut self, hook: &Hook, phase: Phase, round: u8) -> Result<bool, Status> {
        match self.decide(hook, phase).await {
            Ok(None) => Ok(true),
            Ok(Some(skip)) => {
                self.skipped(hook, phase, round, &skip);
                Ok(false)
            }
            Err(status) => {
                let message = status.message.clone().unwrap_or_default();
                tracing::warn!(webhook = %hook.name, phase = phase.as_str(), "request rejected: {}", crate::logging::Untrusted(&message));
                self.explanation.record(|| Step::NotCalled {
                    phase,
                    configuration: hook.configuration.clone(),
                    webhook: hook.name.clone(),
                    round,
                    outcome: format!("request rejected before any call: {message}"),
                });
                Err(status)
            }
        }
    }

    /// Whether `hook` matches: `Ok(None)` to call it, the skip, or `Err` if matching failed the
    /// request. Its rules first: the namespace is looked up only for a webhook whose rules match
    /// and whose namespaceSelector reads it (§4.3).
    pub(crate) async fn decide(&mut self, hook: &Hook, phase: Phase) -> Result<Option<Skip>, Status> {
        let rules = matching::rule_match(hook, self.request);
        if matching::needs_namespace(hook, &rules, self.request) {
            self.fetch_namespace().await;
        }
        if let Some(skip) = matching::selected(hook, rules, self.request, &self.object, &self.namespace)? {
            return Ok(Some(skip));
        }
        conditions::evaluate(
            hook,
            self.request,
            &mut self.object,
            &mut self.conditions,
            self.cluster,
            phase,
            self.budget.deadline(),
        )
        .await
    }

    pub(crate) fn skipped(&mut self, hook: &Hook, phase: Phase, round: u8, skip: &Skip) {
        self.explanation.record(|| Step::Skipped {
            phase,
            configuration: hook.configuration.clone(),
            webhook: hook.name.clone(),
            round,
            reason: skip.to_string(),
        });
    }
}
