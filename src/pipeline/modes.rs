//! How one matched webhook is run for one request: enforced, warn (a denial returned as a
//! warning), or shadow (off the critical path, `shadow.rs`); a canary webhook is enforced for
//! a stable share of objects and shadowed for the rest (docs/configuration.md, "Shadow,
//! canary and warn modes").

use crate::config::compile::Hook;
use crate::config::mode::Mode;
use crate::review::decode::IncomingReview;
use crate::review::Operation;

/// How one matched webhook is run for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallMode {
    Enforce,
    /// A denial is returned as a warning.
    Warn,
    /// A canary webhook enforced for this request.
    Canary,
    /// Called off the critical path (mode shadow, or a canary not enforced this time).
    Shadow(ShadowMode),
}

impl CallMode {
    /// `hook`'s mode for `request`; a canary is enforced for a stable share of objects, by its
    /// configuration.
    pub(crate) fn of(hook: &Hook, request: &IncomingReview) -> Self {
        Self::of_mode(hook.mode, &hook.configuration, request)
    }

    /// How something configured with `mode` runs for `request`: a webhook (its configuration's
    /// mode, `bucket` the configuration's name) or a policy (its own, `bucket` its name). A
    /// canary is enforced when the request's object falls below its percent in
    /// [`canary_bucket`] of `bucket`.
    pub(crate) fn of_mode(mode: Mode, bucket: &str, request: &IncomingReview) -> Self {
        match mode {
            Mode::Enforce => Self::Enforce,
            Mode::Warn => Self::Warn,
            Mode::Shadow => Self::Shadow(ShadowMode::Shadow),
            Mode::Canary(percent) if canary_bucket(bucket, request) < u64::from(percent) => Self::Canary,
            Mode::Canary(_) => Self::Shadow(ShadowMode::Canary),
        }
    }

    /// The `mode` label of logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
            Self::Canary => "canary",
            Self::Shadow(mode) => mode.as_str(),
        }
    }
}

/// Why a webhook is called in shadow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShadowMode {
    Shadow,
    Canary,
}

impl ShadowMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Shadow => "shadow",
            Self::Canary => "canary",
        }
    }
}

/// The canary bucket, 0–99, of the request's object for one configuration: FNV-1a of the
/// configuration name and `namespace/name` (the request uid for a CREATE whose name the API
/// server has yet to generate), so the same object always lands on the same side.
pub(crate) fn canary_bucket(configuration: &str, request: &IncomingReview) -> u64 {
    let r = &request.request;
    let key = if r.name.is_empty() && request.operation() == Operation::Create {
        r.uid.value.clone()
    } else {
        format!("{}/{}", r.namespace, r.name)
    };
    let bytes = configuration.bytes().chain([0]).chain(key.bytes());
    bytes.fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
        % 100
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(operation: &str, namespace: &str, name: &str, uid: &str) -> IncomingReview {
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid, "operation": operation, "namespace": namespace, "name": name,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "userInfo": {"username": "alice"},
            },
        });
        crate::review::decode::review(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn canary_buckets_are_stable_per_object_and_spread_over_objects() {
        let bucket = |configuration: &str, name: &str, uid: &str| {
            canary_bucket(configuration, &review("UPDATE", "default", name, uid))
        };
        // The same object lands in the same bucket whatever the request.
        assert_eq!(bucket("fleet", "web-1", "u1"), bucket("fleet", "web-1", "u2"));
        // A CREATE without a name (generateName) is placed by its uid.
        let unnamed = |uid: &str| canary_bucket("fleet", &review("CREATE", "default", "", uid));
        assert_eq!(unnamed("u1"), unnamed("u1"));
        let spread: std::collections::HashSet<u64> = (0..200).map(|i| unnamed(&format!("uid-{i}"))).collect();
        assert!(spread.len() > 50, "{spread:?}");
        // Over many objects, a quarter of the buckets are below 25.
        let below = (0..1000).filter(|i| bucket("fleet", &format!("web-{i}"), "u") < 25).count();
        assert!((180..=320).contains(&below), "{below}");
        // Another configuration splits the same objects differently.
        let differ = (0..100)
            .filter(|i| bucket("a", &format!("w{i}"), "u") != bucket("b", &format!("w{i}"), "u"))
            .count();
        assert!(differ > 50, "{differ}");
    }
}
