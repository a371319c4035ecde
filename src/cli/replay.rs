//! `replay`: a recording sent through a candidate fleet and compared with what was answered.
//! Exit 0 within `--max-disagreement`, 1 over it, 2 error (docs/operations.md, "Replaying a
//! recording").

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;

use super::{exit, print_structured, Output, ReplayArgs, WorldArg};
use crate::pipeline::outcome::CallerKind;
use crate::replay::{self, Difference, Export, Options, Summary};

/// `--rate` unless given: reviews a second.
const DEFAULT_RATE: u32 = 50;
/// `--rate` at most.
const MAX_RATE: u32 = 10_000;
/// How long the namespace watch of `--kube` may be down before its cache is stale (as
/// `serve --namespace-staleness`'s default).
const NAMESPACE_STALENESS: std::time::Duration = std::time::Duration::from_secs(30);
/// `--repeat` when `--baseline` is given without it.
const DEFAULT_REPEAT: u32 = 3;

pub(super) async fn run(args: ReplayArgs) -> ExitCode {
    match replay(args).await {
        Ok(true) => exit::code(exit::SUCCESS),
        Ok(false) => exit::code(exit::NEGATIVE),
        Err(error) => {
            eprintln!("error: {error:#}");
            exit::code(exit::ERROR)
        }
    }
}

/// `Ok(within the allowed disagreement)`.
async fn replay(args: ReplayArgs) -> anyhow::Result<bool> {
    let rate = parse_rate(args.rate.as_deref())?;
    let allowed = Threshold::parse(&args.max_disagreement)?;
    let options = Options {
        recordings: args.recordings,
        candidate: args.config,
        rate,
        concurrency: usize::from(args.concurrency),
        only: match (args.only_webhook, args.only_policy) {
            (Some(name), _) => Some(replay::Only { kind: CallerKind::Webhook, name }),
            (None, Some(name)) => Some(replay::Only { kind: CallerKind::Policy, name }),
            (None, None) => None,
        },
        repeat: args.repeat.unwrap_or(DEFAULT_REPEAT),
        baseline: (!args.baseline.is_empty()).then_some(args.baseline),
        export: args.export.map(|dir| (dir, args.export_only.into())),
        world: match (args.kube || args.kubeconfig.is_some(), args.world) {
            (true, _) => replay::World::Cluster(crate::cluster::ClusterOptions {
                kubeconfig: args.kubeconfig,
                fleet_selector: None,
                fleet_namespace: None,
                max_staleness: NAMESPACE_STALENESS,
            }),
            (false, WorldArg::Recorded) => replay::World::Recorded,
            (false, WorldArg::Config) => replay::World::Configuration,
        },
    };
    let summary = replay::run(&options).await?;
    match args.output {
        Output::Text => print!("{}", text(&summary)),
        output => print_structured(output, &serde_json::to_value(&summary)?),
    }
    Ok(allowed.holds(summary.disagree, summary.total))
}

/// `N/s` or `N`: reviews a second, 1 to [`MAX_RATE`].
fn parse_rate(text: Option<&str>) -> anyhow::Result<u32> {
    let Some(text) = text else { return Ok(DEFAULT_RATE) };
    let number = text.strip_suffix("/s").unwrap_or(text);
    match number.parse::<u32>() {
        Ok(rate @ 1..=MAX_RATE) => Ok(rate),
        _ => anyhow::bail!("--rate {text:?}: reviews a second, N/s with N from 1 to {MAX_RATE}"),
    }
}

/// `--max-disagreement`: a count, or a percent of the reviews replayed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Threshold {
    Count(u64),
    Percent(f64),
}

impl Threshold {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let invalid = || anyhow::anyhow!("--max-disagreement {text:?}: a count (5) or a percent (2.5%)");
        match text.strip_suffix('%') {
            Some(percent) => {
                let percent: f64 = percent.trim().parse().map_err(|_| invalid())?;
                if !(0.0..=100.0).contains(&percent) {
                    return Err(invalid());
                }
                Ok(Threshold::Percent(percent))
            }
            None => text.trim().parse().map(Threshold::Count).map_err(|_| invalid()),
        }
    }

    /// Whether `disagree` of `total` is within it.
    fn holds(self, disagree: u64, total: u64) -> bool {
        match self {
            Threshold::Count(most) => disagree <= most,
            Threshold::Percent(percent) => disagree as f64 * 100.0 <= percent * total as f64,
        }
    }
}

impl From<super::ExportOnly> for Export {
    fn from(only: super::ExportOnly) -> Self {
        match only {
            super::ExportOnly::Disagreeing => Export::Disagreeing,
            super::ExportOnly::All => Export::All,
        }
    }
}

/// For people: the counts, then each difference.
fn text(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "replayed {} reviews: {} agree, {} disagree",
        summary.total, summary.agree, summary.disagree
    );
    if summary.unstable > 0 {
        let _ = write!(out, ", {} unstable (the baseline's own answers vary)", summary.unstable);
    }
    let _ = writeln!(out);
    let kinds: Vec<String> = replay::Kind::ALL
        .iter()
        .map(|kind| format!("{} {}", kind.as_str(), summary.by_kind.get(kind.as_str()).unwrap_or(&0)))
        .collect();
    let _ = writeln!(out, "  {}", kinds.join(", "));
    if summary.skipped > 0 {
        let listed = match summary.skipped_lines.len() as u64 {
            all if all == summary.skipped => "each listed below".to_owned(),
            first => format!("the first {first} listed below"),
        };
        let _ = writeln!(
            out,
            "skipped {} lines that are not recorded reviews (torn or undecodable; {listed})",
            summary.skipped
        );
    }
    for difference in &summary.differences {
        difference_text(&mut out, difference);
    }
    if summary.differences_omitted > 0 {
        let _ = writeln!(out, "-- and {} more differences, not listed", summary.differences_omitted);
    }
    for request in &summary.unstable_requests {
        let _ = writeln!(
            out,
            "-- unstable, set aside: {} {} {} {} (uid {})",
            request.endpoint,
            request.operation,
            request.kind,
            object_name(&request.namespace, &request.name),
            request.uid
        );
    }
    for skipped in &summary.skipped_lines {
        let _ = writeln!(out, "-- skipped {}: {}", skipped.line, skipped.problem);
    }
    let unlisted = summary.skipped.saturating_sub(summary.skipped_lines.len() as u64);
    if unlisted > 0 {
        let _ = writeln!(out, "-- and {unlisted} more skipped lines, not listed");
    }
    if let Some(exported) = summary.exported {
        let _ = writeln!(out, "exported {exported} AdmissionReview files");
    }
    out
}

fn difference_text(out: &mut String, difference: &Difference) {
    let request = &difference.request;
    let _ = writeln!(
        out,
        "-- {}: {} {} {} {} (uid {}) at {}",
        difference.kind.as_str(),
        request.endpoint,
        request.operation,
        request.kind,
        object_name(&request.namespace, &request.name),
        request.uid,
        difference.record
    );
    let _ = writeln!(out, "   recorded:  {}", said(&difference.recorded));
    let _ = writeln!(out, "   candidate: {}", said(&difference.candidate));
    for change in &difference.object_diff {
        let side = |value: &Option<Value>| value.as_ref().map_or("(absent)".to_owned(), Value::to_string);
        let _ = writeln!(out, "   {}: {} → {}", change.path, side(&change.recorded), side(&change.candidate));
    }
    if difference.object_diff_omitted > 0 {
        let _ = writeln!(out, "   … and {} more paths", difference.object_diff_omitted);
    }
    if difference.depends_on_redacted {
        let _ = writeln!(
            out,
            "   note: the decision could depend on a redacted value (a Secret's value is a keyed hash in the recording)"
        );
    }
}

/// `NAMESPACE/NAME`, `NAME` or `-`.
fn object_name(namespace: &str, name: &str) -> String {
    match (namespace, name) {
        ("", "") => "-".to_owned(),
        ("", name) => name.to_owned(),
        (namespace, name) => format!("{namespace}/{name}"),
    }
}

/// One side of a difference in a line: `denied 403 "message"`, or a webhook's or policy's turns.
fn said(side: &Value) -> String {
    if let Some(webhook) = side.get("webhook").or_else(|| side.get("policy")) {
        let turns = side["turns"].as_array().map(Vec::as_slice).unwrap_or_default();
        if turns.is_empty() {
            return format!("{} not matched", webhook.as_str().unwrap_or_default());
        }
        let turns: Vec<String> = turns
            .iter()
            .map(|turn| {
                let mut text = format!("{} {}", turn["outcome"].as_str().unwrap_or_default(), turn["code"]);
                if turn["mutated"] == true {
                    text.push_str(" mutated");
                }
                if let Some(reason) = turn["reason"].as_str() {
                    let _ = write!(text, " ({reason})");
                }
                text
            })
            .collect();
        return format!("{} {}", webhook.as_str().unwrap_or_default(), turns.join(", then "));
    }
    let verdict = if side["allowed"] == true { "allowed" } else { "denied" };
    let mut text = format!("{verdict} {}", side["code"]);
    if let Some(message) = side["message"].as_str() {
        let _ = write!(text, " {message:?}");
    }
    if let Some(warnings) = side["warnings"].as_array() {
        let _ = write!(text, "; warnings {}", Value::Array(warnings.clone()));
    }
    if let Some(errors) = side["callErrors"].as_array() {
        let _ = write!(text, "; failed calls {}", Value::Array(errors.clone()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_count_or_percent() {
        assert_eq!(Threshold::parse("0").unwrap(), Threshold::Count(0));
        assert_eq!(Threshold::parse("2.5%").unwrap(), Threshold::Percent(2.5));
        assert!(Threshold::parse("-1").is_err() && Threshold::parse("101%").is_err());
        assert!(Threshold::parse("x%").is_err());
        assert!(Threshold::Count(2).holds(2, 10) && !Threshold::Count(2).holds(3, 10));
        assert!(Threshold::Percent(25.0).holds(1, 4) && !Threshold::Percent(20.0).holds(1, 4));
        assert!(Threshold::Percent(0.0).holds(0, 0));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate(None).unwrap(), DEFAULT_RATE);
        assert_eq!(parse_rate(Some("20/s")).unwrap(), 20);
        assert_eq!(parse_rate(Some("7")).unwrap(), 7);
        assert!(parse_rate(Some("0/s")).is_err() && parse_rate(Some("fast")).is_err());
    }
}
