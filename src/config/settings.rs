//! The gateway's own settings: an `admission-gateway/v1alpha1` `GatewayConfig` object, loaded
//! from the same paths as the fleet (so it is hot-reloaded with it) and parsed strictly.
//!
//! ```yaml
//! apiVersion: admission-gateway/v1alpha1
//! kind: GatewayConfig
//! metadata: {name: gateway}
//! auditPatchAnnotations: false   # return patch.webhook.admission.k8s.io/* annotations
//! deadlineMargin: 1s             # kept back from the caller's ?timeout=
//! minimumCallTimeout: 100ms      # less budget than this left: failurePolicy at once
//! ```
//!
//! `config/gateway.example.yaml` is the annotated reference.

use std::time::Duration;

use serde::Deserialize;

use super::manifest::ObjectMeta;
use super::{Finding, Severity};

pub(crate) const API_VERSION: &str = "admission-gateway/v1alpha1";
pub(crate) const KIND: &str = "GatewayConfig";

/// `deadlineMargin` when unset.
pub(crate) const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(1);
/// `minimumCallTimeout` when unset.
pub(crate) const DEFAULT_MINIMUM_CALL_TIMEOUT: Duration = Duration::from_millis(100);
/// The API server never waits longer than this for a webhook (`timeoutSeconds` ≤ 30).
const MAX_SETTING_DURATION: Duration = Duration::from_secs(30);

/// The settings every review reads, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Return the `patch.webhook.admission.k8s.io/round_R_index_I` audit annotations. Off by
    /// default: they hold the patch itself, and returned by the gateway they are stored at
    /// audit level Metadata, where a patch to a Secret must never appear (the API server
    /// records them only at level Request).
    pub(crate) audit_patch_annotations: bool,
    /// Kept back from the caller's `?timeout=` so the answer arrives before the caller gives
    /// up; at most a tenth of that timeout.
    pub(crate) deadline_margin: Duration,
    /// A webhook is not called with less budget left than this: its `failurePolicy` answers
    /// at once (Ignore: skipped and annotated failed-open; Fail: the request is rejected).
    pub(crate) minimum_call_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            audit_patch_annotations: false,
            deadline_margin: DEFAULT_DEADLINE_MARGIN,
            minimum_call_timeout: DEFAULT_MINIMUM_CALL_TIMEOUT,
        }
    }
}

/// The object as written. Unknown fields are refused (the loader names each one).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GatewayConfig {
    #[allow(dead_code)] // read before the body, kept so deny_unknown_fields accepts it
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    audit_patch_annotations: bool,
    deadline_margin: Option<String>,
    minimum_call_timeout: Option<String>,
}

impl GatewayConfig {
    /// The settings this object asks for, or every field that is wrong.
    pub(crate) fn settings(&self) -> Result<Settings, Vec<Finding>> {
        let mut findings = Vec::new();
        let mut duration = |field: &str, text: &Option<String>, default: Duration| match text {
            None => default,
            Some(text) => match parse_duration(text) {
                Ok(duration) => duration,
                Err(message) => {
                    findings.push(Finding {
                        severity: Severity::Error,
                        webhook: None,
                        field: field.into(),
                        message,
                    });
                    default
                }
            },
        };
        let settings = Settings {
            audit_patch_annotations: self.audit_patch_annotations,
            deadline_margin: duration("deadlineMargin", &self.deadline_margin, DEFAULT_DEADLINE_MARGIN),
            minimum_call_timeout: duration(
                "minimumCallTimeout",
                &self.minimum_call_timeout,
                DEFAULT_MINIMUM_CALL_TIMEOUT,
            ),
        };
        if findings.is_empty() {
            Ok(settings)
        } else {
            Err(findings)
        }
    }
}

/// A Go duration between 0 and 30 s.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos =
        crate::go::duration::parse(text).map_err(|message| format!("Invalid value: {text:?}: {message}"))?;
    let duration = u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("Invalid value: {text:?}: must not be negative"))?;
    if duration > MAX_SETTING_DURATION {
        return Err(format!("Invalid value: {text:?}: must be at most 30s"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> GatewayConfig {
        let text = format!("apiVersion: {API_VERSION}\nkind: {KIND}\n{yaml}");
        serde_norway::from_str(&text).unwrap()
    }

    #[test]
    fn unset_settings_are_the_safe_defaults() {
        let settings = config("metadata: {name: g}").settings().unwrap();
        assert_eq!(settings, Settings::default());
        assert!(!settings.audit_patch_annotations, "patch contents stay out of audit logs by default");
        assert_eq!(settings.deadline_margin, Duration::from_secs(1));
    }

    #[test]
    fn settings_are_read_and_bad_durations_named() {
        let settings = config("auditPatchAnnotations: true\ndeadlineMargin: 250ms\nminimumCallTimeout: 1.5s")
            .settings()
            .unwrap();
        assert!(settings.audit_patch_annotations);
        assert_eq!(settings.deadline_margin, Duration::from_millis(250));
        assert_eq!(settings.minimum_call_timeout, Duration::from_millis(1500));

        let findings = config("deadlineMargin: soon\nminimumCallTimeout: -1s").settings().unwrap_err();
        let fields: Vec<_> = findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["deadlineMargin", "minimumCallTimeout"]);
        assert!(findings[1].message.contains("negative"), "{}", findings[1].message);
        let findings = config("deadlineMargin: 31s").settings().unwrap_err();
        assert!(findings[0].message.contains("at most 30s"), "{}", findings[0].message);
    }

    /// Loads `files` (name, text) through the real loader.
    fn load(files: &[(&str, &str)]) -> Result<crate::config::Snapshot, crate::config::ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        crate::config::compile::load(&[dir.path().to_path_buf()], &crate::upstream::Clients::default(), 1)
    }

    const GATEWAY: &str =
        "apiVersion: admission-gateway/v1alpha1\nkind: GatewayConfig\nmetadata: {name: g}\n";

    #[test]
    fn the_settings_travel_with_the_fleet_and_are_refused_whole_when_wrong() {
        let snapshot = load(&[("gateway.yaml", &format!("{GATEWAY}auditPatchAnnotations: true\n"))]).unwrap();
        assert!(snapshot.settings.audit_patch_annotations);
        assert_eq!(load(&[]).unwrap().settings, Settings::default());

        let error =
            load(&[("gateway.yaml", &format!("{GATEWAY}auditPatchAnotations: true\ndeadlineMargn: 1s\n"))])
                .unwrap_err();
        let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:#?}");
        assert!(messages[0].ends_with(r#"GatewayConfig "g": auditPatchAnotations: unknown field "auditPatchAnotations" (did you mean "auditPatchAnnotations"?)"#), "{messages:#?}");
        assert!(messages[1].contains(r#"(did you mean "deadlineMargin"?)"#), "{messages:#?}");

        let error =
            load(&[("a.yaml", GATEWAY), ("b.yaml", &GATEWAY.replace("name: g", "name: h"))]).unwrap_err();
        assert_eq!(error.errors(), 1);
        assert!(error.problems[0].message.contains("only one GatewayConfig"), "{:?}", error.problems);
    }
}
