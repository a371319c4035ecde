//! One recorded answer against the candidate's: which kind of disagreement, if any, and the
//! difference of the two patched objects by JSON Pointer path, bounded.

use serde::Serialize;
use serde_json::Value;

/// A redacted value in a recording (src/recording/redact.rs): the prefix of its keyed hash.
pub(crate) const REDACTED: &str = "hmac-sha256:";
/// At most this many differing paths are kept per difference.
pub(crate) const MAX_CHANGES: usize = 32;
/// A differing value whose JSON is longer than this is shown by its size only.
pub(crate) const MAX_VALUE_BYTES: usize = 512;
/// Messages and warnings are cut to this many characters.
const MAX_TEXT_CHARS: usize = 1024;

/// How the candidate's answer differs from the recorded one. One kind per review, the first
/// that holds in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// A candidate webhook gave no usable answer where the recorded one did.
    CallError,
    /// Recorded allowed, candidate denies.
    AllowToDeny,
    /// Recorded denied, candidate allows.
    DenyToAllow,
    /// The same decision with another code, message or warnings.
    Message,
    /// Both allow, and the patched objects differ.
    Patch,
}

impl Kind {
    pub(crate) const ALL: [Kind; 5] =
        [Kind::CallError, Kind::AllowToDeny, Kind::DenyToAllow, Kind::Message, Kind::Patch];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::CallError => "call_error",
            Kind::AllowToDeny => "allow_to_deny",
            Kind::DenyToAllow => "deny_to_allow",
            Kind::Message => "message",
            Kind::Patch => "patch",
        }
    }
}

/// What a fleet answered to one review, as compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Said {
    pub(crate) allowed: bool,
    pub(crate) code: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    /// Webhooks that gave no usable answer: `NAME: reason`.
    #[serde(rename = "callErrors", skip_serializing_if = "Vec::is_empty")]
    pub(crate) call_errors: Vec<String>,
    /// The combined patch (compared through the objects it makes, not shown).
    #[serde(skip)]
    pub(crate) patch: Option<Value>,
}

/// One webhook's own turn in a review (`--only-webhook`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Turn {
    pub(crate) round: u8,
    /// `allowed`, `denied` or `error`.
    pub(crate) outcome: String,
    pub(crate) code: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) mutated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// One path where the patched objects differ; `None`: absent on that side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Change {
    pub(crate) path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) recorded: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) candidate: Option<Value>,
}

/// The differing paths of two objects: at most [`MAX_CHANGES`], and how many more there were.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ObjectDiff {
    pub(crate) changes: Vec<Change>,
    pub(crate) omitted: usize,
    /// A differing value on either side is a redacted one.
    pub(crate) redacted: bool,
}

/// Whether and how `candidate` disagrees with `recorded` on a review of `object` (the object
/// as recorded; `None` for a review without one).
pub(crate) fn answers(
    recorded: &Said,
    candidate: &Said,
    object: Option<&Value>,
) -> Option<(Kind, ObjectDiff)> {
    let new_error = candidate.call_errors.iter().any(|error| !recorded.call_errors.contains(error));
    let kind = if new_error {
        Kind::CallError
    } else if recorded.allowed && !candidate.allowed {
        Kind::AllowToDeny
    } else if !recorded.allowed && candidate.allowed {
        Kind::DenyToAllow
    } else if recorded.code != candidate.code
        || recorded.message != candidate.message
        || recorded.warnings != candidate.warnings
    {
        Kind::Message
    } else if recorded.allowed {
        let diff = patched(object, recorded.patch.as_ref(), candidate.patch.as_ref());
        if diff.changes.is_empty() {
            return None;
        }
        return Some((Kind::Patch, diff));
    } else {
        return None;
    };
    let diff = if recorded.allowed && candidate.allowed {
        patched(object, recorded.patch.as_ref(), candidate.patch.as_ref())
    } else {
        ObjectDiff::default()
    };
    Some((kind, diff))
}

/// Whether and how one webhook's `candidate` turns disagree with its `recorded` ones; no turn
/// on a side means the webhook did not match there (which allows, without a patch).
pub(crate) fn turns(recorded: &[Turn], candidate: &[Turn]) -> Option<Kind> {
    let errs = |turns: &[Turn]| turns.iter().any(|t| t.outcome == "error");
    let denies = |turns: &[Turn]| turns.iter().any(|t| t.outcome != "allowed");
    let mutates = |turns: &[Turn]| turns.iter().any(|t| t.mutated);
    let codes = |turns: &[Turn]| turns.iter().map(|t| (t.round, t.code)).collect::<Vec<_>>();
    if errs(candidate) && !errs(recorded) {
        Some(Kind::CallError)
    } else if !denies(recorded) && denies(candidate) {
        Some(Kind::AllowToDeny)
    } else if denies(recorded) && !denies(candidate) {
        Some(Kind::DenyToAllow)
    } else if codes(recorded) != codes(candidate) || recorded.len() != candidate.len() {
        Some(Kind::Message)
    } else if mutates(recorded) != mutates(candidate) {
        Some(Kind::Patch)
    } else {
        None
    }
}

/// The object each patch makes of `object`, compared. Without an object the patches
/// themselves are compared.
fn patched(object: Option<&Value>, recorded: Option<&Value>, candidate: Option<&Value>) -> ObjectDiff {
    let Some(object) = object else {
        let none = Value::Array(Vec::new());
        return diff(recorded.unwrap_or(&none), candidate.unwrap_or(&none));
    };
    diff(&apply(object, recorded), &apply(object, candidate))
}

/// `object` with `patch` applied; a patch that does not apply shows as the reason why.
fn apply(object: &Value, patch: Option<&Value>) -> Value {
    let mut object = object.clone();
    let Some(patch) = patch else { return object };
    let applied = serde_json::to_vec(patch)
        .map_err(|e| e.to_string())
        .and_then(|bytes| crate::patch::Patch::decode(&bytes).map_err(|e| e.to_string()))
        .and_then(|patch| patch.apply(&mut object).map_err(|e| e.to_string()));
    match applied {
        Ok(()) => object,
        Err(error) => Value::String(format!("<the patch does not apply: {error}>")),
    }
}

/// The paths where `recorded` and `candidate` differ, depth first in key order.
pub(crate) fn diff(recorded: &Value, candidate: &Value) -> ObjectDiff {
    let mut out = ObjectDiff::default();
    walk(&mut String::new(), Some(recorded), Some(candidate), &mut out);
    out
}

fn walk(path: &mut String, recorded: Option<&Value>, candidate: Option<&Value>, out: &mut ObjectDiff) {
    match (recorded, candidate) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(path, a.get(key), b.get(key), out);
                path.truncate(len);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for index in 0..a.len().max(b.len()) {
                let len = path.len();
                path.push('/');
                path.push_str(&index.to_string());
                walk(path, a.get(index), b.get(index), out);
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            out.redacted |= [a, b].into_iter().flatten().any(holds_redacted);
            if out.changes.len() == MAX_CHANGES {
                out.omitted += 1;
                return;
            }
            let path = if path.is_empty() { "/".to_owned() } else { path.clone() };
            out.changes.push(Change { path, recorded: a.map(bounded), candidate: b.map(bounded) });
        }
    }
}

/// `value`, or its size in its place when its JSON is long.
fn bounded(value: &Value) -> Value {
    let size = value.to_string().len();
    if size <= MAX_VALUE_BYTES {
        return value.clone();
    }
    Value::String(format!("<{size} bytes of JSON>"))
}

/// A message or warning cut to [`MAX_TEXT_CHARS`].
pub(crate) fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Whether `value` holds a redacted value anywhere.
pub(crate) fn holds_redacted(value: &Value) -> bool {
    match value {
        Value::String(text) => text.starts_with(REDACTED),
        Value::Array(items) => items.iter().any(holds_redacted),
        Value::Object(fields) => fields.values().any(holds_redacted),
        _ => false,
    }
}

/// Whether an AdmissionReview's object or old object is a Secret whose `data` or `stringData`
/// holds redacted values: its decision could depend on a value the recording does not have.
pub(crate) fn review_holds_redacted(review: &Value) -> bool {
    let request = &review["request"];
    ["object", "oldObject"]
        .iter()
        .any(|field| ["data", "stringData"].iter().any(|values| holds_redacted(&request[*field][*values])))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn said(allowed: bool, code: i64, message: Option<&str>) -> Said {
        Said { allowed, code, message: message.map(str::to_owned), ..Said::default() }
    }

    fn with_patch(mut said: Said, patch: Value) -> Said {
        said.patch = Some(patch);
        said
    }

    fn turn(outcome: &str, code: u16, mutated: bool) -> Turn {
        Turn { round: 0, outcome: outcome.to_owned(), code, mutated, reason: None }
    }

    #[test]
    fn each_kind_of_disagreement() {
        let object = json!({"metadata": {"name": "web", "labels": {"app": "web"}}});
        let allow = said(true, 200, None);
        let deny = said(false, 403, Some("no"));
        let kind =
            |recorded: &Said, candidate: &Said| answers(recorded, candidate, Some(&object)).map(|d| d.0);
        assert_eq!(kind(&allow, &allow), None);
        assert_eq!(kind(&deny, &deny), None);
        assert_eq!(kind(&allow, &deny), Some(Kind::AllowToDeny));
        assert_eq!(kind(&deny, &allow), Some(Kind::DenyToAllow));
        assert_eq!(kind(&deny, &said(false, 403, Some("other"))), Some(Kind::Message));
        assert_eq!(kind(&deny, &said(false, 400, Some("no"))), Some(Kind::Message));
        let warned = Said { warnings: vec!["careful".into()], ..allow.clone() };
        assert_eq!(kind(&allow, &warned), Some(Kind::Message));
        let failed = Said { call_errors: vec!["a.example.com: timeout".into()], ..allow.clone() };
        assert_eq!(kind(&allow, &failed), Some(Kind::CallError));
        assert_eq!(kind(&failed, &failed), None, "an error the recording had too is not new");

        // Patches compare by the objects they make: a different patch with the same result agrees.
        let add = json!([{"op": "add", "path": "/metadata/labels/team", "value": "a"}]);
        let replace =
            json!([{"op": "replace", "path": "/metadata/labels", "value": {"app": "web", "team": "a"}}]);
        let other = json!([{"op": "add", "path": "/metadata/labels/team", "value": "b"}]);
        assert_eq!(kind(&with_patch(allow.clone(), add.clone()), &with_patch(allow.clone(), replace)), None);
        let (kind, diff) = answers(
            &with_patch(allow.clone(), add.clone()),
            &with_patch(allow.clone(), other),
            Some(&object),
        )
        .unwrap();
        assert_eq!(kind, Kind::Patch);
        assert_eq!(
            diff.changes,
            [Change {
                path: "/metadata/labels/team".into(),
                recorded: Some(json!("a")),
                candidate: Some(json!("b"))
            }]
        );
        let (kind, diff) = answers(&with_patch(allow.clone(), add), &allow, Some(&object)).unwrap();
        assert_eq!(
            (kind, diff.changes[0].candidate.clone()),
            (Kind::Patch, None),
            "a patch the candidate lacks"
        );
    }

    #[test]
    fn one_webhooks_turns() {
        let allowed = [turn("allowed", 200, false)];
        let mutated = [turn("allowed", 200, true)];
        let denied = [turn("denied", 403, false)];
        assert_eq!(turns(&allowed, &allowed), None);
        assert_eq!(turns(&[], &[]), None);
        assert_eq!(turns(&allowed, &denied), Some(Kind::AllowToDeny));
        assert_eq!(turns(&[], &denied), Some(Kind::AllowToDeny), "not matched allows");
        assert_eq!(turns(&denied, &allowed), Some(Kind::DenyToAllow));
        assert_eq!(turns(&denied, &[turn("denied", 400, false)]), Some(Kind::Message));
        assert_eq!(turns(&allowed, &mutated), Some(Kind::Patch));
        assert_eq!(turns(&allowed, &[turn("error", 500, false)]), Some(Kind::CallError));
    }

    #[test]
    fn the_object_diff_names_paths_and_is_bounded() {
        let recorded = json!({"a": {"b": 1, "c": [1, 2]}, "k/~": "x", "same": {"deep": true}});
        let candidate = json!({"a": {"b": 2, "c": [1]}, "k/~": "x", "new": "y", "same": {"deep": true}});
        let diff = diff(&recorded, &candidate);
        let paths: Vec<&str> = diff.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/a/b", "/a/c/1", "/new"]);
        assert_eq!(diff.changes[1].candidate, None);
        assert_eq!(diff.changes[2].recorded, None);

        let many = |value: i32| Value::Object((0..100).map(|i| (format!("k{i:03}"), json!(value))).collect());
        let big = super::diff(&many(1), &many(2));
        assert_eq!((big.changes.len(), big.omitted), (MAX_CHANGES, 100 - MAX_CHANGES));
        let long = super::diff(&json!({"a": "x".repeat(2000)}), &json!({"a": "y"}));
        assert_eq!(long.changes[0].recorded, Some(json!("<2002 bytes of JSON>")));
        let escaped = super::diff(&json!({"k/~": 1}), &json!({"k/~": 2}));
        assert_eq!(escaped.changes[0].path, "/k~1~0");
    }

    #[test]
    fn redacted_values_are_noticed() {
        let secret =
            json!({"request": {"object": {"kind": "Secret", "data": {"password": "hmac-sha256:00ff"}}}});
        assert!(review_holds_redacted(&secret));
        let plain = json!({"request": {"object": {"kind": "Secret", "data": {"password": "aGk="}}}});
        assert!(!review_holds_redacted(&plain));
        let diff = diff(&json!({"data": {"t": "hmac-sha256:01"}}), &json!({"data": {"t": "aGk="}}));
        assert!(diff.redacted);
    }
}
