//! The command line: arguments (clap), and each command run to its exit code. A leaf on top of
//! the crate: nothing imports it but `main.rs`.
//!
//! Exit codes: 0 success (configuration valid, review allowed); 1 a negative verdict
//! (configuration refused, review denied); 2 an error (bad usage, unreadable input, cannot
//! start). Results go to standard output, errors and logs to standard error.

mod check;
mod replay;
mod review;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::app::{self, ServeOptions};
use crate::endpoint::Endpoint;
use crate::logging::LogFormat;

/// One admission webhook in front of a Kubernetes webhook fleet, deciding exactly as
/// kube-apiserver would with the fleet registered directly.
#[derive(Debug, Parser)]
#[command(name = "admission-gateway", version)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Log lines as `json` (one object a line; the default for `serve`) or `text` (the
    /// default for the other commands).
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
    /// Which log lines: an EnvFilter directive such as `info`, `debug` or
    /// `admission_gateway=debug,kube=warn` (RUST_LOG wins when set). Default `info`; `warn`
    /// for `demo`, whose printed reports already show every review.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
}

impl Cli {
    /// Sets up logging as the flags say; keep the guard until the process ends.
    pub fn init_logging(&self) -> Result<crate::logging::LogGuard, String> {
        let format = self.log_format.unwrap_or(match self.command {
            Command::Serve(_) => LogFormat::Json,
            _ => LogFormat::Text,
        });
        let level = self.log_level.as_deref().unwrap_or(match self.command {
            Command::Demo(_) => "warn",
            _ => "info",
        });
        crate::logging::init(format, level)
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve /mutate, /validate and /admit, with /metrics on a second listener.
    Serve(ServeArgs),
    /// Validate the configuration as the API server would; print every problem.
    Check(CheckArgs),
    /// Run one AdmissionReview file through the live fleet and print the answer and an explanation.
    Review(ReviewArgs),
    /// Send a recording's reviews (`serve --record`) through a candidate fleet and compare the
    /// answers with the recorded ones. Exit 0 within --max-disagreement, 1 over it, 2 error.
    Replay(ReplayArgs),
    /// Print the gateway's own webhook registrations for a fleet.
    Registration(crate::registration::RegistrationArgs),
    /// Start an example fleet with the gateway in front, send sample reviews, keep serving.
    Demo(crate::demo::DemoArgs),
}

/// Process exit codes, the same for every command.
pub(crate) mod exit {
    use std::process::ExitCode;
    /// Allowed / valid.
    pub(crate) const SUCCESS: u8 = 0;
    /// Denied / refused.
    pub(crate) const NEGATIVE: u8 = 1;
    /// Could not do what was asked.
    pub(crate) const ERROR: u8 = 2;

    pub(crate) fn code(code: u8) -> ExitCode {
        ExitCode::from(code)
    }
}

#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// Configuration files or directories (YAML or JSON Kubernetes objects); takes several
    /// values and may be repeated.
    #[arg(long = "config", required = true, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    pub(crate) paths: Vec<PathBuf>,
}

/// How a command prints its result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// For people.
    #[default]
    Text,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Configuration files or directories (YAML or JSON Kubernetes objects); takes several
    /// values and may be repeated. Optional with --fleet-selector.
    #[arg(long = "config", required_unless_present = "fleet_selector", value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    pub(crate) config: Vec<PathBuf>,
    /// Cluster mode: namespace labels (and, with --fleet-selector, the fleet) from the API
    /// server, through KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long)]
    pub(crate) kube: bool,
    /// Cluster mode with this kubeconfig file (implies --kube).
    #[arg(long, value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Cluster mode: fleet manifests also from the ConfigMaps whose labels match this selector
    /// (their .yaml/.yml/.json keys), hot-reloaded with the files (implies --kube).
    #[arg(long, value_name = "SELECTOR")]
    pub(crate) fleet_selector: Option<String>,
    /// Namespace of the fleet ConfigMaps (default: the client's namespace, in-cluster the
    /// gateway's own).
    #[arg(long, value_name = "NAMESPACE", requires = "fleet_selector")]
    pub(crate) fleet_namespace: Option<String>,
    /// On SIGTERM or Ctrl-C: fail /readyz at once but keep serving this long (Go duration),
    /// so endpoints drop this replica before it stops accepting; in-flight reviews then have
    /// --in-flight-grace to finish.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub(crate) drain_delay: String,
    /// Once the listeners stop accepting, how long in-flight reviews get to finish (Go
    /// duration); the process exits at most a few seconds after the drain delay and this,
    /// whatever is still running.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub(crate) in_flight_grace: String,
    /// Record answered reviews into DIR (created 0700): one JSON line each, the request as
    /// received with a Secret's values replaced by a keyed hash, the answer and each webhook's
    /// outcome; 64 MiB files, compressed once rotated, the oldest removed past 1 GiB
    /// (docs/operations.md, "Recording reviews"). Wins over the GatewayConfig's
    /// `recording.directory`; its other `recording` fields apply. Never slows or fails a review.
    #[arg(long, value_name = "DIR")]
    pub(crate) record: Option<PathBuf>,
    /// Test-only: the recording's writer sleeps this long before each line, a slow disk for
    /// tests and load scenarios (Go duration).
    #[arg(long, value_name = "DURATION", hide = true)]
    pub(crate) record_write_delay: Option<String>,
    /// Cluster mode: report the namespace cache stale (/readyz?verbose, /metrics) once its
    /// watch has been down this long (Go duration).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub(crate) namespace_staleness: String,
    /// Address of the admission endpoints (HOST:PORT; a name such as localhost is resolved).
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "HOST:PORT")]
    pub(crate) listen: String,
    /// PEM certificate (chain) to serve; reloaded when the file changes.
    #[arg(long, value_name = "PATH", required_unless_present = "insecure_http", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert; reloaded when the file changes.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// PEM CA certificates: callers of the admission endpoints must present a client
    /// certificate they issued (the API server's, as webhooks are advised to require).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub(crate) client_ca: Option<PathBuf>,
    /// Connections the admission listener holds open at once (lowered to fit the open-file
    /// limit, whose soft value is raised to the hard one); beyond, they wait unserved.
    #[arg(long, default_value_t = crate::server::limits::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub(crate) max_connections: usize,
    /// Threads serving the admission endpoints, each with its own connections and pools of
    /// connections to webhooks (default: the CPUs this process may use).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) threads: Option<u16>,
    /// Serve plain HTTP instead of HTTPS (for local testing only).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub(crate) insecure_http: bool,
    /// Address of /metrics, /healthz and /readyz (plain HTTP).
    #[arg(long, default_value = "0.0.0.0:9090", value_name = "HOST:PORT")]
    pub(crate) metrics_listen: String,
    /// Export traces (a span per review, one per webhook call) as OTLP/HTTP protobuf to
    /// URL/v1/traces, e.g. http://127.0.0.1:4318. Off by default.
    #[arg(long, value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    /// Accept a configuration without a single webhook (otherwise an error).
    #[arg(long)]
    pub(crate) allow_empty: bool,
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub(crate) output: Output,
}

/// Which dispatchers `review` runs, as the endpoint of the same name would.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StageArg {
    /// `/mutate`: the mutating chain only.
    Mutate,
    /// `/validate`: the validating webhooks only.
    Validate,
    /// `/admit`: the mutating chain, then the validating webhooks on its result.
    Admit,
}

impl From<StageArg> for Endpoint {
    fn from(stage: StageArg) -> Self {
        match stage {
            StageArg::Mutate => Endpoint::Mutate,
            StageArg::Validate => Endpoint::Validate,
            StageArg::Admit => Endpoint::Admit,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ReviewArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    #[arg(long, value_enum, default_value = "admit")]
    pub(crate) stage: StageArg,
    /// The caller's timeout, as the API server's `?timeout=` (a Go duration, e.g. 10s): the
    /// deadline budget of the review.
    #[arg(long, value_name = "DURATION")]
    pub(crate) timeout: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub(crate) output: Output,
    /// An AdmissionReview (JSON) file; `-` reads standard input. After `--config a b`, the
    /// last value is taken as the file when none follows.
    pub(crate) file: Option<PathBuf>,
}

/// Which replayed reviews `replay --export` writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportOnly {
    /// Those on which the candidate disagrees.
    #[default]
    Disagreeing,
    /// Every review replayed.
    All,
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Recording files (`reviews-*.jsonl`, or gzip `reviews-*.jsonl.gz`) or directories (all
    /// their `reviews-*` files, in name order).
    #[arg(required = true, value_name = "RECORDING")]
    pub(crate) recordings: Vec<PathBuf>,
    /// The candidate fleet: configuration files or directories; may be repeated.
    #[arg(long = "config", required = true, value_name = "PATH", action = clap::ArgAction::Append)]
    pub(crate) config: Vec<PathBuf>,
    /// Reviews sent a second at most, baseline repeats included (`N/s`; default 50/s).
    #[arg(long, value_name = "N/s")]
    pub(crate) rate: Option<String>,
    /// Reviews in flight at most.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) concurrency: u16,
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub(crate) output: Output,
    /// Disagreements allowed before exiting 1: a count (`5`) or a percent of the reviews
    /// replayed (`2.5%`).
    #[arg(long, default_value = "0", value_name = "N|N%")]
    pub(crate) max_disagreement: String,
    /// Compare this webhook's own outcome in each review (allowed, denied, error; its code;
    /// whether it patched) instead of the whole answer: to replace one webhook in a fleet.
    #[arg(long, value_name = "NAME")]
    pub(crate) only_webhook: Option<String>,
    /// Compare this ValidatingAdmissionPolicy's own outcome in each review (allowed, denied,
    /// error; its code) instead of the whole answer.
    #[arg(long, value_name = "NAME", conflicts_with = "only_webhook")]
    pub(crate) only_policy: Option<String>,
    /// Replay each review this many times against --baseline first; a review whose answers
    /// vary there is set aside (`skipped`), not counted as a disagreement. Default 3.
    #[arg(long, value_name = "K", requires = "baseline", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: Option<u32>,
    /// The fleet that was recorded (for --repeat); may be repeated.
    #[arg(long, value_name = "PATH", action = clap::ArgAction::Append)]
    pub(crate) baseline: Vec<PathBuf>,
    /// Write reviews as AdmissionReview files (admission.k8s.io/v1) into DIR (made 0700,
    /// files 0600), for `review` and for webhook tests.
    #[arg(long, value_name = "DIR")]
    pub(crate) export: Option<PathBuf>,
    /// Which reviews --export writes.
    #[arg(long, value_enum, default_value_t, requires = "export")]
    pub(crate) export_only: ExportOnly,
    /// Which namespaces the fleets' namespaceSelectors and policies see: `recorded`, as each
    /// review saw them when it was recorded (the candidate's Namespace objects for a namespace
    /// a record does not hold), or `config`, the candidate configuration's Namespace objects
    /// only.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) world: WorldArg,
    /// Evaluate against the live cluster instead (namespace labels, policy parameters,
    /// authorizer checks), through KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long, conflicts_with = "world")]
    pub(crate) kube: bool,
    /// `--kube` with this kubeconfig file.
    #[arg(long, value_name = "FILE", conflicts_with = "world")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

/// Where `replay` finds the namespaces a review's world holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorldArg {
    /// As recorded; the candidate's Namespace objects for a namespace a record does not hold.
    #[default]
    Recorded,
    /// The candidate configuration's Namespace objects only.
    Config,
}

/// `serve`'s own runtime's workers (src/server/threads.rs serves the reviews).
const CONTROL_WORKERS: usize = 2;

/// Runs a command to completion and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Serve(_)) {
        // Reviews have threads of their own (src/server/threads.rs); this runtime runs the
        // admin listener, reloads, cluster watches and trace export.
        builder.worker_threads(CONTROL_WORKERS);
    }
    let runtime = match builder.enable_all().on_thread_park(crate::alloc::on_park).build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return exit::code(exit::ERROR);
        }
    };
    let code = runtime.block_on(async {
        let result = match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::Check(args) => return check::run(&args),
            Command::Review(args) => return review::run(args).await,
            Command::Replay(args) => return replay::run(args).await,
            Command::Registration(args) => return crate::registration::run(args),
            Command::Demo(args) => crate::demo::run(args).await,
        };
        match result {
            Ok(()) => exit::code(exit::SUCCESS),
            Err(error) => {
                eprintln!("error: {error:#}");
                exit::code(exit::ERROR)
            }
        }
    });
    // Whatever blocking work is left (a webhook answer being decoded) is not waited for long.
    runtime.shutdown_timeout(STOP_SLACK);
    code
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let tls = match (args.tls_cert, args.tls_key, args.insecure_http) {
        (Some(cert), Some(key), false) => Some((cert, key)),
        (_, _, true) => None,
        _ => anyhow::bail!("--tls-cert and --tls-key are required unless --insecure-http is given"),
    };
    let cluster = if args.kube || args.kubeconfig.is_some() || args.fleet_selector.is_some() {
        let max_staleness = crate::go::duration::parse(&args.namespace_staleness)
            .ok()
            .and_then(|nanos| u64::try_from(nanos).ok())
            .filter(|nanos| *nanos > 0)
            .map(std::time::Duration::from_nanos)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--namespace-staleness {:?}: not a positive Go duration",
                    args.namespace_staleness
                )
            })?;
        Some(crate::cluster::ClusterOptions {
            kubeconfig: args.kubeconfig,
            fleet_selector: args.fleet_selector,
            fleet_namespace: args.fleet_namespace,
            max_staleness,
        })
    } else {
        None
    };
    let drain_delay = duration_flag("--drain-delay", &args.drain_delay)?;
    let in_flight_grace = duration_flag("--in-flight-grace", &args.in_flight_grace)?;
    let mut options = ServeOptions::new(
        args.config,
        app::resolve(&args.listen).await?,
        app::resolve(&args.metrics_listen).await?,
        tls,
    );
    options.cluster = cluster;
    options.client_ca = args.client_ca;
    options.max_connections = args.max_connections.max(1);
    options.threads = args.threads.map_or_else(crate::lanes::default_threads, usize::from);
    options.otlp_endpoint = args.otlp_endpoint;
    options.in_flight_grace = in_flight_grace;
    options.record = args.record;
    options.record_write_delay = match &args.record_write_delay {
        Some(delay) => Some(duration_flag("--record-write-delay", delay)?),
        None => None,
    };
    let running = app::start(options).await?;
    let watching = tokio::spawn(crate::alloc::watch(CONTROL_WORKERS, running.serving_runtimes().to_vec()));
    app::shutdown_signal().await;
    watching.abort();
    tracing::info!("shutting down: draining");
    // Bounded whatever the serving threads are doing: one stuck in CPU work would never see
    // its own grace run out. The process then ends with the threads still running.
    let bound = drain_delay.saturating_add(in_flight_grace).saturating_add(STOP_SLACK);
    if tokio::time::timeout(bound, running.drain(drain_delay)).await.is_err() {
        tracing::error!(
            bound_ms = bound.as_millis() as u64,
            "the serving threads did not stop within the drain delay and the in-flight grace: exiting without them"
        );
    }
    Ok(())
}

/// Past the drain delay and the in-flight grace, the most a stop may take for the background
/// tasks and the last spans to be sent.
const STOP_SLACK: std::time::Duration = std::time::Duration::from_secs(5);

/// A flag holding a Go duration of 0 or more.
fn duration_flag(flag: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    crate::go::duration::parse(text)
        .ok()
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(std::time::Duration::from_nanos)
        .ok_or_else(|| anyhow::anyhow!("{flag} {text:?}: not a Go duration of 0 or more"))
}

/// Writes `value` as JSON or YAML (text output is each command's own).
pub(crate) fn print_structured(output: Output, value: &serde_json::Value) {
    match output {
        Output::Yaml => match serde_norway::to_string(value) {
            Ok(yaml) => print!("{yaml}"),
            Err(error) => eprintln!("error: cannot write YAML: {error}"),
        },
        _ => println!("{}", serde_json::to_string_pretty(value).unwrap_or_default()),
    }
}
