//! MutatingAdmissionPolicies through the real binary with real webhooks on loopback: their place
//! before the mutating webhooks, the reinvocation round they share (the table of upstream's
//! behaviour, counted in runs and calls), the one combined patch, a denial that stops the chain,
//! a shadowed policy compared with the webhook it replaces, and the API server's metric family.

use serde_json::{json, Value};

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{mutating, reply, webhook, Fleet, MockWebhook, TestGateway};

fn policy(name: &str, reinvocation: &str, mutations: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                    "reinvocationPolicy": reinvocation, "mutations": mutations}})
}

fn binding(policy: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
           "metadata": {"name": format!("{policy}-binding")}, "spec": {"policyName": policy}})
}

/// Counts its runs in the `runs` annotation.
fn counter(reinvocation: &str) -> Value {
    policy(
        "count",
        reinvocation,
        json!([{"patchType": "JSONPatch", "jsonPatch": {"expression":
            "[JSONPatch{op: 'add', path: '/metadata/annotations/runs', value: string(int(object.metadata.?annotations.runs.orValue('0')) + 1)}]"}}]),
    )
}

/// A webhook that, when `changes`, counts its own calls in the annotation `key`.
fn counting_webhook(key: &'static str, changes: bool) -> MockWebhook {
    MockWebhook::answering(move |review| {
        if !changes {
            return reply::allow(review);
        }
        let seen = review["request"]["object"]["metadata"]["annotations"][key].as_str().unwrap_or("0");
        let next = seen.parse::<u32>().unwrap_or(0) + 1;
        reply::patch(
            review,
            &json!([{"op": "add", "path": format!("/metadata/annotations/{key}"), "value": next.to_string()}]),
        )
    })
}

/// The object after the answer's combined patch.
async fn answered(gateway: &TestGateway) -> (Value, crate::support::Answer) {
    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;
    assert!(answer.allowed(), "{}", answer.body);
    (answer.patched(&fixtures::object(POD_CREATE)), answer)
}

fn runs(object: &Value) -> &str {
    object["metadata"]["annotations"]["runs"].as_str().unwrap_or("0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_and_webhooks_share_one_reinvocation_round_as_upstream_runs_them() {
    // (policy reinvocation, [(webhook reinvocation IfNeeded, changes)], policy runs, calls each)
    type Row = (&'static str, &'static [(bool, bool)], &'static str, usize);
    let table: [Row; 6] = [
        ("IfNeeded", &[], "2", 0),
        ("Never", &[], "1", 0),
        ("IfNeeded", &[(false, true)], "2", 1),
        ("Never", &[(true, false)], "1", 1),
        ("IfNeeded", &[(true, false)], "2", 2),
        ("IfNeeded", &[(true, true), (true, true)], "2", 2),
    ];
    for (reinvocation, hooks, policy_runs, calls) in table {
        let keys = ["w1", "w2"];
        let mut mocks = Vec::new();
        for (i, (_, changes)) in hooks.iter().enumerate() {
            mocks.push(counting_webhook(keys[i], *changes).spawn().await);
        }
        let webhooks = hooks.iter().zip(&mocks).enumerate().map(|(i, ((if_needed, _), mock))| {
            let hook = webhook(&format!("{}.example.com", keys[i]), mock);
            if *if_needed {
                hook.if_needed()
            } else {
                hook
            }
        });
        let mut fleet = Fleet::of([mutating("hooks", webhooks.collect::<Vec<_>>())]);
        fleet = fleet.object(counter(reinvocation)).object(binding("count"));
        let gateway = TestGateway::start(fleet).await;
        let (object, _) = answered(&gateway).await;
        let case = format!("policy {reinvocation}, webhooks {hooks:?}");
        assert_eq!(runs(&object), policy_runs, "{case}");
        for mock in &mocks {
            assert_eq!(mock.calls(), calls, "{case}");
            // The webhook is called after the policy: it sees its first run.
            assert_eq!(mock.requests()[0].object()["metadata"]["annotations"]["runs"], json!("1"), "{case}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_configuration_and_a_webhook_patch_reach_the_caller_as_one_patch() {
    let owner =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/annotations/owner", "value": "me"}]))
            .spawn()
            .await;
    let merge = policy(
        "team",
        "Never",
        json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'team': 'platform'}}, spec: Object.spec{containers: [Object.spec.containers{name: object.spec.containers[0].name, image: 'registry.example.com/web:2'}]}}"}}]),
    );
    let fleet = Fleet::of([mutating("hooks", [webhook("owner.example.com", &owner)])])
        .object(merge)
        .object(binding("team"));
    let gateway = TestGateway::start(fleet).await;
    let (object, answer) = answered(&gateway).await;
    let received = fixtures::object(POD_CREATE);
    let mut expected = received.clone();
    expected["metadata"]["labels"]["team"] = json!("platform");
    expected["metadata"]["annotations"]["owner"] = json!("me");
    // Merged by key: the container keeps its other fields.
    expected["spec"]["containers"][0]["image"] = json!("registry.example.com/web:2");
    assert_eq!(object, expected, "{}", answer.body);
    assert_eq!(owner.only_request().label("team"), Some("platform"), "the webhook sees the policy's change");
    // Mutating policies add no annotations of their own.
    assert!(answer.annotation_keys().iter().all(|k| !k.contains("policy")), "{:?}", answer.annotation_keys());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_error_under_fail_denies_before_any_webhook_is_called() {
    let hook = MockWebhook::allowing().spawn().await;
    let broken = policy(
        "broken",
        "Never",
        json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'replace', path: '/metadata/labels/missing', value: 'x'}]"}}]),
    );
    let fleet = Fleet::of([mutating("hooks", [webhook("a.example.com", &hook)])])
        .object(broken)
        .object(binding("broken"));
    let gateway = TestGateway::start(fleet).await;
    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert_eq!(answer.code(), Some(403));
    assert_eq!(answer.reason(), "Invalid");
    assert_eq!(
        answer.message(),
        "policy 'broken' with binding 'broken-binding' denied request: JSON Patch: replace operation does not apply: doc is missing key: /metadata/labels/missing: missing value"
    );
    assert_eq!(hook.calls(), 0);
    let metrics = gateway.admin_get("/metrics").await.1;
    assert!(
        metrics.lines().any(|l| l.starts_with("apiserver_mutating_admission_policy_check_total{")
            && l.contains("policy=\"broken\"")
            && l.contains("error_type=\"invalid_error\"")
            && l.ends_with(" 1")),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadowed_policy_is_compared_with_the_webhook_it_replaces_on_the_objects_both_leave() {
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/team", "value": "platform"}]))
            .spawn()
            .await;
    let shadowed = |name: &str, team: &str| {
        let mut object = policy(
            name,
            "Never",
            json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                format!("Object{{metadata: Object.metadata{{labels: {{'team': '{team}'}}}}}}")}}]),
        );
        object["metadata"]["annotations"] = json!({"admission-gateway/mode": "shadow",
            "admission-gateway/replaces": "hooks/label.example.com"});
        object
    };
    let fleet = Fleet::of([mutating("hooks", [webhook("label.example.com", &label)])])
        .object(shadowed("same", "platform"))
        .object(binding("same"))
        .object(shadowed("other", "payments"))
        .object(binding("other"));
    let gateway = TestGateway::start(fleet).await;
    let (object, _) = answered(&gateway).await;
    assert_eq!(object["metadata"]["labels"]["team"], json!("platform"), "only the webhook mutated");
    assert_eq!(label.only_request().label("team"), None, "a shadowed policy's change reaches no webhook");
    let metrics = gateway.admin_get("/metrics").await.1;
    let series = |policy: &str, result: &str| {
        metrics.lines().any(|l| {
            l.starts_with("admission_gateway_policy_webhook_agreement_total{")
                && l.contains(&format!("policy=\"{policy}\""))
                && l.contains(&format!("result=\"{result}\""))
                && l.ends_with(" 1")
        })
    };
    assert!(series("same", "agree"), "{metrics}");
    assert!(series("other", "disagree") && metrics.contains("disagreement=\"objects_differ\""), "{metrics}");
    assert!(
        !metrics.lines().any(|l| l.starts_with("apiserver_mutating_admission_policy_check_total{")
            && (l.contains("policy=\"same\"") || l.contains("policy=\"other\""))),
        "a shadowed policy acts on nothing: {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_policy_mutates_its_share_of_objects_the_same_ones_every_time() {
    // Its own name: the metric families are the test process's, shared with other tests.
    let mut canary = counter("Never");
    canary["metadata"]["name"] = json!("canary-count");
    canary["metadata"]["annotations"] =
        json!({"admission-gateway/mode": "canary", "admission-gateway/canary-percent": "50"});
    let gateway = TestGateway::start(Fleet::default().object(canary).object(binding("canary-count"))).await;
    // Objects are placed in a bucket by namespace and name.
    let review = |i: usize| {
        let mut review = fixtures::review(POD_CREATE);
        review["request"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
        review["request"]["name"] = json!(format!("web-{i}"));
        review["request"]["object"]["metadata"]["name"] = json!(format!("web-{i}"));
        review
    };
    let mut mutated = Vec::new();
    for i in 0..64 {
        let answer = gateway.mutate(&review(i)).await;
        assert!(answer.allowed(), "{}", answer.body);
        let object = answer.patched(&fixtures::object(POD_CREATE));
        mutated.push(runs(&object) == "1");
    }
    let share = mutated.iter().filter(|m| **m).count();
    assert!((16..=48).contains(&share), "about half the objects are mutated: {share} of 64");
    for (i, was) in mutated.iter().enumerate().take(16) {
        let again = gateway.mutate(&review(i)).await.patched(&fixtures::object(POD_CREATE));
        assert_eq!(runs(&again) == "1", *was, "review {i} lands in the same bucket again");
    }
    let applied = mutated.iter().filter(|m| **m).count() + mutated.iter().take(16).filter(|m| **m).count();
    // Observations are recorded as each review is answered: read until all are in.
    let counted = |metrics: &str| -> usize {
        let checks: f64 = metrics
            .lines()
            .filter(|l| {
                l.starts_with("apiserver_mutating_admission_policy_check_total{")
                    && l.contains("policy=\"canary-count\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        checks as usize
    };
    let all_in = crate::support::eventually(std::time::Duration::from_secs(10), || async {
        counted(&gateway.admin_get("/metrics").await.1) >= applied
    })
    .await;
    let metrics = gateway.admin_get("/metrics").await.1;
    assert!(all_in, "{metrics}");
    assert_eq!(
        counted(&metrics),
        applied,
        "only the mutations applied are counted in the API server's family: {metrics}"
    );
}
