//! The gateway's own settings: an `admission-gateway/v1alpha1` `GatewayConfig` object, loaded
//! from the same paths as the fleet (so it is hot-reloaded with it) and parsed strictly.
//!
//! ```yaml
//! apiVersion: admission-gateway/v1alpha1
//! kind: GatewayConfig
//! metadata: {name: gateway}
//! auditPatchAnnotations: false   # return patch.webhook.admission.k8s.io/* annotations
//! allowEmptyFleet: false         # let a reload replace a fleet with webhooks by one without
//! deadlineMargin: 1s             # kept back from the caller's ?timeout=
//! minimumCallTimeout: 100ms      # less budget than this left: failurePolicy at once
//! shadowInFlightLimit: 64        # shadow calls in flight per webhook; more are dropped
//! ejectAfterFailures: 5          # consecutive unanswered calls that eject a webhook (0: never)
//! ejectFor: 10s                  # how long an ejected webhook fails fast before a probe
//! maxReviewsInFlight: 1024       # reviews answered at once; beyond, 429
//! maxRequestBytesInFlight: 128Mi # their request bodies; beyond, 429
//! maxPatchedObjectBytes: 3Mi     # a patch making the object larger fails the request
//! equivalentResources:           # CRDs served at several versions (matchPolicy Equivalent)
//! - {group: example.com, resource: widgets, kind: Widget, versions: [v1, v1beta1]}
//! openAPIDocuments:              # schemas of custom resources, for apply configurations
//! - widgets-openapi.json         # (relative to this file's directory)
//! ```
//!
//! `config/gateway.example.yaml` is the annotated reference.

use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::equivalence::CustomResource;
use super::manifest::ObjectMeta;
use super::Finding;
use crate::schemas::Document;
use equivalent_resources::{equivalent_resources, EquivalentResource};
pub(crate) use recording::{Filter, Recording, Sample};
use recording::{RecordingSection, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES};

mod equivalent_resources;
mod recording;

pub(crate) const API_VERSION: &str = "admission-gateway/v1alpha1";
pub(crate) const KIND: &str = "GatewayConfig";

/// `deadlineMargin` when unset.
pub(crate) const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(1);
/// `minimumCallTimeout` when unset.
pub(crate) const DEFAULT_MINIMUM_CALL_TIMEOUT: Duration = Duration::from_millis(100);
/// `shadowInFlightLimit` when unset.
pub(crate) const DEFAULT_SHADOW_IN_FLIGHT_LIMIT: usize = 64;
/// `maxReviewsInFlight` when unset.
pub(crate) const DEFAULT_MAX_REVIEWS_IN_FLIGHT: usize = 1024;
/// `maxRequestBytesInFlight` when unset.
pub(crate) const DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT: usize = 128 << 20;
/// `maxPatchedObjectBytes` when unset: the API server's bound on a request body
/// (`MaxRequestBodyBytes`, staging/src/k8s.io/apiserver/pkg/server/config.go), the largest
/// object a client can send.
pub(crate) const DEFAULT_MAX_PATCHED_OBJECT_BYTES: u64 = 3 << 20;
/// The API server never waits longer than this for a webhook (`timeoutSeconds` ≤ 30).
const MAX_SETTING_DURATION: Duration = Duration::from_secs(30);

/// The settings written as one number, duration or byte count that must lie in a range, in the
/// order their problems are reported. Each row is the field's name, how it is written, the
/// values allowed, its default and where it goes; [`GatewayConfig::settings`] reads, checks and
/// stores them all in one loop, and [`Settings::default`] is made of the defaults.
const BOUNDED: [Bounded; 10] = [
    Bounded {
        field: "deadlineMargin",
        unit: Unit::Duration,
        range: 0..=nanos(MAX_SETTING_DURATION),
        least_means: None,
        default: nanos(DEFAULT_DEADLINE_MARGIN),
        written: |config| config.deadline_margin.as_deref().map(Written::Text),
        store: |settings, value| settings.deadline_margin = Duration::from_nanos(value),
    },
    Bounded {
        field: "minimumCallTimeout",
        unit: Unit::Duration,
        range: 0..=nanos(MAX_SETTING_DURATION),
        least_means: None,
        default: nanos(DEFAULT_MINIMUM_CALL_TIMEOUT),
        written: |config| config.minimum_call_timeout.as_deref().map(Written::Text),
        store: |settings, value| settings.minimum_call_timeout = Duration::from_nanos(value),
    },
    Bounded {
        field: "shadowInFlightLimit",
        unit: Unit::Count,
        range: 1..=10_000,
        least_means: None,
        default: DEFAULT_SHADOW_IN_FLIGHT_LIMIT as u64,
        written: |config| config.shadow_in_flight_limit.map(Written::Number),
        store: |settings, value| {
            settings.shadow_in_flight_limit = usize::try_from(value).unwrap_or(usize::MAX)
        },
    },
    // The breaker's two (upstream/breaker.rs); their defaults are `Policy::default()`'s, which
    // a test holds.
    Bounded {
        field: "ejectAfterFailures",
        unit: Unit::Count,
        range: 0..=1000,
        least_means: Some("never eject"),
        default: 5,
        written: |config| config.eject_after_failures.map(Written::Number),
        store: |settings, value| settings.breaker.failures = u32::try_from(value).unwrap_or(u32::MAX),
    },
    Bounded {
        field: "ejectFor",
        unit: Unit::Duration,
        range: nanos(Duration::from_secs(1))..=nanos(Duration::from_secs(300)),
        least_means: None,
        default: nanos(Duration::from_secs(10)),
        written: |config| config.eject_for.as_deref().map(Written::Text),
        store: |settings, value| settings.breaker.eject_for = Duration::from_nanos(value),
    },
    Bounded {
        field: "maxReviewsInFlight",
        unit: Unit::Count,
        range: 1..=100_000,
        least_means: None,
        default: DEFAULT_MAX_REVIEWS_IN_FLIGHT as u64,
        written: |config| config.max_reviews_in_flight.map(Written::Number),
        store: |settings, value| {
            settings.max_reviews_in_flight = usize::try_from(value).unwrap_or(usize::MAX)
        },
    },
    // At least one review of the largest size (server/body.rs's 3 MiB cap); no most.
    Bounded {
        field: "maxRequestBytesInFlight",
        unit: Unit::Bytes,
        range: (3 << 20)..=u64::MAX,
        least_means: None,
        default: DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT as u64,
        written: |config| config.max_request_bytes_in_flight.as_deref().map(Written::Text),
        store: |settings, value| {
            settings.max_request_bytes_in_flight = usize::try_from(value).unwrap_or(usize::MAX);
        },
    },
    Bounded {
        field: "maxPatchedObjectBytes",
        unit: Unit::Bytes,
        range: (1 << 20)..=(1 << 30),
        least_means: None,
        default: DEFAULT_MAX_PATCHED_OBJECT_BYTES,
        written: |config| config.max_patched_object_bytes.as_deref().map(Written::Text),
        store: |settings, value| settings.max_patched_object_bytes = value,
    },
    // The recording's files (settings/recording.rs): a file holds at least a few large reviews.
    Bounded {
        field: "recording.maxFileBytes",
        unit: Unit::Bytes,
        range: (1 << 20)..=(1 << 30),
        least_means: None,
        default: DEFAULT_MAX_FILE_BYTES,
        written: |config| config.recording.as_ref()?.max_file_bytes.as_deref().map(Written::Text),
        store: |settings, value| settings.recording.max_file_bytes = value,
    },
    Bounded {
        field: "recording.maxTotalBytes",
        unit: Unit::Bytes,
        range: (1 << 20)..=u64::MAX,
        least_means: None,
        default: DEFAULT_MAX_TOTAL_BYTES,
        written: |config| config.recording.as_ref()?.max_total_bytes.as_deref().map(Written::Text),
        store: |settings, value| settings.recording.max_total_bytes = value,
    },
];

/// How a bounded setting is written, and what its values count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// A whole number (a YAML integer).
    Count,
    /// A Go duration (`250ms`, `1.5s`, `5m`); values in nanoseconds.
    Duration,
    /// A whole number of bytes, optionally with `Ki`, `Mi` or `Gi`; values in bytes.
    Bytes,
}

/// A bounded setting as written: a YAML integer or a string.
#[derive(Clone, Copy, Debug)]
enum Written<'a> {
    Number(i64),
    Text(&'a str),
}

/// One row of [`BOUNDED`]: an optional setting whose value must lie in a range.
struct Bounded {
    /// The field, as written in the GatewayConfig.
    field: &'static str,
    unit: Unit,
    /// The values allowed, in the unit's measure; `u64::MAX` at the top: no most.
    range: RangeInclusive<u64>,
    /// What the least value means, when it means more than itself (`0`: never eject).
    least_means: Option<&'static str>,
    /// The value when the field is unset.
    default: u64,
    /// The field as written, when it is.
    written: fn(&GatewayConfig) -> Option<Written<'_>>,
    /// Puts a value of `range` in its place in the settings.
    store: fn(&mut Settings, u64),
}

/// A duration in nanoseconds, as [`BOUNDED`] measures durations (up to 584 years).
const fn nanos(duration: Duration) -> u64 {
    duration.as_nanos() as u64
}

/// The settings every review reads, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Return the `patch.webhook.admission.k8s.io/round_R_index_I` audit annotations. Off by
    /// default: they hold the patch itself, and returned by the gateway they are stored at
    /// audit level Metadata, where a patch to a Secret must never appear (the API server
    /// records them only at level Request).
    pub(crate) audit_patch_annotations: bool,
    /// A reload may replace a fleet that has webhooks with one that has none. Off by default:
    /// an empty fleet allows everything, and is far more often a write in progress than an
    /// intent.
    pub(crate) allow_empty_fleet: bool,
    /// Kept back from the caller's `?timeout=` so the answer arrives before the caller gives
    /// up; at most a tenth of that timeout.
    pub(crate) deadline_margin: Duration,
    /// A webhook is not called with less budget left than this: its `failurePolicy` answers
    /// at once (Ignore: skipped and annotated failed-open; Fail: the request is rejected).
    pub(crate) minimum_call_timeout: Duration,
    /// Custom resources served at several versions: their versions are equivalent for
    /// `matchPolicy: Equivalent` (the built-in ones are in `equivalence/table.rs`).
    pub(crate) equivalent_resources: Vec<CustomResource>,
    /// Shadow calls one webhook may have in flight; beyond it a shadow call is dropped and
    /// counted (`result="dropped"`), so a slow shadow webhook cannot pile up tasks.
    pub(crate) shadow_in_flight_limit: usize,
    /// Fast failure: `ejectAfterFailures` and `ejectFor` (`upstream/breaker.rs`).
    pub(crate) breaker: crate::upstream::breaker::Policy,
    /// Reviews being answered at once; beyond, 429 (`server/limits.rs`).
    pub(crate) max_reviews_in_flight: usize,
    /// Bytes of their request bodies (declared lengths); beyond, 429.
    pub(crate) max_request_bytes_in_flight: usize,
    /// The most bytes the object may encode to after a mutating webhook's patch; a patch
    /// that makes it larger fails the request as an internal error, like a patch that does
    /// not apply (`pipeline/object.rs`).
    pub(crate) max_patched_object_bytes: u64,
    /// What to record of the answered reviews, and where (`recording`; off without a
    /// directory here or `serve --record`).
    pub(crate) recording: Recording,
    /// `openAPIDocuments`: OpenAPI documents of kinds the gateway has no built-in schema for
    /// (custom resources), read and converted at load (`src/schemas.rs`).
    pub(crate) openapi_documents: Arc<Vec<Arc<Document>>>,
}

impl Default for Settings {
    fn default() -> Self {
        let mut settings = Self {
            audit_patch_annotations: false,
            allow_empty_fleet: false,
            equivalent_resources: Vec::new(),
            // The rest are BOUNDED's defaults, stored below.
            deadline_margin: Duration::ZERO,
            minimum_call_timeout: Duration::ZERO,
            shadow_in_flight_limit: 0,
            breaker: crate::upstream::breaker::Policy { failures: 0, eject_for: Duration::ZERO },
            max_reviews_in_flight: 0,
            max_request_bytes_in_flight: 0,
            max_patched_object_bytes: 0,
            recording: Recording::default(),
            openapi_documents: Arc::default(),
        };
        for setting in &BOUNDED {
            (setting.store)(&mut settings, setting.default);
        }
        settings
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
    #[serde(default)]
    allow_empty_fleet: bool,
    deadline_margin: Option<String>,
    minimum_call_timeout: Option<String>,
    #[serde(default)]
    equivalent_resources: Vec<EquivalentResource>,
    shadow_in_flight_limit: Option<i64>,
    eject_after_failures: Option<i64>,
    eject_for: Option<String>,
    max_reviews_in_flight: Option<i64>,
    max_request_bytes_in_flight: Option<String>,
    max_patched_object_bytes: Option<String>,
    recording: Option<RecordingSection>,
    #[serde(default, rename = "openAPIDocuments")]
    openapi_documents: Vec<String>,
}

impl GatewayConfig {
    /// The settings this object asks for, or every field that is wrong.
    pub(crate) fn settings(&self) -> Result<Settings, Vec<Finding>> {
        let mut findings = Vec::new();
        let mut settings = Settings {
            audit_patch_annotations: self.audit_patch_annotations,
            allow_empty_fleet: self.allow_empty_fleet,
            ..Settings::default()
        };
        for setting in &BOUNDED {
            let Some(written) = (setting.written)(self) else { continue };
            match setting.check(written) {
                Ok(value) => (setting.store)(&mut settings, value),
                Err(message) => findings.push(Finding::error(setting.field, message)),
            }
        }
        settings.equivalent_resources = equivalent_resources(&self.equivalent_resources, &mut findings);
        if let Some(section) = &self.recording {
            section.read(&mut settings.recording, &mut findings);
        }
        if findings.is_empty() {
            Ok(settings)
        } else {
            Err(findings)
        }
    }
}

impl GatewayConfig {
    /// The `openAPIDocuments`, each read (a relative path from `base`, the directory of the
    /// file holding this object) and converted; every one that cannot be is a finding.
    pub(crate) fn openapi_documents(&self, base: &Path) -> Result<Vec<Arc<Document>>, Vec<Finding>> {
        let mut documents = Vec::new();
        let mut findings = Vec::new();
        for (i, written) in self.openapi_documents.iter().enumerate() {
            let field = format!("openAPIDocuments[{i}]");
            if written.is_empty() {
                findings.push(Finding::error(
                    field,
                    "Required value: the path of an OpenAPI document".to_owned(),
                ));
                continue;
            }
            let path = base.join(written);
            match Document::read(&path) {
                Ok(document) if document.api_versions.is_empty() => findings.push(Finding::error(
                    field,
                    format!("Invalid value: {written:?}: no model of this document names its kind (x-kubernetes-group-version-kind)"),
                )),
                Ok(document) => documents.push(Arc::new(document)),
                Err(why) => findings.push(Finding::error(field, format!("Invalid value: {written:?}: {why}"))),
            }
        }
        if findings.is_empty() {
            Ok(documents)
        } else {
            Err(findings)
        }
    }
}

impl Bounded {
    /// The value `written` asks for, or the message refusing it.
    fn check(&self, written: Written<'_>) -> Result<u64, String> {
        let value = match (self.unit, written) {
            (Unit::Count, Written::Number(number)) => u64::try_from(number).ok(),
            (Unit::Duration, Written::Text(text)) => match crate::go::duration::parse(text) {
                Ok(nanos) => u64::try_from(nanos).ok(),
                Err(why) => return Err(format!("Invalid value: {written}: {why}")),
            },
            (Unit::Bytes, Written::Text(text)) => {
                parse_bytes(text).and_then(|bytes| u64::try_from(bytes).ok())
            }
            // The field's type decides how it is written; a mismatch is a row written wrong.
            (_, Written::Number(_) | Written::Text(_)) => None,
        };
        match value {
            Some(value) if self.range.contains(&value) => Ok(value),
            _ => Err(format!("Invalid value: {written}: {}", self.expected(value))),
        }
    }

    /// What the field must be, said of a refused `value` (`None`: below zero, or no value of
    /// the unit at all).
    fn expected(&self, value: Option<u64>) -> String {
        let (least, most) = (*self.range.start(), *self.range.end());
        let (shown_least, shown_most) = (self.unit.show(least), self.unit.show(most));
        let least_means = self.least_means.map(|means| format!(" ({means})")).unwrap_or_default();
        const BYTES: &str = "must be a byte count (a whole number, optionally with Ki, Mi or Gi)";
        match self.unit {
            Unit::Count => format!("must be between {shown_least}{least_means} and {shown_most}, inclusive"),
            Unit::Bytes if most == u64::MAX => format!("{BYTES} of at least {shown_least}"),
            Unit::Bytes => format!("{BYTES} from {shown_least} to {shown_most}"),
            Unit::Duration if least == 0 && value.is_none() => "must not be negative".to_owned(),
            Unit::Duration if least == 0 => format!("must be at most {shown_most}"),
            Unit::Duration => format!("must be a Go duration from {shown_least} to {shown_most}"),
        }
    }
}

impl Unit {
    /// `value` as it would be written: `3Mi`, `5m`, `1000`.
    fn show(self, value: u64) -> String {
        let steps: &[(u64, &str)] = match self {
            Unit::Count => &[],
            Unit::Bytes => &[(1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")],
            Unit::Duration => {
                &[(3_600_000_000_000, "h"), (60_000_000_000, "m"), (1_000_000_000, "s"), (1_000_000, "ms")]
            }
        };
        let exact = steps.iter().find(|(step, _)| value >= *step && value.is_multiple_of(*step));
        match (exact, self) {
            (Some((step, suffix)), _) => format!("{}{suffix}", value / step),
            (None, Unit::Duration) => format!("{value}ns"),
            (None, _) => value.to_string(),
        }
    }
}

impl std::fmt::Display for Written<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Written::Number(number) => write!(f, "{number}"),
            Written::Text(text) => write!(f, "{text:?}"),
        }
    }
}

/// `1048576`, `512Ki`, `128Mi`, `1Gi` → bytes.
fn parse_bytes(text: &str) -> Option<usize> {
    let (digits, shift) = [("Gi", 30), ("Mi", 20), ("Ki", 10)]
        .iter()
        .find_map(|(suffix, shift)| text.strip_suffix(suffix).map(|digits| (digits, *shift)))
        .unwrap_or((text, 0));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn config(yaml: &str) -> GatewayConfig {
        let text = format!("apiVersion: {API_VERSION}\nkind: {KIND}\n{yaml}");
        serde_norway::from_str(&text).unwrap()
    }

    #[test]
    fn the_shadow_in_flight_limit_is_read_and_bounded() {
        let limit = |text: &str| config(&format!("shadowInFlightLimit: {text}")).settings();
        assert_eq!(limit("5").unwrap().shadow_in_flight_limit, 5);
        assert_eq!(config("metadata: {name: g}").settings().unwrap().shadow_in_flight_limit, 64);
        for bad in ["0", "-3", "10001"] {
            let findings = limit(bad).unwrap_err();
            assert_eq!(findings[0].field, "shadowInFlightLimit");
            assert_eq!(
                findings[0].message,
                format!("Invalid value: {bad}: must be between 1 and 10000, inclusive")
            );
        }
    }

    #[test]
    fn the_patched_object_bound_is_read_and_bounded() {
        let bound = |text: &str| config(&format!("maxPatchedObjectBytes: {text}")).settings();
        assert_eq!(bound("8Mi").unwrap().max_patched_object_bytes, 8 << 20);
        assert_eq!(Settings::default().max_patched_object_bytes, 3 << 20);
        for bad in ["'1023Ki'", "2Gi", "3MB", "'-1'"] {
            let findings = bound(bad).unwrap_err();
            assert_eq!(findings[0].field, "maxPatchedObjectBytes", "{bad}");
            assert!(findings[0].message.ends_with("from 1Mi to 1Gi"), "{}", findings[0].message);
        }
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

    /// Each bounded setting's least and most values, written as a user would, are taken and
    /// stored in their place; one step beyond either end is refused in words naming the range.
    /// The bounds here are written out, not read from `BOUNDED`, so a row off by one fails.
    #[test]
    fn every_bounded_setting_takes_its_ends_and_refuses_one_step_beyond() {
        /// A field, its ends written with the value stored, steps beyond with their
        /// message, and how to read the stored value back.
        type Row = (&'static str, [(&'static str, u128); 2], &'static [(&'static str, &'static str)], Read);
        type Read = fn(&Settings) -> u128;
        const S: u128 = 1_000_000_000;
        #[rustfmt::skip]
        let rows: [Row; 10] = [
            ("deadlineMargin", [("0s", 0), ("30s", 30 * S)],
             &[("'-1ns'", r#""-1ns": must not be negative"#), ("30.000000001s", r#""30.000000001s": must be at most 30s"#)],
             |s| s.deadline_margin.as_nanos()),
            ("minimumCallTimeout", [("'0'", 0), ("30s", 30 * S)],
             &[("'-1ns'", r#""-1ns": must not be negative"#), ("30000000001ns", r#""30000000001ns": must be at most 30s"#)],
             |s| s.minimum_call_timeout.as_nanos()),
            ("shadowInFlightLimit", [("1", 1), ("10000", 10_000)],
             &[("0", "0: must be between 1 and 10000, inclusive"), ("10001", "10001: must be between 1 and 10000, inclusive")],
             |s| s.shadow_in_flight_limit as u128),
            ("ejectAfterFailures", [("0", 0), ("1000", 1000)],
             &[("-1", "-1: must be between 0 (never eject) and 1000, inclusive"), ("1001", "1001: must be between 0 (never eject) and 1000, inclusive")],
             |s| u128::from(s.breaker.failures)),
            ("ejectFor", [("1s", S), ("5m", 300 * S)],
             &[("999999999ns", r#""999999999ns": must be a Go duration from 1s to 5m"#), ("5m0.000000001s", r#""5m0.000000001s": must be a Go duration from 1s to 5m"#)],
             |s| s.breaker.eject_for.as_nanos()),
            ("maxReviewsInFlight", [("1", 1), ("100000", 100_000)],
             &[("0", "0: must be between 1 and 100000, inclusive"), ("100001", "100001: must be between 1 and 100000, inclusive")],
             |s| s.max_reviews_in_flight as u128),
            // No most: the largest count of Gi a 64-bit usize holds stands in for it.
            ("maxRequestBytesInFlight", [("3Mi", 3 << 20), ("17179869183Gi", 17_179_869_183 << 30)],
             &[("'3145727'", r#""3145727": must be a byte count (a whole number, optionally with Ki, Mi or Gi) of at least 3Mi"#)],
             |s| s.max_request_bytes_in_flight as u128),
            ("maxPatchedObjectBytes", [("1Mi", 1 << 20), ("1Gi", 1 << 30)],
             &[("1023Ki", r#""1023Ki": must be a byte count (a whole number, optionally with Ki, Mi or Gi) from 1Mi to 1Gi"#),
               ("'1073741825'", r#""1073741825": must be a byte count (a whole number, optionally with Ki, Mi or Gi) from 1Mi to 1Gi"#)],
             |s| u128::from(s.max_patched_object_bytes)),
            ("recording.maxFileBytes", [("1Mi", 1 << 20), ("1Gi", 1 << 30)],
             &[("1023Ki", r#""1023Ki": must be a byte count (a whole number, optionally with Ki, Mi or Gi) from 1Mi to 1Gi"#),
               ("'1073741825'", r#""1073741825": must be a byte count (a whole number, optionally with Ki, Mi or Gi) from 1Mi to 1Gi"#)],
             |s| u128::from(s.recording.max_file_bytes)),
            ("recording.maxTotalBytes", [("1Mi", 1 << 20), ("17179869183Gi", 17_179_869_183 << 30)],
             &[("1023Ki", r#""1023Ki": must be a byte count (a whole number, optionally with Ki, Mi or Gi) of at least 1Mi"#)],
             |s| u128::from(s.recording.max_total_bytes)),
        ];
        // `recording.maxFileBytes: 1Mi` is written in its section.
        let written = |field: &str, value: &str| match field.split_once('.') {
            Some((section, field)) => format!("{section}:\n  {field}: {value}"),
            None => format!("{field}: {value}"),
        };
        for (field, ends, beyond, read) in rows {
            for (end, value) in ends {
                let settings = config(&written(field, end)).settings();
                let settings = settings.unwrap_or_else(|findings| panic!("{field}: {end}: {findings:?}"));
                assert_eq!(read(&settings), value, "{field}: {end} is stored in its place");
            }
            for (step, message) in beyond {
                let findings = config(&written(field, step)).settings().unwrap_err();
                assert_eq!(
                    findings,
                    [Finding::error(field, format!("Invalid value: {message}"))],
                    "{field}: {step}"
                );
            }
        }
    }

    /// One GatewayConfig with every bounded setting wrong, and an equivalentResources entry:
    /// each problem is reported, in the table's order, not only the first.
    #[test]
    fn every_wrong_setting_is_reported_not_only_the_first() {
        let findings = config(
            "deadlineMargin: soon\nminimumCallTimeout: 31s\nshadowInFlightLimit: 0\nejectAfterFailures: 1001\n\
             ejectFor: 0s\nmaxReviewsInFlight: -5\nmaxRequestBytesInFlight: 1Mi\nmaxPatchedObjectBytes: 3MB\n\
             equivalentResources:\n- {group: example.com, resource: widgets, kind: Widget, versions: [v1]}",
        )
        .settings()
        .unwrap_err();
        let found: Vec<(&str, &str)> =
            findings.iter().map(|f| (f.field.as_str(), f.message.as_str())).collect();
        assert_eq!(
            found,
            [
                ("deadlineMargin", r#"Invalid value: "soon": time: invalid duration "soon""#),
                ("minimumCallTimeout", r#"Invalid value: "31s": must be at most 30s"#),
                ("shadowInFlightLimit", "Invalid value: 0: must be between 1 and 10000, inclusive"),
                (
                    "ejectAfterFailures",
                    "Invalid value: 1001: must be between 0 (never eject) and 1000, inclusive"
                ),
                ("ejectFor", r#"Invalid value: "0s": must be a Go duration from 1s to 5m"#),
                ("maxReviewsInFlight", "Invalid value: -5: must be between 1 and 100000, inclusive"),
                (
                    "maxRequestBytesInFlight",
                    r#"Invalid value: "1Mi": must be a byte count (a whole number, optionally with Ki, Mi or Gi) of at least 3Mi"#
                ),
                (
                    "maxPatchedObjectBytes",
                    r#"Invalid value: "3MB": must be a byte count (a whole number, optionally with Ki, Mi or Gi) from 1Mi to 1Gi"#
                ),
                (
                    "equivalentResources[0].versions",
                    r#"Invalid value: ["v1"]: at least two versions must be listed"#
                ),
            ]
        );
        assert!(findings.iter().all(|f| f.severity == crate::config::Severity::Error && f.webhook.is_none()));
    }

    /// The defaults are the documented ones, each inside its own range, and the breaker's are
    /// the breaker's own.
    #[test]
    fn the_defaults_are_the_documented_ones_and_inside_their_ranges() {
        let defaults = Settings::default();
        assert_eq!(defaults.breaker, crate::upstream::breaker::Policy::default());
        assert_eq!(
            (defaults.deadline_margin, defaults.minimum_call_timeout, defaults.shadow_in_flight_limit),
            (Duration::from_secs(1), Duration::from_millis(100), 64)
        );
        assert_eq!(
            (
                defaults.max_reviews_in_flight,
                defaults.max_request_bytes_in_flight,
                defaults.max_patched_object_bytes
            ),
            (1024, 128 << 20, 3 << 20)
        );
        for setting in &BOUNDED {
            assert!(setting.range.contains(&setting.default), "{}", setting.field);
        }
    }

    /// Loads `files` (name, text) through the real loader.
    pub(super) fn load(
        files: &[(&str, &str)],
    ) -> Result<crate::config::Snapshot, crate::config::ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        crate::config::compile::load(&[dir.path().to_path_buf()], &crate::upstream::Clients::default(), 1)
    }

    pub(super) const GATEWAY: &str =
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

    #[test]
    fn equivalent_resources_are_read_in_order() {
        let settings = config(
            "equivalentResources:\n- {group: example.com, resource: widgets, kind: Widget, versions: [v1, v1beta1]}\n- {group: example.com, resource: gadgets, kind: Gadget, versions: [v2, v1]}",
        )
        .settings()
        .unwrap();
        let found: Vec<_> = settings
            .equivalent_resources
            .iter()
            .map(|r| format!("{}.{} {} {:?}", r.resource, r.group, r.kind, r.versions))
            .collect();
        assert_eq!(
            found,
            [r#"widgets.example.com Widget ["v1", "v1beta1"]"#, r#"gadgets.example.com Gadget ["v2", "v1"]"#]
        );
    }

    #[test]
    fn bad_equivalent_resources_are_named_by_field() {
        let findings = config(
            "equivalentResources:\n\
             - {group: example.com, resource: widgets, kind: Widget, versions: []}\n\
             - {group: example.com, resource: widgets, kind: Widget, versions: [v1, v1]}\n\
             - {group: apps, resource: deployments, kind: Deployment, versions: [v1, v2]}\n\
             - {group: example, resource: Gizmos, kind: '', versions: [v1]}\n\
             - {group: example.com, resource: things, kind: Thing, versions: [v1, 2beta]}",
        )
        .settings()
        .unwrap_err();
        let found: Vec<(&str, &str)> =
            findings.iter().map(|f| (f.field.as_str(), f.message.as_str())).collect();
        assert_eq!(
            found,
            [
                ("equivalentResources[0].versions", "Required value: the versions served, at least two"),
                ("equivalentResources[1].versions[1]", r#"Duplicate value: "v1""#),
                ("equivalentResources[1]", r#"Duplicate value: "widgets.example.com""#),
                (
                    "equivalentResources[2]",
                    r#"Invalid value: "deployments.apps": a built-in resource, whose equivalent versions the gateway knows"#
                ),
                (
                    "equivalentResources[3].group",
                    r#"Invalid value: "example": should be a domain with at least one dot"#
                ),
                (
                    "equivalentResources[3].resource",
                    r#"Invalid value: "Gizmos": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"#
                ),
                ("equivalentResources[3].kind", "Required value"),
                (
                    "equivalentResources[3].versions",
                    r#"Invalid value: ["v1"]: at least two versions must be listed"#
                ),
                (
                    "equivalentResources[4].versions[1]",
                    r#"Invalid value: "2beta": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"#
                ),
            ]
        );
    }

    #[test]
    fn unknown_fields_of_equivalent_resources_are_refused_with_their_path() {
        let error = load(&[(
            "gateway.yaml",
            &format!("{GATEWAY}equivalentResources:\n- {{group: example.com, resource: widgets, kind: Widget, verions: [v1, v2]}}\n"),
        )])
        .unwrap_err();
        let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 1, "{messages:#?}");
        assert!(
            messages[0].ends_with(r#"GatewayConfig "g": equivalentResources[0].verions: unknown field "verions" (did you mean "versions"?)"#),
            "{messages:#?}"
        );
    }

    #[test]
    fn byte_counts_read_as_written() {
        assert_eq!(parse_bytes("128Mi"), Some(128 << 20));
        assert_eq!(parse_bytes("512Ki"), Some(512 << 10));
        assert_eq!(parse_bytes("1Gi"), Some(1 << 30));
        assert_eq!(parse_bytes("3145728"), Some(3 << 20));
        for bad in ["", "Mi", "1.5Mi", "-1", "1MB", " 1Mi", "99999999999999999999Gi"] {
            assert_eq!(parse_bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn openapi_documents_are_read_from_the_files_directory_and_every_bad_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let widget = serde_json::json!({"openapi": "3.0.0", "components": {"schemas": {"com.example.v1.Widget": {
            "type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}});
        std::fs::write(dir.path().join("widgets.json"), widget.to_string()).unwrap();
        std::fs::write(dir.path().join("kindless.yaml"), "definitions: {a: {type: object}}\n").unwrap();
        std::fs::write(dir.path().join("broken.json"), r#"{"definitions": {"a": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}}}"#).unwrap();

        let good = config("openAPIDocuments: [widgets.json]").openapi_documents(dir.path()).unwrap();
        assert_eq!(good.len(), 1);
        assert!(good[0].api_versions.contains("example.com/v1"));
        assert!(good[0].schema.type_of("example.com/v1", "Widget").is_some());

        let findings =
            config("openAPIDocuments: [widgets.json, missing.json, kindless.yaml, broken.json, '']")
                .openapi_documents(dir.path())
                .unwrap_err();
        let fields: Vec<&str> = findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            ["openAPIDocuments[1]", "openAPIDocuments[2]", "openAPIDocuments[3]", "openAPIDocuments[4]"]
        );
        assert!(
            findings[0].message.starts_with("Invalid value: \"missing.json\": "),
            "{}",
            findings[0].message
        );
        assert!(
            findings[1].message.contains("no model of this document names its kind"),
            "{}",
            findings[1].message
        );
        assert!(findings[2].message.ends_with("a: unknown list type bag"), "{}", findings[2].message);
        assert!(findings[3].message.starts_with("Required value"), "{}", findings[3].message);
    }
}
