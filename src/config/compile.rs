//! Validated manifests → the immutable [`Snapshot`] every review reads.
//!
//! Compiling does once what a review would otherwise redo: webhooks sorted into the API
//! server's order (configuration name, then list order), selectors parsed, one pooled HTTPS
//! client per distinct client configuration, and an index from (group, resource) to the
//! webhooks whose rules can match, so matching a review never scans the whole fleet.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::equivalence::Equivalence;
use super::load::{self, Objects};
use super::manifest::{WebhookConfiguration, WebhookKind};
use super::mode::Mode;
use super::rules::{Rule, RuleIndex};
use super::{defaults, validate, ConfigError, Problem};
use crate::cel::{Program, Uses};
use crate::config::selector::{Labels, Selector};
use crate::review::ReviewVersion;
use crate::upstream::{Client, Clients};

pub(crate) use check::read_checked;

mod check;

/// DNS suffix of `clientConfig.service` references: `NAME.NAMESPACE.svc`.
pub(crate) const SERVICE_DNS_SUFFIX: &str = "svc";

/// The whole compiled fleet. Immutable: a reload builds a new one and swaps it in.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// Counts successful loads, starting at 1.
    pub(crate) generation: u64,
    /// Every mutating webhook in call order; a webhook's position is its audit `index`.
    pub(crate) mutating: Vec<Arc<Hook>>,
    /// Every validating webhook in configuration order.
    pub(crate) validating: Vec<Arc<Hook>>,
    mutating_index: RuleIndex,
    validating_index: RuleIndex,
    /// Labels of the configured `Namespace` objects, by name (outside cluster mode).
    pub(crate) namespaces: HashMap<String, Arc<Labels>>,
    /// Warnings found while loading (legacy values).
    pub(crate) warnings: Vec<Problem>,
    /// Fingerprint of the files this was built from.
    pub(crate) fingerprint: u64,
    /// Documents found in each configuration file (and text).
    pub(crate) documents: std::collections::BTreeMap<PathBuf, usize>,
    /// The gateway's own settings (`GatewayConfig`), defaults when none is configured.
    pub(crate) settings: super::Settings,
    /// The ValidatingAdmissionPolicies with their bindings and parameters.
    pub(crate) policies: Arc<super::policy::Policies>,
    /// The MutatingAdmissionPolicies with their bindings and parameters.
    pub(crate) mutating_policies: Arc<super::policy::Policies>,
}

/// The live snapshot: the only shared mutable state. One load per review.
pub(crate) type LiveSnapshot = ArcSwap<Snapshot>;

/// One downstream webhook, compiled.
#[derive(Debug)]
pub(crate) struct Hook {
    /// `<configuration>/<webhook>/<n>`, `n` counting earlier same-named webhooks of the
    /// configuration (docs/semantics.md §2.3); reinvocation bookkeeping keys on it.
    pub(crate) id: String,
    pub(crate) configuration: String,
    pub(crate) name: String,
    /// Position in the flat list of its kind.
    pub(crate) position: usize,
    pub(crate) rules: Vec<Rule>,
    /// `None` is a null selector, which matches nothing (§1.2); defaulting makes it `{}`.
    pub(crate) namespace_selector: Option<Selector>,
    pub(crate) object_selector: Option<Selector>,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) side_effects: SideEffects,
    pub(crate) timeout: Option<Duration>,
    /// First of `admissionReviewVersions` the gateway speaks; `None`: the call fails (§6.1).
    pub(crate) review_version: Option<ReviewVersion>,
    pub(crate) reinvocation: ReinvocationPolicy,
    /// Where to POST, without the `timeout` query.
    pub(crate) url: String,
    /// The pooled client for this webhook's client configuration, or why there is none.
    pub(crate) client: Result<Client, String>,
    /// `matchConditions`, compiled (§4.5); empty when there are none.
    /// Shared with each review's evaluation thread by reference count.
    pub(crate) match_conditions: Arc<[MatchCondition]>,
    /// The variables any of them reads, converted only when some condition needs them.
    pub(crate) condition_uses: Uses,
    /// `matchPolicy: Equivalent`: the snapshot's registry of equivalent resources (§4.2);
    /// `None` for `Exact`.
    pub(crate) equivalence: Option<Arc<Equivalence>>,
    /// How it is run: its configuration's `admission-gateway/mode` (`config/mode.rs`).
    pub(crate) mode: Mode,
    /// Permits for its shadow calls in flight (`shadowInFlightLimit`); beyond them a shadow
    /// call is dropped and counted. Per webhook of one loaded configuration.
    pub(crate) shadow_slots: Arc<tokio::sync::Semaphore>,
    /// Fast failure (`upstream/breaker.rs`): its breaker, shared with the same webhook of
    /// earlier and later configurations, and the GatewayConfig's policy for it.
    pub(crate) breaker: Arc<crate::upstream::breaker::Breaker>,
    pub(crate) breaker_policy: crate::upstream::breaker::Policy,
}

/// One compiled `matchConditions` entry.
#[derive(Clone, Debug)]
pub(crate) struct MatchCondition {
    pub(crate) name: String,
    /// As written: the API server's evaluation errors quote it.
    pub(crate) expression: String,
    pub(crate) program: Arc<Program>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideEffects {
    None,
    NoneOnDryRun,
    /// `Unknown` or `Some`: dry-run requests are refused (§5.1).
    Some,
    /// Not set at all: dry-run calls fail with a call error (§5.1).
    Unset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReinvocationPolicy {
    Never,
    IfNeeded,
}

impl Snapshot {
    /// The mutating webhooks whose rules may match, in call order.
    pub(crate) fn mutating_candidates(
        &self,
        group: &str,
        resource: &str,
    ) -> impl Iterator<Item = &Arc<Hook>> {
        self.mutating_index.candidates(group, resource).into_iter().map(|i| &self.mutating[i])
    }

    /// The validating webhooks whose rules may match, in configuration order.
    pub(crate) fn validating_candidates(
        &self,
        group: &str,
        resource: &str,
    ) -> impl Iterator<Item = &Arc<Hook>> {
        self.validating_index.candidates(group, resource).into_iter().map(|i| &self.validating[i])
    }

    /// Whether a policy of either kind is named `name`.
    pub(crate) fn has_policy(&self, name: &str) -> bool {
        self.policies.iter().chain(self.mutating_policies.iter()).any(|policy| policy.name == name)
    }

    /// An empty fleet: every review is allowed unchanged.
    /// No webhooks: what is served before the first configuration loads (nothing, as
    /// `/readyz` says 503 and the admission listener is not up yet).
    pub(crate) fn empty() -> Self {
        Self {
            generation: 0,
            mutating: Vec::new(),
            validating: Vec::new(),
            mutating_index: RuleIndex::default(),
            validating_index: RuleIndex::default(),
            namespaces: HashMap::new(),
            warnings: Vec::new(),
            fingerprint: 0,
            documents: Default::default(),
            settings: super::Settings::default(),
            policies: Arc::default(),
            mutating_policies: Arc::default(),
        }
    }
}

/// What a configuration is read from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inputs {
    /// Files and directories.
    pub(crate) paths: Vec<PathBuf>,
    /// Configurations from the cluster (fleet ConfigMaps), after the files.
    pub(crate) texts: Vec<load::Text>,
    /// Namespace labels come from the cluster: configured Namespaces are not needed.
    pub(crate) live_namespaces: bool,
    /// Multi-version custom resources learnt from the cluster, for `matchPolicy: Equivalent`;
    /// the `GatewayConfig`'s own entries win for the same resource.
    pub(crate) resources: Vec<super::equivalence::CustomResource>,
}

/// Reads, defaults, validates and compiles the configuration under `paths`.
///
/// Errors refuse the whole configuration; warnings are kept in [`Snapshot::warnings`].
pub(crate) fn load(paths: &[PathBuf], clients: &Clients, generation: u64) -> Result<Snapshot, ConfigError> {
    let inputs = Inputs { paths: paths.to_vec(), ..Inputs::default() };
    load_inputs(&inputs, clients, generation)
}

impl Inputs {
    /// The fingerprint a snapshot loaded from these inputs gets ([`load_inputs`]), computed
    /// without parsing: cheap enough to poll (`reload.rs`).
    pub(crate) fn fingerprint(&self) -> u64 {
        load::fingerprint(&self.paths, &self.texts) ^ resources_fingerprint(&self.resources)
    }
}

/// Folds the learnt custom resources into a configuration's fingerprint: a change of theirs
/// reloads too.
fn resources_fingerprint(resources: &[super::equivalence::CustomResource]) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    if resources.is_empty() {
        return 0;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    resources.hash(&mut hasher);
    hasher.finish()
}

/// [`load`] from files and texts.
pub(crate) fn load_inputs(
    inputs: &Inputs,
    clients: &Clients,
    generation: u64,
) -> Result<Snapshot, ConfigError> {
    let (objects, settings, policies, problems) = check::inputs(inputs)?;
    let mut snapshot = compile(objects, problems, clients, generation, settings, policies);
    snapshot.fingerprint ^= resources_fingerprint(&inputs.resources);
    Ok(snapshot)
}

fn compile(
    objects: Objects,
    warnings: Vec<Problem>,
    clients: &Clients,
    generation: u64,
    settings: super::Settings,
    policies: super::policy::Compiled,
) -> Snapshot {
    let equivalence = Arc::new(Equivalence::new(&settings.equivalent_resources));
    let super::policy::Compiled { validating: mut policies, mutating: mut mutating_policies } = policies;
    policies.set_equivalence(Arc::clone(&equivalence));
    mutating_policies.set_equivalence(Arc::clone(&equivalence));
    let mut configurations: Vec<WebhookConfiguration> =
        objects.configurations.into_iter().map(|(_, c)| c).collect();
    // Byte-wise name order, stable (docs/semantics.md §2.1).
    configurations.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut mutating = Vec::new();
    let mut validating = Vec::new();
    for config in &configurations {
        let list = match config.kind {
            WebhookKind::Mutating => &mut mutating,
            WebhookKind::Validating => &mut validating,
        };
        let mut same_name: BTreeMap<&str, usize> = BTreeMap::new();
        for webhook in &config.webhooks {
            let n = same_name.entry(webhook.name.as_str()).or_default();
            let id = format!("{}/{}/{}", config.metadata.name, webhook.name, n);
            *n += 1;
            let position = list.len();
            let shared = Shared { clients, settings: &settings, equivalence: &equivalence };
            list.push(Arc::new(compile_hook(config, webhook, id, position, shared)));
        }
    }
    let namespaces = objects.namespaces.into_iter().map(|(_, ns)| (ns.name, Arc::new(ns.labels))).collect();
    Snapshot {
        generation,
        mutating_index: RuleIndex::build(mutating.iter().map(index_entry)),
        validating_index: RuleIndex::build(validating.iter().map(index_entry)),
        mutating,
        validating,
        namespaces,
        warnings,
        fingerprint: objects.fingerprint,
        documents: objects.documents,
        settings,
        policies: Arc::new(policies),
        mutating_policies: Arc::new(mutating_policies),
    }
}

fn index_entry(hook: &Arc<Hook>) -> (usize, &[Rule], Option<&Equivalence>) {
    (hook.position, hook.rules.as_slice(), hook.equivalence.as_deref())
}

/// What every webhook of a snapshot is compiled with: the long-lived clients and breakers it
/// takes its own from, the settings, the equivalence table.
#[derive(Clone, Copy)]
struct Shared<'a> {
    clients: &'a Clients,
    settings: &'a super::Settings,
    equivalence: &'a Arc<Equivalence>,
}

/// One webhook, compiled in one step.
fn compile_hook(
    config: &WebhookConfiguration,
    webhook: &super::manifest::Webhook,
    id: String,
    position: usize,
    shared: Shared<'_>,
) -> Hook {
    let Shared { clients, settings, equivalence } = shared;
    let client_config = &webhook.client_config;
    let url = match (&client_config.url, &client_config.service) {
        (Some(url), _) => url.clone(),
        (None, Some(service)) => format!(
            "https://{}.{}.{SERVICE_DNS_SUFFIX}:{}{}",
            service.name,
            service.namespace,
            service.port.unwrap_or(defaults::SERVICE_PORT),
            service.path.as_deref().unwrap_or("")
        ),
        (None, None) => String::new(),
    };
    let client = if url.is_empty() {
        Err("webhook configuration must have either service or URL".to_owned())
    } else {
        // Decoded as validation decoded it: a bundle that is not one (refused at load) fails
        // the calls, never stands in as an empty bundle.
        let ca_bundle = client_config.ca_bundle.as_deref().map(validate::ca_bundle::decode).transpose();
        ca_bundle.and_then(|ca_bundle| clients.client(ca_bundle.flatten().as_deref()))
    };
    // Compiled by validation already; one that did not compile refused the configuration.
    let match_conditions: Vec<MatchCondition> = webhook
        .match_conditions
        .iter()
        .flatten()
        .filter_map(|c| {
            let program = c.program().as_ref().ok()?;
            Some(MatchCondition {
                name: c.name.clone(),
                expression: c.expression.clone(),
                program: program.clone(),
            })
        })
        .collect();
    let breaker = clients.breakers.get(&id, &url);
    Hook {
        id,
        configuration: config.metadata.name.clone(),
        name: webhook.name.clone(),
        position,
        rules: webhook.rules.iter().map(Rule::compile).collect(),
        namespace_selector: webhook.namespace_selector.as_ref().map(Selector::compile),
        object_selector: webhook.object_selector.as_ref().map(Selector::compile),
        failure_policy: match webhook.failure_policy.as_deref() {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        },
        side_effects: match webhook.side_effects.as_deref() {
            Some("None") => SideEffects::None,
            Some("NoneOnDryRun") => SideEffects::NoneOnDryRun,
            Some(_) => SideEffects::Some,
            None => SideEffects::Unset,
        },
        timeout: webhook.timeout_seconds.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs),
        review_version: webhook
            .admission_review_versions
            .iter()
            .flatten()
            .find_map(|v| ReviewVersion::from_short(v)),
        reinvocation: match webhook.reinvocation_policy.as_deref() {
            Some("IfNeeded") => ReinvocationPolicy::IfNeeded,
            _ => ReinvocationPolicy::Never,
        },
        url,
        client,
        condition_uses: match_conditions.iter().fold(Uses::default(), |uses, c| uses.union(c.program.uses)),
        match_conditions: match_conditions.into(),
        equivalence: (webhook.match_policy.as_deref() == Some("Equivalent")).then(|| equivalence.clone()),
        // Refused at load when invalid.
        mode: Mode::of(config).unwrap_or_default(),
        shadow_slots: Arc::new(tokio::sync::Semaphore::new(settings.shadow_in_flight_limit)),
        breaker,
        breaker_policy: settings.breaker,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet of 1,000 webhooks with one naming pods: matching a pod looks at that one only.
    #[test]
    fn the_index_narrows_a_large_fleet_to_its_candidates() {
        let manifest = |i: usize, resource: &str| -> super::super::manifest::Webhook {
            serde_json::from_value(serde_json::json!({
                "name": format!("w{i}.example.com"),
                "clientConfig": {"url": "https://127.0.0.1:1/"},
                "rules": [{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": [resource]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
            }))
            .unwrap()
        };
        let mut objects = Objects::default();
        for i in 0..1_000 {
            let resource = if i == 637 { "deployments".to_owned() } else { format!("things{i}") };
            objects.configurations.push((
                load::Source { file: PathBuf::from("fleet.yaml") },
                WebhookConfiguration {
                    version: crate::config::manifest::ApiVersion::V1,
                    kind: WebhookKind::Validating,
                    metadata: super::super::manifest::ObjectMeta {
                        name: format!("c{i:04}"),
                        ..Default::default()
                    },
                    webhooks: vec![manifest(i, &resource)],
                },
            ));
        }
        let snapshot = compile(
            objects,
            Vec::new(),
            &Clients::default(),
            1,
            super::super::Settings::default(),
            Default::default(),
        );
        assert_eq!(snapshot.validating.len(), 1_000);
        let found: Vec<_> =
            snapshot.validating_candidates("apps", "deployments").map(|h| h.name.as_str()).collect();
        assert_eq!(found, ["w637.example.com"]);
        assert_eq!(snapshot.validating_candidates("", "pods").count(), 0);
    }

    /// Equivalent webhooks are candidates for the resources stored with the ones their rules
    /// name, in snapshot order; Exact ones only for what they name.
    #[test]
    fn candidates_include_equivalent_resources_in_snapshot_order() {
        let webhook = |name: &str, policy: &str, group: &str, resource: &str| {
            serde_json::json!({
                "name": name,
                "clientConfig": {"url": "https://127.0.0.1:1/"},
                "rules": [{"operations": ["*"], "apiGroups": [group], "apiVersions": ["*"], "resources": [resource]}],
                "matchPolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            })
        };
        let fleet = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "fleet"},
            "webhooks": [
                webhook("apps.example.com", "Equivalent", "apps", "deployments"),
                webhook("extensions.example.com", "Equivalent", "extensions", "deployments"),
                webhook("exact.example.com", "Exact", "apps", "deployments"),
                webhook("all-apps.example.com", "Equivalent", "apps", "*"),
                webhook("widgets.example.com", "Equivalent", "example.com", "widgets"),
                webhook("pods.example.com", "Equivalent", "", "pods"),
            ],
        });
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fleet.json"), fleet.to_string()).unwrap();
        std::fs::write(
            dir.path().join("gateway.yaml"),
            "apiVersion: admission-gateway/v1alpha1\nkind: GatewayConfig\nmetadata: {name: g}\nequivalentResources:\n- {group: example.org, resource: widgets, kind: Widget, versions: [v1, v2]}\n- {group: example.com, resource: widgets, kind: Widget, versions: [v1, v2]}\n",
        )
        .unwrap();
        let snapshot = load(&[dir.path().to_path_buf()], &Clients::default(), 1).unwrap();
        let names = |group: &str, resource: &str| -> Vec<String> {
            snapshot.validating_candidates(group, resource).map(|h| h.name.clone()).collect()
        };
        assert_eq!(
            names("extensions", "deployments"),
            ["apps.example.com", "extensions.example.com", "all-apps.example.com"]
        );
        assert_eq!(
            names("apps", "deployments"),
            ["apps.example.com", "extensions.example.com", "exact.example.com", "all-apps.example.com"]
        );
        assert_eq!(names("extensions", "ingresses"), ["all-apps.example.com"]);
        assert_eq!(names("example.com", "widgets"), ["widgets.example.com"]);
        assert_eq!(names("example.org", "widgets"), Vec::<String>::new());
        assert_eq!(names("", "pods"), ["pods.example.com"]);
    }
}
