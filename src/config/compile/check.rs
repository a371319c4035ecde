//! What compiling starts from: the objects read from the inputs, the API server's defaults
//! applied (`defaults.rs`) and validated as it validates on create (`validate.rs`), the
//! gateway's own annotations read (`mode.rs`), names unique per kind, and the one
//! `GatewayConfig`'s settings (`settings.rs`); every problem named by file and object.

use std::collections::HashMap;
use std::path::PathBuf;

use super::super::load::{self, Objects};
use super::super::manifest::{WebhookConfiguration, WebhookKind};
use super::super::mode::Mode;
use super::super::policy::{Compiled, Policies};
use super::super::settings::{self, Settings};
use super::super::{defaults, equivalence, validate, ConfigError, Finding, Problem, Severity};
use super::Inputs;

/// The objects of `inputs`, defaulted and validated, with the settings of their
/// `GatewayConfig` and the cluster's resources, and the policies compiled; or every problem,
/// when one is an error.
pub(super) fn inputs(inputs: &Inputs) -> Result<(Objects, Settings, Compiled, Vec<Problem>), ConfigError> {
    let mut problems = Vec::new();
    let mut objects = load::read_sources(&inputs.paths, &inputs.texts, &mut problems);
    let policies = check(&mut objects, &mut problems);
    let mut settings = settings(&objects, &mut problems);
    for resource in &inputs.resources {
        let listed = settings
            .equivalent_resources
            .iter()
            .any(|r| r.group == resource.group && r.resource == resource.resource);
        if !listed && !equivalence::is_built_in(&resource.group, &resource.resource) {
            settings.equivalent_resources.push(resource.clone());
        }
    }
    if !inputs.live_namespaces {
        namespaces_needed(&objects, &mut problems);
    }
    if problems.iter().any(|p| p.severity == Severity::Error) {
        return Err(ConfigError { problems });
    }
    Ok((objects, settings, policies, problems))
}

/// The one `GatewayConfig`'s settings (defaults without one); several are an error.
fn settings(objects: &Objects, problems: &mut Vec<Problem>) -> Settings {
    let mut found = objects.settings.iter();
    let Some((source, config)) = found.next() else { return Settings::default() };
    let object = format!("{} {:?}", settings::KIND, config.metadata.name);
    for (other, config) in found {
        problems.push(Problem {
            severity: Severity::Error,
            file: other.file.clone(),
            object: Some(format!("{} {:?}", settings::KIND, config.metadata.name)),
            webhook: None,
            field: None,
            message: format!(
                "Duplicate value: only one {} may be configured; the first is in {}",
                settings::KIND,
                source.file.display()
            ),
        });
    }
    let base = source.file.parent().unwrap_or(std::path::Path::new("."));
    match (config.settings(), config.openapi_documents(base)) {
        (Ok(mut settings), Ok(documents)) => {
            settings.openapi_documents = std::sync::Arc::new(documents);
            settings
        }
        (settings, documents) => {
            let findings = settings.err().into_iter().chain(documents.err()).flatten();
            problems.extend(findings.map(|finding| Problem::in_object(&source.file, &object, finding)));
            Settings::default()
        }
    }
}

/// Without a single Namespace object, every namespaced request to a webhook with a non-empty
/// namespaceSelector fails "not found": worth a warning at load.
fn namespaces_needed(objects: &Objects, problems: &mut Vec<Problem>) {
    if !objects.namespaces.is_empty() {
        return;
    }
    for (source, config) in &objects.configurations {
        for (i, hook) in config.webhooks.iter().enumerate() {
            let selector = hook.namespace_selector.as_ref();
            if selector.is_some_and(|s| !s.match_labels.is_empty() || !s.match_expressions.is_empty()) {
                problems.push(Problem {
                    severity: Severity::Warning,
                    file: source.file.clone(),
                    object: Some(format!("{} {:?}", config.kind.kind_name(), config.metadata.name)),
                    webhook: Some(hook.name.clone()),
                    field: Some(format!("webhooks[{i}].namespaceSelector")),
                    message: "no Namespace objects are configured: every namespaced request this webhook's rules match will be rejected with 404 \"namespaces ... not found\"; list the Namespaces (v1 Namespace objects with their labels) in the configuration".into(),
                });
            }
        }
    }
}

/// Reads, defaults and validates without compiling: the manifests as the API server would
/// store them (Namespaces with their `kubernetes.io/metadata.name` label), and every problem.
pub(crate) fn read_checked(paths: &[PathBuf]) -> (Objects, Settings, Compiled, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut objects = load::read_paths(paths, &mut problems);
    let policies = check(&mut objects, &mut problems);
    let settings = settings(&objects, &mut problems);
    (objects, settings, policies, problems)
}

/// Defaults and validates every object, adding the problems found; compiles the policies.
fn check(objects: &mut Objects, problems: &mut Vec<Problem>) -> Compiled {
    let mut seen: HashMap<(WebhookKind, String), PathBuf> = HashMap::new();
    for (source, config) in &mut objects.configurations {
        defaults::apply(config);
        let object = format!("{} {:?}", config.kind.kind_name(), config.metadata.name);
        let problem = |finding: Finding| Problem::in_object(&source.file, &object, finding);
        problems.extend(validate::configuration(config).into_iter().map(problem));
        problems.extend(gateway_annotations(config).into_iter().map(problem));
        if let Some(first) = seen.insert((config.kind, config.metadata.name.clone()), source.file.clone()) {
            problems.push(problem(Finding::error(
                "metadata.name",
                format!("Duplicate value: {:?}: also defined in {}", config.metadata.name, first.display()),
            )));
        }
    }
    let mut seen_namespaces: HashMap<String, PathBuf> = HashMap::new();
    for (source, namespace) in &mut objects.namespaces {
        namespace
            .labels
            .entry("kubernetes.io/metadata.name".into())
            .or_insert_with(|| namespace.name.clone());
        let object = format!("Namespace {:?}", namespace.name);
        let mut findings = validate::namespace(namespace);
        if let Some(first) = seen_namespaces.insert(namespace.name.clone(), source.file.clone()) {
            findings.push(Finding::error(
                "metadata.name",
                format!("Duplicate value: {:?}: also defined in {}", namespace.name, first.display()),
            ));
        }
        problems
            .extend(findings.into_iter().map(|finding| Problem::in_object(&source.file, &object, finding)));
    }
    Policies::compile(std::mem::take(&mut objects.policy), problems)
}

/// The gateway's own annotations (`config/mode.rs`).
fn gateway_annotations(config: &WebhookConfiguration) -> Vec<Finding> {
    Mode::of(config).err().unwrap_or_default()
}
