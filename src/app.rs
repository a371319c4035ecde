//! The composition root: configuration → snapshot → listeners, reload task and shutdown.
//! Only this module (and the commands on top of it) sees every part.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::cluster::{Cluster, ClusterOptions};
use crate::config::compile::Inputs;
use crate::config::reload::{self, Reloaded};
use crate::config::{compile, ConfigError, Snapshot};
use crate::pipeline::shadow::Shadows;
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
    /// Cluster mode: live namespaces and fleet ConfigMaps from the API server.
    pub cluster: Option<ClusterOptions>,
    /// PEM file of the CAs whose client certificates may call the admission endpoints; `None`:
    /// no client authentication.
    pub client_ca: Option<PathBuf>,
    /// Connections the admission listener holds open at once (lowered to fit the open-file
    /// limit); beyond, new ones wait unserved (one accepted per serving thread, the others in
    /// the listen backlog).
    pub max_connections: usize,
    /// Threads serving the admission listener (`server/threads.rs`).
    pub threads: usize,
    /// An admission connection without traffic or a request in flight this long is closed.
    pub idle_timeout: std::time::Duration,
    /// OTLP/HTTP collector (`http://HOST:PORT`) to export traces to; `None`: no tracing.
    pub otlp_endpoint: Option<String>,
    /// How long in-flight reviews get to finish once the listeners stop accepting.
    pub in_flight_grace: std::time::Duration,
    /// Record answered reviews into this directory (`serve --record`), whatever the settings
    /// say of the directory; their other `recording` fields apply.
    pub record: Option<PathBuf>,
    /// Test-only: the recording's writer sleeps this long before each line (a slow disk).
    pub record_write_delay: Option<std::time::Duration>,
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
        Self {
            paths,
            listen,
            metrics_listen,
            tls,
            explained: None,
            cluster: None,
            client_ca: None,
            max_connections: server::limits::DEFAULT_MAX_CONNECTIONS,
            threads: crate::lanes::default_threads(),
            idle_timeout: server::limits::IDLE_TIMEOUT,
            otlp_endpoint: None,
            in_flight_grace: server::DEFAULT_IN_FLIGHT_GRACE,
            record: None,
            record_write_delay: None,
        }
    }
}

/// A running gateway: its addresses, and the means to stop it.
pub struct Running {
    pub address: SocketAddr,
    pub metrics_address: SocketAddr,
    state: Arc<State>,
    shutdown: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    /// The admission listener's threads' runtimes (`server/threads.rs`).
    serving: Vec<tokio::runtime::Handle>,
    background: Vec<JoinHandle<()>>,
    /// The trace export task, flushed last.
    exporting: Option<crate::traces::Exporting>,
}

impl Running {
    /// A graceful stop, as a rollout needs it: `/readyz` fails at once and answers carry
    /// `Connection: close`, while the listener goes on accepting for `delay` (time for the
    /// endpoints to drop this replica and the API server to stop sending here); then
    /// [`shutdown`](Self::shutdown).
    pub async fn drain(self, delay: std::time::Duration) {
        self.state.draining.store(true, Ordering::SeqCst);
        tracing::info!(delay_ms = delay.as_millis() as u64, "draining: not ready, still serving");
        tokio::time::sleep(delay).await;
        self.shutdown().await;
    }

    /// The runtimes of the admission listener's threads.
    pub fn serving_runtimes(&self) -> &[tokio::runtime::Handle] {
        &self.serving
    }

    /// Stops accepting, drains in-flight reviews, stops the background tasks, then sends the
    /// spans not exported yet.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for server in self.servers {
            let _ = server.await;
        }
        for task in self.background {
            task.abort();
        }
        if let Some(exporting) = self.exporting {
            // The cancelled shadow calls end their spans as their tasks wake.
            tokio::task::yield_now().await;
            exporting.flush().await;
        }
    }
}

/// The admin listener (metrics scrapes, probes) needs few connections.
const ADMIN_LIMITS: server::limits::ConnectionLimits =
    server::limits::ConnectionLimits { max: 64, idle: server::limits::IDLE_TIMEOUT };

/// Starts the admin listener (`/readyz` answers 503 until the configuration is served), loads
/// the configuration (refusing to start on any error), then starts the admission listener and
/// the reload task. The admission endpoints never answer from an unloaded configuration.
pub async fn start(options: ServeOptions) -> anyhow::Result<Running> {
    // The metrics recorder, before anything records.
    crate::telemetry::recorder();
    crate::telemetry::count_panics();
    let live = Arc::new(ArcSwap::from_pointee(Snapshot::empty()));
    let metrics = Arc::new(Metrics::default());
    let (traces, exporting) = match &options.otlp_endpoint {
        Some(endpoint) => {
            let (traces, exporting) = crate::traces::Traces::start(endpoint)?;
            tracing::info!(endpoint = %endpoint, "exporting traces over OTLP/HTTP");
            (Some(traces), Some(exporting))
        }
        None => (None, None),
    };
    // Shutting down cancels the shadow calls in flight: they never hold it up.
    let (shutdown, stop) = watch::channel(false);
    let state = Arc::new(State {
        live: live.clone(),
        metrics: metrics.clone(),
        ready: AtomicBool::new(false),
        explained: options.explained.clone(),
        cluster: std::sync::OnceLock::new(),
        shadows: Shadows::cancelled_by(stop.clone()),
        draining: AtomicBool::new(false),
        traces,
        in_flight_grace: options.in_flight_grace,
        recording: crate::recording::Recording::new(options.record.clone(), options.record_write_delay)?,
    });
    let admin_listener = server::bind(options.metrics_listen).await?;
    let metrics_address = admin_listener.local_addr()?;
    let admin = tokio::spawn(server::serve(
        admin_listener,
        None,
        state.clone(),
        Listener::Admin,
        ADMIN_LIMITS,
        stop.clone(),
    ));
    tracing::info!(%metrics_address, "admin listener up, loading the configuration");
    let mut running = Running {
        address: metrics_address,
        metrics_address,
        state: state.clone(),
        shutdown,
        servers: vec![admin],
        serving: Vec::new(),
        background: Vec::new(),
        exporting,
    };
    match serve_admission(&options, &state, stop, &mut running).await {
        Ok(()) => Ok(running),
        Err(error) => {
            running.shutdown().await;
            Err(error)
        }
    }
}

/// The second half of [`start`]: the cluster, configuration, TLS, the admission listener, the
/// reload task.
async fn serve_admission(
    options: &ServeOptions,
    state: &Arc<State>,
    stop: watch::Receiver<bool>,
    running: &mut Running,
) -> anyhow::Result<()> {
    let mut inputs = Inputs { paths: options.paths.clone(), ..Inputs::default() };
    let (mut texts, mut resources) = (None, None);
    if let Some(cluster_options) = &options.cluster {
        let (cluster, tasks) = Cluster::start(cluster_options).await?;
        running.background.extend(tasks);
        inputs.live_namespaces = true;
        let receiver = cluster.discovery.resources();
        inputs.resources = (**receiver.borrow()).clone();
        resources = Some(receiver);
        if let Some(fleet) = &cluster.fleet {
            let receiver = fleet.texts();
            inputs.texts = (**receiver.borrow()).clone();
            texts = Some(receiver);
        }
        let _ = state.cluster.set(cluster);
    }
    // Each upstream client keeps a pool of connections per serving thread.
    let threads = options.threads.max(1);
    let clients = Arc::new(Clients::for_threads(threads));
    let snapshot = match load_inputs(&inputs, &clients, 1).await? {
        Ok(snapshot) => snapshot,
        Err(error) => {
            if let Some(fleet) = state.cluster.get().and_then(|c| c.fleet.clone()) {
                fleet.report(&error).await;
            }
            anyhow::bail!("{}", describe(&error));
        }
    };
    for warning in &snapshot.warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        mutating = snapshot.mutating.len(),
        validating = snapshot.validating.len(),
        namespaces = snapshot.namespaces.len(),
        "configuration loaded"
    );
    // Recording as the settings say, before the first review; a directory that cannot be made
    // refuses the start, as a configuration error would.
    state.recording.apply(&snapshot.settings.recording)?;
    state.live.store(Arc::new(snapshot));
    let tls = match &options.tls {
        Some((cert, key)) => {
            let resolver = Arc::new(tls::ReloadingCert::load(cert, key)?);
            running.background.push(tokio::spawn(resolver.clone().watch()));
            let client_ca = match &options.client_ca {
                Some(path) => Some(
                    std::fs::read(path)
                        .map_err(|e| anyhow::anyhow!("--client-ca {}: {e}", path.display()))?,
                ),
                None => None,
            };
            Some(Arc::new(tls::server_config(resolver, client_ca.as_deref())?))
        }
        None => None,
    };
    let (address, listeners) = server::threads::bind(options.listen, threads)?;
    running.address = address;
    let descriptors = server::limits::raise_fd_limit();
    // Each serving thread has its own listening socket and may hold one connection waiting.
    let max_connections = server::limits::connection_cap(
        options.max_connections,
        descriptors.saturating_sub(2 * threads as u64),
    );
    if max_connections < options.max_connections {
        tracing::warn!(
            max_connections,
            asked = options.max_connections,
            descriptors,
            "connection cap lowered to fit the open-file limit"
        );
    }
    let limits = server::limits::ConnectionLimits { max: max_connections, idle: options.idle_timeout };
    let serving = server::threads::start(listeners, tls, state, limits, &stop)?;
    running.serving = serving.handles.clone();
    running.servers.push(tokio::spawn(serving.finished()));
    let metrics = state.metrics.clone();
    let fleet = state.cluster.get().and_then(|c| c.fleet.clone());
    let recording = state.clone();
    running.background.push(tokio::spawn(reload::watch(
        reload::Sources { inputs, texts, resources, clients, live: state.live.clone() },
        move |result| match result {
            Reloaded::Swapped => {
                // The recording changes with the settings; a directory that cannot be made
                // keeps it as it was, the reason on /readyz?verbose.
                let settings = &recording.live.load().settings;
                if let Err(error) = recording.recording.apply(&settings.recording) {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "recording: the new settings could not be applied"
                    );
                }
                metrics.reload_successes.fetch_add(1, Ordering::Relaxed);
            }
            Reloaded::Refused(error) => {
                metrics.reload_failures.fetch_add(1, Ordering::Relaxed);
                if let Some(fleet) = fleet.clone() {
                    let error = error.clone();
                    tokio::spawn(async move { fleet.report(&error).await });
                }
            }
        },
    )));
    state.ready.store(true, Ordering::SeqCst);
    tracing::info!(address = %running.address, metrics_address = %running.metrics_address, tls = options.tls.is_some(), threads, "serving");
    Ok(())
}

/// One review dispatched once against the fleet of `paths`, as the `review` command runs it:
/// explained, within `timeout` if given, its shadow calls awaited so their results show.
pub(crate) async fn review_once(
    paths: &[PathBuf],
    review: &crate::review::decode::IncomingReview,
    endpoint: crate::endpoint::Endpoint,
    timeout: Option<std::time::Duration>,
) -> anyhow::Result<crate::pipeline::Outcome> {
    use crate::pipeline::budget::Budget;
    let clients = Arc::new(Clients::default());
    let snapshot = load_snapshot(paths, &clients, 1).await?;
    let budget = match timeout {
        Some(timeout) => Budget::new(tokio::time::Instant::now(), Some(timeout), &snapshot.settings),
        None => Budget::unlimited(&snapshot.settings),
    };
    let shadows = Shadows::awaited();
    let request = crate::pipeline::Request {
        explanation: crate::explain::Explanation::enabled(),
        ..crate::pipeline::Request::new(&snapshot, review, endpoint, budget, &shadows)
    };
    let (mut outcome, running) = crate::pipeline::review(request).await;
    // Shadow calls do not hold the answer up; here they are awaited so their results show.
    running.finish(&mut outcome.explanation).await;
    Ok(outcome)
}

/// Loads and compiles the configuration off the runtime's threads.
pub(crate) async fn load_snapshot(
    paths: &[PathBuf],
    clients: &Arc<Clients>,
    generation: u64,
) -> anyhow::Result<Snapshot> {
    let inputs = Inputs { paths: paths.to_vec(), ..Inputs::default() };
    load_inputs(&inputs, clients, generation).await?.map_err(|error| anyhow::anyhow!("{}", describe(&error)))
}

/// [`load_snapshot`] from files and texts, keeping the problems of a refusal.
async fn load_inputs(
    inputs: &Inputs,
    clients: &Arc<Clients>,
    generation: u64,
) -> anyhow::Result<Result<Snapshot, ConfigError>> {
    let (inputs, clients) = (inputs.clone(), clients.clone());
    Ok(tokio::task::spawn_blocking(move || compile::load_inputs(&inputs, &clients, generation)).await?)
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
