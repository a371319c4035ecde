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
    let object = prepare(review, &policies).await;
    off_thread(review, policies, object, |policies, attributes, lookups| {
        policy::evaluate(policies, attributes, lookups)
    })
    .await
}

/// What an evaluation of `policies` may read, fetched: the request's namespace, and in cluster
/// mode the first list of the parameters the configuration does not hold. Returns the
/// current object as a tree.
pub(super) async fn prepare(review: &mut Review<'_>, policies: &Policies) -> Option<Value> {
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
    review.object.tree().cloned()
}

/// Runs `work` on `policies` and the request (with `object` as the current object) on a
/// thread of the evaluations ([`evaluations`]), so that no review waits behind another's CEL:
/// a 3,200-label comprehension or a selector over hundreds of parameters runs beside the
/// serving threads, which go on with their other reviews. The CEL authorizer's checks block on
/// SubjectAccessReviews, which is one more reason for a thread of their own.
///
/// Never open: an evaluation that does not finish (a panic outside the CEL library, whose
/// own panics are errors of their expression, or cancellation at shutdown), or that found no
/// slot before the review's deadline, fails the request with an internal error whatever the
/// policies' failurePolicy: which policies matched is not known then.
pub(super) fn off_thread<T: Send + 'static>(
    review: &Review<'_>,
    policies: Arc<Policies>,
    object: Option<Value>,
    work: impl FnOnce(&Policies, &Attributes<'_>, &dyn Lookups) -> T + Send + 'static,
) -> impl std::future::Future<Output = Result<T, Status>> + Send + 'static {
    let cluster = review.cluster;
    let scope = match cluster {
        Some(cluster) if policies.iter().any(|p| p.uses_authorizer()) => {
            Some(conditions::scope(cluster, review.request))
        }
        _ => None,
    };
    let params = cluster.map(|cluster| Arc::clone(&cluster.params));
    let deadline = review.budget.deadline();
    let until = deadline.map(tokio::time::Instant::into_std);
    let namespace = namespace_object(review.request, &review.namespace);
    let old_object = review.object.old_tree().cloned();
    let request = review.request.clone();
    let evaluated = evaluations::run(deadline, move || {
        let attributes = Attributes {
            review: &request,
            object: object.as_ref(),
            old_object: old_object.as_ref(),
            namespace: namespace.as_ref(),
            deadline: until,
        };
        authorizer::with_scope(scope, || match &params {
            Some(params) => work(&policies, &attributes, &Live(params)),
            None => work(&policies, &attributes, &NoLookups),
        })
    });
    async move {
        evaluated.await.map_err(|unfinished| {
            crate::pipeline::verdict::internal_error(match unfinished {
                Unfinished::NoSlot => {
                    "the review's deadline passed before its admission policies could be evaluated"
                }
                Unfinished::Ended => "the evaluation of the admission policies did not finish",
            })
        })
    }
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
pub(super) fn mode_of(policy: &Policy, request: &IncomingReview) -> CallMode {
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

/// The object a mutating policy saw and the one its mutations would have left.
type Before = (Value, Value);

/// What is compared once the review is decided.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Shadowed policies and whether each denied.
    shadowed: Vec<(Arc<Policy>, ShadowMode, bool)>,
    /// Policies that replace a webhook, and whether each denied.
    paired: Vec<(Arc<Policy>, bool)>,
    /// Mutating policies not applied that replace a mutating webhook: whether each would have
    /// denied, and the object each saw with the one its mutations would have left.
    mutating: Vec<(Arc<Policy>, bool, Option<Before>)>,
    /// What each webhook a mutating policy replaces did in round 0: (configuration, webhook,
    /// the object it was sent, the object after its patch).
    outputs: Vec<(String, String, Value, Value)>,
}

impl Pending {
    /// A mutating policy that was not applied and replaces a webhook: compared with what that
    /// webhook made of the object.
    pub(crate) fn mutating_paired(
        &mut self,
        policy: &Arc<Policy>,
        denied: bool,
        would: Option<(Value, Value)>,
    ) {
        self.mutating.push((Arc::clone(policy), denied, would));
    }

    /// Whether some mutating policy waits for what `configuration`/`webhook` does.
    pub(crate) fn watches(&self, configuration: &str, webhook: &str) -> bool {
        self.mutating.iter().any(|(policy, _, _)| {
            policy.replaces.as_ref().is_some_and(|r| r.configuration == configuration && r.webhook == webhook)
        })
    }

    /// What a watched webhook made of the object in round 0.
    pub(crate) fn output(&mut self, configuration: &str, webhook: &str, sent: Value, patched: Value) {
        self.outputs.push((configuration.to_owned(), webhook.to_owned(), sent, patched));
    }

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
            let Some(call) = replaced_call(calls, configuration, webhook) else { continue };
            let (result, disagreement) = match (&call.outcome, *denied) {
                (CallOutcome::Denied { .. }, true) | (CallOutcome::Allowed { .. }, false) => ("agree", ""),
                (CallOutcome::Allowed { .. }, true) => ("disagree", "policy_denies"),
                (CallOutcome::Denied { .. }, false) => ("disagree", "webhook_denies"),
                (CallOutcome::Error { .. } | CallOutcome::DryRunRefused, _) => ("webhook_error", ""),
            };
            observe::policy_paired(policy, configuration, webhook, result, disagreement, request);
        }
        for (policy, denied, would) in &self.mutating {
            let Some(replaces) = &policy.replaces else { continue };
            let (configuration, webhook) = (&replaces.configuration, &replaces.webhook);
            let Some(call) = replaced_call(calls, configuration, webhook) else { continue };
            let output = self.outputs.iter().find(|(c, w, _, _)| c == configuration && w == webhook);
            let (result, disagreement, paths) = match (&call.outcome, *denied, would, output) {
                (CallOutcome::Error { .. } | CallOutcome::DryRunRefused, _, _, _) => {
                    ("webhook_error", "", Vec::new())
                }
                (CallOutcome::Denied { .. }, true, _, _) => ("agree", "", Vec::new()),
                (CallOutcome::Allowed { .. }, true, _, _) => ("disagree", "policy_denies", Vec::new()),
                (CallOutcome::Denied { .. }, false, _, _) => ("disagree", "webhook_denies", Vec::new()),
                (CallOutcome::Allowed { .. }, false, Some((before, after)), Some((_, _, sent, patched))) => {
                    let paths = differing_changes((before, after), (sent, patched));
                    if paths.is_empty() {
                        ("agree", "", paths)
                    } else {
                        ("disagree", "objects_differ", paths)
                    }
                }
                // Nothing to compare: no object on one side.
                (CallOutcome::Allowed { .. }, false, _, _) => ("agree", "", Vec::new()),
            };
            observe::policy_paired(policy, configuration, webhook, result, disagreement, request);
            if !paths.is_empty() {
                tracing::debug!(
                    policy = %policy.name,
                    configuration = %configuration,
                    webhook = %webhook,
                    uid = %crate::logging::Untrusted(&request.request.uid.value),
                    paths = %paths.join(" "),
                    "mutating policy and the webhook it replaces leave the object differing at these paths"
                );
            }
        }
    }
}

/// The round-0 call of the webhook `configuration`/`webhook` on the critical path, if it was
/// called: what a policy that replaces it is compared with.
fn replaced_call<'c>(calls: &'c [CallRecord], configuration: &str, webhook: &str) -> Option<&'c CallRecord> {
    calls.iter().find(|call| {
        call.round == 0
            && call
                .caller
                .hook()
                .is_some_and(|hook| hook.configuration == configuration && hook.name == webhook)
    })
}

/// The paths either side changed (policy: `ours`, webhook: `theirs`, each the object it saw
/// and the object it left) where the two results differ: the policy agrees with the webhook
/// when it writes what the webhook writes, even if an earlier webhook changed the object the
/// webhook was sent. Paths only, never values.
fn differing_changes(ours: (&Value, &Value), theirs: (&Value, &Value)) -> Vec<String> {
    let mut paths = Vec::new();
    changed_paths(&mut String::new(), Some(ours.0), Some(ours.1), &mut paths);
    changed_paths(&mut String::new(), Some(theirs.0), Some(theirs.1), &mut paths);
    paths.sort();
    paths.dedup();
    paths.retain(|path| ours.1.pointer(path) != theirs.1.pointer(path));
    paths
}

/// The JSON Pointers of the members that differ between `a` and `b`, depth first: objects
/// member by member, anything else (lists included) whole.
fn changed_paths(path: &mut String, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
    match (a, b) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                changed_paths(path, a.get(key), b.get(key), out);
                path.truncate(len);
            }
        }
        (a, b) if a != b => out.push(path.clone()),
        _ => {}
    }
}
