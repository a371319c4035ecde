//! The real binary: `registration`, its output against each overlay's `registration.yaml` under
//! `deploy/overlays`, its exit codes and its warnings.

use std::path::Path;
use std::process::{Command, Output};

use serde::Deserialize as _;
use serde_json::{json, Value};

use crate::support::{ca, mutating, validating, webhook_at, Fleet};

const BINARY: &str = env!("CARGO_BIN_EXE_admission-gateway");
const REPOSITORY: &str = env!("CARGO_MANIFEST_DIR");
/// The Service every overlay registers the gateway as (deploy/base: its namespace, Service, port).
const SERVICE: &str = "admission-gateway/admission-gateway:443";
/// Each generated registration under deploy/ and the command it is the output of, run from the
/// repository root (the overlay that takes no registration of its own is not listed).
const DEPLOY_REGISTRATIONS: [(&str, &[&str]); 3] = [
    (
        "deploy/overlays/standalone/registration.yaml",
        &["registration", "--config", "deploy/base/fleet", "--service", SERVICE],
    ),
    (
        "deploy/overlays/cert-manager/registration.yaml",
        &[
            "registration",
            "--config",
            "deploy/base/fleet",
            "--service",
            SERVICE,
            "--inject-ca-from",
            "admission-gateway/admission-gateway",
        ],
    ),
    (
        "deploy/overlays/sidecar/registration.yaml",
        &["registration", "--config", "deploy/overlays/sidecar/fleet", "--service", SERVICE],
    ),
];
/// Nobody listens there; the binary never calls the fleet.
const NOWHERE: &str = "https://127.0.0.1:1/";

fn run(args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(args)
        .current_dir(REPOSITORY)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn yaml_documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).expect("YAML"))
        .filter(|document| !document.is_null())
        .collect()
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

#[test]
fn every_deploy_registration_is_what_its_command_prints() {
    for (file, command) in DEPLOY_REGISTRATIONS {
        let output = run(command);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", text(&output.stderr));
        let content = std::fs::read_to_string(Path::new(REPOSITORY).join(file)).unwrap();
        let line = format!("admission-gateway {}", command.join(" "));
        assert!(
            content.lines().next().is_some_and(|first| first.starts_with('#') && first.contains(&line)),
            "{file}: the first line gives the command that regenerates it: {line}"
        );
        assert!(
            text(&output.stdout) == content,
            "{file} has drifted from the command's output; regenerate it with\n  cargo run -q -- {} > {file}",
            command.join(" ")
        );
        let overlay = Path::new(file).parent().unwrap();
        let kustomization =
            std::fs::read_to_string(Path::new(REPOSITORY).join(overlay).join("kustomization.yaml"));
        let resources = yaml_documents(&kustomization.unwrap()).remove(0)["resources"].clone();
        assert!(resources.as_array().unwrap().contains(&json!("registration.yaml")), "{file}: {resources:?}");
    }

    // The overlays' --service is the one the base deploys: its namespace, Service and port.
    let read = |file: &str| -> Value {
        let text = std::fs::read_to_string(Path::new(REPOSITORY).join("deploy/base").join(file)).unwrap();
        yaml_documents(&text).remove(0)
    };
    let kustomization = read("kustomization.yaml");
    let service = read("service.yaml");
    let https_port =
        service["spec"]["ports"].as_array().unwrap().iter().find(|p| p["name"] == "https").unwrap();
    let deployed = format!(
        "{}/{}:{}",
        kustomization["namespace"].as_str().unwrap(),
        service["metadata"]["name"].as_str().unwrap(),
        https_port["port"]
    );
    assert_eq!(SERVICE, deployed);
}

#[test]
fn the_output_passes_check_and_names_the_fleets_rules() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([
        mutating(
            "labels",
            [webhook_at("label.example.com", NOWHERE)
                .rule(&["CREATE"], &["pods"])
                .if_needed()
                .timeout_seconds(4)],
        ),
        validating(
            "exec",
            [webhook_at("exec.example.com", NOWHERE).rule(&["CONNECT"], &["pods/exec"]).ignore()],
        ),
    ]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());
    let ca_file = write(dir.path(), "ca.pem", &ca().cert_pem);

    let output =
        run(&["registration", "--config", &config, "--service", "gw/front", "--ca-bundle", &ca_file]);

    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let documents = yaml_documents(&stdout);
    let hooks: Vec<&Value> = documents.iter().map(|d| &d["webhooks"][0]).collect();
    assert_eq!(hooks.len(), 2, "{stdout}");
    assert_eq!(hooks[0]["rules"][0]["resources"], json!(["pods"]));
    assert_eq!(hooks[0]["timeoutSeconds"], json!(5), "one webhook, reinvoked by none after it, + 1 s");
    assert_eq!(hooks[1]["rules"][0]["resources"], json!(["pods/exec"]));
    assert_eq!(hooks[1]["failurePolicy"], json!("Ignore"));
    assert_eq!(hooks[1]["clientConfig"]["caBundle"], json!(ca().ca_bundle()));
    let printed = write(dir.path(), "registration.yaml", &stdout);
    let check = run(&["check", "--config", &printed]);
    assert!(
        text(&check.stdout)
            .contains("configuration is valid: 1 mutating and 1 validating webhooks, 0 namespaces"),
        "{}",
        text(&check.stdout)
    );
}

#[test]
fn every_error_exits_2_with_the_reason_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.yaml",
        &Fleet::of([validating("v", [webhook_at("v.example.com", NOWHERE)])]).yaml(),
    );
    let bad = write(
        dir.path(),
        "bad.yaml",
        &Fleet::of([validating(
            "limits",
            [
                webhook_at("slow.example.com", NOWHERE).timeout_seconds(31),
                webhook_at("odd.example.com", NOWHERE).set("failurePolicy", json!("Sometimes")),
            ],
        )])
        .yaml(),
    );
    let key = write(dir.path(), "key.pem", &ca().issue(&["gw"]).unwrap().key_pem);
    let missing = dir.path().join("missing.yaml").display().to_string();
    let service = ["--service", "gw/front"];
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (
            vec!["--config", &bad],
            &[
                r#"ValidatingWebhookConfiguration "limits": webhook "slow.example.com": webhooks[0].timeoutSeconds"#,
                r#"webhook "odd.example.com": webhooks[1].failurePolicy: Unsupported value: "Sometimes""#,
                "configuration refused: 2 error(s), 0 warning(s)",
            ],
        ),
        (vec!["--config", &missing], &["missing.yaml: cannot read"]),
        (
            vec!["--config", &good, "--ca-bundle", &key],
            &["--ca-bundle", "unable to parse bytes as PEM block"],
        ),
        (vec!["--config", &good, "--name", "Bad_Name"], &["would be refused: metadata.name"]),
        (vec!["--config", &good, "--service", "no-slash"], &["--service", "NAMESPACE/NAME"]),
    ];
    for (args, expected) in cases {
        let mut argv = vec!["registration"];
        argv.extend(&args);
        if !args.contains(&"--service") {
            argv.extend(service);
        }
        let output = run(&argv);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: nothing on stdout: {}", text(&output.stdout));
        for part in expected {
            assert!(stderr.contains(part), "{args:?}: {part:?} not in\n{stderr}");
        }
    }
    for argv in [
        vec!["registration", "--config", &good],
        vec!["registration", "--config", &good, "--service", "a/b", "--url", "https://gw.example.com"],
    ] {
        let output = run(&argv);
        assert_eq!(output.status.code(), Some(2), "{argv:?}: exactly one of --service and --url");
    }
}

#[test]
fn warnings_and_notes_go_to_stderr_and_the_yaml_still_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([
        mutating(
            "chain",
            [
                webhook_at("first.example.com", NOWHERE).timeout_seconds(20).if_needed(),
                webhook_at("second.example.com", NOWHERE)
                    .timeout_seconds(5)
                    .namespace_selector(json!({"matchLabels": {"env": "prod"}})),
            ],
        ),
        validating("legacy", [webhook_at("legacy.example.com", NOWHERE).side_effects("Unknown")]),
    ])
    .namespace("old-team", &[("env", "prod"), ("admission-gateway/ignore", "true")]);
    let config = write(dir.path(), "fleet.yaml", &fleet.yaml());

    let output = run(&["registration", "--config", &config, "--service", "gw/front"]);

    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let documents = yaml_documents(&stdout);
    assert_eq!(documents[0]["webhooks"][0]["timeoutSeconds"], json!(30), "{stdout}");
    assert!(!stdout.contains("warning:"), "{stdout}");
    for expected in [
        // The chain needs 20 × 2 + 5 + 1 s.
        r#"warning: MutatingWebhookConfiguration "admission-gateway": timeoutSeconds capped at 30 (the API server's maximum), below the 46s"#,
        r#"warning: webhook "first.example.com" of MutatingWebhookConfiguration "chain" matches requests in namespace(s) "gw", "kube-node-lease", "kube-system", "old-team", which the registration excludes"#,
        r#"warning: webhook "second.example.com" of MutatingWebhookConfiguration "chain" matches requests in namespace(s) "old-team", which"#,
        r#"warning: webhook "legacy.example.com" of ValidatingWebhookConfiguration "legacy" matches requests in namespace(s) "gw", "kube-node-lease", "kube-system", "old-team","#,
        // The configuration's own warnings, as `check` prints them.
        r#"ValidatingWebhookConfiguration "legacy": webhook "legacy.example.com": webhooks[0].sideEffects: Unsupported value: "Unknown""#,
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in\n{stderr}");
    }

    let only_validating = write(
        dir.path(),
        "validating.yaml",
        &Fleet::of([validating("v", [webhook_at("v.example.com", NOWHERE)])]).yaml(),
    );
    let output = run(&["registration", "--config", &only_validating, "--url", "https://gw.example.com"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("note: the fleet has no mutating webhooks: no MutatingWebhookConfiguration printed"),
        "{stderr}"
    );
    assert!(stderr.contains("note: no --namespace given"), "{stderr}");
    let kinds: Vec<Value> = yaml_documents(&text(&output.stdout)).iter().map(|d| d["kind"].clone()).collect();
    assert_eq!(kinds, [json!("ValidatingWebhookConfiguration")]);
}

#[test]
fn bound_policies_widen_the_validating_registration_with_their_resources() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |name: &str, failure_policy: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": failure_policy,
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["deployments"], "resourceNames": ["web"],
                }]},
                "validations": [{"expression": "true"}],
            },
        })
    };
    let bound = Fleet::of([validating(
        "exec",
        [webhook_at("exec.example.com", NOWHERE).rule(&["CONNECT"], &["pods/exec"]).ignore()],
    )])
    .object(policy("replicas", "Fail"))
    .object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "replicas"},
        "spec": {"policyName": "replicas", "validationActions": ["Deny"]},
    }));
    let config = write(dir.path(), "fleet.yaml", &bound.yaml());
    let output = run(&["registration", "--config", &config, "--service", "gw/front"]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let documents = yaml_documents(&stdout);
    let registered = documents.iter().find(|d| d["kind"] == "ValidatingWebhookConfiguration").expect(&stdout);
    let rules = &registered["webhooks"][0]["rules"];
    assert_eq!(rules.as_array().map(Vec::len), Some(2), "{stdout}");
    assert!(rules.as_array().unwrap().iter().any(|r| r["resources"] == json!(["deployments"])), "{stdout}");
    assert_eq!(
        registered["webhooks"][0]["failurePolicy"],
        json!("Fail"),
        "the policy fails closed: {stdout}"
    );

    // A policy without a binding is never evaluated: nothing to make room for.
    let unbound = Fleet::of([validating(
        "exec",
        [webhook_at("exec.example.com", NOWHERE).rule(&["CONNECT"], &["pods/exec"]).ignore()],
    )])
    .object(policy("replicas", "Fail"));
    let config = write(dir.path(), "unbound.yaml", &unbound.yaml());
    let output = run(&["registration", "--config", &config, "--service", "gw/front"]);
    let stdout = text(&output.stdout);
    let documents = yaml_documents(&stdout);
    let registered = documents.iter().find(|d| d["kind"] == "ValidatingWebhookConfiguration").expect(&stdout);
    assert_eq!(registered["webhooks"][0]["rules"].as_array().map(Vec::len), Some(1), "{stdout}");
    assert_eq!(registered["webhooks"][0]["failurePolicy"], json!("Ignore"), "{stdout}");
}
