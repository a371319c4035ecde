//! The gateway's webhook dispatch against upstream's: each case (a fleet of mutating and
//! validating webhook configurations, Namespaces, and an AdmissionReview) goes through the real
//! binary's `review --stage admit -o json` (the mutating chain, then the validating webhooks on
//! its result) and through the upstream oracle in mode `webhooks` (`tests/oracle/main.go`:
//! k8s.io/apiserver 0.36's own MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins,
//! chained as kube-apiserver chains them, reinvocation included). Both sides call the same real
//! HTTPS webhooks on 127.0.0.1 ([`Server`]: one listener whose URL path says how to answer), with
//! `clientConfig.url` and the test CA as `caBundle`. What must agree: allowed, code, reason and
//! message; the object after the mutating webhooks (after a JSON round trip) when the request is
//! allowed (a denied request's object is neither stored nor answered); the warnings; the
//! audit annotations under their full keys, the patch annotations included (the oracle audits at
//! level Request; the gateway is given `auditPatchAnnotations: true`).
//!
//! The cases: a few named ones, and [`GENERATED`] generated from [`SEED`] (fleets of 1–6 webhooks
//! with varied rules, operations, scopes, matchPolicy, namespace and object selectors,
//! matchConditions, failurePolicy, timeouts, reinvocationPolicy and admissionReviewVersions;
//! webhooks that allow, deny, patch, warn, annotate, answer 500, garbage or the wrong uid, or
//! hang past their 1 s timeout). A case that differs must be listed in
//! `tests/oracle/known-differences-webhooks.txt` (`name: what differs`); a listed case that agrees
//! fails too. `ORACLE_WRITE_KNOWN=1` rewrites the list from what is observed; `ORACLE_ONLY=name,...`
//! runs only those cases; `ORACLE_LIST=1` prints every case with both outcomes;
//! `ORACLE_SHRINK=1` prints the smallest variant of the first three differing generated cases.
//!
//! Normalized, and only these (each is nondeterminism upstream or a difference
//! docs/differences.md names):
//! - the request uids a webhook is sent are random on both sides: a uid in a text is `<uid>`;
//! - numbers in the object are compared as numbers ([`same_json`]): upstream writes the patched
//!   object in Go's number formats, the gateway keeps the webhook's (docs/differences.md, "The
//!   patched object's text");
//! - upstream calls validating webhooks in parallel and returns the first denial to *complete*
//!   and records warnings in completion order; the gateway returns the first in configuration
//!   order with every failing webhook's message in a list (docs/differences.md, "Several
//!   validating denials"): upstream's message must be one of the list's, its code and reason
//!   compared when it is the first; warnings are compared as sorted lists;
//! - an unknown namespace's 404 (docs/differences.md, "An unknown namespace"): the gateway's
//!   message must start with upstream's;
//! - matchPolicy Equivalent through another version (docs/differences.md, "matchPolicy
//!   `Equivalent`"): the gateway cannot convert, so a case whose gateway outcome says so is
//!   counted and not compared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{json, Value};

use crate::support;
use crate::support::binary::BINARY;
use crate::support::differential::{self, Rng};
use crate::support::provision;

/// The cases known to differ today, one `name: summary` a line.
const KNOWN_DIFFERENCES: &str = include_str!("../oracle/known-differences-webhooks.txt");

/// Generated cases per run, and the seed they come from.
const GENERATED: usize = 1500;
const SEED: u64 = 0x0ac1_e0f0_1ee7;

/// How long a "slow" webhook waits before answering: far past its 1 s `timeoutSeconds`, so
/// both sides time out whatever the machine's load, and nobody waits for it.
const SLOW: Duration = Duration::from_secs(6);

/// The caller's timeout the gateway's `review` gets: the most the API server gives a webhook.
const REVIEW_TIMEOUT: &str = "30s";

/// When a `review` still running is killed.
const HUNG_AFTER: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The webhooks

/// One HTTPS listener on 127.0.0.1 standing for every webhook of every case: a webhook's URL
/// is `https://127.0.0.1:PORT/h/<behaviour>`, the behaviour a JSON object in unpadded URL-safe
/// base64, so its answer depends only on the URL and the request (the same for the oracle and
/// the gateway, and for a reinvocation). It lives, with its runtime, as long as the test binary.
pub(crate) struct Server {
    base: String,
    _runtime: tokio::runtime::Runtime,
}

pub(crate) fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the webhooks' runtime");
        let base = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("webhook listener");
            let port = listener.local_addr().unwrap().port();
            let tls = support::server_tls(support::loopback_certificate(), &[b"http/1.1"]);
            // The task runs on the runtime for as long as the test binary.
            drop(admission_gateway::testbed::serve(listener, Some(tls), handle));
            format!("https://127.0.0.1:{port}/h/")
        });
        Server { base, _runtime: runtime }
    })
}

/// The URL of a webhook behaving as `behaviour`.
pub(crate) fn url(behaviour: &Value) -> String {
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(behaviour.to_string());
    format!("{}{encoded}", server().base)
}

async fn handle(request: Request<Incoming>) -> Response<Full<Bytes>> {
    let behaviour: Value = request
        .uri()
        .path()
        .strip_prefix("/h/")
        .and_then(|b| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(b).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if behaviour["do"] == "slow" {
        tokio::time::sleep(SLOW).await;
    }
    let (status, content_type, body) = answer(&behaviour, &review);
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("webhook response")
}

/// The answer of a webhook: `{"do": WHAT, ...}` with `warnings` and `audit` added to any
/// AdmissionReview answer.
fn answer(behaviour: &Value, review: &Value) -> (u16, &'static str, String) {
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    match behaviour["do"].as_str().unwrap_or("allow") {
        "allow" | "slow" => {}
        "deny" => {
            response["allowed"] = json!(false);
            if !behaviour["status"].is_null() {
                response["status"] = behaviour["status"].clone();
            }
        }
        "patch" => {
            let operations = patch_operations(behaviour, &review["request"]["object"]);
            response["patch"] = json!(support::base64(&Value::Array(operations).to_string()));
            if behaviour["noType"] != true {
                response["patchType"] = json!("JSONPatch");
            }
        }
        "500" => return (500, "text/plain", "the webhook broke".to_owned()),
        "garbage" => {
            return (200, "application/json", "{\"apiVersion\": \"admission.k8s.io/v1\", ".to_owned())
        }
        "uid" => response["uid"] = json!("0f0f0f0f-0000-4000-8000-000000000000"),
        "absent" => {
            return (
                200,
                "application/json",
                json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview"}).to_string(),
            )
        }
        // An error status with a Status body, as a Go webhook framework writes it.
        "status" => {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "quota exceeded", "reason": "Forbidden", "code": 403});
            return (403, "application/json", status.to_string());
        }
        "badBase64" => {
            response["patch"] = json!("!!not base64!!");
            response["patchType"] = json!("JSONPatch");
        }
        "patchNotArray" => {
            response["patch"] = json!(support::base64("{\"op\": \"add\"}"));
            response["patchType"] = json!("JSONPatch");
        }
        "textPlain" => {
            let body =
                json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response});
            return (200, "text/plain", body.to_string());
        }
        other => panic!("unknown webhook behaviour {other}"),
    }
    if let Some(warnings) = behaviour.get("warnings") {
        response["warnings"] = warnings.clone();
    }
    if let Some(audit) = behaviour.get("audit") {
        response["auditAnnotations"] = audit.clone();
    }
    let body = json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response});
    (200, "application/json", body.to_string())
}

/// The JSONPatch of a `patch` behaviour, made from the object as the webhook receives it: each
/// of `ops` names an edit. Those that need `metadata.labels` or `.annotations` add the map
/// first when the object has none; the others can fail to apply, on purpose.
fn patch_operations(behaviour: &Value, object: &Value) -> Vec<Value> {
    let hook = behaviour["hook"].as_str().unwrap_or("h");
    let mut out = Vec::new();
    let (mut labels, mut annotations) =
        (object["metadata"]["labels"].is_object(), object["metadata"]["annotations"].is_object());
    let ensure = |out: &mut Vec<Value>, field: &str, present: &mut bool| {
        if !*present {
            out.push(json!({"op": "add", "path": format!("/metadata/{field}"), "value": {}}));
            *present = true;
        }
    };
    for op in behaviour["ops"].as_array().into_iter().flatten() {
        match op.as_str().unwrap_or_default() {
            // Idempotent: the same label each time.
            "label" => {
                ensure(&mut out, "labels", &mut labels);
                out.push(json!({"op": "add", "path": "/metadata/labels/patched-by", "value": hook}));
            }
            // Not idempotent: a counter per webhook, one more at each call.
            "count" => {
                ensure(&mut out, "annotations", &mut annotations);
                let key = format!("count-{hook}");
                let n: u64 = object["metadata"]["annotations"][&key].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
                out.push(json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": (n + 1).to_string()}));
            }
            "removeApp" => out.push(json!({"op": "remove", "path": "/metadata/labels/app"})),
            "replacePriority" => out.push(json!({"op": "replace", "path": "/spec/priority", "value": 7})),
            "test" => out.push(json!({"op": "test", "path": "/metadata/name", "value": "p-1"})),
            "move" => out.push(json!({"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/moved"})),
            "copy" => {
                ensure(&mut out, "annotations", &mut annotations);
                out.push(json!({"op": "copy", "from": "/metadata/name", "path": "/metadata/annotations/copied"}));
            }
            "container" => out.push(json!({"op": "add", "path": "/spec/containers/-", "value": {"name": "sidecar", "image": "busybox"}})),
            "number" => out.push(json!({"op": "add", "path": "/spec/ratio", "value": 1.5})),
            "bad" => out.push(json!({"op": "add", "path": "/nowhere/deep", "value": 1})),
            "unknownOp" => out.push(json!({"op": "frobnicate", "path": "/spec"})),
            // Numbers as written: a float that is whole, an exponent, minus zero.
            "numbers" => {
                out.push(json!({"op": "add", "path": "/spec/whole", "value": 1.0}));
                out.push(serde_json::from_str(r#"{"op": "add", "path": "/spec/exp", "value": 1e3}"#).unwrap());
                out.push(serde_json::from_str(r#"{"op": "add", "path": "/spec/negzero", "value": -0.0}"#).unwrap());
            }
            // An integer past int64 (upstream's unstructured decoding makes it a float64).
            "bigInt" => out.push(
                serde_json::from_str(r#"{"op": "add", "path": "/spec/big", "value": 12345678901234567890}"#).unwrap(),
            ),
            "escaped" => {
                ensure(&mut out, "labels", &mut labels);
                out.push(json!({"op": "add", "path": "/metadata/labels/example.com~1role", "value": "x~y"}));
            }
            "negIndex" => out.push(json!({"op": "add", "path": "/spec/containers/-1", "value": {"name": "neg"}})),
            "outOfRange" => out.push(json!({"op": "add", "path": "/spec/containers/5", "value": {"name": "far"}})),
            "removeFirst" => out.push(json!({"op": "remove", "path": "/spec/containers/0"})),
            "unicode" => {
                ensure(&mut out, "annotations", &mut annotations);
                out.push(json!({"op": "add", "path": "/metadata/annotations/text", "value": "é\u{2028}<>&\u{1F600}"}));
            }
            other => panic!("unknown patch operation {other}"),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Cases

/// One webhook of a generated fleet.
#[derive(Clone, Debug)]
struct Hook {
    mutating: bool,
    /// Its configuration: `m-<config>` or `v-<config>` (configurations run in name order).
    config: usize,
    name: String,
    rules: Vec<Value>,
    match_policy: Option<&'static str>,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    conditions: Option<Value>,
    failure: Option<&'static str>,
    timeout: Option<u64>,
    reinvocation: Option<&'static str>,
    versions: &'static [&'static str],
    side_effects: &'static str,
    behaviour: Value,
}

/// The request of a case.
#[derive(Clone, Debug)]
struct Req {
    operation: &'static str,
    /// `pods`, `namespaces`, `deployments` (apps/v1) or `deployments.extensions` (v1beta1).
    resource: &'static str,
    namespace: &'static str,
    labels: Value,
    dry_run: bool,
    priority: bool,
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    hooks: Vec<Hook>,
    request: Req,
}

fn hook(name: &str, mutating: bool, behaviour: Value) -> Hook {
    Hook {
        mutating,
        config: 0,
        name: name.to_owned(),
        rules: vec![rule(&[""], &["v1"], &["CREATE", "UPDATE"], &["pods"], None)],
        match_policy: None,
        namespace_selector: None,
        object_selector: None,
        conditions: None,
        failure: None,
        timeout: None,
        reinvocation: None,
        versions: &["v1"],
        side_effects: "None",
        behaviour,
    }
}

fn rule(
    groups: &[&str],
    versions: &[&str],
    operations: &[&str],
    resources: &[&str],
    scope: Option<&str>,
) -> Value {
    let mut rule = json!({"apiGroups": groups, "apiVersions": versions, "operations": operations, "resources": resources});
    if let Some(scope) = scope {
        rule["scope"] = json!(scope);
    }
    rule
}

fn pod_create() -> Req {
    Req {
        operation: "CREATE",
        resource: "pods",
        namespace: "default",
        labels: json!({"app": "web"}),
        dry_run: false,
        priority: true,
    }
}

impl Case {
    /// The configuration: the webhook configurations and the Namespaces `default` (env=prod)
    /// and `dev` (env=dev, team=a); `ghost` is not configured.
    fn config(&self) -> Vec<Value> {
        let mut configurations: BTreeMap<(bool, usize), Vec<Value>> = BTreeMap::new();
        for h in &self.hooks {
            let mut behaviour = h.behaviour.clone();
            behaviour["hook"] = json!(h.name);
            let mut w = json!({
                "name": h.name,
                "clientConfig": {"url": url(&behaviour), "caBundle": support::base64(&support::ca().cert_pem)},
                "rules": h.rules,
                "sideEffects": h.side_effects,
                "admissionReviewVersions": h.versions,
            });
            let fields = [
                ("matchPolicy", h.match_policy.map(|v| json!(v))),
                ("namespaceSelector", h.namespace_selector.clone()),
                ("objectSelector", h.object_selector.clone()),
                ("matchConditions", h.conditions.clone()),
                ("failurePolicy", h.failure.map(|v| json!(v))),
                ("timeoutSeconds", h.timeout.map(|v| json!(v))),
                ("reinvocationPolicy", h.reinvocation.map(|v| json!(v))),
            ];
            for (field, value) in fields {
                if let Some(value) = value {
                    w[field] = value;
                }
            }
            configurations.entry((h.mutating, h.config)).or_default().push(w);
        }
        let mut out: Vec<Value> = configurations
            .into_iter()
            .map(|((mutating, config), webhooks)| {
                let (kind, prefix) = if mutating {
                    ("MutatingWebhookConfiguration", "m")
                } else {
                    ("ValidatingWebhookConfiguration", "v")
                };
                json!({
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": kind,
                    "metadata": {"name": format!("{prefix}-{config}")},
                    "webhooks": webhooks,
                })
            })
            .collect();
        out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"env": "prod"}}}));
        out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": {"env": "dev", "team": "a"}}}));
        out
    }

    fn review(&self) -> Value {
        let r = &self.request;
        let (group, version, kind, resource) = match r.resource {
            "pods" => ("", "v1", "Pod", "pods"),
            "namespaces" => ("", "v1", "Namespace", "namespaces"),
            "deployments" => ("apps", "v1", "Deployment", "deployments"),
            _ => ("extensions", "v1beta1", "Deployment", "deployments"),
        };
        let namespaced = r.resource != "namespaces";
        let (name, namespace) = if namespaced { ("p-1", r.namespace) } else { ("newns", "") };
        let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
        let mut metadata = json!({"name": name, "labels": r.labels});
        if namespaced {
            metadata["namespace"] = json!(namespace);
        }
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if r.priority {
            spec["priority"] = json!(1);
        }
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec});
        let mut old = object.clone();
        old["metadata"]["labels"] = json!({"app": "old"});
        let (object, old, options) = match r.operation {
            "CREATE" => (object, Value::Null, "CreateOptions"),
            "UPDATE" => (object, old, "UpdateOptions"),
            _ => (Value::Null, old, "DeleteOptions"),
        };
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let gvr = json!({"group": group, "version": version, "resource": resource});
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                "name": name, "namespace": namespace, "operation": r.operation,
                "userInfo": {"username": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]},
                "object": object, "oldObject": old, "dryRun": r.dry_run,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
            },
        })
    }

    /// Smaller variants: a webhook fewer; one webhook with a selector, its conditions, its
    /// warnings and annotations dropped, or allowing instead.
    fn smaller(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for i in 0..self.hooks.len() {
            if self.hooks.len() > 1 {
                let mut c = self.clone();
                c.hooks.remove(i);
                out.push(c);
            }
        }
        for i in 0..self.hooks.len() {
            let h = &self.hooks[i];
            let mut variants = Vec::new();
            if h.namespace_selector.is_some() {
                variants.push(Hook { namespace_selector: None, ..h.clone() });
            }
            if h.object_selector.is_some() {
                variants.push(Hook { object_selector: None, ..h.clone() });
            }
            if h.conditions.is_some() {
                variants.push(Hook { conditions: None, ..h.clone() });
            }
            if h.behaviour.get("warnings").is_some() || h.behaviour.get("audit").is_some() {
                let mut b = h.behaviour.clone();
                b.as_object_mut().unwrap().retain(|k, _| k != "warnings" && k != "audit");
                variants.push(Hook { behaviour: b, ..h.clone() });
            }
            if h.behaviour["do"] != "allow" {
                variants.push(Hook { behaviour: json!({"do": "allow"}), ..h.clone() });
            }
            for v in variants {
                let mut c = self.clone();
                c.hooks[i] = v;
                out.push(c);
            }
        }
        out
    }

    fn size(&self) -> usize {
        self.hooks.iter().map(|h| 4 + h.behaviour.to_string().len() / 16).sum()
    }

    /// The fleet in a few lines, for a failure.
    fn describe(&self) -> String {
        let r = &self.request;
        let mut text = format!(
            "request: {} {} in {:?}, labels {}, dryRun {}\n",
            r.operation, r.resource, r.namespace, r.labels, r.dry_run
        );
        for h in &self.hooks {
            let _ = writeln!(
                text,
                "  {} {}-{} {}: rules {} matchPolicy {:?} ns {} obj {} conditions {} failure {:?} timeout {:?} reinvocation {:?} versions {:?} sideEffects {} -> {}",
                if h.mutating { "mutating" } else { "validating" },
                if h.mutating { "m" } else { "v" },
                h.config,
                h.name,
                Value::from(h.rules.clone()),
                h.match_policy,
                h.namespace_selector.as_ref().map_or("-".into(), Value::to_string),
                h.object_selector.as_ref().map_or("-".into(), Value::to_string),
                h.conditions.as_ref().map_or("-".into(), Value::to_string),
                h.failure,
                h.timeout,
                h.reinvocation,
                h.versions,
                h.side_effects,
                h.behaviour
            );
        }
        text
    }
}

// ---------------------------------------------------------------------------------------------
// Generated cases

fn generated(index: usize, rng: &mut Rng) -> Case {
    let request = Req {
        operation: rng.weighted(&[(6, "CREATE"), (3, "UPDATE"), (2, "DELETE")]),
        resource: rng.weighted(&[
            (16, "pods"),
            (2, "namespaces"),
            (1, "deployments"),
            (1, "deployments.extensions"),
        ]),
        namespace: rng.weighted(&[(5, "default"), (3, "dev"), (1, "ghost")]),
        labels: rng.pick(&[
            json!({"app": "web"}),
            json!({"app": "db", "tier": "x"}),
            json!({}),
            json!({"app": "web", "env": "dev"}),
        ]),
        dry_run: rng.chance(10),
        priority: rng.chance(50),
    };
    let n = 1 + rng.below(6);
    // A calm fleet's webhooks only allow, patch in ways that apply, or (validating) deny: long
    // mutating chains and reinvocations, where a wild one stops at its first failure.
    let calm = rng.chance(40);
    let configs = 1 + rng.below(3);
    let hooks = (0..n)
        .map(|i| {
            let mutating = rng.chance(55);
            let config = rng.below(configs);
            generated_hook(rng, format!("w{i}.example.com"), mutating, config, calm)
        })
        .collect();
    Case { name: format!("generated-{index:04}"), hooks, request }
}

fn generated_hook(rng: &mut Rng, name: String, mutating: bool, config: usize, calm: bool) -> Hook {
    let operations: Vec<&str> = rng.weighted(&[
        (2, vec!["CREATE"]),
        (1, vec!["UPDATE"]),
        (3, vec!["CREATE", "UPDATE"]),
        (3, vec!["*"]),
        (1, vec!["DELETE"]),
        (1, vec!["CREATE", "DELETE"]),
    ]);
    let rules = (0..1 + usize::from(rng.chance(20)))
        .map(|_| {
            let groups: Vec<&str> =
                rng.weighted(&[(6, vec![""]), (2, vec!["*"]), (1, vec!["apps"]), (1, vec!["extensions"])]);
            let versions: Vec<&str> = rng.weighted(&[(8, vec!["v1"]), (2, vec!["*"]), (1, vec!["v1beta1"])]);
            let resources: Vec<&str> = rng.weighted(&[
                (12, vec!["pods"]),
                (2, vec!["*"]),
                (1, vec!["pods/*"]),
                (1, vec!["namespaces"]),
                (1, vec!["pods", "namespaces"]),
                (1, vec!["deployments"]),
            ]);
            let scope =
                rng.weighted(&[(5, None), (2, Some("Namespaced")), (1, Some("Cluster")), (1, Some("*"))]);
            rule(&groups, &versions, &operations, &resources, scope)
        })
        .collect();
    let behaviour = generated_behaviour(rng, mutating, calm);
    let slow = behaviour["do"] == "slow";
    Hook {
        mutating,
        config,
        name,
        rules,
        match_policy: rng.weighted(&[(3, None), (2, Some("Exact")), (2, Some("Equivalent"))]),
        namespace_selector: rng.weighted(&[
            (6, None),
            (1, Some(json!({}))),
            (2, Some(json!({"matchLabels": {"env": "prod"}}))),
            (1, Some(json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}))),
            (1, Some(json!({"matchExpressions": [{"key": "team", "operator": "Exists"}]}))),
            (1, Some(json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}))),
        ]),
        object_selector: rng.weighted(&[
            (6, None),
            (2, Some(json!({"matchLabels": {"app": "web"}}))),
            (1, Some(json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}))),
            (1, Some(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "old"]}]}))),
        ]),
        conditions: rng.weighted(&[
            (8, None),
            (1, Some(json!([{"name": "named-p", "expression": "object.metadata.name.startsWith('p')"}]))),
            (1, Some(json!([{"name": "in-dev", "expression": "request.namespace == 'dev'"}]))),
            (1, Some(json!([{"name": "never", "expression": "false"}, {"name": "always", "expression": "true"}]))),
            (1, Some(json!([{"name": "alice", "expression": "request.userInfo.username == 'alice'"}]))),
            (1, Some(json!([{"name": "missing-field", "expression": "object.spec.nope == 1"}]))),
            (1, Some(json!([{"name": "has-app", "expression": "has(object.metadata.labels) && 'app' in object.metadata.labels"}]))),
        ]),
        failure: rng.weighted(&[(2, None), (3, Some("Fail")), (3, Some("Ignore"))]),
        timeout: if slow { Some(1) } else { rng.weighted(&[(3, None), (1, Some(2)), (1, Some(5))]) },
        reinvocation: if mutating {
            rng.weighted(&[(2, None), (2, Some("Never")), (3, Some("IfNeeded"))])
        } else {
            None
        },
        versions: rng.weighted(&[(6, &["v1"][..]), (2, &["v1beta1", "v1"][..]), (1, &["v1beta1"][..])]),
        side_effects: rng.weighted(&[(4, "None"), (1, "NoneOnDryRun")]),
        behaviour,
    }
}

fn generated_behaviour(rng: &mut Rng, mutating: bool, calm: bool) -> Value {
    let what = if calm {
        if mutating {
            rng.weighted(&[(1, "allow"), (3, "patch")])
        } else {
            rng.weighted(&[(6, "allow"), (1, "deny")])
        }
    } else if mutating {
        rng.weighted(&[
            (6, "allow"),
            (3, "deny"),
            (10, "patch"),
            (1, "500"),
            (1, "garbage"),
            (1, "uid"),
            (1, "slow"),
            (1, "absent"),
            (1, "status"),
            (1, "badBase64"),
            (1, "patchNotArray"),
            (1, "textPlain"),
        ])
    } else {
        rng.weighted(&[
            (10, "allow"),
            (5, "deny"),
            (1, "patch"),
            (1, "500"),
            (1, "garbage"),
            (1, "uid"),
            (1, "slow"),
            (1, "absent"),
            (1, "status"),
            (1, "textPlain"),
        ])
    };
    let mut b = json!({"do": what});
    match what {
        "deny" => {
            let mut status = serde_json::Map::new();
            if let Some(code) =
                rng.weighted(&[(3, None), (2, Some(403)), (1, Some(422)), (1, Some(200)), (1, Some(503))])
            {
                status.insert("code".into(), json!(code));
            }
            if let Some(message) = rng.weighted(&[
                (1, None),
                (3, Some("not allowed")),
                (1, Some("bad \"quoted\" ünïcode: x")),
                (1, Some("")),
            ]) {
                status.insert("message".into(), json!(message));
            }
            if let Some(reason) =
                rng.weighted(&[(3, None), (1, Some("Forbidden")), (1, Some("NotAcceptable"))])
            {
                status.insert("reason".into(), json!(reason));
            }
            if !status.is_empty() || rng.chance(50) {
                b["status"] = Value::Object(status);
            }
        }
        "patch" => {
            let count = rng.below(4) + usize::from(calm);
            let ops: Vec<&str> = (0..count)
                .map(|_| {
                    rng.weighted(&[
                        (6, "label"),
                        (5, "count"),
                        (if calm { 0 } else { 1 }, "removeApp"),
                        (2, "replacePriority"),
                        (1, "test"),
                        (if calm { 0 } else { 1 }, "move"),
                        (2, "copy"),
                        (3, "container"),
                        (2, "number"),
                        (if calm { 0 } else { 1 }, "bad"),
                        (if calm { 0 } else { 1 }, "unknownOp"),
                        (1, "numbers"),
                        (1, "bigInt"),
                        (1, "escaped"),
                        (if calm { 0 } else { 1 }, "negIndex"),
                        (if calm { 0 } else { 1 }, "outOfRange"),
                        (1, "removeFirst"),
                        (1, "unicode"),
                    ])
                })
                .collect();
            b["ops"] = json!(ops);
            if !calm && rng.chance(3) {
                b["noType"] = json!(true);
            }
        }
        _ => {}
    }
    if !matches!(what, "500" | "garbage" | "slow" | "absent" | "status") {
        if rng.chance(25) {
            b["warnings"] = rng.pick(&[
                json!(["careful"]),
                json!(["first warning", "second: ü"]),
                json!(["careful", "careful"]),
                json!(["line\nbreak", "tab\there", ""]),
                json!(["\u{7f}control", "a\u{0}b"]),
                json!(["ü".repeat(300), "x".repeat(5000)]),
            ]);
        }
        if rng.chance(25) {
            b["audit"] = rng.pick(&[
                json!({"checked": "yes"}),
                json!({"k1": "v1", "k2": ""}),
                json!({"sub/key": "v", "UPPER_case.dots": "ü"}),
                json!({"": "empty key", "bad key!": "x"}),
            ]);
        }
    }
    b
}

/// Cases written by hand: each feature once, plainly.
fn named() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut case = |name: &str, hooks: Vec<Hook>, request: Req| {
        cases.push(Case { name: name.to_owned(), hooks, request });
    };
    case("allow", vec![hook("a.example.com", false, json!({"do": "allow"}))], pod_create());
    case(
        "deny-with-code",
        vec![hook(
            "a.example.com",
            false,
            json!({"do": "deny", "status": {"code": 403, "message": "no pods today"}}),
        )],
        pod_create(),
    );
    case("deny-without-explanation", vec![hook("a.example.com", true, json!({"do": "deny"}))], pod_create());
    case(
        "patch-then-validate",
        vec![
            hook("m.example.com", true, json!({"do": "patch", "ops": ["label", "container"]})),
            Hook {
                object_selector: Some(json!({"matchLabels": {"patched-by": "m.example.com"}})),
                ..hook("v.example.com", false, json!({"do": "deny", "status": {"message": "saw the patch"}}))
            },
        ],
        pod_create(),
    );
    case(
        "reinvocation-if-needed",
        vec![
            Hook {
                reinvocation: Some("IfNeeded"),
                ..hook("a.example.com", true, json!({"do": "patch", "ops": ["count"]}))
            },
            Hook {
                config: 1,
                reinvocation: Some("IfNeeded"),
                ..hook("b.example.com", true, json!({"do": "patch", "ops": ["count"]}))
            },
        ],
        pod_create(),
    );
    case(
        "patch-does-not-apply",
        vec![hook("a.example.com", true, json!({"do": "patch", "ops": ["bad"]}))],
        pod_create(),
    );
    case(
        "patch-without-type",
        vec![hook("a.example.com", true, json!({"do": "patch", "ops": ["label"], "noType": true}))],
        pod_create(),
    );
    case(
        "validating-patch",
        vec![hook("a.example.com", false, json!({"do": "patch", "ops": ["label"]}))],
        pod_create(),
    );
    case(
        "timeout-fail",
        vec![Hook {
            timeout: Some(1),
            failure: Some("Fail"),
            ..hook("a.example.com", false, json!({"do": "slow"}))
        }],
        pod_create(),
    );
    case(
        "timeout-ignore",
        vec![Hook {
            timeout: Some(1),
            failure: Some("Ignore"),
            ..hook("a.example.com", true, json!({"do": "slow"}))
        }],
        pod_create(),
    );
    case("http-500", vec![hook("a.example.com", false, json!({"do": "500"}))], pod_create());
    case("garbage", vec![hook("a.example.com", true, json!({"do": "garbage"}))], pod_create());
    case("wrong-uid", vec![hook("a.example.com", false, json!({"do": "uid"}))], pod_create());
    case("response-absent", vec![hook("a.example.com", false, json!({"do": "absent"}))], pod_create());
    case(
        "warnings-and-audit",
        vec![
            hook("a.example.com", true, json!({"do": "allow", "warnings": ["from a"], "audit": {"k": "v"}})),
            hook("b.example.com", false, json!({"do": "allow", "warnings": ["from b"], "audit": {"k": "w"}})),
        ],
        pod_create(),
    );
    case(
        "unknown-namespace",
        vec![Hook {
            namespace_selector: Some(json!({"matchLabels": {"env": "prod"}})),
            ..hook("a.example.com", false, json!({"do": "allow"}))
        }],
        Req { namespace: "ghost", ..pod_create() },
    );
    case(
        "dry-run-side-effects",
        vec![Hook { side_effects: "NoneOnDryRun", ..hook("a.example.com", false, json!({"do": "deny"})) }],
        Req { dry_run: true, ..pod_create() },
    );
    case(
        "match-condition-error",
        vec![Hook {
            conditions: Some(json!([{"name": "x", "expression": "object.spec.nope == 1"}])),
            ..hook("a.example.com", true, json!({"do": "allow"}))
        }],
        pod_create(),
    );
    case(
        "delete-patch",
        vec![Hook {
            rules: vec![rule(&[""], &["v1"], &["DELETE"], &["pods"], None)],
            ..hook("a.example.com", true, json!({"do": "patch", "ops": ["label"]}))
        }],
        Req { operation: "DELETE", ..pod_create() },
    );
    case(
        "v1beta1-review",
        vec![Hook {
            versions: &["v1beta1"],
            ..hook("a.example.com", true, json!({"do": "patch", "ops": ["label"], "noType": true}))
        }],
        pod_create(),
    );
    case(
        "equivalent-through-extensions",
        vec![Hook {
            match_policy: Some("Equivalent"),
            rules: vec![rule(&["extensions"], &["v1beta1"], &["CREATE"], &["deployments"], None)],
            ..hook("a.example.com", true, json!({"do": "patch", "ops": ["label"]}))
        }],
        Req { resource: "deployments", ..pod_create() },
    );
    case(
        "patch-numbers",
        vec![hook("a.example.com", true, json!({"do": "patch", "ops": ["numbers", "unicode", "escaped"]}))],
        pod_create(),
    );
    case(
        "patch-big-integer",
        vec![hook("a.example.com", true, json!({"do": "patch", "ops": ["bigInt"]}))],
        pod_create(),
    );
    case("patch-bad-base64", vec![hook("a.example.com", true, json!({"do": "badBase64"}))], pod_create());
    case("status-body", vec![hook("a.example.com", false, json!({"do": "status"}))], pod_create());
    case(
        "two-denials",
        vec![
            hook("a.example.com", false, json!({"do": "deny", "status": {"message": "a says no"}})),
            hook(
                "b.example.com",
                false,
                json!({"do": "deny", "status": {"message": "b says no", "code": 422}}),
            ),
        ],
        pod_create(),
    );
    cases
}

// ---------------------------------------------------------------------------------------------
// Outcomes

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Decided(Decision),
    /// The gateway refused the configuration (`review` exit 2).
    Refused(String),
    /// The gateway's `review` did not end within [`HUNG_AFTER`].
    Hung,
    /// The gateway says it cannot convert to the version a webhook matched through (documented:
    /// docs/differences.md, "matchPolicy `Equivalent`"): not compared.
    CannotConvert,
}

#[derive(Clone, Debug, PartialEq)]
struct Decision {
    allowed: bool,
    code: i64,
    reason: String,
    message: String,
    object: Value,
    warnings: Vec<String>,
    audit: BTreeMap<String, String>,
}

/// `s` with every UUID (8-4-4-4-12 hex digits) as `<uid>`.
pub(crate) fn mask_uids(s: &str) -> String {
    let bytes = s.as_bytes();
    let shape = [8, 4, 4, 4, 12];
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    'scan: while i < bytes.len() {
        let mut j = i;
        for (k, n) in shape.iter().enumerate() {
            if j + n > bytes.len() || !bytes[j..j + n].iter().all(u8::is_ascii_hexdigit) {
                break;
            }
            j += n;
            if k == 4 {
                out.push_str("<uid>");
                i = j;
                continue 'scan;
            }
            if bytes.get(j) != Some(&b'-') {
                break;
            }
            j += 1;
        }
        let c = s[i..].chars().next().unwrap();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

pub(crate) fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

pub(crate) fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), mask_uids(v.as_str().unwrap_or_default()))).collect())
        .unwrap_or_default()
}

/// Where upstream's message `one` stands in the gateway's answer to several failing validating
/// webhooks, `[m1, m2, ...]` (each a denial or a call error, docs/differences.md "Several
/// validating denials"): `Some(true)` first, `Some(false)` further on, `None` not there.
fn position_in_list(one: &str, list: &str) -> Option<bool> {
    let inner = list.strip_prefix('[')?.strip_suffix(']')?;
    if one.is_empty() {
        return None;
    }
    if inner.starts_with(&format!("{one}, ")) {
        Some(true)
    } else if inner.contains(&format!(", {one}, ")) || inner.ends_with(&format!(", {one}")) {
        Some(false)
    } else {
        None
    }
}

/// JSON equality with numbers compared as numbers: integers exactly, anything with a fraction or
/// an exponent by its double (`1.0` is `1`, `1e3` is `1000`, `-0.0` is `0`): upstream re-encodes
/// the object with Go's number formats after every patch, the gateway keeps the webhook's text
/// (docs/differences.md, "The patched object's text").
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Where two objects differ (by [`same_json`]): `POINTER: upstream's value, gateway's value`.
pub(crate) fn json_differences(at: &str, u: &Value, g: &Value, out: &mut Vec<String>) {
    match (u, g) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(a), Some(b)) => json_differences(&path, a, b, out),
                    (a, b) => out.push(format!("{path}: upstream {a:?}, gateway {b:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (a, b)) in x.iter().zip(y).enumerate() {
                json_differences(&format!("{at}/{i}"), a, b, out);
            }
        }
        _ if !same_json(u, g) => out.push(format!("{at}: upstream {u}, gateway {g}")),
        _ => {}
    }
}

/// Whether the two agree, after the normalizations of the module's header.
fn agree(upstream: &Outcome, gateway: &Outcome) -> bool {
    let (Outcome::Decided(u), Outcome::Decided(g)) = (upstream, gateway) else {
        return matches!(gateway, Outcome::CannotConvert);
    };
    let mut g = g.clone();
    if let Some(first) = position_in_list(&u.message, &g.message) {
        if !first {
            g.code = u.code;
            g.reason = u.reason.clone();
        }
        g.message = u.message.clone();
    }
    if u.code == 404 && g.code == 404 && g.message.starts_with(&u.message) {
        g.message = u.message.clone();
    }
    if !u.allowed && !g.allowed {
        // A denied request's object is nobody's: upstream's stays as the request had it when a
        // mutating webhook fails the chain (Dispatch writes the patched object back only at its
        // end), the gateway's shows the patches applied before; neither is stored or answered.
        g.object = u.object.clone();
    }
    let sorted = |w: &[String]| {
        let mut w = w.to_vec();
        w.sort();
        w
    };
    u.allowed == g.allowed
        && u.code == g.code
        && u.reason == g.reason
        && u.message == g.message
        && same_json(&u.object, &g.object)
        && sorted(&u.warnings) == sorted(&g.warnings)
        && u.audit == g.audit
}

/// One line saying how they differ.
fn summary(upstream: &Outcome, gateway: &Outcome) -> String {
    fn cut(text: &str) -> String {
        let line = text.replace('\n', "\\n");
        if line.chars().count() > 200 {
            line.chars().take(200).collect::<String>() + "…"
        } else {
            line
        }
    }
    match (upstream, gateway) {
        (Outcome::Decided(u), Outcome::Decided(g)) => {
            let mut parts = Vec::new();
            if (u.allowed, u.code) != (g.allowed, g.code) {
                parts.push(format!(
                    "decision: upstream {} {}, gateway {} {}",
                    u.allowed, u.code, g.allowed, g.code
                ));
            }
            if u.reason != g.reason {
                parts.push(format!("reason: upstream {:?}, gateway {:?}", u.reason, g.reason));
            }
            if u.message != g.message {
                parts.push(format!("message: upstream {:?}, gateway {:?}", cut(&u.message), cut(&g.message)));
            }
            if !same_json(&u.object, &g.object) && (u.allowed || g.allowed) {
                let mut paths = Vec::new();
                json_differences("", &u.object, &g.object, &mut paths);
                parts.push(format!("object: {}", cut(&paths.join(", "))));
            }
            let (mut uw, mut gw) = (u.warnings.clone(), g.warnings.clone());
            uw.sort();
            gw.sort();
            if uw != gw {
                parts.push(format!("warnings: upstream {uw:?}, gateway {gw:?}"));
            }
            let keys: BTreeSet<_> = u.audit.keys().chain(g.audit.keys()).collect();
            for key in keys {
                if u.audit.get(key) != g.audit.get(key) {
                    parts.push(format!(
                        "audit {key}: upstream {:?}, gateway {:?}",
                        u.audit.get(key).map(|v| cut(v)),
                        g.audit.get(key).map(|v| cut(v))
                    ));
                }
            }
            parts.join("; ")
        }
        (u, g) => format!("upstream {u:?}, gateway {g:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Running both sides

/// Upstream's outcome of every case: one oracle process for the batch.
fn upstream(cases: &[Case], oracle: &Path) -> Vec<Outcome> {
    let mut child = Command::new(oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", oracle.display()));
    let mut stdin = child.stdin.take().unwrap();
    let lines: Vec<String> = cases
        .iter()
        .map(|case| json!({"mode": "webhooks", "config": case.config(), "review": case.review()}).to_string())
        .collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            stdin.write_all(line.as_bytes()).expect("the oracle reads its cases");
            stdin.write_all(b"\n").unwrap();
        }
    });
    let mut outcomes = Vec::with_capacity(cases.len());
    for (line, case) in BufReader::new(child.stdout.take().unwrap()).lines().zip(cases) {
        let answer: Value =
            serde_json::from_str(&line.expect("the oracle's answer")).expect("the oracle answers JSON");
        if let Some(error) = answer["error"].as_str() {
            panic!("the oracle cannot run case {}: {error}", case.name);
        }
        outcomes.push(Outcome::Decided(Decision {
            allowed: answer["allowed"].as_bool().expect("allowed"),
            code: answer["code"].as_i64().expect("code"),
            reason: answer["reason"].as_str().unwrap_or_default().to_owned(),
            message: mask_uids(answer["message"].as_str().unwrap_or_default()),
            object: answer.get("object").cloned().unwrap_or(Value::Null),
            warnings: strings(&answer["warnings"]),
            audit: string_map(&answer["auditAnnotations"]),
        }));
    }
    writer.join().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the oracle failed ({status}); its standard error is above");
    assert_eq!(
        outcomes.len(),
        cases.len(),
        "the oracle answered {} of {} cases",
        outcomes.len(),
        cases.len()
    );
    outcomes
}

/// The gateway's own settings for the comparison: the patch annotations returned (the oracle
/// audits at level Request, where upstream records them), and no ejection (each `review` is one
/// process, but a case may call one failing webhook twice).
pub(crate) fn gateway_config() -> Value {
    json!({
        "apiVersion": "admission-gateway/v1alpha1",
        "kind": "GatewayConfig",
        "metadata": {"name": "gateway"},
        "auditPatchAnnotations": true,
        "ejectAfterFailures": 0,
    })
}

/// The gateway's outcome: `review --stage admit -o json` with the case's configuration in a
/// directory of its own. Its `status`, `warnings`, `auditAnnotations` (full keys) and
/// `finalObject` are compared.
fn gateway(case: &Case) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir(&config).unwrap();
    for (i, object) in case.config().iter().chain([&gateway_config()]).enumerate() {
        std::fs::write(config.join(format!("{i:03}.json")), object.to_string()).unwrap();
    }
    let review = dir.path().join("review.json");
    std::fs::write(&review, case.review().to_string()).unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(BINARY)
        .args(["review", "--stage", "admit", "-o", "json", "--timeout", REVIEW_TIMEOUT, "--config"])
        .arg(&config)
        .arg(&review)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("the binary runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HUNG_AFTER {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::Hung;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (out, err) = (std::fs::read(&stdout).unwrap(), std::fs::read_to_string(&stderr).unwrap());
    match status.code() {
        Some(0 | 1) => {}
        Some(2) => {
            return Outcome::Refused(err.replace(&format!("{}/", config.display()), "").trim().to_owned())
        }
        _ => panic!("case {}: `admission-gateway review` ended with {status}: {err}", case.name),
    }
    let answer: Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("case {}: `review -o json` printed no JSON: {e}", case.name));
    if answer.to_string().contains("admission-gateway cannot convert") {
        return Outcome::CannotConvert;
    }
    let allowed = answer["allowed"].as_bool().expect("allowed");
    let status = &answer["status"];
    Outcome::Decided(Decision {
        allowed,
        code: status["code"].as_i64().unwrap_or(if allowed { 200 } else { 0 }),
        reason: status["reason"].as_str().unwrap_or_default().to_owned(),
        message: mask_uids(status["message"].as_str().unwrap_or_default()),
        object: answer["finalObject"].clone(),
        warnings: strings(&answer["warnings"]),
        audit: string_map(&answer["auditAnnotations"]),
    })
}

/// The gateway's outcomes, a few cases at a time.
fn gateway_all(cases: &[Case]) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![None; cases.len()]);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4) * 2;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let outcome = gateway(case);
                results.lock().unwrap()[i] = Some(outcome);
            });
        }
    });
    results.into_inner().unwrap().into_iter().map(|o| o.expect("every case ran")).collect()
}

/// Both sides of every case, the gateway's while the oracle runs.
fn both(cases: &[Case], oracle: &Path) -> Vec<(Outcome, Outcome)> {
    server();
    let (upstream, gateway) = std::thread::scope(|scope| {
        let upstream = scope.spawn(|| upstream(cases, oracle));
        let gateway = gateway_all(cases);
        (upstream.join().unwrap_or_else(|e| std::panic::resume_unwind(e)), gateway)
    });
    upstream.into_iter().zip(gateway).collect()
}

/// The smallest variant of `start` that still differs, by greedy steps.
fn shrink(start: &Case, oracle: &Path) -> (Case, Outcome, Outcome) {
    let (mut upstream, mut gateway) = both(std::slice::from_ref(start), oracle).remove(0);
    let mut current = start.clone();
    for _ in 0..20 {
        let mut candidates = current.smaller();
        candidates.sort_by_key(Case::size);
        candidates.truncate(16);
        if candidates.is_empty() {
            break;
        }
        let results = both(&candidates, oracle);
        let Some((i, (u, g))) = results.into_iter().enumerate().find(|(_, (u, g))| !agree(u, g)) else {
            break;
        };
        current = candidates.swap_remove(i);
        (upstream, gateway) = (u, g);
    }
    (current, upstream, gateway)
}

/// The oracle binary this test runs, pinned: a hard link (or a copy) of the provisioned one,
/// removed when dropped. `$CACHE/oracle-<version>/oracle` is shared by every checkout on the
/// machine and rebuilt in place from whichever `tests/oracle/main.go` provisioned last, so the
/// file can change under a long run; the link keeps this run's build. Checked to know mode
/// `webhooks` (provisioned again if another checkout's build without it came in between).
pub(crate) struct Pinned(pub(crate) std::path::PathBuf);

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(crate) fn pinned_oracle() -> Pinned {
    let mut path = provision::oracle().to_owned();
    for _ in 0..3 {
        let pinned = Pinned(path.with_file_name(format!("oracle.pinned-{}", std::process::id())));
        let _ = std::fs::remove_file(&pinned.0);
        if std::fs::hard_link(&path, &pinned.0).is_err() {
            std::fs::copy(&path, &pinned.0).unwrap_or_else(|e| panic!("copying {}: {e}", path.display()));
        }
        let probe = Case { name: "probe".into(), hooks: Vec::new(), request: pod_create() };
        let line =
            json!({"mode": "webhooks", "config": probe.config(), "review": probe.review()}).to_string();
        let mut child = Command::new(&pinned.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the oracle starts");
        child.stdin.take().unwrap().write_all(format!("{line}\n").as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if answer["allowed"] == true {
            return pinned;
        }
        let status = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/provision/provision.sh"))
            .arg("oracle")
            .status()
            .expect("bash runs");
        assert!(status.success(), "provisioning the oracle again failed");
        let current = provision::cache_dir().join("oracle-current");
        path = std::fs::read_to_string(&current).expect("oracle-current").trim().into();
    }
    panic!("the provisioned oracle does not know mode webhooks (another checkout keeps rebuilding it?)")
}

fn known_differences() -> BTreeMap<String, String> {
    differential::known_differences(KNOWN_DIFFERENCES)
}

/// What the cases exercised, by upstream's outcomes: decisions by code, and how many carry a
/// mutation, a reinvocation, a failed-open webhook, warnings, the webhooks' own audit annotations.
fn coverage(cases: &[Case], results: &[(Outcome, Outcome)]) -> String {
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let (mut mutated, mut reinvoked, mut failed_open, mut warned, mut annotated) = (0, 0, 0, 0, 0);
    for (case, (upstream, _)) in cases.iter().zip(results) {
        let Outcome::Decided(d) = upstream else { continue };
        let key = if d.allowed { "allowed".to_owned() } else { format!("denied {}", d.code) };
        *codes.entry(key).or_default() += 1;
        mutated += usize::from(d.allowed && d.object != case.review()["request"]["object"]);
        reinvoked += usize::from(d.audit.keys().any(|k| k.contains("round_1_")));
        failed_open += usize::from(d.audit.keys().any(|k| k.starts_with("failed-open.")));
        warned += usize::from(!d.warnings.is_empty());
        annotated += usize::from(d.audit.keys().any(|k| k.contains(".example.com/")));
    }
    let codes: Vec<String> = codes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    format!(
        "{}; allowed with a changed object {mutated}, reinvoked {reinvoked}, failed open {failed_open}, \
         warned {warned}, webhook audit annotations {annotated}",
        codes.join(", ")
    )
}

/// A line on standard error that the test harness does not capture.
fn shown(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn webhook_dispatch_agrees_with_upstream_or_is_listed() {
    let started = Instant::now();
    let only: Option<BTreeSet<String>> =
        std::env::var("ORACLE_ONLY").ok().map(|names| names.split(',').map(str::to_owned).collect());
    let mut rng = Rng(SEED);
    let mut cases = named();
    cases.extend((0..GENERATED).map(|i| generated(i, &mut rng)));
    let names: BTreeSet<String> = cases.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    if let Some(only) = &only {
        cases.retain(|c| only.contains(&c.name));
    }
    let known = known_differences();
    let oracle = pinned_oracle();
    let results = both(&cases, &oracle.0);

    let (mut agreeing, mut unconverted) = (0, 0);
    let mut failures = Vec::new();
    let mut observed = BTreeMap::new();
    let mut differing = Vec::new();
    let list = std::env::var_os("ORACLE_LIST").is_some();
    for (case, (upstream, gateway)) in cases.iter().zip(&results) {
        if list {
            eprintln!("{}:\n{}  upstream: {upstream:?}\n  gateway:  {gateway:?}", case.name, case.describe());
        }
        let listed = known.get(&case.name);
        if matches!(gateway, Outcome::CannotConvert) {
            unconverted += 1;
        }
        if agree(upstream, gateway) {
            agreeing += 1;
            if listed.is_some() {
                failures.push(format!(
                    "case {} is listed in tests/oracle/known-differences-webhooks.txt but now agrees with upstream: remove it",
                    case.name
                ));
            }
            continue;
        }
        let said = summary(upstream, gateway);
        observed.insert(case.name.clone(), said.clone());
        differing.push(case.clone());
        if listed.is_none() {
            failures.push(format!(
                "case {} differs and is not listed: {said}\n{}  upstream: {upstream:?}\n  gateway:  {gateway:?}",
                case.name,
                case.describe()
            ));
        }
    }
    if only.is_none() {
        for name in known.keys().filter(|name| !names.contains(*name)) {
            failures
                .push(format!("tests/oracle/known-differences-webhooks.txt lists {name}, which is no case"));
        }
    }
    shown(&format!(
        "oracle_webhooks: {} cases ({} named, {GENERATED} generated from seed {SEED:#x}) in {:.0?}: {} agree, \
         {unconverted} not compared (matchPolicy Equivalent through a version the gateway cannot convert to), {} differ",
        cases.len(),
        named().len(),
        started.elapsed(),
        agreeing - unconverted,
        cases.len() - agreeing
    ));
    shown(&format!("oracle_webhooks: what upstream decided: {}", coverage(&cases, &results)));
    if std::env::var_os("ORACLE_SHRINK").is_some() {
        for case in differing.iter().filter(|c| c.name.starts_with("generated-")).take(3) {
            let (smallest, u, g) = shrink(case, &oracle.0);
            eprintln!("smallest variant of {}: {}\n{}", case.name, summary(&u, &g), smallest.describe());
        }
    }
    if std::env::var_os("ORACLE_WRITE_KNOWN").is_some() && only.is_none() {
        // The list's header (what each kind of difference is, documented or not) is kept as written.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/known-differences-webhooks.txt");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let mut text: String =
            old.lines().take_while(|line| line.starts_with('#')).map(|line| format!("{line}\n")).collect();
        for (name, why) in &observed {
            let _ = writeln!(text, "{name}: {why}");
        }
        std::fs::write(path, text).unwrap();
        return;
    }
    assert!(failures.is_empty(), "{} problem(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn several_failures_are_found_in_the_list() {
    let list = "[admission webhook \"a\" denied the request: x, y, Internal error occurred: z]";
    assert_eq!(position_in_list("admission webhook \"a\" denied the request: x, y", list), Some(true));
    assert_eq!(position_in_list("Internal error occurred: z", list), Some(false));
    assert_eq!(position_in_list("z", list), None);
    assert_eq!(position_in_list("x", "x"), None);
}

#[test]
fn numbers_compare_as_numbers() {
    let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    assert!(same_json(&parse(r#"{"a": [1, 1e3, -0]}"#), &parse(r#"{"a": [1.0, 1000, -0.0]}"#)));
    assert!(!same_json(&parse("12345678901234567890"), &parse("12345678901234567000")));
    assert!(!same_json(&parse(r#"{"a": 1}"#), &parse(r#"{"a": 1, "b": 2}"#)));
    assert!(!same_json(&parse("1"), &parse("\"1\"")));
}

#[test]
fn uids_are_masked() {
    assert_eq!(
        mask_uids("expected response.uid=\"705ab4f5-6393-11e8-b7cc-42010a800002\", got \"x\""),
        "expected response.uid=\"<uid>\", got \"x\""
    );
    assert_eq!(mask_uids("ü 705ab4f5-6393"), "ü 705ab4f5-6393");
}
