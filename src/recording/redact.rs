//! What a recording must not hold readable: a Secret's `data` and `stringData` values, and the
//! values at the settings' `redactPointers` (JSON pointers into the object) in any review.
//! They are replaced by `hmac-sha256:` and the first 16 bytes of their keyed hash, in hex:
//! equal values stay equal (a replay can still tell whether a webhook's patch changed one),
//! none can be read or guessed without the key. A value at a pointer is hashed whole, whatever
//! its type (an `env` list becomes one hash).

use ring::hmac;
use serde_json::Value;

/// The fields of a Secret whose values are secret.
const SECRET_FIELDS: [&str; 2] = ["data", "stringData"];
/// Audit annotations that hold a webhook's patch (`auditPatchAnnotations`), under their full
/// key (`…/round_0_index_0`) or as the answer carries them (`…_round_0_index_0`).
const PATCH_ANNOTATION: &str = "patch.webhook.admission.k8s.io";

/// Each value of a Secret object's `data` and `stringData`, handed to `redact`.
fn secret_values(object: &mut Value, redact: &mut dyn FnMut(&mut Value)) {
    for field in SECRET_FIELDS {
        if let Some(Value::Object(values)) = object.get_mut(field) {
            values.values_mut().for_each(&mut *redact);
        }
    }
}

/// Each value a JSON Patch on a Secret writes under its `data` or `stringData` (a whole object,
/// a whole map, or one key's value), handed to `redact`. The recorder hashes them; replay hashes
/// a candidate's patch the same way (`src/replay/redact.rs`).
pub(crate) fn secret_values_written(patch: &mut Value, redact: &mut dyn FnMut(&mut Value)) {
    let Value::Array(operations) = patch else { return };
    for operation in operations {
        let path = operation.get("path").and_then(Value::as_str).unwrap_or_default().to_owned();
        let under = |field: &str| {
            path.strip_prefix('/')
                .and_then(|p| p.strip_prefix(field))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        let whole = path.is_empty() || path == "/";
        if !(whole || SECRET_FIELDS.iter().any(|field| under(field))) {
            continue;
        }
        let Some(value) = operation.get_mut("value") else { continue };
        match (whole, path.matches('/').count()) {
            // The whole object, or the whole `data` map: each of its values.
            (true, _) => secret_values(value, redact),
            (false, 1) => match value {
                Value::Object(values) => values.values_mut().for_each(&mut *redact),
                value => redact(value),
            },
            // One key's value.
            (false, _) => redact(value),
        }
    }
}

/// The values one patch operation writes at or under one of `pointers` (its value, whole) or
/// above one (the pointer's part of its value), handed to `redact`. The recorder hashes them;
/// replay hashes a candidate's patch the same way, with the pointers the recording was made
/// with (`src/replay/redact.rs`).
pub(crate) fn values_at_pointers(
    operation: &mut Value,
    pointers: &[String],
    redact: &mut dyn FnMut(&mut Value),
) {
    let path = operation.get("path").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(value) = operation.get_mut("value") else { return };
    for pointer in pointers {
        if path == *pointer || path.strip_prefix(pointer.as_str()).is_some_and(|rest| rest.starts_with('/')) {
            redact(value);
            return;
        }
        let below =
            pointer.strip_prefix(path.as_str()).filter(|rest| path.is_empty() || rest.starts_with('/'));
        if let Some(inner) = below.and_then(|rest| value.pointer_mut(rest)) {
            redact(inner);
        }
    }
}

pub(crate) struct Redactor {
    key: hmac::Key,
    /// JSON pointers into the object (checked when the settings were read).
    pointers: Vec<String>,
}

impl Redactor {
    pub(crate) fn new(key: &[u8], pointers: &[String]) -> Self {
        Redactor { key: hmac::Key::new(hmac::HMAC_SHA256, key), pointers: pointers.to_vec() }
    }

    /// The settings' pointers.
    pub(super) fn pointers(&self) -> &[String] {
        &self.pointers
    }

    /// Redacts `review` (an AdmissionReview, any version) in place: the values at the pointers
    /// in its object and old object, and a Secret's values. Returns whether it is a Secret's.
    pub(super) fn review(&self, review: &mut Value) -> bool {
        let Some(request) = review.get_mut("request") else { return false };
        for field in ["object", "oldObject"] {
            if let Some(object) = request.get_mut(field) {
                for pointer in &self.pointers {
                    if let Some(value) = object.pointer_mut(pointer) {
                        self.value(value);
                    }
                }
            }
        }
        let kind = request.get("kind");
        let group = kind.and_then(|k| k.get("group")).and_then(Value::as_str).unwrap_or_default();
        let secret =
            group.is_empty() && kind.and_then(|k| k.get("kind")).and_then(Value::as_str) == Some("Secret");
        if secret {
            for field in ["object", "oldObject"] {
                if let Some(object) = request.get_mut(field) {
                    self.secret(object);
                }
            }
        }
        secret
    }

    /// A Secret's values.
    fn secret(&self, object: &mut Value) {
        secret_values(object, &mut |value| self.value(value));
    }

    /// The values a JSON Patch writes at or under a pointer, or, with `secret`, under a
    /// Secret's `data` or `stringData`.
    pub(crate) fn patch(&self, patch: &mut Value, secret: bool) {
        let Value::Array(operations) = patch else { return };
        for operation in operations.iter_mut() {
            self.at_pointers(operation);
        }
        if secret {
            secret_values_written(patch, &mut |value| self.value(value));
        }
    }

    /// One patch operation's values at the pointers, hashed.
    fn at_pointers(&self, operation: &mut Value) {
        values_at_pointers(operation, &self.pointers, &mut |value| self.value(value));
    }

    /// The audit annotations that hold a patch, of a Secret's review or with pointers set: the
    /// patch redacted (the whole value hashed if it does not read as one).
    pub(super) fn annotations(
        &self,
        annotations: &mut std::collections::BTreeMap<String, String>,
        secret: bool,
    ) {
        if !secret && self.pointers.is_empty() {
            return;
        }
        for (key, value) in annotations.iter_mut() {
            if !key.starts_with(PATCH_ANNOTATION) {
                continue;
            }
            let redacted = serde_json::from_str::<Value>(value).ok().and_then(|mut annotation| {
                self.patch(annotation.get_mut("patch")?, secret);
                serde_json::to_string(&annotation).ok()
            });
            *value = redacted.unwrap_or_else(|| self.hash(value.as_bytes()));
        }
    }

    /// One value, whatever its type, by its JSON text (a string by its characters).
    fn value(&self, value: &mut Value) {
        let hashed = match &*value {
            Value::String(text) => self.hash(text.as_bytes()),
            other => self.hash(other.to_string().as_bytes()),
        };
        *value = Value::String(hashed);
    }

    fn hash(&self, bytes: &[u8]) -> String {
        let tag = hmac::sign(&self.key, bytes);
        let hex: String = tag.as_ref()[..16].iter().map(|byte| format!("{byte:02x}")).collect();
        format!("hmac-sha256:{hex}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secret_review(data: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Secret"},
            "object": {"kind": "Secret", "metadata": {"name": "s"}, "data": data.clone(), "stringData": {"k": "plain"}},
            "oldObject": {"kind": "Secret", "metadata": {"name": "s"}, "data": data},
        }})
    }

    #[test]
    fn a_secrets_values_are_unreadable_and_equal_values_stay_equal() {
        let redactor = Redactor::new(b"key", &[]);
        let mut review = secret_review(json!({"password": "aHVudGVyMg==", "same": "aHVudGVyMg=="}));
        assert!(redactor.review(&mut review));
        let text = review.to_string();
        assert!(!text.contains("aHVudGVyMg==") && !text.contains("plain"), "{text}");
        let data = &review["request"]["object"]["data"];
        assert_eq!(data["password"], data["same"]);
        assert_eq!(data["password"], review["request"]["oldObject"]["data"]["password"]);
        assert!(data["password"].as_str().unwrap().starts_with("hmac-sha256:"));
        // Another key, another hash.
        let mut again = secret_review(json!({"password": "aHVudGVyMg=="}));
        Redactor::new(b"other", &[]).review(&mut again);
        assert_ne!(again["request"]["object"]["data"]["password"], data["password"]);
        // Names and metadata stay.
        assert_eq!(review["request"]["object"]["metadata"]["name"], "s");
    }

    #[test]
    fn other_kinds_are_kept_as_they_are() {
        let redactor = Redactor::new(b"key", &[]);
        let mut review = secret_review(json!({"a": "b"}));
        review["request"]["kind"]["kind"] = json!("ConfigMap");
        let before = review.clone();
        assert!(!redactor.review(&mut review));
        assert_eq!(review, before);
        // A Secret-named kind of another group is not a Secret.
        review["request"]["kind"] = json!({"group": "example.com", "version": "v1", "kind": "Secret"});
        assert!(!redactor.review(&mut review));
    }

    #[test]
    fn a_patch_writing_a_secrets_values_is_redacted() {
        let redactor = Redactor::new(b"key", &[]);
        let mut patch = json!([
            {"op": "add", "path": "/data/token", "value": "c2VjcmV0"},
            {"op": "add", "path": "/stringData", "value": {"k": "plain"}},
            {"op": "replace", "path": "", "value": {"data": {"x": "eHh4"}}},
            {"op": "add", "path": "/metadata/labels/team", "value": "platform"},
            {"op": "add", "path": "/dataset", "value": "kept"},
        ]);
        redactor.patch(&mut patch, true);
        let text = patch.to_string();
        for secret in ["c2VjcmV0", "plain", "eHh4"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(patch[3]["value"], "platform");
        assert_eq!(patch[4]["value"], "kept");
        let mut annotations = std::collections::BTreeMap::from([
            (
                "patch.webhook.admission.k8s.io/round_0_index_0".to_owned(),
                json!({"configuration": "c", "webhook": "w", "patch": [{"op": "add", "path": "/data/a", "value": "c2VjcmV0"}], "patchType": "JSONPatch"}).to_string(),
            ),
            // As the answer carries it.
            (
                "patch.webhook.admission.k8s.io_round_1_index_0".to_owned(),
                json!({"configuration": "c", "webhook": "w", "patch": [{"op": "add", "path": "/data/b", "value": "c2VjcmV0"}], "patchType": "JSONPatch"}).to_string(),
            ),
            ("mutation.webhook.admission.k8s.io/round_0_index_0".to_owned(), "{\"mutated\":true}".to_owned()),
        ]);
        redactor.annotations(&mut annotations, true);
        let text = format!("{annotations:?}");
        assert!(!text.contains("c2VjcmV0") && text.contains("mutated"), "{text}");
    }

    /// The values at the pointers are hashed in any review, in the object, the old object and
    /// every patch operation writing at, under or above them; equal values stay equal.
    #[test]
    fn values_at_the_pointers_are_unreadable_in_objects_and_patches() {
        let pointers = ["/spec/containers/0/env".to_owned(), "/metadata/annotations/team~1token".to_owned()];
        let redactor = Redactor::new(b"key", &pointers);
        let pod = |env: &str| {
            json!({"metadata": {"name": "p", "annotations": {"team/token": "t0ken", "other": "kept"}},
                   "spec": {"containers": [{"name": "c", "env": [{"name": "PASSWORD", "value": env}]}]}})
        };
        let mut review = json!({"request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "object": pod("hunter2"), "oldObject": pod("hunter2")}});
        assert!(!redactor.review(&mut review), "not a Secret");
        let text = review.to_string();
        assert!(!text.contains("hunter2") && !text.contains("t0ken"), "{text}");
        let request = &review["request"];
        assert!(request["object"]["spec"]["containers"][0]["env"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:"));
        assert_eq!(
            request["object"]["spec"]["containers"][0]["env"],
            request["oldObject"]["spec"]["containers"][0]["env"]
        );
        assert_eq!(request["object"]["spec"]["containers"][0]["name"], "c");
        assert_eq!(request["object"]["metadata"]["annotations"]["other"], "kept");

        let mut patch = json!([
            {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "TOKEN", "value": "under"}},
            {"op": "replace", "path": "/spec/containers/0/env", "value": [{"name": "A", "value": "at"}]},
            {"op": "add", "path": "/spec/containers", "value": [{"name": "c", "env": [{"value": "above"}]}]},
            {"op": "replace", "path": "", "value": pod("whole")},
            {"op": "add", "path": "/spec/containers/1/env", "value": "elsewhere"},
        ]);
        redactor.patch(&mut patch, false);
        let text = patch.to_string();
        for secret in ["under", "\"at\"", "above", "whole", "t0ken"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(patch[2]["value"][0]["name"], "c", "only the pointer's part of a value above it");
        assert_eq!(patch[4]["value"], "elsewhere", "another container's env is not at the pointer");
        let mut annotations = std::collections::BTreeMap::from([(
            "patch.webhook.admission.k8s.io/round_0_index_0".to_owned(),
            json!({"patch": [{"op": "add", "path": "/spec/containers/0/env", "value": "in-annotation"}]})
                .to_string(),
        )]);
        redactor.annotations(&mut annotations, false);
        assert!(!format!("{annotations:?}").contains("in-annotation"), "{annotations:?}");
    }
}
