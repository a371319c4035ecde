//! Evaluation tables, one per rule of the reference (docs/policies.md). Messages and codes as
//! `kubernetes/kubernetes` `test/integration/apiserver/cel/validatingadmissionpolicy_test.go`
//! expects them.

use serde_json::{json, Value};

use super::*;

thread_local! {
    /// Every phase's budget, in cel-go's cost units, when set (the real ones are large to spend).
    pub(super) static BUDGET: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}
use crate::config::policy::tests::{binding, compile, policy};
use crate::review::decode;

fn review(request: &Value) -> IncomingReview {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    decode::review(&serde_json::to_vec(&body).unwrap()).unwrap()
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels}})
}

/// A CREATE of `object` (a Pod in `default` unless it is a Namespace).
fn create(object: Value) -> Value {
    let kind = object["kind"].as_str().unwrap().to_owned();
    let (resource, namespace) = match kind.as_str() {
        "Namespace" => ("namespaces", object["metadata"]["name"].clone()),
        "Pod" => ("pods", json!("default")),
        _ => ("configmaps", json!("default")),
    };
    json!({"uid": "1", "kind": {"group": "", "version": "v1", "kind": kind},
           "resource": {"group": "", "version": "v1", "resource": resource},
           "name": object["metadata"]["name"], "namespace": namespace, "operation": "CREATE",
           "userInfo": {"username": "alice"}, "object": object})
}

struct Run {
    results: Vec<PolicyResult>,
}

impl Run {
    fn verdict(&self) -> Verdict {
        aggregate(self.results.iter())
    }
    fn denials(&self) -> Vec<String> {
        self.results.iter().flat_map(|r| r.denials.iter().filter_map(|d| d.message.clone())).collect()
    }
    fn warnings(&self) -> Vec<String> {
        self.results.iter().flat_map(|r| r.warnings.clone()).collect()
    }
    fn audit(&self) -> Vec<Value> {
        self.results.iter().flat_map(|r| r.audit_failures.clone()).collect()
    }
    fn actions(&self) -> Vec<&'static str> {
        self.results.iter().flat_map(|r| r.checks.iter().map(|c| c.enforcement_action)).collect()
    }
}

fn run_with(
    policies: Vec<Value>,
    bindings: Vec<Value>,
    others: Vec<Value>,
    request: Value,
    namespace: Option<Value>,
) -> Run {
    run_until(policies, bindings, others, request, namespace, None)
}

fn run_until(
    policies: Vec<Value>,
    bindings: Vec<Value>,
    others: Vec<Value>,
    request: Value,
    namespace: Option<Value>,
    deadline: Option<std::time::Instant>,
) -> Run {
    let (policies, _problems) = compile(policies, bindings, others);
    let review = review(&request);
    let object = request.get("object").filter(|o| !o.is_null());
    let old_object = request.get("oldObject").filter(|o| !o.is_null());
    let attributes =
        Attributes { review: &review, object, old_object, namespace: namespace.as_ref(), deadline };
    Run { results: evaluate(&policies, &attributes, &NoLookups) }
}

fn run(policies: Vec<Value>, bindings: Vec<Value>, request: Value) -> Run {
    run_with(policies, bindings, vec![], request, None)
}

fn namespaces_rule() -> Value {
    json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}]})
}

fn pods_rule() -> Value {
    crate::config::policy::tests::pods_rule()
}

fn deny(policy: &str, actions: &[&str]) -> Value {
    binding(&format!("{policy}-binding"), json!({"policyName": policy, "validationActions": actions}))
}

#[test]
fn a_false_validation_denies_with_the_api_servers_status() {
    let run = run(
        vec![policy(
            "validate-namespace-suffix",
            json!({"matchConstraints": namespaces_rule(), "validations": [{"expression": "object.metadata.name.endsWith('k8s')"}]}),
        )],
        vec![deny("validate-namespace-suffix", &["Deny"])],
        create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "test-foobar"}})),
    );
    let status = run.verdict().denial.unwrap();
    let inner = "ValidatingAdmissionPolicy 'validate-namespace-suffix' with binding 'validate-namespace-suffix-binding' denied request: failed expression: object.metadata.name.endsWith('k8s')";
    assert_eq!(
        status.message.as_deref(),
        Some(format!("namespaces \"test-foobar\" is forbidden: {inner}").as_str())
    );
    assert_eq!(
        (status.status.as_deref(), status.reason.as_deref(), status.code),
        (Some("Failure"), Some("Invalid"), Some(422))
    );
    assert_eq!(
        status.details,
        Some(json!({"name": "test-foobar", "kind": "namespaces", "causes": [{"message": inner}]}))
    );
    let passing = run_with(
        vec![policy(
            "validate-namespace-suffix",
            json!({"matchConstraints": namespaces_rule(), "validations": [{"expression": "object.metadata.name.endsWith('k8s')"}]}),
        )],
        vec![deny("validate-namespace-suffix", &["Deny"])],
        vec![],
        create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "test-k8s"}})),
        None,
    );
    assert!(passing.verdict().denial.is_none());
}

#[test]
fn validation_actions_apply_to_every_deny_decision_in_list_order() {
    let spec = json!({"matchConstraints": pods_rule(), "validations": [
        {"expression": "true"}, {"expression": "object.metadata.name.endsWith('k8s')"}]});
    // (actions, denials, warnings, audit entries, metric actions)
    type Row = (&'static [&'static str], usize, usize, usize, &'static [&'static str]);
    let table: &[Row] = &[
        (&["Deny"], 1, 0, 0, &["deny"]),
        (&["Warn"], 0, 1, 0, &["warn"]),
        (&["Audit"], 0, 0, 1, &["audit"]),
        (&["Deny", "Audit"], 1, 0, 1, &["deny", "audit"]),
        (&["Audit", "Warn"], 0, 1, 1, &["audit", "warn"]),
    ];
    for (actions, denials, warnings, audits, metric) in table {
        let run = run(
            vec![policy("validate-actions-audit", spec.clone())],
            vec![deny("validate-actions-audit", actions)],
            create(pod("web", json!({}))),
        );
        assert_eq!(run.denials().len(), *denials, "{actions:?}");
        assert_eq!(run.warnings().len(), *warnings, "{actions:?}");
        assert_eq!(run.audit().len(), *audits, "{actions:?}");
        assert_eq!(run.actions(), *metric, "{actions:?}");
        if *warnings > 0 {
            assert_eq!(
                run.warnings()[0],
                "Validation failed for ValidatingAdmissionPolicy 'validate-actions-audit' with binding 'validate-actions-audit-binding': failed expression: object.metadata.name.endsWith('k8s')"
            );
        }
        if *audits > 0 {
            let actions: Vec<&str> = actions.to_vec();
            let expected = json!([{"message": "failed expression: object.metadata.name.endsWith('k8s')",
                "policy": "validate-actions-audit", "binding": "validate-actions-audit-binding",
                "expressionIndex": 1, "validationActions": actions}]);
            let verdict = run.verdict();
            let annotation =
                verdict.audit_annotations.iter().find(|(k, _)| k == VALIDATION_FAILURE_KEY).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&annotation.1).unwrap(), expected);
            assert!(annotation.1.starts_with(r#"[{"message":"failed expression: object.metadata.name.endsWith('k8s')","policy":"validate-actions-audit","binding":"validate-actions-audit-binding","expressionIndex":1,"validationActions":["#), "{}", annotation.1);
        }
    }
}

#[test]
fn messages_fall_back_from_message_expression_to_message_to_the_expression() {
    let long = "x".repeat(5121);
    // (message, messageExpression, expected)
    let table: &[(Option<&str>, Option<&str>, &str)] = &[
        (None, Some("'name ' + object.metadata.name + ' is bad'"), "name web is bad"),
        (Some("static"), Some("'  spaced  '"), "spaced"),
        (Some("static"), Some("'   '"), "static"),
        (Some("static"), Some("'two\\nlines'"), "static"),
        (Some("static"), Some("object.missing"), "static"),
        (Some(" static "), None, "static"),
        (None, None, "failed expression: false"),
        (None, Some("'   '"), "failed expression: false"),
    ];
    for (message, message_expression, expected) in table {
        let mut validation = json!({"expression": " false "});
        if let Some(m) = message {
            validation["message"] = json!(m);
        }
        if let Some(m) = message_expression {
            validation["messageExpression"] = json!(m);
        }
        let run = run(
            vec![policy("p", json!({"matchConstraints": pods_rule(), "validations": [validation]}))],
            vec![deny("p", &["Warn"])],
            create(pod("web", json!({}))),
        );
        assert_eq!(
            run.warnings(),
            [format!(
                "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': {expected}"
            )],
            "{message:?} {message_expression:?}"
        );
    }
    let too_long = run(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "validations": [
            {"expression": "false", "message": "short", "messageExpression": format!("'{long}'")}]}),
        )],
        vec![deny("p", &["Warn"])],
        create(pod("web", json!({}))),
    );
    assert!(too_long.warnings()[0].ends_with(": short"));
}

#[test]
fn reasons_give_the_status_code() {
    for (reason, code) in
        [(Some("Forbidden"), 403), (Some("RequestEntityTooLarge"), 413), (Some("Invalid"), 422), (None, 422)]
    {
        let mut validation = json!({"expression": "false"});
        if let Some(reason) = reason {
            validation["reason"] = json!(reason);
        }
        let run = run(
            vec![policy("p", json!({"matchConstraints": pods_rule(), "validations": [validation]}))],
            vec![deny("p", &["Deny"])],
            create(pod("web", json!({}))),
        );
        let status = run.verdict().denial.unwrap();
        assert_eq!((status.reason.as_deref(), status.code), (Some(reason.unwrap_or("Invalid")), Some(code)));
    }
    // An error of a validation with a reason is still `Invalid`.
    let run = run(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "validations": [{"expression": "object.missing == 1", "reason": "Forbidden"}]}),
        )],
        vec![deny("p", &["Deny"])],
        create(pod("web", json!({}))),
    );
    let status = run.verdict().denial.unwrap();
    assert_eq!((status.reason.as_deref(), status.code), (Some("Invalid"), Some(422)));
}

#[test]
fn runtime_errors_follow_the_failure_policy_then_the_actions() {
    let spec = |failure: &str| {
        json!({"failurePolicy": failure, "matchConstraints": pods_rule(),
        "validations": [{"expression": "object.nonExistentProperty == 'someval'"}]})
    };
    let error = "expression 'object.nonExistentProperty == 'someval'' resulted in error: no such key: nonExistentProperty";
    let fail =
        run(vec![policy("p", spec("Fail"))], vec![deny("p", &["Deny"])], create(pod("web", json!({}))));
    assert_eq!(
        fail.denials(),
        [format!("pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p-binding' denied request: {error}")]
    );
    assert_eq!(fail.verdict().denial.unwrap().code, Some(422));
    let warn =
        run(vec![policy("p", spec("Fail"))], vec![deny("p", &["Warn"])], create(pod("web", json!({}))));
    assert_eq!(warn.warnings().len(), 1);
    assert!(warn.denials().is_empty());
    let ignore =
        run(vec![policy("p", spec("Ignore"))], vec![deny("p", &["Deny"])], create(pod("web", json!({}))));
    assert!(ignore.denials().is_empty());
    assert_eq!(ignore.actions(), ["allow"]);
    assert_eq!(ignore.results[0].checks[0].error_type, "invalid_error");
}

#[test]
fn configuration_errors_deny_under_fail_whatever_the_actions() {
    let spec = |failure: &str| {
        json!({"failurePolicy": failure, "matchConstraints": pods_rule(),
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": "true"}]})
    };
    let bind = json!({"policyName": "p", "validationActions": ["Warn"],
                      "paramRef": {"name": "missing", "parameterNotFoundAction": "Deny"}});
    let fail =
        run(vec![policy("p", spec("Fail"))], vec![binding("b", bind.clone())], create(pod("web", json!({}))));
    assert_eq!(
        fail.denials(),
        ["pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"]
    );
    assert!(fail.warnings().is_empty() && fail.actions().is_empty());
    let ignore = run(
        vec![policy("p", spec("Ignore"))],
        vec![binding("b", bind.clone())],
        create(pod("web", json!({}))),
    );
    assert!(ignore.denials().is_empty());
    let mut allow = bind.clone();
    allow["paramRef"]["parameterNotFoundAction"] = json!("Allow");
    let allowed =
        run(vec![policy("p", spec("Fail"))], vec![binding("b", allow)], create(pod("web", json!({}))));
    assert!(allowed.denials().is_empty());
    // A namespaced param kind without paramRef.namespace on a cluster-scoped request.
    let mut cluster_spec = spec("Fail");
    cluster_spec["matchConstraints"] = namespaces_rule();
    let scoped = run(
        vec![policy("p", cluster_spec)],
        vec![binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Audit"],
                                  "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}}),
        )],
        {
            let mut request =
                create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}));
            request["namespace"] = json!("");
            request
        },
    );
    assert_eq!(
        scoped.denials(),
        ["namespaces \"n\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"]
    );
}

#[test]
fn params_give_one_evaluation_each() {
    let spec = json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "params == null || object.metadata.name != params.data.forbidden",
                         "messageExpression": "'name ' + params.data.forbidden + ' forbidden by ' + params.metadata.name"}]});
    let config_map = |name: &str, forbidden: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": labels},
               "data": {"forbidden": forbidden}})
    };
    let params = vec![
        config_map("b", "web", json!({"use": "yes"})),
        config_map("a", "web", json!({"use": "yes"})),
        config_map("c", "web", json!({"use": "no"})),
    ];
    let by_selector = run_with(
        vec![policy("p", spec.clone())],
        vec![binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Warn"],
            "paramRef": {"selector": {"matchLabels": {"use": "yes"}}, "parameterNotFoundAction": "Deny"}}),
        )],
        params.clone(),
        create(pod("web", json!({}))),
        None,
    );
    let suffixes: Vec<String> =
        by_selector.warnings().iter().map(|w| w.rsplit(": ").next().unwrap().to_owned()).collect();
    assert_eq!(suffixes, ["name web forbidden by a", "name web forbidden by b"]);
    let by_name = run_with(
        vec![policy("p", spec.clone())],
        vec![binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Warn"],
            "paramRef": {"name": "c", "parameterNotFoundAction": "Deny"}}),
        )],
        params.clone(),
        create(pod("web", json!({}))),
        None,
    );
    assert_eq!(by_name.warnings().len(), 1);
    let without_ref = run_with(
        vec![policy("p", spec)],
        vec![binding("b", json!({"policyName": "p", "validationActions": ["Warn"]}))],
        params,
        create(pod("web", json!({}))),
        None,
    );
    assert!(without_ref.warnings().is_empty(), "params is null without paramRef");
}

#[test]
fn matching_rules_names_exclusions_and_selectors() {
    let always_false = json!([{"expression": "false"}]);
    let check = |constraints: Value, request: Value, namespace: Option<Value>| -> Vec<String> {
        let run = run_with(
            vec![policy("p", json!({"matchConstraints": constraints, "validations": always_false}))],
            vec![deny("p", &["Deny"])],
            vec![],
            request,
            namespace,
        );
        run.denials()
    };
    let mut named = pods_rule();
    named["resourceRules"][0]["resourceNames"] = json!(["db"]);
    assert!(check(named.clone(), create(pod("web", json!({}))), None).is_empty());
    assert_eq!(check(named, create(pod("db", json!({}))), None).len(), 1);
    let mut excluded = pods_rule();
    excluded["excludeResourceRules"] = json!([{"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["pods"], "resourceNames": ["web"]}]);
    assert!(check(excluded.clone(), create(pod("web", json!({}))), None).is_empty());
    assert_eq!(check(excluded, create(pod("db", json!({}))), None).len(), 1);
    let mut by_object = pods_rule();
    by_object["objectSelector"] = json!({"matchLabels": {"team": "a"}});
    assert!(check(by_object.clone(), create(pod("web", json!({"team": "b"}))), None).is_empty());
    let mut update = create(pod("web", json!({"team": "b"})));
    update["operation"] = json!("UPDATE");
    update["oldObject"] = pod("web", json!({"team": "a"}));
    update["resource"] = json!({"group": "", "version": "v1", "resource": "pods"});
    let mut by_object_update = by_object.clone();
    by_object_update["resourceRules"][0]["operations"] = json!(["UPDATE"]);
    assert_eq!(check(by_object_update, update, None).len(), 1, "oldObject's labels match");
    let mut by_namespace = pods_rule();
    by_namespace["namespaceSelector"] = json!({"matchLabels": {"env": "prod"}});
    let prod = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"env": "prod"}}});
    let dev = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"env": "dev"}}});
    assert_eq!(check(by_namespace.clone(), create(pod("web", json!({}))), Some(prod)).len(), 1);
    assert!(check(by_namespace.clone(), create(pod("web", json!({}))), Some(dev)).is_empty());
    assert_eq!(
        check(by_namespace, create(pod("web", json!({}))), None),
        ["pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: namespaces \"default\" not found"]
    );
}

#[test]
fn a_binding_narrows_its_policy_and_bindings_go_by_name() {
    let run = run(
        vec![policy("p", json!({"matchConstraints": pods_rule(), "validations": [{"expression": "false"}]}))],
        vec![
            binding("z", json!({"policyName": "p", "validationActions": ["Deny"]})),
            binding(
                "a",
                json!({"policyName": "p", "validationActions": ["Deny"],
                "matchResources": {"objectSelector": {"matchLabels": {"team": "a"}}}}),
            ),
            binding(
                "m",
                json!({"policyName": "p", "validationActions": ["Deny"],
                "matchResources": {"objectSelector": {"matchLabels": {"team": "b"}}}}),
            ),
            binding("other", json!({"policyName": "nobody", "validationActions": ["Deny"]})),
        ],
        create(pod("web", json!({"team": "b"}))),
    );
    let bindings: Vec<&str> = run
        .denials()
        .iter()
        .map(|d| {
            if d.contains("'m'") {
                "m"
            } else if d.contains("'z'") {
                "z"
            } else {
                "?"
            }
        })
        .collect();
    assert_eq!(bindings, ["m", "z"]);
}

#[test]
fn match_conditions_skip_on_false_and_fail_on_errors() {
    let spec = |conditions: Value, failure: &str| {
        json!({"failurePolicy": failure, "matchConstraints": pods_rule(),
        "matchConditions": conditions, "validations": [{"expression": "false"}]})
    };
    let table: &[(Value, &str, usize)] = &[
        (json!([{"name": "yes", "expression": "true"}]), "Fail", 1),
        (
            json!([{"name": "no", "expression": "false"}, {"name": "err", "expression": "object.x == 1"}]),
            "Fail",
            0,
        ),
        (json!([{"name": "err", "expression": "object.x == 1"}]), "Ignore", 0),
        (json!([{"name": "ns", "expression": "namespaceObject == null"}]), "Fail", 1),
    ];
    for (conditions, failure, denials) in table {
        let run = run_with(
            vec![policy("p", spec(conditions.clone(), failure))],
            vec![deny("p", &["Deny"])],
            vec![],
            create(pod("web", json!({}))),
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})),
        );
        assert_eq!(run.denials().len(), *denials, "{conditions}");
    }
    let failed = run(
        vec![policy("p", spec(json!([{"name": "err", "expression": "object.x == 1"}]), "Fail"))],
        vec![deny("p", &["Warn"])],
        create(pod("web", json!({}))),
    );
    let observed: Vec<usize> = failed.results[0].conditions.iter().map(|c| c.errors).collect();
    assert_eq!(observed, [1], "one observation, one failed condition");
    assert_eq!(
        failed.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': expression 'object.x == 1' resulted in error: no such key: x"]
    );
}

#[test]
fn audit_annotations_are_trimmed_joined_and_fail_under_fail() {
    let spec = json!({"matchConstraints": pods_rule(), "auditAnnotations": [
        {"key": "name", "valueExpression": "'  ' + object.metadata.name + '  '"},
        {"key": "empty", "valueExpression": "'   '"},
        {"key": "none", "valueExpression": "null"},
        {"key": "binding", "valueExpression": "request.operation"}]});
    let run = run(
        vec![policy("p", spec)],
        vec![deny("p", &["Warn"]), binding("q", json!({"policyName": "p", "validationActions": ["Audit"]}))],
        create(pod("web", json!({}))),
    );
    assert_eq!(
        run.verdict().audit_annotations,
        [("p/name".to_owned(), "web".to_owned()), ("p/binding".to_owned(), "CREATE".to_owned())]
    );
    let several = run_with(
        vec![policy("p", json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "auditAnnotations": [{"key": "k", "valueExpression": "string(params.data.v)"}]}))],
        vec![binding("b", json!({"policyName": "p", "validationActions": ["Deny"],
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Deny"}}))],
        ["x", "y", "x"]
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}"), "namespace": "default"}, "data": {"v": v}}))
            .collect(),
        create(pod("web", json!({}))),
        None,
    );
    assert_eq!(
        several.verdict().audit_annotations,
        [("p/k".to_owned(), "x, y".to_owned())],
        "{:?}",
        several.results[0].steps
    );
    let failing = run_with(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "auditAnnotations": [{"key": "k", "valueExpression": "string(params.metadata.name)"}]}),
        )],
        vec![binding("b", json!({"policyName": "p", "validationActions": ["Warn"]}))],
        vec![],
        create(pod("web", json!({}))),
        None,
    );
    assert_eq!(
        failing.denials(),
        ["pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'string(params.metadata.name)' resulted in error: no such key: metadata"]
    );
    assert_eq!(failing.actions(), ["deny"]);
}

#[test]
fn variables_are_lazy_and_their_errors_surface_where_referenced() {
    let spec = json!({"matchConstraints": pods_rule(), "variables": [
            {"name": "broken", "expression": "object.missing"},
            {"name": "name", "expression": "object.metadata.name"}],
        "validations": [
            {"expression": "variables.name == 'web'"},
            {"expression": "variables.broken == 1"}]});
    let run = run(vec![policy("p", spec)], vec![deny("p", &["Warn"])], create(pod("web", json!({}))));
    assert_eq!(
        run.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing"]
    );
}

#[test]
fn auth_reviews_and_policy_objects_are_exempt() {
    let all = json!({"resourceRules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]});
    let spec = json!({"matchConstraints": all, "validations": [{"expression": "false"}]});
    let request = |group: &str, resource: &str| {
        json!({"uid": "1", "kind": {"group": group, "version": "v1", "kind": "X"},
               "resource": {"group": group, "version": "v1", "resource": resource},
               "name": "x", "operation": "CREATE", "object": {"metadata": {"name": "x"}}})
    };
    let denials = |group: &str, resource: &str| {
        run(
            vec![policy("api", spec.clone()), policy("s.static.k8s.io", spec.clone())],
            vec![deny("api", &["Deny"]), deny("s.static.k8s.io", &["Deny"])],
            request(group, resource),
        )
        .denials()
        .len()
    };
    assert_eq!(denials("authorization.k8s.io", "subjectaccessreviews"), 0);
    assert_eq!(denials("admissionregistration.k8s.io", "validatingadmissionpolicies"), 1, "static only");
    assert_eq!(denials("admissionregistration.k8s.io", "validatingwebhookconfigurations"), 2);
}

#[test]
fn aggregate_keeps_the_first_denial_distinct_warnings_first_annotations_and_50_audit_entries() {
    let spec = json!({"matchConstraints": pods_rule(), "validations": [{"expression": "false", "message": "<b> & c"}],
                      "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}]});
    let policies: Vec<Value> = (0..30).map(|i| policy(&format!("p{i:02}"), spec.clone())).collect();
    let bindings: Vec<Value> = (0..30)
        .flat_map(|i| {
            [
                binding(
                    &format!("a{i:02}"),
                    json!({"policyName": format!("p{i:02}"), "validationActions": ["Deny", "Audit"]}),
                ),
                binding(
                    &format!("b{i:02}"),
                    json!({"policyName": format!("p{i:02}"), "validationActions": ["Warn", "Audit"]}),
                ),
            ]
        })
        .collect();
    let run = run(policies, bindings, create(pod("web", json!({}))));
    let verdict = run.verdict();
    assert!(verdict
        .denial
        .unwrap()
        .message
        .unwrap()
        .contains("ValidatingAdmissionPolicy 'p00' with binding 'a00'"));
    assert_eq!(verdict.warnings.len(), 30);
    let failure = &verdict.audit_annotations.iter().find(|(k, _)| k == VALIDATION_FAILURE_KEY).unwrap().1;
    let entries: Vec<Value> = serde_json::from_str(failure).unwrap();
    assert_eq!(entries.len(), 50);
    assert!(failure.starts_with("[{\"message\":\"\\u003cb\\u003e \\u0026 c\",\"policy\":\"p00\",\"binding\":\"a00\",\"expressionIndex\":0,\"validationActions\":[\"Deny\",\"Audit\"]}"), "{failure}");
    assert_eq!(verdict.audit_annotations.len(), 31);
    let duplicated =
        PolicyResult { warnings: vec!["w".into(), "w".into()], ..PolicyResult::new(&run.results[0].policy) };
    assert_eq!(aggregate([&duplicated]).warnings, ["w"]);
}

#[test]
fn compile_errors_and_unrecognized_failure_policies_reach_the_request_as_upstream_says() {
    // Refused at load (a problem), but evaluated as the API server evaluates a stored policy.
    let run = run(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "validations": [{"expression": "undeclared == 1"}]}),
        )],
        vec![deny("p", &["Warn", "Audit"])],
        create(pod("web", json!({}))),
    );
    assert_eq!(
        run.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': compilation error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'undeclared' (in container '')\n | undeclared == 1\n | ^"]
    );
    let types: Vec<&str> = run.results[0].checks.iter().map(|c| c.error_type).collect();
    assert_eq!(types, ["compile_error", "compile_error"]);
    let unrecognized = run_with(
        vec![policy(
            "p",
            json!({"failurePolicy": "Sometimes", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": pods_rule(), "validations": [{"expression": "true"}]}),
        )],
        vec![binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Audit"],
            "paramRef": {"name": "none", "parameterNotFoundAction": "Deny"}}),
        )],
        vec![],
        create(pod("web", json!({}))),
        None,
    );
    assert_eq!(
        unrecognized.denials(),
        ["pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: unrecognized failure policy: 'Sometimes'"]
    );
}

#[test]
fn a_per_expression_budget_overrun_is_an_error_of_that_expression() {
    let run = run(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "validations": [
            {"expression": "lists.range(1000).all(a, lists.range(1000).all(b, true))"}, {"expression": "false"}]}),
        )],
        vec![deny("p", &["Warn"])],
        create(pod("web", json!({}))),
    );
    assert_eq!(
        run.warnings(),
        [
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': expression 'lists.range(1000).all(a, lists.range(1000).all(b, true))' resulted in error: operation cancelled: actual cost limit exceeded",
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': failed expression: false",
        ]
    );
}

#[test]
fn equivalent_matches_in_another_version_need_a_conversion_the_gateway_does_not_have() {
    let rule = |policy: &str| {
        json!({"matchPolicy": policy, "resourceRules": [{"operations": ["CREATE"], "apiGroups": ["extensions"],
               "apiVersions": ["v1beta1"], "resources": ["deployments"]}]})
    };
    let request = json!({"uid": "1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "name": "web",
        "namespace": "default", "operation": "CREATE",
        "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}});
    let denials = |policy_: &str| {
        run(
            vec![policy(
                "p",
                json!({"matchConstraints": rule(policy_), "validations": [{"expression": "true"}]}),
            )],
            vec![deny("p", &["Deny"])],
            request.clone(),
        )
        .denials()
    };
    assert!(denials("Exact").is_empty());
    assert_eq!(
        denials("Equivalent"),
        ["deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p-binding' denied request: failed to configure binding: failed to convert object version: admission-gateway does not convert apps/v1, Kind=Deployment to extensions/v1beta1, Kind=Deployment"]
    );
}

#[test]
fn the_denied_name_falls_back_to_the_object() {
    let spec = json!({"matchConstraints": pods_rule(), "validations": [{"expression": "false"}]});
    let mut generated =
        create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}}));
    generated["name"] = json!("");
    let run = run(vec![policy("p", spec)], vec![deny("p", &["Deny"])], generated);
    let status = run.verdict().denial.unwrap();
    assert!(status.message.unwrap().starts_with("pods \"web-\" is forbidden: "));
    assert_eq!(status.details.unwrap()["name"], "web-");
}

/// Allows what it is asked about the `/healthz` path only.
struct HealthzOnly;

impl crate::cel::authorizer::Authorizer for HealthzOnly {
    fn authorize(&self, check: &crate::cel::authorizer::Check) -> crate::cel::authorizer::Decision {
        use crate::cel::authorizer::{Decision, Target};
        Decision {
            allowed: matches!(&check.target, Target::Path(p) if p == "/healthz"),
            ..Default::default()
        }
    }
}

#[test]
fn the_authorizer_is_asked_within_the_callers_scope() {
    use crate::cel::authorizer::{with_scope, ResourceTarget, Scope};
    let spec = json!({"matchConstraints": pods_rule(), "validations": [
        {"expression": "authorizer.path('/healthz').check('get').allowed()"},
        {"expression": "authorizer.path('/metrics').check('get').allowed()"}]});
    let (policies, problems) = compile(vec![policy("p", spec)], vec![deny("p", &["Warn"])], vec![]);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(policies.iter().next().unwrap().uses_authorizer());
    let request = create(pod("web", json!({})));
    let review = review(&request);
    let attributes = Attributes {
        review: &review,
        object: request.get("object"),
        old_object: None,
        namespace: None,
        deadline: None,
    };
    let scope =
        Scope { authorizer: std::sync::Arc::new(HealthzOnly), request_resource: ResourceTarget::default() };
    let results = with_scope(Some(scope), || evaluate(&policies, &attributes, &NoLookups));
    let warnings: Vec<&String> = results.iter().flat_map(|r| &r.warnings).collect();
    assert_eq!(
        warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': failed expression: authorizer.path('/metrics').check('get').allowed()"]
    );
}

#[test]
fn a_spent_budget_replaces_the_evaluations_decisions_by_one_error() {
    // Each costly validation takes more than 5 steps.
    let costly = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, x > 0)";
    let spec = json!({"matchConstraints": pods_rule(), "validations": [
        {"expression": "false"}, {"expression": costly}, {"expression": costly}, {"expression": costly}]});
    let budget =
        "validation failed due to running out of cost budget, no further validation rules will be run";
    BUDGET.set(Some(5));
    let spent =
        run(vec![policy("p", spec)], vec![deny("p", &["Deny", "Audit"])], create(pod("web", json!({}))));
    BUDGET.set(None);
    assert_eq!(spent.denials(), [format!("pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p-binding' denied request: {budget}")]);
    assert_eq!(spent.audit()[0]["expressionIndex"], 0);
    let types: Vec<&str> = spent.results[0].checks.iter().map(|c| c.error_type).collect();
    assert_eq!(types, ["out_of_budget", "out_of_budget"]);
    // The validations fit, their messageExpressions do not: every validation that did not fail
    // itself, passing ones included, becomes `failed messageExpression: …`.
    let spec = json!({"matchConstraints": pods_rule(), "validations": [
        {"expression": "false", "messageExpression": format!("{costly} ? 'a' : 'b'")},
        {"expression": "true", "messageExpression": format!("{costly} ? 'a' : 'b'")},
        {"expression": "object.missing == 1", "messageExpression": format!("{costly} ? 'a' : 'b'")}]});
    BUDGET.set(Some(5));
    let messages = run(vec![policy("p", spec)], vec![deny("p", &["Warn"])], create(pod("web", json!({}))));
    BUDGET.set(None);
    let prefix = "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': ";
    assert_eq!(
        messages.warnings(),
        [
            format!("{prefix}failed messageExpression: {budget}"),
            format!("{prefix}failed messageExpression: {budget}"),
            format!("{prefix}expression 'object.missing == 1' resulted in error: no such key: missing"),
        ]
    );
}

#[test]
fn the_reviews_deadline_is_the_only_time_bound_and_follows_the_failure_policy() {
    // Hundreds of labels: more work than a wall-clock limit of old allowed on a busy machine, within
    // the cost budget: allowed, however long the machine takes.
    let labels: serde_json::Map<String, Value> = (0..400).map(|i| (format!("k{i}"), json!("v"))).collect();
    let spec = |failure: &str| {
        json!({"failurePolicy": failure, "matchConstraints": pods_rule(), "validations": [
            {"expression": "object.metadata.labels.all(k, object.metadata.labels[k] != '')"}]})
    };
    let request = create(pod("web", Value::Object(labels)));
    let allowed = run(vec![policy("p", spec("Fail"))], vec![deny("p", &["Deny"])], request.clone());
    assert!(allowed.denials().is_empty(), "{:?}", allowed.denials());
    // A deadline already past (no timing involved): the evaluation fails as a whole, as a
    // webhook call that timed out, under the policy's failurePolicy.
    let past = Some(std::time::Instant::now());
    let cancelled = "evaluation cancelled: the review's deadline passed before it finished, no further validation rules will be run";
    let fail = run_until(
        vec![policy("p", spec("Fail"))],
        vec![deny("p", &["Deny"])],
        vec![],
        request.clone(),
        None,
        past,
    );
    assert_eq!(
        fail.denials(),
        [format!("pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p-binding' denied request: {cancelled}")]
    );
    let ignore =
        run_until(vec![policy("p", spec("Ignore"))], vec![deny("p", &["Deny"])], vec![], request, None, past);
    assert!(ignore.denials().is_empty());
}

#[test]
fn policies_match_the_request_as_made_and_evaluate_the_object_as_sent() {
    // The API server asked for apps/v1beta2 and sent the object as apps/v1.
    let request = json!({"uid": "1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1beta2", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1beta2", "resource": "deployments"},
        "name": "web", "namespace": "default", "operation": "CREATE",
        "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}});
    let denials = |version: &str, match_policy: &str| {
        let rule = json!({"matchPolicy": match_policy, "resourceRules": [{"operations": ["CREATE"],
            "apiGroups": ["apps"], "apiVersions": [version], "resources": ["deployments"]}]});
        run(
            vec![policy("p", json!({"matchConstraints": rule, "validations": [{"expression": "request.kind.version == 'v1' && request.requestKind.version == 'v1beta2'"}]}))],
            vec![deny("p", &["Deny"])],
            request.clone(),
        )
        .denials()
    };
    assert!(denials("v1", "Exact").is_empty(), "the request was not made in v1");
    assert!(denials("v1", "Equivalent").is_empty(), "matched in v1, the object's version: evaluated, true");
    let converted = denials("v1beta2", "Exact");
    assert_eq!(converted.len(), 1);
    assert!(converted[0].starts_with("deployments.apps \"web\" is forbidden: "), "{converted:?}");
    assert!(converted[0].ends_with("failed to configure binding: failed to convert object version: admission-gateway does not convert apps/v1, Kind=Deployment to apps/v1beta2, Kind=Deployment"), "{converted:?}");
}

#[test]
fn a_validation_that_may_not_be_a_bool_is_refused_as_the_api_server_refuses_it() {
    // `dyn` where `bool` is required: the API server's checker refuses it at creation (k8s
    // compares the output type exactly); the binding then denies with the compile error.
    let mut object = pod("web", json!({}));
    object["spec"] = json!({"flag": "yes"});
    let expression = "object.spec.flag == 'yes' ? object.spec.flag : true";
    let run = run(
        vec![policy(
            "p",
            json!({"matchConstraints": pods_rule(), "validations": [{"expression": expression}]}),
        )],
        vec![deny("p", &["Warn"])],
        create(object),
    );
    assert_eq!(
        run.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': compilation error: must evaluate to bool but got dyn"]
    );
    let _ = expression;
}

/// One ask of [`Cluster`]: apiVersion, kind, namespace and name.
type Asked = (String, String, String, Option<String>);

/// Serves ConfigMaps from "the cluster", recording what was asked.
struct Cluster(std::sync::Mutex<Vec<Asked>>);

impl Lookups for Cluster {
    fn params(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> Option<Result<Vec<Arc<Param>>, String>> {
        let asked = (api_version.to_owned(), kind.to_owned(), namespace.to_owned(), name.map(str::to_owned));
        self.0.lock().unwrap().push(asked);
        (kind == "ConfigMap").then(|| {
            Ok(vec![Arc::new(Param::of_object(Arc::new(
                json!({"metadata": {"name": "live", "namespace": "team"}, "data": {"max": "1"}}),
            )))])
        })
    }
}

#[test]
fn lookups_answer_parameters_of_a_kind_the_configuration_lacks_and_get_their_kind() {
    let spec = json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "false", "messageExpression": "params.kind + ' ' + params.metadata.name"}]});
    let bound = || {
        binding(
            "b",
            json!({"policyName": "p", "validationActions": ["Warn"],
            "paramRef": {"selector": {}, "namespace": "team", "parameterNotFoundAction": "Deny"}}),
        )
    };
    let request = create(pod("web", json!({})));
    let review = review(&request);
    let attributes = Attributes {
        review: &review,
        object: request.get("object"),
        old_object: None,
        namespace: None,
        deadline: None,
    };

    // No ConfigMap configured: the cluster's.
    let (policies, _) = compile(vec![policy("p", spec.clone())], vec![bound()], vec![]);
    let cluster = Cluster(std::sync::Mutex::new(Vec::new()));
    let results = evaluate(&policies, &attributes, &cluster);
    assert_eq!(
        results[0].warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': ConfigMap live"]
    );
    assert_eq!(
        *cluster.0.lock().unwrap(),
        [("v1".to_owned(), "ConfigMap".to_owned(), "team".to_owned(), None)]
    );

    // ConfigMaps configured: those, and the cluster is not asked.
    let configured = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "configured", "namespace": "team"}});
    let (policies, _) = compile(vec![policy("p", spec)], vec![bound()], vec![configured]);
    let cluster = Cluster(std::sync::Mutex::new(Vec::new()));
    let results = evaluate(&policies, &attributes, &cluster);
    assert_eq!(
        results[0].warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': ConfigMap configured"]
    );
    assert!(cluster.0.lock().unwrap().is_empty());

    // A `paramRef.name` is asked for by name, never by listing the namespace.
    let named = binding(
        "b",
        json!({"policyName": "p", "validationActions": ["Warn"], "paramRef": {"name": "live", "namespace": "team"}}),
    );
    let spec = json!({"matchConstraints": pods_rule(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "false", "messageExpression": "params.metadata.name"}]});
    let (policies, _) = compile(vec![policy("p", spec)], vec![named], vec![]);
    let cluster = Cluster(std::sync::Mutex::new(Vec::new()));
    evaluate(&policies, &attributes, &cluster);
    assert_eq!(
        *cluster.0.lock().unwrap(),
        [("v1".to_owned(), "ConfigMap".to_owned(), "team".to_owned(), Some("live".to_owned()))]
    );
}

#[test]
fn only_a_request_some_policys_rules_accept_needs_its_object_and_namespace() {
    let selective = json!({"matchConstraints": {
        "resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "objectSelector": {"matchLabels": {"team": "a"}},
        "namespaceSelector": {"matchLabels": {"tier": "prod"}}},
        "validations": [{"expression": "false"}]});
    let (policies, _) = compile(vec![policy("p", selective.clone())], vec![deny("p", &["Deny"])], vec![]);
    let pod_request = create(pod("web", json!({"team": "a"})));
    let config_map = create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
    assert!(may_match(&policies, &review(&pod_request)), "pods: the selectors decide, so both are needed");
    assert!(!may_match(&policies, &review(&config_map)));

    // Without the object and namespace, a request no rule accepts gets the same results.
    let without = Attributes {
        review: &review(&config_map),
        object: None,
        old_object: None,
        namespace: None,
        deadline: None,
    };
    let steps = |results: Vec<PolicyResult>| -> Vec<(Vec<String>, usize, bool)> {
        results.into_iter().map(|r| (r.steps, r.denials.len(), r.matched)).collect()
    };
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"tier": "prod"}}});
    let with = run_with(
        vec![policy("p", selective)],
        vec![deny("p", &["Deny"])],
        vec![],
        config_map.clone(),
        Some(namespace),
    );
    assert_eq!(steps(evaluate(&policies, &without, &NoLookups)), steps(with.results));

    // Rules that accept another version of the resource under Equivalent count; no rules, too.
    let extensions = json!({"matchPolicy": "Equivalent", "resourceRules": [{"operations": ["CREATE"],
        "apiGroups": ["extensions"], "apiVersions": ["v1beta1"], "resources": ["deployments"]}]});
    let deployment = json!({"uid": "1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "name": "web",
        "namespace": "default", "operation": "CREATE", "object": {"metadata": {"name": "web"}}});
    let spec = json!({"matchConstraints": extensions, "validations": [{"expression": "true"}]});
    let (policies, _) = compile(vec![policy("p", spec.clone())], vec![deny("p", &["Deny"])], vec![]);
    assert!(may_match(&policies, &review(&deployment)));
    let mut exact = spec;
    exact["matchConstraints"]["matchPolicy"] = json!("Exact");
    let (policies, _) = compile(vec![policy("p", exact)], vec![deny("p", &["Deny"])], vec![]);
    assert!(!may_match(&policies, &review(&deployment)));
    let (unbound, _) = compile(
        vec![policy("p", json!({"matchConstraints": pods_rule(), "validations": [{"expression": "false"}]}))],
        vec![],
        vec![],
    );
    assert!(!may_match(&unbound, &review(&pod_request)), "a policy without bindings never matches");
}
