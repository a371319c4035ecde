//! The real control plane (`support::control_plane`, etcd + kube-apiserver v1.20.2 on loopback)
//! works as later end-to-end scenarios need it: kubectl as several identities, RBAC deciding
//! what the gateway's ServiceAccount may read, and the API server calling a loopback HTTPS
//! webhook whose `caBundle` is the test CA.
//! The control plane is provisioned on first use (`support/provision.rs`).

use std::time::Duration;

use tokio::time::Instant;

use serde_json::Value;

use crate::support::control_plane::{ControlPlane, Identity, GATEWAY_USER, KUBERNETES_VERSION};
use crate::support::{self, MockWebhook};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn kubectl_as_admin_alice_and_the_gateway_is_decided_by_rbac() {
    let plane = ControlPlane::start().await;

    // The version build.sh builds; /version is public to any authenticated user.
    let (status, version) = plane.get(Identity::Alice, "/version").await;
    assert_eq!(status, http::StatusCode::OK, "{version}");
    let version: Value = serde_json::from_str(&version).expect("version JSON");
    assert_eq!(version["gitVersion"], KUBERNETES_VERSION);

    // The admin creates a labelled namespace and reads it back.
    plane
        .apply_ok(
            Identity::Admin,
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels:\n    tier: gold\n",
        )
        .await;
    let namespace: Value = serde_json::from_str(
        &plane.kubectl_ok(Identity::Admin, &["get", "namespace", "team-a", "-o", "json"]).await,
    )
    .expect("namespace JSON");
    assert_eq!(namespace["metadata"]["labels"]["tier"], "gold");
    assert_eq!(
        namespace["metadata"]["labels"]["kubernetes.io/metadata.name"],
        Value::Null,
        "not before 1.21"
    );

    // Alice is authenticated but granted nothing.
    let denied = plane.kubectl(Identity::Alice, &["get", "namespaces"]).await;
    assert!(!denied.status.success());
    let stderr = text(&denied.stderr);
    assert!(
        stderr.contains(r#"namespaces is forbidden: User "alice" cannot list resource "namespaces""#),
        "{stderr}"
    );
    let can_i = plane.kubectl(Identity::Alice, &["auth", "can-i", "list", "namespaces"]).await;
    assert_eq!(text(&can_i.stdout).trim(), "no");

    // The gateway's ServiceAccount neither, until a ClusterRole is bound to it.
    let before = plane.kubectl(Identity::Gateway, &["get", "namespaces"]).await;
    assert!(!before.status.success());
    assert!(
        text(&before.stderr).contains(&format!(r#"User "{GATEWAY_USER}" cannot list"#)),
        "{}",
        text(&before.stderr)
    );
    plane
        .apply_ok(
            Identity::Admin,
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: admission-gateway-namespaces
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: admission-gateway-namespaces
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: admission-gateway-namespaces
subjects:
- kind: ServiceAccount
  namespace: admission-gateway
  name: admission-gateway
"#,
        )
        .await;
    // RBAC reads bindings from an informer: allow it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let output = plane.kubectl(Identity::Gateway, &["get", "namespaces", "-o", "name"]).await;
        if output.status.success() || Instant::now() >= deadline {
            break output;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (granted, listed) = (listed.status.success(), text(&listed.stdout));
    assert!(granted, "the gateway still cannot list namespaces");
    assert!(listed.lines().any(|line| line == "namespace/team-a"), "{listed}");
    // list and watch only: not get, and nothing for Alice.
    let get = plane.kubectl(Identity::Gateway, &["auth", "can-i", "get", "namespaces"]).await;
    assert_eq!(text(&get.stdout).trim(), "no");
    let alice = plane.kubectl(Identity::Alice, &["auth", "can-i", "list", "namespaces"]).await;
    assert_eq!(text(&alice.stdout).trim(), "no");
}

#[tokio::test]
async fn the_api_server_calls_a_loopback_webhook_and_relays_its_denial() {
    let webhook = MockWebhook::denying("configmaps are closed today").spawn().await;
    let plane = ControlPlane::start().await;

    plane
        .apply_ok(
            Identity::Admin,
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: guarded\n  labels:\n    guarded: \"yes\"\n\
             ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: open\n",
        )
        .await;
    plane
        .apply_ok(
            Identity::Admin,
            &format!(
                r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny-configmaps
webhooks:
- name: deny.admission-gateway.test
  clientConfig:
    url: {url}
    caBundle: {ca_bundle}
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [configmaps]
  namespaceSelector:
    matchLabels:
      guarded: "yes"
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
"#,
                url = webhook.url(),
                ca_bundle = support::ca().ca_bundle(),
            ),
        )
        .await;

    // The API server picks up the registration from an informer: retry until it is in force.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut attempt = 0;
    let (denied, stderr) = loop {
        attempt += 1;
        let name = format!("probe-{attempt}");
        let output = plane.kubectl(Identity::Admin, &["create", "configmap", &name, "-n", "guarded"]).await;
        if !output.status.success() || Instant::now() >= deadline {
            break (!output.status.success(), text(&output.stderr));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(denied, "configmaps were still created in `guarded`");
    assert!(
        stderr.contains(
            r#"admission webhook "deny.admission-gateway.test" denied the request: configmaps are closed today"#
        ),
        "{stderr}"
    );

    let call = webhook.requests().pop().expect("the webhook was called");
    assert_eq!(call.path, "/webhook");
    assert_eq!(call.timeout.as_deref(), Some("5s"));
    assert_eq!(call.review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(call.review["request"]["kind"]["kind"], "ConfigMap");
    assert_eq!(call.review["request"]["namespace"], "guarded");
    assert_eq!(call.review["request"]["userInfo"]["username"], "admin");

    // Outside the selector the webhook is not called.
    let calls = webhook.calls();
    plane.kubectl_ok(Identity::Admin, &["create", "configmap", "free", "-n", "open"]).await;
    assert_eq!(webhook.calls(), calls);
}
