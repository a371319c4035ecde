//! The ValidatingAdmissionPolicies' turn (docs/policies.md): after the mutating chain and
//! before the validating webhooks, as kube-apiserver runs its `ValidatingAdmissionPolicy`
//! plugin before `ValidatingAdmissionWebhook`. A denial stops the chain: the validating
//! webhooks are not called.
//!
//! The evaluation itself is `policy.rs`. Here: the request's namespace fetched first (it is
//! `namespaceObject`), each policy's mode; each result judged as a webhook's call is
//! (`judge.rs`, `Review::judge_policy`: observed, explained, a call record, its warn or shadow
//! mode applied); what the enforced ones leave on the review together (the first denial,
//! warnings, audit annotations); and once the review is decided ([`Pending::settle`]), each
//! shadowed policy compared with the decision and each policy compared with the webhook it
//! replaces.

use std::sync::Arc;

use serde_json::{json, Value};

use super::conditions;
use super::context::Review;
use super::evaluations::{self, Unfinished};
use super::matching::NamespaceLabels;
use super::modes::{CallMode, ShadowMode};
use super::observe;
use super::outcome::{CallOutcome, CallRecord};
use super::policy::{self, Attributes, Lookups, NoLookups, PolicyResult};
use crate::cel::authorizer;
use crate::cluster::params::Params;
use crate::cluster::Cluster;
use crate::config::policy::{Param, Policies, Policy};
use crate::review::decode::IncomingReview;
use crate::review::Status;

/// Evaluates every policy; `Err` is the enforced policies' first denial, which fails the
/// request.
pub(crate) async fn run(review: &mut Review<'_>) -> Result<(), Status> {
    let policies = Arc::clone(&review.snapshot.policies);
    if policies.is_empty() {
        return Ok(());
    }
    let results = if policy::may_match(&policies, review.request) {
        evaluate(review, policies).await?
    } else {
        // No candidate policy's rules accept the request: every match ends before the object,
        // the namespace or an expression is read, so none of them is fetched, parsed or
        // evaluated.
        let attributes = Attributes {
            review: review.request,
            object: None,
            old_object: None,
            namespace: None,
            deadline: None,
        };
        policy::evaluate(&policies, &attributes, &NoLookups)
    };
    if results.iter().any(|result| result.matched) {
        if let Some(status) = review.namespace.for_policies(review.request) {
            // The API server fetches the namespace of a namespaced request for the first
            // binding that matches, and fails the request as it is when it cannot.
            return Err(status);
        }
    }

    // Each judged as a webhook's call is (`judge.rs`); the enforced ones' decisions then
    // make the policies' verdict together, as the API server's plugin makes it.
    let mut enforced = Vec::new();
    for result in &results {
        let mode = mode_of(&result.policy, review.request);
        if review.judge_policy(result, mode) {
            enforced.push(result);
        }
    }
    let verdict = policy::aggregate(enforced);
    review.records.warn(Some(verdict.warnings));
    for (key, value) in verdict.audit_annotations {
        review.records.annotate(key, value);
    }
    match verdict.denial {
        Some(status) => Err(status),
        None => Ok(()),
    }
}

/// Evaluates `policies` with everything a match may read: the namespace, the parameters'
/// first list in cluster mode, the object and old object, on a thread of the evaluations.
async fn evaluate(review: &mut Review<'_>, policies: Arc<Policies>) -> Result<Vec<PolicyResult>, Status> {
    review.fetch_namespace().await;
    if let Some(cluster) = review.cluster {
        let kinds: Vec<(String, String)> = policies
            .iter()
            .filter(|p| p.params.is_empty())
            .filter_map(|p| p.param_kind.as_ref())
            .map(|k| (k.api_version.clone(), k.kind.clone()))
            .collect();
        let ready = cluster.params.ready(&kinds);
        // At most the API server's wait for an informer, and never past the deadline.
        match review.budget.deadline() {
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline, ready).await;
            }
            None => ready.await,
        }
    }
    let namespace = namespace_object(review.request, &review.namespace);
    let old_object = review.object.old_tree().cloned();
    let object = review.object.tree().cloned();
    let owned = (Arc::clone(&policies), review.request.clone(), object, old_object, namespace);
    off_thread(review.cluster, owned, review.budget.deadline()).await
}

/// What an evaluation owns: policies, request, object, old object, namespace.
type Owned = (Arc<Policies>, IncomingReview, Option<Value>, Option<Value>, Option<Value>);

/// Evaluates the policies on an evaluation thread ([`evaluations`]), so that no review waits
/// behind another's CEL: a 3,200-label comprehension or a selector over hundreds of parameters
/// runs beside the serving threads, which go on with their other reviews. The CEL authorizer's
/// checks block on SubjectAccessReviews, which is one more reason for a thread of their own.
///
/// Never open: an evaluation that does not finish (a panic outside the CEL library, whose
/// own panics are errors of their expression, or cancellation at shutdown), or that found no
/// slot before the review's deadline, fails the request with an internal error whatever the
/// policies' failurePolicy: which policies matched is not known then.
async fn off_thread(
    cluster: Option<&Cluster>,
    owned: Owned,
    deadline: Option<tokio::time::Instant>,
) -> Result<Vec<PolicyResult>, Status> {
    let scope = match cluster {
        Some(cluster) if owned.0.iter().any(|p| p.uses_authorizer()) => {
            Some(conditions::scope(cluster, &owned.1))
        }
        _ => None,
    };
    let params = cluster.map(|cluster| Arc::clone(&cluster.params));
    let until = deadline.map(tokio::time::Instant::into_std);
    let evaluated = evaluations::run(deadline, move || {
        let (policies, review, object, old_object, namespace) = owned;
        let attributes = Attributes {
            review: &review,
            object: object.as_ref(),
            old_object: old_object.as_ref(),
            namespace: namespace.as_ref(),
            deadline: until,
        };
        authorizer::with_scope(scope, || match &params {
            Some(params) => policy::evaluate(&policies, &attributes, &Live(params)),
            None => policy::evaluate(&policies, &attributes, &NoLookups),
        })
    })
    .await;
    evaluated.map_err(|unfinished| {
        crate::pipeline::verdict::internal_error(match unfinished {
            Unfinished::NoSlot => {
                "the review's deadline passed before its admission policies could be evaluated"
            }
            Unfinished::Ended => "the evaluation of the admission policies did not finish",
        })
    })
}

/// The cluster's parameters as an evaluation reads them.
struct Live<'a>(&'a Params);

impl Lookups for Live<'_> {
    fn params(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> Option<Result<Vec<Arc<Param>>, String>> {
        Some(self.0.list(api_version, kind, namespace, name))
    }

    fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.0.namespaced(api_version, kind)
    }
}

/// How `policy` is run for `request`: as a webhook of its mode, its canary bucket keyed by
/// its name.
fn mode_of(policy: &Policy, request: &IncomingReview) -> CallMode {
    CallMode::of_mode(policy.mode, &policy.name, request)
}

/// `namespaceObject` (§6.4): the request's Namespace as far as the gateway knows it — name and
/// labels (docs/policies.md says what else a policy cannot read here).
fn namespace_object(request: &IncomingReview, namespace: &NamespaceLabels) -> Option<Value> {
    let NamespaceLabels::Found(labels) = namespace else { return None };
    let name = &request.request.namespace;
    Some(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels.as_ref()},
    }))
}

/// What is compared once the review is decided.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Shadowed policies and whether each denied.
    shadowed: Vec<(Arc<Policy>, ShadowMode, bool)>,
    /// Policies that replace a webhook, and whether each denied.
    paired: Vec<(Arc<Policy>, bool)>,
}

impl Pending {
    /// A shadowed policy, and whether it denied: compared with the decision.
    pub(crate) fn shadowed(&mut self, policy: &Arc<Policy>, mode: ShadowMode, denied: bool) {
        self.shadowed.push((Arc::clone(policy), mode, denied));
    }

    /// A policy that replaces a webhook, and whether it denied: compared with the webhook.
    pub(crate) fn paired(&mut self, policy: &Arc<Policy>, denied: bool) {
        self.paired.push((Arc::clone(policy), denied));
    }

    /// Counts each shadowed policy against the decision, and each replacing policy against its
    /// webhook's own outcome when that webhook was called on the critical path.
    pub(crate) fn settle(&self, allowed: bool, calls: &[CallRecord], request: &IncomingReview) {
        let uid = &request.request.uid.value;
        for (policy, mode, denied) in &self.shadowed {
            let (result, disagreement) = match (*denied, allowed) {
                (true, true) => ("disagree", "would_deny"),
                (false, false) => ("disagree", "would_allow"),
                _ => ("agree", ""),
            };
            observe::policy_shadow(policy, *mode, result, disagreement, uid);
        }
        for (policy, denied) in &self.paired {
            let Some(replaces) = &policy.replaces else { continue };
            let (configuration, webhook) = (&replaces.configuration, &replaces.webhook);
            let call = calls.iter().find(|call| {
                call.round == 0
                    && call
                        .caller
                        .hook()
                        .is_some_and(|hook| hook.configuration == *configuration && hook.name == *webhook)
            });
            let Some(call) = call else { continue };
            let (result, disagreement) = match (&call.outcome, *denied) {
                (CallOutcome::Denied { .. }, true) | (CallOutcome::Allowed { .. }, false) => ("agree", ""),
                (CallOutcome::Allowed { .. }, true) => ("disagree", "policy_denies"),
                (CallOutcome::Denied { .. }, false) => ("disagree", "webhook_denies"),
                (CallOutcome::Error { .. } | CallOutcome::DryRunRefused, _) => ("webhook_error", ""),
            };
            observe::policy_paired(policy, configuration, webhook, result, disagreement, request);
        }
    }
}
