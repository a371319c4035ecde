//! Policy parameters, live: the objects of each kind a policy's `paramKind` names, mirrored by
//! a list-and-watch started the first time that kind is asked for, as the API server's policy
//! source starts one informer per parameter kind
//! (staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go).
//!
//! A review asks for the parameters of a kind through [`Params::ready`] (waits at most
//! [`SYNC_WAIT`] for the kind's first list, as the API server waits for its informer) and
//! [`Params::list`]. A kind discovery does not know is an error every matching review reports
//! as the API server does; the watch is tried again after [`RETRY`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::watcher;
use serde_json::Value;

use super::mirror::{self, Mirror};
use crate::config::policy::{Param, ParamSet};

/// How long a review waits for a parameter kind's first list (the API server's 1 s).
pub(crate) const SYNC_WAIT: Duration = Duration::from_secs(1);
/// How long after a failed discovery the kind is looked up again.
const RETRY: Duration = Duration::from_secs(10);

/// Every parameter kind asked for so far, by `apiVersion` and `kind`.
pub(crate) struct Params {
    client: kube::Client,
    kinds: Mutex<HashMap<(String, String), Arc<Kind>>>,
}

/// One parameter kind: its objects, each converted for CEL at most once per watch event.
struct Kind {
    /// `group/version, Kind=Kind`, as the API server names it in its errors.
    label: String,
    objects: RwLock<ParamSet>,
    synced: AtomicBool,
    /// Set once the first list completed.
    listed: tokio::sync::Notify,
    /// Why the kind cannot be watched (discovery does not know it), and since when.
    unresolved: Mutex<Option<(String, Instant)>>,
    /// Whether its objects live in namespaces, once discovery said.
    namespaced: std::sync::OnceLock<bool>,
}

impl Params {
    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self { client, kinds: Mutex::new(HashMap::new()) })
    }

    /// Waits (at most [`SYNC_WAIT`]) until each kind of `kinds` has been listed once or is
    /// known not to exist; starts their watches on first ask.
    pub(crate) async fn ready(&self, kinds: &[(String, String)]) {
        for (api_version, kind) in kinds {
            let kind = self.kind(api_version, kind);
            if kind.synced.load(Ordering::Acquire) {
                continue;
            }
            let listed = kind.listed.notified();
            if kind.synced.load(Ordering::Acquire)
                || kind.unresolved.lock().unwrap_or_else(|e| e.into_inner()).is_some()
            {
                continue;
            }
            let _ = tokio::time::timeout(SYNC_WAIT, listed).await;
        }
    }

    /// The objects of `api_version`/`kind` in `namespace` (empty for a cluster-scoped kind)
    /// that `name` names, or all of them, in name order; `Err` is the API server's
    /// configuration error for the kind.
    pub(crate) fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<Vec<Arc<Param>>, String> {
        let found = self.kind(api_version, kind);
        if let Some((error, _)) = found.unresolved.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(error.clone());
        }
        if !found.synced.load(Ordering::Acquire) {
            return Err(format!("paramKind kind `{}` not yet synced to use for admission", found.label));
        }
        let objects = found.objects.read().unwrap_or_else(|e| e.into_inner());
        Ok(objects.select(namespace, name))
    }

    /// Whether the objects of `api_version`/`kind` live in namespaces; `None` until discovery
    /// has said.
    pub(crate) fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.kind(api_version, kind).namespaced.get().copied()
    }

    /// The kind's mirror, its watch started if this is the first ask (or discovery failed
    /// long enough ago to try again).
    fn kind(&self, api_version: &str, kind: &str) -> Arc<Kind> {
        let key = (api_version.to_owned(), kind.to_owned());
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = kinds.get(&key) {
            let retry = found
                .unresolved
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|(_, since)| since.elapsed() >= RETRY);
            if !retry {
                return Arc::clone(found);
            }
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = Arc::new(Kind {
            label: format!(
                "{}, Kind={kind}",
                if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
            ),
            objects: RwLock::new(ParamSet::default()),
            synced: AtomicBool::new(false),
            listed: tokio::sync::Notify::new(),
            unresolved: Mutex::new(None),
            namespaced: std::sync::OnceLock::new(),
        });
        kinds.insert(key, Arc::clone(&found));
        let (client, watched) = (self.client.clone(), Arc::clone(&found));
        // On the runtime of the review that asked: the cluster's client lives on any runtime.
        tokio::spawn(async move { watched.run(client, gvk).await });
        found
    }
}

impl Kind {
    async fn run(self: Arc<Self>, client: kube::Client, gvk: GroupVersionKind) {
        let (resource, capabilities) = match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(kind = %self.label, "policy parameter kind not found by discovery: {error}");
                let message = format!("failed to find resource referenced by paramKind: '{}'", self.label);
                *self.unresolved.lock().unwrap_or_else(|e| e.into_inner()) = Some((message, Instant::now()));
                self.listed.notify_waiters();
                return;
            }
        };
        let _ = self.namespaced.set(matches!(capabilities.scope, Scope::Namespaced));
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let mirror = Watched { kind: &self, resource: &resource };
        mirror::keep_watching(&mirror, || watcher::watcher(api.clone(), watcher::Config::default())).await;
    }
}

/// The watch of one kind, as a [`Mirror`].
struct Watched<'a> {
    kind: &'a Kind,
    resource: &'a ApiResource,
}

impl Mirror for Watched<'_> {
    type Object = DynamicObject;
    type Entry = Param;
    type Listed = Listed;

    fn entry(&self, mut object: DynamicObject) -> Option<Param> {
        // Never read by a policy, often the larger part of an object.
        object.metadata.managed_fields = None;
        let mut value = serde_json::to_value(&object).ok()?;
        // `params.apiVersion` and `params.kind` are always there (the API server fills them in).
        value["apiVersion"] = Value::String(self.resource.api_version.clone());
        value["kind"] = Value::String(self.resource.kind.clone());
        Some(Param::of_object(Arc::new(value)))
    }

    fn key(&self, object: &DynamicObject) -> Option<String> {
        let name = object.metadata.name.as_deref()?;
        Some(match object.metadata.namespace.as_deref() {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        })
    }

    fn listed(&self, Listed(listed): Listed) {
        *self.kind.objects.write().unwrap_or_else(|e| e.into_inner()) = listed;
        self.kind.synced.store(true, Ordering::Release);
        self.kind.listed.notify_waiters();
    }

    fn applied(&self, _key: String, entry: Param) {
        self.kind.objects.write().unwrap_or_else(|e| e.into_inner()).insert(entry);
    }

    fn removed(&self, key: &str) {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        self.kind.objects.write().unwrap_or_else(|e| e.into_inner()).remove(namespace, name);
    }

    fn failed(&self, error: &watcher::Error) {
        tracing::warn!(kind = %self.kind.label, "policy parameter watch failed, starting it again: {error}");
    }
}

/// A completed list of one kind, keyed as [`Watched::key`] says (`namespace/name` or `name`,
/// the same as the objects' own namespace and name).
#[derive(Default)]
struct Listed(ParamSet);

impl Extend<(String, Param)> for Listed {
    fn extend<I: IntoIterator<Item = (String, Param)>>(&mut self, entries: I) {
        self.0.extend(entries.into_iter().map(|(_, param)| param));
    }
}
