//! Entry points for the cargo-fuzz targets in `fuzz/` (not a stable API: hidden from the docs).
//! Each takes untrusted bytes or text the way the gateway receives them and runs one parser
//! through the crate's own code, checking the invariants that are cheap to check with
//! `assert!`: a panic here is a finding. Nothing here is used by the gateway itself.
//!
//! Inputs holding two documents (an object and a patch, a selector and labels) are split at
//! the first NUL byte, which no JSON text contains: see [`split`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use serde_json::Value;

use crate::config::compile::{self, Inputs};
use crate::config::load::Text;
use crate::config::manifest::LabelSelector;
use crate::config::selector::{Labels, Selector};
use crate::config::{validate, Severity};
use crate::go;
use crate::patch::Patch;
use crate::pipeline::object::{ObjectState, PatchError};
use crate::review::decode;
use crate::review::encode::{self, Answer};
use crate::review::{ReviewVersion, Status};
use crate::upstream::Clients;

/// The two documents of a fuzz input: before and after its first NUL byte (the second is empty
/// without one).
pub fn split(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// Decodes a received AdmissionReview as the server does (`review::decode`); when it decodes,
/// encodes a refusal carrying the review's own strings and a webhook's request
/// (`review::encode`), and checks both are JSON echoing the `uid`. `false` if it did not decode.
pub fn review_decode(body: &[u8]) -> bool {
    let Ok(review) = decode::review(body) else { return false };
    let request = &review.request;
    let uid = request.uid.as_str();
    let answer = Answer {
        allowed: false,
        status: Some(Status {
            message: Some(format!("{} {}/{}", request.sub_resource, request.namespace, request.name)),
            code: Some(403),
            ..Status::default()
        }),
        patch: Some(body.to_vec()),
        audit_annotations: BTreeMap::from([(request.name.clone(), request.namespace.clone())]),
        warnings: vec![uid.to_owned()],
    };
    let encoded = encode::answer(review.version, uid, &answer);
    let value: Value = serde_json::from_slice(&encoded).expect("an encoded answer is JSON");
    assert_eq!(value["response"]["uid"].as_str(), Some(uid), "the answer echoes the uid");
    let patch = value["response"]["patch"].as_str().expect("the patch is a string");
    let patch = base64::engine::general_purpose::STANDARD.decode(patch).expect("the patch is base64");
    assert_eq!(patch, body, "the patch round-trips");

    let sent_uid = "6f1c4a2e-0d3b-4c5a-8e7f-9a0b1c2d3e4f";
    let outgoing = review.outgoing(sent_uid, review.object());
    for version in [ReviewVersion::V1, ReviewVersion::V1beta1] {
        let encoded = encode::request(version, &outgoing);
        let value: Value = serde_json::from_slice(&encoded).expect("an encoded request is JSON");
        assert_eq!(value["request"]["name"].as_str().unwrap_or_default(), request.name, "the name is kept");
        // The request as sent (from the received body where it can be: `review/frame.rs`)
        // reads back as the one the encoder writes, field for field.
        let sent = review.request_body(version, sent_uid, review.object());
        let Ok(arrived) = decode::review(&sent) else {
            panic!("the request sent does not decode: {}", String::from_utf8_lossy(&sent))
        };
        assert_eq!(*arrived.request.uid, sent_uid, "the request sent carries its own uid");
        assert_eq!(encode::request(version, &arrived.outgoing(sent_uid, arrived.object())), encoded);
    }
    let object = ObjectState::new(review.object(), review.old_object());
    let _ = (object.labels(), object.old_labels());
    true
}

/// Applies JSON Patch `patch` to the JSON document `object` (`patch.rs`) and checks: an empty
/// patch changes nothing; the mutating chain (`pipeline/object.rs`, which patches the object's
/// text where it can) patches, fails with the same error and detects a change as
/// `Patch::apply` on the whole document, and sends the next webhook the patched object; its
/// combined patch replayed on the object gives the patched object; the patch as annotated
/// decodes and applies alike. `None` if either does not decode.
pub fn json_patch(object: &[u8], patch: &[u8]) -> Option<Result<(), String>> {
    // The chain reads the received text itself: no re-encoding, whose floats may not read back.
    let raw: Box<serde_json::value::RawValue> = serde_json::from_slice(object).ok()?;
    let original: Value = serde_json::from_str(raw.get()).ok()?;
    let patch = Patch::decode(patch).ok()?;
    let _ = (patch.written_paths(), patch.written_containers());

    let mut unchanged = original.clone();
    let empty = Patch::decode(b"[]").expect("[] is a patch");
    if empty.apply(&mut unchanged).is_ok() {
        assert_eq!(unchanged, original, "an empty patch changes nothing");
    }

    let mut patched = original.clone();
    let result = patch.apply(&mut patched).map_err(|e| e.to_string());

    let annotated = Patch::decode(patch.annotation_json().as_bytes()).expect("the annotated patch decodes");
    let mut again = original.clone();
    let again_result = annotated.apply(&mut again).map_err(|e| e.to_string());
    // Only the outcome: a `serde_json` error in a value names a column, which compaction moves.
    assert_eq!(result.is_ok(), again_result.is_ok(), "the annotated patch applies as the patch: {result:?}");
    if result.is_ok() {
        assert_eq!(patched, again, "the annotated patch applies as the patch");
    }

    if original.is_object() {
        let mut state = ObjectState::new(Some(&raw), None);
        let applied = state.apply_now(&patch);
        if let Err(PatchError::Apply(error)) = &applied {
            assert_eq!(result, Err(error.to_string()), "the chain fails as Patch::apply");
        }
        if let Ok(changed) = applied {
            assert!(result.is_ok(), "the chain applies a patch Patch::apply refuses: {result:?}");
            let tree = state.tree().expect("a patched object").clone();
            assert_eq!(tree, patched, "the chain patches as Patch::apply");
            let sent = state.raw().map(|raw| serde_json::from_str::<Value>(raw.get()));
            assert_eq!(
                sent.map(Result::ok),
                Some(Some(tree.clone())),
                "the next webhook is sent the patched object"
            );
            assert_eq!(changed, tree != original, "change detection agrees with equality");
            if let Some(combined) = state.combined_patch() {
                let combined = Patch::decode(&combined).expect("the combined patch decodes");
                let mut replayed = original.clone();
                combined.apply(&mut replayed).expect("the combined patch applies");
                assert_eq!(replayed, tree, "the combined patch replays to the patched object");
            }
        }
    }
    Some(result)
}

/// Loads a configuration text (YAML or JSON, any number of documents) as `serve` loads a
/// fleet ConfigMap's key (`config/load.rs`, `validate.rs`, `compile.rs`): `Ok` with the
/// warnings, or every problem, as printed. A refused configuration has at least one error.
pub fn config_load(text: &str) -> Result<Vec<String>, Vec<String>> {
    let inputs = Inputs {
        texts: vec![Text { name: PathBuf::from("configmap/fuzz/fleet/fleet.yaml"), text: text.to_owned() }],
        ..Inputs::default()
    };
    match compile::load_inputs(&inputs, &Clients::default(), 1) {
        Ok(snapshot) => Ok(snapshot.warnings.iter().map(ToString::to_string).collect()),
        Err(error) => {
            assert!(
                error.problems.iter().any(|p| p.severity == Severity::Error),
                "a refused configuration names an error"
            );
            Err(error.problems.iter().map(ToString::to_string).collect())
        }
    }
}

/// `net/url.Parse` (`go/url.rs`); `Ok` is the host.
pub fn go_url(text: &str) -> Result<String, String> {
    go::url::parse(text).map(|url| url.host)
}

/// `time.ParseDuration` (`go/duration.rs`). Checks that a leading `-` negates.
pub fn go_duration(text: &str) -> Result<i64, String> {
    let parsed = go::duration::parse(text);
    if let (Ok(value), false) = (&parsed, text.starts_with(['-', '+'])) {
        assert_eq!(go::duration::parse(&format!("-{text}")), Ok(-value), "-{text}");
    }
    parsed
}

/// `base64.StdEncoding.DecodeString` (`go/base64.rs`) of `text`, and of the standard encoding
/// of its bytes, which must decode back to them.
pub fn go_base64(text: &str) -> Option<Vec<u8>> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    assert_eq!(go::base64::decode(&encoded).as_deref(), Ok(text.as_bytes()), "round trip");
    go::base64::decode(text).ok()
}

/// `strconv.Quote` of any bytes, and `strconv.Atoi` against Rust's `i64` parser (the same
/// grammar) (`go/strconv.rs`).
pub fn go_strconv(bytes: &[u8]) -> String {
    let quoted = go::strconv::quote_bytes(bytes);
    assert!(quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'));
    assert!(!quoted.chars().any(char::is_control), "{quoted}");
    if let Ok(text) = std::str::from_utf8(bytes) {
        assert_eq!(go::strconv::quote(text), quoted);
        assert_eq!(go::strconv::atoi(text).ok(), text.parse::<i64>().ok(), "atoi {text:?}");
    }
    quoted
}

/// `encoding/json`'s string encoding, compaction and syntax check (`go/json_marshal.rs`,
/// `go/json_errors.rs`): a written string reads back; valid JSON compacts to the same value.
pub fn go_json(text: &str) -> Result<(), String> {
    let mut out = String::new();
    go::json_marshal::push_string(&mut out, text);
    assert_eq!(serde_json::from_str::<String>(&out).ok().as_deref(), Some(text), "{out}");
    let checked = go::json_errors::check_valid(text.as_bytes());
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        assert_eq!(checked, Ok(()), "serde_json reads it");
        let mut compact = String::new();
        go::json_marshal::push_compact(&mut compact, text);
        assert_eq!(serde_json::from_str::<Value>(&compact).ok(), Some(value), "{compact}");
    }
    checked
}

/// A metav1 `LabelSelector` (JSON) validated as the API server does (`config/validate.rs`),
/// compiled and matched against `labels` (a JSON object of strings; `config/selector.rs`).
/// `None` if either does not decode.
pub fn label_selector(selector: &[u8], labels: &[u8]) -> Option<bool> {
    let selector: LabelSelector = serde_json::from_slice(selector).ok()?;
    let labels: Labels = serde_json::from_slice(labels).ok()?;
    let findings = validate::selector(&selector);
    let compiled = Selector::compile(&selector);
    let _ = compiled.to_string();
    assert_eq!(compiled.is_empty(), selector == LabelSelector::default());
    if compiled.is_empty() {
        assert!(compiled.matches(&labels), "the empty selector matches everything");
    }
    if findings.is_empty() && selector.match_expressions.is_empty() {
        assert!(compiled.matches(&selector.match_labels), "matchLabels match themselves");
    }
    Some(compiled.matches(&labels))
}

/// A CEL expression and a JSON object: compiled as a webhook's matchCondition (checked, built)
/// and, when it compiles, evaluated with the object as `object` under the API server's budgets.
/// Never panics, always ends (the cost limit bounds the work).
pub fn cel_eval(expression: &[u8], object: &[u8]) {
    let Ok(expression) = std::str::from_utf8(expression) else { return };
    let Ok(program) = crate::cel::compile(expression.trim()) else { return };
    let object: Option<serde_json::Value> = serde_json::from_slice(object).ok();
    let conditions = [crate::cel::Condition { name: "c", expression, program: &program }];
    let variables = crate::cel::Variables {
        object: Some(crate::cel::json_value(object.as_ref())),
        ..crate::cel::Variables::default()
    };
    let _ = crate::cel::evaluate(&conditions, &variables, None);
}

/// A mutation's expression and a JSON object: compiled as a MutatingAdmissionPolicy's mutation
/// (a JSON Patch when the expression names `JSONPatch`, an apply configuration otherwise)
/// and, when the configuration loads, run by the plugin on a CREATE of the object as a
/// ConfigMap. Never panics, always ends; an object it changes is still an object, and the
/// writes the chain adds for it replay on the received object to exactly the result.
pub fn mutating_policy(expression: &[u8], object: &[u8]) {
    use crate::pipeline::policy::mutating::{dispatch, Rounds};
    use crate::pipeline::policy::{Attributes, NoLookups};
    use crate::schemas::Schemas;
    let Ok(expression) = std::str::from_utf8(expression) else { return };
    let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(object) else { return };
    fields.insert("apiVersion".into(), "v1".into());
    fields.insert("kind".into(), "ConfigMap".into());
    let object = Value::Object(fields);
    let (patch_type, body) = if expression.contains("JSONPatch") {
        ("JSONPatch", "jsonPatch")
    } else {
        ("ApplyConfiguration", "applyConfiguration")
    };
    let policy = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "fuzz"},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
                 "apiVersions": ["v1"], "resources": ["configmaps"]}]},
                 "reinvocationPolicy": "Never",
                 "mutations": [{"patchType": patch_type, body: {"expression": expression}}]}});
    let binding = serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "fuzz"}, "spec": {"policyName": "fuzz"}});
    let text = format!("{policy}\n---\n{binding}\n");
    let inputs = Inputs { texts: vec![Text { name: PathBuf::from("fuzz.yaml"), text }], ..Inputs::default() };
    let Ok(snapshot) = compile::load_inputs(&inputs, &Clients::default(), 1) else { return };
    let request = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                    "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                    "name": "cm", "namespace": "", "operation": "CREATE", "userInfo": {},
                    "object": object}});
    let Ok(review) = decode::review(&serde_json::to_vec(&request).unwrap_or_default()) else { return };
    let attributes = Attributes {
        review: &review,
        object: Some(&object),
        old_object: None,
        namespace: None,
        deadline: None,
    };
    let run = dispatch(
        &snapshot.mutating_policies,
        &attributes,
        &NoLookups,
        &Schemas::default(),
        0,
        &|_| true,
        &mut Rounds::default(),
    );
    let Some(result) = run.object else { return };
    assert!(result.is_object(), "a mutation left a {result}");
    let Ok(received) = serde_json::value::to_raw_value(&object) else { return };
    let mut state = ObjectState::new(Some(&received), None);
    if !matches!(state.replace(result.clone()), Ok(true)) {
        return;
    }
    let combined = state.combined_patch().expect("a change has writes");
    let mut replayed = object.clone();
    Patch::decode(&combined).expect("the writes decode").apply(&mut replayed).expect("the writes apply");
    assert_eq!(replayed, result, "the writes replay to the result");
}

#[cfg(test)]
mod tests {
    /// Every committed seed of the `json_patch` target (those of many operations among them:
    /// `fuzz/make-corpus.py`) holds the target's invariants in the ordinary test run too.
    #[test]
    fn the_json_patch_seeds_hold_the_invariants() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/json_patch");
        let mut applied = 0;
        for entry in std::fs::read_dir(&dir).expect("the json_patch seeds") {
            let path = entry.expect("a seed").path();
            let data = std::fs::read(&path).expect("a seed");
            let (object, patch) = super::split(&data);
            let result = super::json_patch(object, patch);
            assert!(result.is_some(), "{}: does not decode", path.display());
            if path.to_string_lossy().contains("-many-") {
                assert_eq!(result, Some(Ok(())), "{}", path.display());
            }
            applied += usize::from(matches!(result, Some(Ok(()))));
        }
        assert!(applied >= 50, "{applied} seeds applied");
    }

    /// Every committed seed of the `mutating_policy` target runs through the plugin in the
    /// ordinary test run too, holding the target's invariants.
    #[test]
    fn the_mutating_policy_seeds_hold_the_invariants() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/mutating_policy");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).expect("the mutating_policy seeds") {
            let data = std::fs::read(entry.expect("a seed").path()).expect("a seed");
            let (expression, object) = super::split(&data);
            super::mutating_policy(expression, object);
            seeds += 1;
        }
        assert!(seeds >= 6, "{seeds} seeds");
    }
}
