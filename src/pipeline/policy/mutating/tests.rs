//! One run of the mutating policies, and the two rounds of a request, against the behaviour of
//! upstream's plugin (k8s.io/apiserver `pkg/admission/plugin/policy/mutating`): the order of
//! mutations, errors by failurePolicy, the denial, reinvocation.

use serde_json::{json, Value};

use super::*;
use crate::config::policy::tests::found;
use crate::config::policy::Documents;
use crate::review::decode;

fn policy(name: &str, reinvocation: &str, failure: &str, mutations: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
                    "failurePolicy": failure, "reinvocationPolicy": reinvocation, "mutations": mutations}})
}

fn binding(name: &str, policy: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": {"policyName": policy}})
}

fn json_patch(expression: &str) -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}})
}

fn apply(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

/// Adds one to the `count` label.
fn counter() -> Value {
    json_patch("[JSONPatch{op: 'replace', path: '/metadata/labels/count', value: string(int(object.metadata.labels['count']) + 1)}]")
}

fn compile(policies: Vec<Value>, bindings: Vec<Value>) -> Policies {
    let documents = Documents {
        mutating_policies: policies.into_iter().map(found).collect(),
        mutating_bindings: bindings.into_iter().map(found).collect(),
        ..Documents::default()
    };
    let mut problems = Vec::new();
    let compiled = Policies::compile(documents, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    compiled.mutating
}

fn config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default", "labels": {"count": "0"}}, "data": {"a": "1"}})
}

fn review(operation: &str, object: &Value) -> IncomingReview {
    let request = json!({"uid": "1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "name": "cm", "namespace": "default", "operation": operation,
        "userInfo": {"username": "alice"}, "object": object});
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    decode::review(&serde_json::to_vec(&body).unwrap()).unwrap()
}

/// Runs round 0 and, when asked for, round 1, as the chain does without webhooks; returns the
/// object and the outcome, and how many rounds ran.
fn rounds(policies: &Policies, object: Value) -> (Value, Result<(), Status>, u8) {
    let review = review("CREATE", &object);
    let mut state = Rounds::default();
    let mut current = object;
    for round in 0..=1u8 {
        if round == 1 && !wants_round_1(&state) {
            return (current, Ok(()), 1);
        }
        let attributes = Attributes {
            review: &review,
            object: Some(&current),
            old_object: None,
            namespace: None,
            deadline: None,
        };
        let dispatch =
            dispatch(policies, &attributes, &NoLookups, &Schemas::default(), round, &|_| true, &mut state);
        if let Some(object) = dispatch.object {
            current = object;
        }
        if let Err(status) = dispatch.outcome {
            return (current, Err(status), round + 1);
        }
    }
    (current, Ok(()), 2)
}

/// One run (round 0) on a CREATE of [`config_map`], the policies applied or not.
fn once(policies: &Policies, applied: bool, rounds: &mut Rounds) -> Dispatch {
    let object = config_map();
    let review = review("CREATE", &object);
    let attributes = Attributes {
        review: &review,
        object: Some(&object),
        old_object: None,
        namespace: None,
        deadline: None,
    };
    dispatch(policies, &attributes, &NoLookups, &Schemas::default(), 0, &|_| applied, rounds)
}

#[test]
fn an_if_needed_policy_runs_again_after_its_own_change_and_a_never_policy_once() {
    for (reinvocation, count) in [("IfNeeded", "2"), ("Never", "1")] {
        let policies = compile(
            vec![policy("count", reinvocation, "Fail", json!([counter()]))],
            vec![binding("b", "count")],
        );
        let (object, outcome, ran) = rounds(&policies, config_map());
        assert!(outcome.is_ok(), "{outcome:?}");
        assert_eq!(ran, 2, "any successful mutation asks for round 1");
        assert_eq!(object["metadata"]["labels"]["count"], json!(count), "{reinvocation}");
    }
}

#[test]
fn mutations_run_in_order_each_on_the_object_the_previous_left_and_a_bound_twice_policy_twice() {
    let mutations = json!([
        json_patch("[JSONPatch{op: 'add', path: '/data/b', value: object.data.a + '2'}]"),
        apply("Object{data: {'c': object.data.b + '3'}}"),
        counter(),
    ]);
    let policies = compile(
        vec![policy("chain", "Never", "Fail", mutations)],
        vec![binding("b1", "chain"), binding("b2", "chain")],
    );
    let (object, outcome, _) = rounds(&policies, config_map());
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(object["data"], json!({"a": "1", "b": "12", "c": "123"}));
    assert_eq!(object["metadata"]["labels"]["count"], json!("2"));
}

#[test]
fn a_failing_mutation_lets_the_next_run_and_fail_denies_with_every_error_as_a_cause() {
    let mutations = json!([
        json_patch("[JSONPatch{op: 'replace', path: '/data/missing', value: 'x'}]"),
        json_patch("[JSONPatch{op: 'add', path: '/data/b', value: 'ok'}]"),
        json_patch("[JSONPatch{op: 'frob', path: '/data/c'}]"),
    ]);
    for failure in ["Fail", "Ignore"] {
        let policies =
            compile(vec![policy("p1", "Never", failure, mutations.clone())], vec![binding("b1", "p1")]);
        let dispatch = once(&policies, true, &mut Rounds::default());
        assert_eq!(dispatch.object.as_ref().map(|o| o["data"]["b"].clone()), Some(json!("ok")), "{failure}");
        let checks: Vec<&str> = dispatch.results[0].checks.iter().map(|c| c.error_type).collect();
        assert_eq!(checks, ["invalid_error", "no_error", "invalid_error"]);
        if failure == "Ignore" {
            assert!(dispatch.outcome.is_ok());
            assert!(dispatch.results[0].failed_open);
            continue;
        }
        let status = dispatch.outcome.unwrap_err();
        assert_eq!(status.code, Some(403));
        assert_eq!(status.reason.as_deref(), Some("Invalid"));
        assert_eq!(
            status.message.as_deref(),
            Some("policy 'p1' with binding 'b1' denied request: JSON Patch: replace operation does not apply: doc is missing key: /data/missing: missing value")
        );
        let details = status.details.unwrap();
        assert_eq!(details["name"], json!("cm"));
        assert_eq!(details["kind"], json!("configmaps"));
        assert!(details.get("group").is_none(), "no group for core");
        let causes = details["causes"].as_array().unwrap();
        assert_eq!(causes.len(), 2);
        assert_eq!(
            causes[1]["message"],
            json!("policy 'p1' with binding 'b1' denied request: JSON Patch: Unexpected kind: frob")
        );
    }
}

#[test]
fn a_failed_test_is_a_silent_no_op_that_still_asks_for_round_1() {
    let policies = compile(
        vec![policy("t", "Never", "Fail", json!([json_patch("[JSONPatch{op: 'add', path: '/data/x', value: 'y'}, JSONPatch{op: 'test', path: '/data/a', value: 'nope'}]")]))],
        vec![binding("b", "t")],
    );
    let (object, outcome, ran) = rounds(&policies, config_map());
    assert!(outcome.is_ok());
    assert_eq!(object, config_map(), "the add before the failed test is undone");
    assert_eq!(ran, 2);
}

#[test]
fn a_delete_is_never_given_to_the_mutating_policies() {
    let policies =
        compile(vec![policy("count", "Never", "Fail", json!([counter()]))], vec![binding("b", "count")]);
    let review = review("DELETE", &Value::Null);
    let attributes =
        Attributes { review: &review, object: None, old_object: None, namespace: None, deadline: None };
    let dispatch = dispatch(
        &policies,
        &attributes,
        &NoLookups,
        &Schemas::default(),
        0,
        &|_| true,
        &mut Rounds::default(),
    );
    assert!(dispatch.outcome.is_ok() && dispatch.object.is_none());
    assert!(!dispatch.results[0].matched);
}

#[test]
fn a_policy_not_applied_leaves_the_object_and_keeps_what_it_would_have_made() {
    let policies =
        compile(vec![policy("count", "IfNeeded", "Fail", json!([counter()]))], vec![binding("b", "count")]);
    let mut state = Rounds::default();
    let dispatch = once(&policies, false, &mut state);
    assert!(dispatch.object.is_none());
    let (before, after) = dispatch.results[0].would.clone().unwrap();
    assert_eq!(before, config_map());
    assert_eq!(after["metadata"]["labels"]["count"], json!("1"));
    assert!(!wants_round_1(&state), "a policy not applied asks for nothing");
}
