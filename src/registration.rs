//! TEMPORARY stand-in, replaced on merge.
#[derive(Debug, clap::Args)]
pub struct RegistrationArgs {}
pub(crate) fn run(_args: RegistrationArgs) -> std::process::ExitCode {
    std::process::ExitCode::from(2)
}
