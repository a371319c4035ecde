//! Loading, validation and compilation of policies: each table names the rule it checks
//! (`kubernetes/kubernetes` `pkg/apis/admissionregistration/validation/validation.go`).

use serde_json::{json, Value};

use super::*;

pub(crate) fn found(value: Value) -> Found {
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    Found { file: PathBuf::from("policies.yaml"), object: format!("{kind} \"{name}\""), value }
}

pub(crate) fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec})
}

pub(crate) fn binding(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": spec})
}

pub(crate) fn pods_rule() -> Value {
    json!({"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]})
}

pub(crate) fn compile(
    policies: Vec<Value>,
    bindings: Vec<Value>,
    others: Vec<Value>,
) -> (Policies, Vec<Problem>) {
    let documents = Documents {
        policies: policies.into_iter().map(found).collect(),
        bindings: bindings.into_iter().map(found).collect(),
        others: others.into_iter().map(found).collect(),
        ..Documents::default()
    };
    let mut problems = Vec::new();
    let policies = Policies::compile(documents, &mut problems).validating;
    (policies, problems)
}

/// (object, field, message) of each problem.
pub(crate) fn described(problems: &[Problem]) -> Vec<(String, String, String)> {
    problems
        .iter()
        .map(|p| {
            (p.object.clone().unwrap_or_default(), p.field.clone().unwrap_or_default(), p.message.clone())
        })
        .collect()
}

#[test]
fn a_valid_set_compiles_in_evaluation_order_with_its_bindings_params_mode_and_replaces() {
    let spec = json!({"matchConstraints": pods_rule(), "validations": [{"expression": "true"}]});
    let mut with_params = spec.clone();
    with_params["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let mut annotated = policy("b-policy", with_params);
    annotated["metadata"]["annotations"] = json!({
        "admission-gateway/mode": "canary", "admission-gateway/canary-percent": "10",
        "admission-gateway/replaces": "fleet/check.example.com"});
    let (policies, problems) = compile(
        vec![annotated, policy("a-policy", spec.clone()), policy("z.static.k8s.io", spec)],
        vec![
            binding("b2", json!({"policyName": "b-policy", "validationActions": ["Deny"]})),
            binding(
                "b1",
                json!({"policyName": "b-policy", "validationActions": ["Warn", "Audit"],
                                 "paramRef": {"selector": {}, "parameterNotFoundAction": "Deny"}}),
            ),
        ],
        vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "b"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "b"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "namespace": "a"}}),
        ],
    );
    assert_eq!(described(&problems), Vec::<(String, String, String)>::new());
    let names: Vec<&str> = policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["z.static.k8s.io", "a-policy", "b-policy"]);
    let b = policies.iter().nth(2).unwrap();
    assert_eq!(b.mode, Mode::Canary(10));
    assert_eq!(
        b.replaces,
        Some(Replaces { configuration: "fleet".into(), webhook: "check.example.com".into() })
    );
    let bindings: Vec<&str> = b.bindings.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(bindings, ["b1", "b2"]);
    assert_eq!(b.bindings[0].validation_actions, [Action::Warn, Action::Audit]);
    let params: Vec<(&str, &str)> =
        b.params.iter().map(|p| (p.namespace.as_str(), p.name.as_str())).collect();
    assert_eq!(params, [("a", "z"), ("b", "x"), ("b", "y")]);
    assert_eq!(b.rules().len(), 1);
    assert_eq!(b.rules()[0].resources, ["pods"]);
    assert!(b.match_constraints.as_ref().unwrap().equivalent, "matchPolicy defaults to Equivalent");
    assert_eq!(b.failure_policy, FailurePolicy::Fail, "failurePolicy defaults to Fail");
}

#[test]
fn every_validation_problem_is_listed_with_its_field() {
    let (_, problems) = compile(
        vec![policy(
            "Bad_Name",
            json!({
                "failurePolicy": "Sometimes",
                "paramKind": {"kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"], "resourceNames": ["a/b", "x", "x"]}],
                                     "matchPolicy": "Fuzzy"},
                "matchConditions": [{"name": "c", "expression": "object.x"}, {"name": "c", "expression": "variables.a == 1"}],
                "variables": [{"name": "a", "expression": "1 +"}, {"name": "in", "expression": "1"}],
                "validations": [
                    {"expression": "true", "message": "two\nlines", "reason": "Teapot"},
                    {"expression": "params.x == 1", "messageExpression": "authorizer.path('/').check('get').reason() + 1"},
                    {"expression": "  ", "messageExpression": " "},
                ],
                "auditAnnotations": [{"key": "k", "valueExpression": "1"}, {"key": "k", "valueExpression": "'v'"}],
            }),
        )],
        vec![binding(
            "bind",
            json!({"policyName": "p", "validationActions": ["Deny", "Warn", "Deny", "Log"],
                   "paramRef": {"name": "a", "selector": {}}}),
        )],
        vec![],
    );
    let object = "ValidatingAdmissionPolicy \"Bad_Name\"";
    let binding = "ValidatingAdmissionPolicyBinding \"bind\"";
    let got = described(&problems);
    let expect = |object: &str, field: &str, start: &str| {
        assert!(
            got.iter().any(|(o, f, m)| o == object && f == field && m.starts_with(start)),
            "no problem at {field} starting {start:?} in {got:#?}"
        );
    };
    expect(object, "metadata.name", "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain");
    expect(
        object,
        "spec.failurePolicy",
        "Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
    );
    expect(object, "spec.paramKind.apiVersion", "Required value");
    expect(object, "spec.matchConstraints.matchPolicy", "Unsupported value: \"Fuzzy\"");
    expect(
        object,
        "spec.matchConstraints.resourceRules[0].resourceNames[0]",
        "Invalid value: \"a/b\": may not contain '/'",
    );
    expect(object, "spec.matchConstraints.resourceRules[0].resourceNames[2]", "Duplicate value: \"x\"");
    expect(object, "spec.matchConditions[1].name", "Duplicate value: \"c\"");
    expect(
        object,
        "spec.matchConditions[0].expression",
        "Invalid value: \"object.x\": must evaluate to bool but got dyn",
    );
    expect(
        object,
        "spec.matchConditions[1].expression",
        "Invalid value: \"variables.a == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables'",
    );
    expect(object, "spec.variables[0].expression", "Invalid value: \"1 +\": compilation failed:");
    expect(object, "spec.variables[1].name", "Invalid value: \"in\": name is not a valid CEL identifier");
    expect(
        object,
        "spec.validations[0].message",
        "Invalid value: \"two\\nlines\": message must not contain line breaks",
    );
    expect(object, "spec.validations[0].reason", "Unsupported value: \"Teapot\"");
    expect(
        object,
        "spec.validations[1].messageExpression",
        "Invalid value: \"authorizer.path('/').check('get').reason() + 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer'",
    );
    expect(object, "spec.validations[2].expression", "Required value: expression is not specified");
    expect(
        object,
        "spec.validations[2].messageExpression",
        "Invalid value: \" \": must be non-empty if specified",
    );
    expect(
        object,
        "spec.auditAnnotations[0].valueExpression",
        "Invalid value: \"1\": must evaluate to one of [string null_type] but got int",
    );
    expect(object, "spec.auditAnnotations[1].key", "Duplicate value: \"k\"");
    expect(binding, "spec.validationActions[2]", "Duplicate value: \"Deny\"");
    expect(
        binding,
        "spec.validationActions[3]",
        "Unsupported value: \"Log\": supported values: \"Audit\", \"Deny\", \"Warn\"",
    );
    expect(
        binding,
        "spec.validationActions",
        "Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Log\"]: must not contain both Deny and Warn",
    );
    expect(binding, "spec.paramRef.name", "Forbidden: name and selector are mutually exclusive");
    expect(binding, "spec.paramRef.parameterNotFoundAction", "Required value");
    // `params` is declared: no problem for validations[1].expression.
    assert!(!got.iter().any(|(_, f, _)| f == "spec.validations[1].expression"), "{got:#?}");
}

#[test]
fn required_parts_missing() {
    let (_, problems) = compile(vec![policy("p", json!({}))], vec![binding("b", json!({}))], vec![]);
    assert_eq!(
        described(&problems),
        [
            (
                "ValidatingAdmissionPolicy \"p\"".into(),
                "spec.matchConstraints".into(),
                "Required value".into()
            ),
            (
                "ValidatingAdmissionPolicy \"p\"".into(),
                "spec.validations".into(),
                "Required value: validations or auditAnnotations must contain at least one item".into()
            ),
            (
                "ValidatingAdmissionPolicy \"p\"".into(),
                "spec.auditAnnotations".into(),
                "Required value: validations or auditAnnotations must contain at least one item".into()
            ),
            (
                "ValidatingAdmissionPolicyBinding \"b\"".into(),
                "spec.policyName".into(),
                "Required value".into()
            ),
            (
                "ValidatingAdmissionPolicyBinding \"b\"".into(),
                "spec.validationActions".into(),
                "Required value: at least one validation action is required".into()
            ),
        ]
    );
}

#[test]
fn params_without_param_kind_do_not_compile_and_unknown_fields_are_named() {
    let mut typo = policy(
        "p",
        json!({"matchConstraints": pods_rule(), "validations": [{"expression": "params == null"}]}),
    );
    typo["spec"]["validation"] = json!([]);
    let (_, problems) = compile(
        vec![
            policy(
                "q",
                json!({"matchConstraints": pods_rule(), "validations": [{"expression": "params == null"}]}),
            ),
            typo,
        ],
        vec![],
        vec![],
    );
    let got = described(&problems);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got.iter().any(|(o, f, m)| o == "ValidatingAdmissionPolicy \"q\""
            && f == "spec.validations[0].expression"
            && m.contains("undeclared reference to 'params'")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|(o, f, m)| o == "ValidatingAdmissionPolicy \"p\""
            && f == "spec.validation"
            && m.starts_with("unknown field \"validation\"")),
        "{got:#?}"
    );
}

fn config_map(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}})
}

#[test]
fn params_are_looked_up_by_namespace_and_name_and_converted_once() {
    let spec = json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "true"}]});
    let objects = vec![config_map("b", "y"), config_map("a", "x"), config_map("b", "x")];
    let (policies, problems) = compile(vec![policy("p", spec)], vec![], objects);
    assert!(problems.is_empty(), "{problems:?}");
    let params = &policies.iter().next().unwrap().params;
    let names = |found: Vec<Arc<Param>>| -> Vec<(String, String)> {
        found.iter().map(|p| (p.namespace.clone(), p.name.clone())).collect()
    };
    let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(n, m)| (n.to_string(), m.to_string())).collect()
    };
    assert_eq!(names(params.select("b", Some("x"))), owned(&[("b", "x")]));
    assert_eq!(names(params.select("b", None)), owned(&[("b", "x"), ("b", "y")]));
    assert_eq!(names(params.select("b", Some("z"))), owned(&[]));
    assert_eq!(names(params.select("", None)), owned(&[]), "the cluster scope holds none of them");

    let param = &params.select("a", Some("x"))[0];
    let first = param.cel("v1", "ConfigMap");
    assert!(first.shares(&param.cel("v1", "ConfigMap")), "converted once, then shared");
    assert!(first.shares(&params.select("a", Some("x"))[0].cel("v1", "ConfigMap")));
}

#[test]
fn params_follow_watch_events_and_duplicates_are_refused() {
    let mut set = ParamSet::default();
    assert!(set.insert(Param::of_object(Arc::new(config_map("a", "x")))));
    assert!(!set.insert(Param::of_object(Arc::new(config_map("a", "x")))), "replaced, as a watch's update");
    set.remove("a", "x");
    assert!(set.select("a", None).is_empty() && set.is_empty());

    let spec = json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "true"}]});
    let twice = vec![config_map("a", "x"), config_map("a", "x")];
    let (_, problems) = compile(vec![policy("p", spec)], vec![], twice);
    let problems: Vec<(String, String)> =
        described(&problems).into_iter().map(|(_, field, message)| (field, message)).collect();
    assert_eq!(problems, [("metadata.name".to_owned(), "Duplicate value: \"a/x\"".to_owned())]);
}

#[test]
fn objects_no_param_kind_names_are_refused() {
    let (_, problems) = compile(
        vec![],
        vec![],
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})],
    );
    assert_eq!(
        problems[0].message,
        "unsupported object v1, Kind=ConfigMap: expected admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, ValidatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy or MutatingAdmissionPolicyBinding, v1 Namespace, an object a policy's paramKind names, admission-gateway/v1alpha1 GatewayConfig, or a v1 List of them"
    );
}

#[test]
fn static_policies_and_bindings_follow_the_manifest_rules() {
    let spec = json!({"matchConstraints": pods_rule(), "validations": [{"expression": "true"}],
                      "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
    let (_, problems) = compile(
        vec![policy("p.static.k8s.io", spec.clone()), policy("api", spec)],
        vec![
            binding(
                "b.static.k8s.io",
                json!({"policyName": "api", "validationActions": ["Deny"],
                                              "paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}}),
            ),
            binding(
                "c.static.k8s.io",
                json!({"policyName": "p.static.k8s.io", "validationActions": ["Deny"]}),
            ),
        ],
        vec![],
    );
    let fields: Vec<(String, String)> = described(&problems).into_iter().map(|(o, f, _)| (o, f)).collect();
    assert_eq!(
        fields,
        [
            ("ValidatingAdmissionPolicy \"p.static.k8s.io\"".into(), "spec.paramKind".into()),
            ("ValidatingAdmissionPolicyBinding \"b.static.k8s.io\"".into(), "spec.paramRef".into()),
            ("ValidatingAdmissionPolicyBinding \"b.static.k8s.io\"".into(), "spec.policyName".into()),
        ]
    );
}

#[test]
fn gateway_annotations_are_checked() {
    let mut p =
        policy("p", json!({"matchConstraints": pods_rule(), "validations": [{"expression": "true"}]}));
    p["metadata"]["annotations"] =
        json!({"admission-gateway/mode": "loud", "admission-gateway/replaces": "fleet"});
    let (_, problems) = compile(vec![p], vec![], vec![]);
    let fields: Vec<String> = problems.iter().filter_map(|p| p.field.clone()).collect();
    assert_eq!(
        fields,
        ["metadata.annotations[admission-gateway/mode]", "metadata.annotations[admission-gateway/replaces]"]
    );
}

#[test]
fn param_kinds_audit_keys_and_param_refs_are_checked_as_upstream_words_it() {
    let long = format!("'{}'", "x".repeat(5200));
    let (_, problems) = compile(
        vec![policy(
            "p",
            json!({
                "paramKind": {"apiVersion": "Example.com/v1", "kind": "Bad_Kind"},
                "matchConstraints": pods_rule(),
                "auditAnnotations": [{"key": "bad key", "valueExpression": "'v'"}, {"key": "long", "valueExpression": long}],
            }),
        )],
        vec![binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Deny"],
                   "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Maybe"}}),
        )],
        vec![],
    );
    let got = described(&problems);
    let fields: Vec<(&str, &str)> = got.iter().map(|(_, f, m)| (f.as_str(), m.as_str())).collect();
    let has = |field: &str, start: &str| {
        assert!(
            fields.iter().any(|(f, m)| *f == field && m.starts_with(start)),
            "{field} {start:?} not in {fields:#?}"
        );
    };
    has("spec.paramKind.apiVersion", "Invalid value: \"Example.com\": a lowercase RFC 1123 subdomain");
    has(
        "spec.paramKind.kind",
        "Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label",
    );
    has("spec.auditAnnotations[0].key", "Invalid value: \"p/bad key\": name part must consist of");
    has("spec.auditAnnotations[1].valueExpression", "Required value: must not exceed 5120 bytes in length");
    has("spec.paramRef.name", "Forbidden: name and selector are mutually exclusive");
    has("spec.paramRef.selector", "Forbidden: name and selector are mutually exclusive");
    has(
        "spec.paramRef.parameterNotFoundAction",
        "Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
    );
}

#[test]
fn compiled_policies_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Policies>();
}

/// The names of the candidate policies for a request on `resource` of `group`.
fn candidates(policies: &Policies, group: &str, resource: &str) -> Vec<String> {
    policies.candidates(group, resource).map(|(_, policy)| policy.name.clone()).collect()
}

/// `matchConstraints` of one rule: `groups`/`versions`/`resources` for CREATE, under `policy`.
fn constraints(groups: &[&str], versions: &[&str], resources: &[&str], policy: &str) -> Value {
    json!({"matchPolicy": policy, "resourceRules": [{"operations": ["CREATE"], "apiGroups": groups,
        "apiVersions": versions, "resources": resources}]})
}

#[test]
fn the_index_makes_candidates_of_the_policies_whose_rules_can_match_a_resource() {
    let spec = |constraints: Value| json!({"matchConstraints": constraints, "validations": [{"expression": "true"}]});
    let named = [
        ("pods", spec(constraints(&[""], &["v1"], &["pods/*"], "Exact"))),
        ("any-resource-of-apps", spec(constraints(&["apps"], &["*"], &["*"], "Exact"))),
        ("any-group-deployments", spec(constraints(&["*"], &["*"], &["deployments"], "Exact"))),
        (
            "extensions-equivalent",
            spec(constraints(&["extensions"], &["v1beta1"], &["deployments"], "Equivalent")),
        ),
        ("extensions-exact", spec(constraints(&["extensions"], &["v1beta1"], &["deployments"], "Exact"))),
        ("extensions-all-equivalent", spec(constraints(&["extensions"], &["*"], &["*"], "Equivalent"))),
        // Refused at load, and still evaluated as upstream would: a configuration error for
        // every request.
        ("no-constraints", json!({"validations": [{"expression": "true"}]})),
        // An exclusion's Equivalent search can fail a request, so it counts.
        (
            "excludes-apps-deployments",
            spec(json!({"matchPolicy": "Equivalent",
                "resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "excludeResourceRules": [{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/*"]}]})),
        ),
    ];
    // A policy without bindings is never evaluated, so never a candidate.
    let unbound = policy("unbound", spec(constraints(&["*"], &["*"], &["*"], "Exact")));
    let policies = named.iter().map(|(name, spec)| policy(name, spec.clone())).chain([unbound]).collect();
    let bindings = named
        .iter()
        .map(|(name, _)| {
            binding(&format!("{name}-binding"), json!({"policyName": name, "validationActions": ["Deny"]}))
        })
        .collect();
    let (policies, _problems) = compile(policies, bindings, vec![]);

    assert_eq!(candidates(&policies, "", "pods"), ["no-constraints", "pods"]);
    assert_eq!(candidates(&policies, "", "configmaps"), ["excludes-apps-deployments", "no-constraints"]);
    assert_eq!(
        candidates(&policies, "apps", "deployments"),
        [
            "any-group-deployments",
            "any-resource-of-apps",
            "excludes-apps-deployments",
            "extensions-all-equivalent",
            "extensions-equivalent",
            "no-constraints"
        ]
    );
    assert_eq!(
        candidates(&policies, "extensions", "deployments"),
        [
            "any-group-deployments",
            "excludes-apps-deployments",
            "extensions-all-equivalent",
            "extensions-equivalent",
            "extensions-exact",
            "no-constraints"
        ]
    );
    assert_eq!(
        candidates(&policies, "apps", "replicasets"),
        ["any-resource-of-apps", "extensions-all-equivalent", "no-constraints"]
    );
    assert_eq!(candidates(&policies, "batch", "jobs"), ["no-constraints"]);
}
