//! STUB
pub async fn run(_args: crate::cli::DemoArgs) -> anyhow::Result<()> {
    Ok(())
}
