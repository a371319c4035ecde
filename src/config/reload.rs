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
use super::load::{self, Text};
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

/// Watches the files of `inputs` (and `texts`, when given) forever, swapping new
/// configurations into `live`.
pub(crate) async fn watch(
    inputs: Inputs,
    mut texts: Option<Texts>,
    mut resources: Option<Resources>,
    clients: Arc<Clients>,
    live: Arc<LiveSnapshot>,
    on_reload: impl Fn(Reloaded<'_>),
) {
    let (events, mut changed) = mpsc::channel::<()>(1);
    // Keep the watcher alive for as long as this task runs; without one, polling still works.
    let _watcher = file_watcher(&inputs.paths, events);
    let mut last_fingerprint = live.load().fingerprint;
    let mut inputs = Arc::new(inputs);
    loop {
        let texts_changed = async {
            match texts.as_mut() {
                Some(texts) => texts.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        let resources_changed = async {
            match resources.as_mut() {
                Some(resources) => resources.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(()) = changed.recv() => tokio::time::sleep(DEBOUNCE).await,
            true = texts_changed => {}
            true = resources_changed => {}
            () = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        while changed.try_recv().is_ok() {}
        if let Some(texts) = texts.as_mut() {
            let current = texts.borrow_and_update().clone();
            if *current != inputs.texts {
                let mut next = (*inputs).clone();
                next.texts = (*current).clone();
                inputs = Arc::new(next);
            }
        }
        if let Some(resources) = resources.as_mut() {
            let current = resources.borrow_and_update().clone();
            if *current != inputs.resources {
                let mut next = (*inputs).clone();
                next.resources = (*current).clone();
                inputs = Arc::new(next);
            }
        }
        let watched = inputs.clone();
        let Ok(fingerprint) = tokio::task::spawn_blocking(move || {
            load::fingerprint(&watched.paths, &watched.texts)
                ^ compile::resources_fingerprint(&watched.resources)
        })
        .await
        else {
            continue;
        };
        if fingerprint == last_fingerprint {
            continue;
        }
        // A write in progress (a file rewritten in place) must not be read half-way: the
        // content has to read the same twice, SETTLE apart, and the same once more when it is
        // loaded (below).
        tokio::time::sleep(SETTLE).await;
        let watched = inputs.clone();
        let Ok(settled) = tokio::task::spawn_blocking(move || {
            load::fingerprint(&watched.paths, &watched.texts)
                ^ compile::resources_fingerprint(&watched.resources)
        })
        .await
        else {
            continue;
        };
        if settled != fingerprint {
            continue;
        }
        let generation = live.load().generation + 1;
        let (watched, pool) = (inputs.clone(), clients.clone());
        let Ok(loaded) =
            tokio::task::spawn_blocking(move || compile::load_inputs(&watched, &pool, generation)).await
        else {
            continue;
        };
        let loaded = match loaded {
            // Changed between the reads: not what settled; the next round reads it again.
            Ok(snapshot) if snapshot.fingerprint != fingerprint => continue,
            Ok(snapshot) => match unsafe_replacement(&live.load(), &snapshot, &inputs) {
                Some(error) => Err(error),
                None => Ok(snapshot),
            },
            Err(error) => Err(error),
        };
        last_fingerprint = fingerprint;
        match loaded {
            Ok(snapshot) => {
                for warning in &snapshot.warnings {
                    tracing::warn!("{warning}");
                }
                tracing::info!(
                    generation,
                    mutating = snapshot.mutating.len(),
                    validating = snapshot.validating.len(),
                    "configuration reloaded"
                );
                live.store(Arc::new(snapshot));
                on_reload(Reloaded::Swapped);
            }
            Err(error) => {
                for problem in &error.problems {
                    tracing::error!("{problem}");
                }
                tracing::error!(
                    errors = error.errors(),
                    serving = live.load().generation,
                    "new configuration refused; the last good configuration keeps serving"
                );
                on_reload(Reloaded::Refused(&error));
            }
        }
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
    let had_webhooks = !live.mutating.is_empty() || !live.validating.is_empty();
    let has_webhooks = !next.mutating.is_empty() || !next.validating.is_empty();
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
                "the new configuration has no webhooks where {} are served: refused, as it would allow every request; set allowEmptyFleet: true in the GatewayConfig to empty the fleet on purpose",
                live.mutating.len() + live.validating.len()
            ),
        });
    }
    (!problems.is_empty()).then_some(ConfigError { problems })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

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
}
