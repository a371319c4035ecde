//! Cluster mode (`serve --kube`): what the API server knows and a configuration file cannot —
//! live namespace labels ([`namespaces`]), the fleet's manifests from ConfigMaps ([`fleet`]),
//! multi-version custom resources for `matchPolicy: Equivalent` ([`discovery`]), the
//! ValidatingAdmissionPolicies' parameter objects ([`params`]), custom resources' schemas for
//! apply configurations ([`openapi`]), answers to the CEL authorizer ([`authorizer`]) — read through the Kubernetes API with the gateway's own service account
//! (in-cluster) or a kubeconfig. `deploy/base/rbac.yaml` grants exactly what this module asks
//! for.

pub(crate) mod authorizer;
pub(crate) mod discovery;
pub(crate) mod fleet;
mod mirror;
pub(crate) mod namespaces;
pub(crate) mod openapi;
pub(crate) mod params;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use discovery::Discovery;
use fleet::Fleet;
use namespaces::Namespaces;
use params::Params;

use crate::telemetry::names;

/// How long the first list of the fleet ConfigMaps (or of the CustomResourceDefinitions) may
/// take before the gateway gives up starting.
const FLEET_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until `synced` turns true (a watch's first list), at most `timeout`; `what` names
/// what was being listed in the error.
async fn wait_synced(
    synced: &tokio::sync::watch::Sender<bool>,
    timeout: Duration,
    what: &str,
) -> anyhow::Result<()> {
    let mut synced = synced.subscribe();
    let done = tokio::time::timeout(timeout, async { synced.wait_for(|synced| *synced).await.is_ok() }).await;
    match done {
        Ok(true) => Ok(()),
        _ => anyhow::bail!("could not list {what} within {} s", timeout.as_secs()),
    }
}

/// Cluster mode's options.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// A kubeconfig file; `None`: `KUBECONFIG`, `~/.kube/config`, then the in-cluster
    /// service account.
    pub kubeconfig: Option<PathBuf>,
    /// ConfigMaps whose labels match this selector hold fleet manifests.
    pub fleet_selector: Option<String>,
    /// The namespace of the fleet ConfigMaps; `None`: the client's default namespace (the
    /// gateway's own, in-cluster).
    pub fleet_namespace: Option<String>,
    /// The namespace cache is reported stale when its watch has been down this long.
    pub max_staleness: Duration,
}

/// The live cluster state the pipeline reads.
pub(crate) struct Cluster {
    client: kube::Client,
    pub(crate) namespaces: Arc<Namespaces>,
    pub(crate) fleet: Option<Arc<Fleet>>,
    pub(crate) discovery: Arc<Discovery>,
    /// The API server's published OpenAPI: schemas of the custom resources' kinds.
    pub(crate) openapi: Arc<openapi::OpenApi>,
    /// ValidatingAdmissionPolicy parameters, each kind watched once a review asks for it.
    pub(crate) params: Arc<Params>,
    max_staleness: Duration,
    /// The runtime the client's connections live on: authorizer checks are driven there
    /// (from a blocking thread, `pipeline/conditions.rs`).
    runtime: tokio::runtime::Handle,
}

impl Cluster {
    /// Connects and starts the watches; returns once the fleet ConfigMaps (if any) are listed.
    /// The namespace cache fills in the background; until it has, unknown names are looked up.
    pub(crate) async fn start(
        options: &ClusterOptions,
    ) -> anyhow::Result<(Arc<Self>, Vec<tokio::task::JoinHandle<()>>)> {
        // One crypto provider for the whole process; kube's TLS uses the process default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = match &options.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .with_context(|| format!("using kubeconfig {}", path.display()))?
            }
            None => kube::Config::infer()
                .await
                .context("finding the cluster (KUBECONFIG, ~/.kube/config, in-cluster)")?,
        };
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        let namespaces = Namespaces::new(client.clone());
        let discovery = Discovery::new(client.clone());
        let mut tasks = vec![tokio::spawn(namespaces.clone().run()), tokio::spawn(discovery.clone().run())];
        if let Err(error) = discovery.synced(FLEET_SYNC_TIMEOUT).await {
            for task in &tasks {
                task.abort();
            }
            return Err(error);
        }
        let fleet = match &options.fleet_selector {
            Some(selector) => {
                let namespace =
                    options.fleet_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
                let fleet = Fleet::new(client.clone(), &namespace, selector);
                tasks.push(tokio::spawn(fleet.clone().run()));
                if let Err(error) = fleet.synced(FLEET_SYNC_TIMEOUT).await {
                    for task in &tasks {
                        task.abort();
                    }
                    return Err(error);
                }
                Some(fleet)
            }
            None => None,
        };
        // The schemas of custom resources, read once before serving (at most as long as the
        // first list of the fleet may take; a failure is logged and tried again).
        let openapi = openapi::OpenApi::new(client.clone());
        let _ = tokio::time::timeout(FLEET_SYNC_TIMEOUT, openapi.refresh_logged()).await;
        tasks.push(tokio::spawn(openapi.clone().run()));
        tracing::info!(%server, fleet_configmaps = options.fleet_selector.is_some(), "cluster mode");
        Ok((
            Arc::new(Self {
                params: Params::new(client.clone()),
                client,
                namespaces,
                fleet,
                discovery,
                openapi,
                max_staleness: options.max_staleness,
                runtime: tokio::runtime::Handle::current(),
            }),
            tasks,
        ))
    }

    /// The checks `/readyz?verbose` lists: `(name, passed, detail)`. The gateway is not ready
    /// until the namespace cache has synced once; a stale cache is reported but does not fail
    /// readiness (every replica would fail alike, leaving the API server with no gateway at
    /// all), and unknown names are still asked of the API server.
    pub(crate) fn checks(&self) -> Vec<(&'static str, bool, String)> {
        let health = self.namespaces.health();
        let detail = match (health.synced, health.stale_for) {
            (false, _) => "not synced yet".to_owned(),
            (true, Some(stale)) if stale >= self.max_staleness => format!(
                "STALE: the watch has been down for {} s (bound {} s); labels as of then, unknown names looked up live",
                stale.as_secs(),
                self.max_staleness.as_secs()
            ),
            (true, _) => format!("ok ({} namespaces)", health.namespaces),
        };
        // Custom resources' schemas: reported, never a reason to be unready (every replica
        // would be unready alike); an apply configuration to a kind without one answers 503.
        let openapi = self.openapi.health();
        let schemas = match openapi.failed.as_slice() {
            [] => format!("ok ({} group-versions beyond the built-in ones)", openapi.converted),
            failed => format!(
                "{} group-versions without a schema (their OpenAPI could not be read or converted): {}",
                failed.len(),
                failed.join(", ")
            ),
        };
        vec![("namespaces", health.synced, detail), ("openapi", true, schemas)]
    }

    /// The CEL authorizer of one review, asking as the requesting user.
    pub(crate) fn authorizer(&self, user: authorizer::UserInfo) -> authorizer::ReviewAuthorizer {
        authorizer::ReviewAuthorizer::new(self.client.clone(), user, self.runtime.clone())
    }

    /// Whether the namespace cache is older than the configured bound.
    pub(crate) fn stale(&self) -> bool {
        self.namespaces.health().stale_for.is_some_and(|stale| stale >= self.max_staleness)
    }
}

impl Cluster {
    /// Appends the cluster-mode metrics to a `/metrics` body.
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let health = self.namespaces.health();
        let stale_seconds = health.stale_for.map_or(0.0, |stale| stale.as_secs_f64());
        let openapi = self.openapi.health();
        let name = names::OPENAPI_GROUP_VERSIONS;
        let _ = writeln!(
            out,
            "# HELP {name} Group-versions beyond the built-in ones the API server publishes OpenAPI for, by whether their schema was read (result=\"converted\") or not (result=\"failed\").\n# TYPE {name} gauge\n{name}{{result=\"converted\"}} {}\n{name}{{result=\"failed\"}} {}",
            openapi.converted,
            openapi.failed.len()
        );
        for (name, kind, help, value) in [
            (
                names::NAMESPACE_CACHE_SYNCED,
                "gauge",
                "1 once the namespace cache has listed every namespace.",
                f64::from(u8::from(health.synced)),
            ),
            (
                names::NAMESPACE_CACHE_NAMESPACES,
                "gauge",
                "Namespaces in the cache.",
                health.namespaces as f64,
            ),
            (
                names::NAMESPACE_CACHE_STALE,
                "gauge",
                "1 while the namespace watch has been down longer than the staleness bound.",
                f64::from(u8::from(self.stale())),
            ),
            (
                names::NAMESPACE_CACHE_STALE_SECONDS,
                "gauge",
                "How long the namespace watch has been down (0 while it is up).",
                stale_seconds,
            ),
            (
                names::NAMESPACE_WATCH_RESTARTS,
                "counter",
                "Namespace watches that failed and were started again.",
                health.restarts as f64,
            ),
            (
                names::NAMESPACE_LOOKUPS,
                "counter",
                "Namespaces missing from the cache and asked of the API server.",
                health.lookups as f64,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
    }
}
