//! `check`: validate the configuration as the API server would, print every problem.

use std::process::ExitCode;

use serde_json::json;

use super::{exit, print_structured, CheckArgs, Output};
use crate::config::{compile, ConfigError, Problem, Severity, Snapshot};
use crate::upstream::Clients;

pub(super) fn run(args: &CheckArgs) -> ExitCode {
    let clients = Clients::default();
    let (problems, counts, schemas) = match compile::load(&args.config.paths, &clients, 1) {
        Ok(snapshot) => {
            let mut problems = snapshot.warnings.clone();
            if !args.allow_empty {
                problems.extend(empty_fleet(&snapshot, args));
            }
            let schemas: Vec<(String, Vec<String>)> = snapshot
                .settings
                .openapi_documents
                .iter()
                .map(|d| (d.source.clone(), d.api_versions.iter().cloned().collect()))
                .collect();
            (problems, Some(counts(&snapshot)), schemas)
        }
        Err(ConfigError { problems }) => (problems, None, Vec::new()),
    };
    let errors = problems.iter().filter(|p| p.severity == Severity::Error).count();
    let warnings = problems.len() - errors;
    let valid = errors == 0;
    match args.output {
        Output::Text => {
            for problem in &problems {
                println!("{problem}");
            }
            match (valid, counts) {
                (
                    true,
                    Some((mutating, validating, namespaces, (validating_policies, mutating_policies))),
                ) => {
                    let count = |n: usize, kind: &str| match n {
                        0 => String::new(),
                        1 => format!("1 {kind}AdmissionPolicy, "),
                        n => format!("{n} {kind}AdmissionPolicies, "),
                    };
                    println!(
                        "configuration is valid: {mutating} mutating and {validating} validating webhooks, {}{}{namespaces} namespaces{}",
                        count(validating_policies, "Validating"),
                        count(mutating_policies, "Mutating"),
                        if warnings > 0 { format!(", {warnings} warning(s)") } else { String::new() }
                    );
                    for (source, api_versions) in &schemas {
                        println!("schemas of {} from {source}", api_versions.join(", "));
                    }
                }
                _ => println!("configuration refused: {errors} error(s), {warnings} warning(s)"),
            }
            if !valid {
                for note in unfilled_placeholders(&problems) {
                    println!("{note}");
                }
            }
        }
        output => {
            let problems: Vec<_> = problems.iter().map(problem_json).collect();
            let (mutating, validating, namespaces, (validating_policies, mutating_policies)) =
                counts.unwrap_or_default();
            let policies = validating_policies + mutating_policies;
            print_structured(
                output,
                &json!({
                    "valid": valid,
                    "errors": errors,
                    "warnings": warnings,
                    "webhooks": {"mutating": mutating, "validating": validating},
                    "policies": policies,
                    "policiesByKind": {"validating": validating_policies, "mutating": mutating_policies},
                    "namespaces": namespaces,
                    "openAPIDocuments": schemas.iter().map(|(source, api_versions)| json!({"source": source, "apiVersions": api_versions})).collect::<Vec<_>>(),
                    "problems": problems,
                }),
            );
        }
    }
    exit::code(if valid { exit::SUCCESS } else { exit::NEGATIVE })
}

/// A note for each refused file holding `${NAME}` placeholders: a template never filled in
/// (`config/demo/fleet.yaml` is one, which `demo` fills), the likely cause of its errors.
fn unfilled_placeholders(problems: &[Problem]) -> Vec<String> {
    let mut files: Vec<&std::path::Path> =
        problems.iter().filter(|p| p.severity == Severity::Error).map(|p| p.file.as_path()).collect();
    files.sort();
    files.dedup();
    let mut notes = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let mut names: Vec<&str> = text
            .match_indices("${")
            .filter_map(|(at, _)| {
                let rest = &text[at + 2..];
                let end = rest.find('}')?;
                let name = &rest[..end];
                (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                    .then_some(&text[at..at + 3 + end])
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        if !names.is_empty() {
            notes.push(format!(
                "note: {} holds placeholders never filled in ({}): a template? (`admission-gateway demo` fills config/demo/fleet.yaml's)",
                file.display(),
                names.join(", ")
            ));
        }
    }
    notes
}

/// Webhooks (mutating, validating), namespaces, policies (validating, mutating).
fn counts(snapshot: &Snapshot) -> (usize, usize, usize, (usize, usize)) {
    let policies = (snapshot.policies.iter().count(), snapshot.mutating_policies.iter().count());
    (snapshot.mutating.len(), snapshot.validating.len(), snapshot.namespaces.len(), policies)
}

/// A configuration with no webhook and no policy at all is almost always a mistake (a wrong
/// path, an empty ConfigMap): an error unless `--allow-empty`.
fn empty_fleet(snapshot: &Snapshot, args: &CheckArgs) -> Option<Problem> {
    let empty = snapshot.mutating.is_empty()
        && snapshot.validating.is_empty()
        && snapshot.policies.is_empty()
        && snapshot.mutating_policies.is_empty();
    empty.then(|| Problem {
        severity: Severity::Error,
        file: args.config.paths.first().cloned().unwrap_or_default(),
        object: None,
        webhook: None,
        field: None,
        message: "the configuration holds no webhook (pass --allow-empty if that is meant)".into(),
    })
}

fn problem_json(problem: &Problem) -> serde_json::Value {
    json!({
        "severity": match problem.severity { Severity::Error => "error", Severity::Warning => "warning" },
        "file": problem.file.display().to_string(),
        "object": problem.object,
        "webhook": problem.webhook,
        "field": problem.field,
        "message": problem.message,
    })
}
