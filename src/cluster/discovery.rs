//! Custom resources served at several versions, learnt from the cluster's
//! CustomResourceDefinitions: what `matchPolicy: Equivalent` needs to know about CRDs
//! (src/config/equivalence.rs). Without it a webhook whose rules name one version of a CRD
//! would silently not match a request for another — where the API server calls it.
//!
//! Each CRD with two or more served versions becomes one entry (group, plural, kind, served
//! versions in `spec.versions` order); entries the `GatewayConfig` lists itself keep the
//! configured value. A change reloads the configuration like a file change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use crate::config::equivalence::CustomResource;

/// The multi-version custom resources, as they change.
pub(crate) type Resources = watch::Receiver<Arc<Vec<CustomResource>>>;

/// Watches the CRDs forever, publishing the multi-version ones.
pub(crate) struct Discovery {
    api: Api<CustomResourceDefinition>,
    resources: watch::Sender<Arc<Vec<CustomResource>>>,
    synced: watch::Sender<bool>,
}

impl Discovery {
    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            api: Api::all(client),
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

    pub(crate) async fn run(self: Arc<Self>) {
        let seen = tokio::sync::Mutex::new(BTreeMap::<String, CustomResource>::new());
        super::keep_watching(|| async { self.watch_once(&mut *seen.lock().await).await }).await
    }

    async fn watch_once(&self, seen: &mut BTreeMap<String, CustomResource>) -> bool {
        let mut events = watcher::watcher(self.api.clone(), watcher::Config::default()).boxed();
        let mut listing: Option<BTreeMap<String, CustomResource>> = None;
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Err(error) => {
                    tracing::warn!("CustomResourceDefinition watch failed, starting it again: {error}");
                    return listed;
                }
                Ok(Event::Init) => listing = Some(BTreeMap::new()),
                Ok(Event::InitApply(crd)) => {
                    if let (Some(list), Some(name)) = (listing.as_mut(), crd.metadata.name.clone()) {
                        if let Some(resource) = multi_version(&crd) {
                            list.insert(name, resource);
                        }
                    }
                }
                Ok(Event::InitDone) => {
                    if let Some(list) = listing.take() {
                        *seen = list;
                    }
                    listed = true;
                    self.publish(seen);
                    self.synced.send_replace(true);
                }
                Ok(Event::Apply(crd)) => {
                    if let Some(name) = crd.metadata.name.clone() {
                        match multi_version(&crd) {
                            Some(resource) => seen.insert(name, resource),
                            None => seen.remove(&name),
                        };
                        self.publish(seen);
                    }
                }
                Ok(Event::Delete(crd)) => {
                    if let Some(name) = &crd.metadata.name {
                        seen.remove(name);
                        self.publish(seen);
                    }
                }
            }
        }
        listed
    }

    fn publish(&self, seen: &BTreeMap<String, CustomResource>) {
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
