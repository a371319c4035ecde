//! Custom resources served at several versions, learnt from the cluster's
//! CustomResourceDefinitions: what `matchPolicy: Equivalent` needs to know about CRDs
//! (src/config/equivalence.rs). Without it a webhook whose rules name one version of a CRD
//! would silently not match a request for another — where the API server calls it.
//!
//! Each CRD with two or more served versions becomes one entry (group, plural, kind, served
//! versions in `spec.versions` order); entries the `GatewayConfig` lists itself keep the
//! configured value. A change reloads the configuration like a file change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;

use super::mirror::Mirror;

use crate::config::equivalence::CustomResource;

/// The multi-version custom resources, as they change.
pub(crate) type Resources = watch::Receiver<Arc<Vec<CustomResource>>>;

/// Watches the CRDs forever, publishing the multi-version ones.
pub(crate) struct Discovery {
    api: Api<CustomResourceDefinition>,
    /// The multi-version CRDs by name, as last listed and watched.
    seen: Mutex<BTreeMap<String, CustomResource>>,
    resources: watch::Sender<Arc<Vec<CustomResource>>>,
    synced: watch::Sender<bool>,
}

impl Discovery {
    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            api: Api::all(client),
            seen: Mutex::new(BTreeMap::new()),
            resources: watch::Sender::new(Arc::new(Vec::new())),
            synced: watch::Sender::new(false),
        })
    }

    pub(crate) fn resources(&self) -> Resources {
        self.resources.subscribe()
    }

    /// Waits until the CRDs have been listed once, at most `timeout`.
    pub(crate) async fn synced(&self, timeout: Duration) -> anyhow::Result<()> {
        super::wait_synced(&self.synced, timeout, "the CustomResourceDefinitions").await
    }

    /// Keeps the resources current forever (`mirror.rs`).
    pub(crate) async fn run(self: Arc<Self>) {
        super::mirror::keep_watching_api(&*self, self.api.clone(), watcher::Config::default()).await
    }

    /// Changes the CRDs seen, and publishes the resources when they changed.
    fn change(&self, change: impl FnOnce(&mut BTreeMap<String, CustomResource>)) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut seen);
        let resources: Vec<CustomResource> = seen.values().cloned().collect();
        self.resources.send_if_modified(|current| {
            let changed = **current != resources;
            if changed {
                *current = Arc::new(resources);
            }
            changed
        });
    }
}

impl Mirror for Discovery {
    type Object = CustomResourceDefinition;
    type Entry = CustomResource;
    type Listed = BTreeMap<String, CustomResource>;

    /// Only a CRD serving two or more versions is kept.
    fn entry(&self, crd: CustomResourceDefinition) -> Option<CustomResource> {
        multi_version(&crd)
    }

    fn listed(&self, listed: Self::Listed) {
        self.change(|seen| *seen = listed);
        self.synced.send_replace(true);
    }

    fn applied(&self, name: String, resource: CustomResource) {
        self.change(|seen| {
            seen.insert(name, resource);
        });
    }

    fn removed(&self, name: &str) {
        self.change(|seen| {
            seen.remove(name);
        });
    }

    fn failed(&self, error: &watcher::Error) {
        tracing::warn!("CustomResourceDefinition watch failed, starting it again: {error}");
    }
}

/// The CRD as an equivalence entry, when it serves two or more versions.
fn multi_version(crd: &CustomResourceDefinition) -> Option<CustomResource> {
    let spec = &crd.spec;
    let versions: Vec<String> = spec.versions.iter().filter(|v| v.served).map(|v| v.name.clone()).collect();
    (versions.len() >= 2).then(|| CustomResource {
        group: spec.group.clone(),
        resource: spec.names.plural.clone(),
        kind: spec.names.kind.clone(),
        versions,
    })
}

#[cfg(test)]
mod tests {
    use futures_util::stream::{self, StreamExt as _};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::watcher::{self, Event};

    use super::super::mirror::{follow, unused_client};
    use super::Discovery;

    /// A CRD of `plural.example.com` serving `served` (and not serving `unserved`).
    fn crd(plural: &str, served: &[&str], unserved: &[&str]) -> CustomResourceDefinition {
        let version = |name: &&str, served: bool| serde_json::json!({"name": name, "served": served, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}});
        let versions: Vec<_> = served
            .iter()
            .map(|v| version(v, true))
            .chain(unserved.iter().map(|v| version(v, false)))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced", "versions": versions,
                     "names": {"plural": plural, "kind": "Thing"}},
        }))
        .unwrap()
    }

    /// What the reload task is sent: `plural [versions]`, one a resource.
    fn published(discovery: &Discovery) -> Vec<String> {
        let resources = discovery.resources().borrow().clone();
        resources.iter().map(|r| format!("{} {:?}", r.resource, r.versions)).collect()
    }

    #[tokio::test]
    async fn multi_version_crds_are_published_once_listed_and_follow_their_changes() {
        let discovery = Discovery::new(unused_client());
        let events: Vec<watcher::Result<Event<CustomResourceDefinition>>> = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(crd("widgets", &["v1", "v1beta1"], &[]))),
            Ok(Event::InitApply(crd("gadgets", &["v1"], &["v1beta1"]))),
        ];
        assert!(!follow(&*discovery, stream::iter(events).boxed()).await);
        assert!(!*discovery.synced.borrow(), "no list completed");
        assert!(published(&discovery).is_empty());

        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(crd("widgets", &["v1", "v1beta1"], &[]))),
            Ok(Event::InitApply(crd("gadgets", &["v1"], &["v1beta1"]))),
            Ok(Event::InitDone),
        ];
        assert!(follow(&*discovery, stream::iter(events).boxed()).await);
        assert!(*discovery.synced.borrow());
        assert_eq!(published(&discovery), [r#"widgets ["v1", "v1beta1"]"#]);

        let events = vec![
            Ok(Event::Apply(crd("gadgets", &["v1", "v2"], &[]))),
            Ok(Event::Apply(crd("widgets", &["v1"], &["v1beta1"]))),
        ];
        follow(&*discovery, stream::iter(events).boxed()).await;
        assert_eq!(published(&discovery), [r#"gadgets ["v1", "v2"]"#]);
        follow(
            &*discovery,
            stream::iter(vec![Ok(Event::Delete(crd("gadgets", &["v1", "v2"], &[])))]).boxed(),
        )
        .await;
        assert!(published(&discovery).is_empty());
    }
}
