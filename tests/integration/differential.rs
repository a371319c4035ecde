//! The end-to-end differential suite: the same fleet of real webhooks — agnhost's `webhook`,
//! Kubernetes' own conformance-test webhook (`test/images/agnhost/webhook`), on pods, configmaps,
//! namespaces, CustomResourceDefinitions and a CRD's objects (`widgets.example.com`), a pair of
//! in-process mocks for reinvocation (`Reinvokers`), kopf's admission server (`Kopf`), plus a
//! dead address under Ignore and one under Fail — and the same scripted kubectl operations, run
//! twice against a fresh real kube-apiserver (`support::control_plane`):
//! 1. **direct**: the fleet's Mutating/ValidatingWebhookConfigurations applied to the API server;
//! 2. **gateway**: the real `admission-gateway serve` binary in cluster mode (the grants of
//!    `deploy/base/rbac.yaml`) with the same manifests as files, and only its own registration
//!    (`admission-gateway registration --url … --ca-bundle …`) applied.
//!
//! Per operation it compares kubectl's exit code, the error (webhook name and text), which
//! registration answered a refusal (its phase: the gateway's mutating or validating webhook, or
//! the fleet webhook the error names when registered directly), what kubectl printed and the
//! whole stored object apart from what the API server sets itself (`normalise`: uid,
//! resourceVersion, generation, managedFields, timestamps), how many times each reinvocation
//! mock was called during it (a reinvocation difference shows there first), prints the table,
//! and fails on any difference that docs/differences.md does not list.
//! Everything listens on and is called at 127.0.0.1. The control plane and kopf are provisioned
//! on first use (`support/provision.rs`).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::support::binary::{self, Served};
use crate::support::control_plane::{kube_binary, ControlPlane, Helper, Identity};
use crate::support::mock_webhook::Mock;
use crate::support::{
    ca, eventually, free_port, https_client, loopback_certificate, reply, MockWebhook, Reply,
};

const REPOSITORY: &str = env!("CARGO_MANIFEST_DIR");
/// The gateway's registration names (`registration` default `--name`, its webhook names).
const GATEWAY_WEBHOOKS: [&str; 2] = ["mutate.admission-gateway.io", "validate.admission-gateway.io"];

/// A difference docs/differences.md lists, with the words of its bullet (the suite checks the
/// list still says so) and what must still hold.
#[derive(Clone, Copy, Debug)]
enum Known {
    /// Several validating webhooks deny: the API server returns the first to complete, the
    /// gateway the first in configuration order with every denial in it. The exit code, output
    /// and stored object must be the same, and the API server's denial one of the gateway's.
    SeveralDenials,
    /// A transport failure: v1.20 writes `failed calling webhook "X": Post …`, the gateway (as
    /// later releases) `failed calling webhook "X": failed to call webhook: Post …`. Equal once
    /// that phrase is taken off.
    CallErrorPhrase,
}

impl Known {
    fn bullet(self) -> &'static str {
        match self {
            Known::SeveralDenials => "**Several validating denials**",
            Known::CallErrorPhrase => "**The API server's version**",
        }
    }

    fn reconciles(self, direct: &Outcome, gateway: &Outcome) -> bool {
        match self {
            Known::SeveralDenials => {
                let denial = direct.error.split("error when creating \"STDIN\": ").nth(1).unwrap_or("?");
                direct.exit == gateway.exit
                    && direct.phase == gateway.phase
                    && direct.output == gateway.output
                    && direct.stored == gateway.stored
                    && gateway.error.contains(denial)
            }
            Known::CallErrorPhrase => {
                let error = gateway.error.replace(": failed to call webhook: ", ": ");
                Outcome { error, ..gateway.clone() } == *direct
            }
        }
    }
}

/// What the direct run must show, so that a suite in which no webhook was called cannot pass:
/// (operation, what must appear in its outcome).
const EXERCISED: [(&str, &str); 20] = [
    (
        "namespace create open (e2e=enabled)",
        r#"stored: "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"labels\":{\"added-label\":\"yes\""#,
    ),
    // No labels at all: add-label is scoped to e2e=enabled.
    ("namespace create plain (unlabelled)", r#"\"metadata\":{\"name\":\"plain\"}"#),
    (
        "pod dry-run create webhook-to-be-mutated",
        // In the printed object (nothing is stored by a dry run: the next entry).
        r#"\"initContainers\":[{\"image\":\"webhook-added-image\",\"imagePullPolicy\":\"Always\",\"name\":\"webhook-added-init-container\""#,
    ),
    ("pod dry-run create webhook-to-be-mutated", "NotFound"),
    ("pod create webhook-to-be-mutated", "webhook-added-init-container"),
    ("configmap create allowed", r#"\"mutation-stage-1\":\"yes\",\"mutation-stage-2\":\"yes\""#),
    ("configmap dry-run create", r#"\"mutation-stage-2\":\"yes\""#),
    ("pod create in dead-ignore", "exit: 0"),
    ("pod create in dead-fail", r#"failed calling webhook \"dead-fail.e2e.example.com\""#),
    ("configmap delete nondeletable", "the configmap cannot be deleted"),
    // Round 1 happened: A saw B's label, A called twice, B (Never) once.
    ("reinvoke: cm create (B's change reinvokes A)", r#"\"a-saw-b\":\"yes\""#),
    ("reinvoke: cm create (B's change reinvokes A)", r#"calls: "A×2 B×1""#),
    ("reinvoke: cm create held (A skipped, B removes hold)", r#"calls: "B×1""#),
    ("reinvoke: cm update nobody changes (no round 1)", r#"calls: "A×1 B×1""#),
    // A's own change never schedules A again (docs/semantics.md §11.3).
    ("reinvoke: cm update removing a (only A changes it)", r#"calls: "A×1 B×1""#),
    ("crd create, label disallowed", "the crd contains unwanted label"),
    ("widget create allowed", r#"\"mutation-stage-1\":\"yes\",\"mutation-stage-2\":\"yes\""#),
    ("widget delete nondeletable", "the custom resource cannot be deleted"),
    ("kopf: cm create, data copied into a label", r#"\"kopf\":\"seen\",\"kopf-copy\":\"blue\""#),
    ("kopf: cm create, data denied by kopf", "kopf refuses data kopf-deny"),
];

/// The operations where a known difference shows.
const KNOWN_DIFFERENCES: [(&str, Known); 4] = [
    ("pod create in dead-fail", Known::CallErrorPhrase),
    ("configmap create in locked, data disallowed (two denials)", Known::SeveralDenials),
    ("configmap create in dead-fail", Known::CallErrorPhrase),
    ("configmap create in slow-fail (times out)", Known::CallErrorPhrase),
];

// ---------------------------------------------------------------------------------------------
// The fleet

/// agnhost's webhook on 127.0.0.1, serving the tests' loopback certificate.
struct Agnhost {
    _process: Helper,
    port: u16,
    _dir: tempfile::TempDir,
}

/// A free port below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), for a server
/// that must bind the same port again in the second run: an ephemeral port can meanwhile become
/// the local end of some outgoing connection (the API server's to etcd, kubectl's…).
fn stable_free_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let lowest: u16 = range.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(32768);
    let start = 10_000 + u16::try_from(std::process::id() % 5_000).unwrap();
    (start..lowest.max(start + 1))
        .find(|port| TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port below the ephemeral range")
}

async fn start_agnhost() -> Agnhost {
    let dir = tempfile::tempdir().unwrap();
    let leaf = loopback_certificate();
    let cert = binary::write(dir.path(), "tls.crt", &leaf.cert_pem);
    let key = binary::write(dir.path(), "tls.key", &leaf.key_pem);
    let port = free_port();
    let args = vec![
        "webhook".to_owned(),
        format!("--tls-cert-file={cert}"),
        format!("--tls-private-key-file={key}"),
        format!("--port={port}"),
    ];
    let mut process =
        Helper::spawn("agnhost", &kube_binary("agnhost"), &args, &dir.path().join("agnhost.log"));
    let client = https_client(ca());
    let readyz: http::Uri = format!("https://127.0.0.1:{port}/readyz").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(!process.exited(), "agnhost exited:\n{}", process.log_tail());
        let request = http::Request::get(readyz.clone()).body(Default::default()).unwrap();
        if matches!(client.request(request).await, Ok(response) if response.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "agnhost not ready:\n{}", process.log_tail());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Agnhost { _process: process, port, _dir: dir }
}

/// kopf's admission server (`tests/integration/kopf/admission.py`; kopf from PyPI, provisioned
/// on first use in a virtualenv of its own: `support::provision::kopf`) on 127.0.0.1, the same
/// port in both runs. kopf reads the API server's resources when it starts, so each run starts
/// its own against its own control plane (admin kubeconfig).
struct Kopf {
    _process: Helper,
    _dir: tempfile::TempDir,
}

async fn start_kopf(cluster: &ControlPlane, port: u16) -> Kopf {
    let dir = tempfile::tempdir().unwrap();
    let leaf = loopback_certificate();
    let cert = binary::write(dir.path(), "tls.crt", &leaf.cert_pem);
    let key = binary::write(dir.path(), "tls.key", &leaf.key_pem);
    let script = Path::new(REPOSITORY).join("tests/integration/kopf/admission.py");
    let python = crate::support::provision::off_runtime(crate::support::provision::kopf).await;
    let args = vec![
        format!("KUBECONFIG={}", cluster.kubeconfig(Identity::Admin).display()),
        "KOPF_ADDR=127.0.0.1".to_owned(),
        format!("KOPF_PORT={port}"),
        format!("KOPF_CERT={cert}"),
        format!("KOPF_KEY={key}"),
        python.display().to_string(),
        "-m".to_owned(),
        "kopf".to_owned(),
        "run".to_owned(),
        "--standalone".to_owned(),
        "--all-namespaces".to_owned(),
        script.display().to_string(),
    ];
    let mut process = Helper::spawn("kopf", Path::new("/usr/bin/env"), &args, &dir.path().join("kopf.log"));
    // Ready when it mutates a review: the server is up and its handlers know `configmaps`.
    let client = https_client(ca());
    let uri: http::Uri = format!("https://127.0.0.1:{port}/kopf-label").parse().unwrap();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "kopf-probe", "operation": "CREATE", "namespace": "probe", "name": "probe",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "userInfo": {"username": "probe"},
            "object": configmap("probe", "probe", json!({}), None),
            "dryRun": true,
        },
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(!process.exited(), "kopf exited:\n{}", process.log_tail());
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(review.to_string().into())
            .unwrap();
        if let Ok(response) = client.request(request).await {
            use http_body_util::BodyExt as _;
            let body = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            if String::from_utf8_lossy(&body).contains("\"patch\"") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "kopf not ready:\n{}", process.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Kopf { _process: process, _dir: dir }
}

/// The reinvocation pair (docs/semantics.md §11), in-process HTTPS mocks on 127.0.0.1 serving
/// the loopback certificate; each counts its calls, compared per operation in both runs.
/// - A (`IfNeeded`, first in the list, skips objects labelled `hold`): adds `a=1` if absent and,
///   once it sees `b`, `a-saw-b=yes` — set only when A is called after B, i.e. reinvoked.
/// - B (`Never`): adds `b=1` if absent, `c=1` when it sees `a`, and removes `hold`.
///
/// So B's change reinvokes A in round 1 (A twice, B once), an object with nothing left to add
/// is still reinvoked by agnhost's add-label, and a held object stays away from A in round 1
/// although B removed what kept A away (§11.4: only hooks round 0 dispatched are reinvoked).
struct Reinvokers {
    a: Mock,
    b: Mock,
}

impl Reinvokers {
    async fn start() -> Reinvokers {
        let a = MockWebhook::answering(|review| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            let mut added = Map::new();
            if labels["a"].is_null() {
                added.insert("a".into(), json!("1"));
            }
            if !labels["b"].is_null() && labels["a-saw-b"].is_null() {
                added.insert("a-saw-b".into(), json!("yes"));
            }
            patch_or_allow(review, label_patch(labels, added, &[]))
        });
        let b = MockWebhook::answering(|review| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            let mut added = Map::new();
            if labels["b"].is_null() {
                added.insert("b".into(), json!("1"));
            }
            if !labels["a"].is_null() && labels["c"].is_null() {
                added.insert("c".into(), json!("1"));
            }
            let removed: &[&str] = if labels["hold"].is_null() { &[] } else { &["hold"] };
            patch_or_allow(review, label_patch(labels, added, removed))
        });
        Reinvokers { a: a.spawn().await, b: b.spawn().await }
    }

    /// How often each was called since `before` (`"A×2 B×1"`, empty when neither was).
    fn calls_since(&self, before: [usize; 2]) -> String {
        let now = [self.a.calls(), self.b.calls()];
        let counts: Vec<String> = ["A", "B"]
            .iter()
            .zip(now.iter().zip(before))
            .filter(|(_, (now, before))| **now > *before)
            .map(|(name, (now, before))| format!("{name}×{}", now - before))
            .collect();
        counts.join(" ")
    }

    fn counts(&self) -> [usize; 2] {
        [self.a.calls(), self.b.calls()]
    }
}

fn patch_or_allow(review: &Value, operations: Value) -> Reply {
    match operations.as_array() {
        Some(list) if !list.is_empty() => reply::patch(review, &operations),
        _ => reply::allow(review),
    }
}

/// A JSONPatch adding `added` to and removing `removed` from the labels (keys with no `/` or `~`).
fn label_patch(labels: &Value, added: Map<String, Value>, removed: &[&str]) -> Value {
    let mut operations = Vec::new();
    if labels.is_null() || labels.as_object().is_some_and(Map::is_empty) {
        if !added.is_empty() {
            operations.push(json!({"op": "add", "path": "/metadata/labels", "value": added}));
        }
    } else {
        for (key, value) in added {
            operations.push(json!({"op": "add", "path": format!("/metadata/labels/{key}"), "value": value}));
        }
    }
    for key in removed {
        operations.push(json!({"op": "remove", "path": format!("/metadata/labels/{key}")}));
    }
    Value::Array(operations)
}

/// One fleet webhook: `path` on agnhost (or the dead address), its rules and scope.
fn hook(name: &str, url: &str, rules: Value, extra: Value) -> Value {
    let mut webhook = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca().ca_bundle()},
        "rules": rules,
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "admissionReviewVersions": ["v1", "v1beta1"],
        "namespaceSelector": {"matchLabels": {"e2e": "enabled"}},
    });
    for (key, value) in extra.as_object().unwrap() {
        webhook[key] = value.clone();
    }
    webhook
}

fn rule(operations: &[&str], resources: &[&str]) -> Value {
    json!([{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}])
}

/// The fleet's manifests, the same text in both runs.
fn fleet(agnhost: u16, dead: u16, reinvokers: &Reinvokers, kopf: u16) -> String {
    let at = |path: &str| format!("https://127.0.0.1:{agnhost}{path}");
    let kopf_at = |id: &str| format!("https://127.0.0.1:{kopf}/{id}");
    let kopf_scope = json!({"matchLabels": {"kopf": "enabled"}});
    let dead = format!("https://127.0.0.1:{dead}/dead");
    let reinvoke_scope = json!({"matchLabels": {"e2e": "enabled", "reinvoke": "both"}});
    let widgets = |operations: &[&str]| {
        json!([{"operations": operations, "apiGroups": ["example.com"], "apiVersions": ["v1"],
            "resources": ["widgets"]}])
    };
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "e2e-mutating"},
        "webhooks": [
            // First in the list, so that a change by any later webhook (B, agnhost's add-label)
            // reinvokes A (docs/semantics.md §11.3). In-process mocks: see `Reinvokers`.
            hook("reinvoke-a.e2e.example.com", reinvokers.a.url(), rule(&["CREATE", "UPDATE"], &["configmaps"]),
                json!({"reinvocationPolicy": "IfNeeded", "timeoutSeconds": 2, "namespaceSelector": reinvoke_scope,
                    "objectSelector": {"matchExpressions": [{"key": "hold", "operator": "DoesNotExist"}]}})),
            hook("reinvoke-b.e2e.example.com", reinvokers.b.url(), rule(&["CREATE", "UPDATE"], &["configmaps"]),
                json!({"reinvocationPolicy": "Never", "timeoutSeconds": 2, "namespaceSelector": reinvoke_scope})),
            hook("add-label.e2e.example.com", &at("/add-label"),
                rule(&["CREATE"], &["pods", "configmaps", "namespaces"]),
                // Called with AdmissionReview v1beta1, by either.
                json!({"admissionReviewVersions": ["v1beta1"]})),
            hook("mutate-pods.e2e.example.com", &at("/mutating-pods"),
                rule(&["CREATE"], &["pods"]), json!({"sideEffects": "NoneOnDryRun"})),
            hook("mutate-configmaps-1.e2e.example.com", &at("/mutating-configmaps"),
                rule(&["CREATE"], &["configmaps"]), json!({"sideEffects": "NoneOnDryRun"})),
            hook("mutate-configmaps-2.e2e.example.com", &at("/mutating-configmaps"),
                rule(&["CREATE"], &["configmaps"]), json!({"sideEffects": "NoneOnDryRun"})),
            hook("kopf-label.e2e.example.com", &kopf_at("kopf-label"), rule(&["CREATE"], &["configmaps"]),
                json!({"namespaceSelector": kopf_scope})),
            // The CRD's objects: agnhost's custom-resource mutator, stage 1 then 2.
            hook("mutate-widgets-1.e2e.example.com", &at("/mutating-custom-resource"), widgets(&["CREATE"]),
                json!({"sideEffects": "NoneOnDryRun", "timeoutSeconds": 2})),
            hook("mutate-widgets-2.e2e.example.com", &at("/mutating-custom-resource"), widgets(&["CREATE"]),
                json!({"sideEffects": "NoneOnDryRun", "timeoutSeconds": 2})),
        ],
    });
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "e2e-validating"},
        "webhooks": [
            hook("deny-pods.e2e.example.com", &at("/pods"), rule(&["CREATE", "UPDATE"], &["pods"]), json!({})),
            hook("deny-configmaps.e2e.example.com", &at("/configmaps"),
                rule(&["CREATE", "UPDATE", "DELETE"], &["configmaps"]), json!({})),
            hook("always-deny-namespace.e2e.example.com", &at("/always-deny"),
                rule(&["CREATE"], &["pods", "configmaps"]),
                json!({"namespaceSelector": {"matchLabels": {"lock": "deny"}}})),
            hook("always-deny-object.e2e.example.com", &at("/always-deny"),
                rule(&["CREATE"], &["configmaps"]),
                json!({"namespaceSelector": {}, "objectSelector": {"matchLabels": {"e2e-deny": "true"}}})),
            hook("dead-ignore.e2e.example.com", &dead, rule(&["CREATE"], &["pods", "configmaps"]),
                json!({"failurePolicy": "Ignore", "namespaceSelector": {"matchLabels": {"dead": "ignore"}}})),
            hook("dead-fail.e2e.example.com", &dead, rule(&["CREATE"], &["pods", "configmaps"]),
                json!({"namespaceSelector": {"matchLabels": {"dead": "fail"}}})),
            // Answers after 5 s: a timeout at 2 s, under Ignore and under Fail.
            hook("slow-ignore.e2e.example.com", &at("/always-allow-delay-5s"), rule(&["CREATE"], &["configmaps"]),
                json!({"failurePolicy": "Ignore", "timeoutSeconds": 2,
                    "namespaceSelector": {"matchLabels": {"slow": "ignore"}}})),
            hook("slow-fail.e2e.example.com", &at("/always-allow-delay-5s"), rule(&["CREATE"], &["configmaps"]),
                json!({"timeoutSeconds": 2, "namespaceSelector": {"matchLabels": {"slow": "fail"}}})),
            hook("kopf-deny.e2e.example.com", &kopf_at("kopf-deny"), rule(&["CREATE", "UPDATE"], &["configmaps"]),
                json!({"namespaceSelector": kopf_scope})),
            hook("deny-widgets.e2e.example.com", &at("/custom-resource"), widgets(&["CREATE", "UPDATE", "DELETE"]),
                json!({})),
            // CustomResourceDefinitions are cluster-scoped: the namespaceSelector never skips them
            // (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/namespace/matcher.go).
            hook("deny-crds.e2e.example.com", &at("/crd"),
                json!([{"operations": ["CREATE"], "apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["v1"],
                    "resources": ["customresourcedefinitions"]}]),
                json!({})),
        ],
    });
    format!(
        "{}\n---\n{}\n",
        serde_norway::to_string(&mutating).unwrap(),
        serde_norway::to_string(&validating).unwrap()
    )
}

// ---------------------------------------------------------------------------------------------
// The script

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn pod(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2"}]},
    })
}

fn configmap(namespace: &str, name: &str, labels: Value, data: Option<Value>) -> Value {
    let mut object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    });
    if let Some(data) = data {
        object["data"] = data;
    }
    object
}

fn custom_resource_definition(plural: &str, kind: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com"), "labels": labels},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// A `widgets.example.com/v1` object; agnhost's custom-resource webhooks read its `data`.
fn widget(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

/// One kubectl operation and the object to read back afterwards.
struct Step {
    name: &'static str,
    args: Vec<String>,
    stdin: Option<Value>,
    /// `[kind, namespace ("" when cluster-scoped), name]`.
    stored: [&'static str; 3],
}

fn create(name: &'static str, object: Value, stored: [&'static str; 3]) -> Step {
    Step { name, args: args(&["create", "-f", "-"]), stdin: Some(object), stored }
}

fn dry_run(name: &'static str, object: Value, stored: [&'static str; 3]) -> Step {
    Step {
        name,
        args: args(&["create", "--dry-run=server", "-o", "json", "-f", "-"]),
        stdin: Some(object),
        stored,
    }
}

fn run(name: &'static str, command: &[&str], stored: [&'static str; 3]) -> Step {
    Step { name, args: args(command), stdin: None, stored }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn script() -> Vec<Step> {
    let none = json!({});
    let disallow = json!({"webhook-e2e-test": "webhook-disallow"});
    vec![
        create(
            "namespace create open (e2e=enabled)",
            namespace("open", json!({"e2e": "enabled"})),
            ["namespace", "", "open"],
        ),
        create(
            "namespace create locked (lock=deny)",
            namespace("locked", json!({"e2e": "enabled", "lock": "deny"})),
            ["namespace", "", "locked"],
        ),
        create(
            "namespace create dead-ignore",
            namespace("dead-ignore", json!({"e2e": "enabled", "dead": "ignore"})),
            ["namespace", "", "dead-ignore"],
        ),
        create(
            "namespace create dead-fail",
            namespace("dead-fail", json!({"e2e": "enabled", "dead": "fail"})),
            ["namespace", "", "dead-fail"],
        ),
        create(
            "namespace create slow-ignore",
            namespace("slow-ignore", json!({"e2e": "enabled", "slow": "ignore"})),
            ["namespace", "", "slow-ignore"],
        ),
        create(
            "namespace create slow-fail",
            namespace("slow-fail", json!({"e2e": "enabled", "slow": "fail"})),
            ["namespace", "", "slow-fail"],
        ),
        run(
            "namespace create plain (unlabelled)",
            &["create", "namespace", "plain"],
            ["namespace", "", "plain"],
        ),
        create(
            "namespace create reinvoke",
            namespace("reinvoke", json!({"e2e": "enabled", "reinvoke": "both"})),
            ["namespace", "", "reinvoke"],
        ),
        // Pods
        dry_run(
            "pod dry-run create webhook-to-be-mutated",
            pod("open", "webhook-to-be-mutated", none.clone()),
            ["pod", "open", "webhook-to-be-mutated"],
        ),
        dry_run(
            "pod dry-run create, label disallowed",
            pod("open", "dry-disallowed", disallow.clone()),
            ["pod", "open", "dry-disallowed"],
        ),
        create(
            "pod create webhook-to-be-mutated",
            pod("open", "webhook-to-be-mutated", json!({"app": "demo"})),
            ["pod", "open", "webhook-to-be-mutated"],
        ),
        create(
            "pod create allowed",
            pod("open", "allowed-pod", none.clone()),
            ["pod", "open", "allowed-pod"],
        ),
        create(
            "pod create, label disallowed",
            pod("open", "disallowed-pod", disallow.clone()),
            ["pod", "open", "disallowed-pod"],
        ),
        run(
            "pod update: label disallowed",
            &["label", "pod", "allowed-pod", "-n", "open", "webhook-e2e-test=webhook-disallow"],
            ["pod", "open", "allowed-pod"],
        ),
        run(
            "pod update: label allowed",
            &["label", "pod", "allowed-pod", "-n", "open", "color=blue"],
            ["pod", "open", "allowed-pod"],
        ),
        create("pod create in locked", pod("locked", "p", none.clone()), ["pod", "locked", "p"]),
        create(
            "pod create in dead-ignore",
            pod("dead-ignore", "p", none.clone()),
            ["pod", "dead-ignore", "p"],
        ),
        create("pod create in dead-fail", pod("dead-fail", "p", none.clone()), ["pod", "dead-fail", "p"]),
        create(
            "pod create in plain",
            pod("plain", "webhook-to-be-mutated", none.clone()),
            ["pod", "plain", "webhook-to-be-mutated"],
        ),
        run(
            "pod delete",
            &["delete", "pod", "allowed-pod", "-n", "open", "--wait=false"],
            ["pod", "open", "allowed-pod"],
        ),
        // ConfigMaps
        create(
            "configmap create allowed",
            configmap("open", "allowed-cm", none.clone(), Some(json!({"mutation-start": "yes"}))),
            ["configmap", "open", "allowed-cm"],
        ),
        create(
            "configmap create without data",
            configmap("open", "empty-cm", none.clone(), None),
            ["configmap", "open", "empty-cm"],
        ),
        create(
            "configmap create, data disallowed",
            configmap("open", "disallowed-cm", none.clone(), Some(disallow.clone())),
            ["configmap", "open", "disallowed-cm"],
        ),
        dry_run(
            "configmap dry-run create",
            configmap("open", "dry-cm", none.clone(), Some(json!({"mutation-start": "yes"}))),
            ["configmap", "open", "dry-cm"],
        ),
        dry_run(
            "configmap dry-run create, data disallowed",
            configmap("open", "dry-disallowed-cm", none.clone(), Some(disallow.clone())),
            ["configmap", "open", "dry-disallowed-cm"],
        ),
        run(
            "configmap update: data disallowed",
            &["patch", "configmap", "allowed-cm", "-n", "open", "--type=merge", "-p", &disallow_patch()],
            ["configmap", "open", "allowed-cm"],
        ),
        run(
            "configmap update: data allowed",
            &[
                "patch",
                "configmap",
                "allowed-cm",
                "-n",
                "open",
                "--type=merge",
                "-p",
                r#"{"data":{"color":"green"}}"#,
            ],
            ["configmap", "open", "allowed-cm"],
        ),
        create(
            "configmap create nondeletable",
            configmap(
                "open",
                "keep-cm",
                none.clone(),
                Some(json!({"webhook-e2e-test": "webhook-nondeletable"})),
            ),
            ["configmap", "open", "keep-cm"],
        ),
        run(
            "configmap delete nondeletable",
            &["delete", "configmap", "keep-cm", "-n", "open"],
            ["configmap", "open", "keep-cm"],
        ),
        run(
            "configmap delete",
            &["delete", "configmap", "allowed-cm", "-n", "open"],
            ["configmap", "open", "allowed-cm"],
        ),
        create(
            "configmap create in locked",
            configmap("locked", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "locked", "cm"],
        ),
        create(
            "configmap create in locked, data disallowed (two denials)",
            configmap("locked", "cm2", none.clone(), Some(disallow.clone())),
            ["configmap", "locked", "cm2"],
        ),
        create(
            "configmap create labelled e2e-deny=true",
            configmap("open", "denied-by-label", json!({"e2e-deny": "true"}), Some(json!({"a": "b"}))),
            ["configmap", "open", "denied-by-label"],
        ),
        create(
            "configmap create in dead-ignore",
            configmap("dead-ignore", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "dead-ignore", "cm"],
        ),
        create(
            "configmap create in dead-fail",
            configmap("dead-fail", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "dead-fail", "cm"],
        ),
        create(
            "configmap create in slow-ignore (times out)",
            configmap("slow-ignore", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "slow-ignore", "cm"],
        ),
        create(
            "configmap create in slow-fail (times out)",
            configmap("slow-fail", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "slow-fail", "cm"],
        ),
        create(
            "configmap create in a namespace that does not exist",
            configmap("ghost", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "ghost", "cm"],
        ),
        create(
            "configmap create in plain",
            configmap("plain", "cm", none.clone(), Some(json!({"a": "b"}))),
            ["configmap", "plain", "cm"],
        ),
        // Reinvocation (docs/semantics.md §11; the mocks of `Reinvokers`, called before agnhost's
        // add-label, which adds `added-label` on every create).
        create(
            "reinvoke: cm create (B's change reinvokes A)",
            configmap("reinvoke", "fresh", none.clone(), None),
            ["configmap", "reinvoke", "fresh"],
        ),
        create(
            "reinvoke: cm create, A and B add nothing, add-label does",
            configmap("reinvoke", "complete", json!({"a": "1", "b": "1", "c": "1", "a-saw-b": "yes"}), None),
            ["configmap", "reinvoke", "complete"],
        ),
        create(
            "reinvoke: cm create held (A skipped, B removes hold)",
            configmap("reinvoke", "held", json!({"hold": "yes"}), None),
            ["configmap", "reinvoke", "held"],
        ),
        dry_run(
            "reinvoke: cm dry-run create",
            configmap("reinvoke", "dry", none.clone(), None),
            ["configmap", "reinvoke", "dry"],
        ),
        run(
            "reinvoke: cm update removing b (B restores it)",
            &["label", "configmap", "fresh", "-n", "reinvoke", "b-"],
            ["configmap", "reinvoke", "fresh"],
        ),
        run(
            "reinvoke: cm update removing a (only A changes it)",
            &["label", "configmap", "fresh", "-n", "reinvoke", "a-"],
            ["configmap", "reinvoke", "fresh"],
        ),
        run(
            "reinvoke: cm update adding hold (oldObject selects A)",
            &["label", "configmap", "fresh", "-n", "reinvoke", "hold=yes"],
            ["configmap", "reinvoke", "fresh"],
        ),
        run(
            "reinvoke: cm update nobody changes (no round 1)",
            &["label", "configmap", "fresh", "-n", "reinvoke", "color=red"],
            ["configmap", "reinvoke", "fresh"],
        ),
        // kopf's handlers (tests/integration/kopf/admission.py) after agnhost's, in `kopf`
        create(
            "namespace create kopf",
            namespace("kopf", json!({"e2e": "enabled", "kopf": "enabled"})),
            ["namespace", "", "kopf"],
        ),
        create(
            "kopf: cm create (labelled by kopf)",
            configmap("kopf", "plain", none.clone(), Some(json!({"mutation-start": "yes"}))),
            ["configmap", "kopf", "plain"],
        ),
        create(
            "kopf: cm create, data copied into a label",
            configmap("kopf", "copy", json!({"app": "x"}), Some(json!({"kopf-copy": "blue"}))),
            ["configmap", "kopf", "copy"],
        ),
        dry_run(
            "kopf: cm dry-run create",
            configmap("kopf", "dry", none.clone(), Some(json!({"kopf-copy": "red"}))),
            ["configmap", "kopf", "dry"],
        ),
        create(
            "kopf: cm create, data denied by kopf",
            configmap("kopf", "denied", none.clone(), Some(json!({"kopf-deny": "x"}))),
            ["configmap", "kopf", "denied"],
        ),
        run(
            "kopf: cm update, data denied by kopf",
            &[
                "patch",
                "configmap",
                "plain",
                "-n",
                "kopf",
                "--type=merge",
                "-p",
                r#"{"data":{"kopf-deny":"x"}}"#,
            ],
            ["configmap", "kopf", "plain"],
        ),
        // A CRD and its objects
        create(
            "crd create, label disallowed",
            custom_resource_definition("gadgets", "Gadget", json!({"webhook-e2e-test": "webhook-disallow"})),
            ["customresourcedefinition", "", "gadgets.example.com"],
        ),
        create(
            "crd create widgets.example.com",
            custom_resource_definition("widgets", "Widget", none.clone()),
            ["customresourcedefinition", "", "widgets.example.com"],
        ),
        run(
            "crd wait until established",
            &["wait", "--for=condition=established", "--timeout=60s", "crd/widgets.example.com"],
            ["customresourcedefinition", "", "widgets.example.com"],
        ),
        create(
            "widget create allowed",
            widget("open", "allowed-widget", json!({"mutation-start": "yes"})),
            ["widget", "open", "allowed-widget"],
        ),
        dry_run(
            "widget dry-run create",
            widget("open", "dry-widget", json!({"mutation-start": "yes"})),
            ["widget", "open", "dry-widget"],
        ),
        create(
            "widget create, data disallowed",
            widget("open", "disallowed-widget", disallow.clone()),
            ["widget", "open", "disallowed-widget"],
        ),
        run(
            "widget update: data disallowed",
            &["patch", "widget", "allowed-widget", "-n", "open", "--type=merge", "-p", &disallow_patch()],
            ["widget", "open", "allowed-widget"],
        ),
        run(
            "widget update: data allowed",
            &[
                "patch",
                "widget",
                "allowed-widget",
                "-n",
                "open",
                "--type=merge",
                "-p",
                r#"{"data":{"color":"green"}}"#,
            ],
            ["widget", "open", "allowed-widget"],
        ),
        create(
            "widget create nondeletable",
            widget("open", "keep-widget", json!({"webhook-e2e-test": "webhook-nondeletable"})),
            ["widget", "open", "keep-widget"],
        ),
        run(
            "widget delete nondeletable",
            &["delete", "widget", "keep-widget", "-n", "open"],
            ["widget", "open", "keep-widget"],
        ),
        run(
            "widget delete",
            &["delete", "widget", "allowed-widget", "-n", "open"],
            ["widget", "open", "allowed-widget"],
        ),
        create(
            "widget create in plain",
            widget("plain", "w", json!({"mutation-start": "yes"})),
            ["widget", "plain", "w"],
        ),
        run(
            "namespace delete plain",
            &["delete", "namespace", "plain", "--wait=false"],
            ["namespace", "", "plain"],
        ),
    ]
}

fn disallow_patch() -> String {
    r#"{"data":{"webhook-e2e-test":"webhook-disallow"}}"#.to_owned()
}

// ---------------------------------------------------------------------------------------------
// Running it

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Direct,
    Gateway,
}

/// What one operation gave.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    exit: i32,
    /// Standard error, the gateway's own wrapper taken off (see `unwrap_gateway`).
    error: String,
    /// The phase of the registration that refused it, when a webhook did (`phase_of`): through
    /// the gateway, which of its two webhooks answered; directly, the fleet webhook's. The
    /// unwrapped error alone would look the same for a denial in the wrong phase.
    phase: Option<&'static str>,
    /// Standard output: the object (normalised) for `-o json`, else the text.
    output: String,
    /// The object read back afterwards (normalised), or kubectl's error.
    stored: String,
    /// How often the reinvocation mocks were called during the operation (`"A×2 B×1"`).
    calls: String,
}

impl Outcome {
    fn summary(&self) -> String {
        if self.calls.is_empty() {
            self.verdict()
        } else {
            format!("{}; {}", self.verdict(), self.calls)
        }
    }

    fn verdict(&self) -> String {
        if self.exit == 0 {
            return "allowed".to_owned();
        }
        match self.error.split("admission webhook \"").nth(1).and_then(|rest| rest.split('"').next()) {
            Some(name) => format!("denied by {name} ({})", self.phase.unwrap_or("?")),
            None => {
                match self.error.split("failed calling webhook \"").nth(1).and_then(|r| r.split('"').next()) {
                    Some(name) => format!("failed calling {name}"),
                    None => format!("error (exit {})", self.exit),
                }
            }
        }
    }
}

/// The message a client sees through the gateway is the fleet's, wrapped once more by the API
/// server with the gateway's webhook name (docs/differences.md, "The API server's version": "its
/// messages wrap ours once more"). Taken off once, so what is left is compared. Returns the text
/// and whether it was wrapped.
fn unwrap_gateway(text: &str) -> (String, bool) {
    for name in GATEWAY_WEBHOOKS {
        let wrapper = format!("admission webhook \"{name}\" denied the request: ");
        if text.contains(&wrapper) {
            return (text.replacen(&wrapper, "", 1), true);
        }
    }
    (text.to_owned(), false)
}

/// Which registration's phase each webhook name belongs to: the fleet's (from its manifests)
/// and the gateway's own two (`GATEWAY_WEBHOOKS`).
fn phases(fleet_yaml: &str) -> HashMap<String, &'static str> {
    let mut phases: HashMap<String, &'static str> =
        GATEWAY_WEBHOOKS.iter().map(|name| (name.to_string(), phase_of_kind(name))).collect();
    for document in fleet_yaml.split("\n---\n") {
        let configuration: Value = serde_norway::from_str(document).expect("a fleet manifest");
        let phase = phase_of_kind(configuration["kind"].as_str().unwrap());
        for webhook in configuration["webhooks"].as_array().unwrap() {
            phases.insert(webhook["name"].as_str().unwrap().to_owned(), phase);
        }
    }
    phases
}

/// `mutating` for a MutatingWebhookConfiguration or the gateway's `mutate.` webhook, else
/// `validating`.
fn phase_of_kind(kind_or_name: &str) -> &'static str {
    if kind_or_name.starts_with("Mutating") || kind_or_name.starts_with("mutate.") {
        "mutating"
    } else {
        "validating"
    }
}

/// The phase of the first webhook kubectl's error names (`admission webhook "X" denied…`,
/// `failed calling webhook "X"`), before the gateway's wrapper is taken off: the gateway's own
/// webhook through the gateway, the fleet's when registered directly. `None`: no webhook named.
fn phase_of(stderr: &str, phases: &HashMap<String, &'static str>) -> Option<&'static str> {
    let named = ["admission webhook \"", "failed calling webhook \""]
        .iter()
        .filter_map(|lead| stderr.find(lead).map(|at| at + lead.len()))
        .min()?;
    let name = stderr[named..].split('"').next()?;
    Some(phases.get(name).copied().unwrap_or_else(|| panic!("webhook {name:?} is not in the fleet")))
}

/// Fields the API server sets itself, whatever admission decided (its own clock, counters and
/// bookkeeping): dropped from `metadata`. `deletionTimestamp` is kept as whether it is set.
const SERVER_SET_METADATA: [&str; 6] =
    ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"];
/// Timestamps the API server writes into status conditions (a CRD's `Established`, …).
const SERVER_SET_TIMES: [&str; 4] = ["lastTransitionTime", "lastUpdateTime", "lastProbeTime", "startTime"];

/// The whole object as kubectl printed it, less what the API server sets itself
/// (`SERVER_SET_METADATA`, `SERVER_SET_TIMES` anywhere in `status`): labels, annotations,
/// spec, data, the status the server derives from them (a Pod's `Pending`, a namespace's
/// phase, a CRD's accepted names) and any field a webhook added are all compared.
fn normalise(object: &Value) -> String {
    fn drop_times(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for key in SERVER_SET_TIMES {
                    map.remove(key);
                }
                map.values_mut().for_each(drop_times);
            }
            Value::Array(items) => items.iter_mut().for_each(drop_times),
            _ => {}
        }
    }
    let mut kept = object.clone();
    if let Some(metadata) = kept["metadata"].as_object_mut() {
        for key in SERVER_SET_METADATA {
            metadata.remove(key);
        }
        if metadata.contains_key("deletionTimestamp") {
            metadata.insert("deletionTimestamp".into(), json!("set"));
        }
    }
    if let Some(status) = kept.get_mut("status") {
        drop_times(status);
    }
    kept.to_string()
}

async fn kubectl(cluster: &ControlPlane, args: &[String], stdin: Option<&Value>) -> (i32, String, String) {
    let output = cluster.kubectl_with_stdin(Identity::Admin, args, stdin.map(Value::to_string)).await;
    (output.status.code().unwrap_or(-1), binary::text(&output.stdout), binary::text(&output.stderr))
}

async fn perform(
    cluster: &ControlPlane,
    step: &Step,
    reinvokers: &Reinvokers,
    phases: &HashMap<String, &'static str>,
) -> (Outcome, bool) {
    let before = reinvokers.counts();
    let (exit, stdout, stderr) = kubectl(cluster, &step.args, step.stdin.as_ref()).await;
    let calls = reinvokers.calls_since(before);
    let phase = phase_of(&stderr, phases);
    let (error, wrapped) = unwrap_gateway(stderr.trim());
    let output = match serde_json::from_str::<Value>(&stdout) {
        Ok(object) => normalise(&object),
        Err(_) => stdout.trim().to_owned(),
    };
    let [kind, namespace, name] = step.stored;
    let mut get = args(&["get", kind, name, "-o", "json"]);
    if !namespace.is_empty() {
        get.extend(args(&["-n", namespace]));
    }
    let (found, stdout, stderr) = kubectl(cluster, &get, None).await;
    let stored = if found == 0 {
        normalise(&serde_json::from_str(&stdout).expect("kubectl get -o json"))
    } else {
        stderr.trim().to_owned()
    };
    (Outcome { exit, error, phase, output, stored, calls }, wrapped)
}

/// Waits until the API server calls the registered webhooks (it reads registrations from an
/// informer): a mutated dry-run pod and a denied configmap in the namespace `probe`.
async fn wait_until_in_force(cluster: &ControlPlane) {
    let mut attempt = 0;
    let in_force = eventually(Duration::from_secs(30), || {
        attempt += 1;
        let probe_pod = pod("probe", "webhook-to-be-mutated", json!({}));
        let probe_cm = configmap(
            "probe",
            &format!("probe-{attempt}"),
            json!({}),
            Some(json!({"webhook-e2e-test": "webhook-disallow"})),
        );
        async move {
            let (_, stdout, _) = kubectl(
                cluster,
                &args(&["create", "--dry-run=server", "-o", "json", "-f", "-"]),
                Some(&probe_pod),
            )
            .await;
            let mutated = stdout.contains("webhook-added-init-container");
            let (exit, _, _) = kubectl(cluster, &args(&["create", "-f", "-"]), Some(&probe_cm)).await;
            mutated && exit != 0
        }
    })
    .await;
    assert!(in_force, "the webhooks are not called within 30 s");
}

/// A fresh control plane, the fleet registered directly or behind the gateway, the script run.
async fn run_script(
    mode: Mode,
    fleet_yaml: &str,
    reinvokers: &Reinvokers,
    kopf_port: u16,
) -> Vec<(Outcome, bool)> {
    let cluster = ControlPlane::start().await;
    // Stopped when the script has run.
    let _kopf = start_kopf(&cluster, kopf_port).await;
    let admin = |args: &'static [&'static str]| cluster.kubectl_ok(Identity::Admin, args);
    admin(&["create", "namespace", "probe"]).await;
    admin(&["label", "namespace", "probe", "e2e=enabled"]).await;
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    std::fs::create_dir(&fleet_dir).unwrap();
    binary::write(&fleet_dir, "fleet.yaml", fleet_yaml);

    // Held until the script has run: the gateway stops when dropped.
    let mut gateway: Option<Served> = None;
    match mode {
        Mode::Direct => {
            cluster.apply_ok(Identity::Admin, fleet_yaml).await;
        }
        Mode::Gateway => {
            let (served, address) = start_gateway(&cluster, dir.path(), &fleet_dir).await;
            let ca_file = binary::write(dir.path(), "gateway-ca.pem", &ca().cert_pem);
            let registration = binary::run(&[
                "registration",
                "--config",
                fleet_dir.to_str().unwrap(),
                "--url",
                &format!("https://{address}"),
                "--ca-bundle",
                &ca_file,
                "--namespace",
                "admission-gateway",
                // A namespace the script never uses, whose name YAML 1.1 (kubectl) reads as a
                // boolean: the registration must still apply as printed.
                "--exclude-namespace",
                "off",
            ])
            .await;
            assert!(registration.status.success(), "registration: {}", binary::text(&registration.stderr));
            cluster.apply_ok(Identity::Admin, &binary::text(&registration.stdout)).await;
            gateway = Some(served);
        }
    }
    wait_until_in_force(&cluster).await;
    let registered = cluster
        .kubectl_ok(
            Identity::Admin,
            &["get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name"],
        )
        .await;
    let expected = match mode {
        Mode::Direct => ["e2e-mutating", "e2e-validating"],
        Mode::Gateway => ["admission-gateway", "admission-gateway"],
    };
    let names: Vec<&str> = registered.lines().map(|line| line.rsplit('/').next().unwrap()).collect();
    assert_eq!(names, expected, "{mode:?}: what the API server calls");

    let phases = phases(fleet_yaml);
    let mut outcomes = Vec::new();
    for step in script() {
        outcomes.push(perform(&cluster, &step, reinvokers, &phases).await);
    }
    if let Some(mut served) = gateway {
        assert!(served.is_running(), "the gateway ran through the script");
    }
    outcomes
}

/// The real binary in cluster mode as deploy/base runs it, with the grants of
/// deploy/base/rbac.yaml and the fleet from files; ready before its registration is applied.
async fn start_gateway(cluster: &ControlPlane, dir: &Path, fleet_dir: &Path) -> (Served, String) {
    cluster.kubectl_ok(Identity::Admin, &["create", "namespace", "admission-gateway"]).await;
    let rbac = Path::new(REPOSITORY).join("deploy/base/rbac.yaml");
    cluster
        .kubectl_ok(Identity::Admin, &["apply", "-n", "admission-gateway", "-f", rbac.to_str().unwrap()])
        .await;
    let leaf = ca().issue(&["127.0.0.1"]).unwrap();
    let cert = binary::write(dir, "tls.crt", &leaf.cert_pem);
    let key = binary::write(dir, "tls.key", &leaf.key_pem);
    let kubeconfig = cluster.kubeconfig(Identity::Gateway);
    let served = Served::start(&[
        "serve",
        "--config",
        fleet_dir.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    let admin =
        served.logged("admin listener up", "metrics_address").await.expect("the admin listener comes up");
    let address = served.logged("serving", "address").await.expect("the gateway serves");
    let client = crate::support::http_client();
    let ready = eventually(Duration::from_secs(20), || {
        let uri: http::Uri = format!("http://{admin}/readyz").parse().unwrap();
        let client = client.clone();
        async move { matches!(client.get(uri).await, Ok(response) if response.status() == 200) }
    })
    .await;
    assert!(ready, "the gateway is ready (namespace cache synced) before it is registered");
    (served, address)
}

fn cell(text: &str, width: usize) -> String {
    let text: String = text.chars().take(width).collect();
    format!("{text:width$}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_answers_kubectl_as_the_fleet_registered_directly_does() {
    let started = Instant::now();
    let agnhost = start_agnhost().await;
    // Nobody listens on port 1 (a privileged port): refused at once, in both runs. A port freed
    // by the test could be taken by a later server (the second API server's) in one run only.
    let dead = 1;
    let reinvokers = Reinvokers::start().await;
    let kopf_port = stable_free_port();
    let fleet_yaml = fleet(agnhost.port, dead, &reinvokers, kopf_port);

    let direct = run_script(Mode::Direct, &fleet_yaml, &reinvokers, kopf_port).await;
    let through_gateway = run_script(Mode::Gateway, &fleet_yaml, &reinvokers, kopf_port).await;

    let steps = script();
    // Checked after the table is printed, so that a failure shows every outcome.
    let mut not_exercised = Vec::new();
    for (name, expected) in EXERCISED {
        let index =
            steps.iter().position(|step| step.name == name).unwrap_or_else(|| panic!("no step {name}"));
        let outcome = format!("{:?}", direct[index].0);
        if !outcome.contains(expected) {
            not_exercised.push(format!("direct run, {name}: {expected} not in {outcome}"));
        }
    }

    let differences = std::fs::read_to_string(Path::new(REPOSITORY).join("docs/differences.md")).unwrap();
    let mut unexpected = Vec::new();
    println!("\n| operation | direct | gateway | same? |\n| --- | --- | --- | --- |");
    for ((step, (direct, _)), (gateway, wrapped)) in steps.iter().zip(&direct).zip(&through_gateway) {
        let listed = KNOWN_DIFFERENCES.iter().find(|(name, _)| *name == step.name).map(|(_, known)| *known);
        let verdict = match listed {
            _ if direct == gateway && *wrapped => "same (unwrapped)".to_owned(),
            _ if direct == gateway => "same".to_owned(),
            Some(known) if known.reconciles(direct, gateway) => {
                assert!(
                    differences.contains(known.bullet()),
                    "docs/differences.md no longer lists {}",
                    known.bullet()
                );
                format!("known: {}", known.bullet().trim_matches('*'))
            }
            _ => {
                unexpected.push(format!("{}:\n  direct:  {direct:?}\n  gateway: {gateway:?}", step.name));
                "DIFFERENT".to_owned()
            }
        };
        println!(
            "| {} | {} | {} | {verdict} |",
            cell(step.name, 58),
            cell(&direct.summary(), 44),
            cell(&gateway.summary(), 44)
        );
    }
    println!(
        "({} operations, {:.1} s; \"unwrapped\": equal once the API server's wrapper naming the gateway's \
         webhook is taken off, docs/differences.md: \"its messages wrap ours once more\")",
        steps.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("E2E_DUMP").is_some() {
        for (step, (direct, _)) in steps.iter().zip(&direct) {
            println!("{}: {direct:?}", step.name);
        }
    }
    for (step, ((direct, _), (gateway, _))) in steps.iter().zip(direct.iter().zip(&through_gateway)) {
        if direct != gateway {
            println!("{}:\n  direct:  {}\n  gateway: {}", step.name, direct.error, gateway.error);
        }
    }
    assert!(not_exercised.is_empty(), "{}", not_exercised.join("\n"));
    assert!(
        unexpected.is_empty(),
        "differences docs/differences.md does not list:\n{}",
        unexpected.join("\n")
    );
}

/// Without a cluster: the same fleet denial, answered by the gateway's validating webhook as
/// registered directly, or by its mutating one (a denial in the wrong phase), unwraps to the
/// same text; only the phase tells them apart, and it does.
#[test]
fn a_denial_in_the_wrong_phase_is_a_difference() {
    let fleet = "kind: MutatingWebhookConfiguration\nwebhooks:\n- name: m.example.com\n---\n\
                 kind: ValidatingWebhookConfiguration\nwebhooks:\n- name: v.example.com\n";
    let phases = phases(fleet);
    let denial = r#"admission webhook "v.example.com" denied the request: no"#;
    let direct = format!(r#"Error from server: error when creating "STDIN": {denial}"#);
    let through = |gateway: &str| {
        format!(
            r#"Error from server: error when creating "STDIN": admission webhook "{gateway}" denied the request: {denial}"#
        )
    };
    let (right, wrong) = (through(GATEWAY_WEBHOOKS[1]), through(GATEWAY_WEBHOOKS[0]));
    assert_eq!(unwrap_gateway(&right).0, direct);
    assert_eq!(unwrap_gateway(&wrong).0, direct, "the text alone cannot tell them apart");
    assert_eq!(phase_of(&direct, &phases), Some("validating"));
    assert_eq!(phase_of(&right, &phases), Some("validating"));
    assert_eq!(phase_of(&wrong, &phases), Some("mutating"));
    let call_error =
        r#"Internal error occurred: failed calling webhook "m.example.com": Post "https://x": EOF"#;
    assert_eq!(phase_of(call_error, &phases), Some("mutating"));
    assert_eq!(phase_of("Error from server (NotFound): pods \"x\" not found", &phases), None);
}
