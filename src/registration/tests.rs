//! Tables, one per rule of the registration; each case changes one thing in the fleet or the
//! options and names the field it pins.

use std::time::Duration;

use serde::Deserialize as _;
use serde_json::{json, Value};

use super::build::quote_yaml_1_1_booleans;
use super::*;
use crate::config::manifest::ObjectMeta;

const MARGIN: Duration = DEFAULT_DEADLINE_MARGIN;

/// A fleet webhook: valid, `extra` merged over the minimum.
fn hook(name: &str, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": {"service": {"namespace": "team", "name": "svc"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (key, value) in extra.as_object().unwrap() {
        hook[key] = value.clone();
    }
    hook
}

/// A rule in its manifest form (`scope` omitted when empty).
fn rule(operations: &[&str], groups: &[&str], versions: &[&str], resources: &[&str], scope: &str) -> Value {
    let mut rule = json!({
        "operations": operations, "apiGroups": groups, "apiVersions": versions, "resources": resources,
    });
    if !scope.is_empty() {
        rule["scope"] = json!(scope);
    }
    rule
}

/// A defaulted configuration, as `compile::read_checked` hands it over.
fn config(kind: WebhookKind, name: &str, hooks: Vec<Value>) -> WebhookConfiguration {
    let mut config = WebhookConfiguration {
        kind,
        version: crate::config::manifest::ApiVersion::V1,
        metadata: ObjectMeta { name: name.into(), ..Default::default() },
        webhooks: hooks.into_iter().map(|h| serde_json::from_value(h).unwrap()).collect(),
    };
    defaults::apply(&mut config);
    config
}

fn mutating(name: &str, hooks: Vec<Value>) -> WebhookConfiguration {
    config(WebhookKind::Mutating, name, hooks)
}

fn validating(name: &str, hooks: Vec<Value>) -> WebhookConfiguration {
    config(WebhookKind::Validating, name, hooks)
}

/// `--service admission-gateway/admission-gateway`, every default.
fn options() -> Options {
    let args = parse(&[]).unwrap();
    Options::from_args(&args, None, "admission-gateway registration --test".into())
}

fn parse(extra: &[&str]) -> Result<RegistrationArgs, clap::Error> {
    let mut argv = vec!["--config", "fleet.yaml"];
    if !extra.iter().any(|a| *a == "--url" || *a == "--service") {
        argv.extend(["--service", "admission-gateway/admission-gateway"]);
    }
    argv.extend(extra);
    parse_exactly(&argv)
}

/// The `registration` subcommand's flags as the command line parses them (its clap `Args`,
/// without the rest of the command line).
fn parse_exactly(args: &[&str]) -> Result<RegistrationArgs, clap::Error> {
    use clap::{Args as _, FromArgMatches as _};
    let command = RegistrationArgs::augment_args(clap::Command::new("registration"));
    let matches =
        command.try_get_matches_from(std::iter::once("registration").chain(args.iter().copied()))?;
    RegistrationArgs::from_arg_matches(&matches)
}

fn with(extra: &[&str]) -> Options {
    Options::from_args(&parse(extra).unwrap(), None, "admission-gateway registration --test".into())
}

/// The printed documents, parsed back, and the notes.
fn run_build(
    fleet: &[WebhookConfiguration],
    namespaces: &[Namespace],
    options: &Options,
) -> (Vec<Value>, Vec<String>) {
    let built = build(fleet, namespaces, options).unwrap_or_else(|e| panic!("{e:?}"));
    let documents = serde_norway::Deserializer::from_str(&built.yaml)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|document| !document.is_null())
        .collect();
    (documents, built.notes)
}

/// The gateway's webhook of one kind in the output; panics if the object is missing.
fn gateway(documents: &[Value], kind: WebhookKind) -> Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind.kind_name())
        .unwrap_or_else(|| panic!("no {} in {documents:#?}", kind.kind_name()))["webhooks"][0]
        .clone()
}

/// One mutating and one validating webhook, both plain.
fn both() -> Vec<WebhookConfiguration> {
    vec![
        mutating("m", vec![hook("m.example.com", json!({}))]),
        validating("v", vec![hook("v.example.com", json!({}))]),
    ]
}

#[test]
fn rules_are_the_union_of_the_phase_in_call_order_each_kept_verbatim() {
    let exec = rule(&["CONNECT"], &[""], &["v1"], &["pods/exec", "pods/attach"], "Namespaced");
    let pods = rule(&["CREATE"], &[""], &["v1"], &["pods"], "");
    let deployments = rule(&["UPDATE"], &["apps"], &["v1"], &["deployments", "deployments/scale"], "*");
    let nodes = rule(&["DELETE"], &[""], &["v1"], &["nodes"], "Cluster");
    let fleet = vec![
        // "b" comes after "a" in the API server's order although it is read first.
        mutating("b", vec![hook("b1.example.com", json!({"rules": [nodes, pods.clone()]}))]),
        mutating(
            "a",
            vec![
                hook("a1.example.com", json!({"rules": [exec, pods.clone()]})),
                hook("a2.example.com", json!({"rules": [deployments, pods]})),
            ],
        ),
        validating(
            "v",
            vec![hook("v.example.com", json!({"rules": [rule(&["*"], &["batch"], &["v1"], &["jobs"], "")]}))],
        ),
    ];
    let (documents, _) = run_build(&fleet, &[], &options());

    let expected = json!([
        rule(&["CONNECT"], &[""], &["v1"], &["pods/exec", "pods/attach"], "Namespaced"),
        rule(&["CREATE"], &[""], &["v1"], &["pods"], "*"),
        rule(&["UPDATE"], &["apps"], &["v1"], &["deployments", "deployments/scale"], "*"),
        rule(&["DELETE"], &[""], &["v1"], &["nodes"], "Cluster"),
    ]);
    assert_eq!(gateway(&documents, WebhookKind::Mutating)["rules"], expected, "mutating union");
    assert_eq!(
        gateway(&documents, WebhookKind::Validating)["rules"],
        json!([rule(&["*"], &["batch"], &["v1"], &["jobs"], "*")]),
        "each phase has its own rules"
    );
}

#[test]
fn a_rule_that_another_covers_is_dropped() {
    let r = |ops: &[&str], groups: &[&str], versions: &[&str], resources: &[&str], scope: &str| {
        rule(ops, groups, versions, resources, scope)
    };
    let pods = r(&["CREATE"], &[""], &["v1"], &["pods"], "*");
    let cases: Vec<(&str, Vec<Value>, Vec<usize>)> = vec![
        ("*/* covers pods", vec![pods.clone(), r(&["CREATE"], &[""], &["v1"], &["*/*"], "*")], vec![1]),
        (
            "* does not cover a subresource",
            vec![
                r(&["CREATE"], &[""], &["v1"], &["*"], "*"),
                r(&["CREATE"], &[""], &["v1"], &["pods/status"], "*"),
            ],
            vec![0, 1],
        ),
        (
            "pods does not cover pods/status",
            vec![pods.clone(), r(&["CREATE"], &[""], &["v1"], &["pods/status"], "*")],
            vec![0, 1],
        ),
        (
            "pods/* covers pods and pods/status",
            vec![
                pods.clone(),
                r(&["CREATE"], &[""], &["v1"], &["pods/status"], "*"),
                r(&["CREATE"], &[""], &["v1"], &["pods/*"], "*"),
            ],
            vec![2],
        ),
        (
            "*/scale covers deployments/scale, not deployments",
            vec![
                r(&["UPDATE"], &["apps"], &["v1"], &["deployments", "deployments/scale"], "*"),
                r(&["UPDATE"], &["apps"], &["v1"], &["*/scale"], "*"),
            ],
            vec![0, 1],
        ),
        (
            "more operations cover fewer",
            vec![pods.clone(), r(&["CREATE", "UPDATE"], &[""], &["v1"], &["pods"], "*")],
            vec![1],
        ),
        ("* operations cover any", vec![pods.clone(), r(&["*"], &[""], &["v1"], &["pods"], "*")], vec![1]),
        (
            "another operation does not",
            vec![pods.clone(), r(&["UPDATE"], &[""], &["v1"], &["pods"], "*")],
            vec![0, 1],
        ),
        (
            "another group does not",
            vec![pods.clone(), r(&["CREATE"], &["apps"], &["v1"], &["pods"], "*")],
            vec![0, 1],
        ),
        ("* groups do", vec![pods.clone(), r(&["CREATE"], &["*"], &["v1"], &["pods"], "*")], vec![1]),
        (
            "another version does not",
            vec![pods.clone(), r(&["CREATE"], &[""], &["v2"], &["pods"], "*")],
            vec![0, 1],
        ),
        ("* versions do", vec![pods.clone(), r(&["CREATE"], &[""], &["*"], &["pods"], "*")], vec![1]),
        (
            "Namespaced does not cover *",
            vec![pods.clone(), r(&["CREATE"], &[""], &["v1"], &["pods"], "Namespaced")],
            vec![0],
        ),
        (
            "Cluster does not cover Namespaced",
            vec![
                r(&["CREATE"], &[""], &["v1"], &["pods"], "Namespaced"),
                r(&["CREATE"], &[""], &["v1"], &["pods"], "Cluster"),
            ],
            vec![0, 1],
        ),
        (
            "equal meaning, other order: the first stays",
            vec![
                r(&["CREATE", "UPDATE"], &[""], &["v1"], &["pods"], "*"),
                r(&["UPDATE", "CREATE"], &[""], &["v1"], &["pods"], "*"),
            ],
            vec![0],
        ),
        ("an exact duplicate once", vec![pods.clone(), pods.clone()], vec![0]),
    ];
    for (name, rules, kept) in cases {
        let fleet = [validating("v", vec![hook("v.example.com", json!({"rules": rules.clone()}))])];
        let (documents, _) = run_build(&fleet, &[], &options());
        let expected: Vec<Value> = kept.iter().map(|&i| rules[i].clone()).collect();
        assert_eq!(gateway(&documents, WebhookKind::Validating)["rules"], json!(expected), "{name}");
    }
}

#[test]
fn all_resources_registers_every_resource_subresource_and_operation() {
    let (documents, _) = run_build(&both(), &[], &with(&["--all-resources"]));
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        assert_eq!(
            gateway(&documents, kind)["rules"],
            json!([rule(&["*"], &["*"], &["*"], &["*/*"], "*")]),
            "{kind:?}"
        );
    }
}

#[test]
fn match_policy_is_equivalent_whatever_the_fleet_says() {
    let exact = json!({"matchPolicy": "Exact"});
    let fleet = [
        mutating("m", vec![hook("m.example.com", exact.clone())]),
        validating("v", vec![hook("v.example.com", exact)]),
    ];
    let (documents, _) = run_build(&fleet, &[], &options());
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        assert_eq!(gateway(&documents, kind)["matchPolicy"], "Equivalent", "{kind:?}");
    }
}

#[test]
fn failure_policy_is_fail_when_some_webhook_of_the_phase_fails_closed() {
    let cases: [(&[Option<&str>], &str); 5] = [
        (&[Some("Ignore")], "Ignore"),
        (&[Some("Ignore"), Some("Ignore")], "Ignore"),
        (&[Some("Ignore"), Some("Fail")], "Fail"),
        (&[Some("Fail"), Some("Ignore")], "Fail"),
        (&[Some("Ignore"), None], "Fail"), // unset is Fail after the v1 defaults
    ];
    for (policies, expected) in cases {
        let hooks = |prefix: &str| -> Vec<Value> {
            policies
                .iter()
                .enumerate()
                .map(|(i, policy)| match policy {
                    Some(policy) => {
                        hook(&format!("{prefix}{i}.example.com"), json!({"failurePolicy": policy}))
                    }
                    None => hook(&format!("{prefix}{i}.example.com"), json!({})),
                })
                .collect()
        };
        let fleet = [mutating("m", hooks("m")), validating("v", hooks("v"))];
        let (documents, _) = run_build(&fleet, &[], &options());
        for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
            assert_eq!(gateway(&documents, kind)["failurePolicy"], expected, "{kind:?} {policies:?}");
        }
    }
    // Phases are independent: a failing-closed mutating webhook leaves validation Ignore.
    let fleet = [
        mutating("m", vec![hook("m.example.com", json!({"failurePolicy": "Fail"}))]),
        validating("v", vec![hook("v.example.com", json!({"failurePolicy": "Ignore"}))]),
    ];
    let (documents, _) = run_build(&fleet, &[], &options());
    assert_eq!(gateway(&documents, WebhookKind::Mutating)["failurePolicy"], "Fail");
    assert_eq!(gateway(&documents, WebhookKind::Validating)["failurePolicy"], "Ignore");
}

#[test]
fn side_effects_review_versions_and_reinvocation_policy() {
    let (documents, _) = run_build(&both(), &[], &options());
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        let webhook = gateway(&documents, kind);
        assert_eq!(webhook["sideEffects"], "NoneOnDryRun", "{kind:?}");
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]), "{kind:?}");
    }
    assert_eq!(gateway(&documents, WebhookKind::Mutating)["reinvocationPolicy"], "Never");
    assert_eq!(gateway(&documents, WebhookKind::Validating).get("reinvocationPolicy"), None);
    let (documents, _) = run_build(&both(), &[], &with(&["--reinvocation", "IfNeeded"]));
    assert_eq!(gateway(&documents, WebhookKind::Mutating)["reinvocationPolicy"], "IfNeeded");
    assert_eq!(gateway(&documents, WebhookKind::Validating).get("reinvocationPolicy"), None);
}

/// Kind, webhooks (timeoutSeconds, reinvocationPolicy), margin, (worst case, needed, printed).
type TimeoutCase = (WebhookKind, Vec<(Option<i64>, &'static str)>, Duration, (u64, u64, u64));

#[test]
fn timeout_covers_the_worst_case_plus_the_margin_capped_at_30() {
    use WebhookKind::{Mutating as M, Validating as V};
    let never = |seconds: Option<i64>| (seconds, "Never");
    let if_needed = |seconds: Option<i64>| (seconds, "IfNeeded");
    #[rustfmt::skip]
    let cases: Vec<TimeoutCase> = vec![
        // Validating webhooks run concurrently: the slowest counts.
        (V, vec![never(Some(5)), never(Some(12)), never(Some(3))], MARGIN, (12, 13, 13)),
        (V, vec![never(None)], MARGIN, (10, 11, 11)), // unset is 10
        (V, vec![never(Some(30))], MARGIN, (30, 31, 30)),
        // The mutating chain runs one after the other: the sum.
        (M, vec![never(Some(5)), never(Some(3))], MARGIN, (8, 9, 9)),
        (M, vec![never(None), never(Some(3))], MARGIN, (13, 14, 14)),
        // An IfNeeded webhook a later one can make run again counts twice...
        (M, vec![if_needed(Some(5)), never(Some(3))], MARGIN, (13, 14, 14)),
        (M, vec![never(Some(3)), if_needed(Some(5)), never(Some(2))], MARGIN, (15, 16, 16)),
        // ...the last one cannot be reinvoked: nothing after it changes the object.
        (M, vec![never(Some(5)), if_needed(Some(3))], MARGIN, (8, 9, 9)),
        (M, vec![if_needed(Some(5)), if_needed(Some(3))], MARGIN, (13, 14, 14)),
        // Rounded up; 29 + 1 still fits, 30 + 1 does not.
        (M, vec![never(Some(5))], Duration::from_millis(1500), (5, 7, 7)),
        (M, vec![never(Some(5))], Duration::ZERO, (5, 5, 5)),
        (M, vec![never(Some(20)), never(Some(9))], MARGIN, (29, 30, 30)),
        (M, vec![never(Some(20)), never(Some(10))], MARGIN, (30, 31, 30)),
        (M, vec![if_needed(Some(20)), never(Some(10))], MARGIN, (50, 51, 30)),
    ];
    for (i, (kind, hooks, margin, (worst, needed, seconds))) in cases.into_iter().enumerate() {
        let hooks: Vec<Value> = hooks
            .iter()
            .enumerate()
            .map(|(j, (seconds, policy))| {
                let mut extra = json!({});
                if let Some(seconds) = seconds {
                    extra["timeoutSeconds"] = json!(seconds);
                }
                if kind == M {
                    extra["reinvocationPolicy"] = json!(policy);
                }
                hook(&format!("w{j}.example.com"), extra)
            })
            .collect();
        let fleet = [config(kind, "fleet", hooks)];
        let mut options = options();
        options.margin = margin;
        let (documents, notes) = run_build(&fleet, &[], &options);
        assert_eq!(gateway(&documents, kind)["timeoutSeconds"], json!(seconds), "case {i}");
        let webhooks: Vec<&Webhook> = fleet[0].webhooks.iter().collect();
        assert_eq!(timeout(kind, &webhooks, margin), Timeout { fleet: worst, needed, seconds }, "case {i}");
        let capped = notes.iter().any(|n| n.contains("timeoutSeconds capped at 30"));
        assert_eq!(capped, needed > 30, "case {i}: a cap is reported exactly when it cuts: {notes:?}");
        if capped {
            let note = notes.iter().find(|n| n.contains("capped")).unwrap();
            assert!(note.starts_with("warning: ") && note.contains(&format!("{needed}s")), "{note}");
            assert!(note.contains("failurePolicy"), "{note}");
        }
    }
}

#[test]
fn the_namespace_selector_excludes_the_gateway_system_namespaces_and_the_ignore_label() {
    let name_not_in = |values: &[&str]| json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": values});
    let ignore = json!({"key": "admission-gateway/ignore", "operator": "NotIn", "values": ["true"]});
    let cases: Vec<(&[&str], Value)> = vec![
        (&[], json!([name_not_in(&["admission-gateway", "kube-node-lease", "kube-system"]), ignore])),
        (
            &["--service", "gw/svc:8443"],
            json!([name_not_in(&["gw", "kube-node-lease", "kube-system"]), ignore]),
        ),
        (
            &["--namespace", "other"],
            json!([name_not_in(&["kube-node-lease", "kube-system", "other"]), ignore]),
        ),
        (
            &[
                "--exclude-namespace",
                "monitoring",
                "--exclude-namespace",
                "kube-system",
                "--exclude-namespace",
                "a",
            ],
            json!([
                name_not_in(&["a", "admission-gateway", "kube-node-lease", "kube-system", "monitoring"]),
                ignore
            ]),
        ),
        (&["--no-default-exclusions"], json!([name_not_in(&["admission-gateway"])])),
        (
            &["--no-default-exclusions", "--exclude-namespace", "x"],
            json!([name_not_in(&["admission-gateway", "x"])]),
        ),
        (&["--url", "https://gw.example.com", "--no-default-exclusions"], Value::Null),
        (
            &["--url", "https://gw.example.com"],
            json!([name_not_in(&["kube-node-lease", "kube-system"]), ignore]),
        ),
    ];
    for (flags, expected) in cases {
        let (documents, notes) = run_build(&both(), &[], &with(flags));
        for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
            let selector = &gateway(&documents, kind)["namespaceSelector"];
            assert!(selector.is_object(), "{flags:?}: a namespaceSelector is always printed");
            assert_eq!(selector["matchExpressions"], expected, "{flags:?} {kind:?}");
        }
        let noted = notes.iter().any(|n| n.contains("no --namespace given"));
        assert_eq!(noted, flags.contains(&"--url"), "{flags:?}: {notes:?}");
    }
}

/// Case, the webhook's namespaceSelector, its rules, flags, the namespaces a warning names.
type ExclusionCase = (&'static str, Value, Option<Value>, &'static [&'static str], Option<&'static str>);

#[test]
fn a_warning_names_each_webhook_that_would_have_decided_in_an_excluded_namespace() {
    let any_namespace = json!({});
    let not_system = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": ["kube-system", "kube-node-lease", "admission-gateway"]}]});
    let only_kube_system = json!({"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}});
    let prod = json!({"matchLabels": {"env": "prod"}});
    let nodes = json!([rule(&["*"], &[""], &["v1"], &["nodes"], "Cluster")]);
    let namespaces_themselves = json!([rule(&["*"], &[""], &["v1"], &["namespaces"], "Cluster")]);
    let legacy = Namespace {
        name: "legacy".into(),
        labels: [("admission-gateway/ignore".to_owned(), "true".to_owned()), ("env".into(), "prod".into())]
            .into(),
    };
    let all = r#""admission-gateway", "kube-node-lease", "kube-system""#;
    #[rustfmt::skip]
    let cases: Vec<ExclusionCase> = vec![
        ("an empty selector matches them all", any_namespace.clone(), None, &[], Some(all)),
        ("a selector excluding them", not_system, None, &[], None),
        ("a selector for one of them", only_kube_system.clone(), None, &[], Some(r#""kube-system""#)),
        ("a label the excluded ones lack", prod.clone(), None, &[], None),
        ("but a configured Namespace labelled to be ignored has it", prod, None, &["with legacy"], Some(r#""legacy""#)),
        ("the label exclusion turned off", any_namespace.clone(), None, &["with legacy", "--no-default-exclusions"], Some(r#""admission-gateway""#)),
        ("an extra exclusion", only_kube_system, None, &["--exclude-namespace", "kube-system", "--no-default-exclusions"], Some(r#""kube-system""#)),
        ("cluster-scoped rules never meet a namespace", any_namespace.clone(), Some(nodes), &[], None),
        ("except a Namespace itself", any_namespace, Some(namespaces_themselves), &[], Some(all)),
    ];
    for (name, selector, rules, flags, expected) in cases {
        let mut extra = json!({"namespaceSelector": selector});
        if let Some(rules) = rules {
            extra["rules"] = rules;
        }
        let fleet = [validating("policy", vec![hook("p.example.com", extra)])];
        let namespaces = if flags.contains(&"with legacy") { vec![legacy.clone()] } else { vec![] };
        let flags: Vec<&str> = flags.iter().copied().filter(|f| *f != "with legacy").collect();
        let (_, notes) = run_build(&fleet, &namespaces, &with(&flags));
        let warnings: Vec<&String> = notes.iter().filter(|n| n.contains("excludes")).collect();
        match expected {
            None => assert!(warnings.is_empty(), "{name}: {warnings:?}"),
            Some(list) => {
                assert_eq!(warnings.len(), 1, "{name}: {notes:?}");
                let expected = format!(
                    r#"warning: webhook "p.example.com" of ValidatingWebhookConfiguration "policy" matches requests in namespace(s) {list}, which"#
                );
                assert!(warnings[0].starts_with(&expected), "{name}:\n{}\n{expected}", warnings[0]);
            }
        }
    }
}

#[test]
fn client_config_names_the_service_or_the_url_with_the_phase_path() {
    let cases: Vec<(&[&str], Value, Value)> = vec![
        (
            &[],
            json!({"service": {"namespace": "admission-gateway", "name": "admission-gateway", "path": "/mutate", "port": 443}}),
            json!({"service": {"namespace": "admission-gateway", "name": "admission-gateway", "path": "/validate", "port": 443}}),
        ),
        (
            &["--service", "gw/front:8443"],
            json!({"service": {"namespace": "gw", "name": "front", "path": "/mutate", "port": 8443}}),
            json!({"service": {"namespace": "gw", "name": "front", "path": "/validate", "port": 8443}}),
        ),
        (
            &["--url", "https://gw.example.com:8443"],
            json!({"url": "https://gw.example.com:8443/mutate"}),
            json!({"url": "https://gw.example.com:8443/validate"}),
        ),
        (
            &["--url", "https://gw.example.com/base/"],
            json!({"url": "https://gw.example.com/base/mutate"}),
            json!({"url": "https://gw.example.com/base/validate"}),
        ),
    ];
    for (flags, mutate, validate) in cases {
        let (documents, _) = run_build(&both(), &[], &with(flags));
        assert_eq!(gateway(&documents, WebhookKind::Mutating)["clientConfig"], mutate, "{flags:?}");
        assert_eq!(gateway(&documents, WebhookKind::Validating)["clientConfig"], validate, "{flags:?}");
    }
}

#[test]
fn ca_bundle_or_cert_manager_injection() {
    let ca = crate::certs::Ca::new("gateway CA").unwrap();
    let bundle = ca_bundle(ca.cert_pem.as_bytes()).unwrap();
    assert_eq!(bundle, ca.ca_bundle(), "base64 of the PEM file");
    let mut with_bundle = options();
    with_bundle.ca_bundle = Some(bundle.clone());
    let (documents, _) = run_build(&both(), &[], &with_bundle);
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        assert_eq!(gateway(&documents, kind)["clientConfig"]["caBundle"], json!(bundle), "{kind:?}");
    }
    assert!(documents.iter().all(|d| d["metadata"].get("annotations").is_none()));

    let (documents, _) = run_build(&both(), &[], &with(&["--inject-ca-from", "admission-gateway/serving"]));
    for document in &documents {
        assert_eq!(
            document["metadata"]["annotations"],
            json!({"cert-manager.io/inject-ca-from": "admission-gateway/serving"})
        );
        assert_eq!(document["webhooks"][0]["clientConfig"].get("caBundle"), None);
    }
    let (documents, _) = run_build(&both(), &[], &options());
    assert!(documents.iter().all(|d| d["webhooks"][0]["clientConfig"].get("caBundle").is_none()));

    let key = ca.issue(&["gw"]).unwrap().key_pem;
    for (name, pem) in [("empty", ""), ("not PEM", "hello"), ("a key, no certificate", key.as_str())] {
        assert!(ca_bundle(pem.as_bytes()).is_err(), "{name}");
    }
}

#[test]
fn names_and_an_omitted_phase() {
    let (documents, notes) = run_build(&both(), &[], &with(&["--name", "platform-gateway"]));
    let names: Vec<(&Value, &Value, &Value)> =
        documents.iter().map(|d| (&d["kind"], &d["metadata"]["name"], &d["webhooks"][0]["name"])).collect();
    assert_eq!(
        names,
        [
            (
                &json!("MutatingWebhookConfiguration"),
                &json!("platform-gateway"),
                &json!("mutate.admission-gateway.io")
            ),
            (
                &json!("ValidatingWebhookConfiguration"),
                &json!("platform-gateway"),
                &json!("validate.admission-gateway.io")
            ),
        ]
    );
    assert!(!notes.iter().any(|n| n.contains(" webhooks: no ")), "nothing omitted: {notes:?}");
    assert_eq!(documents[0]["apiVersion"], "admissionregistration.k8s.io/v1");

    let only_validating = [validating("v", vec![hook("v.example.com", json!({}))])];
    let (documents, notes) = run_build(&only_validating, &[], &options());
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0]["kind"], "ValidatingWebhookConfiguration");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no mutating webhooks") && n.contains("no MutatingWebhookConfiguration")),
        "{notes:?}"
    );
    let only_mutating = [mutating("m", vec![hook("m.example.com", json!({}))])];
    let (documents, notes) = run_build(&only_mutating, &[], &options());
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0]["kind"], "MutatingWebhookConfiguration");
    assert!(notes.iter().any(|n| n.contains("no validating webhooks")), "{notes:?}");
}

#[test]
fn options_the_api_server_would_refuse_are_errors() {
    for (flags, field) in [
        (&["--name", "Not_A_Name"][..], "metadata.name"),
        (&["--url", "http://gw.example.com"], "webhooks[0].clientConfig.url"),
        (&["--url", "https://gw.example.com/?x=1"], "webhooks[0].clientConfig.url"),
        (&["--namespace", "Bad Namespace"], "webhooks[0].namespaceSelector"),
    ] {
        let errors = build(&both(), &[], &with(flags)).expect_err(&format!("{flags:?}"));
        assert!(errors.iter().all(|e| e.starts_with("error: the printed ")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains(field)), "{flags:?}: {field} not in {errors:?}");
    }
}

#[test]
fn flags() {
    assert!(
        parse(&["--url", "https://a.example.com", "--service", "a/b"]).is_err(),
        "--url and --service conflict"
    );
    let neither = parse_exactly(&["--config", "f.yaml"]);
    assert!(neither.is_err(), "one of --url and --service is required");
    assert!(
        parse(&["--ca-bundle", "ca.pem", "--inject-ca-from", "a/b"]).is_err(),
        "the two CA sources conflict"
    );
    assert!(parse(&["--reinvocation", "Sometimes"]).is_err());
    for bad in ["noslash", "/name", "ns/", "ns/name:0", "ns/name:65536", "ns/name:x", "ns/a/b"] {
        assert!(parse_service(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_service("ns/name"),
        Ok(ServiceRef { namespace: "ns".into(), name: "name".into(), port: 443 })
    );
    assert_eq!(parse_service("ns/name:8443").map(|s| s.port), Ok(8443));
    for bad in ["noslash", "/c", "ns/", "a/b/c"] {
        assert!(parse_inject_ca_from(bad).is_err(), "{bad}");
    }
    let args = parse(&["--config", "more.yaml"]).unwrap();
    assert_eq!(args.paths, [PathBuf::from("fleet.yaml"), PathBuf::from("more.yaml")]);
    assert_eq!(args.name, DEFAULT_NAME);
    assert_eq!(args.reinvocation, Reinvocation::Never);
    assert_eq!(options().margin, DEFAULT_DEADLINE_MARGIN);
}

#[test]
fn the_header_gives_the_command_and_the_output_is_deterministic() {
    let argv = [
        "/usr/bin/admission-gateway",
        "registration",
        "--config",
        "deploy/base/fleet",
        "--exclude-namespace",
        "it's",
    ];
    let line = command_line(argv.iter().map(OsString::from));
    assert_eq!(
        line,
        r"admission-gateway registration --config deploy/base/fleet --exclude-namespace 'it'\''s'"
    );
    assert_eq!(shell_quote(""), "''");
    assert_eq!(shell_quote("a b"), "'a b'");

    let mut with_line = options();
    with_line.command_line = line.clone();
    let options = with_line;
    let fleet = vec![
        validating(
            "b",
            vec![hook("b.example.com", json!({"rules": [rule(&["UPDATE"], &[""], &["v1"], &["pods"], "")]}))],
        ),
        validating("a", vec![hook("a.example.com", json!({}))]),
        mutating("m", vec![hook("m.example.com", json!({}))]),
    ];
    let first = build(&fleet, &[], &options).unwrap().yaml;
    assert!(first.starts_with(&format!("# Generated by `{line}`.\n")), "{first}");
    let reversed: Vec<WebhookConfiguration> = fleet.iter().rev().cloned().collect();
    assert_eq!(
        build(&reversed, &[], &options).unwrap().yaml,
        first,
        "the order of the files does not matter"
    );
    let documents: Vec<&str> = first.split("\n---\n").collect();
    assert_eq!(documents.len(), 2, "{first}");
}

/// The printed objects, as files, pass the gateway's own validation without a warning.
#[test]
fn the_output_loads_through_the_gateways_own_validation() {
    let ca = crate::certs::Ca::new("gateway CA").unwrap();
    let fleet = vec![
        mutating(
            "m",
            vec![
                hook(
                    "m1.example.com",
                    json!({"reinvocationPolicy": "IfNeeded", "timeoutSeconds": 30,
                    "rules": [rule(&["CONNECT"], &[""], &["v1"], &["pods/exec"], "Namespaced"), rule(&["*"], &["*"], &["*"], &["*"], "")]}),
                ),
                hook("m2.example.com", json!({"failurePolicy": "Ignore"})),
            ],
        ),
        validating(
            "v",
            vec![hook(
                "v.example.com",
                json!({"rules": [rule(&["CREATE"], &["apps"], &["v1"], &["*/scale", "deployments"], "Cluster")]}),
            )],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let variants: [&[&str]; 4] = [
        &[],
        &["--url", "https://gw.example.com:8443/", "--namespace", "gw", "--reinvocation", "IfNeeded"],
        &["--all-resources", "--no-default-exclusions", "--inject-ca-from", "a/b"],
        &["--ca-bundle", "x", "--exclude-namespace", "team-a"],
    ];
    for (i, flags) in variants.into_iter().enumerate() {
        let mut options = with(flags);
        if flags.contains(&"--ca-bundle") {
            options.ca_bundle = Some(ca.ca_bundle());
        }
        let built = build(&fleet, &[], &options).unwrap();
        let path = dir.path().join(format!("registration-{i}.yaml"));
        std::fs::write(&path, &built.yaml).unwrap();
        let snapshot = compile::load(&[path], &crate::upstream::Clients::default(), 1)
            .unwrap_or_else(|e| panic!("{flags:?}: {:#?}\n{}", e.problems, built.yaml));
        // Loaded alone, without Namespace objects, its namespaceSelector is warned about; nothing else.
        let others: Vec<_> =
            snapshot.warnings.iter().filter(|w| !w.message.starts_with("no Namespace objects")).collect();
        assert!(others.is_empty(), "{flags:?}: {others:?}");
        assert_eq!((snapshot.mutating.len(), snapshot.validating.len()), (1, 1), "{flags:?}");
    }
}

#[test]
fn strings_yaml_1_1_reads_as_booleans_are_quoted_for_kubectl() {
    // kubectl reads YAML 1.1 (go-yaml v2): a plain `on` is a boolean there, and the API server
    // refuses a boolean where a namespace name belongs.
    let flags = ["--exclude-namespace", "on", "--exclude-namespace", "no", "--exclude-namespace", "y"];
    let built = build(&both(), &[], &with(&flags)).unwrap();
    for word in ["on", "no", "y"] {
        assert!(built.yaml.contains(&format!("- '{word}'\n")), "{word} quoted:\n{}", built.yaml);
    }
    let (documents, _) = run_build(&both(), &[], &with(&flags));
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        let values = &gateway(&documents, kind)["namespaceSelector"]["matchExpressions"][0]["values"];
        assert_eq!(values, &json!(["admission-gateway", "kube-node-lease", "kube-system", "no", "on", "y"]));
    }
    // Keys, values, sequence items; not real booleans, other words, or block scalars' lines.
    let cases = [
        ("a: on\n", "a: 'on'\n"),
        ("- off\n", "- 'off'\n"),
        ("- - Yes\n", "- - 'Yes'\n"),
        ("- y: n\n", "- 'y': 'n'\n"),
        ("on:\n  x: true\n", "'on':\n  x: true\n"),
        ("a: -on\n", "a: -on\n"),
        ("a: online\n", "a: online\n"),
        ("a: 'on'\n", "a: 'on'\n"),
        ("a: |-\n  on\n  no\nb: no\n", "a: |-\n  on\n  no\nb: 'no'\n"),
    ];
    for (document, expected) in cases {
        assert_eq!(quote_yaml_1_1_booleans(document), expected, "{document:?}");
    }
}
