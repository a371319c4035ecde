//! The composition root: configuration → snapshot → listeners, reload task and shutdown, and
//! the other commands built from the same parts.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cli::{Cli, Command, ConfigArgs, ReviewArgs, ServeArgs};
use crate::config::reload::{self, Reloaded};
use crate::config::{compile, ConfigError, LiveSnapshot, Severity, Snapshot};
use crate::pipeline;
use crate::review::{decode, encode};
use crate::server::{self, metrics::Metrics, tls, State, TracedReview};
use crate::trace::Trace;
use crate::upstream::Clients;

/// Runs a command to completion and returns the process exit code.
pub fn main(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let result = match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::Check(args) => return check(&args),
            Command::Review(args) => review(args).await,
            Command::Demo(args) => crate::demo::run(args).await,
            Command::Registration(args) => return crate::registration::run(args),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// How to run the gateway's listeners.
pub struct ServeOptions {
    pub paths: Vec<PathBuf>,
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    /// Certificate and key files; `None` serves plain HTTP.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// When set, every review's trace is sent here (the demo).
    pub traces: Option<mpsc::UnboundedSender<TracedReview>>,
}

/// A running gateway: its addresses, and the means to stop it.
pub struct Running {
    pub address: SocketAddr,
    pub metrics_address: SocketAddr,
    pub live: Arc<LiveSnapshot>,
    pub metrics: Arc<Metrics>,
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

/// Loads the configuration (refusing to start on any error) and starts the listeners and the
/// reload task.
pub async fn start(options: ServeOptions) -> anyhow::Result<Running> {
    let clients = Arc::new(Clients::default());
    let snapshot = load_snapshot(&options.paths, &clients, 1).await?;
    for warning in &snapshot.warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        mutating = snapshot.mutating.len(),
        validating = snapshot.validating.len(),
        namespaces = snapshot.namespaces.len(),
        "configuration loaded"
    );
    let live = Arc::new(ArcSwap::from_pointee(snapshot));
    let metrics = Arc::new(Metrics::default());
    let mut background = Vec::new();

    let tls = match &options.tls {
        Some((cert, key)) => {
            let resolver = Arc::new(tls::ReloadingCert::load(cert, key)?);
            background.push(tokio::spawn(resolver.clone().watch()));
            Some(Arc::new(tls::server_config(resolver)?))
        }
        None => None,
    };
    let state = Arc::new(State {
        live: live.clone(),
        metrics: metrics.clone(),
        ready: AtomicBool::new(false),
        traces: options.traces,
    });
    let listener = server::bind(options.listen).await?;
    let admin_listener = server::bind(options.metrics_listen).await?;
    let address = listener.local_addr()?;
    let metrics_address = admin_listener.local_addr()?;
    let (shutdown, stop) = watch::channel(false);
    let servers = vec![
        tokio::spawn(server::serve(listener, tls, state.clone(), false, stop.clone())),
        tokio::spawn(server::serve(admin_listener, None, state.clone(), true, stop)),
    ];
    let reload_metrics = metrics.clone();
    background.push(tokio::spawn(reload::watch(options.paths, clients, live.clone(), move |result| {
        match result {
            Reloaded::Swapped { .. } => reload_metrics.reload_successes.fetch_add(1, Ordering::Relaxed),
            Reloaded::Refused(_) => reload_metrics.reload_failures.fetch_add(1, Ordering::Relaxed),
        };
    })));
    state.ready.store(true, Ordering::SeqCst);
    tracing::info!(%address, %metrics_address, tls = options.tls.is_some(), "serving");
    Ok(Running { address, metrics_address, live, metrics, shutdown, servers, background })
}

async fn load_snapshot(
    paths: &[PathBuf],
    clients: &Arc<Clients>,
    generation: u64,
) -> anyhow::Result<Snapshot> {
    let (paths, clients) = (paths.to_vec(), clients.clone());
    tokio::task::spawn_blocking(move || compile::load(&paths, &clients, generation))
        .await?
        .map_err(|error| anyhow::anyhow!("{}", describe(&error)))
}

/// Every problem on its own line, then the count.
fn describe(error: &ConfigError) -> String {
    let mut text: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
    text.push(error.to_string());
    text.join("\n")
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let tls = match (args.tls_cert, args.tls_key, args.insecure_http) {
        (Some(cert), Some(key), false) => Some((cert, key)),
        (_, _, true) => None,
        _ => anyhow::bail!("--tls-cert and --tls-key are required unless --insecure-http is given"),
    };
    let running = start(ServeOptions {
        paths: args.config.paths,
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        tls,
        traces: None,
    })
    .await?;
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight reviews");
    running.shutdown().await;
    Ok(())
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

/// `check`: every problem printed; non-zero exit on any error.
fn check(args: &ConfigArgs) -> ExitCode {
    let clients = Clients::default();
    match compile::load(&args.paths, &clients, 1) {
        Ok(snapshot) => {
            for warning in &snapshot.warnings {
                println!("{warning}");
            }
            println!(
                "configuration is valid: {} mutating and {} validating webhooks, {} namespaces{}",
                snapshot.mutating.len(),
                snapshot.validating.len(),
                snapshot.namespaces.len(),
                match snapshot.warnings.len() {
                    0 => String::new(),
                    n => format!(", {n} warning(s)"),
                }
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            for problem in &error.problems {
                println!("{problem}");
            }
            let warnings = error.problems.iter().filter(|p| p.severity == Severity::Warning).count();
            println!("configuration refused: {} error(s), {warnings} warning(s)", error.errors());
            ExitCode::FAILURE
        }
    }
}

/// `review`: one AdmissionReview file through the real dispatch, with its trace.
async fn review(args: ReviewArgs) -> anyhow::Result<()> {
    let clients = Arc::new(Clients::default());
    let snapshot = load_snapshot(&args.config.paths, &clients, 1).await?;
    let body = if args.file.as_os_str() == "-" {
        let mut body = Vec::new();
        std::io::stdin().read_to_end(&mut body).context("reading standard input")?;
        body
    } else {
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?
    };
    let review = decode::review(&body).with_context(|| format!("{}", args.file.display()))?;
    let deadline = match &args.timeout {
        Some(text) => Some(
            Instant::now()
                + server::parse_go_duration(text).with_context(|| format!("invalid --timeout {text:?}"))?,
        ),
        None => None,
    };
    let outcome = pipeline::review(&snapshot, &review, args.stage, deadline, Trace::enabled()).await;
    print!("{}", render_review(args.stage, &review.request.uid, review.version, &outcome, true));
    Ok(())
}

/// The `review` command's report (also printed by the demo).
pub fn render_review(
    stage: pipeline::Stage,
    uid: &str,
    version: crate::review::ReviewVersion,
    outcome: &pipeline::Outcome,
    full: bool,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let answer: serde_json::Value =
        serde_json::from_slice(&encode::answer(version, uid, &outcome.answer)).unwrap_or_default();
    let verdict = if outcome.answer.allowed { "allowed" } else { "denied" };
    let _ = writeln!(out, "== /{} {uid}: {verdict}", stage.as_str());
    if let Some(status) = &outcome.answer.status {
        let code = status.code.unwrap_or_default();
        let _ = writeln!(out, "   {code} {}", status.message.as_deref().unwrap_or_default());
    }
    let _ = writeln!(out, "-- trace");
    let _ = write!(out, "{}", outcome.trace);
    if outcome.trace.steps.is_empty() {
        let _ = writeln!(out, "  no webhook matched");
    }
    if let Some(patch) = &outcome.answer.patch {
        let _ = writeln!(out, "-- combined patch\n  {}", String::from_utf8_lossy(patch));
    }
    if !outcome.full_annotations.is_empty() {
        let _ = writeln!(out, "-- audit annotations (full keys)");
        for (key, value) in &outcome.full_annotations {
            let _ = writeln!(out, "  {key}: {value}");
        }
    }
    if !outcome.answer.warnings.is_empty() {
        let _ = writeln!(out, "-- warnings");
        for warning in &outcome.answer.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    if !full {
        return out;
    }
    if let Some(object) = &outcome.final_object {
        let _ =
            writeln!(out, "-- final object\n{}", serde_json::to_string_pretty(object).unwrap_or_default());
    }
    let _ = writeln!(out, "-- response\n{}", serde_json::to_string_pretty(&answer).unwrap_or_default());
    out
}
