//! deploy/ checked for real: every overlay under `deploy/overlays` is built by `kubectl
//! kustomize` and its output is `kubectl apply --dry-run=server` against a real kube-apiserver
//! (`support::control_plane`), after the minimal CRDs of `tests/e2e/crds` (cert-manager's
//! Issuer/Certificate, the Prometheus Operator's ServiceMonitor) have been applied; the
//! invariants the manifests promise (non-root, probes, drain within the grace period, the
//! registration pointing at the Service, cert-manager injection from a Certificate that exists)
//! are read from the built output. Misspelled fields in a copy of deploy/ must be refused.
//! The control plane is provisioned on first use (`support/provision.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize as _;
use serde_json::{json, Value};

use crate::support::control_plane::{ControlPlane, Identity};
use crate::support::eventually;

const REPOSITORY: &str = env!("CARGO_MANIFEST_DIR");
const NAMESPACE: &str = "admission-gateway";
/// How long the gateway gives in-flight reviews after the drain delay (src/app.rs, `drain`).
const IN_FLIGHT_GRACE_SECONDS: u64 = 30;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The overlay directories under `root/overlays`, sorted.
fn overlays(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("overlays"))
        .expect("deploy/overlays")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `kubectl kustomize DIR`: the objects, or kubectl's error.
async fn kustomize(cluster: &ControlPlane, dir: &Path) -> Result<Vec<Value>, String> {
    let output = cluster.kubectl(Identity::Admin, &["kustomize", dir.to_str().unwrap()]).await;
    if !output.status.success() {
        return Err(text(&output.stderr));
    }
    Ok(serde_norway::Deserializer::from_str(&text(&output.stdout))
        .map(|document| Value::deserialize(document).expect("kustomize prints YAML"))
        .filter(|document| !document.is_null())
        .collect())
}

/// The label the overlays put on the registrations, so that they are applied last.
const REGISTRATION_LABEL: &str = "admission-gateway/registration";

/// `kubectl apply --dry-run=server -l SELECTOR -f -` of the objects as one List. The only rewrite: the
/// test API server is v1.20, which serves PodDisruptionBudget as policy/v1beta1 only (policy/v1
/// arrived in 1.21 with the same spec fields), so a policy/v1 one is checked as v1beta1.
async fn dry_run(cluster: &ControlPlane, objects: &[Value], selector: &str) -> Result<String, String> {
    let items: Vec<Value> = objects
        .iter()
        .cloned()
        .map(|mut object| {
            if object["kind"] == "PodDisruptionBudget" && object["apiVersion"] == "policy/v1" {
                object["apiVersion"] = json!("policy/v1beta1");
            }
            object
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let output = cluster
        .kubectl_with_stdin(
            Identity::Admin,
            &["apply", "--dry-run=server", "--validate=strict", "-l", selector, "-f", "-"],
            Some(list),
        )
        .await;
    if output.status.success() {
        Ok(text(&output.stdout))
    } else {
        Err(format!("{}{}", text(&output.stdout), text(&output.stderr)))
    }
}

/// The CRDs of tests/e2e/crds applied for real and established, and the namespace the
/// overlays deploy into created (a dry run does not create it for the objects in it).
async fn prepare(cluster: &ControlPlane) {
    let crds = PathBuf::from(REPOSITORY).join("tests/e2e/crds");
    for file in ["cert-manager.yaml", "servicemonitor.yaml"] {
        let path = crds.join(file);
        cluster.kubectl_ok(Identity::Admin, &["apply", "-f", path.to_str().unwrap()]).await;
    }
    cluster
        .kubectl_ok(
            Identity::Admin,
            &[
                "wait",
                "--for=condition=established",
                "--timeout=30s",
                "crd/issuers.cert-manager.io",
                "crd/certificates.cert-manager.io",
                "crd/servicemonitors.monitoring.coreos.com",
            ],
        )
        .await;
    // Served once discovery lists them.
    let served = eventually(Duration::from_secs(15), || async {
        let output = cluster.kubectl(Identity::Admin, &["api-resources", "-o", "name"]).await;
        let names = text(&output.stdout);
        names.contains("certificates.cert-manager.io")
            && names.contains("servicemonitors.monitoring.coreos.com")
    })
    .await;
    assert!(served, "the CRDs of tests/e2e/crds are not served");
    cluster.kubectl_ok(Identity::Admin, &["create", "namespace", NAMESPACE]).await;
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|object| object["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], kind: &str, overlay: &str) -> &'a Value {
    let found = find(objects, kind);
    assert_eq!(found.len(), 1, "{overlay}: one {kind}");
    found[0]
}

/// Whether `selector.matchLabels` is a subset of `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector["matchLabels"].as_object().expect("matchLabels");
    !wanted.is_empty() && wanted.iter().all(|(key, value)| &labels[key] == value)
}

/// `--drain-delay` of the gateway's container in whole seconds (5 s by default).
fn drain_delay_seconds(args: &[Value]) -> u64 {
    let value = args
        .iter()
        .filter_map(Value::as_str)
        .find_map(|arg| arg.strip_prefix("--drain-delay="))
        .unwrap_or("5s");
    value.strip_suffix('s').and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("--drain-delay={value}"))
}

/// What every overlay promises, read from its built output.
fn check_invariants(overlay: &str, objects: &[Value]) {
    let deployment = one(objects, "Deployment", overlay);
    let pod = &deployment["spec"]["template"];
    let pod_labels = &pod["metadata"]["labels"];
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{overlay}: runAsNonRoot");
    let containers = spec["containers"].as_array().unwrap();
    for container in containers {
        let name = &container["name"];
        let security = &container["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true, "{overlay}: {name} read-only root");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{overlay}: {name} escalation");
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{overlay}: {name} capabilities");
        assert!(container["resources"]["limits"]["memory"].is_string(), "{overlay}: {name} memory limit");
        assert!(container["resources"]["requests"]["cpu"].is_string(), "{overlay}: {name} cpu request");
    }
    let gateway = containers.iter().find(|c| c["name"] == "gateway").expect("the gateway container");
    assert_eq!(gateway["livenessProbe"]["httpGet"]["path"], "/healthz", "{overlay}");
    assert_eq!(gateway["readinessProbe"]["httpGet"]["path"], "/readyz", "{overlay}");
    let drain = drain_delay_seconds(gateway["args"].as_array().unwrap());
    let grace = spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    assert!(
        grace >= drain + IN_FLIGHT_GRACE_SECONDS,
        "{overlay}: terminationGracePeriodSeconds {grace} < --drain-delay {drain} s + {IN_FLIGHT_GRACE_SECONDS} s for in-flight reviews"
    );

    // The Service selects the Pods; the registrations call that Service on a port it has.
    let service = one(objects, "Service", overlay);
    assert!(selects(&json!({"matchLabels": service["spec"]["selector"]}), pod_labels), "{overlay}");
    let registrations: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["kind"] == "MutatingWebhookConfiguration" || o["kind"] == "ValidatingWebhookConfiguration"
        })
        .collect();
    assert!(!registrations.is_empty(), "{overlay}: no registration");
    for object in objects {
        let labelled = object["metadata"]["labels"][REGISTRATION_LABEL] == "true";
        let registration = object["kind"].as_str().unwrap().ends_with("WebhookConfiguration");
        assert_eq!(labelled, registration, "{overlay}: {REGISTRATION_LABEL} on {} only", "the registrations");
    }
    for registration in &registrations {
        for webhook in registration["webhooks"].as_array().unwrap() {
            let called = &webhook["clientConfig"]["service"];
            assert_eq!(called["name"], service["metadata"]["name"], "{overlay}");
            assert_eq!(called["namespace"], json!(NAMESPACE), "{overlay}");
            let ports = service["spec"]["ports"].as_array().unwrap();
            assert!(ports.iter().any(|p| p["port"] == called["port"]), "{overlay}: port {}", called["port"]);
        }
    }
    let fleet = find(objects, "ConfigMap");
    assert!(
        fleet.iter().any(|c| c["metadata"]["labels"]["admission-gateway/fleet"] == "true"),
        "{overlay}: the fleet ConfigMap"
    );
    assert!(find(objects, "NetworkPolicy").iter().any(|p| selects(&p["spec"]["podSelector"], pod_labels)));

    match overlay {
        "sidecar" => {
            let server = containers.iter().find(|c| c["name"] == "webhook-server").expect("webhook-server");
            let port = server["args"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|a| a.as_str().and_then(|a| a.strip_prefix("--port=")))
                .expect("--port");
            let data = fleet[0]["data"]["fleet.yaml"].as_str().unwrap();
            assert!(data.contains(&format!("url: https://127.0.0.1:{port}/")), "{data}");
            assert!(!data.contains("service:"), "the sidecar fleet calls the server in the Pod only");
        }
        _ => {
            assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2, "{overlay}: replicas");
            let budget = one(objects, "PodDisruptionBudget", overlay);
            assert!(selects(&budget["spec"]["selector"], pod_labels), "{overlay}: PDB selector");
            let spread = spec["topologySpreadConstraints"].as_array().expect("topologySpreadConstraints");
            assert!(spread.iter().all(|c| selects(&c["labelSelector"], pod_labels)), "{overlay}");
            assert_eq!(deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0, "{overlay}");
        }
    }
    if overlay == "cert-manager" {
        let secret = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "tls").unwrap()
            ["secret"]["secretName"]
            .clone();
        for registration in &registrations {
            let from = registration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
                .as_str()
                .unwrap_or_else(|| panic!("cert-manager: no inject-ca-from on {}", registration["kind"]));
            let (namespace, name) = from.split_once('/').unwrap();
            let certificate = find(objects, "Certificate")
                .into_iter()
                .find(|c| c["metadata"]["name"] == name && c["metadata"]["namespace"] == namespace)
                .unwrap_or_else(|| panic!("cert-manager: no Certificate {from}"));
            assert_eq!(certificate["spec"]["secretName"], secret, "the Certificate fills the mounted Secret");
            let host = format!("{}.{}.svc", service["metadata"]["name"].as_str().unwrap(), NAMESPACE);
            assert!(certificate["spec"]["dnsNames"].as_array().unwrap().contains(&json!(host)), "{host}");
        }
    }
    if overlay == "servicemonitor" {
        let monitor = one(objects, "ServiceMonitor", overlay);
        assert!(selects(&monitor["spec"]["selector"], &service["metadata"]["labels"]), "selects the Service");
        let port = &monitor["spec"]["endpoints"][0]["port"];
        assert!(service["spec"]["ports"].as_array().unwrap().iter().any(|p| &p["name"] == port), "{port}");
    }
}

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A misspelling in a copy of deploy/: (file, field, misspelt as, overlay that must fail).
const MUTANTS: [(&str, &str, &str, &str); 4] = [
    (
        "components/production/deployment.yaml",
        "terminationGracePeriodSeconds:",
        "terminationGracePeriodSecond:",
        "standalone",
    ),
    ("overlays/cert-manager/certificate.yaml", "dnsNames:", "dnsName:", "cert-manager"),
    ("overlays/servicemonitor/servicemonitor.yaml", "endpoints:", "endpoint:", "servicemonitor"),
    ("overlays/sidecar/deployment.yaml", "readOnlyRootFilesystem:", "readOnlyRootFileSystem:", "sidecar"),
];

/// A change the API server accepts but a promise of the manifests does not: (file, text, changed
/// to, overlay, what the failed check says).
const BROKEN_PROMISES: [(&str, &str, &str, &str, &str); 3] = [
    (
        "components/production/kustomization.yaml",
        "--drain-delay=10s",
        "--drain-delay=20s",
        "standalone",
        "terminationGracePeriodSeconds 45 < --drain-delay 20 s",
    ),
    (
        "components/production/pdb.yaml",
        "app.kubernetes.io/name: admission-gateway",
        "app.kubernetes.io/name: admission-gatewy",
        "cert-manager",
        "PDB selector",
    ),
    (
        "overlays/cert-manager/certificate.yaml",
        "secretName: admission-gateway-tls",
        "secretName: admission-gateway-cert",
        "cert-manager",
        "the Certificate fills the mounted Secret",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_passes_a_real_api_server_and_broken_ones_do_not() {
    let cluster = ControlPlane::start().await;
    prepare(&cluster).await;
    let deploy = PathBuf::from(REPOSITORY).join("deploy");
    let names = overlays(&deploy);
    assert_eq!(
        names,
        ["cert-manager", "servicemonitor", "sidecar", "standalone"],
        "a new overlay is checked here too"
    );

    for overlay in &names {
        let objects = kustomize(&cluster, &deploy.join("overlays").join(overlay))
            .await
            .unwrap_or_else(|e| panic!("kubectl kustomize deploy/overlays/{overlay}: {e}"));
        check_invariants(overlay, &objects);
        // In docs/deploying.md's rollout order: everything but the registration, then the registration.
        let registrations =
            objects.iter().filter(|o| o["kind"].as_str().unwrap().ends_with("WebhookConfiguration")).count();
        let mut accepted = Vec::new();
        for selector in [format!("{REGISTRATION_LABEL}!=true"), format!("{REGISTRATION_LABEL}=true")] {
            let applied = dry_run(&cluster, &objects, &selector).await.unwrap_or_else(|e| {
                panic!("deploy/overlays/{overlay} ({selector}) refused by the API server:\n{e}")
            });
            accepted.push(applied.lines().filter(|line| line.contains("(server dry run)")).count());
        }
        assert_eq!(
            accepted,
            [objects.len() - registrations, registrations],
            "{overlay}: objects dry-run per step"
        );
        println!("deploy/overlays/{overlay}: {} objects accepted (server dry run)", objects.len());
    }

    for (file, field, misspelt, overlay) in MUTANTS {
        let copy = tempfile::tempdir().unwrap();
        copy_tree(&deploy, copy.path());
        let path = copy.path().join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        assert!(original.contains(field), "{file} has {field}");
        std::fs::write(&path, original.replacen(field, misspelt, 1)).unwrap();
        let refused = match kustomize(&cluster, &copy.path().join("overlays").join(overlay)).await {
            Err(error) => error,
            Ok(objects) => dry_run(&cluster, &objects, "").await.err().unwrap_or_default(),
        };
        let name = misspelt.trim_end_matches(':');
        assert!(refused.contains(name), "{file} with {name} was not refused: {refused:?}");
        let why = refused.lines().find(|line| line.contains(name)).unwrap_or_default();
        println!("mutant {file}: {field} -> {misspelt}: refused: {why}");
    }

    for (file, text, changed, overlay, says) in BROKEN_PROMISES {
        let copy = tempfile::tempdir().unwrap();
        copy_tree(&deploy, copy.path());
        let path = copy.path().join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        assert!(original.contains(text), "{file} has {text:?}");
        std::fs::write(&path, original.replacen(text, changed, 1)).unwrap();
        let objects = kustomize(&cluster, &copy.path().join("overlays").join(overlay)).await.unwrap();
        let failed = std::panic::catch_unwind(|| check_invariants(overlay, &objects)).expect_err(file);
        let message = failed
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| failed.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        assert!(message.contains(says), "{file}: {text} -> {changed}: {message}");
        println!("broken promise {file}: {text:?} -> {changed:?}: caught: {says}");
    }
}
