//! `TestGateway`: the real gateway (`app::start`) on 127.0.0.1, serving HTTPS with a certificate
//! from the test CA, configured from manifests written into a temporary directory; and the small
//! builders those manifests are made from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use admission_gateway::app::{self, Running, ServeOptions};
use admission_gateway::certs::Ca;
use admission_gateway::cluster::ClusterOptions;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::mock_webhook::Mock;
use super::{ca, client_tls, http_client, https_client, HttpClient, HttpsClient};

// ---------------------------------------------------------------------------------------------
// Manifests

/// One entry of a configuration's `webhooks[]`.
#[derive(Clone, Debug)]
pub struct Webhook(Value);

/// A webhook calling `mock`: every operation on every resource and subresource, `sideEffects:
/// None`, `admissionReviewVersions: [v1]`, the test CA as `caBundle`; all else defaulted.
pub fn webhook(name: &str, mock: &Mock) -> Webhook {
    webhook_at(name, mock.url())
}

/// The same, at any URL (e.g. a port nobody listens on).
pub fn webhook_at(name: &str, url: &str) -> Webhook {
    Webhook(json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca().ca_bundle()},
        "rules": [{
            "operations": ["*"],
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "resources": ["*/*"],
        }],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }))
}

impl Webhook {
    /// Sets any field of the webhook.
    pub fn set(mut self, field: &str, value: Value) -> Self {
        self.0[field] = value;
        self
    }

    /// `failurePolicy: Ignore`.
    pub fn ignore(self) -> Self {
        self.set("failurePolicy", json!("Ignore"))
    }

    /// `reinvocationPolicy: IfNeeded`.
    pub fn if_needed(self) -> Self {
        self.set("reinvocationPolicy", json!("IfNeeded"))
    }

    pub fn timeout_seconds(self, seconds: u64) -> Self {
        self.set("timeoutSeconds", json!(seconds))
    }

    pub fn side_effects(self, value: &str) -> Self {
        self.set("sideEffects", json!(value))
    }

    pub fn review_versions(self, versions: &[&str]) -> Self {
        self.set("admissionReviewVersions", json!(versions))
    }

    /// One rule: these operations and resources (`pods`, `pods/*`...) in every group and version.
    pub fn rule(self, operations: &[&str], resources: &[&str]) -> Self {
        self.set(
            "rules",
            json!([{
                "operations": operations,
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "resources": resources,
            }]),
        )
    }

    /// `scope` of every rule.
    pub fn scope(mut self, scope: &str) -> Self {
        for rule in self.0["rules"].as_array_mut().into_iter().flatten() {
            rule["scope"] = json!(scope);
        }
        self
    }

    pub fn namespace_selector(self, selector: Value) -> Self {
        self.set("namespaceSelector", selector)
    }

    pub fn object_selector(self, selector: Value) -> Self {
        self.set("objectSelector", selector)
    }

    /// `clientConfig.caBundle`.
    pub fn ca_bundle(mut self, bundle: &str) -> Self {
        self.0["clientConfig"]["caBundle"] = json!(bundle);
        self
    }
}

/// A Mutating- or ValidatingWebhookConfiguration.
#[derive(Clone, Debug)]
pub struct Configuration {
    kind: &'static str,
    name: String,
    webhooks: Vec<Webhook>,
    annotations: BTreeMap<String, String>,
}

pub fn mutating(name: &str, webhooks: impl IntoIterator<Item = Webhook>) -> Configuration {
    Configuration {
        kind: "MutatingWebhookConfiguration",
        name: name.to_owned(),
        webhooks: webhooks.into_iter().collect(),
        annotations: BTreeMap::new(),
    }
}

pub fn validating(name: &str, webhooks: impl IntoIterator<Item = Webhook>) -> Configuration {
    Configuration {
        kind: "ValidatingWebhookConfiguration",
        name: name.to_owned(),
        webhooks: webhooks.into_iter().collect(),
        annotations: BTreeMap::new(),
    }
}

impl Configuration {
    /// Adds an annotation to `metadata.annotations` (e.g. `admission-gateway/mode`).
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    fn manifest(&self) -> Value {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": self.kind,
            "metadata": {"name": self.name, "annotations": self.annotations},
            "webhooks": self.webhooks.iter().map(|w| w.0.clone()).collect::<Vec<_>>(),
        })
    }
}

/// Everything the gateway is configured with: webhook configurations and Namespace objects.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    configurations: Vec<Configuration>,
    namespaces: Vec<Value>,
    settings: Option<Value>,
    /// Any other object: policies, bindings, their parameters.
    objects: Vec<Value>,
}

impl Fleet {
    pub fn of(configurations: impl IntoIterator<Item = Configuration>) -> Self {
        Self { configurations: configurations.into_iter().collect(), ..Self::default() }
    }

    /// Adds the gateway's own settings: a `GatewayConfig` with these fields.
    pub fn settings(mut self, fields: Value) -> Self {
        let mut object = json!({
            "apiVersion": "admission-gateway/v1alpha1",
            "kind": "GatewayConfig",
            "metadata": {"name": "gateway"},
        });
        for (field, value) in fields.as_object().expect("settings are an object") {
            object[field] = value.clone();
        }
        self.settings = Some(object);
        self
    }

    /// Adds a `v1` `Namespace` with these labels (for `namespaceSelector`).
    pub fn namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        self.namespaces.push(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }));
        self
    }

    /// Adds any object: a ValidatingAdmissionPolicy, its binding, a parameter.
    pub fn object(mut self, object: Value) -> Self {
        self.objects.push(object);
        self
    }

    /// The fleet as one multi-document YAML file.
    pub fn yaml(&self) -> String {
        self.configurations
            .iter()
            .map(Configuration::manifest)
            .chain(self.namespaces.iter().cloned())
            .chain(self.settings.iter().cloned())
            .chain(self.objects.iter().cloned())
            .map(|object| serde_norway::to_string(&object).expect("YAML"))
            .collect::<Vec<_>>()
            .join("---\n")
    }
}

// ---------------------------------------------------------------------------------------------
// The gateway

/// A running gateway and an HTTPS client that trusts it.
pub struct TestGateway {
    running: Option<Running>,
    dir: tempfile::TempDir,
    client: HttpsClient,
    admin: HttpClient,
}

/// The gateway's answer to one review.
#[derive(Clone, Debug)]
pub struct Answer {
    pub http_status: u16,
    /// The AdmissionReview answered (`Null` if the body was not JSON).
    pub review: Value,
    /// The body as text, for failure messages.
    pub body: String,
}

impl TestGateway {
    /// Writes the fleet's manifests and a serving certificate, and starts the gateway.
    pub async fn start(fleet: Fleet) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("config")).expect("config directory");
        let gateway = Self { running: None, dir, client: https_client(ca()), admin: http_client() };
        gateway.reconfigure(&fleet);
        gateway.rotate_certificate(ca());
        let running = app::start(ServeOptions::new(
            vec![gateway.config_dir()],
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
            Some((gateway.cert_path(), gateway.key_path())),
        ))
        .await
        .expect("the gateway starts");
        Self { running: Some(running), ..gateway }
    }

    /// Starts the gateway with `fleet`, its options adjusted by `adjust` first.
    pub async fn start_with(fleet: Fleet, adjust: impl FnOnce(&mut ServeOptions)) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("config")).expect("config directory");
        let gateway = Self { running: None, dir, client: https_client(ca()), admin: http_client() };
        gateway.reconfigure(&fleet);
        gateway.rotate_certificate(ca());
        let mut options = ServeOptions::new(
            vec![gateway.config_dir()],
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
            Some((gateway.cert_path(), gateway.key_path())),
        );
        adjust(&mut options);
        let running = app::start(options).await.expect("the gateway starts");
        Self { running: Some(running), ..gateway }
    }

    /// Starts the gateway in cluster mode with `cluster`, serving `fleet` from files too (an
    /// empty configuration directory when `None`).
    pub async fn start_in_cluster(fleet: Option<Fleet>, cluster: ClusterOptions) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("config")).expect("config directory");
        let gateway = Self { running: None, dir, client: https_client(ca()), admin: http_client() };
        if let Some(fleet) = &fleet {
            gateway.reconfigure(fleet);
        }
        gateway.rotate_certificate(ca());
        let mut options = ServeOptions::new(
            if fleet.is_some() { vec![gateway.config_dir()] } else { Vec::new() },
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
            Some((gateway.cert_path(), gateway.key_path())),
        );
        options.cluster = Some(cluster);
        let running = app::start(options).await.expect("the gateway starts in cluster mode");
        Self { running: Some(running), ..gateway }
    }

    /// One validating configuration named `fleet`.
    pub async fn validating(webhooks: impl IntoIterator<Item = Webhook>) -> Self {
        Self::start(Fleet::of([validating("fleet", webhooks)])).await
    }

    /// One mutating configuration named `fleet`.
    pub async fn mutating(webhooks: impl IntoIterator<Item = Webhook>) -> Self {
        Self::start(Fleet::of([mutating("fleet", webhooks)])).await
    }

    fn running(&self) -> &Running {
        self.running.as_ref().expect("running")
    }

    pub fn address(&self) -> SocketAddr {
        self.running().address
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    /// Replaces the configuration on disk (atomically: written aside, then renamed).
    pub fn reconfigure(&self, fleet: &Fleet) {
        self.write_config(&fleet.yaml());
    }

    /// Replaces the configuration file with any text.
    pub fn write_config(&self, text: &str) {
        replace_file(&self.config_dir().join("fleet.yaml"), text);
    }

    /// Replaces the serving certificate and key files with a new pair issued by `ca`.
    pub fn rotate_certificate(&self, ca: &Ca) {
        let leaf = ca.issue(&["127.0.0.1"]).expect("serving certificate");
        replace_file(&self.key_path(), &leaf.key_pem);
        replace_file(&self.cert_path(), &leaf.cert_pem);
    }

    /// POSTs `review` to `endpoint` (a path, optionally with `?timeout=`).
    pub async fn review(&self, endpoint: &str, review: &Value) -> Answer {
        let (http_status, body) = self.post(endpoint, review.to_string()).await;
        Answer { http_status, review: serde_json::from_str(&body).unwrap_or(Value::Null), body }
    }

    pub async fn mutate(&self, review: &Value) -> Answer {
        self.review("/mutate", review).await
    }

    pub async fn validate(&self, review: &Value) -> Answer {
        self.review("/validate", review).await
    }

    pub async fn admit(&self, review: &Value) -> Answer {
        self.review("/admit", review).await
    }

    /// POSTs any body; returns the status and the body as text.
    pub async fn post(&self, path_and_query: &str, body: impl Into<Bytes>) -> (u16, String) {
        let request = http::Request::post(format!("https://{}{path_and_query}", self.address()))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.into()))
            .expect("request");
        send(&self.client, request).await.expect("the gateway answers")
    }

    /// Writes raw HTTP/1.1 bytes (`head`, then `body`) over TLS while reading the answer, as a
    /// client that reads early answers would; returns the status line. For bodies that hyper's
    /// client would refuse to send (a false `Content-Length`) or that the gateway cuts short.
    pub async fn raw_exchange(&self, head: String, body: Vec<u8>) -> String {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(ca())));
        let tcp = tokio::net::TcpStream::connect(self.address()).await.expect("connect");
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = connector.connect(name, tcp).await.expect("TLS handshake");
        let (mut reader, mut writer) = tokio::io::split(tls);
        let sending = tokio::spawn(async move {
            // The gateway may stop reading and close: a failed write is expected then.
            let _ = writer.write_all(head.as_bytes()).await;
            let _ = writer.write_all(&body).await;
            let _ = writer.flush().await;
            writer
        });
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            while !answer.windows(2).any(|w| w == b"\r\n") {
                match reader.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => answer.extend_from_slice(&buffer[..n]),
                }
            }
        })
        .await;
        sending.abort();
        assert!(read.is_ok(), "no answer within 10 s");
        let answer = String::from_utf8_lossy(&answer);
        answer.lines().next().unwrap_or_default().to_owned()
    }

    /// A TLS connection to the admission listener, handshake done (within `within`), or the
    /// error text.
    pub async fn connect_tls(
        &self,
        within: Duration,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(ca())));
        let tcp = tokio::net::TcpStream::connect(self.address()).await.map_err(|e| e.to_string())?;
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        match tokio::time::timeout(within, connector.connect(name, tcp)).await {
            Ok(connected) => connected.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no TLS handshake within {within:?}")),
        }
    }

    /// GETs a path on the admission listener.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let request = http::Request::get(format!("https://{}{path}", self.address()))
            .body(Full::new(Bytes::new()))
            .expect("request");
        send(&self.client, request).await.expect("the gateway answers")
    }

    /// GETs a path on the admin (metrics) listener.
    pub fn metrics_address(&self) -> SocketAddr {
        self.running().metrics_address
    }

    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        let address = self.running().metrics_address;
        let request = http::Request::get(format!("http://{address}{path}"))
            .body(Full::new(Bytes::new()))
            .expect("request");
        send(&self.admin, request).await.expect("the admin listener answers")
    }

    /// Stops the gateway (graceful: in-flight reviews finish).
    /// The graceful stop of a rollout (`Running::drain`).
    pub async fn drain(mut self, delay: Duration) {
        if let Some(running) = self.running.take() {
            running.drain(delay).await;
        }
    }

    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await;
        }
    }
}

/// Sends a request; the status and the body as text, or the error's chain as text.
pub async fn send<C>(
    client: &hyper_util::client::legacy::Client<C, Full<Bytes>>,
    request: http::Request<Full<Bytes>>,
) -> Result<(u16, String), String>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let response = client.request(request).await.map_err(|error| {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        text
    })?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Writes `text` beside `path` under a hidden name, then renames it over `path`: a reader
/// never sees half a file.
fn replace_file(path: &Path, text: &str) {
    let name = path.file_name().unwrap().to_string_lossy();
    let aside = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&aside, text).expect("write");
    std::fs::rename(&aside, path).expect("rename");
}

impl Answer {
    fn response(&self) -> &Value {
        assert_eq!(
            self.http_status, 200,
            "expected an AdmissionReview, got HTTP {}: {}",
            self.http_status, self.body
        );
        let response = &self.review["response"];
        assert!(response.is_object(), "no response in the answer: {}", self.body);
        response
    }

    pub fn allowed(&self) -> bool {
        self.response()["allowed"].as_bool().unwrap_or_else(|| panic!("no response.allowed: {}", self.body))
    }

    pub fn uid(&self) -> &str {
        self.response()["uid"].as_str().unwrap_or_default()
    }

    pub fn api_version(&self) -> &str {
        self.review["apiVersion"].as_str().unwrap_or_default()
    }

    /// `response.status.code`.
    pub fn code(&self) -> Option<i64> {
        self.response()["status"]["code"].as_i64()
    }

    /// `response.status.message` (empty if none).
    pub fn message(&self) -> &str {
        self.response()["status"]["message"].as_str().unwrap_or_default()
    }

    /// `response.status.reason` (empty if none).
    pub fn reason(&self) -> &str {
        self.response()["status"]["reason"].as_str().unwrap_or_default()
    }

    pub fn patch_type(&self) -> Option<&str> {
        self.response()["patchType"].as_str()
    }

    /// `response.patch`, base64-decoded, as JSON.
    pub fn patch(&self) -> Option<Value> {
        let encoded = self.response()["patch"].as_str()?;
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(encoded).expect("response.patch is base64");
        Some(serde_json::from_slice(&bytes).expect("response.patch is JSON"))
    }

    /// `object` with the answer's patch applied (unchanged if there is none).
    pub fn patched(&self, object: &Value) -> Value {
        let mut object = object.clone();
        if let Some(patch) = self.patch() {
            // Replayed with the gateway's own JSON Patch (evanphx semantics), as the API server would.
            let patch = admission_gateway::patch::Patch::decode(patch.to_string().as_bytes())
                .expect("response.patch is a JSONPatch");
            patch.apply(&mut object).expect("response.patch applies");
        }
        object
    }

    /// One audit annotation, by its (encoded) key.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.response()["auditAnnotations"][key].as_str()
    }

    /// Every audit annotation key, sorted.
    pub fn annotation_keys(&self) -> Vec<String> {
        self.response()["auditAnnotations"]
            .as_object()
            .map(|annotations| annotations.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.response()["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect()
    }
}
