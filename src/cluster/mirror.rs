//! One kind of object mirrored from the API server, the state machine the namespace cache
//! (`namespaces.rs`), the fleet ConfigMaps (`fleet.rs`) and the multi-version CRDs
//! (`discovery.rs`) share: list, then watch. A list fills a fresh mirror that replaces the old
//! one whole when it completes (an object deleted while the watch was down disappears then);
//! each change after it is applied as it comes. A failed watch is started again after a
//! backoff, with a full list: only a completed list proves a mirror current again (a resumed
//! watch on a quiet cluster says nothing for minutes).

use std::fmt::Debug;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};
use kube::runtime::watcher::{self, Event};
use kube::Resource;

/// Backoff between failed watches: doubling from the first to the second.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(15);

/// What a mirror keeps of each object, by name, and what it does as the watch reports.
pub(super) trait Mirror {
    /// The objects watched.
    type Object: Resource;
    /// What is kept of one object.
    type Entry;
    /// A whole mirror, as a completed list leaves it.
    type Listed: Default + Extend<(String, Self::Entry)>;

    /// What is kept of `object`; `None`: nothing (an entry of its name is removed).
    fn entry(&self, object: Self::Object) -> Option<Self::Entry>;
    /// The key `object` is kept under: its name, unless the mirror says otherwise (objects of
    /// several namespaces).
    fn key(&self, object: &Self::Object) -> Option<String> {
        object.meta().name.clone()
    }
    /// A list completed: `listed` replaces the mirror whole.
    fn listed(&self, listed: Self::Listed);
    /// An object was created or changed after the list.
    fn applied(&self, name: String, entry: Self::Entry);
    /// An object was deleted after the list, or no longer has an entry.
    fn removed(&self, name: &str);
    /// The watch failed with `error`, and is started again after a backoff. Logged by the
    /// mirror, so the line keeps its module's target (`RUST_LOG`, the JSON `target`).
    fn failed(&self, error: &watcher::Error);
}

/// Runs list-and-watches of `mirror` forever, each a fresh stream of `watch()`, with a backoff
/// after each failure, reset by a watch that completed its list.
pub(super) async fn keep_watching<M, S>(mirror: &M, mut watch: impl FnMut() -> S)
where
    M: Mirror,
    S: Stream<Item = watcher::Result<Event<M::Object>>>,
{
    let mut backoff = RETRY_MIN;
    loop {
        if follow(mirror, watch()).await {
            backoff = RETRY_MIN;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RETRY_MAX);
    }
}

/// [`keep_watching`] of the objects of `api` that `config` selects, with kube-runtime's
/// watcher.
pub(super) async fn keep_watching_api<M>(mirror: &M, api: kube::Api<M::Object>, config: watcher::Config)
where
    M: Mirror,
    M::Object: Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    keep_watching(mirror, || watcher::watcher(api.clone(), config.clone())).await
}

/// One list-and-watch, until it fails (or its stream ends). `true` if it completed a list.
pub(super) async fn follow<M: Mirror>(
    mirror: &M,
    events: impl Stream<Item = watcher::Result<Event<M::Object>>>,
) -> bool {
    let mut events = std::pin::pin!(events);
    let mut listing: Option<M::Listed> = None;
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Err(error) => {
                mirror.failed(&error);
                return listed;
            }
            Ok(Event::Init) => listing = Some(M::Listed::default()),
            Ok(Event::InitApply(object)) => {
                if let (Some(list), Some(name)) = (listing.as_mut(), mirror.key(&object)) {
                    if let Some(entry) = mirror.entry(object) {
                        list.extend([(name, entry)]);
                    }
                }
            }
            // The watcher sends Init before every InitDone; one without it would replace nothing.
            Ok(Event::InitDone) => {
                if let Some(list) = listing.take() {
                    mirror.listed(list);
                }
                listed = true;
            }
            Ok(Event::Apply(object)) => {
                if let Some(name) = mirror.key(&object) {
                    match mirror.entry(object) {
                        Some(entry) => mirror.applied(name, entry),
                        None => mirror.removed(&name),
                    }
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some(name) = mirror.key(&object) {
                    mirror.removed(&name);
                }
            }
        }
    }
    listed
}

/// A client of an API server that is not there: the mirrors' unit tests build their owners
/// with it and never call it.
#[cfg(test)]
pub(super) fn unused_client() -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::new(http::Uri::from_static("http://127.0.0.1:1"));
    kube::Client::try_from(config).expect("a client needs no server to be built")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use futures_util::stream::{self, BoxStream};
    use futures_util::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::watcher::{self, Event};
    use tokio::time::Instant;

    use super::{follow, keep_watching, Mirror};

    /// Keeps each ConfigMap's `value`; one with `skip` in its data is not kept.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
    }

    impl Recorder {
        fn say(&self, call: String) {
            self.calls.lock().unwrap().push(call);
        }

        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Mirror for Recorder {
        type Object = ConfigMap;
        type Entry = String;
        type Listed = BTreeMap<String, String>;

        fn entry(&self, map: ConfigMap) -> Option<String> {
            let data = map.data.unwrap_or_default();
            (!data.contains_key("skip")).then(|| data.get("value").cloned().unwrap_or_default())
        }
        fn listed(&self, listed: Self::Listed) {
            self.say(format!("listed {listed:?}"));
        }
        fn applied(&self, name: String, entry: String) {
            self.say(format!("applied {name}={entry}"));
        }
        fn removed(&self, name: &str) {
            self.say(format!("removed {name}"));
        }
        fn failed(&self, error: &watcher::Error) {
            self.say(format!("failed: {error}"));
        }
    }

    /// A ConfigMap `name` (none when empty) with data `key: value`.
    fn map(name: &str, key: &str, value: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: (!name.is_empty()).then(|| name.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some([(key.to_owned(), value.to_owned())].into()),
            ..ConfigMap::default()
        }
    }

    type Events = BoxStream<'static, watcher::Result<Event<ConfigMap>>>;

    fn events(events: Vec<watcher::Result<Event<ConfigMap>>>) -> Events {
        stream::iter(events).boxed()
    }

    #[tokio::test]
    async fn a_list_replaces_the_mirror_whole_when_it_completes_and_changes_follow_it() {
        let recorder = Recorder::default();
        let listed = follow(
            &recorder,
            events(vec![
                Ok(Event::Init),
                Ok(Event::InitApply(map("a", "value", "1"))),
                Ok(Event::InitApply(map("skipped", "skip", ""))),
                Ok(Event::InitApply(map("", "value", "nameless"))),
                Ok(Event::InitApply(map("b", "value", "2"))),
                Ok(Event::InitDone),
                Ok(Event::Apply(map("c", "value", "3"))),
                Ok(Event::Apply(map("a", "skip", ""))),
                Ok(Event::Delete(map("b", "value", "2"))),
                Ok(Event::Apply(map("", "value", "nameless"))),
            ]),
        )
        .await;
        assert!(listed);
        assert_eq!(
            recorder.calls(),
            [r#"listed {"a": "1", "b": "2"}"#, "applied c=3", "removed a", "removed b"]
        );
    }

    /// A watch that fails before its list completes leaves the mirror as it was (its partial
    /// list is dropped) and does not reset the backoff.
    #[tokio::test]
    async fn a_watch_failing_before_its_list_completes_changes_nothing() {
        let recorder = Recorder::default();
        let listed = follow(
            &recorder,
            events(vec![
                Ok(Event::Init),
                Ok(Event::InitApply(map("a", "value", "1"))),
                Err(watcher::Error::NoResourceVersion),
                Ok(Event::InitDone),
                Ok(Event::Apply(map("c", "value", "3"))),
            ]),
        )
        .await;
        assert!(!listed);
        assert_eq!(
            recorder.calls(),
            ["failed: no metadata.resourceVersion in watch result (does resource support watch?)"]
        );
    }

    /// The gaps between watches: doubling from 250 ms after each failure, at most 15 s, and
    /// back to 250 ms after a watch that completed its list.
    #[tokio::test(start_paused = true)]
    async fn failed_watches_back_off_doubling_to_15_s_and_a_completed_list_resets_it() {
        let recorder = Recorder::default();
        let fail = || events(vec![Err(watcher::Error::NoResourceVersion)]);
        let lists =
            || events(vec![Ok(Event::Init), Ok(Event::InitDone), Err(watcher::Error::NoResourceVersion)]);
        let mut script: Vec<Events> = vec![fail(), fail(), fail(), fail(), lists()];
        script.extend((0..8).map(|_| fail()));
        script.reverse();
        let started: Mutex<Vec<Instant>> = Mutex::new(Vec::new());
        let run = keep_watching(&recorder, || {
            started.lock().unwrap().push(Instant::now());
            script.pop().unwrap_or_else(|| stream::pending().boxed())
        });
        assert!(tokio::time::timeout(Duration::from_secs(3600), run).await.is_err());
        let started = started.lock().unwrap();
        let gaps: Vec<u128> = started.windows(2).map(|pair| (pair[1] - pair[0]).as_millis()).collect();
        assert_eq!(gaps, [250, 500, 1000, 2000, 250, 500, 1000, 2000, 4000, 8000, 15_000, 15_000, 15_000]);
        assert_eq!(recorder.calls().iter().filter(|call| call.starts_with("failed")).count(), 13);
    }
}
