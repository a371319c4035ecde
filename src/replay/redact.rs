//! The recording's redaction, applied to the candidate's side: the values a candidate's patch
//! writes at the recording's `redactPointers` (each record says which it was made with, in its
//! `world`) and, on a Secret's review, under `data` or `stringData`, are hashed with the
//! recording's key (`DIR/.key`) exactly as `src/recording/redact.rs` hashed the recorded
//! patch's, so the two patches compare value for value and no value is ever shown. Without the key (a recording
//! copied without it) such a value cannot be compared: it becomes [`NO_KEY`], and the
//! difference says it depends on a redacted value.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ring::hmac;
use serde_json::Value;

use super::compare::REDACTED;

/// What a value written under a Secret's `data` becomes when the recording's key is not at hand.
pub(crate) const NO_KEY: &str = "hmac-sha256:(the recording's key is not readable)";
/// The key's file in a recording directory, and its length (src/recording/writer.rs).
const KEY_FILE: &str = ".key";
const KEY_BYTES: usize = 32;

/// The keys of the directories a recording's files are in.
#[derive(Default)]
pub(crate) struct Keys(HashMap<PathBuf, hmac::Key>);

impl Keys {
    /// The key of each file's directory, where one can be read.
    pub(crate) fn of(files: &[PathBuf]) -> Self {
        let mut keys = HashMap::new();
        for file in files {
            let dir = directory(file);
            if keys.contains_key(&dir) {
                continue;
            }
            if let Ok(key) = std::fs::read(dir.join(KEY_FILE)) {
                if key.len() == KEY_BYTES {
                    keys.insert(dir, hmac::Key::new(hmac::HMAC_SHA256, &key));
                }
            }
        }
        Keys(keys)
    }

    /// The key of `file`'s recording.
    pub(crate) fn of_file(&self, file: &Path) -> Option<&hmac::Key> {
        self.0.get(&directory(file))
    }
}

fn directory(file: &Path) -> PathBuf {
    file.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Whether `review` (an AdmissionReview) is about a core Secret, as the recorder decides it.
pub(crate) fn is_secret(review: &Value) -> bool {
    let kind = &review["request"]["kind"];
    kind["group"].as_str().unwrap_or_default().is_empty() && kind["kind"] == "Secret"
}

/// The values `patch` (a JSON Patch) writes at the recording's `pointers` and, with `secret`,
/// under a Secret's `data` or `stringData`, hashed as the recorder hashed them.
pub(crate) fn patch(patch: &mut Value, key: Option<&hmac::Key>, pointers: &[String], secret: bool) {
    let redact = &mut |value: &mut Value| hash(value, key);
    if let Value::Array(operations) = patch {
        for operation in operations.iter_mut() {
            crate::recording::redact::values_at_pointers(operation, pointers, redact);
        }
    }
    if secret {
        crate::recording::redact::secret_values_written(patch, redact);
    }
}

/// One value, by its characters if a string, else by its JSON text: `hmac-sha256:` and the
/// first 16 bytes of the keyed hash in hex.
fn hash(value: &mut Value, key: Option<&hmac::Key>) {
    let Some(key) = key else {
        *value = Value::String(NO_KEY.to_owned());
        return;
    };
    let tag = match &*value {
        Value::String(text) => hmac::sign(key, text.as_bytes()),
        other => hmac::sign(key, other.to_string().as_bytes()),
    };
    let hex: String = tag.as_ref()[..16].iter().map(|byte| format!("{byte:02x}")).collect();
    *value = Value::String(format!("{REDACTED}{hex}"));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_under_a_secrets_data_are_hashed_and_the_rest_kept() {
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"key");
        let mut written = json!([
            {"op": "add", "path": "/metadata/labels/a", "value": "kept"},
            {"op": "add", "path": "/data/token", "value": "c2VjcmV0"},
            {"op": "replace", "path": "/stringData", "value": {"k": "plain", "n": 1}},
            {"op": "add", "path": "/dataset", "value": "kept too"},
            {"op": "remove", "path": "/data/old"},
        ]);
        patch(&mut written, Some(&key), &[], true);
        let text = written.to_string();
        assert!(!text.contains("c2VjcmV0") && !text.contains("plain"), "{text}");
        assert_eq!(written[0]["value"], "kept");
        assert_eq!(written[3]["value"], "kept too");
        let token = written[1]["value"].as_str().unwrap();
        assert!(token.starts_with(REDACTED) && token.len() == REDACTED.len() + 32, "{token}");
        // The same value, the same hash; another key, another.
        let mut again = json!([{"op": "add", "path": "/data/x", "value": "c2VjcmV0"}]);
        patch(&mut again, Some(&key), &[], true);
        assert_eq!(again[0]["value"], written[1]["value"]);
        let mut other = json!([{"op": "add", "path": "/data/x", "value": "c2VjcmV0"}]);
        patch(&mut other, Some(&hmac::Key::new(hmac::HMAC_SHA256, b"other")), &[], true);
        assert_ne!(other[0]["value"], written[1]["value"]);
        // Without the key nothing is shown either.
        let mut unkeyed = json!([{"op": "add", "path": "/", "value": {"data": {"a": "c2VjcmV0"}}}]);
        patch(&mut unkeyed, None, &[], true);
        assert_eq!(unkeyed[0]["value"]["data"]["a"], NO_KEY);
    }

    #[test]
    fn values_at_the_recordings_pointers_are_hashed_as_the_recorder_hashed_them() {
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"key");
        let pointers = ["/spec/token".to_owned()];
        let mut written = json!([
            {"op": "add", "path": "/spec/token", "value": "plain"},
            {"op": "add", "path": "/spec", "value": {"token": "plain", "other": "kept"}},
            {"op": "add", "path": "/spec/other", "value": "kept"},
        ]);
        patch(&mut written, Some(&key), &pointers, false);
        assert!(written[0]["value"].as_str().unwrap().starts_with(REDACTED));
        assert_eq!(written[1]["value"]["token"], written[0]["value"]);
        assert_eq!(written[1]["value"]["other"], "kept");
        assert_eq!(written[2]["value"], "kept");
        // The recorder's own redaction of the same patch gives the same hashes.
        let recorder = crate::recording::redact::Redactor::new(b"key", &pointers);
        let mut recorded = json!([{"op": "add", "path": "/spec/token", "value": "plain"}]);
        recorder.patch(&mut recorded, false);
        assert_eq!(recorded[0]["value"], written[0]["value"]);
        // Not a Secret: its `data` is not touched.
        let mut data = json!([{"op": "add", "path": "/data/x", "value": "v"}]);
        patch(&mut data, Some(&key), &pointers, false);
        assert_eq!(data[0]["value"], "v");
    }

    #[test]
    fn the_key_is_found_beside_the_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), [7u8; KEY_BYTES]).unwrap();
        let file = dir.path().join("reviews-1.jsonl");
        let keys = Keys::of(std::slice::from_ref(&file));
        assert!(keys.of_file(&file).is_some());
        assert!(keys.of_file(Path::new("/elsewhere/reviews-1.jsonl")).is_none());
        assert!(is_secret(&json!({"request": {"kind": {"group": "", "kind": "Secret"}}})));
        assert!(!is_secret(&json!({"request": {"kind": {"group": "example.com", "kind": "Secret"}}})));
    }
}
