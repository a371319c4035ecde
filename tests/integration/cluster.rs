//! Cluster mode against a real kube-apiserver on loopback (`support::control_plane`): namespace
//! labels followed live, unknown namespaces looked up, the fleet from ConfigMaps with Events on
//! a refused one, the CEL authorizer answered by real RBAC — the gateway running with exactly
//! the grants of `deploy/base/rbac.yaml`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use admission_gateway::cluster::ClusterOptions;
use serde_json::{json, Value};

use crate::support::control_plane::{ControlPlane, Identity};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{eventually, validating, webhook, Fleet, MockWebhook, TestGateway};

const GATEWAY_NAMESPACE: &str = "admission-gateway";
const FLEET_LABEL: &str = "admission-gateway/fleet=true";

/// The pod fixture in `namespace`, asked by `user`.
fn pod_in(namespace: &str, user: &str) -> Value {
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    review["request"]["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
    review
}

async fn kubectl(cluster: &ControlPlane, args: &[&str]) -> String {
    cluster.kubectl_ok(Identity::Admin, args).await
}

/// The gateway's namespace and the grants of deploy/base/rbac.yaml, as a platform team
/// applies them.
async fn grant_the_gateway(cluster: &ControlPlane) {
    kubectl(cluster, &["create", "namespace", GATEWAY_NAMESPACE]).await;
    let rbac = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml");
    kubectl(cluster, &["apply", "-n", GATEWAY_NAMESPACE, "-f", rbac.to_str().unwrap()]).await;
}

fn options(cluster: &ControlPlane, fleet_selector: Option<&str>) -> ClusterOptions {
    ClusterOptions {
        kubeconfig: Some(cluster.kubeconfig(Identity::Gateway)),
        fleet_selector: fleet_selector.map(str::to_owned),
        fleet_namespace: Some(GATEWAY_NAMESPACE.to_owned()),
        max_staleness: Duration::from_secs(30),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_labels_follow_the_cluster_while_reviews_flow() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    kubectl(&cluster, &["create", "namespace", "team-a"]).await;
    let strict = MockWebhook::denying("strict namespaces only").spawn().await;
    let fleet = Fleet::of([validating(
        "policy",
        [webhook("strict.example.com", &strict)
            .namespace_selector(json!({"matchLabels": {"policy": "strict"}}))],
    )]);
    let gateway = TestGateway::start_in_cluster(Some(fleet), options(&cluster, None)).await;
    assert!(
        eventually(Duration::from_secs(10), || async { gateway.admin_get("/readyz").await.0 == 200 }).await,
        "ready once the namespace cache has synced"
    );
    let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
    assert!(verbose.contains("[+]namespaces ok"), "{verbose}");

    // Not labelled: the selector does not match.
    let answer = gateway.validate(&pod_in("team-a", "alice")).await;
    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(strict.calls(), 0);

    // Relabelled while the gateway runs: denied within a second, as the API server would.
    kubectl(&cluster, &["label", "namespace", "team-a", "policy=strict"]).await;
    let relabelled = Instant::now();
    let denied = eventually(Duration::from_secs(1), || async {
        !gateway.validate(&pod_in("team-a", "alice")).await.allowed()
    })
    .await;
    assert!(denied, "still allowed {:?} after the relabel", relabelled.elapsed());
    let answer = gateway.validate(&pod_in("team-a", "alice")).await;
    assert!(answer.message().contains("strict namespaces only"), "{}", answer.body);

    // A namespace nobody configured: its real labels, not a 404.
    let answer = gateway.validate(&pod_in("default", "alice")).await;
    assert!(answer.allowed(), "{}", answer.body);

    // Created a moment ago, then labelled strict: found (cache or live lookup) and denied
    // within a second. At once is a race: the cache may hold the creation and not yet the
    // label, as the API server's own namespace informer may.
    kubectl(&cluster, &["create", "namespace", "fresh"]).await;
    kubectl(&cluster, &["label", "namespace", "fresh", "policy=strict"]).await;
    let labelled = Instant::now();
    let denied = eventually(Duration::from_secs(1), || async {
        !gateway.validate(&pod_in("fresh", "alice")).await.allowed()
    })
    .await;
    assert!(denied, "still allowed {:?} after the label", labelled.elapsed());

    // A namespace that does not exist: the API server's 404, word for word.
    let answer = gateway.validate(&pod_in("ghost", "alice")).await;
    assert_eq!(answer.code(), Some(404), "{}", answer.body);
    assert_eq!(answer.message(), r#"namespaces "ghost" not found"#);

    // Deleted (finalized at once: no namespace controller runs here): 404 once the watch says so.
    kubectl(&cluster, &["delete", "namespace", "team-a", "--wait=false"]).await;
    let finalized = kubectl(&cluster, &["get", "namespace", "team-a", "-o", "json"]).await;
    let mut namespace: Value = serde_json::from_str(&finalized).unwrap();
    namespace["spec"]["finalizers"] = json!([]);
    let output = cluster
        .kubectl_with_stdin(
            Identity::Admin,
            &["replace", "--raw", "/api/v1/namespaces/team-a/finalize", "-f", "-"],
            Some(namespace.to_string()),
        )
        .await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let gone = eventually(Duration::from_secs(5), || async {
        gateway.validate(&pod_in("team-a", "alice")).await.code() == Some(404)
    })
    .await;
    assert!(gone, "a deleted namespace is not found");

    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert!(metrics.contains("admission_gateway_namespace_cache_synced 1\n"), "{metrics}");
    assert!(metrics.contains("admission_gateway_namespace_cache_stale 0\n"), "{metrics}");
    gateway.shutdown().await;
}

fn fleet_configmap(name: &str, fleet: &Fleet) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": GATEWAY_NAMESPACE, "labels": {"admission-gateway/fleet": "true"}},
        "data": {"fleet.yaml": fleet.yaml()},
    }))
    .unwrap()
}

async fn apply(cluster: &ControlPlane, object: &str) {
    cluster.apply_ok(Identity::Admin, object).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_comes_from_configmaps_changed_broken_and_fixed() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    let deny = MockWebhook::denying("denied by the ConfigMap fleet").spawn().await;
    let allow = MockWebhook::allowing().spawn().await;
    let denying = Fleet::of([validating("from-configmap", [webhook("deny.example.com", &deny)])]);
    apply(&cluster, &fleet_configmap("fleet", &denying)).await;
    // Another ConfigMap without the label is not part of the fleet.
    let unlabelled = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other", "namespace": GATEWAY_NAMESPACE},
        "data": {"fleet.yaml": "not: [valid"}});
    apply(&cluster, &unlabelled.to_string()).await;

    let gateway = TestGateway::start_in_cluster(None, options(&cluster, Some(FLEET_LABEL))).await;
    let answer = gateway.validate(&pod_in("default", "alice")).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert!(answer.message().contains("denied by the ConfigMap fleet"), "{}", answer.body);

    // Changed: hot-reloaded.
    let allowing =
        Fleet::of([validating("from-configmap", [webhook("allow.example.com", &allow).timeout_seconds(10)])]);
    apply(&cluster, &fleet_configmap("fleet", &allowing)).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            gateway.validate(&pod_in("default", "alice")).await.allowed()
        })
        .await,
        "the changed ConfigMap is served"
    );
    let calls = allow.calls();
    assert!(calls >= 1);

    // Broken: refused, reported as an Event on the ConfigMap; the last good fleet keeps serving.
    let broken = allowing.yaml().replace("timeoutSeconds: 10", "timeoutSeconds: 99");
    assert_ne!(broken, allowing.yaml(), "the fleet sets timeoutSeconds");
    let broken_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleet", "namespace": GATEWAY_NAMESPACE, "labels": {"admission-gateway/fleet": "true"}},
        "data": {"fleet.yaml": broken}});
    apply(&cluster, &broken_map.to_string()).await;
    let reported = eventually(Duration::from_secs(10), || async {
        let events =
            kubectl(&cluster, &["get", "events.events.k8s.io", "-n", GATEWAY_NAMESPACE, "-o", "json"]).await;
        events.contains("InvalidFleetConfiguration") && events.contains("timeoutSeconds")
    })
    .await;
    assert!(reported, "an Event names the problem");
    let events =
        kubectl(&cluster, &["get", "events.events.k8s.io", "-n", GATEWAY_NAMESPACE, "-o", "json"]).await;
    let events: Value = serde_json::from_str(&events).unwrap();
    let event = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "InvalidFleetConfiguration")
        .expect("the Event");
    assert_eq!(event["regarding"]["kind"], "ConfigMap");
    assert_eq!(event["regarding"]["name"], "fleet");
    assert_eq!(event["type"], "Warning");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("configmap/admission-gateway/fleet/fleet.yaml"), "{note}");
    let answer = gateway.validate(&pod_in("default", "alice")).await;
    assert!(answer.allowed(), "the last good fleet serves: {}", answer.body);
    assert!(allow.calls() > calls);
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert!(metrics.contains("admission_gateway_config_reloads_total{result=\"failure\"} 1\n"), "{metrics}");

    // Fixed: served again.
    apply(&cluster, &fleet_configmap("fleet", &denying)).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            !gateway.validate(&pod_in("default", "alice")).await.allowed()
        })
        .await,
        "the fixed ConfigMap is served"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cel_authorizer_asks_real_rbac() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    kubectl(&cluster, &["create", "namespace", "team-a"]).await;
    // alice may delete pods in team-a, not elsewhere.
    kubectl(&cluster, &["create", "role", "pod-deleter", "-n", "team-a", "--verb=delete", "--resource=pods"])
        .await;
    kubectl(
        &cluster,
        &["create", "rolebinding", "alice-deletes", "-n", "team-a", "--role=pod-deleter", "--user=alice"],
    )
    .await;
    let guarded = MockWebhook::denying("only for pod deleters").spawn().await;
    let by_service_account = MockWebhook::allowing().spawn().await;
    let deleters = webhook("deleters.example.com", &guarded).set(
        "matchConditions",
        json!([{"name": "can-delete", "expression":
            "authorizer.group('').resource('pods').namespace(request.namespace).check('delete').allowed()"}]),
    );
    let gateway_account = webhook("sa.example.com", &by_service_account).set(
        "matchConditions",
        json!([{"name": "gateway-lists-namespaces", "expression":
            "authorizer.serviceAccount('admission-gateway', 'admission-gateway').group('').resource('namespaces').check('list').allowed() && !authorizer.path('/metrics').check('get').allowed()"}]),
    );
    let fleet = Fleet::of([validating("authz", [deleters, gateway_account])]);
    let gateway = TestGateway::start_in_cluster(Some(fleet), options(&cluster, None)).await;

    let answer = gateway.validate(&pod_in("team-a", "alice")).await;
    assert!(!answer.allowed(), "alice can delete pods in team-a: the webhook is called");
    assert!(answer.message().contains("only for pod deleters"), "{}", answer.body);
    assert_eq!(guarded.calls(), 1);

    let answer = gateway.validate(&pod_in("default", "alice")).await;
    assert!(answer.allowed(), "not in default: condition false, webhook skipped: {}", answer.body);
    let answer = gateway.validate(&pod_in("team-a", "bob")).await;
    assert!(answer.allowed(), "bob may not: skipped: {}", answer.body);
    assert_eq!(guarded.calls(), 1);
    // The service-account check (granted by deploy/base/rbac.yaml) held every time.
    assert_eq!(by_service_account.calls(), 3);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_namespace_watch_is_counted_reported_stale_and_recovers() {
    let mut cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    kubectl(&cluster, &["create", "namespace", "team-a"]).await;
    kubectl(&cluster, &["label", "namespace", "team-a", "policy=strict"]).await;
    let strict = MockWebhook::denying("strict namespaces only").spawn().await;
    let fleet = Fleet::of([validating(
        "policy",
        [webhook("strict.example.com", &strict)
            .namespace_selector(json!({"matchLabels": {"policy": "strict"}}))],
    )]);
    let mut options = options(&cluster, None);
    options.max_staleness = Duration::from_secs(1);
    let gateway = TestGateway::start_in_cluster(Some(fleet), options).await;
    assert!(
        eventually(Duration::from_secs(10), || async { gateway.admin_get("/readyz").await.0 == 200 }).await
    );

    cluster.stop_apiserver();
    let stale = eventually(Duration::from_secs(20), || async {
        let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
        verbose.contains("[+]namespaces STALE")
    })
    .await;
    assert!(stale, "reported stale once the watch has been down longer than the bound");
    let (code, _) = gateway.admin_get("/readyz").await;
    assert_eq!(code, 200, "staleness is reported, not a failed readiness");
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert!(metrics.contains("admission_gateway_namespace_cache_stale 1\n"), "{metrics}");
    assert!(!metrics.contains("admission_gateway_namespace_watch_restarts_total 0\n"), "{metrics}");
    // The last labels keep deciding; a namespace the cache lacks cannot be looked up: 500.
    let answer = gateway.validate(&pod_in("team-a", "alice")).await;
    assert!(answer.message().contains("strict namespaces only"), "{}", answer.body);
    let answer = gateway.validate(&pod_in("unknown", "alice")).await;
    assert_eq!(answer.code(), Some(500), "{}", answer.body);
    assert!(
        answer
            .message()
            .starts_with(r#"Internal error occurred: getting namespace "unknown" from the API server"#),
        "{}",
        answer.body
    );

    cluster.start_apiserver().await;
    let recovered = eventually(Duration::from_secs(30), || async {
        let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
        verbose.contains("[+]namespaces ok")
    })
    .await;
    assert!(recovered, "the watch is started again with a full list");
    kubectl(&cluster, &["label", "namespace", "team-a", "policy-"]).await;
    let relaxed = eventually(Duration::from_secs(2), || async {
        gateway.validate(&pod_in("team-a", "alice")).await.allowed()
    })
    .await;
    assert!(relaxed, "changes are followed again after the recovery");
    let (_, metrics) = gateway.admin_get("/metrics").await;
    assert!(metrics.contains("admission_gateway_namespace_cache_stale 0\n"), "{metrics}");
    gateway.shutdown().await;
}

/// A Widget review in `version` of the `widgets.example.com` CRD.
fn widget_in(version: &str) -> Value {
    let mut review = pod_in("default", "alice");
    let request = &mut review["request"];
    request["kind"] = json!({"group": "example.com", "version": version, "kind": "Widget"});
    request["resource"] = json!({"group": "example.com", "version": version, "resource": "widgets"});
    request["requestKind"] = request["kind"].clone();
    request["requestResource"] = request["resource"].clone();
    request["name"] = json!("w1");
    request["object"] = json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 1}});
    review
}

fn widgets_crd(beta_served: bool) -> String {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1beta1", "served": beta_served, "storage": false, "schema": schema},
            ],
        },
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_versions_for_match_policy_equivalent_are_learnt_from_the_cluster() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    apply(&cluster, &widgets_crd(true)).await;
    let v1_only = MockWebhook::allowing().spawn().await;
    let hook = webhook("widgets-v1.example.com", &v1_only).set(
        "rules",
        json!([{"operations": ["*"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"]}]),
    );
    let gateway = TestGateway::start_in_cluster(
        Some(Fleet::of([validating("widgets", [hook])])),
        options(&cluster, None),
    )
    .await;

    // v1 matches exactly: called.
    assert!(gateway.validate(&widget_in("v1")).await.allowed());
    assert_eq!(v1_only.calls(), 1);
    // v1beta1 shares storage with v1 (the CRD says so): the API server would convert and call;
    // the gateway cannot convert, so failurePolicy Fail rejects — never a silent allow.
    let answer = gateway.validate(&widget_in("v1beta1")).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert!(answer.message().contains("cannot convert"), "{}", answer.body);
    assert!(answer.message().contains("widgets-v1.example.com"), "{}", answer.body);
    assert_eq!(v1_only.calls(), 1, "never called with the object in the wrong version");

    // v1beta1 no longer served: no equivalence, nothing to match, allowed (learnt live).
    apply(&cluster, &widgets_crd(false)).await;
    let learnt = eventually(Duration::from_secs(10), || async {
        gateway.validate(&widget_in("v1beta1")).await.allowed()
    })
    .await;
    assert!(learnt, "the CRD change reaches matching");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_parameters_come_from_the_cluster_and_follow_its_changes() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    // A policy's parameter kind is the platform team's choice, and so is the grant to read it
    // (docs/policies.md, "Parameters").
    kubectl(
        &cluster,
        &["create", "clusterrole", "gateway-params", "--verb=get,list,watch", "--resource=configmaps"],
    )
    .await;
    kubectl(
        &cluster,
        &[
            "create",
            "clusterrolebinding",
            "gateway-params",
            "--clusterrole=gateway-params",
            "--serviceaccount=admission-gateway:admission-gateway",
        ],
    )
    .await;
    for namespace in ["team-a", "team-b"] {
        kubectl(&cluster, &["create", "namespace", namespace]).await;
    }
    kubectl(&cluster, &["create", "configmap", "prefix", "-n", "team-a", "--from-literal=prefix=prod-"])
        .await;
    let fleet = Fleet::default()
        .object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "name-prefix"},
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                }]},
                "validations": [{
                    "expression": "object.metadata.name.startsWith(params.data.prefix)",
                    "messageExpression": "'name must start with ' + params.data.prefix",
                }],
            },
        }))
        .object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "name-prefix"},
            "spec": {
                "policyName": "name-prefix",
                "validationActions": ["Deny"],
                // No namespace: the request's own.
                "paramRef": {"name": "prefix", "parameterNotFoundAction": "Deny"},
            },
        }));
    let gateway = TestGateway::start_in_cluster(Some(fleet), options(&cluster, None)).await;
    let pod = |namespace: &str, name: &str| {
        let mut review = pod_in(namespace, "alice");
        review["request"]["name"] = json!(name);
        review["request"]["object"]["metadata"]["name"] = json!(name);
        review
    };

    let answer = gateway.validate(&pod("team-a", "web")).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert_eq!(
        answer.message(),
        "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'name-prefix' with binding 'name-prefix' denied request: name must start with prod-"
    );
    assert!(gateway.validate(&pod("team-a", "prod-web")).await.allowed());
    // No parameter in team-b, and `parameterNotFoundAction: Deny`: the API server's error.
    let answer = gateway.validate(&pod("team-b", "prod-web")).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert!(
        answer.message().ends_with(
            "denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        answer.body
    );

    // The parameter changes in the cluster: the next reviews follow it.
    kubectl(&cluster, &["create", "configmap", "prefix", "-n", "team-b", "--from-literal=prefix=dev-"]).await;
    kubectl(
        &cluster,
        &["patch", "configmap", "prefix", "-n", "team-a", "-p", r#"{"data":{"prefix":"dev-"}}"#],
    )
    .await;
    let followed = eventually(Duration::from_secs(5), || async {
        gateway.validate(&pod("team-a", "dev-web")).await.allowed()
            && gateway.validate(&pod("team-b", "dev-web")).await.allowed()
    })
    .await;
    assert!(followed, "the changed and the new parameter were not seen within 5 s");
    gateway.shutdown().await;
}

/// A CRD whose `spec.ports` is a list keyed by `port` and whose `spec.args` has no list type
/// (atomic, as the API server's structural schemas make it).
fn keyed_crd(plural: &str, kind: &str) -> String {
    let spec = json!({"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                  "items": {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer"}, "name": {"type": "string"}}}},
        "args": {"type": "array", "items": {"type": "string"}}}});
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}],
        },
    })
    .to_string()
}

/// A CREATE review of a `kind` (resource `plural`) in example.com/v1 with this spec.
fn keyed_review(plural: &str, kind: &str, spec: Value) -> Value {
    let mut review = widget_in("v1");
    let request = &mut review["request"];
    request["kind"]["kind"] = json!(kind);
    request["resource"]["resource"] = json!(plural);
    request["requestKind"] = request["kind"].clone();
    request["requestResource"] = request["resource"].clone();
    request["object"]["kind"] = json!(kind);
    request["object"]["spec"] = spec;
    review
}

/// A MutatingAdmissionPolicy on `plural` merging `configuration` (a CEL `Object{…}`), bound.
fn merging_policy(plural: &str, configuration: &str) -> [Value; 2] {
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
               "metadata": {"name": plural},
               "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": [plural]}]},
                        "reinvocationPolicy": "Never", "failurePolicy": "Fail",
                        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": configuration}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": plural}, "spec": {"policyName": plural}}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_configurations_to_custom_resources_merge_with_the_schema_the_cluster_publishes() {
    let cluster = ControlPlane::start().await;
    grant_the_gateway(&cluster).await;
    apply(&cluster, &keyed_crd("gizmos", "Gizmo")).await;
    let rename = "Object{spec: Object.spec{ports: [Object.spec.ports{port: 80, name: 'web'}]}}";
    let [gizmos, gizmos_binding] = merging_policy("gizmos", rename);
    let [doodads, doodads_binding] = merging_policy("doodads", rename);
    let [args, args_binding] = merging_policy("widgets", "Object{spec: Object.spec{args: ['b']}}");
    // A JSON Patch on a group-version the cluster serves no CRD of.
    let unpublished = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "unpublished"},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["other.example.com"], "apiVersions": ["v1"], "resources": ["gizmos"]}]},
                 "reinvocationPolicy": "Never", "failurePolicy": "Ignore",
                 "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/spec/args/-', value: 'x'}]"}}]}});
    let unpublished_binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "unpublished"}, "spec": {"policyName": "unpublished"}});
    let fleet = Fleet::of([])
        .object(unpublished)
        .object(unpublished_binding)
        .object(gizmos)
        .object(gizmos_binding)
        .object(doodads)
        .object(doodads_binding)
        .object(args)
        .object(args_binding);
    let gateway = TestGateway::start_in_cluster(Some(fleet), options(&cluster, None)).await;
    let spec = json!({"ports": [{"port": 53, "name": "dns"}, {"port": 80, "name": "http"}], "args": ["a"]});

    // The cluster's OpenAPI (this API server serves v2 only) gives the list its key: the item
    // with port 80 is renamed in place, the other kept. Without the schema the answer would
    // be the API server's 503; with the list atomic, a refusal.
    let merged = eventually(Duration::from_secs(20), || async {
        let review = keyed_review("gizmos", "Gizmo", spec.clone());
        let answer = gateway.mutate(&review).await;
        answer.allowed()
            && answer.patched(&review["request"]["object"])["spec"]["ports"]
                == json!([{"port": 53, "name": "dns"}, {"port": 80, "name": "web"}])
    })
    .await;
    assert!(merged, "the Gizmo's ports are merged by their key");

    // A kind of that group-version the cluster has not got: its converter has no type for
    // it, and the policy (Fail) denies with upstream's text.
    let answer = gateway.mutate(&keyed_review("doodads", "Doodad", spec.clone())).await;
    assert!(!answer.allowed(), "{}", answer.body);
    assert!(
        answer.message().contains(
            "error applying patch: failed to convert patch object to typed object: no corresponding type for example.com/v1, Kind=Doodad"
        ),
        "{}",
        answer.body
    );

    // A group-version the API server published nothing for has no type converter: upstream's
    // 503 for a JSON Patch too, whatever the failurePolicy (here Ignore).
    let mut other = keyed_review("gizmos", "Gizmo", spec.clone());
    for at in ["kind", "resource", "requestKind", "requestResource"] {
        other["request"][at]["group"] = json!("other.example.com");
    }
    other["request"]["object"]["apiVersion"] = json!("other.example.com/v1");
    let answer = gateway.mutate(&other).await;
    assert_eq!(answer.code(), Some(503), "{}", answer.body);
    assert!(
        answer.message().starts_with("Resource kind other.example.com/v1, Kind=Gizmo not found."),
        "{}",
        answer.body
    );

    // Created while the gateway runs: learnt from the next listing.
    apply(&cluster, &keyed_crd("doodads", "Doodad")).await;
    let learnt = eventually(Duration::from_secs(30), || async {
        gateway.mutate(&keyed_review("doodads", "Doodad", spec.clone())).await.allowed()
    })
    .await;
    assert!(learnt, "the new CRD's schema is read from the cluster");

    // A list without a list type in a CRD's structural schema is atomic: refused as upstream.
    apply(&cluster, &keyed_crd("widgets", "Widget")).await;
    let refused = eventually(Duration::from_secs(30), || async {
        let answer = gateway.mutate(&keyed_review("widgets", "Widget", spec.clone())).await;
        answer.message().contains("may not mutate atomic arrays, maps or structs: .spec.args")
    })
    .await;
    assert!(refused, "an apply configuration to an atomic list is refused");

    // Reported: the group-versions read beyond the built-in ones (example.com/v1 among this
    // server's, from its /openapi/v2, with the 1.20-only ones), none failed.
    let (_, verbose) = gateway.admin_get("/readyz?verbose").await;
    assert!(verbose.contains("[+]openapi ok ("), "{verbose}");
    let metrics = gateway.admin_get("/metrics").await.1;
    let converted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("admission_gateway_openapi_group_versions{result=\"converted\"} "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(converted.is_some_and(|n| n >= 1), "{metrics}");
    assert!(metrics.contains("admission_gateway_openapi_group_versions{result=\"failed\"} 0"), "{metrics}");
    gateway.shutdown().await;
}
