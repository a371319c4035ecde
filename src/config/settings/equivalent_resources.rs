//! The `GatewayConfig`'s `equivalentResources`: custom resources served at several versions,
//! for `matchPolicy: Equivalent` (src/config/equivalence.rs). Each entry is checked as the API
//! server checks the CRD fields it names; every problem is a finding at its path.

use serde::Deserialize;

use super::super::equivalence::{self, CustomResource};
use super::super::Finding;

/// One `equivalentResources` entry as written; checked by [`equivalent_resources`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct EquivalentResource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    versions: Vec<String>,
}

/// The `equivalentResources` entries, each checked; every problem is a finding at its path.
pub(super) fn equivalent_resources(
    entries: &[EquivalentResource],
    findings: &mut Vec<Finding>,
) -> Vec<CustomResource> {
    let mut found = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("equivalentResources[{i}]");
        let before = findings.len();
        let mut error = |field: String, message: String| findings.push(Finding::error(field, message));
        let name = |value: &str,
                    field: &str,
                    check: fn(&str) -> Option<&'static str>,
                    error: &mut dyn FnMut(String, String)| {
            if value.is_empty() {
                error(format!("{at}.{field}"), "Required value".into());
            } else if let Some(why) = check(value) {
                error(format!("{at}.{field}"), format!("Invalid value: {value:?}: {why}"));
            }
        };
        let built_in = equivalence::is_built_in(&entry.group, &entry.resource);
        if !built_in {
            name(&entry.group, "group", check_group, &mut error);
        }
        name(&entry.resource, "resource", check_resource, &mut error);
        name(&entry.kind, "kind", check_kind, &mut error);
        if entry.versions.is_empty() {
            error(format!("{at}.versions"), "Required value: the versions served, at least two".into());
        } else if entry.versions.len() == 1 {
            error(
                format!("{at}.versions"),
                format!("Invalid value: {:?}: at least two versions must be listed", entry.versions),
            );
        }
        for (j, version) in entry.versions.iter().enumerate() {
            if version.is_empty() {
                error(format!("{at}.versions[{j}]"), "Required value".into());
            } else if let Some(why) = check_version(version) {
                error(format!("{at}.versions[{j}]"), format!("Invalid value: {version:?}: {why}"));
            } else if entry.versions[..j].contains(version) {
                error(format!("{at}.versions[{j}]"), format!("Duplicate value: {version:?}"));
            }
        }
        let key = (entry.group.as_str(), entry.resource.as_str());
        if built_in {
            error(
                at.clone(),
                format!(
                    "Invalid value: \"{}.{}\": a built-in resource, whose equivalent versions the gateway knows",
                    key.1, key.0
                ),
            );
        } else if seen.contains(&key) {
            error(at.clone(), format!("Duplicate value: \"{}.{}\"", key.1, key.0));
        }
        seen.push(key);
        if findings.len() == before {
            found.push(CustomResource {
                group: entry.group.clone(),
                resource: entry.resource.clone(),
                kind: entry.kind.clone(),
                versions: entry.versions.clone(),
            });
        }
    }
    found
}

/// A CRD's group: a lowercase DNS subdomain with at least one dot.
fn check_group(group: &str) -> Option<&'static str> {
    if !is_dns_subdomain(group) {
        Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    } else if !group.contains('.') {
        Some("should be a domain with at least one dot")
    } else {
        None
    }
}

/// A resource's plural name: a lowercase DNS label.
fn check_resource(resource: &str) -> Option<&'static str> {
    (!is_dns_label(resource)).then_some("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")
}

/// A version: a DNS label starting with a letter, as the CRD's `spec.versions[].name`.
fn check_version(version: &str) -> Option<&'static str> {
    (!is_dns_label(version) || !version.starts_with(|c: char| c.is_ascii_lowercase()))
        .then_some("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character")
}

/// A kind: letters and digits, starting with a letter.
fn check_kind(kind: &str) -> Option<&'static str> {
    (!kind.starts_with(|c: char| c.is_ascii_alphabetic()) || !kind.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some("must consist of ASCII letters and digits, starting with a letter")
}

pub(super) fn is_dns_label(text: &str) -> bool {
    text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub(super) fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}
