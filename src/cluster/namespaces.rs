//! Namespace labels, live: a metadata-only watch of every Namespace keeps name → labels (memory
//! proportional to the namespaces, nothing else of them kept), and a name the cache lacks is
//! asked of the API server once, however many reviews want it at the same moment, before a
//! review is answered "not found" — the API server's own namespace matcher does the same
//! (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go:
//! lister first, then a live GET).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use tokio::sync::OnceCell;

use crate::config::selector::Labels;

/// How long one live lookup of a namespace may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// What a live lookup found: the labels, `None` for a namespace that does not exist, or why
/// the API server could not be asked.
pub(crate) type Lookup = Result<Option<Arc<Labels>>, String>;

/// The live namespace cache.
pub(crate) struct Namespaces {
    /// Metadata-only: the watch and the lookups never carry a namespace's spec or status.
    api: Api<PartialObjectMeta<Namespace>>,
    lookup_api: Api<Namespace>,
    labels: RwLock<HashMap<String, Arc<Labels>>>,
    /// The first complete list has arrived.
    synced: AtomicBool,
    /// When the watch last failed and has not recovered since; `None` while it is healthy.
    broken_since: Mutex<Option<Instant>>,
    /// Watch failures (each is followed by a re-established watch, with backoff).
    restarts: AtomicU64,
    /// Live lookups sent to the API server.
    lookups: AtomicU64,
    /// Lookups in flight, one per name, shared by every review asking for it.
    inflight: Mutex<HashMap<String, Arc<OnceCell<Lookup>>>>,
}

/// The cache's health, for `/readyz?verbose` and `/metrics`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Health {
    pub(crate) synced: bool,
    pub(crate) namespaces: usize,
    /// How long the watch has been down, when it is.
    pub(crate) stale_for: Option<Duration>,
    pub(crate) restarts: u64,
    pub(crate) lookups: u64,
}

impl Namespaces {
    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            api: Api::all(client.clone()),
            lookup_api: Api::all(client),
            labels: RwLock::new(HashMap::new()),
            synced: AtomicBool::new(false),
            broken_since: Mutex::new(None),
            restarts: AtomicU64::new(0),
            lookups: AtomicU64::new(0),
            inflight: Mutex::new(HashMap::new()),
        })
    }

    /// The labels of namespace `name`: from the cache, else asked of the API server.
    pub(crate) async fn labels(&self, name: &str) -> Lookup {
        if let Some(labels) = self.cached(name) {
            return Ok(Some(labels));
        }
        let cell = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            inflight.entry(name.to_owned()).or_default().clone()
        };
        let found = cell.get_or_init(|| self.lookup(name)).await.clone();
        // The first of the waiters to finish forgets the lookup: the next review asks afresh
        // (by then the watch has normally delivered the namespace).
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.get(name).is_some_and(|current| Arc::ptr_eq(current, &cell)) {
            inflight.remove(name);
        }
        found
    }

    fn cached(&self, name: &str) -> Option<Arc<Labels>> {
        self.labels.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    async fn lookup(&self, name: &str) -> Lookup {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(LOOKUP_TIMEOUT, self.lookup_api.get_metadata_opt(name)).await {
            Ok(Ok(Some(found))) => Ok(Some(Arc::new(labels_of(&found)))),
            Ok(Ok(None)) => Ok(None),
            Ok(Err(error)) => Err(format!("getting namespace {name:?} from the API server: {error}")),
            Err(_) => Err(format!(
                "getting namespace {name:?} from the API server: no answer within {} s",
                LOOKUP_TIMEOUT.as_secs()
            )),
        }
    }

    pub(crate) fn health(&self) -> Health {
        let broken_since = *self.broken_since.lock().unwrap_or_else(|e| e.into_inner());
        Health {
            synced: self.synced.load(Ordering::SeqCst),
            namespaces: self.labels.read().unwrap_or_else(|e| e.into_inner()).len(),
            stale_for: broken_since.map(|since| since.elapsed()),
            restarts: self.restarts.load(Ordering::Relaxed),
            lookups: self.lookups.load(Ordering::Relaxed),
        }
    }

    /// Keeps the cache current forever: list, then watch. A failed watch is started afresh
    /// after a backoff, with a full list: only a completed list proves the cache current again
    /// (a resumed watch on a quiet cluster says nothing for minutes).
    pub(crate) async fn run(self: Arc<Self>) {
        super::keep_watching(|| self.watch_once()).await
    }

    /// One list-and-watch until it fails. `true` if it completed a list first.
    async fn watch_once(&self) -> bool {
        let mut events = watcher::watcher(self.api.clone(), watcher::Config::default()).boxed();
        // A list fills a fresh map, swapped in whole at its end: a namespace deleted while the
        // watch was down disappears then.
        let mut listing: Option<HashMap<String, Arc<Labels>>> = None;
        let mut listed = false;
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    self.restarts.fetch_add(1, Ordering::Relaxed);
                    let mut broken = self.broken_since.lock().unwrap_or_else(|e| e.into_inner());
                    broken.get_or_insert_with(Instant::now);
                    tracing::warn!("namespace watch failed, starting it again: {error}");
                    return listed;
                }
            };
            match event {
                Event::Init => listing = Some(HashMap::new()),
                Event::InitApply(namespace) => {
                    if let (Some(list), Some(name)) = (listing.as_mut(), namespace.metadata.name.clone()) {
                        list.insert(name, Arc::new(labels_of(&namespace)));
                    }
                }
                Event::InitDone => {
                    if let Some(list) = listing.take() {
                        let count = list.len();
                        *self.labels.write().unwrap_or_else(|e| e.into_inner()) = list;
                        if !self.synced.swap(true, Ordering::SeqCst) {
                            tracing::info!(namespaces = count, "namespace cache synced");
                        }
                    }
                    listed = true;
                    self.healthy();
                }
                Event::Apply(namespace) => {
                    if let Some(name) = namespace.metadata.name.clone() {
                        let labels = Arc::new(labels_of(&namespace));
                        self.labels.write().unwrap_or_else(|e| e.into_inner()).insert(name, labels);
                    }
                }
                Event::Delete(namespace) => {
                    if let Some(name) = &namespace.metadata.name {
                        self.labels.write().unwrap_or_else(|e| e.into_inner()).remove(name);
                    }
                }
            }
        }
        listed
    }

    fn healthy(&self) {
        let mut broken = self.broken_since.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(since) = broken.take() {
            tracing::info!(down_ms = since.elapsed().as_millis() as u64, "namespace watch re-established");
        }
    }
}

fn labels_of(namespace: &PartialObjectMeta<Namespace>) -> Labels {
    namespace.metadata.labels.clone().unwrap_or_default().into_iter().collect()
}
