//! What a review leaves behind besides its verdict: audit annotations (§14) and warnings (§13),
//! recorded with the API server's rules and encoded for the answer (docs/operations.md, "Audit
//! annotations and warnings").

use std::collections::{BTreeMap, HashSet};

/// Warning budget of the API server's per-request recorder, in runes.
const WARNINGS_TOTAL_RUNES: usize = 4096;
/// Length each warning is cut to once the budget is exceeded.
const WARNING_TRUNCATED_RUNES: usize = 256;
/// Longest annotation key the gateway can return (the API server prefixes it with our name).
const MAX_ANNOTATION_KEY: usize = 63;

/// Annotations and warnings of one review.
#[derive(Debug, Default)]
pub(crate) struct Records {
    /// Full keys (`A/B`); the first value written wins.
    annotations: BTreeMap<String, String>,
    warnings: Warnings,
}

impl Records {
    /// Records `key: value` if the key is a valid qualified name and not already set (§14.1).
    pub(crate) fn annotate(&mut self, key: String, value: String) {
        if !valid_annotation_key(&key) {
            tracing::debug!(key = %crate::logging::Untrusted(&key), "audit annotation dropped: invalid key");
            return;
        }
        self.annotations.entry(key).or_insert(value);
    }

    /// A webhook's `auditAnnotations`, stored as `<hook name>/<key>` (§14.2).
    pub(crate) fn webhook_annotations(
        &mut self,
        hook_name: &str,
        annotations: Option<BTreeMap<String, String>>,
    ) {
        for (key, value) in annotations.into_iter().flatten() {
            self.annotate(format!("{hook_name}/{key}"), value);
        }
    }

    pub(crate) fn warn(&mut self, warnings: Option<Vec<String>>) {
        for text in warnings.into_iter().flatten() {
            self.warnings.add(text);
        }
    }

    /// Every annotation under its full key, as the `review` trace shows it.
    pub(crate) fn annotations(&self) -> &BTreeMap<String, String> {
        &self.annotations
    }

    /// Annotations as returned to the API server: `A/B` → `A_B`, shortened past 63 characters.
    pub(crate) fn encoded_annotations(&self) -> BTreeMap<String, String> {
        self.annotations.iter().map(|(key, value)| (encode_key(key), value.clone())).collect()
    }

    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warnings.recorded.clone()
    }
}

/// `A/B` → `A_B`; a longer key keeps its head and gets a stable hash of the whole key.
pub(crate) fn encode_key(key: &str) -> String {
    let encoded = key.replacen('/', "_", 1);
    if encoded.len() <= MAX_ANNOTATION_KEY {
        return encoded;
    }
    let hash = format!("{:016x}", fnv1a(key.as_bytes()));
    let head_len = MAX_ANNOTATION_KEY - hash.len() - 1;
    let head = encoded[..head_len].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let short = format!("{head}-{hash}");
    tracing::info!(key, short, "audit annotation key shortened");
    short
}

/// FNV-1a, 64 bits: stable across builds and platforms, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

/// A qualified name with a prefix: `<DNS-1123 subdomain>/<name>` (§14.1).
fn valid_annotation_key(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return false;
    };
    let dns_label = |label: &str| {
        !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    let prefix_ok = prefix.len() <= 253 && prefix.split('.').all(dns_label);
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    prefix_ok && name_ok
}

/// The API server's per-request warning recorder (§13.3).
#[derive(Debug, Default)]
struct Warnings {
    recorded: Vec<String>,
    seen: HashSet<String>,
    written: usize,
    truncating: bool,
}

impl Warnings {
    fn add(&mut self, text: String) {
        if text.is_empty()
            || (self.written >= WARNINGS_TOTAL_RUNES && self.truncating)
            || self.seen.contains(&text)
        {
            return;
        }
        self.seen.insert(text.clone());
        let mut text = text;
        let mut runes = text.chars().count();
        if self.truncating && runes > WARNING_TRUNCATED_RUNES {
            text = text.chars().take(WARNING_TRUNCATED_RUNES).collect();
            runes = WARNING_TRUNCATED_RUNES;
        }
        if text.chars().any(char::is_control) {
            return;
        }
        if self.written + runes <= WARNINGS_TOTAL_RUNES || self.truncating {
            self.written += runes;
            self.recorded.push(text);
            return;
        }
        // Over budget: truncate everything recorded so far, then add this one truncated.
        self.truncating = true;
        self.written = 0;
        for recorded in &mut self.recorded {
            if recorded.chars().count() > WARNING_TRUNCATED_RUNES {
                *recorded = recorded.chars().take(WARNING_TRUNCATED_RUNES).collect();
            }
            self.written += recorded.chars().count();
        }
        self.seen.remove(&text);
        self.add(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_keys_follow_the_apiservers_rules() {
        let mut records = Records::default();
        records.annotate("mutation.webhook.admission.k8s.io/round_0_index_1".into(), "a".into());
        records.annotate("mutation.webhook.admission.k8s.io/round_0_index_1".into(), "b".into());
        records.webhook_annotations(
            "label.example.com",
            Some([("ok".into(), "1".into()), ("a/b".into(), "2".into()), ("*".into(), "3".into())].into()),
        );
        records.webhook_annotations("Bad_Name", Some([("k".into(), "4".into())].into()));
        let keys: Vec<_> = records.annotations().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(keys, ["label.example.com/ok=1", "mutation.webhook.admission.k8s.io/round_0_index_1=a"]);
        let encoded = records.encoded_annotations();
        assert_eq!(
            encoded.keys().collect::<Vec<_>>(),
            ["label.example.com_ok", "mutation.webhook.admission.k8s.io_round_0_index_1"]
        );
    }

    #[test]
    fn long_keys_are_shortened_stably() {
        let fits = "failed-open.mutation.webhook.admission.k8s.io/round_1_index_12";
        assert_eq!(encode_key(fits), "failed-open.mutation.webhook.admission.k8s.io_round_1_index_12");
        let key = "image-policy.platform.example.com/verified-signature-digest-sha256";
        let short = encode_key(key);
        assert_eq!(short.len(), 63, "{short}");
        assert_eq!(short, encode_key(key));
        assert_ne!(short, encode_key("image-policy.platform.example.com/verified-signature-digest-sha512"));
        assert!(short.starts_with("image-policy.platform.example.com_verified-"), "{short}");
    }

    #[test]
    fn warnings_are_deduplicated_filtered_and_truncated_past_the_budget() {
        let mut records = Records::default();
        records.warn(Some(vec!["a".into(), "a".into(), String::new(), "bell\u{7}".into(), "b".into()]));
        assert_eq!(records.warnings(), ["a", "b"]);
        let long = "x".repeat(4000);
        records.warn(Some(vec![long.clone(), "y".repeat(300)]));
        let warnings = records.warnings();
        assert_eq!(warnings.len(), 4);
        assert_eq!(warnings[2].chars().count(), 256, "recorded warnings are cut once the budget is exceeded");
        assert_eq!(warnings[3].chars().count(), 256);
    }
}
