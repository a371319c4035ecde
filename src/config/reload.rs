//! Hot reload: watch the configured paths (directory events, plus a periodic poll that also
//! catches what events miss), and when their content changes load, validate and compile the
//! new configuration and swap it in atomically. A refused configuration is logged with every
//! problem, and the last good one keeps serving.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher as _;
use tokio::sync::mpsc;

use super::compile::{self, LiveSnapshot};
use super::load;
use crate::upstream::Clients;

/// How often the files are re-read even without an event.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// Events arrive in bursts (an editor's save, a ConfigMap's symlink swap): wait for quiet.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// What a reload attempt came to, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reloaded {
    Swapped,
    Refused,
}

/// Watches `paths` forever, swapping new configurations into `live`.
pub(crate) async fn watch(
    paths: Vec<PathBuf>,
    clients: Arc<Clients>,
    live: Arc<LiveSnapshot>,
    on_reload: impl Fn(Reloaded),
) {
    let (events, mut changed) = mpsc::channel::<()>(1);
    // Keep the watcher alive for as long as this task runs; without one, polling still works.
    let _watcher = file_watcher(&paths, events);
    let mut last_fingerprint = live.load().fingerprint;
    loop {
        tokio::select! {
            Some(()) = changed.recv() => tokio::time::sleep(DEBOUNCE).await,
            () = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        while changed.try_recv().is_ok() {}
        let watched = paths.clone();
        let Ok(fingerprint) = tokio::task::spawn_blocking(move || load::fingerprint(&watched)).await else {
            continue;
        };
        if fingerprint == last_fingerprint {
            continue;
        }
        last_fingerprint = fingerprint;
        let generation = live.load().generation + 1;
        let (watched, pool) = (paths.clone(), clients.clone());
        let Ok(loaded) =
            tokio::task::spawn_blocking(move || compile::load(&watched, &pool, generation)).await
        else {
            continue;
        };
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
                on_reload(Reloaded::Refused);
            }
        }
    }
}

/// A watcher sending a tick on any event in the paths' directories (a file's parent, since
/// editors and the kubelet replace files rather than write them in place).
fn file_watcher(paths: &[PathBuf], events: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
        let _ = events.try_send(());
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
