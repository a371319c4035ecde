//! `review`: one AdmissionReview file through the real dispatch against the live fleet, with
//! its explanation. Exit 0 allowed, 1 denied, 2 error.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use super::{exit, print_structured, Output, ReviewArgs};
use crate::endpoint::Endpoint;
use crate::report;
use crate::review::decode;

pub(super) async fn run(args: ReviewArgs) -> ExitCode {
    match review(args).await {
        Ok(true) => exit::code(exit::SUCCESS),
        Ok(false) => exit::code(exit::NEGATIVE),
        Err(error) => {
            eprintln!("error: {error:#}");
            exit::code(exit::ERROR)
        }
    }
}

/// Said on standard error when the review carries redacted values.
const REDACTED_NOTE: &str =
    "note: this review carries redacted values (a Secret's data as hmac-sha256 hashes, \
     from a recording): the decision could depend on a redacted value";

/// `Ok(allowed)`.
async fn review(mut args: ReviewArgs) -> anyhow::Result<bool> {
    let file = review_file(&mut args)?;
    let timeout = args.timeout.as_deref().map(parse_timeout).transpose()?;
    let body = if file.as_os_str() == "-" {
        let mut body = Vec::new();
        std::io::stdin().read_to_end(&mut body).context("reading standard input")?;
        body
    } else {
        std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let review = decode::review(&body)
        .with_context(|| format!("{} is not a usable AdmissionReview", file.display()))?;
    // A review exported from a recording (`replay --export`) has a Secret's values as keyed
    // hashes: the webhooks judged those, not the values the API server sent.
    if serde_json::from_slice(&body).is_ok_and(|review| crate::replay::review_holds_redacted(&review)) {
        eprintln!("{REDACTED_NOTE}");
    }
    let endpoint = Endpoint::from(args.stage);
    let outcome = crate::app::review_once(&args.config.paths, &review, endpoint, timeout).await?;
    match args.output {
        Output::Text => {
            print!("{}", report::text(endpoint, &review.request.uid, review.version, &outcome, true))
        }
        output => print_structured(
            output,
            &report::structured(endpoint, &review.request.uid, review.version, &outcome),
        ),
    }
    Ok(outcome.answer.allowed)
}

/// The review file: the positional argument, or the last `--config` value when none was given
/// (`--config a b review.json`).
fn review_file(args: &mut ReviewArgs) -> anyhow::Result<PathBuf> {
    if let Some(file) = args.file.take() {
        return Ok(file);
    }
    if args.config.paths.len() > 1 {
        if let Some(file) = args.config.paths.pop() {
            return Ok(file);
        }
    }
    anyhow::bail!("an AdmissionReview file is required (or - for standard input)")
}

fn parse_timeout(text: &str) -> anyhow::Result<Duration> {
    let nanos = crate::go::duration::parse(text).map_err(|e| anyhow::anyhow!("invalid --timeout: {e}"))?;
    let nanos = u64::try_from(nanos)
        .map_err(|_| anyhow::anyhow!("invalid --timeout {text:?}: must not be negative"))?;
    Ok(Duration::from_nanos(nanos))
}
