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

use super::manifest::{
    ApiVersion, Namespace, ObjectMeta, WebhookConfiguration, WebhookConfigurationBody, WebhookKind,
};
use super::policy;
use super::settings::{self, GatewayConfig};
use super::{Problem, Severity};
use strict::strict;

pub(super) mod strict;

const ADMISSIONREGISTRATION_V1: &str = "admissionregistration.k8s.io/v1";
const ADMISSIONREGISTRATION_V1BETA1: &str = "admissionregistration.k8s.io/v1beta1";
const ADMISSIONREGISTRATION_V1ALPHA1: &str = "admissionregistration.k8s.io/v1alpha1";
const CONFIG_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];
/// A configuration file larger than this is refused rather than read.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Where an object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    pub(crate) file: PathBuf,
}

/// Every object found under the configured paths, in file order.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pub(crate) configurations: Vec<(Source, WebhookConfiguration)>,
    pub(crate) namespaces: Vec<(Source, Namespace)>,
    /// `GatewayConfig` objects (more than one is an error).
    pub(crate) settings: Vec<(Source, GatewayConfig)>,
    /// ValidatingAdmissionPolicies, their bindings, and every object of another kind (a
    /// parameter if a policy's `paramKind` names it, else refused when the policies compile).
    pub(crate) policy: policy::Documents,
    /// Hash of the file names and contents: unchanged input, unchanged fingerprint.
    pub(crate) fingerprint: u64,
    /// Documents found in each file (and text), empty ones included: the reload refuses a
    /// source that held documents and is now empty (a write in progress, not an intent).
    pub(crate) documents: std::collections::BTreeMap<PathBuf, usize>,
}

/// A configuration that does not come from a file (a ConfigMap's key, in cluster mode): named
/// like a file in every problem.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Text {
    /// What problems call it, e.g. `configmap/NAMESPACE/NAME/KEY`.
    pub(crate) name: PathBuf,
    pub(crate) text: String,
}

/// Reads every path; problems go to `problems`, the objects that did parse are returned.
pub(crate) fn read_paths(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Objects {
    read_sources(paths, &[], problems)
}

/// Reads every path, then every text (in their order); as [`read_paths`].
pub(crate) fn read_sources(paths: &[PathBuf], texts: &[Text], problems: &mut Vec<Problem>) -> Objects {
    let mut objects = Objects::default();
    let mut hasher = DefaultHasher::new();
    let mut read = |file: PathBuf, text: &str, objects: &mut Objects, problems: &mut Vec<Problem>| {
        file.hash(&mut hasher);
        text.hash(&mut hasher);
        let source = Source { file };
        yaml11_booleans(&source.file, text, problems);
        match parse_documents(&source.file, text) {
            Ok(documents) => {
                objects.documents.insert(source.file.clone(), documents.len());
                for (index, document) in documents.into_iter().enumerate() {
                    let at = Document { source: &source, index };
                    collect(&at, document, objects, problems);
                }
            }
            Err(message) => problems.push(file_problem(&source.file, message)),
        }
    };
    for file in expand(paths, problems) {
        match read_file(&file) {
            Ok(text) => read(file, &text, &mut objects, problems),
            Err(message) => problems.push(file_problem(&file, message)),
        }
    }
    for text in texts {
        read(text.name.clone(), &text.text, &mut objects, problems);
    }
    objects.fingerprint = hasher.finish();
    objects
}

/// The same fingerprint [`read_sources`] computes, without parsing: cheap enough to poll.
pub(crate) fn fingerprint(paths: &[PathBuf], texts: &[Text]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for file in expand(paths, &mut Vec::new()) {
        if let Ok(text) = read_file(&file) {
            file.hash(&mut hasher);
            text.hash(&mut hasher);
        }
    }
    for text in texts {
        text.name.hash(&mut hasher);
        text.text.hash(&mut hasher);
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

/// The scalars YAML 1.1 reads as booleans and YAML 1.2 as strings.
const YAML11_BOOLEANS: [&str; 16] =
    ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"];

/// Warns of every unquoted YAML 1.1 boolean (`yes`, `on`, `off`…) in a YAML file: the gateway
/// reads YAML 1.2, where it is the string `yes`, but `kubectl` reads YAML 1.1, where it is a
/// boolean that a string field (a label value, a name) refuses. The same file would load here
/// and be refused by the API server.
fn yaml11_booleans(file: &Path, text: &str, problems: &mut Vec<Problem>) {
    if file.extension().and_then(|e| e.to_str()) == Some("json") {
        return;
    }
    for (number, line) in text.lines().enumerate() {
        // What precedes a comment (a `#` after a blank or at the start), roughly: quoted
        // scalars are skipped below, so a `#` inside one only hides the rest of its line.
        let content = match line.find(" #") {
            Some(at) => &line[..at],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        let mut in_quotes: Option<char> = None;
        let mut token_start = None;
        let mut tokens = Vec::new();
        for (i, c) in content.char_indices() {
            match in_quotes {
                Some(q) if c == q => in_quotes = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => in_quotes = Some(c),
                None if c.is_alphanumeric() => {
                    token_start.get_or_insert(i);
                }
                None => {
                    if let Some(start) = token_start.take() {
                        tokens.push((start, i));
                    }
                }
            }
        }
        if let Some(start) = token_start {
            tokens.push((start, content.len()));
        }
        for (start, end) in tokens {
            let word = &content[start..end];
            if !YAML11_BOOLEANS.contains(&word) {
                continue;
            }
            // A value: after `: `, `- `, `[`, `{`… and before the end, `,`, `]` or `}`.
            let before = content[..start].trim_end();
            let after = content[end..].trim_start();
            let is_value = (before.ends_with(':')
                || before.ends_with('-')
                || before.ends_with('[')
                || before.ends_with(',')
                || before.ends_with('{'))
                && (after.is_empty()
                    || after.starts_with(',')
                    || after.starts_with(']')
                    || after.starts_with('}'));
            // A key (`on: …`) is read as a boolean key by YAML 1.1 as well.
            let is_key = after.starts_with(':')
                && (before.is_empty()
                    || before.ends_with('-')
                    || before.ends_with('{')
                    || before.ends_with(','));
            if is_value || is_key {
                problems.push(Problem {
                    severity: Severity::Warning,
                    file: file.to_path_buf(),
                    object: None,
                    webhook: None,
                    field: None,
                    message: format!(
                        "line {}: unquoted {word:?} is a string here (YAML 1.2) but the boolean {} for kubectl (YAML 1.1), which the API server refuses where a string belongs: quote it (\"{word}\") so both read it alike",
                        number + 1,
                        matches!(word.chars().next(), Some('y' | 'Y') ) || word.eq_ignore_ascii_case("on")
                    ),
                });
            }
        }
    }
}

/// Where a document sits: its file and its position there (counting from 0).
#[derive(Clone, Copy)]
struct Document<'a> {
    source: &'a Source,
    index: usize,
}

fn collect(at: &Document<'_>, document: Value, objects: &mut Objects, problems: &mut Vec<Problem>) {
    let source = at.source;
    let api_version = document.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_owned();
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("").to_owned();
    let name = document.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_owned();
    // Named as kubectl would; a document without kind or name by its position in the file.
    let object = match (kind.is_empty(), name.is_empty()) {
        (false, false) => format!("{kind} {name:?}"),
        (false, true) => format!("{kind} (document {}, no metadata.name)", at.index),
        (true, _) => format!("document {}", at.index),
    };
    let problem = |field: Option<String>, webhook: Option<String>, message: String| Problem {
        severity: Severity::Error,
        file: source.file.clone(),
        object: Some(object.clone()),
        webhook,
        field,
        message,
    };
    if !document.is_object() {
        problems.push(problem(
            None,
            None,
            "not a Kubernetes object: expected a mapping with apiVersion and kind".into(),
        ));
        return;
    }
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "List") => match document.get("items").and_then(Value::as_array) {
            Some(items) => {
                for item in items {
                    collect(at, item.clone(), objects, problems);
                }
            }
            None => problems.push(problem(
                Some("items".into()),
                None,
                "Required value: a List needs items".into(),
            )),
        },
        (
            ADMISSIONREGISTRATION_V1 | ADMISSIONREGISTRATION_V1BETA1,
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => {
            let webhook_kind =
                if kind.starts_with("Mutating") { WebhookKind::Mutating } else { WebhookKind::Validating };
            let version =
                if api_version == ADMISSIONREGISTRATION_V1 { ApiVersion::V1 } else { ApiVersion::V1beta1 };
            let found = strict::<WebhookConfigurationBody>(&document);
            if version == ApiVersion::V1beta1 {
                problems.push(Problem {
                    severity: Severity::Warning,
                    ..problem(Some("apiVersion".into()), None, V1BETA1_WARNING.into())
                });
            }
            match found {
                Ok(body) => objects.configurations.push((
                    source.clone(),
                    WebhookConfiguration {
                        kind: webhook_kind,
                        version,
                        metadata: body.metadata,
                        webhooks: body.webhooks,
                    },
                )),
                Err(errors) => problems.extend(errors.into_iter().map(|(field, message)| {
                    let webhook = webhook_at(&document, &field);
                    problem(Some(field), webhook, message)
                })),
            }
        }
        ("v1", "Namespace") => match document.get("metadata").map(ObjectMeta::deserialize) {
            Some(Ok(meta)) => {
                objects.namespaces.push((source.clone(), Namespace { name: meta.name, labels: meta.labels }))
            }
            Some(Err(error)) => problems.push(problem(Some("metadata".into()), None, error.to_string())),
            None => problems.push(problem(Some("metadata.name".into()), None, "Required value".into())),
        },
        (settings::API_VERSION, settings::KIND) => match strict::<GatewayConfig>(&document) {
            Ok(config) => objects.settings.push((source.clone(), config)),
            Err(errors) => problems
                .extend(errors.into_iter().map(|(field, message)| problem(Some(field), None, message))),
        },
        (
            ADMISSIONREGISTRATION_V1 | ADMISSIONREGISTRATION_V1BETA1,
            "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding",
        ) => {
            let found = policy::Found { file: source.file.clone(), object, value: document };
            match kind.as_str() {
                "ValidatingAdmissionPolicy" => objects.policy.policies.push(found),
                _ => objects.policy.bindings.push(found),
            }
        }
        (
            ADMISSIONREGISTRATION_V1 | ADMISSIONREGISTRATION_V1BETA1 | ADMISSIONREGISTRATION_V1ALPHA1,
            "MutatingAdmissionPolicy" | "MutatingAdmissionPolicyBinding",
        ) => {
            let found = policy::Found { file: source.file.clone(), object, value: document };
            match kind.as_str() {
                "MutatingAdmissionPolicy" => objects.policy.mutating_policies.push(found),
                _ => objects.policy.mutating_bindings.push(found),
            }
        }
        ("", _) | (_, "") => problems.push(problem(
            None,
            None,
            "not a Kubernetes object: apiVersion and kind are required".into(),
        )),
        // A parameter object if a policy's paramKind names its kind; `Policies::compile` says.
        _ => objects.policy.others.push(policy::Found { file: source.file.clone(), object, value: document }),
    }
}

/// Loaded, but said: the object's meaning depends on defaults no current API server applies.
const V1BETA1_WARNING: &str = "admissionregistration.k8s.io/v1beta1 is no longer served by Kubernetes (removed in 1.22): loaded with the defaults the API server applied to v1beta1 (failurePolicy Ignore, matchPolicy Exact, sideEffects Unknown, timeoutSeconds 30, admissionReviewVersions [v1beta1]); to convert, set apiVersion to admissionregistration.k8s.io/v1 and write those fields out explicitly";

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
    fn unknown_fields_are_named_and_other_kinds_kept_for_the_policies() {
        let (objects, problems, dir) = read(&[
            ("a.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"),
            ("b.yaml", &HOOK.replace("NAME", "b").replace("sideEffects", "sideEffect")),
        ]);
        assert!(objects.configurations.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].object.as_deref(), Some("ValidatingWebhookConfiguration \"b\""));
        assert_eq!(problems[0].webhook.as_deref(), Some("a.example.com"));
        assert_eq!(problems[0].field.as_deref(), Some("webhooks[0].sideEffect"));
        assert_eq!(problems[0].message, r#"unknown field "sideEffect" (did you mean "sideEffects"?)"#);
        // A parameter if a policy names its kind; refused by `Policies::compile` otherwise.
        let [other] = &objects.policy.others[..] else { panic!("{:?}", objects.policy) };
        assert_eq!(
            (other.file.as_path(), other.object.as_str()),
            (dir.path().join("a.yaml").as_path(), "Deployment \"web\"")
        );
    }

    #[test]
    fn every_unknown_field_of_an_object_is_named_not_only_the_first() {
        let misspelt = HOOK
            .replace("NAME", "b")
            .replace("sideEffects", "sideEffect")
            .replace("clientConfig: {url:", "clientConfig: {URL:")
            .replace("metadata:", "metdata: {}\nmetadata:");
        let (objects, problems, _dir) = read(&[("b.yaml", &misspelt)]);
        assert!(objects.configurations.is_empty());
        let found: Vec<_> =
            problems.iter().map(|p| (p.field.clone().unwrap_or_default(), p.message.clone())).collect();
        assert_eq!(
            found,
            [
                ("metdata".to_owned(), r#"unknown field "metdata" (did you mean "metadata"?)"#.to_owned()),
                (
                    "webhooks[0].clientConfig.URL".to_owned(),
                    r#"unknown field "URL" (did you mean "url"?)"#.to_owned()
                ),
                (
                    "webhooks[0].sideEffect".to_owned(),
                    r#"unknown field "sideEffect" (did you mean "sideEffects"?)"#.to_owned()
                ),
            ]
        );
        assert_eq!(problems[1].webhook.as_deref(), Some("a.example.com"));
    }

    #[test]
    fn a_document_that_is_not_an_object_is_named_by_its_position() {
        let (_, problems, dir) = read(&[(
            "a.yaml",
            "- just\n- a list\n---\nkind: Namespace\n---\napiVersion: v1\nkind: Namespace\n",
        )]);
        let named: Vec<_> = problems.iter().map(|p| p.to_string()).collect();
        let file = dir.path().join("a.yaml").display().to_string();
        assert_eq!(
            named,
            [
                format!("error: {file}: document 0: not a Kubernetes object: expected a mapping with apiVersion and kind"),
                format!("error: {file}: Namespace (document 1, no metadata.name): not a Kubernetes object: apiVersion and kind are required"),
                format!("error: {file}: Namespace (document 2, no metadata.name): metadata.name: Required value"),
            ]
        );
    }

    #[test]
    fn unquoted_yaml_1_1_booleans_are_warned_of_with_their_line() {
        let text = "a: yes\nb: \"yes\"\nc: [on, 'off', x]\nd: {k: No}\n# e: yes\nf: yesterday # on\n- n\nOff: 1\ng: nothing\n";
        let mut problems = Vec::new();
        yaml11_booleans(Path::new("fleet.yaml"), text, &mut problems);
        let found: Vec<&str> = problems.iter().map(|p| p.message.split(':').next().unwrap()).collect();
        assert_eq!(found, ["line 1", "line 3", "line 4", "line 7", "line 8"], "{problems:#?}");
        assert!(problems.iter().all(|p| p.severity == Severity::Warning));
        assert!(
            problems[0].message.contains("unquoted \"yes\" is a string here (YAML 1.2) but the boolean true"),
            "{}",
            problems[0].message
        );
        assert!(problems[2].message.contains("the boolean false"), "{}", problems[2].message);
        let mut none = Vec::new();
        yaml11_booleans(Path::new("fleet.json"), "{\"a\": \"yes\"}", &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn v1beta1_configurations_load_with_a_warning_saying_how_to_convert() {
        let (objects, problems, _dir) =
            read(&[("a.yaml", &HOOK.replace("NAME", "old").replace("k8s.io/v1\n", "k8s.io/v1beta1\n"))]);
        assert_eq!(objects.configurations.len(), 1);
        assert_eq!(objects.configurations[0].1.version, ApiVersion::V1beta1);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].severity, Severity::Warning);
        assert!(problems[0]
            .message
            .contains("to convert, set apiVersion to admissionregistration.k8s.io/v1"));
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
