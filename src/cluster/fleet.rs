//! The fleet's manifests from ConfigMaps: every ConfigMap of one namespace whose labels match
//! `--fleet-selector` contributes its `.yaml`, `.yml` and `.json` keys as configuration files
//! named `configmap/NAMESPACE/NAME/KEY`, in name then key order, after the `--config` files.
//! The reload task validates them with the files and swaps them in together (a refused
//! configuration keeps the last good one serving); the problems of a refused one are posted as
//! Warning Events on the ConfigMaps they are in.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use tokio::sync::watch;

use super::mirror::Mirror;

use crate::config::load::Text;
use crate::config::ConfigError;

const EXTENSIONS: [&str; 3] = [".yaml", ".yml", ".json"];
/// The Events API's limit on a note.
const MAX_NOTE_BYTES: usize = 1024;

/// One fleet ConfigMap as last seen.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    reference: ObjectReference,
    data: BTreeMap<String, String>,
}

/// The fleet ConfigMaps, watched.
pub(crate) struct Fleet {
    api: Api<ConfigMap>,
    namespace: String,
    selector: String,
    /// The fleet ConfigMaps by name, as last listed and watched.
    seen: Mutex<BTreeMap<String, Seen>>,
    texts: watch::Sender<Arc<Vec<Text>>>,
    /// Which ConfigMap each text came from, to put Events on.
    origins: Mutex<HashMap<PathBuf, ObjectReference>>,
    recorder: Recorder,
    synced: watch::Sender<bool>,
}

impl Fleet {
    pub(crate) fn new(client: kube::Client, namespace: &str, selector: &str) -> Arc<Self> {
        let reporter = Reporter {
            controller: "admission-gateway".into(),
            instance: std::env::var("POD_NAME").ok().or_else(hostname),
        };
        Arc::new(Self {
            api: Api::namespaced(client.clone(), namespace),
            namespace: namespace.to_owned(),
            selector: selector.to_owned(),
            seen: Mutex::new(BTreeMap::new()),
            texts: watch::Sender::new(Arc::new(Vec::new())),
            origins: Mutex::new(HashMap::new()),
            recorder: Recorder::new(client, reporter),
            synced: watch::Sender::new(false),
        })
    }

    /// The configurations, as they change.
    pub(crate) fn texts(&self) -> watch::Receiver<Arc<Vec<Text>>> {
        self.texts.subscribe()
    }

    /// Waits until the ConfigMaps have been listed once, at most `timeout`.
    pub(crate) async fn synced(&self, timeout: Duration) -> anyhow::Result<()> {
        let what =
            format!("the fleet ConfigMaps (namespace {:?}, selector {:?})", self.namespace, self.selector);
        super::wait_synced(&self.synced, timeout, &what).await
    }

    /// Keeps the texts current forever (`mirror.rs`): a failed watch starts again, with a
    /// full list, after a backoff.
    pub(crate) async fn run(self: Arc<Self>) {
        let config = watcher::Config::default().labels(&self.selector);
        super::mirror::keep_watching_api(&*self, self.api.clone(), config).await
    }

    /// Changes the ConfigMaps seen, and sends the texts to the reload task when they changed.
    fn change(&self, change: impl FnOnce(&mut BTreeMap<String, Seen>)) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut seen);
        let mut texts = Vec::new();
        let mut origins = HashMap::new();
        for (name, entry) in seen.iter() {
            for (key, text) in &entry.data {
                if !EXTENSIONS.iter().any(|extension| key.ends_with(extension)) {
                    continue;
                }
                let path = PathBuf::from(format!("configmap/{}/{name}/{key}", self.namespace));
                origins.insert(path.clone(), entry.reference.clone());
                texts.push(Text { name: path, text: text.clone() });
            }
        }
        *self.origins.lock().unwrap_or_else(|e| e.into_inner()) = origins;
        self.texts.send_if_modified(|current| {
            let changed = **current != texts;
            if changed {
                *current = Arc::new(texts);
            }
            changed
        });
    }

    /// Posts a Warning Event on every ConfigMap `error` found a problem in.
    pub(crate) async fn report(&self, error: &ConfigError) {
        let mut by_map: BTreeMap<String, (ObjectReference, Vec<String>)> = BTreeMap::new();
        {
            let origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
            for problem in error.problems.iter().filter(|p| p.severity == crate::config::Severity::Error) {
                if let Some(reference) = origins.get(&problem.file) {
                    let name = reference.name.clone().unwrap_or_default();
                    let entry = by_map.entry(name).or_insert_with(|| (reference.clone(), Vec::new()));
                    entry.1.push(problem.to_string());
                }
            }
        }
        for (name, (reference, problems)) in by_map {
            let count = problems.len();
            let mut note = format!(
                "{count} problem(s); the last good configuration keeps serving: {}",
                problems.join("; ")
            );
            truncate(&mut note, MAX_NOTE_BYTES);
            let event = KubeEvent {
                type_: EventType::Warning,
                reason: "InvalidFleetConfiguration".into(),
                note: Some(note),
                action: "Reload".into(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &reference).await {
                tracing::warn!(configmap = %name, "could not post an Event on the fleet ConfigMap: {error}");
            }
        }
    }
}

impl Mirror for Fleet {
    type Object = ConfigMap;
    type Entry = Seen;
    type Listed = BTreeMap<String, Seen>;

    fn entry(&self, map: ConfigMap) -> Option<Seen> {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(map.metadata.name.clone()?),
            namespace: map.metadata.namespace.clone(),
            uid: map.metadata.uid.clone(),
            resource_version: map.metadata.resource_version.clone(),
            field_path: None,
        };
        Some(Seen { reference, data: map.data.unwrap_or_default() })
    }

    fn listed(&self, listed: Self::Listed) {
        self.change(|seen| *seen = listed);
        self.synced.send_replace(true);
    }

    fn applied(&self, name: String, entry: Seen) {
        self.change(|seen| {
            seen.insert(name, entry);
        });
    }

    fn removed(&self, name: &str) {
        self.change(|seen| {
            seen.remove(name);
        });
    }

    fn failed(&self, error: &watcher::Error) {
        tracing::warn!("fleet ConfigMap watch failed, starting it again: {error}");
    }
}

/// Cuts `text` to at most `limit` bytes, on a character boundary, marking the cut.
fn truncate(text: &mut String, limit: usize) {
    const MARK: &str = " …";
    if text.len() <= limit {
        return;
    }
    let mut end = limit - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/etc/hostname").ok().map(|name| name.trim().to_owned()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use futures_util::stream::{self, StreamExt as _};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::watcher::{self, Event};

    use super::super::mirror::{follow, unused_client};
    use super::{truncate, Fleet};

    fn map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("gateway".to_owned()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>(),
            ),
            ..ConfigMap::default()
        }
    }

    /// What the reload task is sent: `name: text`, and which ConfigMap each came from.
    fn published(fleet: &Fleet) -> Vec<String> {
        let texts = fleet.texts().borrow().clone();
        let origins = fleet.origins.lock().unwrap();
        texts
            .iter()
            .map(|t| {
                format!(
                    "{}: {} (from {:?})",
                    t.name.display(),
                    t.text,
                    origins[&t.name].uid.as_deref().unwrap()
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn the_configmaps_texts_are_published_once_listed_in_name_then_key_order_and_follow_changes() {
        let fleet = Fleet::new(unused_client(), "gateway", "fleet=yes");
        let events: Vec<watcher::Result<Event<ConfigMap>>> = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(map("b", &[("fleet.yaml", "B"), ("notes.txt", "not read")]))),
            Ok(Event::InitApply(map("a", &[("z.json", "AZ"), ("y.yml", "AY")]))),
            Ok(Event::InitDone),
        ];
        assert!(follow(&*fleet, stream::iter(events).boxed()).await);
        assert!(*fleet.synced.borrow());
        assert_eq!(
            published(&fleet),
            [
                "configmap/gateway/a/y.yml: AY (from \"uid-a\")",
                "configmap/gateway/a/z.json: AZ (from \"uid-a\")",
                "configmap/gateway/b/fleet.yaml: B (from \"uid-b\")",
            ]
        );
        let events = vec![
            Ok(Event::Apply(map("a", &[("y.yml", "AY2")]))),
            Ok(Event::Delete(map("b", &[]))),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Apply(map("c", &[("c.yaml", "after the failure")]))),
        ];
        assert!(!follow(&*fleet, stream::iter(events).boxed()).await);
        assert_eq!(published(&fleet), ["configmap/gateway/a/y.yml: AY2 (from \"uid-a\")"]);
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        let mut note = "é".repeat(600);
        truncate(&mut note, 1024);
        assert!(note.len() <= 1024, "{}", note.len());
        assert!(note.ends_with(" …"));
        let mut short = "fine".to_owned();
        truncate(&mut short, 1024);
        assert_eq!(short, "fine");
    }
}
