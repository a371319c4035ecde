//! Step §4.0.7: a webhook's matchConditions (docs/semantics.md §4.5), evaluated once its rules
//! and selectors let it through.
//!
//! CEL values are made once per review and object version, not once per condition or webhook:
//! [`State`] keeps `request` and `oldObject` for the whole review and `object` until a patch
//! changes it (the mutating chain calls [`State::object_changed`]), so the conditions of every
//! webhook of a phase share one conversion. Only the variables some condition of the webhook
//! reads are converted at all.

use serde_json::{json, Value};

use super::evaluations::{self, Unfinished};
use super::matching::Skip;
use super::object::ObjectState;
use super::verdict;
use crate::cel::authorizer;
use crate::cel::{self, json_value, request_value, Condition, Outcome, Variables};
use crate::cluster::Cluster;
use crate::config::compile::{FailurePolicy, Hook, MatchCondition};
use crate::explain::Phase;
use crate::review::decode::IncomingReview;
use crate::review::Status;
use crate::telemetry::names;

/// The CEL variables of one review.
#[derive(Default)]
pub(crate) struct State {
    variables: Variables,
    /// The review's authorizer, made when a condition first checks something.
    authorizer: Option<authorizer::Scope>,
    /// Counts the object's changes; `variables.object` is of version `object_converted`.
    object_version: u64,
    object_converted: Option<u64>,
}

impl State {
    /// A patch changed the object: the next condition that reads `object` converts it again.
    pub(crate) fn object_changed(&mut self) {
        self.object_version += 1;
    }
}

/// `Ok(None)`: call the webhook; `Ok(Some(skip))`: a condition is false, or evaluation failed
/// under `failurePolicy: Ignore`; `Err`: it failed under `Fail`, and so does the request.
pub(crate) async fn evaluate(
    hook: &Hook,
    review: &IncomingReview,
    object: &mut ObjectState<'_>,
    state: &mut State,
    cluster: Option<&Cluster>,
    phase: Phase,
    deadline: Option<tokio::time::Instant>,
) -> Result<Option<Skip>, Status> {
    if hook.match_conditions.is_empty() {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let uses = hook.condition_uses;
    if uses.object && state.object_converted != Some(state.object_version) {
        state.variables.object = Some(json_value(object.tree()));
        state.object_converted = Some(state.object_version);
    }
    if uses.old_object && state.variables.old_object.is_none() {
        state.variables.old_object = Some(old_object_value(object.old_tree()));
    }
    if uses.request && state.variables.request.is_none() {
        state.variables.request = Some(request_value(&request(review)));
    }
    let scope = match (uses.authorizer, cluster) {
        (true, Some(cluster)) => Some(state.authorizer.get_or_insert_with(|| scope(cluster, review)).clone()),
        _ => None,
    };
    let outcome = off_thread(hook, scope, &state.variables, deadline).await;
    record(hook, review, phase, &outcome, started.elapsed());
    match outcome {
        Outcome::Match => Ok(None),
        Outcome::False { condition } => Ok(Some(Skip::ConditionFalse(condition))),
        Outcome::Error { message, conditions } => match hook.failure_policy {
            FailurePolicy::Ignore => Ok(Some(Skip::ConditionError { message, conditions })),
            FailurePolicy::Fail => {
                // `attr.GetResource()`: the resource as requested.
                let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
                Err(verdict::forbidden(&resource.group, &resource.resource, &review.request.name, &message))
            }
        },
    }
}

/// The API server's match-condition metrics (docs/semantics.md §15.2): an exclusion when a
/// condition is false, one error per failing condition, and the evaluation time of both (not
/// of a clean match). `type` is spelt `admit`/`validate` for exclusions and
/// `admit`/`validating` for the others, as upstream.
fn record(hook: &Hook, review: &IncomingReview, phase: Phase, outcome: &Outcome, took: std::time::Duration) {
    let (errors_type, exclusions_type) = match phase {
        Phase::Mutating => ("admit", "admit"),
        Phase::Validating => ("validating", "validate"),
    };
    let name = hook.name.clone();
    let operation = review.operation().as_str();
    match outcome {
        Outcome::Match => return,
        Outcome::False { .. } => {
            metrics::counter!(names::MATCH_CONDITION_EXCLUSIONS,
                "name" => name.clone(), "kind" => "webhook", "type" => exclusions_type, "operation" => operation)
            .increment(1);
        }
        Outcome::Error { conditions, .. } => {
            metrics::counter!(names::MATCH_CONDITION_ERRORS,
                "name" => name.clone(), "kind" => "webhook", "type" => errors_type, "operation" => operation)
            .increment(conditions.len().max(1) as u64);
        }
    }
    metrics::histogram!(names::MATCH_CONDITION_DURATION,
        "name" => name, "kind" => "webhook", "type" => errors_type, "operation" => operation)
    .record(took.as_secs_f64());
}

/// The conditions as the evaluator takes them.
fn conditions_of(compiled: &[MatchCondition]) -> Vec<Condition<'_>> {
    compiled
        .iter()
        .map(|c| Condition { name: &c.name, expression: &c.expression, program: &c.program })
        .collect()
}

/// Evaluates `hook`'s conditions on an evaluation thread ([`evaluations`]), so that no review
/// waits behind another's CEL and the authorizer's checks, which block on SubjectAccessReviews,
/// block no serving thread. An evaluation that found no slot before the deadline, or whose
/// thread ended without a result, is an error: never a match by default.
async fn off_thread(
    hook: &Hook,
    scope: Option<authorizer::Scope>,
    variables: &Variables,
    deadline: Option<tokio::time::Instant>,
) -> Outcome {
    let owned = std::sync::Arc::clone(&hook.match_conditions);
    // Shared, not copied: the converted values are reference counted.
    let shared = variables.clone();
    let until = deadline.map(tokio::time::Instant::into_std);
    let evaluated = evaluations::run(deadline, move || {
        authorizer::with_scope(scope, || cel::evaluate(&conditions_of(&owned), &shared, until))
    })
    .await;
    match evaluated {
        Ok(outcome) => outcome,
        Err(Unfinished::NoSlot) => Outcome::Error {
            message: format!("{}, no further conditions will be run", cel::DEADLINE_PASSED),
            conditions: Vec::new(),
        },
        Err(Unfinished::Ended) => Outcome::Error {
            message: "internal error: the evaluation of the match conditions did not finish".to_owned(),
            conditions: Vec::new(),
        },
    }
}

/// `oldObject` as CEL sees it, in webhook matchConditions and policies alike: the request's old
/// object ([`ObjectState::old_tree`], parsed once per review), null when it has none.
pub(crate) fn old_object_value(old: Option<&Value>) -> cel::CelValue {
    json_value(old)
}

/// The authorizer scope of `review`: SubjectAccessReviews as its user, `requestResource` its
/// resource.
pub(crate) fn scope(cluster: &Cluster, review: &IncomingReview) -> authorizer::Scope {
    let user = serde_json::from_str(review.user_info().get()).unwrap_or_default();
    let r = &review.request;
    let resource = r.request_resource.as_ref().unwrap_or(review.resource());
    authorizer::Scope {
        authorizer: std::sync::Arc::new(cluster.authorizer(user)),
        request_resource: authorizer::ResourceTarget {
            group: resource.group.clone(),
            resource: resource.resource.clone(),
            subresource: r.request_sub_resource.clone().unwrap_or_else(|| r.sub_resource.clone()),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            ..authorizer::ResourceTarget::default()
        },
    }
}

/// The `request` variable: the AdmissionRequest as `CreateAdmissionRequest` (plugin/cel/
/// condition.go) builds it and CEL sees it, field by field as its JSON encoding (`omitempty`
/// fields absent when empty), without `uid`, `object` and `oldObject`.
pub(crate) fn request(review: &IncomingReview) -> Value {
    let r = &review.request;
    let (kind, resource) = (review.kind(), review.resource());
    let mut request = json!({
        "kind": to_json(kind),
        "resource": to_json(resource),
        "requestKind": to_json(r.request_kind.as_ref().unwrap_or(kind)),
        "requestResource": to_json(r.request_resource.as_ref().unwrap_or(resource)),
        "operation": review.operation().as_str(),
        "userInfo": user_info(review),
        "dryRun": review.dry_run(),
        "options": r.options.value.as_deref().and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok()),
    });
    let request_sub_resource = r.request_sub_resource.as_deref().unwrap_or(&r.sub_resource);
    for (key, value) in [
        ("subResource", r.sub_resource.as_str()),
        ("requestSubResource", request_sub_resource),
        ("name", r.name.as_str()),
        ("namespace", r.namespace.as_str()),
    ] {
        if !value.is_empty() {
            request[key] = json!(value);
        }
    }
    request
}

/// `userInfo` with its `omitempty` fields (username, uid, groups, extra) absent when empty.
fn user_info(review: &IncomingReview) -> Value {
    let mut info: Value = serde_json::from_str(review.user_info().get()).unwrap_or_else(|_| json!({}));
    if let Value::Object(fields) = &mut info {
        fields.retain(|_, v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        });
    }
    info
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allows every check, counting them.
    #[derive(Default)]
    struct Checks(std::sync::atomic::AtomicUsize);

    impl authorizer::Authorizer for Checks {
        fn authorize(&self, _: &authorizer::Check) -> authorizer::Decision {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            authorizer::Decision { allowed: true, ..Default::default() }
        }
    }

    /// On a single-threaded runtime, as a serving thread's (where `block_in_place` panics), the
    /// authorizer is asked and the review's variables come back for the next webhook.
    #[tokio::test(flavor = "current_thread")]
    async fn authorizer_conditions_run_off_a_serving_thread_and_lend_the_variables_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.yaml");
        std::fs::write(
            &path,
            r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "authz"}, "webhooks": [{"name": "authz.example.com",
              "clientConfig": {"url": "https://127.0.0.1:1/"}, "admissionReviewVersions": ["v1"],
              "sideEffects": "None",
              "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
              "matchConditions": [{"name": "may-delete",
                "expression": "authorizer.group('').resource('pods').check('delete').allowed() && request.name == 'web'"}]}]}"#,
        )
        .unwrap();
        let snapshot =
            crate::config::compile::load(&[path], &crate::upstream::Clients::default(), 1).unwrap();
        let checks = std::sync::Arc::new(Checks::default());
        let scope = authorizer::Scope {
            authorizer: checks.clone(),
            request_resource: authorizer::ResourceTarget::default(),
        };
        let variables =
            Variables { request: Some(request_value(&json!({"name": "web"}))), ..Variables::default() };

        let outcome = off_thread(&snapshot.validating[0], Some(scope), &variables, None).await;
        assert_eq!(outcome, Outcome::Match);
        assert_eq!(checks.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(variables.request.is_some(), "the variables are lent back");
    }

    #[test]
    fn the_request_variable_is_the_admission_request_as_cel_sees_it() {
        let review = crate::review::decode::review(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"u1","kind":{"group":"apps","version":"v1","kind":"Deployment"},
            "resource":{"group":"apps","version":"v1","resource":"deployments"},"subResource":"scale",
            "name":"web","namespace":"prod","operation":"UPDATE",
            "userInfo":{"username":"alice","groups":[],"extra":{}},
            "object":{"spec":{}},"oldObject":{"spec":{}},"dryRun":true,
            "options":{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}}}"#,
        )
        .unwrap();
        assert_eq!(
            request(&review),
            json!({
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "subResource": "scale",
                "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "requestSubResource": "scale",
                "name": "web", "namespace": "prod", "operation": "UPDATE",
                "userInfo": {"username": "alice"},
                "dryRun": true,
                "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
            })
        );
    }
}
