//! The command line. Knows nothing of the configuration's contents.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::pipeline::Stage;

/// One admission webhook in front of a Kubernetes webhook fleet, deciding exactly as
/// kube-apiserver would with the fleet registered directly.
#[derive(Debug, Parser)]
#[command(name = "admission-gateway", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve /mutate, /validate and /admit, with /metrics on a second listener.
    Serve(ServeArgs),
    /// Validate the configuration as the API server would; print every problem.
    Check(ConfigArgs),
    /// Run one AdmissionReview file through the live fleet and print the answer and a trace.
    Review(ReviewArgs),
    /// Start an example fleet with the gateway in front, send sample reviews, keep serving.
    Demo(DemoArgs),
    /// Print the gateway's own Mutating/ValidatingWebhookConfiguration for the fleet.
    Registration(crate::registration::RegistrationArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// A configuration file or directory (repeatable): YAML or JSON Kubernetes objects.
    #[arg(long = "config", required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Address of the admission endpoints.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// PEM certificate (chain) to serve; reloaded when the file changes.
    #[arg(long, value_name = "PATH", required_unless_present = "insecure_http", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert; reloaded when the file changes.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS (for local testing only).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub insecure_http: bool,
    /// Address of /metrics, /healthz and /readyz (plain HTTP).
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub metrics_listen: SocketAddr,
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Which dispatchers to run, as the endpoint of the same name would.
    #[arg(long, value_enum, default_value = "admit")]
    pub stage: Stage,
    /// The caller's timeout, as the API server's `?timeout=` (e.g. 10s).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// An AdmissionReview (JSON) file; `-` reads standard input.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address of the gateway's HTTPS listener.
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub listen: SocketAddr,
    /// Send the sample reviews, print their traces and exit instead of serving until Ctrl-C.
    #[arg(long)]
    pub once: bool,
}
