//! The fleet's configuration: Kubernetes manifests on disk → a validated, compiled [`Snapshot`].
//!
//! `load` reads files and directories into objects, `defaults` applies the API server's v1
//! defaults (in one place), `validate` checks what the API server would refuse to store,
//! `compile` turns the result into the immutable [`Snapshot`] every review reads, and `reload`
//! watches the paths and swaps a new snapshot in atomically, keeping the last good one on error.

pub(crate) mod compile;
pub(crate) mod defaults;
pub(crate) mod equivalence;
pub(crate) mod load;
pub(crate) mod manifest;
pub(crate) mod mode;
pub(crate) mod policy;
pub(crate) mod reload;
pub(crate) mod rules;
pub(crate) mod selector;
pub(crate) mod settings;
pub(crate) mod validate;

use std::fmt;
use std::path::PathBuf;

pub(crate) use compile::{LiveSnapshot, Snapshot};
pub(crate) use settings::Settings;

/// How serious a configuration problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    /// Stored by the API server only for legacy objects: loaded, and reported.
    Warning,
    /// Refused by the API server: the configuration does not load.
    Error,
}

/// One problem in the configuration, naming where it is: file, object, webhook, field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) severity: Severity,
    pub(crate) file: PathBuf,
    /// `Kind "name"` of the object, when the problem is inside one.
    pub(crate) object: Option<String>,
    /// `name` of the webhook, when the problem is inside one.
    pub(crate) webhook: Option<String>,
    /// Field path in the object, e.g. `webhooks[0].timeoutSeconds`.
    pub(crate) field: Option<String>,
    pub(crate) message: String,
}

impl Problem {
    /// `finding`, found in `object` of `file`.
    pub(crate) fn in_object(file: &std::path::Path, object: &str, finding: Finding) -> Self {
        Problem {
            severity: finding.severity,
            file: file.to_path_buf(),
            object: Some(object.to_owned()),
            webhook: finding.webhook,
            field: Some(finding.field),
            message: finding.message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{level}: {}", self.file.display())?;
        if let Some(object) = &self.object {
            write!(f, ": {object}")?;
        }
        if let Some(webhook) = &self.webhook {
            write!(f, ": webhook {webhook:?}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What validation found in one object, before the caller adds the file and object names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    /// `name` of the webhook the finding is about, if any.
    pub(crate) webhook: Option<String>,
    /// Field path from the object's root, e.g. `webhooks[0].rules[1].operations[0]`.
    pub(crate) field: String,
    /// API-server style text, e.g. `Unsupported value: "Sometimes": supported values: "Fail", "Ignore"`.
    pub(crate) message: String,
}

impl Finding {
    /// An error at `field` of the object, about no webhook in particular.
    pub(crate) fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { severity: Severity::Error, webhook: None, field: field.into(), message: message.into() }
    }
}

/// A configuration that did not load: every problem found (warnings included, for context).
#[derive(Clone, Debug, thiserror::Error)]
#[error("configuration refused with {} error(s)", self.errors())]
pub(crate) struct ConfigError {
    pub(crate) problems: Vec<Problem>,
}

impl ConfigError {
    pub(crate) fn errors(&self) -> usize {
        self.problems.iter().filter(|p| p.severity == Severity::Error).count()
    }
}
