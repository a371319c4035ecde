//! Hot reload: watch the configured paths (directory events, plus a periodic poll that also
//! catches what events miss), and when their content changes load, validate and compile the
//! new configuration and swap it in atomically. A refused configuration is logged with every
//! problem, and the last good one keeps serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher as _;
use tokio::sync::{mpsc, watch};

use super::compile::{self, Inputs, LiveSnapshot, Snapshot};
use super::load::Text;
use super::{ConfigError, Problem, Severity};
use crate::upstream::Clients;

/// How often the files are re-read even without an event.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// Events arrive in bursts (an editor's save, a ConfigMap's symlink swap): wait for quiet.
const DEBOUNCE: Duration = Duration::from_millis(200);
/// A changed configuration must read the same twice this far apart before it is loaded.
const SETTLE: Duration = Duration::from_millis(200);

/// What a reload attempt came to, for metrics and for the cluster's Events.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reloaded<'a> {
    Swapped,
    Refused(&'a ConfigError),
}

/// Configurations that do not live in files: the cluster's fleet ConfigMaps, as they change.
pub(crate) type Texts = watch::Receiver<Arc<Vec<Text>>>;
/// Multi-version custom resources learnt from the cluster, as they change.
pub(crate) type Resources = watch::Receiver<Arc<Vec<super::equivalence::CustomResource>>>;

/// What the reload task watches, and where it swaps in what loads.
pub(crate) struct Sources {
    /// The files and directories (`--config`), with the texts and resources first read.
    pub(crate) inputs: Inputs,
    /// The fleet ConfigMaps' texts, as they change (cluster mode with a fleet selector).
    pub(crate) texts: Option<Texts>,
    /// The cluster's multi-version custom resources, as they change (cluster mode).
    pub(crate) resources: Option<Resources>,
    /// The pooled upstream clients new snapshots share with the old.
    pub(crate) clients: Arc<Clients>,
    /// The snapshot every review loads.
    pub(crate) live: Arc<LiveSnapshot>,
}

/// Watches `sources` forever: each round waits for a reason to look, takes the cluster's
/// current texts and resources, looks at the inputs' fingerprint, and when it has changed and
/// settled loads the configuration, then swaps it in or refuses it. `on_reload` hears of each.
pub(crate) async fn watch(sources: Sources, on_reload: impl Fn(Reloaded<'_>)) {
    let (events, mut woken) = mpsc::channel::<()>(1);
    // Keep the watcher alive for as long as this task runs; without one, polling still works.
    let _watcher = file_watcher(&sources.inputs.paths, events);
    let mut reload = Reload::new(sources);
    loop {
        reload.wait(&mut woken).await;
        reload.take_cluster_inputs();
        let Some(fingerprint) = reload.changed_and_settled().await else { continue };
        match reload.load(fingerprint).await {
            Some(Ok(snapshot)) => reload.swap(snapshot, &on_reload),
            Some(Err(error)) => reload.refuse(&error, &on_reload),
            // Changed again while it loaded, or the load's task failed: the next round looks.
            None => {}
        }
    }
}

/// The reload task's state between rounds.
struct Reload {
    inputs: Arc<Inputs>,
    texts: Option<Texts>,
    resources: Option<Resources>,
    clients: Arc<Clients>,
    live: Arc<LiveSnapshot>,
    /// The fingerprint of the inputs last loaded, swapped in or refused: the same inputs are
    /// not loaded (nor refused) again.
    last: u64,
}

impl Reload {
    fn new(sources: Sources) -> Self {
        Self {
            last: sources.live.load().fingerprint,
            inputs: Arc::new(sources.inputs),
            texts: sources.texts,
            resources: sources.resources,
            clients: sources.clients,
            live: sources.live,
        }
    }

    /// Waits for a reason to look: an event in the watched directories (then DEBOUNCE of
    /// quiet), new texts or resources from the cluster, or POLL_INTERVAL without either.
    async fn wait(&mut self, woken: &mut mpsc::Receiver<()>) {
        let texts_changed = async {
            match self.texts.as_mut() {
                Some(texts) => texts.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        let resources_changed = async {
            match self.resources.as_mut() {
                Some(resources) => resources.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(()) = woken.recv() => tokio::time::sleep(DEBOUNCE).await,
            true = texts_changed => {}
            true = resources_changed => {}
            () = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        while woken.try_recv().is_ok() {}
    }

    /// Takes the cluster's current texts and resources into the inputs, when they differ.
    fn take_cluster_inputs(&mut self) {
        if let Some(texts) = self.texts.as_mut() {
            let current = texts.borrow_and_update().clone();
            if *current != self.inputs.texts {
                Arc::make_mut(&mut self.inputs).texts = (*current).clone();
            }
        }
        if let Some(resources) = self.resources.as_mut() {
            let current = resources.borrow_and_update().clone();
            if *current != self.inputs.resources {
                Arc::make_mut(&mut self.inputs).resources = (*current).clone();
            }
        }
    }

    /// One look: the inputs' fingerprint, read off the runtime's threads (`None`: the read's
    /// task failed).
    async fn look(&self) -> Option<u64> {
        let inputs = self.inputs.clone();
        tokio::task::spawn_blocking(move || inputs.fingerprint()).await.ok()
    }

    /// The inputs' fingerprint when it differs from the last loaded and a write in progress
    /// cannot be half-way: it must read the same twice, SETTLE apart (and once more when it is
    /// loaded, [`Reload::load`]).
    async fn changed_and_settled(&self) -> Option<u64> {
        let fingerprint = self.look().await.filter(|fingerprint| *fingerprint != self.last)?;
        tokio::time::sleep(SETTLE).await;
        self.look().await.filter(|settled| *settled == fingerprint)
    }

    /// Loads, validates and compiles the inputs, and refuses a valid configuration that must
    /// not replace the live one all the same ([`unsafe_replacement`]). `None`: what was read
    /// is not what settled (the next round reads it again), or the load's task failed.
    async fn load(&mut self, fingerprint: u64) -> Option<Result<Snapshot, ConfigError>> {
        let generation = self.live.load().generation + 1;
        let (inputs, clients) = (self.inputs.clone(), self.clients.clone());
        let loaded = tokio::task::spawn_blocking(move || compile::load_inputs(&inputs, &clients, generation))
            .await
            .ok()?;
        let judged = match loaded {
            Ok(snapshot) if snapshot.fingerprint != fingerprint => return None,
            Ok(snapshot) => match unsafe_replacement(&self.live.load(), &snapshot, &self.inputs) {
                Some(error) => Err(error),
                None => Ok(snapshot),
            },
            Err(error) => Err(error),
        };
        self.last = fingerprint;
        Some(judged)
    }

    /// Swaps `snapshot` in, logging its warnings.
    fn swap(&self, snapshot: Snapshot, on_reload: &impl Fn(Reloaded<'_>)) {
        for warning in &snapshot.warnings {
            tracing::warn!("{warning}");
        }
        tracing::info!(
            generation = snapshot.generation,
            mutating = snapshot.mutating.len(),
            validating = snapshot.validating.len(),
            "configuration reloaded"
        );
        self.live.store(Arc::new(snapshot));
        on_reload(Reloaded::Swapped);
    }

    /// Logs every problem of a refused configuration; the live one keeps serving.
    fn refuse(&self, error: &ConfigError, on_reload: &impl Fn(Reloaded<'_>)) {
        for problem in &error.problems {
            tracing::error!("{problem}");
        }
        tracing::error!(
            errors = error.errors(),
            serving = self.live.load().generation,
            "new configuration refused; the last good configuration keeps serving"
        );
        on_reload(Reloaded::Refused(error));
    }
}

/// A watcher sending a tick on events in the paths' directories (a file's parent, since
/// editors and the kubelet replace files rather than write them in place) that may concern the
/// configuration: not reads, and not other files in a directory (a log written beside the
/// configuration would otherwise ask for a reload check at every line).
fn file_watcher(paths: &[PathBuf], events: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let files: Vec<PathBuf> = paths.iter().filter(|path| !path.is_dir()).cloned().collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = match &event {
            // Errors (an overflowed queue…) and events without paths: look again to be safe.
            Err(_) => true,
            Ok(event) if event.kind.is_access() => false,
            Ok(event) => event.paths.is_empty() || event.paths.iter().any(|path| concerns(path, &files)),
        };
        if relevant {
            let _ = events.try_send(());
        }
    })
    .map_err(|error| tracing::warn!(%error, "file watching unavailable; polling only"))
    .ok()?;
    for path in paths {
        let directory =
            if path.is_dir() { path.clone() } else { path.parent().map(PathBuf::from).unwrap_or_default() };
        let directory = if directory.as_os_str().is_empty() { PathBuf::from(".") } else { directory };
        if let Err(error) = watcher.watch(&directory, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(%error, path = %directory.display(), "cannot watch; polling only");
        }
    }
    Some(watcher)
}

/// Whether a change at `path` may change the configuration: one of the configured files, a
/// configuration file of a watched directory (`.yaml`, `.yml`, `.json`, hidden ones included:
/// editors write those first), or a name starting `..` (the kubelet's `..data` swap of a
/// mounted ConfigMap or Secret).
fn concerns(path: &Path, files: &[PathBuf]) -> bool {
    if files.iter().any(|file| file == path) {
        return true;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    name.starts_with("..") || ["yaml", "yml", "json"].contains(&extension)
}

/// A valid configuration that must not replace `live` all the same: a source that held
/// documents and is now empty (a file truncated by an in-place write, a ConfigMap key
/// emptied), or no webhooks left where there were some, unless the new configuration's
/// `GatewayConfig` says `allowEmptyFleet: true`. Either would answer every review `allowed`.
fn unsafe_replacement(live: &Snapshot, next: &Snapshot, inputs: &Inputs) -> Option<ConfigError> {
    let mut problems = Vec::new();
    for (file, documents) in &next.documents {
        let held = live.documents.get(file).copied().unwrap_or(0);
        if *documents == 0 && held > 0 {
            problems.push(Problem {
                severity: Severity::Error,
                file: file.clone(),
                object: None,
                webhook: None,
                field: None,
                message: format!(
                    "the file is empty where it held {held} object(s): taken for a write in progress and refused; delete the file to remove its objects"
                ),
            });
        }
    }
    // Policies decide too: a configuration left with neither allows every request.
    let deciders = |s: &Snapshot| {
        !s.mutating.is_empty()
            || !s.validating.is_empty()
            || !s.policies.is_empty()
            || !s.mutating_policies.is_empty()
    };
    let (had_webhooks, has_webhooks) = (deciders(live), deciders(next));
    if had_webhooks && !has_webhooks && !next.settings.allow_empty_fleet {
        let file = inputs
            .paths
            .first()
            .cloned()
            .or_else(|| inputs.texts.first().map(|t| t.name.clone()))
            .unwrap_or_default();
        problems.push(Problem {
            severity: Severity::Error,
            file,
            object: None,
            webhook: None,
            field: None,
            message: format!(
                "the new configuration has no webhooks and no policies where {} webhooks and {} policies are served: refused, as it would allow every request; set allowEmptyFleet: true in the GatewayConfig to empty the fleet on purpose",
                live.mutating.len() + live.validating.len(),
                live.policies.iter().count() + live.mutating_policies.iter().count()
            ),
        });
    }
    (!problems.is_empty()).then_some(ConfigError { problems })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use tokio::sync::watch;
    use tokio::time::{sleep, Duration, Instant};

    use super::{Reload, Reloaded, Sources, Texts, POLL_INTERVAL, SETTLE};
    use crate::config::compile::{self, Inputs, LiveSnapshot};
    use crate::config::load::Text;
    use crate::upstream::Clients;

    #[test]
    fn only_configuration_files_and_kubelet_swaps_wake_the_reload() {
        let files = [PathBuf::from("/etc/gateway/fleet.conf")];
        for path in
            ["/etc/gateway/fleet.conf", "/d/a.yaml", "/d/b.yml", "/d/.c.json", "/d/..data", "/d/..2026_11_26"]
        {
            assert!(super::concerns(Path::new(path), &files), "{path}");
        }
        for path in ["/d/gateway.log", "/d/notes.txt", "/etc/gateway/other.conf"] {
            assert!(!super::concerns(Path::new(path), &files), "{path}");
        }
    }

    /// A ValidatingWebhookConfiguration with webhooks of these names.
    fn fleet(names: &[&str]) -> String {
        let webhooks: String = names
            .iter()
            .map(|name| {
                format!("- name: {name}\n  clientConfig: {{url: \"https://127.0.0.1:1/\"}}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n")
            })
            .collect();
        format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: fleet}}\nwebhooks:\n{webhooks}")
    }

    /// The sources of a reload task over `dir` (and `texts`), live with what they hold now.
    fn sources(dir: &Path, texts: Option<Texts>) -> Sources {
        let mut inputs = Inputs { paths: vec![dir.to_path_buf()], ..Inputs::default() };
        if let Some(texts) = &texts {
            inputs.texts = (**texts.borrow()).clone();
        }
        let clients = Arc::new(Clients::default());
        let snapshot = compile::load_inputs(&inputs, &clients, 1).expect("a valid start");
        let live = Arc::new(LiveSnapshot::from_pointee(snapshot));
        Sources { inputs, texts, resources: None, clients, live }
    }

    /// Starts the whole reload task; what `on_reload` heard, one line each.
    fn start(sources: Sources) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let told = heard.clone();
        let task = tokio::spawn(super::watch(sources, move |reloaded| {
            told.lock().unwrap().push(match reloaded {
                Reloaded::Swapped => "swapped".to_owned(),
                Reloaded::Refused(error) => format!("refused: {}", error.problems[0].message),
            });
        }));
        (heard, task)
    }

    /// Waits (in paused time) until `heard` holds `count` lines, at most a minute.
    async fn heard_by(heard: &Mutex<Vec<String>>, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while heard.lock().unwrap().len() < count && Instant::now() < deadline {
            sleep(Duration::from_millis(10)).await;
        }
        heard.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_file_is_swapped_in_once_and_the_same_files_are_not_loaded_again() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fleet.yaml"), fleet(&["a.example.com"])).unwrap();
        let sources = sources(dir.path(), None);
        let live = sources.live.clone();
        let (heard, task) = start(sources);
        std::fs::write(dir.path().join("fleet.yaml"), fleet(&["a.example.com", "b.example.com"])).unwrap();
        assert_eq!(heard_by(&heard, 1).await, ["swapped"]);
        assert_eq!((live.load().generation, live.load().validating.len()), (2, 2));
        // Polls go on; the files read the same, so nothing is loaded or swapped again.
        sleep(POLL_INTERVAL * 5).await;
        assert_eq!(*heard.lock().unwrap(), ["swapped"]);
        assert_eq!(live.load().generation, 2);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_emptied_file_is_refused_once_and_the_last_good_configuration_keeps_serving() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fleet.yaml"), fleet(&["a.example.com"])).unwrap();
        let sources = sources(dir.path(), None);
        let live = sources.live.clone();
        let (heard, task) = start(sources);
        std::fs::write(dir.path().join("fleet.yaml"), "").unwrap();
        let refused = "refused: the file is empty where it held 1 object(s): taken for a write in progress and refused; delete the file to remove its objects";
        assert_eq!(heard_by(&heard, 1).await, [refused]);
        // Refused once: the same files are not loaded, nor reported, at every poll.
        sleep(POLL_INTERVAL * 5).await;
        assert_eq!(*heard.lock().unwrap(), [refused]);
        assert_eq!((live.load().generation, live.load().validating.len()), (1, 1));
        task.abort();
    }

    /// A file still being written when the reload looks again, SETTLE later, reads otherwise:
    /// not loaded that round. Once it reads the same twice, it is.
    #[tokio::test(start_paused = true)]
    async fn a_write_still_in_progress_is_not_loaded_until_it_has_settled() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fleet.yaml");
        std::fs::write(&file, fleet(&["a.example.com"])).unwrap();
        let reload = Reload::new(sources(dir.path(), None));
        std::fs::write(&file, "apiVersion: admissionregistration.k8s.io/v1\nkind: Valid").unwrap();
        let (settled, ()) = tokio::join!(reload.changed_and_settled(), async {
            sleep(SETTLE / 2).await;
            std::fs::write(&file, fleet(&["a.example.com", "b.example.com"])).unwrap();
        });
        assert_eq!(settled, None, "read half-way through the write");
        assert_eq!(reload.changed_and_settled().await, Some(reload.inputs.fingerprint()));
        std::fs::write(&file, fleet(&["a.example.com"])).unwrap();
        assert_eq!(reload.changed_and_settled().await, None, "the files read as the live configuration");
    }

    /// New fleet texts from the cluster wake the reload: loaded after SETTLE, not at the next
    /// poll.
    #[tokio::test(start_paused = true)]
    async fn new_cluster_texts_are_loaded_at_once_not_at_the_next_poll() {
        let dir = tempfile::tempdir().unwrap();
        let text = |names: &[&str]| Text {
            name: PathBuf::from("configmap/ns/fleet/fleet.yaml"),
            text: fleet(names),
        };
        let (texts, receiver) = watch::channel(Arc::new(vec![text(&["a.example.com"])]));
        let sources = sources(dir.path(), Some(receiver));
        let live = sources.live.clone();
        let (heard, task) = start(sources);
        sleep(POLL_INTERVAL / 4).await;
        let sent = Instant::now();
        texts.send_replace(Arc::new(vec![text(&["a.example.com", "b.example.com"])]));
        assert_eq!(heard_by(&heard, 1).await, ["swapped"]);
        assert!(sent.elapsed() < POLL_INTERVAL / 2, "{:?}", sent.elapsed());
        assert_eq!(live.load().validating.len(), 2);
        task.abort();
    }
}
