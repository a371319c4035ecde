//! The API server's `admissionregistration.k8s.io/v1` defaults, applied in this one place
//! (docs/semantics.md §1.1): the dispatcher only ever sees defaulted objects.

use super::manifest::{ApiVersion, LabelSelector, WebhookConfiguration, WebhookKind};

/// `failurePolicy` when unset.
pub(crate) const FAILURE_POLICY: &str = "Fail";
/// `matchPolicy` when unset.
pub(crate) const MATCH_POLICY: &str = "Equivalent";
/// `timeoutSeconds` when unset.
pub(crate) const TIMEOUT_SECONDS: i64 = 10;
/// `reinvocationPolicy` of a mutating webhook when unset.
pub(crate) const REINVOCATION_POLICY: &str = "Never";
/// A rule's `scope` when unset.
pub(crate) const SCOPE: &str = "*";
/// `clientConfig.service.port` when unset.
pub(crate) const SERVICE_PORT: i64 = 443;

/// The v1beta1 defaults that differ from v1's, as the API server applied them
/// (`pkg/apis/admissionregistration/v1beta1/defaults.go` in kubernetes/kubernetes).
mod v1beta1 {
    pub(super) const FAILURE_POLICY: &str = "Ignore";
    pub(super) const MATCH_POLICY: &str = "Exact";
    pub(super) const SIDE_EFFECTS: &str = "Unknown";
    pub(super) const TIMEOUT_SECONDS: i64 = 30;
    pub(super) const ADMISSION_REVIEW_VERSION: &str = "v1beta1";
}

/// Fills every unset field that the object's version defaults. In v1 `sideEffects` and
/// `admissionReviewVersions` have no default and stay unset (validation then requires them).
pub(crate) fn apply(config: &mut WebhookConfiguration) {
    let v1beta1 = config.version == ApiVersion::V1beta1;
    for hook in &mut config.webhooks {
        if v1beta1 {
            hook.failure_policy.get_or_insert_with(|| v1beta1::FAILURE_POLICY.into());
            hook.match_policy.get_or_insert_with(|| v1beta1::MATCH_POLICY.into());
            hook.side_effects.get_or_insert_with(|| v1beta1::SIDE_EFFECTS.into());
            hook.timeout_seconds.get_or_insert(v1beta1::TIMEOUT_SECONDS);
            hook.admission_review_versions
                .get_or_insert_with(|| vec![v1beta1::ADMISSION_REVIEW_VERSION.into()]);
        }
        hook.failure_policy.get_or_insert_with(|| FAILURE_POLICY.into());
        hook.match_policy.get_or_insert_with(|| MATCH_POLICY.into());
        hook.namespace_selector.get_or_insert_with(LabelSelector::default);
        hook.object_selector.get_or_insert_with(LabelSelector::default);
        hook.timeout_seconds.get_or_insert(TIMEOUT_SECONDS);
        if config.kind == WebhookKind::Mutating {
            hook.reinvocation_policy.get_or_insert_with(|| REINVOCATION_POLICY.into());
        }
        for rule in &mut hook.rules {
            rule.scope.get_or_insert_with(|| SCOPE.into());
        }
        if let Some(service) = &mut hook.client_config.service {
            service.port.get_or_insert(SERVICE_PORT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::manifest::{ObjectMeta, RuleWithOperations, ServiceReference, Webhook};

    fn bare(kind: WebhookKind) -> WebhookConfiguration {
        bare_in(kind, ApiVersion::V1)
    }

    fn bare_in(kind: WebhookKind, version: ApiVersion) -> WebhookConfiguration {
        let hook: Webhook = serde_json::from_value(serde_json::json!({
            "name": "a.example.com",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        }))
        .unwrap();
        WebhookConfiguration { kind, version, metadata: ObjectMeta::default(), webhooks: vec![hook] }
    }

    #[test]
    fn v1beta1_objects_get_the_defaults_the_api_server_gave_them() {
        let mut config = bare_in(WebhookKind::Mutating, ApiVersion::V1beta1);
        apply(&mut config);
        let hook = &config.webhooks[0];
        assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(hook.match_policy.as_deref(), Some("Exact"));
        assert_eq!(hook.side_effects.as_deref(), Some("Unknown"));
        assert_eq!(hook.timeout_seconds, Some(30));
        assert_eq!(hook.admission_review_versions, Some(vec!["v1beta1".to_owned()]));
        assert_eq!(hook.reinvocation_policy.as_deref(), Some("Never"));
        assert_eq!(hook.namespace_selector, Some(LabelSelector::default()));
    }

    #[test]
    fn unset_fields_get_the_v1_defaults() {
        let mut config = bare(WebhookKind::Mutating);
        apply(&mut config);
        let hook = &config.webhooks[0];
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"));
        assert_eq!(hook.namespace_selector, Some(LabelSelector::default()));
        assert_eq!(hook.object_selector, Some(LabelSelector::default()));
        assert_eq!(hook.timeout_seconds, Some(10));
        assert_eq!(hook.reinvocation_policy.as_deref(), Some("Never"));
        assert_eq!(hook.rules[0].scope.as_deref(), Some("*"));
        assert_eq!(hook.client_config.service.as_ref().and_then(|s| s.port), Some(443));
        assert_eq!(hook.side_effects, None, "sideEffects has no v1 default");
        assert_eq!(hook.admission_review_versions, None, "nor has admissionReviewVersions");
    }

    #[test]
    fn set_fields_are_kept_and_validating_hooks_get_no_reinvocation_policy() {
        let mut config = bare(WebhookKind::Validating);
        config.webhooks[0].failure_policy = Some("Ignore".into());
        config.webhooks[0].timeout_seconds = Some(3);
        config.webhooks[0]
            .rules
            .push(RuleWithOperations { scope: Some("Namespaced".into()), ..Default::default() });
        config.webhooks[0].client_config.service =
            Some(ServiceReference { port: Some(8443), ..Default::default() });
        apply(&mut config);
        let hook = &config.webhooks[0];
        assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(hook.timeout_seconds, Some(3));
        assert_eq!(hook.reinvocation_policy, None);
        assert_eq!(hook.rules[1].scope.as_deref(), Some("Namespaced"));
        assert_eq!(hook.client_config.service.as_ref().and_then(|s| s.port), Some(8443));
    }
}
