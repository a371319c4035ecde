//! The composition root: configuration → snapshot → listeners, reload task and shutdown.
//! Only this module (and the commands on top of it) sees every part.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::reload::{self, Reloaded};
use crate::config::{compile, ConfigError, Snapshot};
use crate::server::{self, metrics::Metrics, tls, ExplainedReview, Listener, State};
use crate::upstream::Clients;

/// How to run the gateway's listeners.
#[derive(Debug)]
pub struct ServeOptions {
    pub paths: Vec<PathBuf>,
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    /// Certificate and key files; `None` serves plain HTTP.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// When set, every review is explained and sent here (the demo).
    pub(crate) explained: Option<mpsc::UnboundedSender<ExplainedReview>>,
}

impl ServeOptions {
    /// Serves the configuration at `paths`; `tls` is the certificate and key files (`None`:
    /// plain HTTP).
    pub fn new(
        paths: Vec<PathBuf>,
        listen: SocketAddr,
        metrics_listen: SocketAddr,
        tls: Option<(PathBuf, PathBuf)>,
    ) -> Self {
        Self { paths, listen, metrics_listen, tls, explained: None }
    }
}

/// A running gateway: its addresses, and the means to stop it.
pub struct Running {
    pub address: SocketAddr,
    pub metrics_address: SocketAddr,
    shutdown: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    background: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, drains in-flight reviews, stops the background tasks.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for server in self.servers {
            let _ = server.await;
        }
        for task in self.background {
            task.abort();
        }
    }
}

/// Starts the admin listener (`/readyz` answers 503 until the configuration is served), loads
/// the configuration (refusing to start on any error), then starts the admission listener and
/// the reload task. The admission endpoints never answer from an unloaded configuration.
pub async fn start(options: ServeOptions) -> anyhow::Result<Running> {
    let live = Arc::new(ArcSwap::from_pointee(Snapshot::empty()));
    let metrics = Arc::new(Metrics::default());
    let state = Arc::new(State {
        live: live.clone(),
        metrics: metrics.clone(),
        ready: AtomicBool::new(false),
        explained: options.explained,
    });
    let (shutdown, stop) = watch::channel(false);
    let admin_listener = server::bind(options.metrics_listen).await?;
    let metrics_address = admin_listener.local_addr()?;
    let admin =
        tokio::spawn(server::serve(admin_listener, None, state.clone(), Listener::Admin, stop.clone()));
    tracing::info!(%metrics_address, "admin listener up, loading the configuration");
    let mut running = Running {
        address: metrics_address,
        metrics_address,
        shutdown,
        servers: vec![admin],
        background: Vec::new(),
    };
    match serve_admission(&options.paths, options.listen, options.tls.as_ref(), &state, stop, &mut running)
        .await
    {
        Ok(()) => Ok(running),
        Err(error) => {
            running.shutdown().await;
            Err(error)
        }
    }
}

/// The second half of [`start`]: configuration, TLS, the admission listener, the reload task.
async fn serve_admission(
    paths: &[PathBuf],
    listen: SocketAddr,
    tls_files: Option<&(PathBuf, PathBuf)>,
    state: &Arc<State>,
    stop: watch::Receiver<bool>,
    running: &mut Running,
) -> anyhow::Result<()> {
    let clients = Arc::new(Clients::default());
    let snapshot = load_snapshot(paths, &clients, 1).await?;
    for warning in &snapshot.warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        mutating = snapshot.mutating.len(),
        validating = snapshot.validating.len(),
        namespaces = snapshot.namespaces.len(),
        "configuration loaded"
    );
    state.live.store(Arc::new(snapshot));
    let tls = match tls_files {
        Some((cert, key)) => {
            let resolver = Arc::new(tls::ReloadingCert::load(cert, key)?);
            running.background.push(tokio::spawn(resolver.clone().watch()));
            Some(Arc::new(tls::server_config(resolver)?))
        }
        None => None,
    };
    let listener = server::bind(listen).await?;
    running.address = listener.local_addr()?;
    running.servers.push(tokio::spawn(server::serve(
        listener,
        tls,
        state.clone(),
        Listener::Admission,
        stop,
    )));
    let metrics = state.metrics.clone();
    running.background.push(tokio::spawn(reload::watch(
        paths.to_vec(),
        clients,
        state.live.clone(),
        move |result| {
            match result {
                Reloaded::Swapped => metrics.reload_successes.fetch_add(1, Ordering::Relaxed),
                Reloaded::Refused => metrics.reload_failures.fetch_add(1, Ordering::Relaxed),
            };
        },
    )));
    state.ready.store(true, Ordering::SeqCst);
    tracing::info!(address = %running.address, metrics_address = %running.metrics_address, tls = tls_files.is_some(), "serving");
    Ok(())
}

/// Loads and compiles the configuration off the runtime's threads.
pub(crate) async fn load_snapshot(
    paths: &[PathBuf],
    clients: &Arc<Clients>,
    generation: u64,
) -> anyhow::Result<Snapshot> {
    let (paths, clients) = (paths.to_vec(), clients.clone());
    tokio::task::spawn_blocking(move || compile::load(&paths, &clients, generation))
        .await?
        .map_err(|error| anyhow::anyhow!("{}", describe(&error)))
}

/// The count, then every problem on its own line.
fn describe(error: &ConfigError) -> String {
    let mut text = vec![error.to_string() + ":"];
    text.extend(error.problems.iter().map(|problem| format!("  {problem}")));
    text.join("\n")
}

/// `HOST:PORT` to a socket address; a name (`localhost:0`) is resolved, its first address used.
pub async fn resolve(address: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(address) = address.parse() {
        return Ok(address);
    }
    tokio::net::lookup_host(address)
        .await
        .map_err(|e| anyhow::anyhow!("invalid address {address:?}: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("invalid address {address:?}: the name has no address"))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
