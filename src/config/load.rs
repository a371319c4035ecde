//! Files and directories → Kubernetes objects, with every problem named by file and object.
//!
//! A path is a file or a directory (its `.yaml`, `.yml` and `.json` files in name order, hidden
//! entries such as a ConfigMap volume's `..data` skipped). A file holds YAML (several documents
//! allowed) or JSON; each document is an object or a `v1` `List` of objects.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::manifest::{Namespace, ObjectMeta, WebhookConfiguration, WebhookConfigurationBody, WebhookKind};
use super::{Problem, Severity};

const ADMISSIONREGISTRATION_V1: &str = "admissionregistration.k8s.io/v1";
const CONFIG_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];
/// A configuration file larger than this is refused rather than read.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Where an object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub file: PathBuf,
}

/// Every object found under the configured paths, in file order.
#[derive(Debug, Default)]
pub struct Objects {
    pub configurations: Vec<(Source, WebhookConfiguration)>,
    pub namespaces: Vec<(Source, Namespace)>,
    /// Hash of the file names and contents: unchanged input, unchanged fingerprint.
    pub fingerprint: u64,
}

/// Reads every path; problems go to `problems`, the objects that did parse are returned.
pub fn read_paths(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Objects {
    let mut objects = Objects::default();
    let mut hasher = DefaultHasher::new();
    for file in expand(paths, problems) {
        let text = match read_file(&file) {
            Ok(text) => text,
            Err(message) => {
                problems.push(file_problem(&file, message));
                continue;
            }
        };
        file.hash(&mut hasher);
        text.hash(&mut hasher);
        let source = Source { file };
        match parse_documents(&source.file, &text) {
            Ok(documents) => {
                for document in documents {
                    collect(&source, document, &mut objects, problems);
                }
            }
            Err(message) => problems.push(file_problem(&source.file, message)),
        }
    }
    objects.fingerprint = hasher.finish();
    objects
}

/// The same fingerprint [`read_paths`] computes, without parsing: cheap enough to poll.
pub fn fingerprint(paths: &[PathBuf]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for file in expand(paths, &mut Vec::new()) {
        if let Ok(text) = read_file(&file) {
            file.hash(&mut hasher);
            text.hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// The files the paths name: files as given, directories expanded (not recursively).
fn expand(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        // `metadata` follows symlinks, as a mounted ConfigMap needs.
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => match std::fs::read_dir(path) {
                Ok(entries) => {
                    let mut found: Vec<PathBuf> = entries
                        .filter_map(Result::ok)
                        .map(|entry| entry.path())
                        .filter(|p| is_config_file(p))
                        .collect();
                    found.sort();
                    files.extend(found);
                }
                Err(error) => problems.push(file_problem(path, format!("cannot read directory: {error}"))),
            },
            Ok(_) => files.push(path.clone()),
            Err(error) => problems.push(file_problem(path, format!("cannot read: {error}"))),
        }
    }
    files
}

fn is_config_file(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    !hidden && CONFIG_EXTENSIONS.contains(&extension) && path.is_file()
}

fn read_file(file: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("file is {} bytes, more than the {MAX_FILE_BYTES} allowed", meta.len()));
    }
    std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))
}

/// Splits a file into JSON values: one for a JSON file, one per non-empty YAML document.
fn parse_documents(file: &Path, text: &str) -> Result<Vec<Value>, String> {
    if file.extension().and_then(|e| e.to_str()) == Some("json") {
        return serde_json::from_str(text).map(|v| vec![v]).map_err(|e| format!("invalid JSON: {e}"));
    }
    let mut documents = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("invalid YAML: {e}"))?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

fn collect(source: &Source, document: Value, objects: &mut Objects, problems: &mut Vec<Problem>) {
    let api_version = document.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_owned();
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("").to_owned();
    let name = document.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_owned();
    let object = format!("{kind} {name:?}");
    let problem = |field: Option<String>, webhook: Option<String>, message: String| Problem {
        severity: Severity::Error,
        file: source.file.clone(),
        object: Some(object.clone()),
        webhook,
        field,
        message,
    };
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "List") => match document.get("items").and_then(Value::as_array) {
            Some(items) => {
                for item in items {
                    collect(source, item.clone(), objects, problems);
                }
            }
            None => problems.push(problem(Some("items".into()), None, "Required value: a List needs items".into())),
        },
        (ADMISSIONREGISTRATION_V1, "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
            let webhook_kind = if kind.starts_with("Mutating") { WebhookKind::Mutating } else { WebhookKind::Validating };
            match serde_path_to_error::deserialize::<_, WebhookConfigurationBody>(&document) {
                Ok(body) => objects.configurations.push((
                    source.clone(),
                    WebhookConfiguration { kind: webhook_kind, metadata: body.metadata, webhooks: body.webhooks },
                )),
                Err(error) => {
                    let field = error.path().to_string();
                    let webhook = webhook_at(&document, &field);
                    problems.push(problem(Some(field), webhook, error.into_inner().to_string()));
                }
            }
        }
        ("v1", "Namespace") => match document.get("metadata").map(ObjectMeta::deserialize) {
            Some(Ok(meta)) => objects.namespaces.push((source.clone(), Namespace { name: meta.name, labels: meta.labels })),
            Some(Err(error)) => problems.push(problem(Some("metadata".into()), None, error.to_string())),
            None => problems.push(problem(Some("metadata.name".into()), None, "Required value".into())),
        },
        ("", _) | (_, "") => problems.push(problem(
            None,
            None,
            "not a Kubernetes object: apiVersion and kind are required".into(),
        )),
        ("admissionregistration.k8s.io/v1beta1", _) => problems.push(problem(
            Some("apiVersion".into()),
            None,
            "admissionregistration.k8s.io/v1beta1 is no longer served by Kubernetes: convert the object to admissionregistration.k8s.io/v1".into(),
        )),
        _ => problems.push(problem(
            None,
            None,
            format!(
                "unsupported object {api_version}, Kind={kind}: expected {ADMISSIONREGISTRATION_V1} MutatingWebhookConfiguration or ValidatingWebhookConfiguration, v1 Namespace, or a v1 List of them"
            ),
        )),
    }
}

/// The webhook's name when `field` points inside `webhooks[i]`.
fn webhook_at(document: &Value, field: &str) -> Option<String> {
    let rest = field.strip_prefix("webhooks[")?;
    let index: usize = rest.split(']').next()?.parse().ok()?;
    document.pointer(&format!("/webhooks/{index}/name"))?.as_str().map(str::to_owned)
}

fn file_problem(file: &Path, message: String) -> Problem {
    Problem {
        severity: Severity::Error,
        file: file.to_path_buf(),
        object: None,
        webhook: None,
        field: None,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(files: &[(&str, &str)]) -> (Objects, Vec<Problem>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let mut problems = Vec::new();
        let objects = read_paths(&[dir.path().to_path_buf()], &mut problems);
        (objects, problems, dir)
    }

    const HOOK: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: NAME}
webhooks:
- name: a.example.com
  clientConfig: {url: "https://127.0.0.1:1/"}
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

    #[test]
    fn multi_document_yaml_json_and_lists_in_file_name_order() {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}
        ]});
        let (objects, problems, _dir) = read(&[
            ("b.yaml", &format!("{}---\n{}", HOOK.replace("NAME", "b1"), HOOK.replace("NAME", "b2"))),
            ("a.json", &list.to_string()),
            ("c.yml", &HOOK.replace("NAME", "c")),
            (".hidden.yaml", "not: [valid"),
            ("notes.txt", "ignored"),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<_> = objects.configurations.iter().map(|(_, c)| c.metadata.name.as_str()).collect();
        assert_eq!(names, ["b1", "b2", "c"]);
        assert_eq!(objects.namespaces[0].1.labels["env"], "prod");
    }

    #[test]
    fn unknown_kinds_and_fields_are_named() {
        let (objects, problems, dir) = read(&[
            ("a.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"),
            ("b.yaml", &HOOK.replace("NAME", "b").replace("sideEffects", "sideEffect")),
        ]);
        assert!(objects.configurations.is_empty());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].file, dir.path().join("a.yaml"));
        assert!(problems[0].message.contains("apps/v1, Kind=Deployment"), "{}", problems[0]);
        assert_eq!(problems[1].object.as_deref(), Some("ValidatingWebhookConfiguration \"b\""));
        assert_eq!(problems[1].webhook.as_deref(), Some("a.example.com"));
        assert_eq!(problems[1].field.as_deref(), Some("webhooks[0].sideEffect"));
        assert!(problems[1].message.contains("unknown field `sideEffect`"), "{}", problems[1]);
    }

    #[test]
    fn broken_yaml_names_the_file_and_a_missing_path_is_an_error() {
        let (_, problems, dir) = read(&[("a.yaml", "kind: [unclosed")]);
        assert_eq!(problems[0].file, dir.path().join("a.yaml"));
        assert!(problems[0].message.starts_with("invalid YAML"), "{}", problems[0]);
        let mut problems = Vec::new();
        read_paths(&[dir.path().join("missing.yaml")], &mut problems);
        assert!(problems[0].message.starts_with("cannot read"), "{}", problems[0]);
    }

    #[test]
    fn the_fingerprint_follows_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, HOOK.replace("NAME", "a")).unwrap();
        let one = read_paths(std::slice::from_ref(&path), &mut Vec::new()).fingerprint;
        assert_eq!(one, read_paths(std::slice::from_ref(&path), &mut Vec::new()).fingerprint);
        std::fs::write(&path, HOOK.replace("NAME", "b")).unwrap();
        assert_ne!(one, read_paths(&[path], &mut Vec::new()).fingerprint);
    }
}
