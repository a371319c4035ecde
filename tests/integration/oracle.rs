//! The gateway's ValidatingAdmissionPolicy decisions against upstream's: each case (a
//! configuration and an AdmissionReview) goes through the real binary's `review --stage
//! validate -o json` and through the upstream oracle (`tests/oracle/main.go`: k8s.io/apiserver
//! 0.36's own ValidatingAdmissionPolicy plugin, provisioned by `support::provision::oracle`),
//! and the outcomes are compared: the decision (allowed, HTTP code; or the configuration refused
//! at creation) and the texts (reason, message, warnings, audit annotations; of a refusal, what
//! CEL says of the refused expression).
//!
//! Two sets of cases:
//! - **the corpus**, named cases written here (the CEL library, sizes, null parameters, errors,
//!   messages, actions). A differing case must be listed in `tests/oracle/known-differences.txt`
//!   (`name: what differs`); a listed case that now agrees fails too, so the list only shrinks
//!   as the engine is fixed. `ORACLE_WRITE_KNOWN=1` rewrites the list from what is observed.
//! - **generated cases**: random expressions (a grammar of CEL constructs and the Kubernetes
//!   libraries) over random objects (maps and lists of 0 to 10,000 entries, nulls, unicode),
//!   from a fixed seed. Their agreement must stay above the floors below; when it falls, the
//!   smallest differing case found by shrinking is printed. A case where the gateway ran into
//!   the review's deadline depends on the machine's speed: reported, left out of the ratios.
//!
//! `review_once` (what `review` runs) is not public, so the gateway's side is the binary, whose
//! `-o json` prints that outcome object (`src/report.rs`): its `status`, `warnings` and
//! `auditAnnotations` are compared, not the wrapped webhook answer. `ORACLE_ONLY=name,...` runs
//! only the named corpus cases; `ORACLE_LIST=1` prints every differing generated case and
//! `ORACLE_SHRINK=1` the smallest one even when the floors hold.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::support::binary::BINARY;
use crate::support::differential::{self, Rng};
use crate::support::provision;

/// The corpus cases known to differ today, one `name: summary` a line.
const KNOWN_DIFFERENCES: &str = include_str!("../oracle/known-differences.txt");

/// Generated cases per run, and the seed they come from.
const GENERATED: usize = 600;
const SEED: u64 = 0x05ee_d0f0_ac1e;

/// Floors for the generated cases' agreement, in per mille of the cases the deadline did not
/// cut. Measured on 2026-11-28 against k8s.io/apiserver 0.36.4 (600 cases, the seed above): with
/// the `cel` crate (fcda634) 806‰ decisions, 731‰ messages; on the workspace's engine
/// (crates/cel-engine) 1000‰ decisions (600), 996‰ messages (598: the two others are audit
/// values built by iterating a map, whose order is Go's random map order upstream and the
/// object's own here, docs/differences.md). Since the texts of refusals (100 of the 600 cases) are
/// compared too, with the checker's positions: 998‰ messages (599; the other, the map order
/// again). Every decision must agree; the message floor leaves room for that nondeterminism only.
const FLOOR_DECISIONS_PER_MILLE: usize = 1000;
const FLOOR_MESSAGES_PER_MILLE: usize = 990;

// ---------------------------------------------------------------------------------------------
// Cases and outcomes

#[derive(Clone, Debug)]
struct Case {
    name: String,
    config: Vec<Value>,
    review: Value,
    /// What is compared: the policies' decision, or the matchConditions of the one webhook of
    /// the configuration (as a [`Decision`] whose `reason` is `match: true|false|error` and
    /// whose `message` is the false condition's name or the error).
    webhook: bool,
}

/// What one side decided.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// The configuration is refused at creation (upstream) or at load (the gateway).
    Refused(String),
    Decided(Decision),
    /// The gateway's `review` did not end within [`HUNG_AFTER`] (it was killed).
    Hung,
}

#[derive(Clone, Debug, PartialEq)]
struct Decision {
    allowed: bool,
    code: i64,
    reason: String,
    message: String,
    warnings: Vec<String>,
    audit: BTreeMap<String, String>,
}

/// How two outcomes compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agreement {
    /// Same decision and same texts (both refused: the same CEL refusal, [`same_cel_refusal`];
    /// the rest each side words its own way).
    Full,
    /// Same decision (allowed and code), other texts.
    Decision,
    None,
}

fn compare(upstream: &Outcome, gateway: &Outcome) -> Agreement {
    match (upstream, gateway) {
        (Outcome::Refused(u), Outcome::Refused(g)) if same_cel_refusal(u, g) => Agreement::Full,
        (Outcome::Refused(_), Outcome::Refused(_)) => Agreement::Decision,
        (Outcome::Decided(u), Outcome::Decided(g)) if u.allowed == g.allowed && u.code == g.code => {
            if u == g {
                Agreement::Full
            } else {
                Agreement::Decision
            }
        }
        _ => Agreement::None,
    }
}

/// The details of a refusal that are CEL's (k8s plugin/cel/compile.go): cel-go's report of
/// the parser's and the checker's errors, the program's instantiation error, the result type.
const CEL_REFUSALS: [&str; 3] =
    ["compilation failed: ", "program instantiation failed: ", "must evaluate to "];

/// Upstream's refusal (`KIND "NAME": FIELD: DETAIL`, tests/oracle/main.go `refusal()`) when its
/// detail is CEL's: the field's path and the detail.
fn cel_refusal(upstream: &str) -> Option<(&str, &str)> {
    let at = CEL_REFUSALS.iter().filter_map(|start| upstream.find(&format!(": {start}"))).min()?;
    let path = upstream[..at].rsplit(": ").next().unwrap_or_default();
    Some((path, &upstream[at + 2..]))
}

/// Whether the gateway's refusal says what upstream's says of CEL. Upstream stops at the first
/// problem; when its detail is CEL's ([`cel_refusal`]), the gateway must list a problem of the
/// same field (`FIELD: Invalid value: "EXPRESSION": DETAIL`) with the same detail, to the letter
/// and line for line, ended by the next problem, the condition's name (webhooks'
/// matchConditions) or the end.
fn same_cel_refusal(upstream: &str, gateway: &str) -> bool {
    let Some((path, detail)) = cel_refusal(upstream) else { return true };
    let Some(at) = gateway.find(&format!("{path}: Invalid value: ")) else { return false };
    let problem = &gateway[at..];
    problem.match_indices(detail).any(|(i, _)| {
        let after = &problem[i + detail.len()..];
        after.is_empty()
            || ["\nerror: ", "\nwarning: ", " (matchCondition "].iter().any(|next| after.starts_with(next))
    })
}

/// What the gateway's refusal says of the field `path`: from its first CEL detail on (all of it
/// when it has no problem of that field).
fn gateway_detail<'a>(gateway: &'a str, path: &str) -> &'a str {
    let Some(at) = gateway.find(&format!("{path}: Invalid value: ")) else { return gateway };
    let problem = &gateway[at..];
    CEL_REFUSALS.iter().filter_map(|start| problem.find(start)).min().map_or(problem, |i| &problem[i..])
}

/// A refusal without the expression it quotes (`…: Invalid value: "EXPRESSION": REASON`, as the
/// gateway words it): the field and the reason.
fn refusal(why: &str) -> String {
    if let Some((field, rest)) = why.split_once(": Invalid value: \"") {
        if let Some((_, reason)) = rest.split_once("\": ") {
            return format!("{field}: {reason}");
        }
    }
    why.to_owned()
}

/// Two texts from a little before where they part.
fn apart(a: &str, b: &str) -> (String, String) {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let skip = common.saturating_sub(20);
    let from = |text: &str| {
        let rest: String = text.chars().skip(skip).collect();
        if skip > 0 {
            format!("…{rest}")
        } else {
            rest
        }
    };
    (from(a), from(b))
}

/// The gateway's text when a review's deadline ([`REVIEW_TIMEOUT`]) cut an evaluation short
/// (`src/cel/runtime.rs`).
const DEADLINE_PASSED: &str = "the review's deadline passed before it finished";

/// Whether the gateway's outcome depends on the machine's speed: the deadline cut its
/// evaluation, or it had to be killed. Such a difference is reported, never a failure, and a
/// listed case may agree on a faster run.
fn slow(gateway: &Outcome) -> bool {
    match gateway {
        Outcome::Hung => true,
        Outcome::Decided(d) => {
            d.message.contains(DEADLINE_PASSED) || d.warnings.iter().any(|w| w.contains(DEADLINE_PASSED))
        }
        Outcome::Refused(_) => false,
    }
}

/// One line saying how they differ, for the known-differences list and failures.
fn summary(upstream: &Outcome, gateway: &Outcome) -> String {
    fn cut(text: &str) -> String {
        let one_line = text.replace('\n', "\\n");
        if one_line.chars().count() > 160 {
            one_line.chars().take(160).collect::<String>() + "…"
        } else {
            one_line
        }
    }
    fn decision(outcome: &Outcome) -> String {
        match outcome {
            Outcome::Refused(why) => format!("refused ({})", cut(&refusal(why))),
            Outcome::Hung => format!("still running after {} s (killed)", HUNG_AFTER.as_secs()),
            Outcome::Decided(d) if d.reason.starts_with("match: ") => d.reason.clone(),
            Outcome::Decided(d) if d.allowed => "allowed".to_owned(),
            Outcome::Decided(d) => format!("denied {}", d.code),
        }
    }
    match (upstream, gateway) {
        (Outcome::Refused(u), Outcome::Refused(g)) => {
            let (u, g) = match cel_refusal(u) {
                Some((path, detail)) => apart(detail, gateway_detail(g, path)),
                None => (refusal(u), refusal(g)),
            };
            format!("refusal: upstream {:?}, gateway {:?}", cut(&u), cut(&g))
        }
        (Outcome::Decided(u), Outcome::Decided(g)) if u.allowed == g.allowed && u.code == g.code => {
            let mut parts = Vec::new();
            if u.reason != g.reason {
                parts.push(format!("reason: upstream {:?}, gateway {:?}", u.reason, g.reason));
            }
            if u.message != g.message {
                let (u, g) = apart(&u.message, &g.message);
                parts.push(format!("message: upstream {:?}, gateway {:?}", cut(&u), cut(&g)));
            }
            if u.warnings != g.warnings {
                parts.push(format!(
                    "warnings: upstream {:?}, gateway {:?}",
                    u.warnings.iter().map(|w| cut(w)).collect::<Vec<_>>(),
                    g.warnings.iter().map(|w| cut(w)).collect::<Vec<_>>()
                ));
            }
            if u.audit != g.audit {
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
            }
            parts.join("; ")
        }
        (u, g) => {
            let mut text = format!("decision: upstream {}, gateway {}", decision(u), decision(g));
            for (side, outcome) in [("upstream", u), ("gateway", g)] {
                if let Outcome::Decided(d) = outcome {
                    if !d.allowed || !d.warnings.is_empty() {
                        let said = if d.allowed { d.warnings.join(" | ") } else { d.message.clone() };
                        let _ = write!(text, "; {side}: {:?}", cut(&said));
                    }
                }
            }
            text
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running both sides

/// Upstream's outcome of every case, in order: one oracle process for the batch. A case the
/// oracle cannot run fails the test.
fn upstream(cases: &[Case]) -> Vec<Outcome> {
    let oracle = provision::oracle();
    let mut child = Command::new(oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", oracle.display()));
    let mut stdin = child.stdin.take().unwrap();
    let lines: Vec<String> =
        cases.iter().map(|case| json!({"config": case.config, "review": case.review}).to_string()).collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            stdin.write_all(line.as_bytes()).expect("the oracle reads its cases");
            stdin.write_all(b"\n").unwrap();
        }
    });
    let mut outcomes = Vec::with_capacity(cases.len());
    let reader = BufReader::new(child.stdout.take().unwrap());
    for (line, case) in reader.lines().zip(cases) {
        let line = line.expect("the oracle's answer");
        let answer: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("the oracle's answer is not JSON: {e}"));
        if let Some(error) = answer["error"].as_str() {
            panic!("the oracle cannot run case {}: {error}", case.name);
        }
        if let Some(refused) = answer["refused"].as_str() {
            outcomes.push(Outcome::Refused(refused.to_owned()));
            continue;
        }
        if case.webhook {
            let webhook = &answer["webhooks"][0];
            let matched = webhook["match"].as_str().expect("the webhook's match");
            let said = if matched == "error" { &webhook["error"] } else { &webhook["condition"] };
            outcomes.push(match_outcome(matched, said.as_str().unwrap_or_default()));
            continue;
        }
        outcomes.push(Outcome::Decided(Decision {
            allowed: answer["allowed"].as_bool().expect("allowed"),
            code: answer["code"].as_i64().expect("code"),
            reason: answer["reason"].as_str().unwrap_or_default().to_owned(),
            message: answer["message"].as_str().unwrap_or_default().to_owned(),
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

/// A webhook's matchConditions as a [`Decision`]: matched, not matched (`said`: the false
/// condition), or an error (`said`: its text).
fn match_outcome(matched: &str, said: &str) -> Outcome {
    Outcome::Decided(Decision {
        allowed: matched == "true",
        code: match matched {
            "true" => 200,
            "false" => 0,
            _ => 1,
        },
        reason: format!("match: {matched}"),
        message: said.to_owned(),
        warnings: Vec::new(),
        audit: BTreeMap::new(),
    })
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default()
}

/// The caller's timeout the gateway's `review` gets: the API server's default for a webhook.
const REVIEW_TIMEOUT: &str = "10s";

/// When a `review` still running is killed (it should have answered at [`REVIEW_TIMEOUT`]).
const HUNG_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The gateway's outcome: `review --stage validate -o json` with the case's configuration in a
/// directory of its own (one JSON file per object). What is compared is the outcome object
/// `review` prints (`src/report.rs`: `status`, `warnings`, `auditAnnotations`), the gateway's own
/// decision: docs/differences.md's "Behind the API server's webhook call" (the denial wrapped once
/// more, annotation keys prefixed, `A/B` returned as `A_B`) concerns the answer the API server
/// receives and wraps, not this object, so nothing is normalized. The documented differences
/// that do change an outcome ("no type checker", "authorizer", "not available, so refused at
/// load", "error texts" under matchConditions (CEL)) are listed cases, not normalized away: they
/// are what the engine work is measured by.
fn gateway(case: &Case) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir(&config).unwrap();
    for (i, object) in case.config.iter().enumerate() {
        std::fs::write(config.join(format!("{i:03}.json")), object.to_string()).unwrap();
    }
    let review = dir.path().join("review.json");
    std::fs::write(&review, case.review.to_string()).unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(BINARY)
        .args(["review", "--stage", "validate", "-o", "json", "--timeout", REVIEW_TIMEOUT, "--config"])
        .arg(&config)
        .arg(&review)
        .env("RUST_LOG", "error")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("the binary runs");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HUNG_AFTER {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::Hung;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let output = std::process::Output {
        status,
        stdout: std::fs::read(&stdout).unwrap(),
        stderr: std::fs::read(&stderr).unwrap(),
    };
    match output.status.code() {
        Some(0 | 1) => {}
        Some(2) => {
            // The problems, without the temporary directory's name.
            let text = String::from_utf8_lossy(&output.stderr).replace(&format!("{}/", config.display()), "");
            let problems = problems(&text);
            return Outcome::Refused(if problems.is_empty() { text.trim().to_owned() } else { problems });
        }
        _ => panic!(
            "case {}: `admission-gateway review` ended with {}: {}",
            case.name,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("case {}: `review -o json` printed no JSON: {e}", case.name));
    let allowed = answer["allowed"].as_bool().expect("allowed");
    let status = &answer["status"];
    if case.webhook {
        return gateway_match(case, &answer);
    }
    Outcome::Decided(Decision {
        allowed,
        code: status["code"].as_i64().unwrap_or(if allowed { 200 } else { 0 }),
        reason: status["reason"].as_str().unwrap_or_default().to_owned(),
        message: status["message"].as_str().unwrap_or_default().to_owned(),
        warnings: strings(&answer["warnings"]),
        audit: string_map(&answer["auditAnnotations"]),
    })
}

/// The problems of the gateway's refusal (its standard error after the first line), one a line:
/// a problem starts at a line indented `  error: ` or `  warning: `; the further lines of a
/// problem of several (cel-go's report of a refused expression) follow it as they are.
fn problems(stderr: &str) -> String {
    let mut problems: Vec<String> = Vec::new();
    for line in stderr.lines().skip(1) {
        let starts =
            line.strip_prefix("  ").filter(|p| p.starts_with("error: ") || p.starts_with("warning: "));
        match (starts, problems.last_mut()) {
            (Some(problem), _) => problems.push(problem.to_owned()),
            (None, Some(last)) => {
                last.push('\n');
                last.push_str(line);
            }
            (None, None) => problems.push(line.trim().to_owned()),
        }
    }
    problems.join("\n")
}

/// The one webhook's matchConditions as the gateway's `review` explains them: skipped by a
/// false condition; the request rejected before any call (an error under failurePolicy Fail:
/// the API server's `Forbidden` wrapping the error, `pods "NAME" is forbidden: ERROR`); or
/// called (matched: the call to a closed port fails).
fn gateway_match(case: &Case, answer: &Value) -> Outcome {
    let step = answer["explanation"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["webhook"] == WEBHOOK))
        .unwrap_or_else(|| panic!("case {}: no step of webhook {WEBHOOK} in {answer}", case.name));
    match step["step"].as_str() {
        Some("called") => match_outcome("true", ""),
        Some("skipped") => {
            let reason = step["reason"].as_str().unwrap_or_default();
            let condition = reason
                .strip_prefix("matchCondition \"")
                .and_then(|rest| rest.strip_suffix("\" is false"))
                .unwrap_or_else(|| panic!("case {}: webhook skipped: {reason}", case.name));
            match_outcome("false", condition)
        }
        Some("notCalled") => {
            let outcome = step["outcome"].as_str().unwrap_or_default();
            let error = outcome
                .strip_prefix("request rejected before any call: ")
                .unwrap_or_else(|| panic!("case {}: webhook not called: {outcome}", case.name));
            // The API server's NewForbidden(resource, name, err) around the matcher's error.
            let name = case.review["request"]["name"].as_str().unwrap_or_default();
            let error = error.strip_prefix(&format!("pods \"{name}\" is forbidden: ")).unwrap_or(error);
            match_outcome("error", error)
        }
        other => panic!("case {}: webhook step {other:?}", case.name),
    }
}

/// The gateway's outcomes, a few cases at a time.
fn gateway_all(cases: &[Case]) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![None; cases.len()]);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
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
fn both(cases: &[Case]) -> Vec<(Outcome, Outcome)> {
    let (upstream, gateway) = std::thread::scope(|scope| {
        let upstream = scope.spawn(|| upstream(cases));
        let gateway = gateway_all(cases);
        (upstream.join().unwrap_or_else(|e| std::panic::resume_unwind(e)), gateway)
    });
    upstream.into_iter().zip(gateway).collect()
}

// ---------------------------------------------------------------------------------------------
// Building cases

fn policy(name: &str, spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"],
            }]},
        },
    });
    for (field, value) in spec.as_object().expect("spec fields") {
        object["spec"][field] = value.clone();
    }
    object
}

fn binding(name: &str, policy: &str, actions: &[&str], spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions},
    });
    for (field, value) in spec.as_object().expect("spec fields") {
        object["spec"][field] = value.clone();
    }
    object
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data})
}

fn pod(labels: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p-1", "namespace": "default", "labels": labels},
        "spec": spec,
    })
}

/// An AdmissionReview v1 of a pod in namespace `default`; `old` makes it an UPDATE.
fn review(object: Value, old: Option<Value>) -> Value {
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d1e5b1c-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p-1",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": if old.is_some() { "UpdateOptions" } else { "CreateOptions" }},
        },
    })
}

/// The webhook of the matchConditions cases.
const WEBHOOK: &str = "conditions.example.com";

/// A case of the webhook `WEBHOOK` whose only matchCondition is `expression`, failurePolicy Fail,
/// on the small pod; it listens nowhere, so a match shows as a failed call.
fn webhook_case(name: &str, expression: &str) -> Case {
    let (url, _) = crate::support::closed_port_url();
    Case {
        name: format!("webhook-{name}"),
        config: vec![
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "conditions"},
                "webhooks": [{
                    "name": WEBHOOK,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                    "clientConfig": {"url": url},
                    "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                    "matchConditions": [{"name": "condition", "expression": expression}],
                }],
            }),
            namespace("default", json!({"env": "prod"})),
        ],
        review: review(
            pod(
                json!({"app": "web", "tier": "1"}),
                json!({"containers": [{"name": "c", "image": "nginx:1.25"}]}),
            ),
            None,
        ),
        webhook: true,
    }
}

/// Labels `k0`… with non-empty values, `empty` of them (the last ones) empty.
fn labels(count: usize, empty: usize) -> Value {
    Value::Object(
        (0..count).map(|i| (format!("k{i}"), json!(if i + empty >= count { "" } else { "v" }))).collect(),
    )
}

/// A plain case: one policy `p` with these spec fields, bound as `b` with `actions`, on `object`.
fn simple(name: &str, spec: Value, actions: &[&str], object: Value) -> Case {
    Case {
        name: name.to_owned(),
        config: vec![
            policy("p", spec),
            binding("b", "p", actions, json!({})),
            namespace("default", json!({"env": "prod"})),
        ],
        review: review(object, None),
        webhook: false,
    }
}

/// One validation `expression` on a small pod, denying.
fn expr(name: &str, expression: &str) -> Case {
    simple(
        name,
        json!({"validations": [{"expression": expression}]}),
        &["Deny"],
        pod(
            json!({"app": "web", "tier": "1"}),
            json!({"containers": [{"name": "c", "image": "nginx:1.25"}]}),
        ),
    )
}

fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    let all_labels = "object.metadata.labels.all(k, object.metadata.labels[k] != '')";
    for count in [0, 10, 800, 3200] {
        let object = pod(labels(count, 0), json!({"containers": [{"name": "c"}]}));
        cases.push(simple(
            &format!("labels-all-nonempty-{count}"),
            json!({"validations": [{"expression": all_labels}]}),
            &["Deny"],
            object,
        ));
    }
    for count in [10, 800, 3200] {
        let object = pod(labels(count, 1), json!({"containers": [{"name": "c"}]}));
        cases.push(simple(
            &format!("labels-all-one-empty-{count}"),
            json!({"validations": [{"expression": all_labels, "messageExpression": "'empty label among ' + string(size(object.metadata.labels))"}]}),
            &["Deny"],
            object,
        ));
    }

    // Parameters.
    let starts_v = "params.data.all(k, params.data[k].startsWith('v'))";
    let param_policy = |expression: &str, failure: &str| {
        policy(
            "p",
            json!({"failurePolicy": failure, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": expression}]}),
        )
    };
    let data = |count: usize, bad: usize| {
        Value::Object(
            (0..count).map(|i| (format!("key-{i}"), json!(if i < bad { "x" } else { "v1" }))).collect(),
        )
    };
    for (name, bad) in [("params-configmap-800", 0), ("params-configmap-800-one-bad", 1)] {
        cases.push(Case {
            name: name.to_owned(),
            config: vec![
                param_policy(starts_v, "Fail"),
                binding("b", "p", &["Deny"], json!({"paramRef": {"name": "params", "namespace": "default", "parameterNotFoundAction": "Deny"}})),
                config_map("params", data(800, bad)),
                namespace("default", json!({})),
            ],
            review: review(pod(json!({"app": "web"}), json!({"containers": [{"name": "c"}]})), None),
            webhook: false,
        });
    }
    let null_params = "has(params.metadata) && has(params.metadata.name)";
    for failure in ["Ignore", "Fail"] {
        let lower = failure.to_lowercase();
        cases.push(Case {
            name: format!("null-params-no-paramref-{lower}"),
            config: vec![
                param_policy(null_params, failure),
                binding("b", "p", &["Deny"], json!({})),
                namespace("default", json!({})),
            ],
            review: review(pod(json!({}), json!({"containers": [{"name": "c"}]})), None),
            webhook: false,
        });
        cases.push(Case {
            name: format!("missing-param-allow-{lower}"),
            config: vec![
                param_policy(null_params, failure),
                binding("b", "p", &["Deny"], json!({"paramRef": {"name": "absent", "namespace": "default", "parameterNotFoundAction": "Allow"}})),
                namespace("default", json!({})),
            ],
            review: review(pod(json!({}), json!({"containers": [{"name": "c"}]})), None),
            webhook: false,
        });
        cases.push(Case {
            name: format!("missing-param-deny-{lower}"),
            config: vec![
                param_policy(null_params, failure),
                binding("b", "p", &["Deny"], json!({"paramRef": {"name": "absent", "namespace": "default", "parameterNotFoundAction": "Deny"}})),
                namespace("default", json!({})),
            ],
            review: review(pod(json!({}), json!({"containers": [{"name": "c"}]})), None),
            webhook: false,
        });
    }
    cases.push(Case {
        name: "params-selector-two".to_owned(),
        config: vec![
            param_policy("params.data.limit == '3'", "Fail"),
            binding("b", "p", &["Deny"], json!({"paramRef": {"selector": {"matchLabels": {"set": "a"}}, "namespace": "default", "parameterNotFoundAction": "Deny"}})),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a1", "namespace": "default", "labels": {"set": "a"}}, "data": {"limit": "3"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a2", "namespace": "default", "labels": {"set": "a"}}, "data": {"limit": "4"}}),
            namespace("default", json!({})),
        ],
        review: review(pod(json!({}), json!({"containers": [{"name": "c"}]})), None),
        webhook: false,
    });

    // Single expressions: true ones allow, false ones deny with "failed expression", errors
    // deny with the error.
    let single: &[(&str, &str)] = &[
        ("size-unicode", "size('héllo') == 5"),
        ("size-bytes", "size(b'héllo') == 6"),
        ("int-double-dyn", "dyn(30) == 30.0"),
        ("int-double-no-dyn", "30 == 30.0"),
        ("int-uint-dyn", "dyn(1u) == 1"),
        ("list-index-out-of-range", "object.spec.containers[5].name == 'x'"),
        ("list-literal-index-out-of-range", "[1, 2, 3][3] == 1"),
        ("negative-index", "object.spec.containers[-1].name == 'c'"),
        ("map-no-such-key", "object.metadata.labels['nope'] == ''"),
        ("field-of-null", "object.spec.nodeName.size() > 0"),
        ("division-by-zero", "1 / (size(object.metadata.labels) - 2) == 0"),
        ("modulo-by-zero", "1 % (size(object.metadata.labels) - 2) == 0"),
        ("int-overflow", "9223372036854775807 + size(object.metadata.labels) > 0"),
        ("int-min-negation", "-(-9223372036854775807 - size(object.metadata.labels) + 1) > 0"),
        ("double-to-int-range", "int(1e19) > 0"),
        ("string-to-int-bad", "int('12x') == 12"),
        ("string-lower-upper", "'ÀbC'.lowerAscii() == 'Àbc' && 'àbc'.upperAscii() == 'àBC'"),
        ("string-replace", "'aaa'.replace('a', 'b', 2) == 'bba'"),
        ("string-split", "'a,b,,c'.split(',') == ['a', 'b', '', 'c']"),
        ("string-split-limit", "'a,b,c'.split(',', 2) == ['a', 'b,c']"),
        ("string-join", "['a', 'b'].join('-') == 'a-b'"),
        ("string-trim", "'  x \\t'.trim() == 'x'"),
        ("string-indexof-unicode", "'héllo wörld'.indexOf('w') == 6"),
        ("string-lastindexof", "'abcabc'.lastIndexOf('bc') == 4"),
        ("string-substring", "'héllo'.substring(1, 3) == 'él'"),
        ("string-substring-out-of-range", "'abc'.substring(2, 5) == 'c'"),
        ("string-substring-reversed", "'abc'.substring(2, 1) == ''"),
        ("string-charat", "'héllo'.charAt(1) == 'é' && 'abc'.charAt(3) == ''"),
        ("string-charat-out-of-range", "'abc'.charAt(4) == ''"),
        ("string-reverse", "'héllo'.reverse() == 'olléh'"),
        ("string-quote", "strings.quote('a\"b') == '\"a\\\\\"b\"'"),
        ("string-compare", "'a' < 'b' && 'é' > 'z'"),
        ("regex-matches", "'abc'.matches('^a.c$') && '日本'.matches('^..$')"),
        ("regex-find", "'abc 123 def 456'.find('[0-9]+') == '123'"),
        ("regex-findall", "'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']"),
        ("regex-findall-limit", "'a1b2c3'.findAll('[0-9]', 2) == ['1', '2']"),
        ("regex-invalid-literal", "'abc'.matches('(')"),
        ("regex-invalid-runtime", "'abc'.matches(object.metadata.labels.app + '(')"),
        ("format-basic", "'%s %d %.2f'.format(['a', 1, 1.5]) == 'a 1 1.50'"),
        ("format-hex-binary-octal", "'%x %X %b %o'.format([255, 255, 5, 8]) == 'ff FF 101 10'"),
        ("format-scientific", "'%e'.format([1234.5]) == '1.234500e+03'"),
        ("format-list-map", "'%s'.format([[1, 'a']]) == '[1, a]' && '%s'.format([{'k': 1}]) == '{k: 1}'"),
        ("format-double-default", "'%s'.format([1.0]) == '1.0'"),
        ("format-mismatch", "'%d'.format(['x']) == 'x'"),
        ("format-too-few", "'%s %s'.format(['x']) == 'x'"),
        ("quantity-compare", "quantity('1Gi').isGreaterThan(quantity('1G'))"),
        ("quantity-arith", "quantity('1Gi').add(quantity('512Mi')).compareTo(quantity('1536Mi')) == 0"),
        ("quantity-as-integer", "quantity('1.5').asInteger() == 1"),
        ("quantity-approximate", "quantity('100m').asApproximateFloat() == 0.1"),
        ("quantity-is-integer", "!quantity('1.5').isInteger() && quantity('2k').isInteger()"),
        ("quantity-whitespace", "isQuantity(' 1Gi')"),
        ("quantity-invalid", "quantity('1.5.5').isInteger()"),
        ("quantity-sign", "quantity('-1').sign() == -1"),
        ("semver-compare", "semver('1.2.3').isLessThan(semver('1.10.0'))"),
        ("semver-fields", "semver('1.2.3-rc.1+b').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3"),
        ("semver-v-prefix", "isSemver('v1.2.3')"),
        ("semver-normalize", "isSemver('v1.2', true) && semver('v1.2', true).minor() == 2"),
        ("semver-invalid", "semver('1.2').major() == 1"),
        ("ip-family", "ip('10.0.0.1').family() == 4 && ip('::1').family() == 6"),
        ("ip-mapped", "isIP('::ffff:1.2.3.4')"),
        ("ip-zone", "isIP('fe80::1%eth0')"),
        ("ip-canonical", "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')"),
        ("ip-kinds", "ip('127.0.0.1').isLoopback() && ip('224.0.0.1').isGlobalUnicast() == false"),
        ("cidr-contains", "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && cidr('10.0.0.0/8').containsIP('10.1.2.3')"),
        ("cidr-prefix", "cidr('192.168.0.0/24').prefixLength() == 24 && cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')"),
        ("cidr-invalid", "cidr('10.0.0.0/33').prefixLength() == 33"),
        ("url-parts", "url('https://example.com:8080/a%20b?x=1&x=2').getHost() == 'example.com:8080' && url('https://example.com:8080/').getPort() == '8080'"),
        ("url-query", "url('https://e.com/?x=1&x=2&y=').getQuery() == {'x': ['1', '2'], 'y': ['']}"),
        ("url-escaped-path", "url('https://e.com/a%20b').getEscapedPath() == '/a%20b'"),
        ("url-hostname-ipv6", "url('https://[::1]:80/').getHostname() == '::1'"),
        ("url-relative", "isURL('/relative/path')"),
        ("url-invalid", "isURL('https://e.com/%zz')"),
        ("optional-field", "object.?spec.?missing.orValue('d') == 'd'"),
        ("optional-index", "object.metadata.labels[?'app'].orValue('z') == 'web'"),
        ("optional-none", "!optional.none().hasValue() && optional.of(1).value() == 1"),
        ("optional-list-literal", "[?optional.of(1), ?optional.none()] == [1]"),
        ("optional-map-literal", "{?'k': optional.none(), 'j': 1} == {'j': 1}"),
        ("optional-value-of-none", "optional.none().value() == 1"),
        ("optional-or", "optional.none().or(optional.of('x')).value() == 'x'"),
        ("two-var-all-map", "object.metadata.labels.all(k, v, v != '')"),
        ("two-var-exists-list", "[1, 2, 3].exists(i, v, i == v)"),
        ("two-var-exists-one", "[0, 5, 2].existsOne(i, v, i == v)"),
        ("two-var-transform-list", "['a', 'b'].transformList(i, v, v + string(i)) == ['a0', 'b1']"),
        ("two-var-transform-map", "{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}"),
        ("two-var-transform-map-entry", "{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}"),
        ("bind", "cel.bind(n, size(object.metadata.labels), n == 2)"),
        ("lists-sort-distinct", "[3, 1, 2, 1].sort() == [1, 1, 2, 3] && [3, 1, 1].distinct() == [3, 1]"),
        ("lists-slice-flatten", "[1, 2, 3].slice(1, 3) == [2, 3] && [[1], [2, [3]]].flatten() == [1, 2, [3]]"),
        ("lists-slice-out-of-range", "[1, 2, 3].slice(2, 5) == [3]"),
        ("lists-range-reverse", "lists.range(3).reverse() == [2, 1, 0]"),
        ("lists-sortby", "[{'n': 2}, {'n': 1}].sortBy(e, e.n)[0].n == 1"),
        ("lists-k8s", "[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6 && [1, 2].min() == 1 && [1, 2].max() == 2"),
        ("lists-min-empty", "[].min() == 0"),
        ("lists-indexof", "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2"),
        ("sets", "sets.contains([1, 2, 3], [1]) && sets.intersects([1], [1, 2]) && sets.equivalent([1, 1], [1])"),
        ("math", "math.greatest(1, 2.5) == 2.5 && math.least([3, 1]) == 1 && math.abs(-3) == 3"),
        ("math-round", "math.round(2.5) == 3.0 && math.ceil(1.2) == 2.0 && math.isNaN(0.0 / 0.0)"),
        ("math-bits", "math.bitShiftLeft(1, 3) == 8 && math.bitAnd(6, 3) == 2"),
        ("base64", "base64.encode(b'hé') == 'aMOp' && base64.decode('aMOp') == b'hé'"),
        ("bytes-string", "string(b'\\xff') == '\\ufffd'"),
        ("timestamp-duration", "timestamp('2026-01-01T00:00:00Z') + duration('1h') == timestamp('2026-01-01T01:00:00Z')"),
        ("duration-format", "string(duration('90m')) == '5400s'"),
        ("timestamp-invalid", "timestamp('2026-13-01T00:00:00Z') > timestamp('2026-01-01T00:00:00Z')"),
        ("type-function", "type(object) == map && type(1) == int"),
        ("double-string", "string(1.0) == '1' && string(0.1) == '0.1' && string(1e21) == '1e+21'"),
        ("uint-arith", "1u - 2u == 0u"),
        ("in-list-map", "'app' in object.metadata.labels && 'c' in object.spec.containers.map(c, c.name)"),
        ("has-chain", "has(object.spec.securityContext.runAsUser)"),
        ("has-macro-map", "has(object.metadata.labels.app)"),
        ("exists-one", "object.spec.containers.exists_one(c, c.name == 'c')"),
        ("filter-map", "object.spec.containers.filter(c, c.name.startsWith('c')).map(c, c.image) == ['nginx:1.25']"),
        ("map-filter-three-arg", "[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]"),
        ("equality-list-types", "[1, 'a'] == [1, 'a'] && {'a': 1} != {'a': 2}"),
        ("string-concat-int", "'a' + 1 == 'a1'"),
        ("request-fields", "request.operation == 'CREATE' && request.userInfo.username == 'alice' && request.namespace == 'default' && !request.dryRun"),
        ("request-groups", "'devs' in request.userInfo.groups && request.kind.kind == 'Pod' && request.resource.resource == 'pods'"),
        ("request-options", "request.options.kind == 'CreateOptions'"),
        ("request-unknown-field", "request.nope == 1"),
        ("namespace-object", "namespaceObject.metadata.name == 'default' && namespaceObject.metadata.labels['env'] == 'prod'"),
        ("old-object-null-on-create", "oldObject == null"),
        ("object-unknown-variable", "nope == 1"),
        ("non-bool-result", "size(object.metadata.labels)"),
        ("dyn-bool-result", "object.metadata.labels.app"),
        ("authorizer-check", "authorizer.group('').resource('pods').check('create').allowed()"),
        ("cost-exceeded", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(c, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(d, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(e, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(f, a + b + c + d + e + f > 0))))))"),
        ("string-size-large", "size(object.metadata.labels.app) <= 5 && 'x'.repeat(3) == 'xxx'"),
        // Refused at creation: cel-go's report, positions and excerpts, compared.
        ("refused-two-errors", "x + y == 1"),
        ("refused-name-and-type", "nope == 1 && 1 + 1.0 == 2.0"),
        ("refused-exists-one-two-arguments", "[1].existsOne(x, x == 1)"),
        ("refused-second-line", "object.metadata.name == 'a' &&\n  y == 2"),
        ("refused-leading-tab", "\tfoo == 1"),
        ("refused-wide-characters", "'日本語' + x == 'a'"),
        ("refused-in-macro", "object.spec.containers.all(c, c.name + 1 == 'a')"),
        ("refused-in-expansion", "[1].transformList(i, v, v, v) == []"),
        ("refused-parse-error", "object.metadata.name == "),
    ];
    for (name, expression) in single {
        cases.push(expr(name, expression));
        // The same expression as a webhook's matchCondition (its own environment: no params,
        // no variables, no namespaceObject).
        cases.push(webhook_case(name, expression));
    }

    // Big inputs at runtime (the runtime cost of a comprehension over 10,000 entries).
    let big = pod(labels(10_000, 0), json!({"containers": [{"name": "c"}]}));
    cases.push(simple(
        "labels-10000-map-join",
        json!({"validations": [{"expression": "object.metadata.labels.map(k, k + '=' + object.metadata.labels[k]).join(',').size() > 0"}]}),
        &["Deny"],
        big.clone(),
    ));
    cases.push(simple(
        "labels-10000-nested-exceeds-budget",
        json!({"validations": [{"expression": "object.metadata.labels.all(k, object.metadata.labels.exists(j, j == k))"}]}),
        &["Deny"],
        big,
    ));

    // Messages, reasons, actions, annotations, variables, matchConditions.
    let small = || pod(json!({"app": "web"}), json!({"containers": [{"name": "c"}]}));
    let specs: Vec<(&str, Value, &[&str])> = vec![
        (
            "message-static",
            json!({"validations": [{"expression": "false", "message": "no, sorry"}]}),
            &["Deny"],
        ),
        (
            "message-expression",
            json!({"validations": [{"expression": "false", "messageExpression": "'app ' + object.metadata.labels.app + ' refused'"}]}),
            &["Deny"],
        ),
        (
            "message-expression-empty",
            json!({"validations": [{"expression": "false", "message": "fallback", "messageExpression": "''"}]}),
            &["Deny"],
        ),
        (
            "message-expression-newline",
            json!({"validations": [{"expression": "false", "message": "fallback", "messageExpression": "'a\\nb'"}]}),
            &["Deny"],
        ),
        (
            "message-expression-error",
            json!({"validations": [{"expression": "false", "message": "fallback", "messageExpression": "object.metadata.labels.nope"}]}),
            &["Deny"],
        ),
        (
            "message-expression-long",
            json!({"validations": [{"expression": "false", "message": "fallback", "messageExpression": "'x'.repeat(6000)"}]}),
            &["Deny"],
        ),
        (
            "message-expression-trimmed",
            json!({"validations": [{"expression": "false", "messageExpression": "'  padded  '"}]}),
            &["Deny"],
        ),
        (
            "message-expression-not-string",
            json!({"validations": [{"expression": "false", "messageExpression": "1"}]}),
            &["Deny"],
        ),
        (
            "reason-forbidden",
            json!({"validations": [{"expression": "false", "reason": "Forbidden"}]}),
            &["Deny"],
        ),
        (
            "reason-too-large",
            json!({"validations": [{"expression": "false", "reason": "RequestEntityTooLarge"}]}),
            &["Deny"],
        ),
        (
            "reason-unauthorized",
            json!({"validations": [{"expression": "false", "reason": "Unauthorized"}]}),
            &["Deny"],
        ),
        ("action-warn", json!({"validations": [{"expression": "false", "message": "careful"}]}), &["Warn"]),
        ("action-audit", json!({"validations": [{"expression": "false", "message": "noted"}]}), &["Audit"]),
        (
            "action-warn-audit",
            json!({"validations": [{"expression": "false", "message": "both"}]}),
            &["Warn", "Audit"],
        ),
        (
            "action-deny-audit-error",
            json!({"validations": [{"expression": "1 / (size(object.metadata.labels) - 1) == 1"}]}),
            &["Deny", "Audit"],
        ),
        ("action-deny-warn-refused", json!({"validations": [{"expression": "false"}]}), &["Deny", "Warn"]),
        (
            "two-validations-both-false",
            json!({"validations": [{"expression": "false", "message": "first"}, {"expression": "false", "message": "second"}]}),
            &["Warn"],
        ),
        (
            "error-ignore",
            json!({"failurePolicy": "Ignore", "validations": [{"expression": "object.metadata.labels.nope == 'x'"}]}),
            &["Deny"],
        ),
        (
            "audit-annotation",
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "app", "valueExpression": "'app is ' + object.metadata.labels.app"}]}),
            &["Deny"],
        ),
        (
            "audit-annotation-null",
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "app", "valueExpression": "null"}]}),
            &["Deny"],
        ),
        (
            "audit-annotation-empty",
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "app", "valueExpression": "'  '"}]}),
            &["Deny"],
        ),
        (
            "audit-annotation-error",
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "app", "valueExpression": "object.metadata.labels.nope"}]}),
            &["Deny"],
        ),
        (
            "audit-annotation-long",
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "app", "valueExpression": "'é'.repeat(6000)"}]}),
            &["Deny"],
        ),
        (
            "variables",
            json!({"variables": [{"name": "n", "expression": "size(object.metadata.labels)"}, {"name": "big", "expression": "variables.n > 0"}], "validations": [{"expression": "variables.big && variables.n == 1"}]}),
            &["Deny"],
        ),
        (
            "variable-error",
            json!({"variables": [{"name": "bad", "expression": "object.metadata.labels.nope"}], "validations": [{"expression": "variables.bad == 'x'"}, {"expression": "true"}]}),
            &["Deny"],
        ),
        (
            "variable-unused-error",
            json!({"variables": [{"name": "bad", "expression": "object.metadata.labels.nope"}], "validations": [{"expression": "false", "message": "plain"}]}),
            &["Deny"],
        ),
        (
            "match-condition-false",
            json!({"matchConditions": [{"name": "only-db", "expression": "object.metadata.labels.app == 'db'"}], "validations": [{"expression": "false"}]}),
            &["Deny"],
        ),
        (
            "match-condition-error-fail",
            json!({"matchConditions": [{"name": "broken", "expression": "object.metadata.labels.nope == 'db'"}], "validations": [{"expression": "true"}]}),
            &["Deny"],
        ),
        (
            "match-condition-error-ignore",
            json!({"failurePolicy": "Ignore", "matchConditions": [{"name": "broken", "expression": "object.metadata.labels.nope == 'db'"}], "validations": [{"expression": "false"}]}),
            &["Deny"],
        ),
    ];
    for (name, spec, actions) in specs {
        cases.push(simple(name, spec, actions, small()));
    }
    cases.push(Case {
        name: "update-old-object".to_owned(),
        config: vec![
            policy("p", json!({"validations": [{"expression": "oldObject.metadata.labels == object.metadata.labels", "message": "labels are immutable"}]})),
            binding("b", "p", &["Deny"], json!({})),
            namespace("default", json!({})),
        ],
        review: review(small(), Some(pod(json!({"app": "db"}), json!({"containers": [{"name": "c"}]})))),
        webhook: false,
    });
    cases.push(Case {
        name: "two-policies-first-denial".to_owned(),
        config: vec![
            policy("a", json!({"validations": [{"expression": "false", "message": "from a"}]})),
            policy("b", json!({"validations": [{"expression": "false", "message": "from b"}]})),
            binding("a", "a", &["Deny"], json!({})),
            binding("b", "b", &["Warn", "Audit"], json!({})),
            namespace("default", json!({})),
        ],
        review: review(small(), None),
        webhook: false,
    });
    cases
}

// ---------------------------------------------------------------------------------------------
// Generated cases

/// The types of the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Bool,
    Int,
    Double,
    Str,
    ListInt,
    ListStr,
    Map,
    // Literal-only arguments of the libraries.
    Regex,
    Quantity,
    Semver,
    Ip,
    Cidr,
    Url,
    Format,
}

/// An expression: a literal or a template whose `$i` are its arguments.
#[derive(Clone, Debug)]
struct Expr {
    ty: Ty,
    template: String,
    args: Vec<Expr>,
}

impl Expr {
    fn leaf(ty: Ty, text: &str) -> Expr {
        Expr { ty, template: text.to_owned(), args: Vec::new() }
    }
    fn render(&self) -> String {
        let mut text = self.template.clone();
        for (i, arg) in self.args.iter().enumerate().rev() {
            let rendered = if arg.args.is_empty() { arg.render() } else { format!("({})", arg.render()) };
            text = text.replace(&format!("${i}"), &rendered);
        }
        text
    }
    fn size(&self) -> usize {
        1 + self.args.iter().map(Expr::size).sum::<usize>()
    }
}

const STRINGS: &[&str] = &[
    "''",
    "'a'",
    "'abc'",
    "'héllo'",
    "'日本語'",
    "'ß'",
    "'😀 emoji'",
    "'v1.2.3'",
    "'10.0.0.1'",
    "'Hello World'",
    "'  trim  '",
    "'a,b,c'",
    "'k1'",
    "'v'",
    "'x'",
    "object.metadata.name",
    "object.spec.text",
];
const LEAVES: &[(Ty, &[&str])] = &[
    (
        Ty::Bool,
        &[
            "true",
            "false",
            "has(object.spec.enabled)",
            "has(object.spec.missing)",
            "object.spec.nothing == null",
            "object.spec.enabled == true",
        ],
    ),
    (
        Ty::Int,
        &[
            "0",
            "1",
            "2",
            "3",
            "-1",
            "10",
            "100",
            "9223372036854775807",
            "size(object.spec.items)",
            "object.spec.count",
        ],
    ),
    (Ty::Double, &["1.5", "30.0", "object.spec.ratio", "-0.0", "1e300"]),
    (Ty::Str, STRINGS),
    (Ty::ListInt, &["object.spec.items", "[1, 2, 3]", "[]", "[3, 1, 2, 1]"]),
    (Ty::ListStr, &["object.spec.names", "['a', 'b', '']", "object.metadata.labels.map(k, k)"]),
    (Ty::Map, &["object.metadata.labels", "{'a': 'b', 'c': ''}", "object.metadata.annotations"]),
    (Ty::Regex, &["'^[a-z]+$'", "'é'", "'[0-9]+'", "'^.{2,3}$'", "'('", "'\\\\d'"]),
    (Ty::Quantity, &["'1Gi'", "'1G'", "'100m'", "'1.5'", "'-2'", "' 1Gi'", "'1.5.5'", "'0'", "'1e3'"]),
    (Ty::Semver, &["'1.2.3'", "'1.10.0'", "'v1.2.3'", "'1.2'", "'1.2.3-rc.1'", "'01.2.3'"]),
    (Ty::Ip, &["'10.0.0.1'", "'::1'", "'::ffff:1.2.3.4'", "'fe80::1%eth0'", "'256.0.0.1'", "'2001:db8::1'"]),
    (Ty::Cidr, &["'10.0.0.0/8'", "'192.168.0.1/24'", "'::/0'", "'10.0.0.0/33'"]),
    (
        Ty::Url,
        &[
            "'https://example.com:8080/a?b=c'",
            "'/relative'",
            "'https://[::1]/'",
            "'not a url'",
            "'https://e.com/%zz'",
        ],
    ),
    (Ty::Format, &["'%s'", "'%d'", "'%.2f'", "'%x'", "'%s-%d'", "'%e'", "'%b'", "'%%'"]),
];

/// The composite forms: result type, template, argument types.
const FORMS: &[(Ty, &str, &[Ty])] = {
    use Ty::*;
    &[
        (Bool, "$0 && $1", &[Bool, Bool]),
        (Bool, "$0 || $1", &[Bool, Bool]),
        (Bool, "!$0", &[Bool]),
        (Bool, "$0 ? $1 : $2", &[Bool, Bool, Bool]),
        (Bool, "size($0) > $1", &[ListInt, Int]),
        (Bool, "$0.all(x, x >= $1)", &[ListInt, Int]),
        (Bool, "$0.exists(x, x == $1)", &[ListInt, Int]),
        (Bool, "$0.exists_one(x, x > $1)", &[ListInt, Int]),
        (Bool, "$0.all(k, $0[k] != $1)", &[Map, Str]),
        (Bool, "$0.exists(k, k.startsWith($1))", &[Map, Str]),
        (Bool, "$0.all(k, v, v.size() < $1)", &[Map, Int]),
        (Bool, "$0.exists(i, v, v > $1)", &[ListInt, Int]),
        (Bool, "$0.all(x, x.size() > $1)", &[ListStr, Int]),
        (Bool, "$1 in $0", &[Map, Str]),
        (Bool, "$1 in $0", &[ListInt, Int]),
        (Bool, "$1 in $0", &[ListStr, Str]),
        (Bool, "$0.startsWith($1)", &[Str, Str]),
        (Bool, "$0.endsWith($1)", &[Str, Str]),
        (Bool, "$0.contains($1)", &[Str, Str]),
        (Bool, "$0.matches($1)", &[Str, Regex]),
        (Bool, "$0 == $1", &[Int, Int]),
        (Bool, "$0 < $1", &[Int, Int]),
        (Bool, "dyn($0) == $1", &[Int, Double]),
        (Bool, "$0 == $1", &[Str, Str]),
        (Bool, "$0 < $1", &[Str, Str]),
        (Bool, "$0 == $1", &[Double, Double]),
        (Bool, "$0 == $1", &[ListInt, ListInt]),
        (Bool, "$0 == $1", &[Map, Map]),
        (Bool, "isQuantity($0)", &[Quantity]),
        (Bool, "isSemver($0)", &[Semver]),
        (Bool, "isIP($0)", &[Ip]),
        (Bool, "isCIDR($0)", &[Cidr]),
        (Bool, "isURL($0)", &[Url]),
        (Bool, "$0.isSorted()", &[ListInt]),
        (Bool, "cel.bind(v, $0, v > $1)", &[Int, Int]),
        (Bool, "optional.of($0).hasValue()", &[Str]),
        (Bool, "$0[?$1].orValue('') == ''", &[Map, Str]),
        (Bool, "object.?spec.?nothing.hasValue() == $0", &[Bool]),
        (Bool, "quantity($0).isGreaterThan(quantity($1))", &[Quantity, Quantity]),
        (Bool, "semver($0).isLessThan(semver($1))", &[Semver, Semver]),
        (Bool, "ip($0).family() == 4", &[Ip]),
        (Bool, "cidr($0).containsIP($1)", &[Cidr, Ip]),
        (Bool, "url($0).getHost() == $1", &[Url, Str]),
        (Int, "$0 + $1", &[Int, Int]),
        (Int, "$0 - $1", &[Int, Int]),
        (Int, "$0 * $1", &[Int, Int]),
        (Int, "$0 / $1", &[Int, Int]),
        (Int, "$0 % $1", &[Int, Int]),
        (Int, "$0[$1]", &[ListInt, Int]),
        (Int, "size($0)", &[Str]),
        (Int, "size($0)", &[Map]),
        (Int, "size($0)", &[ListStr]),
        (Int, "$0.indexOf($1)", &[Str, Str]),
        (Int, "$0.lastIndexOf($1)", &[Str, Str]),
        (Int, "$0.sum()", &[ListInt]),
        (Int, "$0.min()", &[ListInt]),
        (Int, "$0.max()", &[ListInt]),
        (Int, "int($0)", &[Double]),
        (Int, "int($0)", &[Str]),
        (Int, "$0.indexOf($1)", &[ListInt, Int]),
        (Int, "$0.filter(x, x > $1).size()", &[ListInt, Int]),
        (Int, "quantity($0).compareTo(quantity($1))", &[Quantity, Quantity]),
        (Double, "$0 / $1", &[Double, Double]),
        (Double, "$0 + $1", &[Double, Double]),
        (Double, "double($0)", &[Int]),
        (Double, "double($0)", &[Str]),
        (Double, "quantity($0).asApproximateFloat()", &[Quantity]),
        (Str, "$0 + $1", &[Str, Str]),
        (Str, "$0.lowerAscii()", &[Str]),
        (Str, "$0.upperAscii()", &[Str]),
        (Str, "$0.trim()", &[Str]),
        (Str, "$0.replace($1, $2)", &[Str, Str, Str]),
        (Str, "$0.substring($1)", &[Str, Int]),
        (Str, "$0.substring($1, $2)", &[Str, Int, Int]),
        (Str, "$0.charAt($1)", &[Str, Int]),
        (Str, "$0.join($1)", &[ListStr, Str]),
        (Str, "string($0)", &[Int]),
        (Str, "string($0)", &[Double]),
        (Str, "$0[$1]", &[Map, Str]),
        (Str, "$0[$1]", &[ListStr, Int]),
        (Str, "$0.format([$1, $2])", &[Format, Str, Int]),
        (Str, "$0.format([$1])", &[Format, Double]),
        (Str, "$0.find($1)", &[Str, Regex]),
        (ListInt, "$0.map(x, x * 2)", &[ListInt]),
        (ListInt, "$0.filter(x, x % 2 == 0)", &[ListInt]),
        (ListInt, "$0 + $1", &[ListInt, ListInt]),
        (ListInt, "$0.slice(0, $1)", &[ListInt, Int]),
        (ListInt, "$0.sort()", &[ListInt]),
        (ListInt, "$0.distinct()", &[ListInt]),
        (ListInt, "$0.reverse()", &[ListInt]),
        (ListInt, "$0.map(x, x.size())", &[ListStr]),
        (ListStr, "$0.map(k, $0[k])", &[Map]),
        (ListStr, "$0.map(x, x.upperAscii())", &[ListStr]),
        (ListStr, "$0.split($1)", &[Str, Str]),
        (ListStr, "$0.filter(x, x != '')", &[ListStr]),
        (ListStr, "$0 + $1", &[ListStr, ListStr]),
        (ListStr, "$0.sort()", &[ListStr]),
        (ListStr, "$0.transformList(i, v, v + string(i))", &[ListStr]),
        (ListStr, "$0.findAll($1)", &[Str, Regex]),
        (Map, "{$0: $1}", &[Str, Str]),
        (Map, "$0.transformMap(k, v, v + 'x')", &[Map]),
    ]
};

fn leaves(ty: Ty) -> &'static [&'static str] {
    LEAVES.iter().find(|(t, _)| *t == ty).map(|(_, l)| *l).expect("every type has leaves")
}

fn generate(rng: &mut Rng, ty: Ty, depth: usize) -> Expr {
    let forms: Vec<_> = FORMS.iter().filter(|(t, _, _)| *t == ty).collect();
    if depth == 0 || forms.is_empty() || rng.chance(30) {
        return Expr::leaf(ty, rng.pick(leaves(ty)));
    }
    let (_, template, args) = rng.pick(&forms);
    Expr {
        ty,
        template: (*template).to_owned(),
        args: args.iter().map(|t| generate(rng, *t, depth - 1)).collect(),
    }
}

/// The random parts of a generated case, kept apart so they can be shrunk.
#[derive(Clone, Debug)]
struct Generated {
    index: usize,
    seed: u64,
    validation: Expr,
    message: Option<Expr>,
    audit: Option<Expr>,
    labels: usize,
    items: usize,
    names: usize,
    failure: &'static str,
    actions: &'static [&'static str],
}

const SIZES: &[usize] = &[0, 0, 1, 2, 3, 5, 10, 10, 50, 100, 800, 3200, 10_000];
const ACTIONS: &[&[&str]] =
    &[&["Deny"], &["Deny"], &["Deny"], &["Warn"], &["Audit"], &["Deny", "Audit"], &["Warn", "Audit"]];
const VALUES: &[&str] = &["", "v", "abc", "héllo", "日本語", "😀", "a,b", "10", "-1", "x y", "ÀÉ"];

fn generated(index: usize, rng: &mut Rng) -> Generated {
    Generated {
        index,
        seed: rng.next(),
        validation: {
            let depth = 1 + rng.below(4);
            generate(rng, Ty::Bool, depth)
        },
        message: rng.chance(30).then(|| {
            let depth = rng.below(3);
            generate(rng, Ty::Str, depth)
        }),
        audit: rng.chance(25).then(|| {
            let depth = rng.below(3);
            generate(rng, Ty::Str, depth)
        }),
        labels: rng.pick(SIZES),
        items: rng.pick(SIZES),
        names: rng.pick(SIZES),
        failure: if rng.chance(70) { "Fail" } else { "Ignore" },
        actions: rng.pick(ACTIONS),
    }
}

impl Generated {
    fn case(&self) -> Case {
        let mut rng = Rng(self.seed | 1);
        fn value(rng: &mut Rng) -> Value {
            json!(rng.pick(VALUES))
        }
        let labels: serde_json::Map<String, Value> = (0..self.labels)
            .map(|i| (if i % 7 == 3 { format!("ключ-{i}") } else { format!("k{i}") }, value(&mut rng)))
            .collect();
        let annotations: serde_json::Map<String, Value> =
            (0..self.labels.min(5)).map(|i| (format!("a{i}"), value(&mut rng))).collect();
        let items: Vec<i64> = (0..self.items).map(|_| rng.below(200) as i64 - 20).collect();
        let names: Vec<Value> = (0..self.names).map(|_| value(&mut rng)).collect();
        let object = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p-1", "namespace": "default", "labels": labels, "annotations": annotations},
            "spec": {
                "containers": [{"name": "c"}],
                "items": items,
                "names": names,
                "ratio": (rng.below(1000) as f64) / 8.0,
                "count": rng.below(20) as i64 - 5,
                "text": rng.pick(VALUES),
                "nothing": null,
                "enabled": rng.chance(50),
            },
        });
        let mut validation =
            json!({"expression": self.validation.render(), "message": "generated validation failed"});
        if let Some(message) = &self.message {
            validation["messageExpression"] = json!(message.render());
        }
        let mut spec = json!({"failurePolicy": self.failure, "validations": [validation]});
        if let Some(audit) = &self.audit {
            spec["auditAnnotations"] = json!([{"key": "generated", "valueExpression": audit.render()}]);
        }
        Case {
            name: format!("generated-{:04}", self.index),
            config: vec![
                policy("p", spec),
                binding("b", "p", self.actions, json!({})),
                namespace("default", json!({"env": "prod"})),
            ],
            review: review(object, None),
            webhook: false,
        }
    }

    /// Smaller variants: fewer entries, an expression node replaced by a leaf or by an argument
    /// of its type, the message or annotation dropped.
    fn smaller(&self) -> Vec<Generated> {
        let mut out = Vec::new();
        for (field, size) in [(0, self.labels), (1, self.items), (2, self.names)] {
            for smaller in [0, size / 2] {
                if smaller < size {
                    let mut g = self.clone();
                    *[&mut g.labels, &mut g.items, &mut g.names][field] = smaller;
                    out.push(g);
                }
            }
        }
        if self.message.is_some() {
            out.push(Generated { message: None, ..self.clone() });
        }
        if self.audit.is_some() {
            out.push(Generated { audit: None, ..self.clone() });
        }
        for simpler in simplifications(&self.validation) {
            out.push(Generated { validation: simpler, ..self.clone() });
        }
        for (slot, expression) in [(0, &self.message), (1, &self.audit)] {
            if let Some(expression) = expression {
                for simpler in simplifications(expression) {
                    let mut g = self.clone();
                    *[&mut g.message, &mut g.audit][slot] = Some(simpler);
                    out.push(g);
                }
            }
        }
        out
    }

    fn size(&self) -> usize {
        self.labels
            + self.items
            + self.names
            + self.validation.size()
            + self.message.as_ref().map_or(0, Expr::size)
            + self.audit.as_ref().map_or(0, Expr::size)
    }
}

/// `expr` with one node replaced by something simpler of its type.
fn simplifications(expr: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    if !expr.args.is_empty() {
        for leaf in leaves(expr.ty).iter().take(2) {
            out.push(Expr::leaf(expr.ty, leaf));
        }
        out.extend(expr.args.iter().filter(|a| a.ty == expr.ty).cloned());
        for (i, arg) in expr.args.iter().enumerate() {
            for simpler in simplifications(arg) {
                let mut e = expr.clone();
                e.args[i] = simpler;
                out.push(e);
            }
        }
    }
    out
}

/// The smallest variant of `start` that still differs, by greedy steps; each step's candidates
/// run as one batch.
fn shrink(start: Generated) -> (Generated, Outcome, Outcome) {
    let outcomes = both(&[start.case()]);
    let (mut upstream, mut gateway) = outcomes.into_iter().next().unwrap();
    let mut current = start;
    for _ in 0..30 {
        let mut candidates = current.smaller();
        candidates.sort_by_key(Generated::size);
        candidates.truncate(24);
        if candidates.is_empty() {
            break;
        }
        let cases: Vec<Case> = candidates.iter().map(Generated::case).collect();
        let results = both(&cases);
        let Some((i, (u, g))) =
            results.into_iter().enumerate().find(|(_, (u, g))| compare(u, g) != Agreement::Full && !slow(g))
        else {
            break;
        };
        current = candidates.swap_remove(i);
        (upstream, gateway) = (u, g);
    }
    (current, upstream, gateway)
}

// ---------------------------------------------------------------------------------------------
// The tests

fn known_differences() -> BTreeMap<String, String> {
    differential::known_differences(KNOWN_DIFFERENCES)
}

fn describe(case: &Case, upstream: &Outcome, gateway: &Outcome) -> String {
    let expressions: Vec<String> = case
        .config
        .iter()
        .filter(|o| o["kind"] == "ValidatingAdmissionPolicy")
        .map(|o| o["spec"].to_string())
        .map(|spec| {
            if spec.chars().count() > 2000 {
                spec.chars().take(2000).collect::<String>() + "…"
            } else {
                spec
            }
        })
        .collect();
    format!(
        "case {}: {}\n  policy spec: {}\n  upstream: {upstream:?}\n  gateway:  {gateway:?}",
        case.name,
        summary(upstream, gateway),
        expressions.join("\n               ")
    )
}

/// A line on standard error that the test harness does not capture: the summary shows in every
/// run, passing or not.
fn shown(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn corpus_agrees_with_upstream_or_is_listed() {
    let only: Option<BTreeSet<String>> =
        std::env::var("ORACLE_ONLY").ok().map(|names| names.split(',').map(str::to_owned).collect());
    let mut cases = corpus();
    let names: BTreeSet<String> = cases.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names.len(), cases.len(), "corpus case names are unique");
    if let Some(only) = &only {
        cases.retain(|c| only.contains(&c.name));
    }
    let known = known_differences();
    let results = both(&cases);

    let (mut decisions, mut messages) = (0, 0);
    let mut failures = Vec::new();
    let mut observed = BTreeMap::new();
    let mut slow_cases = Vec::new();
    for (case, (upstream, gateway)) in cases.iter().zip(&results) {
        let agreement = compare(upstream, gateway);
        decisions += usize::from(agreement != Agreement::None);
        messages += usize::from(agreement == Agreement::Full);
        let listed = known.get(&case.name);
        if agreement != Agreement::Full && slow(gateway) {
            // The machine's speed decides this one: listed with "slow:" or not, it never fails.
            slow_cases.push(case.name.clone());
            observed.insert(case.name.clone(), format!("slow: {}", summary(upstream, gateway)));
        } else if agreement != Agreement::Full {
            observed.insert(case.name.clone(), summary(upstream, gateway));
            if listed.is_none() {
                failures.push(format!("differs and is not listed — {}", describe(case, upstream, gateway)));
            }
        } else if listed.is_some_and(|why| !why.starts_with("slow:")) {
            failures.push(format!(
                "case {} is listed in tests/oracle/known-differences.txt but now agrees with upstream: remove it",
                case.name
            ));
        }
    }
    if only.is_none() {
        for name in known.keys().filter(|name| !names.contains(*name)) {
            failures
                .push(format!("tests/oracle/known-differences.txt lists {name}, which is no corpus case"));
        }
    }
    shown(&format!(
        "oracle: {} cases, {decisions} agree (decision), {messages} agree (message)",
        cases.len()
    ));
    if !slow_cases.is_empty() {
        shown(&format!(
            "oracle: {} case(s) cut by the gateway's {REVIEW_TIMEOUT} deadline (not failures): {}",
            slow_cases.len(),
            slow_cases.join(", ")
        ));
    }
    if std::env::var_os("ORACLE_WRITE_KNOWN").is_some() && only.is_none() {
        let mut text = String::from(
            "# Corpus cases of tests/integration/oracle.rs whose outcome differs from upstream's\n\
             # (k8s.io/apiserver, tests/oracle/main.go), one `name: what differs` a line.\n\
             # The test fails when a case not listed differs and when a listed case agrees.\n\
             # ORACLE_WRITE_KNOWN=1 cargo test --locked --test integration oracle rewrites it.\n",
        );
        for (name, why) in &observed {
            let _ = writeln!(text, "{name}: {why}");
        }
        std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/known-differences.txt"),
            text,
        )
        .unwrap();
        return;
    }
    assert!(failures.is_empty(), "{} problem(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn generated_cases_agree_above_the_floor() {
    let mut rng = Rng(SEED);
    let generated: Vec<Generated> = (0..GENERATED).map(|i| generated(i, &mut rng)).collect();
    let cases: Vec<Case> = generated.iter().map(Generated::case).collect();
    let results = both(&cases);
    let (mut decisions, mut messages, mut refused, mut slow_cases) = (0, 0, 0, 0);
    let mut first_difference = None;
    let list = std::env::var_os("ORACLE_LIST").is_some();
    for (i, (upstream, gateway)) in results.iter().enumerate() {
        let agreement = compare(upstream, gateway);
        if list && agreement != Agreement::Full {
            eprintln!("{}", describe(&cases[i], upstream, gateway));
        }
        if agreement != Agreement::Full && slow(gateway) {
            // The machine's speed decided it: out of the ratios, as in the corpus.
            slow_cases += 1;
            continue;
        }
        decisions += usize::from(agreement != Agreement::None);
        messages += usize::from(agreement == Agreement::Full);
        refused += usize::from(matches!(upstream, Outcome::Refused(_)));
        if agreement != Agreement::Full && first_difference.is_none() {
            first_difference = Some(i);
        }
    }
    let n = cases.len() - slow_cases;
    assert!(n > 0, "every generated case was cut by the gateway's deadline");
    let line = format!(
        "oracle: {} generated cases (seed {SEED:#x}), {slow_cases} cut by the gateway's {REVIEW_TIMEOUT} deadline \
         and left out; of {n}: {decisions} agree (decision, {}‰), {messages} agree (message, {}‰), \
         {refused} refused by upstream",
        cases.len(),
        decisions * 1000 / n,
        messages * 1000 / n
    );
    shown(&line);
    let below =
        decisions * 1000 / n < FLOOR_DECISIONS_PER_MILLE || messages * 1000 / n < FLOOR_MESSAGES_PER_MILLE;
    if below || std::env::var_os("ORACLE_SHRINK").is_some() {
        if let Some(i) = first_difference {
            let (smallest, upstream, gateway) = shrink(generated[i].clone());
            let case = smallest.case();
            eprintln!(
                "smallest differing case (shrunk from {}): labels {}, items {}, names {}, failurePolicy {}, actions {:?}\n{}",
                cases[i].name,
                smallest.labels,
                smallest.items,
                smallest.names,
                smallest.failure,
                smallest.actions,
                describe(&case, &upstream, &gateway)
            );
        }
    }
    assert!(
        !below,
        "the generated cases' agreement fell below the floor ({FLOOR_DECISIONS_PER_MILLE}‰ decisions, \
         {FLOOR_MESSAGES_PER_MILLE}‰ messages): {line}"
    );
}
