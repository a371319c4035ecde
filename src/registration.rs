//! `admission-gateway registration`: the gateway's own `MutatingWebhookConfiguration` and
//! `ValidatingWebhookConfiguration`, derived from the fleet it stands in front of.
//!
//! The API server must call the gateway for every request some fleet webhook could want, and
//! leave it the time to run that fleet:
//! - ValidatingAdmissionPolicies are validating too: each bound policy's `matchConstraints`
//!   resourceRules join the validating phase's rules, and its failurePolicy counts.
//! - `rules`: the union of the phase's fleet rules, each verbatim (subresources and scope kept),
//!   without exact duplicates or rules another one covers, in the fleet's call order; or `*/*`
//!   with `--all-resources`. `matchPolicy: Equivalent`, so that a request in another version of
//!   a listed resource still reaches the gateway, converted to the listed version, as it would
//!   reach a fleet webhook (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`,
//!   `ShouldCallHook`: an exact rule match first, then an equivalent resource).
//! - `failurePolicy`: `Fail` if any webhook of the phase fails closed (unset is `Fail`).
//! - `timeoutSeconds`: the phase's worst case plus the `GatewayConfig`'s `deadlineMargin` (default 1 s), capped at 30.
//! - `namespaceSelector`: every namespace but the gateway's own, `kube-system`,
//!   `kube-node-lease` and those labelled `admission-gateway/ignore=true` (configurable).
//!
//! [`build`] is pure (fleet and options → YAML, notes for stderr); [`run`] is the command.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine as _;
use clap::{ArgGroup, ValueEnum};

use crate::config::manifest::{
    LabelSelector, LabelSelectorRequirement, Namespace, RuleWithOperations, Webhook, WebhookConfiguration,
    WebhookConfigurationBody, WebhookKind,
};
use crate::config::policy::{FailurePolicy as PolicyFailure, Policy, PolicyKind};
use crate::config::selector::{Labels, Selector};
use crate::config::{compile, defaults, validate, Severity};

/// What the gateway keeps back from the API server's `?timeout=` unless the `GatewayConfig`
/// says otherwise: the rest is the budget of the whole review, so the registration's
/// `timeoutSeconds` must exceed the fleet's worst case by it.
pub(crate) use crate::config::settings::DEFAULT_DEADLINE_MARGIN;
/// The largest `timeoutSeconds` the API server accepts
/// (`pkg/apis/admissionregistration/validation/validation.go`).
const MAX_TIMEOUT_SECONDS: u64 = 30;
/// `metadata.name` of both configurations unless `--name` is given.
pub(crate) const DEFAULT_NAME: &str = "admission-gateway";
/// The gateway's webhook names: fully qualified (three or more DNS labels), as the API server
/// requires; they only need to be unique within their configuration object.
pub(crate) const MUTATING_WEBHOOK_NAME: &str = "mutate.admission-gateway.io";
pub(crate) const VALIDATING_WEBHOOK_NAME: &str = "validate.admission-gateway.io";
/// A namespace with this label set to `"true"` is not sent to the gateway.
pub(crate) const IGNORE_LABEL: &str = "admission-gateway/ignore";
/// The label the API server sets on every namespace to its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Excluded unless `--no-default-exclusions`, with the gateway's own namespace.
const DEFAULT_EXCLUDED_NAMESPACES: [&str; 2] = ["kube-system", "kube-node-lease"];
/// cert-manager's CA injector fills `caBundle` from the named Certificate's CA.
const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";
const ADMISSIONREGISTRATION_V1: &str = "admissionregistration.k8s.io/v1";
/// The exit code of every failure, as clap's for bad flags.
const EXIT_ERROR: u8 = 2;

const AFTER_LONG_HELP: &str = "\
Each phase with fleet webhooks gets one gateway webhook (a phase without is omitted):
  rules:             the union of the phase's fleet rules (or */* with --all-resources),
                     matchPolicy Equivalent
  failurePolicy:     Fail if some fleet webhook of the phase has Fail (unset is Fail), else Ignore
  timeoutSeconds:    validating, the largest fleet timeoutSeconds; mutating, the chain's sum,
                     twice for IfNeeded webhooks a later one can reinvoke; plus the gateway's
                     deadline margin (1s), rounded up, capped at 30 (a warning says when it cuts)
  namespaceSelector: not the gateway's namespace, kube-system, kube-node-lease, nor namespaces
                     labelled admission-gateway/ignore=true (a warning names each fleet webhook
                     that would have been called there)
YAML goes to stdout, notes and warnings to stderr. Exit status: 0, or 2 on any error.";

/// Print the gateway's own MutatingWebhookConfiguration and ValidatingWebhookConfiguration for
/// the fleet (YAML on stdout; notes and warnings on stderr; exit 2 on any error).
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("endpoint").required(true).args(["service", "url"])))]
#[command(after_long_help = AFTER_LONG_HELP)]
pub struct RegistrationArgs {
    /// A configuration file or directory (repeatable): the fleet, as `serve` reads it.
    #[arg(long = "config", required = true, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    pub(crate) paths: Vec<PathBuf>,
    /// The gateway's Service: clientConfig.service, path /mutate resp. /validate (port 443 unless given).
    #[arg(long, value_name = "NS/NAME[:PORT]", value_parser = parse_service)]
    pub(crate) service: Option<ServiceRef>,
    /// The gateway's base URL (https://…): clientConfig.url is URL/mutate resp. URL/validate.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// PEM file of the CA that signed the gateway's serving certificate: clientConfig.caBundle.
    #[arg(long, value_name = "FILE")]
    pub(crate) ca_bundle: Option<PathBuf>,
    /// Without --ca-bundle: add the `cert-manager.io/inject-ca-from` annotation, so that
    /// cert-manager's CA injector fills caBundle in from this Certificate.
    #[arg(long, value_name = "NS/CERTIFICATE", conflicts_with = "ca_bundle", value_parser = parse_inject_ca_from)]
    pub(crate) inject_ca_from: Option<String>,
    /// metadata.name of both configurations.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_NAME)]
    pub(crate) name: String,
    /// Register for every resource and subresource (`*/*`) and operation instead of the union of
    /// the fleet's rules.
    #[arg(long)]
    pub(crate) all_resources: bool,
    /// reinvocationPolicy of the gateway's mutating webhook.
    ///
    /// The gateway runs the fleet's IfNeeded reinvocation round itself, so `Never` is right for
    /// almost everyone. `IfNeeded` lets the API server call the gateway a second time when a later
    /// webhook or in-tree plugin changed the object; the gateway then runs the whole chain again,
    /// calling the fleet's `Never` webhooks twice.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "Never")]
    pub(crate) reinvocation: Reinvocation,
    /// The gateway's own namespace, always excluded [default: the --service namespace].
    #[arg(long, value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// Also exclude this namespace: the API server will not call the gateway for its requests
    /// (repeatable).
    #[arg(long = "exclude-namespace", value_name = "NS")]
    pub(crate) exclude_namespaces: Vec<String>,
    /// Do not exclude kube-system, kube-node-lease and namespaces labelled
    /// admission-gateway/ignore=true (the gateway's own namespace stays excluded).
    #[arg(long)]
    pub(crate) no_default_exclusions: bool,
}

/// `--service NS/NAME[:PORT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) port: i64,
}

/// `reinvocationPolicy` of the gateway's mutating webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Reinvocation {
    #[value(name = "Never")]
    Never,
    #[value(name = "IfNeeded")]
    IfNeeded,
}

fn parse_service(text: &str) -> Result<ServiceRef, String> {
    const FORM: &str = "expected NAMESPACE/NAME or NAMESPACE/NAME:PORT";
    let (namespace, rest) = text.split_once('/').ok_or(FORM)?;
    let (name, port) = match rest.split_once(':') {
        Some((name, port)) => {
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or(format!("port {port:?}: expected 1-65535"))?;
            (name, i64::from(port))
        }
        None => (rest, defaults::SERVICE_PORT),
    };
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return Err(FORM.to_owned());
    }
    Ok(ServiceRef { namespace: namespace.to_owned(), name: name.to_owned(), port })
}

fn parse_inject_ca_from(text: &str) -> Result<String, String> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(text.to_owned())
        }
        _ => Err("expected NAMESPACE/CERTIFICATE".to_owned()),
    }
}

/// Where the API server sends the gateway's reviews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Service(ServiceRef),
    /// The base URL; `/mutate` or `/validate` is appended.
    Url(String),
}

/// Everything [`build`] needs besides the fleet.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) name: String,
    pub(crate) endpoint: Endpoint,
    /// `caBundle`: base64 of the PEM file.
    pub(crate) ca_bundle: Option<String>,
    pub(crate) inject_ca_from: Option<String>,
    pub(crate) all_resources: bool,
    pub(crate) reinvocation: Reinvocation,
    /// The gateway's own namespace, if known.
    pub(crate) own_namespace: Option<String>,
    /// Excluded namespaces besides the own one.
    pub(crate) excluded_namespaces: Vec<String>,
    /// Whether namespaces labelled `admission-gateway/ignore=true` are excluded.
    pub(crate) exclude_ignore_label: bool,
    pub(crate) margin: Duration,
    /// The command as typed, for the header comment.
    pub(crate) command_line: String,
}

impl Options {
    fn from_args(args: &RegistrationArgs, ca_bundle: Option<String>, command_line: String) -> Self {
        let endpoint = match (&args.service, &args.url) {
            (Some(service), _) => Endpoint::Service(service.clone()),
            (None, url) => Endpoint::Url(url.clone().unwrap_or_default()),
        };
        let mut excluded_namespaces = args.exclude_namespaces.clone();
        if !args.no_default_exclusions {
            excluded_namespaces.extend(DEFAULT_EXCLUDED_NAMESPACES.map(str::to_owned));
        }
        Self {
            name: args.name.clone(),
            own_namespace: args
                .namespace
                .clone()
                .or_else(|| args.service.as_ref().map(|s| s.namespace.clone())),
            endpoint,
            ca_bundle,
            inject_ca_from: args.inject_ca_from.clone(),
            all_resources: args.all_resources,
            reinvocation: args.reinvocation,
            excluded_namespaces,
            exclude_ignore_label: !args.no_default_exclusions,
            margin: DEFAULT_DEADLINE_MARGIN,
            command_line,
        }
    }
}

fn ca_bundle(pem: &[u8]) -> Result<String, String> {
    // The same check the gateway applies to a fleet's caBundle at load.
    validate::ca_bundle::holds_a_certificate(pem)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(pem))
}

/// A word as a POSIX shell reads it back.
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn command_line(args: impl Iterator<Item = OsString>) -> String {
    std::iter::once("admission-gateway".to_owned())
        .chain(args.skip(1).map(|arg| arg.to_string_lossy().into_owned()))
        .map(|word| shell_quote(&word))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// The command.

/// `registration`: YAML on stdout, notes and warnings on stderr; exit 2 on any error.
pub(crate) fn run(args: RegistrationArgs) -> ExitCode {
    match execute(&args) {
        Ok(built) => {
            for note in &built.notes {
                eprintln!("{note}");
            }
            match std::io::stdout().lock().write_all(built.yaml.as_bytes()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("error: writing the registration: {error}");
                    ExitCode::from(EXIT_ERROR)
                }
            }
        }
        Err(lines) => {
            for line in lines {
                eprintln!("{line}");
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn execute(args: &RegistrationArgs) -> Result<Built, Vec<String>> {
    let ca_bundle = args.ca_bundle.as_deref().map(read_ca_bundle).transpose().map_err(|e| vec![e])?;
    let (objects, settings, policies, problems) = compile::read_checked(&args.paths);
    let errors = problems.iter().filter(|p| p.severity == Severity::Error).count();
    let mut lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    if errors > 0 {
        let warnings = problems.len() - errors;
        lines.push(format!("configuration refused: {errors} error(s), {warnings} warning(s)"));
        return Err(lines);
    }
    let mut fleet: Vec<WebhookConfiguration> = objects.configurations.into_iter().map(|(_, c)| c).collect();
    let bound = policies.validating.iter().chain(policies.mutating.iter()).filter(|p| !p.bindings.is_empty());
    fleet.extend(bound.map(|p| as_webhook(p)));
    let namespaces: Vec<Namespace> = objects.namespaces.into_iter().map(|(_, n)| n).collect();
    let mut options = Options::from_args(args, ca_bundle, command_line(std::env::args_os()));
    // The same margin the gateway will keep back from the `?timeout=` this registration sets.
    options.margin = settings.deadline_margin;
    let mut built = build(&fleet, &namespaces, &options)?;
    lines.append(&mut built.notes);
    built.notes = lines;
    Ok(built)
}

/// A bound admission policy as the webhook of its phase the registration must make room for:
/// the resources its `matchConstraints` can match, its failurePolicy, evaluated in the
/// gateway (no call, so the shortest timeout).
fn as_webhook(policy: &Policy) -> WebhookConfiguration {
    let kind = match policy.kind {
        PolicyKind::Validating => WebhookKind::Validating,
        PolicyKind::Mutating => WebhookKind::Mutating,
    };
    let failure_policy = match policy.failure_policy {
        PolicyFailure::Ignore => "Ignore",
        PolicyFailure::Fail | PolicyFailure::Unrecognized(_) => "Fail",
    };
    let webhook = Webhook {
        name: format!("{}.policy.admission-gateway", policy.name),
        client_config: Default::default(),
        rules: policy.rules().to_vec(),
        failure_policy: Some(failure_policy.to_owned()),
        match_policy: Some("Equivalent".to_owned()),
        namespace_selector: Some(LabelSelector::default()),
        object_selector: Some(LabelSelector::default()),
        side_effects: Some("None".to_owned()),
        timeout_seconds: Some(1),
        admission_review_versions: Some(vec!["v1".to_owned()]),
        reinvocation_policy: None,
        match_conditions: None,
    };
    WebhookConfiguration {
        kind,
        version: crate::config::manifest::ApiVersion::V1,
        metadata: crate::config::manifest::ObjectMeta {
            name: format!("{}/{}", policy.kind.policy(), policy.name),
            ..Default::default()
        },
        webhooks: vec![webhook],
    }
}

fn read_ca_bundle(path: &Path) -> Result<String, String> {
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|pem| ca_bundle(&pem))
        .map_err(|e| format!("error: --ca-bundle {}: {e}", path.display()))
}

mod build;
mod objects;
#[cfg(test)]
mod tests;

use build::*;
