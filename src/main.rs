//! The `admission-gateway` binary: parse the command line, set up logging, run. No logic.

use clap::Parser as _;

/// mimalloc: the gateway's hot path allocates many small, short-lived JSON nodes and buffers;
/// glibc's malloc spent ~14 % of a mutating review's CPU on them (`loadtest/README.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = admission_gateway::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    admission_gateway::cli::run(cli)
}
