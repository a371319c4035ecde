//! ValidatingAdmissionPolicies (docs/policies.md) through the gateway: evaluated after the
//! mutating webhooks and before the validating ones, with the API server's messages, codes,
//! warnings and audit annotations; shadowed beside the webhook they replace, the agreement
//! counted. Expected texts are those of kubernetes/kubernetes
//! `test/integration/apiserver/cel/validatingadmissionpolicy_test.go`.

use serde_json::{json, Value};
use std::collections::HashMap;

use crate::support::binary::{run, text, write, Served};
use crate::support::fixtures::{self, NAMESPACE_CREATE, POD_UPDATE};
use crate::support::prometheus;
use crate::support::{mutating, reply, validating, webhook, Fleet, MockWebhook, TestGateway};

/// A ValidatingAdmissionPolicy on `resources` (core group) for `operations`.
fn policy(name: &str, operations: &[&str], resources: &[&str], spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": resources,
            }]},
        },
    });
    for (field, value) in spec.as_object().expect("spec fields") {
        object["spec"][field] = value.clone();
    }
    object
}

/// A binding of `policy` with these actions.
fn binding(name: &str, policy: &str, actions: &[&str]) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions},
    })
}

fn annotated(mut object: Value, annotations: &[(&str, &str)]) -> Value {
    for (key, value) in annotations {
        object["metadata"]["annotations"][*key] = json!(value);
    }
    object
}

/// The namespace-suffix policy of the upstream integration test.
fn namespace_suffix(actions: &[&str]) -> Fleet {
    with_namespace_suffix(Fleet::default(), actions, "validate-namespace-suffix-binding")
}

/// The metrics are the process's: a test that reads them binds the policy under a name of its
/// own.
fn with_namespace_suffix(fleet: Fleet, actions: &[&str], binding_name: &str) -> Fleet {
    fleet
        .object(policy(
            "validate-namespace-suffix",
            &["CREATE"],
            &["namespaces"],
            json!({"validations": [{"expression": "object.metadata.name.endsWith('k8s')"}]}),
        ))
        .object(binding(binding_name, "validate-namespace-suffix", actions))
}

fn namespace_named(name: &str) -> Value {
    let mut review = fixtures::review(NAMESPACE_CREATE);
    review["request"]["name"] = json!(name);
    review["request"]["namespace"] = json!(name);
    review["request"]["object"]["metadata"]["name"] = json!(name);
    review
}

fn pod_named(name: &str) -> Value {
    let mut review = fixtures::review(POD_UPDATE);
    review["request"]["name"] = json!(name);
    review["request"]["uid"] = json!(format!("uid-{name}"));
    review["request"]["object"]["metadata"]["name"] = json!(name);
    review
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denying_policy_answers_as_the_api_server_and_the_validating_webhooks_are_not_called() {
    let later = MockWebhook::allowing().spawn().await;
    let fleet = Fleet::of([validating(
        "later",
        [webhook("later.policies.example.com", &later).rule(&["CREATE"], &["namespaces"])],
    )]);
    let fleet = with_namespace_suffix(fleet, &["Deny"], "validate-namespace-suffix-binding");
    let gateway = TestGateway::start(fleet).await;

    for endpoint in ["/validate", "/admit"] {
        let answer = gateway.review(endpoint, &namespace_named("test-foobar")).await;
        assert!(!answer.allowed(), "{endpoint}: {}", answer.body);
        assert_eq!(
            answer.message(),
            "namespaces \"test-foobar\" is forbidden: ValidatingAdmissionPolicy 'validate-namespace-suffix' with binding 'validate-namespace-suffix-binding' denied request: failed expression: object.metadata.name.endsWith('k8s')",
            "{endpoint}"
        );
        assert_eq!(answer.code(), Some(422), "{endpoint}");
        assert_eq!(answer.reason(), "Invalid", "{endpoint}");
    }
    // A denial stops the chain: the validating webhook was never asked.
    assert_eq!(later.calls(), 0);
    let allowed = gateway.validate(&namespace_named("test-k8s")).await;
    assert!(allowed.allowed(), "{}", allowed.body);
    assert_eq!(later.calls(), 1, "allowed by the policy, the webhooks are called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admit_evaluates_the_mutated_object_and_validate_the_object_received() {
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/owner", "value": "team-a"}]))
            .spawn()
            .await;
    let fleet = Fleet::of([mutating(
        "owners",
        [webhook("owner.policies.example.com", &label).rule(&["UPDATE"], &["pods"])],
    )])
    .object(policy(
        "owner-required",
        &["UPDATE"],
        &["pods"],
        json!({"validations": [{
            "expression": "has(object.metadata.labels) && 'owner' in object.metadata.labels",
            "message": "pods need an owner label",
            "reason": "Forbidden",
        }]}),
    ))
    .object(binding("owner-required-binding", "owner-required", &["Deny"]));
    let gateway = TestGateway::start(fleet).await;

    let admitted = gateway.admit(&pod_named("web")).await;
    assert!(admitted.allowed(), "the owner label was added before the policy ran: {}", admitted.body);
    let validated = gateway.validate(&pod_named("web")).await;
    assert!(!validated.allowed(), "{}", validated.body);
    assert_eq!(
        validated.message(),
        "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'owner-required' with binding 'owner-required-binding' denied request: pods need an owner label"
    );
    assert_eq!((validated.code(), validated.reason()), (Some(403), "Forbidden"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_and_audit_actions_allow_with_the_api_servers_warning_and_audit_annotation() {
    let binding = "validate-actions-audit-binding";
    let gateway =
        TestGateway::start(with_namespace_suffix(Fleet::default(), &["Warn", "Audit"], binding)).await;
    let answer = gateway.validate(&namespace_named("test-foobar")).await;
    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'validate-namespace-suffix' with binding 'validate-actions-audit-binding': failed expression: object.metadata.name.endsWith('k8s')"]
    );
    // The gateway returns `A/B` keys as `A_B` (the API server prefixes them with its name).
    let audit = answer
        .annotation("validation.policy.admission.k8s.io_validation_failure")
        .unwrap_or_else(|| panic!("no validation_failure annotation: {:?}", answer.annotation_keys()));
    assert_eq!(
        audit,
        r#"[{"message":"failed expression: object.metadata.name.endsWith('k8s')","policy":"validate-namespace-suffix","binding":"validate-actions-audit-binding","expressionIndex":0,"validationActions":["Warn","Audit"]}]"#
    );
    // The API server's check family: one observation per action taken.
    let (_, text) = gateway.admin_get("/metrics").await;
    let mut checks: Vec<(String, u64)> = prometheus::matching(
        &text,
        "apiserver_validating_admission_policy_check_total",
        &[("policy", "validate-namespace-suffix"), ("policy_binding", binding)],
    )
    .into_iter()
    .map(|(labels, value)| {
        let label =
            |name: &str| labels.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v.clone()).unwrap();
        (format!("{}/{}", label("error_type"), label("enforcement_action")), value as u64)
    })
    .collect();
    checks.sort();
    assert_eq!(checks, [("invalid_error/audit".to_owned(), 1), ("invalid_error/warn".to_owned(), 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_from_the_configuration_feeds_the_message_and_the_audit_annotation() {
    let params = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "replica-limit", "namespace": "default"},
        "data": {"prefix": "prod-"},
    });
    let mut bound = binding("prefix-binding", "name-prefix", &["Deny"]);
    bound["spec"]["paramRef"] =
        json!({"name": "replica-limit", "namespace": "default", "parameterNotFoundAction": "Deny"});
    let fleet = Fleet::default()
        .object(policy(
            "name-prefix",
            &["UPDATE"],
            &["pods"],
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "validations": [{
                    "expression": "object.metadata.name.startsWith(params.data.prefix)",
                    "messageExpression": "'name must start with ' + params.data.prefix",
                }],
                "auditAnnotations": [{"key": "prefix", "valueExpression": "string(params.data.prefix)"}],
            }),
        ))
        .object(bound)
        .object(params);
    let gateway = TestGateway::start(fleet).await;

    let denied = gateway.validate(&pod_named("web")).await;
    assert!(!denied.allowed(), "{}", denied.body);
    assert_eq!(
        denied.message(),
        "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'name-prefix' with binding 'prefix-binding' denied request: name must start with prod-"
    );
    assert_eq!(denied.annotation("name-prefix_prefix"), Some("prod-"), "{:?}", denied.annotation_keys());
    let allowed = gateway.validate(&pod_named("prod-web")).await;
    assert!(allowed.allowed(), "{}", allowed.body);
}

/// `result/disagreement` → count of `family` for `policy`.
async fn counted(gateway: &TestGateway, family: &str, policy: &str) -> HashMap<String, u64> {
    let (_, text) = gateway.admin_get("/metrics").await;
    prometheus::matching(&text, family, &[("policy", policy)])
        .into_iter()
        .map(|(labels, value)| {
            let label = |name: &str| {
                labels.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v.clone()).unwrap_or_default()
            };
            (format!("{}/{}", label("result"), label("disagreement")), value as u64)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadowed_policy_beside_the_webhook_it_replaces_counts_exactly_the_requests_they_differ_on() {
    // The webhook refuses names starting with "bad"; the policy meant to replace it refuses
    // names containing "bad": they differ on "x-bad" only.
    let names = MockWebhook::answering(|review: &Value| {
        let name = review["request"]["name"].as_str().unwrap_or_default();
        if name.starts_with("bad") {
            reply::deny(review, "bad names are refused")
        } else {
            reply::allow(review)
        }
    })
    .spawn()
    .await;
    let replacing = annotated(
        policy(
            "no-bad-names",
            &["UPDATE"],
            &["pods"],
            json!({"validations": [{"expression": "!object.metadata.name.contains('bad')"}]}),
        ),
        &[
            ("admission-gateway/mode", "shadow"),
            ("admission-gateway/replaces", "names/names.policies.example.com"),
        ],
    );
    let fleet = Fleet::of([validating(
        "names",
        [webhook("names.policies.example.com", &names).rule(&["UPDATE"], &["pods"])],
    )])
    .object(replacing)
    .object(binding("no-bad-names-binding", "no-bad-names", &["Deny"]));
    let gateway = TestGateway::start(fleet).await;

    for (name, allowed) in
        [("good-1", true), ("good-2", true), ("bad-1", false), ("bad-2", false), ("x-bad", true)]
    {
        let answer = gateway.validate(&pod_named(name)).await;
        assert_eq!(
            answer.allowed(),
            allowed,
            "{name}: the webhook decides, the policy is shadowed: {}",
            answer.body
        );
    }
    let agreement =
        counted(&gateway, "admission_gateway_policy_webhook_agreement_total", "no-bad-names").await;
    assert_eq!(
        agreement,
        HashMap::from([("agree/".to_owned(), 4), ("disagree/policy_denies".to_owned(), 1)])
    );
    let shadow = counted(&gateway, "admission_gateway_policy_shadow_results_total", "no-bad-names").await;
    assert_eq!(shadow, HashMap::from([("agree/".to_owned(), 4), ("disagree/would_deny".to_owned(), 1)]));
    // A shadowed policy acts on nothing: the API server's check family counts no action of it.
    let (_, text) = gateway.admin_get("/metrics").await;
    assert!(prometheus::matching(
        &text,
        "apiserver_validating_admission_policy_check_total",
        &[("policy", "no-bad-names")]
    )
    .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_checks_policies_naming_every_problem_and_serves_them() {
    let dir = tempfile::tempdir().unwrap();
    let broken = Fleet::default()
        .object(policy(
            "broken",
            &["CREATE"],
            &["namespaces"],
            json!({"validations": [
                {"expression": "object.metadata.name.endsWith("},
                {"expression": "true", "reason": "Teapot"},
            ]}),
        ))
        .object(binding("broken-binding", "broken", &["Deny", "Warn"]));
    let file = write(dir.path(), "broken.yaml", &broken.yaml());
    let output = run(&["check", "--config", &file]).await;
    let printed = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    for expected in [
        "ValidatingAdmissionPolicy \"broken\"",
        "spec.validations[0].expression",
        "spec.validations[1].reason",
        "ValidatingAdmissionPolicyBinding \"broken-binding\"",
        "spec.validationActions",
    ] {
        assert!(printed.contains(expected), "{expected:?} not in:\n{printed}");
    }

    let served = Served::serve(dir.path(), &namespace_suffix(&["Deny"]), &[]);
    let serving = served
        .next_line(|line| (line["fields"]["message"] == "serving").then_some(()))
        .await
        .expect("serving within 10 s");
    let address = serving["fields"]["address"].as_str().unwrap().to_owned();
    let answer =
        crate::support::binary::post_review(&address, "/validate", &namespace_named("test-foobar")).await;
    assert_eq!(answer["response"]["allowed"], json!(false), "{answer}");
    assert_eq!(answer["response"]["status"]["code"], json!(422), "{answer}");
    assert_eq!(answer["response"]["status"]["reason"], json!("Invalid"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_and_canary_modes_run_a_policy_as_they_run_a_webhook() {
    let in_mode = |mode: &str, percent: Option<&str>| {
        let mut annotations = vec![("admission-gateway/mode", mode)];
        if let Some(percent) = percent {
            annotations.push(("admission-gateway/canary-percent", percent));
        }
        let policy = annotated(
            policy(
                "no-bad-names",
                &["UPDATE"],
                &["pods"],
                json!({"validations": [{"expression": "!object.metadata.name.contains('bad')", "message": "no bad names"}]}),
            ),
            &annotations,
        );
        Fleet::default().object(policy).object(binding("no-bad-names-binding", "no-bad-names", &["Deny"]))
    };
    // Warn: the denial is returned as a warning, the request allowed.
    let gateway = TestGateway::start(in_mode("warn", None)).await;
    let answer = gateway.validate(&pod_named("bad-1")).await;
    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.warnings(),
        ["admission-gateway warn mode: pods \"bad-1\" is forbidden: ValidatingAdmissionPolicy 'no-bad-names' with binding 'no-bad-names-binding' denied request: no bad names"]
    );
    // Canary at 100 %: enforced for every object; at 0 %: for none (shadowed).
    gateway.reconfigure(&in_mode("canary", Some("100")));
    let enforced = crate::support::eventually(std::time::Duration::from_secs(10), || async {
        !gateway.validate(&pod_named("bad-2")).await.allowed()
    })
    .await;
    assert!(enforced, "the canary at 100 % denies once reloaded");
    gateway.reconfigure(&in_mode("canary", Some("0")));
    let shadowed = crate::support::eventually(std::time::Duration::from_secs(10), || async {
        let answer = gateway.validate(&pod_named("bad-3")).await;
        answer.allowed() && answer.warnings().is_empty()
    })
    .await;
    assert!(shadowed, "the canary at 0 % is only shadowed once reloaded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policys_match_conditions_are_counted_in_the_api_servers_match_condition_families() {
    let conditioned = policy(
        "conditioned-policy",
        &["UPDATE"],
        &["pods"],
        json!({
            "matchConditions": [
                {"name": "not-system", "expression": "!object.metadata.name.startsWith('system-')"},
                {"name": "broken", "expression": "object.metadata.name.startsWith('broken-') ? object.nope == 1 : true"},
            ],
            "validations": [{"expression": "true"}],
        }),
    );
    let fleet = Fleet::default().object(conditioned).object(binding(
        "conditioned-policy-binding",
        "conditioned-policy",
        &["Deny"],
    ));
    let gateway = TestGateway::start(fleet).await;
    // Excluded by a false condition; then a condition that fails (failurePolicy Fail: denied).
    assert!(gateway.validate(&pod_named("system-web")).await.allowed());
    assert!(!gateway.validate(&pod_named("broken-web")).await.allowed());
    assert!(gateway.validate(&pod_named("web")).await.allowed());

    let (_, text) = gateway.admin_get("/metrics").await;
    let series = |family: &str| {
        prometheus::matching(
            &text,
            family,
            &[("name", "conditioned-policy"), ("kind", "policy"), ("type", "validate")],
        )
        .into_iter()
        .map(|(_, value)| value as u64)
        .sum::<u64>()
    };
    assert_eq!(series("apiserver_admission_match_condition_evaluation_seconds_count"), 2, "{text}");
    assert_eq!(series("apiserver_admission_match_condition_evaluation_errors_total"), 1, "{text}");
}

/// A policy that is slow even upstream: a selector binds 200 ConfigMaps of 200 keys, and each
/// is read against every label of a Pod named `heavy…` (seconds of CEL per review), under
/// `failure_policy`. Other Pods are excluded by a matchCondition.
fn slow_fleet(failure_policy: &str) -> Fleet {
    let mut bound = binding("slow-binding", "slow", &["Deny"]);
    bound["spec"]["paramRef"] =
        json!({"selector": {}, "namespace": "team-a", "parameterNotFoundAction": "Deny"});
    let mut fleet = Fleet::default()
        .namespace("team-a", &[])
        .object(policy(
            "slow",
            &["CREATE", "UPDATE"],
            &["pods"],
            json!({
                "failurePolicy": failure_policy,
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConditions": [{"name": "heavy", "expression": "object.metadata.name.startsWith('heavy')"}],
                "validations": [{"expression": "params.data.all(k, object.metadata.labels.all(j, j != k))"}],
            }),
        ))
        .object(bound);
    for i in 0..200 {
        let data: serde_json::Map<String, Value> =
            (0..200).map(|k| (format!("key-{k}"), json!("v"))).collect();
        fleet = fleet.object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("limits-{i:03}"), "namespace": "team-a"}, "data": data}));
    }
    fleet
}

/// A Pod named `name` with 400 labels.
fn labelled_pod(name: &str) -> Value {
    let mut review = pod_named(name);
    let labels: serde_json::Map<String, Value> =
        (0..400).map(|i| (format!("label-{i}"), json!("x"))).collect();
    review["request"]["object"]["metadata"]["labels"] = Value::Object(labels);
    review
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_policy_holds_up_no_other_review_and_fails_at_the_callers_deadline() {
    for (failure_policy, allowed) in [("Fail", false), ("Ignore", true)] {
        let dir = tempfile::tempdir().unwrap();
        // One serving thread: an evaluation on it would stop every other review.
        let served = Served::serve(dir.path(), &slow_fleet(failure_policy), &["--threads", "1"]);
        let address = served.logged("serving", "address").await.expect("serving within 10 s");
        let started = std::time::Instant::now();
        let slow: Vec<_> = ["heavy-1", "heavy-2"]
            .into_iter()
            .map(|name| {
                let (address, review) = (address.clone(), labelled_pod(name));
                tokio::spawn(async move {
                    crate::support::binary::post_review(&address, "/validate?timeout=3s", &review).await
                })
            })
            .collect();
        // Until both are being evaluated (a `review` of a fresh process takes milliseconds).
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;

        // Meanwhile: a Pod the matchCondition excludes, and a Secret no policy is for.
        for bystander in [labelled_pod("light"), fixtures::review(crate::support::fixtures::SECRET_CREATE)] {
            let answer =
                crate::support::binary::post_review(&address, "/validate?timeout=3s", &bystander).await;
            assert_eq!(answer["response"]["allowed"], json!(true), "{answer}");
        }
        assert!(
            slow.iter().all(|review| !review.is_finished()),
            "{failure_policy}: the bystanders were answered only after the slow reviews"
        );

        for review in slow {
            let answer = review.await.unwrap();
            assert_eq!(answer["response"]["allowed"], json!(allowed), "{failure_policy}: {answer}");
            if !allowed {
                let message = answer["response"]["status"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("the review's deadline passed"), "{message}");
            }
        }
        // Answered by the caller's deadline (the gateway keeps a margin for its answer), with
        // room for a loaded machine's scheduling.
        let elapsed = started.elapsed();
        assert!(elapsed < std::time::Duration::from_secs(5), "{failure_policy}: answered after {elapsed:?}");
    }
}
