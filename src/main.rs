//! The `admission-gateway` binary: parse the command line, set up logging (`logging.rs`), run. No logic.

use clap::Parser as _;

/// mimalloc: the gateway's hot path allocates many small, short-lived JSON nodes and buffers;
/// glibc's malloc spent ~14 % of a mutating review's CPU on them (`loadtest/README.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Idle runtime workers hand the memory of a burst back, and no huge pages (src/alloc.rs).
    admission_gateway::alloc::disable_transparent_huge_pages();
    admission_gateway::alloc::install(alloc_trim::collect);
    let cli = admission_gateway::cli::Cli::parse();
    // Kept to the end: dropping it flushes the queued log lines.
    let _logs = match cli.init_logging() {
        Ok(guard) => guard,
        Err(error) => {
            eprintln!("error: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    admission_gateway::cli::run(cli)
}
