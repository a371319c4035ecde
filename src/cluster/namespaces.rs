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

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::watcher;
use tokio::sync::OnceCell;

use super::mirror::Mirror;
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
            Ok(Ok(Some(found))) => Ok(Some(Arc::new(found.metadata.labels.unwrap_or_default()))),
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

    /// Keeps the cache current forever: list, then watch (`mirror.rs`). A failed watch is
    /// started afresh after a backoff, with a full list: only a completed list proves the cache
    /// current again (a resumed watch on a quiet cluster says nothing for minutes).
    pub(crate) async fn run(self: Arc<Self>) {
        super::mirror::keep_watching_api(&*self, self.api.clone(), watcher::Config::default()).await
    }

    fn healthy(&self) {
        let mut broken = self.broken_since.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(since) = broken.take() {
            tracing::info!(down_ms = since.elapsed().as_millis() as u64, "namespace watch re-established");
        }
    }
}

/// The cache is the namespaces' labels by name; a list fills a fresh map, swapped in whole at
/// its end, so a namespace deleted while the watch was down disappears then.
impl Mirror for Namespaces {
    type Object = PartialObjectMeta<Namespace>;
    type Entry = Arc<Labels>;
    type Listed = HashMap<String, Arc<Labels>>;

    fn entry(&self, namespace: PartialObjectMeta<Namespace>) -> Option<Arc<Labels>> {
        Some(Arc::new(namespace.metadata.labels.unwrap_or_default()))
    }

    fn listed(&self, listed: Self::Listed) {
        let count = listed.len();
        *self.labels.write().unwrap_or_else(|e| e.into_inner()) = listed;
        if !self.synced.swap(true, Ordering::SeqCst) {
            tracing::info!(namespaces = count, "namespace cache synced");
        }
        self.healthy();
    }

    fn applied(&self, name: String, labels: Arc<Labels>) {
        self.labels.write().unwrap_or_else(|e| e.into_inner()).insert(name, labels);
    }

    fn removed(&self, name: &str) {
        self.labels.write().unwrap_or_else(|e| e.into_inner()).remove(name);
    }

    /// Counted (`restarts`), and the cache is stale from the first failure until a list
    /// completes again.
    fn failed(&self, error: &watcher::Error) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        let mut broken = self.broken_since.lock().unwrap_or_else(|e| e.into_inner());
        broken.get_or_insert_with(Instant::now);
        tracing::warn!("namespace watch failed, starting it again: {error}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use futures_util::stream::{self, StreamExt as _};
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{ObjectMeta, PartialObjectMeta, PartialObjectMetaExt as _};
    use kube::runtime::watcher::{self, Event};

    use super::super::mirror::{follow, unused_client};
    use super::Namespaces;

    fn namespace(name: &str, team: &str) -> PartialObjectMeta<Namespace> {
        let labels = BTreeMap::from([("team".to_owned(), team.to_owned())]);
        ObjectMeta { name: Some(name.to_owned()), labels: Some(labels), ..ObjectMeta::default() }
            .into_response_partial()
    }

    type Events = Vec<watcher::Result<Event<PartialObjectMeta<Namespace>>>>;

    /// Readiness and the cache's metrics through a failed first list, a list, changes, a
    /// failure after them, and the list that recovers.
    #[tokio::test]
    async fn the_cache_is_ready_once_listed_and_stale_from_a_failure_until_the_next_list() {
        let namespaces = Namespaces::new(unused_client());
        let failed_list: Events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(namespace("a", "x"))),
            Err(watcher::Error::NoResourceVersion),
        ];
        assert!(!follow(&*namespaces, stream::iter(failed_list).boxed()).await);
        let health = namespaces.health();
        assert_eq!((health.synced, health.namespaces, health.restarts), (false, 0, 1));
        assert!(health.stale_for.is_some(), "down since the failure");

        let listed: Events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(namespace("a", "x"))),
            Ok(Event::InitApply(namespace("b", "y"))),
            Ok(Event::InitDone),
        ];
        assert!(follow(&*namespaces, stream::iter(listed).boxed()).await);
        let health = namespaces.health();
        assert_eq!((health.synced, health.namespaces, health.restarts), (true, 2, 1));
        assert!(health.stale_for.is_none(), "a completed list proves the cache current");

        let changes_then_failure: Events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(namespace("b", "y"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(namespace("c", "z"))),
            Ok(Event::Apply(namespace("b", "w"))),
            Err(watcher::Error::NoResourceVersion),
        ];
        assert!(follow(&*namespaces, stream::iter(changes_then_failure).boxed()).await);
        let health = namespaces.health();
        assert_eq!((health.synced, health.namespaces, health.restarts), (true, 2, 2));
        assert!(health.stale_for.is_some());
        assert!(namespaces.cached("a").is_none(), "gone from the relist");
        assert_eq!(namespaces.cached("b").unwrap().get("team").map(String::as_str), Some("w"));
        assert_eq!(namespaces.cached("c").unwrap().get("team").map(String::as_str), Some("z"));
        assert_eq!(namespaces.labels("c").await.unwrap().unwrap().get("team").map(String::as_str), Some("z"));

        let deleted: Events = vec![Ok(Event::Delete(namespace("c", "z")))];
        assert!(!follow(&*namespaces, stream::iter(deleted).boxed()).await);
        assert!(namespaces.cached("c").is_none());
        assert!(namespaces.health().stale_for.is_some(), "only a completed list ends staleness");
    }
}
