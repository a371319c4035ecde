//! Tables of one-mutation cases against a valid baseline, one table per part of a webhook.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::json;

use super::super::manifest::{
    MatchCondition, Namespace, ObjectMeta, Webhook, WebhookConfiguration, WebhookKind,
};
use super::super::{Finding, Severity};
use super::{configuration, namespace};

use Severity::{Error as E, Warning as W};

/// A base64 `caBundle` holding one PEM certificate. Not a real certificate: only the PEM framing
/// and the DER's leading SEQUENCE tag are looked at.
fn ca_bundle() -> String {
    let der = STANDARD.encode([0x30, 0x03, 0x02, 0x01, 0x01]);
    STANDARD.encode(format!("-----BEGIN CERTIFICATE-----\n{der}\n-----END CERTIFICATE-----\n"))
}

/// A PEM bundle with a key and no certificate.
const PRIVATE_KEY_PEM: &str =
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";

/// A fully set, valid webhook, as defaulting leaves it.
fn hook(name: &str, client_config: serde_json::Value) -> Webhook {
    serde_json::from_value(json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods", "pods/status"],
            "scope": "Namespaced",
        }],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"],
        }]},
        "objectSelector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1", "v1beta1"],
        "reinvocationPolicy": "Never",
    }))
    .expect("baseline webhook decodes")
}

/// A mutating configuration with a `url` hook and a `service` hook: no findings.
fn baseline() -> WebhookConfiguration {
    let url = json!({"url": "https://hooks.example.com:8443/mutate", "caBundle": ca_bundle()});
    let service = json!({"service": {
        "namespace": "hooks", "name": "pod-hooks", "path": "/mutate/pods", "port": 443,
    }});
    WebhookConfiguration {
        kind: WebhookKind::Mutating,
        version: crate::config::manifest::ApiVersion::V1,
        metadata: ObjectMeta {
            name: "pod-policy".to_owned(),
            labels: BTreeMap::from([("team".to_owned(), "platform".to_owned())]),
            annotations: BTreeMap::from([("Example.com/Owner".to_owned(), "x".to_owned())]),
        },
        webhooks: vec![hook("first.hooks.example.com", url), hook("second.hooks.example.com", service)],
    }
}

fn conditions(names: &[&str]) -> Option<Vec<MatchCondition>> {
    Some(names.iter().map(|name| condition(name, "true")).collect())
}

fn condition(name: &str, expression: &str) -> MatchCondition {
    MatchCondition::new(name, expression)
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// One mutation of the baseline and every finding it must produce, in order:
/// `(field, severity, message prefix)`.
type Case = (&'static str, fn(&mut WebhookConfiguration), &'static [(&'static str, Severity, &'static str)]);

#[track_caller]
fn check(cases: &[Case]) {
    for (name, mutate, expected) in cases {
        let mut config = baseline();
        mutate(&mut config);
        let findings = configuration(&config);
        let got: Vec<(&str, Severity, &str)> =
            findings.iter().map(|f| (f.field.as_str(), f.severity, f.message.as_str())).collect();
        let matches = got.len() == expected.len()
            && got.iter().zip(expected.iter()).all(|(g, e)| g.0 == e.0 && g.1 == e.1 && g.2.starts_with(e.2));
        assert!(matches, "case {name:?}:\n  expected {expected:#?}\n  got {got:#?}");
    }
}

#[test]
fn valid_configurations_have_no_findings() {
    let cases: &[Case] = &[
        ("baseline", |_| {}, &[]),
        (
            "unset optional fields",
            |c| {
                let h = &mut c.webhooks[0];
                (h.failure_policy, h.match_policy, h.timeout_seconds) = (None, None, None);
                (h.namespace_selector, h.object_selector) = (None, None);
                (h.reinvocation_policy, h.client_config.ca_bundle) = (None, None);
                c.webhooks[0].rules[0].scope = None;
                c.webhooks[1].client_config.service.as_mut().expect("service").path = None;
            },
            &[],
        ),
        (
            "validating, no reinvocationPolicy",
            |c| {
                c.kind = WebhookKind::Validating;
                for h in &mut c.webhooks {
                    h.reinvocation_policy = None;
                }
            },
            &[],
        ),
        (
            "empty caBundle: system roots",
            |c| {
                c.webhooks[0].client_config.ca_bundle = Some(String::new());
            },
            &[],
        ),
        (
            "caBundle with line breaks",
            |c| {
                let bundle = ca_bundle();
                let lines: Vec<&str> = bundle
                    .as_bytes()
                    .chunks(16)
                    .map(|l| std::str::from_utf8(l).expect("base64 is ASCII"))
                    .collect();
                c.webhooks[0].client_config.ca_bundle = Some(lines.join("\n"));
            },
            &[],
        ),
        ("empty matchConditions list", |c| c.webhooks[0].match_conditions = Some(Vec::new()), &[]),
        (
            "upstream quirk: `*` after a plain resource",
            |c| {
                c.webhooks[0].rules[0].resources = strings(&["pods", "*"]);
            },
            &[],
        ),
        (
            "wildcards alone, IPv6 URL, service path `/`",
            |c| {
                let rule = &mut c.webhooks[0].rules[0];
                rule.operations = strings(&["*"]);
                (rule.api_groups, rule.api_versions) = (strings(&["*"]), strings(&["*"]));
                rule.resources = strings(&["*/*"]);
                c.webhooks[0].client_config.url = Some("https://[fd00::1]:8443/hook".to_owned());
                c.webhooks[1].client_config.service.as_mut().expect("service").path = Some("/".to_owned());
            },
            &[],
        ),
    ];
    check(cases);
}

#[test]
fn names() {
    const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
        alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
        character (e.g. 'example.com', regex used for validation is \
        '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let cases: &[Case] = &[
        (
            "no metadata.name",
            |c| c.metadata.name.clear(),
            &[("metadata.name", E, "Required value: name or generateName is required")],
        ),
        (
            "metadata.name not a subdomain",
            |c| c.metadata.name = "Pod_Policy".to_owned(),
            &[("metadata.name", E, "Invalid value: \"Pod_Policy\": a lowercase RFC 1123 subdomain")],
        ),
        (
            "bad metadata label value",
            |c| {
                c.metadata.labels.insert("team".to_owned(), "-x".to_owned());
            },
            &[("metadata.labels", E, "Invalid value: \"-x\": a valid label must be an empty string")],
        ),
        (
            "bad metadata annotation key",
            |c| {
                c.metadata.annotations.insert("a/b/c".to_owned(), String::new());
            },
            &[("metadata.annotations", E, "Invalid value: \"a/b/c\": a valid label key must")],
        ),
        ("no hook name", |c| c.webhooks[0].name.clear(), &[("webhooks[0].name", E, "Required value")]),
        (
            "hook name not a subdomain",
            |c| c.webhooks[0].name = "First.example.com".to_owned(),
            &[("webhooks[0].name", E, "Invalid value: \"First.example.com\": a lowercase RFC 1123")],
        ),
        (
            "hook name with two segments",
            |c| c.webhooks[0].name = "hooks.example".to_owned(),
            &[(
                "webhooks[0].name",
                E,
                "Invalid value: \"hooks.example\": should be a domain with \
                at least three segments separated by dots",
            )],
        ),
        (
            "duplicate hook name",
            |c| c.webhooks[1].name = c.webhooks[0].name.clone(),
            &[("webhooks[1].name", E, "Duplicate value: \"first.hooks.example.com\"")],
        ),
    ];
    check(cases);
    // The whole upstream text, pinned once.
    let mut config = baseline();
    config.webhooks[0].name = "a_b.example.com".to_owned();
    let message = &configuration(&config)[0].message;
    assert_eq!(message, &format!("Invalid value: \"a_b.example.com\": {SUBDOMAIN}"));
}

#[test]
fn client_config() {
    let cases: &[Case] = &[
        ("url and service", |c| c.webhooks[0].client_config.service = c.webhooks[1].client_config.service.clone(),
            &[("webhooks[0].clientConfig", E, "Required value: exactly one of url or service is required")]),
        ("neither url nor service", |c| c.webhooks[0].client_config.url = None,
            &[("webhooks[0].clientConfig", E, "Required value: exactly one of url or service is required")]),
        ("http url", |c| c.webhooks[0].client_config.url = Some("http://hooks.example.com/".into()),
            &[("webhooks[0].clientConfig.url", E, "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format")]),
        ("url without host", |c| c.webhooks[0].client_config.url = Some("https:///mutate".into()),
            &[("webhooks[0].clientConfig.url", E, "Invalid value: \"\": host must be specified; desired format")]),
        ("url with user and password", |c| c.webhooks[0].client_config.url = Some("https://admin:s3cret@hooks.example.com/".into()),
            &[("webhooks[0].clientConfig.url", E, "Invalid value: \"admin:xxxxx\": user information is not permitted in the URL")]),
        ("url with fragment", |c| c.webhooks[0].client_config.url = Some("https://hooks.example.com/m#top".into()),
            &[("webhooks[0].clientConfig.url", E, "Invalid value: \"top\": fragments are not permitted in the URL")]),
        ("url with query", |c| c.webhooks[0].client_config.url = Some("https://hooks.example.com/m?x=1".into()),
            &[("webhooks[0].clientConfig.url", E, "Invalid value: \"x=1\": query parameters are not permitted in the URL")]),
        ("unparsable url", |c| c.webhooks[0].client_config.url = Some("https://hooks example.com/".into()),
            &[("webhooks[0].clientConfig.url", E, "Required value: url must be a valid URL: parse \"https://hooks example.com/\": invalid character \" \" in host name; desired format")]),
        ("service without name and namespace", |c| {
            let service = c.webhooks[1].client_config.service.as_mut().expect("service");
            (service.name, service.namespace) = (String::new(), String::new());
        }, &[("webhooks[1].clientConfig.service.name", E, "Required value"),
             ("webhooks[1].clientConfig.service.namespace", E, "Required value")]),
        ("service port 0", |c| c.webhooks[1].client_config.service.as_mut().expect("service").port = Some(0),
            &[("webhooks[1].clientConfig.service.port", E, "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive")]),
        ("service port 65536", |c| c.webhooks[1].client_config.service.as_mut().expect("service").port = Some(65536),
            &[("webhooks[1].clientConfig.service.port", E, "Invalid value: 65536: port is not valid")]),
        ("relative service path", |c| c.webhooks[1].client_config.service.as_mut().expect("service").path = Some("mutate".into()),
            &[("webhooks[1].clientConfig.service.path", E, "Invalid value: \"mutate\": must start with a '/'")]),
        ("empty service path segment", |c| c.webhooks[1].client_config.service.as_mut().expect("service").path = Some("/a//b/".into()),
            &[("webhooks[1].clientConfig.service.path", E, "Invalid value: \"/a//b/\": segment[1] may not be empty")]),
        ("`//` service path", |c| c.webhooks[1].client_config.service.as_mut().expect("service").path = Some("//".into()),
            &[("webhooks[1].clientConfig.service.path", E, "Invalid value: \"//\": segment[0] may not be empty")]),
        ("service path segment not a subdomain", |c| c.webhooks[1].client_config.service.as_mut().expect("service").path = Some("/ok/Mutate".into()),
            &[("webhooks[1].clientConfig.service.path", E, "Invalid value: \"/ok/Mutate\": segment[1]: a lowercase RFC 1123 subdomain")]),
        ("caBundle not base64", |c| c.webhooks[0].client_config.ca_bundle = Some("abc*".into()),
            &[("webhooks[0].clientConfig.caBundle", E, "Invalid value: \"<value omitted>\": illegal base64 data at input byte 3")]),
        ("caBundle without a certificate", |c| c.webhooks[0].client_config.ca_bundle = Some(STANDARD.encode("hello")),
            &[("webhooks[0].clientConfig.caBundle", E, "Invalid value: \"<value omitted>\": unable to load root certificates: unable to parse bytes as PEM block")]),
        ("caBundle with PEM but no CERTIFICATE block", |c| c.webhooks[0].client_config.ca_bundle = Some(STANDARD.encode(PRIVATE_KEY_PEM)),
            &[("webhooks[0].clientConfig.caBundle", E, "Invalid value: \"<value omitted>\": unable to load root certificates: unable to parse bytes as PEM block")]),
        ("caBundle with bad padding after a line break", |c| c.webhooks[0].client_config.ca_bundle = Some("Zg=\n=A".into()),
            &[("webhooks[0].clientConfig.caBundle", E, "Invalid value: \"<value omitted>\": illegal base64 data at input byte 5")]),
    ];
    check(cases);
}

#[test]
fn ca_bundle_is_decoded_as_go_decodes_it_and_must_hold_a_certificate() {
    let pem = STANDARD.decode(ca_bundle()).expect("test bundle");
    let encoded = STANDARD.encode(pem.repeat(3));
    for line_break in ["\n", "\r\n"] {
        // Wrapped as `base64 -w 76` and PEM do, with a trailing line break.
        let lines: Vec<&str> =
            encoded.as_bytes().chunks(76).map(|l| std::str::from_utf8(l).expect("base64 is ASCII")).collect();
        let wrapped = lines.join(line_break) + line_break;
        assert_eq!(super::ca_bundle::decode(&wrapped), Ok(Some(pem.repeat(3))), "{line_break:?}");
    }
    assert_eq!(super::ca_bundle::decode(""), Ok(None), "empty: the system's roots");
    assert_eq!(super::ca_bundle::decode("\r\n"), Ok(None), "empty once decoded");

    const NO_PEM: &str = "unable to load root certificates: unable to parse bytes as PEM block";
    let refused = [
        ("abc*", "illegal base64 data at input byte 3"),
        ("Zg=", "illegal base64 data at input byte 3"),
        ("\nZg\n==\nZg==", "illegal base64 data at input byte 7"),
        (&STANDARD.encode("hello"), NO_PEM),
        (&STANDARD.encode(PRIVATE_KEY_PEM), NO_PEM),
        (&STANDARD.encode("-----BEGIN CERTIFICATE-----\nAgEB\n-----END CERTIFICATE-----\n"), NO_PEM),
    ];
    // What does not read as PEM is said in words, never as a list of byte values.
    let unterminated = STANDARD.encode("-----BEGIN CERTIFICATE-----\nAgEB\n");
    assert_eq!(
        super::ca_bundle::decode(&unterminated).unwrap_err(),
        format!("{NO_PEM} (a PEM section has no \"-----END CERTIFICATE-----\" line)")
    );
    for (encoded, want) in refused {
        let detail = super::ca_bundle::decode(encoded).unwrap_err();
        assert!(detail.starts_with(want), "{encoded:?}: {detail}");
    }
}

#[test]
fn rules() {
    const OPS: &str = "Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \
        \"CREATE\", \"DELETE\", \"UPDATE\"";
    let cases: &[Case] = &[
        ("no operations", |c| c.webhooks[0].rules[0].operations.clear(),
            &[("webhooks[0].rules[0].operations", E, "Required value")]),
        ("`*` with other operations", |c| c.webhooks[0].rules[0].operations = strings(&["CREATE", "*"]),
            &[("webhooks[0].rules[0].operations", E, "Invalid value: [\"CREATE\",\"*\"]: if '*' is present, must not specify other operations")]),
        ("unknown operation", |c| c.webhooks[0].rules[0].operations = strings(&["CREATE", "PATCH"]),
            &[("webhooks[0].rules[0].operations[1]", E, OPS)]),
        ("no apiGroups", |c| c.webhooks[0].rules[0].api_groups.clear(),
            &[("webhooks[0].rules[0].apiGroups", E, "Required value")]),
        ("`*` with other apiGroups", |c| c.webhooks[0].rules[0].api_groups = strings(&["apps", "*"]),
            &[("webhooks[0].rules[0].apiGroups", E, "Invalid value: [\"apps\",\"*\"]: if '*' is present, must not specify other API groups")]),
        ("no apiVersions", |c| c.webhooks[0].rules[0].api_versions.clear(),
            &[("webhooks[0].rules[0].apiVersions", E, "Required value")]),
        ("`*` with other apiVersions", |c| c.webhooks[0].rules[0].api_versions = strings(&["*", "v1"]),
            &[("webhooks[0].rules[0].apiVersions", E, "Invalid value: [\"*\",\"v1\"]: if '*' is present, must not specify other API versions")]),
        ("empty apiVersion", |c| c.webhooks[0].rules[0].api_versions = strings(&["v1", ""]),
            &[("webhooks[0].rules[0].apiVersions[1]", E, "Required value")]),
        ("no resources", |c| c.webhooks[0].rules[0].resources.clear(),
            &[("webhooks[0].rules[0].resources", E, "Required value")]),
        ("empty resource", |c| c.webhooks[0].rules[0].resources = strings(&["pods", ""]),
            &[("webhooks[0].rules[0].resources[1]", E, "Required value")]),
        ("`*/*` with others", |c| c.webhooks[0].rules[0].resources = strings(&["*/*", "pods/status"]),
            &[("webhooks[0].rules[0].resources", E, "Invalid value: [\"*/*\",\"pods/status\"]: if '*/*' is present, must not specify other resources")]),
        ("`*` before a plain resource", |c| c.webhooks[0].rules[0].resources = strings(&["*", "pods"]),
            &[("webhooks[0].rules[0].resources", E, "Invalid value: [\"*\",\"pods\"]: if '*' is present, must not specify other resources without subresources")]),
        ("`r/*` then `r/x`", |c| c.webhooks[0].rules[0].resources = strings(&["pods/*", "pods/status"]),
            &[("webhooks[0].rules[0].resources[1]", E, "Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status")]),
        ("`*/x` then `r/x`", |c| c.webhooks[0].rules[0].resources = strings(&["*/scale", "deployments/scale"]),
            &[("webhooks[0].rules[0].resources[1]", E, "Invalid value: \"deployments/scale\": if '*/scale' is present, must not specify deployments/scale")]),
        ("unknown scope", |c| c.webhooks[0].rules[0].scope = Some("Global".into()),
            &[("webhooks[0].rules[0].scope", E, "Unsupported value: \"Global\": supported values: \"*\", \"Cluster\", \"Namespaced\"")]),
    ];
    check(cases);
}

#[test]
fn policies_side_effects_and_timeouts() {
    let cases: &[Case] = &[
        (
            "unknown failurePolicy",
            |c| c.webhooks[0].failure_policy = Some("Sometimes".into()),
            &[(
                "webhooks[0].failurePolicy",
                E,
                "Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
            )],
        ),
        (
            "unknown matchPolicy",
            |c| c.webhooks[0].match_policy = Some("Fuzzy".into()),
            &[(
                "webhooks[0].matchPolicy",
                E,
                "Unsupported value: \"Fuzzy\": supported values: \"Equivalent\", \"Exact\"",
            )],
        ),
        (
            "unknown reinvocationPolicy",
            |c| c.webhooks[0].reinvocation_policy = Some("Always".into()),
            &[(
                "webhooks[0].reinvocationPolicy",
                E,
                "Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
            )],
        ),
        (
            "reinvocationPolicy on a validating webhook",
            |c| {
                c.kind = WebhookKind::Validating;
                c.webhooks[1].reinvocation_policy = None;
            },
            &[("webhooks[0].reinvocationPolicy", E, "Forbidden: not supported for validating webhooks")],
        ),
        (
            "no sideEffects",
            |c| c.webhooks[0].side_effects = None,
            &[("webhooks[0].sideEffects", E, "Required value: must specify one of None, NoneOnDryRun")],
        ),
        (
            "legacy sideEffects Unknown",
            |c| c.webhooks[0].side_effects = Some("Unknown".into()),
            &[(
                "webhooks[0].sideEffects",
                W,
                "Unsupported value: \"Unknown\": supported values: \"None\", \"NoneOnDryRun\" (legacy value",
            )],
        ),
        (
            "legacy sideEffects Some",
            |c| c.webhooks[0].side_effects = Some("Some".into()),
            &[("webhooks[0].sideEffects", W, "Unsupported value: \"Some\"")],
        ),
        (
            "unknown sideEffects",
            |c| c.webhooks[0].side_effects = Some("Maybe".into()),
            &[(
                "webhooks[0].sideEffects",
                E,
                "Unsupported value: \"Maybe\": supported values: \"None\", \"NoneOnDryRun\"",
            )],
        ),
        (
            "timeout 0",
            |c| c.webhooks[0].timeout_seconds = Some(0),
            &[(
                "webhooks[0].timeoutSeconds",
                E,
                "Invalid value: 0: the timeout value must be between 1 and 30 seconds",
            )],
        ),
        (
            "timeout 40",
            |c| c.webhooks[0].timeout_seconds = Some(40),
            &[(
                "webhooks[0].timeoutSeconds",
                E,
                "Invalid value: 40: the timeout value must be between 1 and 30 seconds",
            )],
        ),
    ];
    check(cases);
    let mut config = baseline();
    config.webhooks[0].side_effects = Some("Unknown".to_owned());
    assert!(configuration(&config)[0].message.ends_with("will be rejected)"));
}

#[test]
fn selectors() {
    const KEY: &str = "Invalid value: \"bad key\": name part must consist of alphanumeric \
        characters, '-', '_' or '.', and must start and end with an alphanumeric character \
        (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
        '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let cases: &[Case] = &[
        (
            "unknown operator",
            |c| set_expression(c, "Has", &["x"]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].operator",
                E,
                "Invalid value: \"Has\": not a valid selector operator",
            )],
        ),
        (
            "In without values",
            |c| set_expression(c, "In", &[]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].values",
                E,
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )],
        ),
        (
            "Exists with values",
            |c| set_expression(c, "Exists", &["x"]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].values",
                E,
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )],
        ),
        (
            "DoesNotExist with values",
            |c| set_expression(c, "DoesNotExist", &["x"]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].values",
                E,
                "Forbidden: may not be specified",
            )],
        ),
        (
            "NotIn without values",
            |c| set_expression(c, "NotIn", &[]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].values",
                E,
                "Required value: must be specified",
            )],
        ),
        (
            "bad key",
            |c| {
                let selector = c.webhooks[0].namespace_selector.as_mut().expect("selector");
                selector.match_expressions[0].key = "bad key".to_owned();
            },
            &[("webhooks[0].namespaceSelector.matchExpressions[0].key", E, KEY)],
        ),
        (
            "bad value",
            |c| set_expression(c, "NotIn", &["ok", "-bad-"]),
            &[(
                "webhooks[0].namespaceSelector.matchExpressions[0].values[1]",
                E,
                "Invalid value: \"-bad-\": a valid label must be an empty string",
            )],
        ),
        (
            "bad matchLabels value",
            |c| {
                let selector = c.webhooks[0].object_selector.as_mut().expect("selector");
                selector.match_labels.insert("app".to_owned(), "a".repeat(64));
            },
            &[("webhooks[0].objectSelector.matchLabels", E, "Invalid value: \"aaaa")],
        ),
        (
            "empty matchLabels key prefix",
            |c| {
                let selector = c.webhooks[0].object_selector.as_mut().expect("selector");
                selector.match_labels.insert("/app".to_owned(), String::new());
            },
            &[(
                "webhooks[0].objectSelector.matchLabels",
                E,
                "Invalid value: \"/app\": prefix part must be non-empty",
            )],
        ),
    ];
    check(cases);
    let mut config = baseline();
    let selector = config.webhooks[0].object_selector.as_mut().expect("selector");
    selector.match_labels.insert("app".to_owned(), "a".repeat(64));
    assert!(configuration(&config)[0].message.ends_with(": must be no more than 63 bytes"));
}

fn set_expression(config: &mut WebhookConfiguration, operator: &str, values: &[&str]) {
    let selector = config.webhooks[0].namespace_selector.as_mut().expect("selector");
    selector.match_expressions[0].operator = operator.to_owned();
    selector.match_expressions[0].values = strings(values);
}

#[test]
fn admission_review_versions_and_match_conditions() {
    let cases: &[Case] = &[
        (
            "no admissionReviewVersions",
            |c| c.webhooks[0].admission_review_versions = None,
            &[("webhooks[0].admissionReviewVersions", E, "Required value: must specify one of v1, v1beta1")],
        ),
        (
            "empty admissionReviewVersions",
            |c| c.webhooks[0].admission_review_versions = Some(Vec::new()),
            &[("webhooks[0].admissionReviewVersions", E, "Required value: must specify one of v1, v1beta1")],
        ),
        (
            "duplicate version",
            |c| c.webhooks[0].admission_review_versions = Some(strings(&["v1", "v1"])),
            &[("webhooks[0].admissionReviewVersions[1]", E, "Invalid value: \"v1\": duplicate version")],
        ),
        (
            "version not a DNS-1035 label",
            |c| c.webhooks[0].admission_review_versions = Some(strings(&["v1", "1v"])),
            &[(
                "webhooks[0].admissionReviewVersions[1]",
                E,
                "Invalid value: \"1v\": a DNS-1035 label must consist of",
            )],
        ),
        (
            "no known version",
            |c| c.webhooks[0].admission_review_versions = Some(strings(&["v2"])),
            &[(
                "webhooks[0].admissionReviewVersions",
                W,
                "Invalid value: [\"v2\"]: must include at least one of v1, v1beta1 (legacy value",
            )],
        ),
        ("match conditions that compile", |c| c.webhooks[0].match_conditions = conditions(&["only-pods"]), &[]),
        (
            "too many match conditions",
            |c| {
                let names: Vec<String> = (0..65).map(|i| format!("c{i}")).collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                c.webhooks[0].match_conditions = conditions(&names);
            },
            &[("webhooks[0].matchConditions", E, "Too many: 65: must have at most 64 items")],
        ),
        (
            "empty condition",
            |c| c.webhooks[0].match_conditions = Some(vec![condition("", " \n")]),
            &[
                ("webhooks[0].matchConditions[0].expression", E, "Required value"),
                ("webhooks[0].matchConditions[0].name", E, "Required value"),
            ],
        ),
        (
            "condition name not qualified",
            |c| c.webhooks[0].match_conditions = conditions(&["a b"]),
            &[("webhooks[0].matchConditions[0].name", E, "Invalid value: \"a b\": name part must consist of")],
        ),
        (
            "duplicate condition names",
            |c| c.webhooks[0].match_conditions = conditions(&["x", "x"]),
            &[("webhooks[0].matchConditions[1].name", E, "Duplicate value: \"x\"")],
        ),
        (
            "expressions that do not compile, every one named",
            |c| {
                c.webhooks[0].match_conditions = Some(vec![
                    condition("syntax", " object.metadata.name == "),
                    condition("fine", "object.metadata.name == 'x'"),
                    condition("unknown-variable", "foo == 1"),
                    condition("not-bool", "size(object.spec.containers)"),
                ]);
            },
            &[
                (
                    "webhooks[0].matchConditions[0].expression",
                    E,
                    "Invalid value: \"object.metadata.name ==\": compilation failed: ERROR: <input>:1:",
                ),
                (
                    "webhooks[0].matchConditions[2].expression",
                    E,
                    "Invalid value: \"foo == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^ (matchCondition \"unknown-variable\")",
                ),
                (
                    "webhooks[0].matchConditions[3].expression",
                    E,
                    "Invalid value: \"size(object.spec.containers)\": must evaluate to bool but got int (matchCondition \"not-bool\")",
                ),
            ],
        ),
    ];
    check(cases);
}

#[test]
fn findings_name_their_webhook() {
    let mut config = baseline();
    config.metadata.name.clear();
    config.webhooks[1].timeout_seconds = Some(99);
    config.webhooks[0].name.clear();
    config.webhooks[0].failure_policy = Some("Never".to_owned());
    let findings = configuration(&config);
    let webhooks: Vec<Option<&str>> = findings.iter().map(|f| f.webhook.as_deref()).collect();
    // metadata.name; hook 0's name and failurePolicy (no name to give); hook 1's timeout.
    assert_eq!(webhooks, [None, None, None, Some("second.hooks.example.com")]);
}

#[test]
fn namespaces() {
    let ns = |name: &str, labels: &[(&str, &str)]| Namespace {
        name: name.to_owned(),
        labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    };
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters";
    let cases: &[(Namespace, &[(&str, &str)])] = &[
        (ns("team-a", &[("kubernetes.io/metadata.name", "team-a")]), &[]),
        (ns("", &[]), &[("metadata.name", "Required value: name or generateName is required")]),
        (ns("team.a", &[]), &[("metadata.name", "Invalid value: \"team.a\": must not contain dots")]),
        (ns("Team-A", &[]), &[("metadata.name", "Invalid value: \"Team-A\": a lowercase RFC 1123 label")]),
        (ns(&"a".repeat(64), &[]), &[("metadata.name", "Invalid value: \"aaaa")]),
        (
            ns("team-a", &[("example.com/", "x")]),
            &[
                ("metadata.labels", "Invalid value: \"example.com/\": name part must be non-empty"),
                ("metadata.labels", "Invalid value: \"example.com/\": name part must consist of"),
            ],
        ),
        (
            ns("team-a", &[("tier", "front end")]),
            &[("metadata.labels", "Invalid value: \"front end\": a valid label must be")],
        ),
    ];
    for (namespace_object, expected) in cases {
        let findings: Vec<Finding> = namespace(namespace_object);
        let got: Vec<(&str, &str)> =
            findings.iter().map(|f| (f.field.as_str(), f.message.as_str())).collect();
        let matches = got.len() == expected.len()
            && got.iter().zip(expected.iter()).all(|(g, e)| g.0 == e.0 && g.1.starts_with(e.1));
        assert!(matches, "{:?}: expected {expected:?}, got {got:?}", namespace_object.name);
        assert!(findings.iter().all(|f| f.severity == E && f.webhook.is_none()));
    }
    let long = namespace(&ns(&"a".repeat(64), &[]));
    assert!(long[0].message.ends_with(": must be no more than 63 characters"));
    let upper = namespace(&ns("Team-A", &[]));
    assert!(upper[0].message.contains(label));
}
