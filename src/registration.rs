//! `admission-gateway registration`: the gateway's own `MutatingWebhookConfiguration` and
//! `ValidatingWebhookConfiguration`, derived from the fleet it stands in front of.
//!
//! The API server must call the gateway for every request some fleet webhook could want, and
//! leave it the time to run that fleet:
//! - `rules`: the union of the phase's fleet rules, each verbatim (subresources and scope kept),
//!   without exact duplicates or rules another one covers, in the fleet's call order; or `*/*`
//!   with `--all-resources`. `matchPolicy: Equivalent`, so that a request in another version of
//!   a listed resource still reaches the gateway, converted to the listed version, as it would
//!   reach a fleet webhook (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`,
//!   `ShouldCallHook`: an exact rule match first, then an equivalent resource).
//! - `failurePolicy`: `Fail` if any webhook of the phase fails closed (unset is `Fail`).
//! - `timeoutSeconds`: the phase's worst case plus [`DEFAULT_DEADLINE_MARGIN`], capped at 30.
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
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;
use serde::Serialize;

use crate::config::manifest::{
    LabelSelector, LabelSelectorRequirement, Namespace, RuleWithOperations, Webhook, WebhookConfiguration,
    WebhookConfigurationBody, WebhookKind,
};
use crate::config::{compile, defaults, validate, Severity};
use crate::selector::{Labels, Selector};

/// What the gateway keeps back from the API server's `?timeout=`: the rest is the budget of the
/// whole review, so the registration's `timeoutSeconds` must exceed the fleet's worst case by it.
pub(crate) const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(1);
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
    #[arg(long = "config", required = true, value_name = "PATH")]
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

// ---------------------------------------------------------------------------------------------
// The objects printed, in the field order `kubectl get -o yaml` uses.

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Registration {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    webhooks: Vec<GatewayWebhook>,
}

#[derive(Debug, Serialize)]
struct Metadata {
    name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GatewayWebhook {
    name: &'static str,
    client_config: ClientConfig,
    rules: Vec<Rule>,
    failure_policy: &'static str,
    match_policy: &'static str,
    namespace_selector: NamespaceSelector,
    side_effects: &'static str,
    timeout_seconds: u64,
    admission_review_versions: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    reinvocation_policy: Option<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClientConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<ServiceConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca_bundle: Option<String>,
}

#[derive(Debug, Serialize)]
struct ServiceConfig {
    namespace: String,
    name: String,
    path: &'static str,
    port: i64,
}

/// One rule of the gateway: a fleet rule with its scope defaulted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    operations: Vec<String>,
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceSelector {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    match_expressions: Vec<Requirement>,
}

#[derive(Clone, Debug, Serialize)]
struct Requirement {
    key: &'static str,
    operator: &'static str,
    values: Vec<String>,
}

impl Rule {
    fn from_fleet(rule: &RuleWithOperations) -> Self {
        Self {
            operations: rule.operations.clone(),
            api_groups: rule.api_groups.clone(),
            api_versions: rule.api_versions.clone(),
            resources: rule.resources.clone(),
            scope: rule.scope.clone().unwrap_or_else(|| defaults::SCOPE.to_owned()),
        }
    }

    fn everything() -> Self {
        let all = |value: &str| vec![value.to_owned()];
        Self {
            operations: all("*"),
            api_groups: all("*"),
            api_versions: all("*"),
            resources: all("*/*"),
            scope: "*".to_owned(),
        }
    }

    /// Whether every request this rule matches, `other` matches too (rule matching as in
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`).
    fn covers(&self, other: &Rule) -> bool {
        let listed = |ours: &[String], theirs: &[String]| {
            ours.iter().any(|v| v == "*") || theirs.iter().all(|v| ours.contains(v))
        };
        let split = |entry: &str| -> (String, String) {
            let (resource, subresource) = entry.split_once('/').unwrap_or((entry, ""));
            (resource.to_owned(), subresource.to_owned())
        };
        let resources_covered = other.resources.iter().map(|e| split(e)).all(|(resource, subresource)| {
            self.resources
                .iter()
                .map(|e| split(e))
                .any(|(r, s)| (r == "*" || r == resource) && (s == "*" || s == subresource))
        });
        (self.scope == "*" || self.scope == other.scope)
            && listed(&self.operations, &other.operations)
            && listed(&self.api_groups, &other.api_groups)
            && listed(&self.api_versions, &other.api_versions)
            && resources_covered
    }
}

// ---------------------------------------------------------------------------------------------
// Fleet → registration.

/// What `build` made: the YAML for stdout and the notes and warnings for stderr.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) yaml: String,
    pub(crate) notes: Vec<String>,
}

/// The gateway's two configurations for a defaulted, validated fleet. `Err` lists the problems
/// the API server would refuse the result for (e.g. a bad `--name` or `--url`).
pub(crate) fn build(
    fleet: &[WebhookConfiguration],
    namespaces: &[Namespace],
    options: &Options,
) -> Result<Built, Vec<String>> {
    let mut yaml = format!(
        "# Generated by `{}`.\n# Do not edit: run that command again (from the same directory) when the fleet changes.\n",
        options.command_line
    );
    let mut notes = Vec::new();
    if options.own_namespace.is_none() {
        notes.push(
            "note: no --namespace given: the gateway's own namespace is not excluded from the registration"
                .to_owned(),
        );
    }
    if options.ca_bundle.is_none() && options.inject_ca_from.is_none() {
        yaml.push_str(
            "# No caBundle: the API server trusts the gateway's certificate only through its own roots; \
             add one with --ca-bundle FILE, or --inject-ca-from NS/CERTIFICATE for cert-manager.\n",
        );
    }
    let selector = namespace_selector(options);
    let mut documents = 0;
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        let hooks = phase(fleet, kind);
        let phase_name = phase_name(kind);
        if hooks.is_empty() {
            yaml.push_str(&format!("# No {}: the fleet has no {phase_name} webhooks.\n", kind.kind_name()));
            notes.push(format!(
                "note: the fleet has no {phase_name} webhooks: no {} printed",
                kind.kind_name()
            ));
            continue;
        }
        let webhooks: Vec<&Webhook> = hooks.iter().map(|(_, hook)| *hook).collect();
        let timeout = timeout(kind, &webhooks, options.margin);
        let failure_policy = failure_policy(&webhooks);
        let object = format!("{} {:?}", kind.kind_name(), options.name);
        if timeout.needed > timeout.seconds {
            notes.push(format!(
                "warning: {object}: timeoutSeconds capped at {MAX_TIMEOUT_SECONDS} (the API server's maximum), \
                 below the {}s the fleet's worst case needs ({}): a review still running after the \
                 gateway's budget of {MAX_TIMEOUT_SECONDS}s minus the {:?} margin is answered for the \
                 late webhooks by their failurePolicy",
                timeout.needed,
                timeout.explain(kind, options.margin),
                options.margin,
            ));
        }
        notes.extend(exclusion_warnings(kind, &hooks, namespaces, &selector, options));
        let registration = Registration {
            api_version: ADMISSIONREGISTRATION_V1,
            kind: kind.kind_name(),
            metadata: Metadata {
                name: options.name.clone(),
                annotations: options
                    .inject_ca_from
                    .iter()
                    .map(|certificate| (INJECT_CA_ANNOTATION.to_owned(), certificate.clone()))
                    .collect(),
            },
            webhooks: vec![GatewayWebhook {
                name: match kind {
                    WebhookKind::Mutating => MUTATING_WEBHOOK_NAME,
                    WebhookKind::Validating => VALIDATING_WEBHOOK_NAME,
                },
                client_config: client_config(kind, options),
                rules: if options.all_resources { vec![Rule::everything()] } else { union(&webhooks) },
                failure_policy,
                match_policy: "Equivalent",
                namespace_selector: selector.clone(),
                side_effects: "NoneOnDryRun",
                timeout_seconds: timeout.seconds,
                admission_review_versions: ["v1"],
                reinvocation_policy: (kind == WebhookKind::Mutating).then_some(match options.reinvocation {
                    Reinvocation::Never => "Never",
                    Reinvocation::IfNeeded => "IfNeeded",
                }),
            }],
        };
        refusals(kind, &registration)?;
        if documents > 0 {
            yaml.push_str("---\n");
        }
        documents += 1;
        yaml.push_str(&format!(
            "# {} {phase_name} webhook(s) behind it; failurePolicy {failure_policy}: {}.\n# timeoutSeconds {}: {}.\n",
            hooks.len(),
            match failure_policy {
                "Fail" => "some of them fail closed",
                _ => "all of them fail open",
            },
            timeout.seconds,
            timeout.explain(kind, options.margin),
        ));
        yaml.push_str(&serde_norway::to_string(&registration).map_err(|e| vec![format!("error: {e}")])?);
    }
    Ok(Built { yaml, notes })
}

fn phase_name(kind: WebhookKind) -> &'static str {
    match kind {
        WebhookKind::Mutating => "mutating",
        WebhookKind::Validating => "validating",
    }
}

/// The fleet's webhooks of one kind in the API server's call order (as `compile.rs` orders
/// them): configuration name byte-wise, stable, then list order; each with its configuration.
fn phase(fleet: &[WebhookConfiguration], kind: WebhookKind) -> Vec<(&str, &Webhook)> {
    let mut configurations: Vec<&WebhookConfiguration> = fleet.iter().filter(|c| c.kind == kind).collect();
    configurations.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    configurations
        .into_iter()
        .flat_map(|config| config.webhooks.iter().map(move |hook| (config.metadata.name.as_str(), hook)))
        .collect()
}

/// The fleet's rules in call order, without those another rule covers: duplicates, and rules
/// that match a subset of another's requests (of two rules that cover each other, the first
/// is kept).
fn union(hooks: &[&Webhook]) -> Vec<Rule> {
    let rules: Vec<Rule> = hooks.iter().flat_map(|hook| &hook.rules).map(Rule::from_fleet).collect();
    let covered: Vec<bool> = (0..rules.len())
        .map(|i| {
            (0..rules.len())
                .any(|j| j != i && rules[j].covers(&rules[i]) && (j < i || !rules[i].covers(&rules[j])))
        })
        .collect();
    rules.into_iter().zip(covered).filter_map(|(rule, covered)| (!covered).then_some(rule)).collect()
}

/// `Fail` if any webhook fails closed (after the v1 default), else `Ignore`: the gateway
/// unreachable must fail the request exactly when one of its webhooks unreachable would.
fn failure_policy(hooks: &[&Webhook]) -> &'static str {
    let fails_closed =
        |hook: &&Webhook| hook.failure_policy.as_deref().unwrap_or(defaults::FAILURE_POLICY) == "Fail";
    if hooks.iter().any(fails_closed) {
        "Fail"
    } else {
        "Ignore"
    }
}

/// The gateway's `timeoutSeconds` for one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Timeout {
    /// The fleet's worst case, whole seconds.
    fleet: u64,
    /// `fleet` plus the margin, rounded up.
    needed: u64,
    /// `needed`, capped at the API server's maximum.
    seconds: u64,
}

/// Validating webhooks run concurrently: the slowest one. Mutating webhooks run one after the
/// other: the sum, twice for each `IfNeeded` webhook some later webhook could make run again
/// (only a later webhook's change reinvokes one, `src/pipeline/mutate.rs`).
fn timeout(kind: WebhookKind, hooks: &[&Webhook], margin: Duration) -> Timeout {
    let seconds = |hook: &Webhook| {
        u64::try_from(hook.timeout_seconds.unwrap_or(defaults::TIMEOUT_SECONDS)).unwrap_or(0)
    };
    let fleet = match kind {
        WebhookKind::Validating => hooks.iter().map(|hook| seconds(hook)).max().unwrap_or(0),
        WebhookKind::Mutating => {
            let last = hooks.len().saturating_sub(1);
            hooks
                .iter()
                .enumerate()
                .map(|(i, hook)| {
                    let reinvoked = i < last && hook.reinvocation_policy.as_deref() == Some("IfNeeded");
                    seconds(hook) * if reinvoked { 2 } else { 1 }
                })
                .sum()
        }
    };
    let total = Duration::from_secs(fleet) + margin;
    let needed = total.as_secs() + u64::from(total.subsec_nanos() > 0);
    Timeout { fleet, needed, seconds: needed.clamp(1, MAX_TIMEOUT_SECONDS) }
}

impl Timeout {
    fn explain(&self, kind: WebhookKind, margin: Duration) -> String {
        let worst = match kind {
            WebhookKind::Validating => "the slowest webhook's timeoutSeconds",
            WebhookKind::Mutating => {
                "the chain's timeoutSeconds summed, IfNeeded ones that can run again twice"
            }
        };
        let capped = if self.needed > self.seconds { ", capped at the API server's maximum" } else { "" };
        format!("{worst} ({}s) + the gateway's {margin:?} deadline margin, rounded up{capped}", self.fleet)
    }
}

fn client_config(kind: WebhookKind, options: &Options) -> ClientConfig {
    let path = match kind {
        WebhookKind::Mutating => "/mutate",
        WebhookKind::Validating => "/validate",
    };
    let (url, service) = match &options.endpoint {
        Endpoint::Url(base) => (Some(format!("{}{path}", base.trim_end_matches('/'))), None),
        Endpoint::Service(service) => (
            None,
            Some(ServiceConfig {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
                path,
                port: service.port,
            }),
        ),
    };
    ClientConfig { url, service, ca_bundle: options.ca_bundle.clone() }
}

/// Everything but the excluded namespaces (by name) and, unless turned off, the ones labelled
/// `admission-gateway/ignore=true`.
fn namespace_selector(options: &Options) -> NamespaceSelector {
    let mut names: Vec<String> =
        options.own_namespace.iter().chain(&options.excluded_namespaces).cloned().collect();
    names.sort();
    names.dedup();
    let mut match_expressions = Vec::new();
    if !names.is_empty() {
        match_expressions.push(Requirement { key: NAMESPACE_NAME_LABEL, operator: "NotIn", values: names });
    }
    if options.exclude_ignore_label {
        match_expressions.push(Requirement {
            key: IGNORE_LABEL,
            operator: "NotIn",
            values: vec!["true".into()],
        });
    }
    NamespaceSelector { match_expressions }
}

/// One warning per fleet webhook that would have been called for requests in a namespace the
/// registration excludes: the excluded names, and configured Namespaces the selector excludes
/// by their labels. For a Namespace itself the selector is matched against its own labels
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`).
fn exclusion_warnings(
    kind: WebhookKind,
    hooks: &[(&str, &Webhook)],
    namespaces: &[Namespace],
    gateway: &NamespaceSelector,
    options: &Options,
) -> Vec<String> {
    let name_labels = |name: &str| Labels::from([(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned())]);
    let mut candidates: BTreeMap<&str, Labels> = options
        .own_namespace
        .iter()
        .chain(&options.excluded_namespaces)
        .map(|name| (name.as_str(), name_labels(name)))
        .collect();
    for namespace in namespaces {
        let mut labels = namespace.labels.clone();
        labels.entry(NAMESPACE_NAME_LABEL.to_owned()).or_insert_with(|| namespace.name.clone());
        candidates.insert(namespace.name.as_str(), labels);
    }
    let gateway = Selector::compile(&gateway.as_label_selector());
    let excluded: Vec<(&str, &Labels)> =
        candidates.iter().filter(|(_, labels)| !gateway.matches(labels)).map(|(n, l)| (*n, l)).collect();
    let mut warnings = Vec::new();
    for (configuration, hook) in hooks {
        if !hook.rules.iter().any(reaches_namespaces) {
            continue;
        }
        let Some(selector) = hook.namespace_selector.as_ref().map(Selector::compile) else {
            continue; // a null selector matches nothing
        };
        let hit: Vec<String> = excluded
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(name, _)| format!("{name:?}"))
            .collect();
        if hit.is_empty() {
            continue;
        }
        warnings.push(format!(
            "warning: webhook {:?} of {} {configuration:?} matches requests in namespace(s) {}, which the \
             registration excludes: the API server will not send them to the gateway, so this webhook \
             no longer decides there (change the list with --exclude-namespace, --no-default-exclusions)",
            hook.name,
            kind.kind_name(),
            hit.join(", "),
        ));
    }
    warnings
}

/// Whether a fleet rule can match a request the gateway's namespaceSelector applies to: a
/// namespaced resource (any scope but `Cluster`), or a Namespace itself.
fn reaches_namespaces(rule: &RuleWithOperations) -> bool {
    let listed = |values: &[String], wanted: &str| values.iter().any(|v| v == "*" || v == wanted);
    rule.scope.as_deref().unwrap_or(defaults::SCOPE) != "Cluster"
        || (listed(&rule.api_groups, "")
            && listed(&rule.api_versions, "v1")
            && rule.resources.iter().any(|entry| matches!(entry.split('/').next(), Some("namespaces" | "*"))))
}

impl NamespaceSelector {
    fn as_label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: self
                .match_expressions
                .iter()
                .map(|requirement| LabelSelectorRequirement {
                    key: requirement.key.to_owned(),
                    operator: requirement.operator.to_owned(),
                    values: requirement.values.clone(),
                })
                .collect(),
        }
    }
}

/// The registration through the gateway's own validation (the API server's create checks).
fn refusals(kind: WebhookKind, registration: &Registration) -> Result<(), Vec<String>> {
    let body = serde_json::to_value(registration)
        .and_then(serde_json::from_value::<WebhookConfigurationBody>)
        .map_err(|e| vec![format!("error: {e}")])?;
    let mut config = WebhookConfiguration { kind, metadata: body.metadata, webhooks: body.webhooks };
    defaults::apply(&mut config);
    let errors: Vec<String> = validate::configuration(&config)
        .into_iter()
        .filter(|finding| finding.severity == Severity::Error)
        .map(|finding| {
            format!(
                "error: the printed {} would be refused: {}: {}",
                kind.kind_name(),
                finding.field,
                finding.message
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// `caBundle` from a PEM file's content: its base64, if it holds at least one certificate.
fn ca_bundle(pem: &[u8]) -> Result<String, String> {
    let mut certificates = 0;
    for section in CertificateDer::pem_slice_iter(pem) {
        match section {
            // A DER certificate is a SEQUENCE.
            Ok(der) if der.first() == Some(&0x30) => certificates += 1,
            Ok(_) => {}
            Err(error) => return Err(format!("not PEM: {error}")),
        }
    }
    if certificates == 0 {
        return Err("no PEM certificate in it".to_owned());
    }
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
    let (objects, problems) = compile::read_checked(&args.paths);
    let errors = problems.iter().filter(|p| p.severity == Severity::Error).count();
    let mut lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    if errors > 0 {
        let warnings = problems.len() - errors;
        lines.push(format!("configuration refused: {errors} error(s), {warnings} warning(s)"));
        return Err(lines);
    }
    let fleet: Vec<WebhookConfiguration> = objects.configurations.into_iter().map(|(_, c)| c).collect();
    let namespaces: Vec<Namespace> = objects.namespaces.into_iter().map(|(_, n)| n).collect();
    let options = Options::from_args(args, ca_bundle, command_line(std::env::args_os()));
    let mut built = build(&fleet, &namespaces, &options)?;
    lines.append(&mut built.notes);
    built.notes = lines;
    Ok(built)
}

fn read_ca_bundle(path: &Path) -> Result<String, String> {
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|pem| ca_bundle(&pem))
        .map_err(|e| format!("error: --ca-bundle {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
