//! Reading policies and bindings of one kind from what the sources held: strictly, in the
//! versions the kind is read in, the other kind's fields refused as unknown ones.

use serde_json::Value;

use super::manifest::{self, BindingObject, PolicyObject};
use super::{Finding, Found, PolicyKind, Problem, API_GROUP};
use crate::config::load::strict;
use crate::config::validate::messages::quote;

/// The policies and bindings of one kind, read.
pub(super) struct ReadKind(pub(super) Vec<(Found, PolicyObject)>, pub(super) Vec<(Found, BindingObject)>);

pub(super) fn read_kind(
    kind: PolicyKind,
    policies: Vec<Found>,
    bindings: Vec<Found>,
    problems: &mut Vec<Problem>,
) -> ReadKind {
    let policies = policies.into_iter().filter_map(|found| {
        let object = read::<PolicyObject>(&found, kind, false, problems)?;
        Some((found, object))
    });
    let policies = policies.collect();
    let bindings = bindings.into_iter().filter_map(|found| {
        let object = read::<BindingObject>(&found, kind, true, problems)?;
        Some((found, object))
    });
    ReadKind(policies, bindings.collect())
}

/// Reads `found` strictly as `T`, a policy or binding of `kind`; problems named.
fn read<T: serde::de::DeserializeOwned>(
    found: &Found,
    kind: PolicyKind,
    binding: bool,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let api_version = found.value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let name = if binding { kind.binding() } else { kind.policy() };
    let mut findings = Vec::new();
    let versions = kind.versions();
    if !versions.iter().any(|v| api_version == format!("{API_GROUP}/{v}")) {
        let supported: Vec<String> = versions.iter().map(|v| format!("\"{API_GROUP}/{v}\"")).collect();
        findings.push(Finding::error(
            "apiVersion",
            format!(
                "Unsupported value: {}: supported values: {} ({name})",
                quote(api_version),
                supported.join(", ")
            ),
        ));
    }
    let object = match strict::strict::<T>(&found.value) {
        Ok(object) => Some(object),
        Err(errors) => {
            findings.extend(errors.into_iter().map(|(field, message)| Finding::error(field, message)));
            None
        }
    };
    let ok = findings.is_empty();
    // The other kind's fields: refused, the rest of the object still checked.
    let foreign = manifest::foreign_fields(&found.value, kind == PolicyKind::Mutating, binding);
    findings.extend(foreign.into_iter().map(|(field, message)| Finding::error(field, message)));
    problems.extend(findings.into_iter().map(|f| Problem::in_object(&found.file, &found.object, f)));
    object.filter(|_| ok)
}
