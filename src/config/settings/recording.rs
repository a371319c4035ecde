//! The `GatewayConfig`'s `recording` section (docs/configuration.md): where answered reviews
//! are recorded, which of them, and what is hashed before they reach the disk. Its two byte
//! bounds are rows of `BOUNDED` (settings.rs); everything else is checked here, every problem
//! a finding at its path (`recording.resources[1]`).
//!
//! ```yaml
//! recording:
//!   directory: /var/lib/admission-gateway/recording  # `serve --record DIR` wins over it
//!   sampleFraction: 0.25           # of the reviews, chosen by their uid
//!   resources: [pods, apps/deployments, example.com/*]
//!   namespaces: [team-a]           # only these (unset: all)
//!   excludeNamespaces: [kube-system]
//!   maxFileBytes: 64Mi
//!   maxTotalBytes: 1Gi
//!   redactPointers: [/spec/template/spec/containers/0/env]
//!   dropUserInfo: false
//! ```

use std::path::PathBuf;

use serde::Deserialize;

use super::equivalent_resources::{is_dns_label, is_dns_subdomain};
use super::Finding;

/// `recording.maxFileBytes` when unset.
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// `recording.maxTotalBytes` when unset.
pub(crate) const DEFAULT_MAX_TOTAL_BYTES: u64 = 1 << 30;

/// The section as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RecordingSection {
    directory: Option<PathBuf>,
    sample_fraction: Option<f64>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    exclude_namespaces: Vec<String>,
    pub(super) max_file_bytes: Option<String>,
    pub(super) max_total_bytes: Option<String>,
    #[serde(default)]
    redact_pointers: Vec<String>,
    #[serde(default)]
    drop_user_info: bool,
}

/// What the section asks for, checked, defaults applied. Recording is on when the section names
/// a `directory` or `serve --record DIR` is given (which wins over it); the other fields apply
/// either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recording {
    pub(crate) directory: Option<PathBuf>,
    pub(crate) sample: Sample,
    pub(crate) filter: Filter,
    /// A new file is begun when the next line would take the current one past this.
    pub(crate) max_file_bytes: u64,
    /// The oldest files are removed while all of them hold more than this (never the one
    /// being written).
    pub(crate) max_total_bytes: u64,
    /// JSON pointers into the object whose values are hashed like a Secret's.
    pub(crate) redact_pointers: Vec<String>,
    /// The request's `userInfo` is left out of the recording.
    pub(crate) drop_user_info: bool,
}

/// Which share of the reviews is recorded: decided by a hash of the request's uid, so the same
/// review (an API server retry, another replica) is decided the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sample {
    All,
    /// Those whose uid hashes below this (out of 2^64).
    HashBelow(u64),
}

/// Which reviews are recorded by what they are about; empty lists take everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// `(group, resource)`, either `*` for any; empty: every resource.
    pub(crate) resources: Vec<(String, String)>,
    /// Only these namespaces (cluster-scoped requests then not at all); empty: every one.
    pub(crate) namespaces: Vec<String>,
    pub(crate) exclude_namespaces: Vec<String>,
}

impl Default for Recording {
    fn default() -> Self {
        Recording {
            directory: None,
            sample: Sample::All,
            filter: Filter::default(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            redact_pointers: Vec::new(),
            drop_user_info: false,
        }
    }
}

impl Sample {
    /// `fraction` of 0 to 1 as a hash threshold.
    pub(crate) fn of(fraction: f64) -> Self {
        if fraction >= 1.0 {
            Sample::All
        } else {
            // 2^64 · fraction, rounded down; `as` saturates.
            Sample::HashBelow((fraction * 18_446_744_073_709_551_616.0) as u64)
        }
    }

    /// Whether the review of `uid` is in the sample: a 64-bit hash of its bytes, no allocation.
    pub(crate) fn takes(self, uid: &str) -> bool {
        match self {
            Sample::All => true,
            Sample::HashBelow(threshold) => {
                let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
                for byte in uid.bytes() {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0100_0000_01b3);
                }
                // FNV-1a leaves the high bits of uids that differ in their last bytes alike:
                // finished with MurmurHash3's fmix64 so every bit counts.
                hash ^= hash >> 33;
                hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
                hash ^= hash >> 33;
                hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
                hash ^= hash >> 33;
                hash < threshold
            }
        }
    }
}

impl Filter {
    /// Whether a review of `resource` in `namespace` (`""`: cluster-scoped) is recorded. A
    /// subresource's request is taken by its resource's entry.
    pub(crate) fn takes(&self, group: &str, resource: &str, namespace: &str) -> bool {
        let matches = |wanted: &str, value: &str| wanted == "*" || wanted == value;
        (self.resources.is_empty()
            || self.resources.iter().any(|(g, r)| matches(g, group) && matches(r, resource)))
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
            && !self.exclude_namespaces.iter().any(|n| n == namespace)
    }
}

impl RecordingSection {
    /// The section checked into `recording` (whose byte bounds `BOUNDED` has stored); every
    /// problem is a finding.
    pub(super) fn read(&self, recording: &mut Recording, findings: &mut Vec<Finding>) {
        let mut error = |field: String, message: String| findings.push(Finding::error(field, message));
        match &self.directory {
            Some(directory) if directory.as_os_str().is_empty() => {
                error("recording.directory".into(), "Required value: a directory, or no field".into())
            }
            directory => recording.directory = directory.clone(),
        }
        match self.sample_fraction {
            Some(fraction) if (0.0..=1.0).contains(&fraction) => recording.sample = Sample::of(fraction),
            Some(fraction) => error(
                "recording.sampleFraction".into(),
                format!("Invalid value: {fraction}: must be between 0 and 1, inclusive"),
            ),
            None => {}
        }
        for (i, entry) in self.resources.iter().enumerate() {
            match resource(entry) {
                Ok(resource) => recording.filter.resources.push(resource),
                Err(why) => {
                    error(format!("recording.resources[{i}]"), format!("Invalid value: {entry:?}: {why}"))
                }
            }
        }
        for (field, names) in
            [("namespaces", &self.namespaces), ("excludeNamespaces", &self.exclude_namespaces)]
        {
            for (i, name) in names.iter().enumerate() {
                if !is_dns_label(name) {
                    error(
                        format!("recording.{field}[{i}]"),
                        format!("Invalid value: {name:?}: {NOT_A_LABEL}"),
                    );
                }
            }
        }
        recording.filter.namespaces = self.namespaces.clone();
        recording.filter.exclude_namespaces = self.exclude_namespaces.clone();
        for (i, pointer) in self.redact_pointers.iter().enumerate() {
            if let Some(why) = check_pointer(pointer) {
                error(format!("recording.redactPointers[{i}]"), format!("Invalid value: {pointer:?}: {why}"));
            }
        }
        recording.redact_pointers = self.redact_pointers.clone();
        recording.drop_user_info = self.drop_user_info;
    }
}

const NOT_A_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// `resource` (the core group), `group/resource`, either part `*`.
fn resource(entry: &str) -> Result<(String, String), &'static str> {
    let (group, resource) = match entry.split_once('/') {
        Some((group, resource)) => (group, resource),
        None => ("", entry),
    };
    if entry == "*" {
        return Ok(("*".into(), "*".into()));
    }
    if resource != "*" && !is_dns_label(resource) {
        return Err(
            "must be RESOURCE or GROUP/RESOURCE (either may be *), the resource a lowercase RFC 1123 label",
        );
    }
    if !group.is_empty() && group != "*" && !is_dns_subdomain(group) {
        return Err(
            "must be RESOURCE or GROUP/RESOURCE (either may be *), the group a lowercase RFC 1123 subdomain",
        );
    }
    Ok((group.to_owned(), resource.to_owned()))
}

/// Why `pointer` is not an RFC 6901 JSON pointer to something inside the object, if it is not.
fn check_pointer(pointer: &str) -> Option<&'static str> {
    if !pointer.starts_with('/') || pointer == "/" {
        return Some("must be a JSON pointer into the object (RFC 6901), beginning with '/'");
    }
    let mut characters = pointer.chars();
    while let Some(character) = characters.next() {
        if character == '~' && !matches!(characters.next(), Some('0' | '1')) {
            return Some("'~' must be followed by '0' or '1' (RFC 6901)");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::tests::config;
    use super::*;

    fn recording(yaml: &str) -> Result<Recording, Vec<(String, String)>> {
        config(&format!("recording:\n{yaml}"))
            .settings()
            .map(|settings| settings.recording)
            .map_err(|findings| findings.into_iter().map(|f| (f.field, f.message)).collect())
    }

    #[test]
    fn the_section_is_read_with_its_defaults() {
        let unset = config("metadata: {name: g}").settings().unwrap().recording;
        assert_eq!(unset, Recording::default());
        assert_eq!(unset.directory, None, "off unless asked for");
        let read = recording(
            "  directory: /rec\n  sampleFraction: 0.5\n  resources: [pods, apps/deployments, 'example.com/*', '*']\n  \
             namespaces: [a]\n  excludeNamespaces: [kube-system]\n  maxFileBytes: 1Mi\n  maxTotalBytes: 2Mi\n  \
             redactPointers: [/spec/containers/0/env, /metadata/annotations/a~1b]\n  dropUserInfo: true",
        )
        .unwrap();
        assert_eq!(read.directory, Some(PathBuf::from("/rec")));
        assert_eq!(read.sample, Sample::HashBelow(1 << 63));
        let resources: Vec<(&str, &str)> =
            read.filter.resources.iter().map(|(g, r)| (g.as_str(), r.as_str())).collect();
        assert_eq!(resources, [("", "pods"), ("apps", "deployments"), ("example.com", "*"), ("*", "*")]);
        assert_eq!((read.max_file_bytes, read.max_total_bytes), (1 << 20, 2 << 20));
        assert_eq!(read.redact_pointers.len(), 2);
        assert!(read.drop_user_info);
        assert_eq!(recording("  sampleFraction: 1").unwrap().sample, Sample::All);
        assert_eq!(recording("  sampleFraction: 0").unwrap().sample, Sample::HashBelow(0));
    }

    /// Every wrong field of the section is named, not only the first.
    #[test]
    fn every_wrong_field_is_named() {
        let findings = recording(
            "  directory: ''\n  sampleFraction: 1.5\n  resources: [Pods, 'apps/', 'a/b/c']\n  \
             namespaces: [Team]\n  excludeNamespaces: ['']\n  maxFileBytes: 2Gi\n  maxTotalBytes: 1Ki\n  \
             redactPointers: [spec/env, '', /a~2b]",
        )
        .unwrap_err();
        let fields: Vec<&str> = findings.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "recording.maxFileBytes",
                "recording.maxTotalBytes",
                "recording.directory",
                "recording.sampleFraction",
                "recording.resources[0]",
                "recording.resources[1]",
                "recording.resources[2]",
                "recording.namespaces[0]",
                "recording.excludeNamespaces[0]",
                "recording.redactPointers[0]",
                "recording.redactPointers[1]",
                "recording.redactPointers[2]",
            ],
            "{findings:#?}"
        );
        assert_eq!(findings[3].1, "Invalid value: 1.5: must be between 0 and 1, inclusive");
        assert!(findings[11].1.contains("'~' must be followed"), "{findings:?}");
    }

    /// Through the real loader, each problem names the file, the object and the field, and
    /// an unknown field of the section is refused with its path and a did-you-mean.
    #[test]
    fn the_loader_names_the_file_object_and_field() {
        let text =
            format!("{}recording:\n  sampleFraction: 2\n  resourcs: [pods]\n", super::super::tests::GATEWAY);
        let error = super::super::tests::load(&[("gateway.yaml", &text)]).unwrap_err();
        let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 1, "{messages:#?}");
        assert!(
            messages[0].contains("gateway.yaml")
                && messages[0].ends_with(r#"GatewayConfig "g": recording.resourcs: unknown field "resourcs" (did you mean "resources"?)"#),
            "{messages:#?}"
        );
        let text = format!("{}recording:\n  sampleFraction: 2\n", super::super::tests::GATEWAY);
        let error = super::super::tests::load(&[("gateway.yaml", &text)]).unwrap_err();
        let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
        assert!(
            messages[0].contains("gateway.yaml")
                && messages[0].ends_with(r#"GatewayConfig "g": recording.sampleFraction: Invalid value: 2: must be between 0 and 1, inclusive"#),
            "{messages:#?}"
        );
    }

    #[test]
    fn the_filter_takes_what_it_lists() {
        let filter = Filter {
            resources: vec![("".into(), "pods".into()), ("apps".into(), "*".into())],
            namespaces: vec![],
            exclude_namespaces: vec!["kube-system".into()],
        };
        assert!(filter.takes("", "pods", "team-a"));
        assert!(filter.takes("apps", "deployments", "team-a"));
        assert!(!filter.takes("", "secrets", "team-a"));
        assert!(!filter.takes("", "pods", "kube-system"));
        let only = Filter { namespaces: vec!["team-a".into()], ..Filter::default() };
        assert!(only.takes("", "secrets", "team-a"));
        assert!(!only.takes("", "secrets", "team-b"));
        assert!(!only.takes("", "namespaces", ""), "cluster-scoped: not in a listed namespace");
    }

    /// The sample is decided by the uid alone, and is about the share asked for.
    #[test]
    fn the_sample_is_the_share_asked_for_and_the_same_for_a_uid() {
        let quarter = Sample::of(0.25);
        let uids: Vec<String> = (0..10_000).map(|i| format!("1f0e{i:04}-5c2d-4a8b-9d3e-{i:012}")).collect();
        let taken = uids.iter().filter(|uid| quarter.takes(uid)).count();
        assert!((2_200..=2_800).contains(&taken), "{taken} of 10000");
        assert!(uids.iter().all(|uid| quarter.takes(uid) == quarter.takes(uid)));
        assert!(uids.iter().all(|uid| Sample::All.takes(uid) && !Sample::of(0.0).takes(uid)));
    }
}
