//! How a configuration's webhooks are run: the `admission-gateway/mode` and
//! `admission-gateway/canary-percent` annotations on a Mutating- or
//! ValidatingWebhookConfiguration, read and checked here (docs/configuration.md, "Shadow,
//! canary and warn modes"). Invalid values refuse the configuration like any other problem.

use super::manifest::{WebhookConfiguration, WebhookKind};
use super::Finding;

/// Annotation on a configuration object choosing how its webhooks are run.
pub(crate) const MODE_ANNOTATION: &str = "admission-gateway/mode";
/// With `mode: canary`: the share of requests, 0–100, on which the webhooks are enforced.
pub(crate) const CANARY_PERCENT_ANNOTATION: &str = "admission-gateway/canary-percent";

/// The mode of every webhook of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    /// Called and obeyed, as the API server would (the default).
    #[default]
    Enforce,
    /// Validating only: called on the critical path; a denial becomes a warning.
    Warn,
    /// Called off the critical path; its outcome is compared, never obeyed.
    Shadow,
    /// Enforced for a stable share of requests (this percent), shadowed for the rest.
    Canary(u8),
}

impl Mode {
    /// The mode the annotations ask for, or every problem with them.
    pub(crate) fn of(config: &WebhookConfiguration) -> Result<Mode, Vec<Finding>> {
        let annotations = &config.metadata.annotations;
        let error = |annotation: &str, message: String| {
            Finding::error(format!("metadata.annotations[{annotation}]"), message)
        };
        let mut findings = Vec::new();
        let mode = match annotations.get(MODE_ANNOTATION).map(String::as_str) {
            None | Some("enforce") => Mode::Enforce,
            Some("warn") if config.kind == WebhookKind::Mutating => {
                findings.push(error(
                    MODE_ANNOTATION,
                    "Unsupported value: \"warn\": warn mode turns a denial into a warning and applies to validating webhooks only; supported values for a MutatingWebhookConfiguration: \"enforce\", \"shadow\", \"canary\"".into(),
                ));
                Mode::Enforce
            }
            Some("warn") => Mode::Warn,
            Some("shadow") => Mode::Shadow,
            Some("canary") => Mode::Canary(0),
            Some(other) => {
                findings.push(error(
                    MODE_ANNOTATION,
                    format!("Unsupported value: {other:?}: supported values: \"enforce\", \"warn\", \"shadow\", \"canary\""),
                ));
                Mode::Enforce
            }
        };
        let percent = annotations.get(CANARY_PERCENT_ANNOTATION);
        let mode = match (mode, percent) {
            (Mode::Canary(_), None) => {
                findings.push(error(
                    CANARY_PERCENT_ANNOTATION,
                    format!("Required value: {MODE_ANNOTATION}: canary needs the share of requests to enforce, an integer from 0 to 100"),
                ));
                mode
            }
            (Mode::Canary(_), Some(text)) => match parse_percent(text) {
                Some(percent) => Mode::Canary(percent),
                None => {
                    findings.push(error(
                        CANARY_PERCENT_ANNOTATION,
                        format!("Invalid value: {text:?}: must be an integer from 0 to 100"),
                    ));
                    mode
                }
            },
            (_, Some(_)) if findings.is_empty() => {
                findings.push(error(
                    CANARY_PERCENT_ANNOTATION,
                    format!("Forbidden: may only be set with {MODE_ANNOTATION}: canary"),
                ));
                mode
            }
            _ => mode,
        };
        if findings.is_empty() {
            Ok(mode)
        } else {
            Err(findings)
        }
    }
}

/// `0`…`100`, digits only (no sign, no spaces, no fraction).
fn parse_percent(text: &str) -> Option<u8> {
    if text.is_empty() || text.len() > 3 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u8>().ok().filter(|percent| *percent <= 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configuration(kind: WebhookKind, annotations: &[(&str, &str)]) -> WebhookConfiguration {
        WebhookConfiguration {
            version: crate::config::manifest::ApiVersion::V1,
            kind,
            metadata: crate::config::manifest::ObjectMeta {
                name: "fleet".into(),
                annotations: annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                ..Default::default()
            },
            webhooks: Vec::new(),
        }
    }

    #[test]
    fn modes_are_read_from_the_annotations() {
        let validating = |a: &[(&str, &str)]| Mode::of(&configuration(WebhookKind::Validating, a));
        assert_eq!(validating(&[]), Ok(Mode::Enforce));
        assert_eq!(validating(&[(MODE_ANNOTATION, "enforce")]), Ok(Mode::Enforce));
        assert_eq!(validating(&[(MODE_ANNOTATION, "warn")]), Ok(Mode::Warn));
        assert_eq!(validating(&[(MODE_ANNOTATION, "shadow")]), Ok(Mode::Shadow));
        for (text, percent) in [("0", 0), ("25", 25), ("100", 100), ("007", 7)] {
            assert_eq!(
                validating(&[(MODE_ANNOTATION, "canary"), (CANARY_PERCENT_ANNOTATION, text)]),
                Ok(Mode::Canary(percent))
            );
        }
    }

    #[test]
    fn bad_modes_and_percents_are_named_by_field() {
        let refused = |kind, a: &[(&str, &str)]| -> Vec<(String, String)> {
            Mode::of(&configuration(kind, a))
                .unwrap_err()
                .into_iter()
                .map(|finding| (finding.field, finding.message))
                .collect()
        };
        let mode_field = format!("metadata.annotations[{MODE_ANNOTATION}]");
        let percent_field = format!("metadata.annotations[{CANARY_PERCENT_ANNOTATION}]");
        let found = refused(WebhookKind::Validating, &[(MODE_ANNOTATION, "Shadow")]);
        assert_eq!(found[0].0, mode_field);
        assert!(found[0].1.starts_with("Unsupported value: \"Shadow\""), "{found:?}");
        let found = refused(WebhookKind::Mutating, &[(MODE_ANNOTATION, "warn")]);
        assert_eq!(found[0].0, mode_field);
        assert!(found[0].1.contains("validating webhooks only"), "{found:?}");
        let found = refused(WebhookKind::Validating, &[(MODE_ANNOTATION, "canary")]);
        assert_eq!(found[0].0, percent_field);
        assert!(found[0].1.starts_with("Required value"), "{found:?}");
        for bad in ["101", "-1", "+5", " 5", "5%", "2.5", "", "1000"] {
            let found = refused(
                WebhookKind::Mutating,
                &[(MODE_ANNOTATION, "canary"), (CANARY_PERCENT_ANNOTATION, bad)],
            );
            assert_eq!(
                found,
                [(
                    percent_field.clone(),
                    format!("Invalid value: {bad:?}: must be an integer from 0 to 100")
                )]
            );
        }
        let found = refused(WebhookKind::Validating, &[(CANARY_PERCENT_ANNOTATION, "10")]);
        assert_eq!(found[0].0, percent_field);
        assert!(found[0].1.starts_with("Forbidden"), "{found:?}");
        let found = refused(
            WebhookKind::Validating,
            &[(MODE_ANNOTATION, "shadow"), (CANARY_PERCENT_ANNOTATION, "10")],
        );
        assert_eq!(found.len(), 1);
    }
}
