//! Loading MutatingAdmissionPolicies and their bindings: the rules only the mutating kind has
//! (`kubernetes/kubernetes` `pkg/apis/admissionregistration/validation/validation.go`,
//! `ValidateMutatingAdmissionPolicy`), through the code both kinds share.

use serde_json::{json, Value};

use super::tests::{described, found, pods_rule};
use super::*;

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": spec})
}

fn label_patch() -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression":
        "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b'), value: 'x'}]"}})
}

fn compile(policies: Vec<Value>, bindings: Vec<Value>, others: Vec<Value>) -> (Compiled, Vec<Problem>) {
    let documents = Documents {
        mutating_policies: policies.into_iter().map(found).collect(),
        mutating_bindings: bindings.into_iter().map(found).collect(),
        others: others.into_iter().map(found).collect(),
        ..Documents::default()
    };
    let mut problems = Vec::new();
    let compiled = Policies::compile(documents, &mut problems);
    (compiled, problems)
}

#[test]
fn a_mutating_policy_compiles_with_its_mutations_bindings_and_params_in_every_version() {
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let mut object = policy(
            "label",
            json!({"matchConstraints": pods_rule(), "reinvocationPolicy": "IfNeeded",
                   "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                   "variables": [{"name": "v", "expression": "{'a': 'b'}"}],
                   "mutations": [label_patch(), {"patchType": "ApplyConfiguration", "applyConfiguration":
                       {"expression": "Object{metadata: Object.metadata{labels: variables.v}}"}}]}),
        );
        object["apiVersion"] = json!(format!("admissionregistration.k8s.io/{version}"));
        let (compiled, problems) = compile(
            vec![object],
            vec![binding(
                "label-b",
                json!({"policyName": "label", "paramRef": {"name": "p", "namespace": "default", "parameterNotFoundAction": "Deny"}}),
            )],
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": "default"}}),
            ],
        );
        assert_eq!(described(&problems), Vec::<(String, String, String)>::new(), "{version}");
        assert!(compiled.validating.is_empty());
        let [policy] = &compiled.mutating.iter().collect::<Vec<_>>()[..] else { panic!("one policy") };
        assert_eq!(policy.kind, PolicyKind::Mutating);
        assert_eq!(policy.reinvocation, ReinvocationPolicy::IfNeeded);
        let types: Vec<cel::PatchType> = policy.mutations.iter().map(|m| m.patch_type).collect();
        assert_eq!(types, [cel::PatchType::JsonPatch, cel::PatchType::ApplyConfiguration]);
        assert!(policy.mutations.iter().all(|m| m.expression.as_ref().is_some_and(|e| e.program.is_ok())));
        assert_eq!(policy.bindings.len(), 1);
        assert_eq!(policy.params.iter().count(), 1);
    }
}

#[test]
fn every_problem_of_a_mutating_policy_is_named_with_upstreams_texts() {
    let (_, problems) = compile(
        vec![policy(
            "bad",
            json!({"matchConstraints": {"resourceRules": [{"operations": ["CREATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                   "validations": [{"expression": "true"}],
                   "mutations": [
                       {"patchType": "JSONPatch"},
                       {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}, "jsonPatch": {"expression": "[]"}},
                       {"patchType": "Merge"},
                       {},
                       {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                       {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "  "}},
                       {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "[1]"}},
                   ],
                   "reinvocationPolicy": "Sometimes"}),
        )],
        vec![binding(
            "b",
            json!({"policyName": "bad", "validationActions": ["Deny"],
            "matchResources": {"resourceRules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}}),
        )],
        vec![],
    );
    let p = "MutatingAdmissionPolicy \"bad\"";
    let b = "MutatingAdmissionPolicyBinding \"b\"";
    let expected = [
        // What reading finds (the other kind's fields) comes first, then each object's checks.
        (p, "spec.validations", "unknown field \"validations\""),
        (b, "spec.validationActions", "unknown field \"validationActions\""),
        (
            p,
            "spec.matchConstraints.resourceRules.operations",
            "Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
        ),
        (p, "spec.mutations[0].jsonPatch", "Required value: must be specified when patchType is JSONPatch"),
        (
            p,
            "spec.mutations[1].jsonPatch",
            "Invalid value: \"{jsonPatch}\": must not be specified when patchType is ApplyConfiguration",
        ),
        (
            p,
            "spec.mutations[2].patchType",
            "Unsupported value: \"Merge\": supported values: \"ApplyConfiguration\", \"JSONPatch\"",
        ),
        (p, "spec.mutations[3].patchType", "Required value"),
        (p, "spec.mutations[5].applyConfiguration.expression", "Required value"),
        (
            p,
            "spec.reinvocationPolicy",
            "Unsupported value: \"Sometimes\": supported values: \"Never\", \"IfNeeded\"",
        ),
        (
            p,
            "spec.mutations[4].jsonPatch.expression",
            "Invalid value: \"[]\": must evaluate to list(JSONPatch) but got list(dyn)",
        ),
        (
            p,
            "spec.mutations[6].applyConfiguration.expression",
            "Invalid value: \"[1]\": must evaluate to Object but got list(int)",
        ),
        (
            b,
            "spec.matchResources.resourceRules.operations",
            "Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
        ),
    ];
    let expected: Vec<(String, String, String)> =
        expected.iter().map(|(o, f, m)| (o.to_string(), f.to_string(), m.to_string())).collect();
    assert_eq!(described(&problems), expected);
}

#[test]
fn the_mutation_types_exist_only_in_mutations_and_a_missing_reinvocation_policy_is_refused() {
    let (_, problems) = compile(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(),
                   "matchConditions": [{"name": "c", "expression": "size([JSONPatch{}]) > 0"}],
                   "mutations": [label_patch()]}),
        )],
        vec![],
        vec![],
    );
    let described = described(&problems);
    assert_eq!(described.len(), 2, "{described:?}");
    assert_eq!(described[0].1, "spec.reinvocationPolicy");
    assert_eq!(described[1].1, "spec.matchConditions[0].expression");
    assert!(described[1].2.contains("undeclared reference to 'JSONPatch'"), "{}", described[1].2);
}
