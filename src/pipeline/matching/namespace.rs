//! The request's namespace as the matchers read it (docs/semantics.md §4.3): which labels a
//! namespaceSelector reads, the labels the review looked up (`Review::fetch_namespace`, once per
//! review, only when a webhook or policy whose rules match needs them), and the statuses a
//! request fails with when they could not be had — a webhook's and the policies' each as
//! upstream words them.

use std::sync::Arc;

use crate::config::selector::Labels;
use crate::pipeline::verdict;
use crate::review::decode::IncomingReview;
use crate::review::{Operation, Status};

/// The labels of the request's namespace, as far as they were found (§4.3).
#[derive(Clone, Debug)]
pub(crate) enum NamespaceLabels {
    /// Not looked up: nothing whose rules match needed them.
    NotNeeded,
    Found(Arc<Labels>),
    /// No such namespace; `live` when the API server said so (not the configuration).
    Missing {
        live: bool,
    },
    /// The API server could not be asked.
    Unavailable(String),
}

/// Which labels a webhook's namespaceSelector reads for a request (§4.3, upstream's
/// `pkg/admission/plugin/webhook/predicates/namespace/matcher.go`), by the resource received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A cluster-scoped object other than a namespace: never excluded, nothing read.
    Cluster,
    /// Creating or updating a namespace: the labels the request (and earlier patches) give it.
    Written,
    /// The labels of the stored namespace the request names.
    Stored,
}

impl Scope {
    pub(crate) fn of(review: &IncomingReview) -> Self {
        let namespaces = review.resource().resource == "namespaces";
        if review.request.namespace.is_empty() && !namespaces {
            Scope::Cluster
        } else if namespaces
            && review.request.sub_resource.is_empty()
            && matches!(review.operation(), Operation::Create | Operation::Update)
        {
            Scope::Written
        } else {
            Scope::Stored
        }
    }
}

/// Whether matching this request against a namespaceSelector reads the labels of a stored
/// namespace (not those of the object itself or none at all).
pub(crate) fn reads_namespace_labels(review: &IncomingReview) -> bool {
    Scope::of(review) == Scope::Stored
}

impl NamespaceLabels {
    /// The stored namespace's labels for the namespaceSelector of webhook `hook_name`, or the
    /// status the request fails with (once a rule of the webhook matched, §4.0.6): the 404 of
    /// a namespace that does not exist, the 500 when the API server could not say.
    pub(crate) fn for_webhook(&self, name: &str, hook_name: &str) -> Result<&Labels, Status> {
        match self {
            NamespaceLabels::Found(labels) => Ok(labels),
            NamespaceLabels::Missing { live } => {
                Err(verdict::namespace_not_found(name, (!live).then_some(hook_name)))
            }
            NamespaceLabels::Unavailable(message) => Err(verdict::internal_error(message)),
            // Looked up before matching whenever a rule matched and a selector reads them:
            // not reached.
            NamespaceLabels::NotNeeded => Err(verdict::internal_error("namespace labels were not looked up")),
        }
    }

    /// The failure of a namespaced request whose namespace cannot be had, once some policy
    /// binding matched (§3.5: the API server fetches the namespace then, and fails the request
    /// as it is when it cannot).
    pub(crate) fn for_policies(&self, request: &IncomingReview) -> Option<Status> {
        match self {
            // Not configured (outside cluster mode): the gateway cannot know the namespace, so
            // `namespaceObject` is null and a namespaceSelector fails as the matcher says
            // (docs/differences.md, "A policy's namespace outside cluster mode").
            NamespaceLabels::Missing { live: false } => None,
            NamespaceLabels::Missing { live: true } => {
                Some(verdict::namespace_not_found(&request.request.namespace, None))
            }
            NamespaceLabels::Unavailable(message) => Some(verdict::namespace_unavailable(message)),
            NamespaceLabels::NotNeeded | NamespaceLabels::Found(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_in(namespace: &str) -> IncomingReview {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "operation": "CREATE", "namespace": namespace, "name": "web",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "userInfo": {"username": "alice"},
            },
        });
        crate::review::decode::review(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_missing_namespace_is_the_api_servers_404_for_policies() {
        let request = pod_in("team-a");
        let status = NamespaceLabels::Missing { live: true }.for_policies(&request).expect("a failure");
        assert_eq!(status.code, Some(404));
        assert_eq!(status.message.as_deref(), Some(r#"namespaces "team-a" not found"#));
        assert_eq!(status.details, Some(json!({"name": "team-a", "kind": "namespaces"})));
        assert!(NamespaceLabels::NotNeeded.for_policies(&request).is_none());
        // Outside cluster mode an unconfigured namespace is unknown, not absent.
        assert!(NamespaceLabels::Missing { live: false }.for_policies(&request).is_none());
        // The API server's error, as it is.
        let unavailable = NamespaceLabels::Unavailable("boom".into()).for_policies(&request).unwrap();
        assert_eq!((unavailable.code, unavailable.message.as_deref()), (Some(500), Some("boom")));
    }

    #[test]
    fn a_missing_namespace_is_a_404_naming_the_webhook_when_only_configured_namespaces_are_known() {
        let live = NamespaceLabels::Missing { live: true }.for_webhook("ghost", "picky.example.com");
        let live = live.expect_err("a failure");
        assert_eq!(
            (live.code, live.message.as_deref()),
            (Some(404), Some(r#"namespaces "ghost" not found"#))
        );
        let configured = NamespaceLabels::Missing { live: false }.for_webhook("ghost", "picky.example.com");
        let message = configured.expect_err("a failure").message.unwrap();
        assert!(message
            .starts_with(r#"namespaces "ghost" not found (admission-gateway: webhook "picky.example.com""#));
        let unavailable = NamespaceLabels::Unavailable("boom".into()).for_webhook("ghost", "w").unwrap_err();
        assert_eq!(
            (unavailable.code, unavailable.message.as_deref()),
            (Some(500), Some("Internal error occurred: boom"))
        );
    }

    #[test]
    fn the_labels_a_selector_reads_depend_on_the_request() {
        let review = |resource: &str, namespace: &str, sub: &str, operation: &str| {
            let body = json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u", "operation": operation, "namespace": namespace, "name": "x",
                    "subResource": sub,
                    "kind": {"group": "", "version": "v1", "kind": "X"},
                    "resource": {"group": "", "version": "v1", "resource": resource},
                    "userInfo": {"username": "alice"},
                },
            });
            Scope::of(&crate::review::decode::review(body.to_string().as_bytes()).unwrap())
        };
        assert_eq!(review("nodes", "", "", "CREATE"), Scope::Cluster);
        assert_eq!(review("pods", "team", "", "CREATE"), Scope::Stored);
        assert_eq!(review("namespaces", "", "", "CREATE"), Scope::Written);
        assert_eq!(review("namespaces", "team", "", "UPDATE"), Scope::Written);
        assert_eq!(review("namespaces", "team", "", "DELETE"), Scope::Stored);
        assert_eq!(review("namespaces", "team", "finalize", "UPDATE"), Scope::Stored);
    }
}
