//! The recorded line's `world` as the writer writes it (src/recording.rs, `World`).

use super::World;

/// The line's `world`: what the decision saw (src/recording.rs, [`World`](super::World)) and how the line
/// was redacted, for a replay to redact a candidate's patches alike. Fields left out when
/// empty.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorldLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a crate::recording::Namespace>,
    /// As a Go duration (`10s`), as the caller gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redaction: Option<Redaction<'a>>,
}

/// The recording's redaction settings, when any beyond a Secret's values.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Redaction<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    redact_pointers: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    drop_user_info: bool,
}

impl<'a> WorldLine<'a> {
    pub(super) fn of(world: &'a World, pointers: &'a [String], drop_user_info: bool) -> Self {
        let redacted = !pointers.is_empty() || drop_user_info;
        WorldLine {
            namespace: world.namespace.as_ref(),
            timeout: world.timeout.map(crate::go::duration::format),
            redaction: redacted.then_some(Redaction { redact_pointers: pointers, drop_user_info }),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.namespace.is_none() && self.timeout.is_none() && self.redaction.is_none()
    }
}
