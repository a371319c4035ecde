//! The API server's published OpenAPI, for the schemas of kinds the gateway has none built in
//! for (custom resources, aggregated APIs): what kube-apiserver's MutatingAdmissionPolicy
//! plugin builds its type converters from (`k8s.io/apiserver/pkg/admission/plugin/policy/
//! mutating/patch/typeconverter.go`: `/openapi/v3` listed every 5 s, a group-version's document
//! fetched again when its `serverRelativeURL` — which carries the document's hash — changes).
//!
//! Here the documents of the group-versions the built-in schemas lack are fetched when listed
//! (not at the first request that needs one, as upstream does: an evaluation runs on a thread
//! that does not wait on the network). A server without `/openapi/v3` (before Kubernetes 1.24
//! by default) is read through `/openapi/v2`, one document for all group-versions, fetched
//! again when its ETag changes. A document that cannot be fetched or converted leaves its
//! group-version without a schema (an apply configuration to its kinds answers 503, as
//! upstream's does) and is tried again when its URL changes, or after [`RETRY_AFTER`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use structured_merge::schema::Schema;

use crate::schemas::{Document, Published, MAX_DOCUMENT_BYTES};

/// How often `/openapi/v3` (or `/openapi/v2`) is listed: upstream's interval.
const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// A document that failed is fetched again after this long even if its URL has not changed.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// What was fetched for one group-version.
struct Fetched {
    /// The URL it came from (v3: with the hash), or the v2 document's ETag.
    version: String,
    /// None: the fetch or the conversion failed at `at`.
    document: Option<Arc<Document>>,
    at: Instant,
}

pub(crate) struct OpenApi {
    client: kube::Client,
    fetched: RwLock<HashMap<String, Fetched>>,
    /// The ETag of the last `/openapi/v2` read (servers without v3).
    v2_etag: std::sync::Mutex<Option<String>>,
}

impl Published for OpenApi {
    fn document(&self, api_version: &str) -> Option<Arc<Document>> {
        let fetched = self.fetched.read().unwrap_or_else(|e| e.into_inner());
        fetched.get(api_version)?.document.clone()
    }
}

/// What the last listings left: group-versions with a schema, and without one (their document
/// could not be fetched or converted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Health {
    pub(crate) converted: usize,
    pub(crate) failed: Vec<String>,
}

impl OpenApi {
    /// The group-versions beyond the built-in ones, with a schema or not.
    pub(crate) fn health(&self) -> Health {
        let fetched = self.fetched.read().unwrap_or_else(|e| e.into_inner());
        let mut failed: Vec<String> =
            fetched.iter().filter(|(_, f)| f.document.is_none()).map(|(v, _)| v.clone()).collect();
        failed.sort();
        Health { converted: fetched.len() - failed.len(), failed }
    }

    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self { client, fetched: RwLock::new(HashMap::new()), v2_etag: std::sync::Mutex::default() })
    }

    /// Lists and fetches until the task is aborted.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            tokio::time::sleep(REFRESH_EVERY).await;
            self.refresh_logged().await;
        }
    }

    /// One listing, its errors logged.
    pub(crate) async fn refresh_logged(&self) {
        if let Err(error) = self.refresh().await {
            tracing::warn!("reading the API server's OpenAPI failed: {error}");
        }
    }

    async fn refresh(&self) -> Result<(), String> {
        let (status, _, body) = self.get("/openapi/v3", None).await?;
        match status {
            http::StatusCode::OK => self.refresh_v3(&body).await,
            http::StatusCode::NOT_FOUND => self.refresh_v2().await,
            other => Err(format!("/openapi/v3: HTTP {other}")),
        }
    }

    async fn refresh_v3(&self, listing: &[u8]) -> Result<(), String> {
        let listing: serde_json::Value =
            serde_json::from_slice(listing).map_err(|e| format!("/openapi/v3 is not JSON: {e}"))?;
        let mut listed: HashMap<String, String> = HashMap::new();
        for (path, entry) in listing.get("paths").and_then(|p| p.as_object()).into_iter().flatten() {
            let Some(api_version) = path.strip_prefix("apis/").or_else(|| path.strip_prefix("api/")) else {
                continue;
            };
            if Schema::builtin().has_api_version(api_version) {
                continue;
            }
            if let Some(url) = entry.get("serverRelativeURL").and_then(|u| u.as_str()) {
                listed.insert(api_version.to_owned(), url.to_owned());
            }
        }
        for (api_version, url) in &listed {
            if self.is_current(api_version, url) {
                continue;
            }
            let document = match self.get(url, None).await {
                Ok((http::StatusCode::OK, _, body)) => convert(url, &body),
                Ok((status, _, _)) => Err(format!("{url}: HTTP {status}")),
                Err(error) => Err(error),
            };
            self.store(api_version, url.clone(), document);
        }
        self.fetched.write().unwrap_or_else(|e| e.into_inner()).retain(|v, _| listed.contains_key(v));
        Ok(())
    }

    async fn refresh_v2(&self) -> Result<(), String> {
        let etag = self.v2_etag.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (status, etag_now, body) = self.get("/openapi/v2", etag.as_deref()).await?;
        match status {
            http::StatusCode::NOT_MODIFIED => return Ok(()),
            http::StatusCode::OK => {}
            other => return Err(format!("/openapi/v2: HTTP {other}")),
        }
        let version = etag_now.unwrap_or_default();
        // A document that does not convert is not read again until it changes.
        *self.v2_etag.lock().unwrap_or_else(|e| e.into_inner()) = Some(version.clone());
        let document = convert("/openapi/v2", &body)?;
        let api_versions: Vec<String> =
            document.api_versions.iter().filter(|v| !Schema::builtin().has_api_version(v)).cloned().collect();
        let mut fetched = self.fetched.write().unwrap_or_else(|e| e.into_inner());
        fetched.clear();
        let document = Arc::new(document);
        for api_version in api_versions {
            fetched.insert(
                api_version,
                Fetched {
                    version: version.clone(),
                    document: Some(Arc::clone(&document)),
                    at: Instant::now(),
                },
            );
        }
        Ok(())
    }

    fn is_current(&self, api_version: &str, version: &str) -> bool {
        let fetched = self.fetched.read().unwrap_or_else(|e| e.into_inner());
        fetched
            .get(api_version)
            .is_some_and(|f| f.version == version && (f.document.is_some() || f.at.elapsed() < RETRY_AFTER))
    }

    fn store(&self, api_version: &str, version: String, document: Result<Document, String>) {
        let document = match document {
            Ok(document) => Some(Arc::new(document)),
            Err(error) => {
                tracing::warn!(
                    api_version,
                    "no schema for apply configurations to this group-version's kinds: {error}"
                );
                None
            }
        };
        let entry = Fetched { version, document, at: Instant::now() };
        self.fetched.write().unwrap_or_else(|e| e.into_inner()).insert(api_version.to_owned(), entry);
    }

    /// GET `path` (with `If-None-Match` when given): the status, the ETag, the body (at most
    /// [`MAX_DOCUMENT_BYTES`]).
    async fn get(
        &self,
        path: &str,
        if_none_match: Option<&str>,
    ) -> Result<(http::StatusCode, Option<String>, Vec<u8>), String> {
        let mut request = http::Request::get(path).header(http::header::ACCEPT, "application/json");
        if let Some(etag) = if_none_match.filter(|e| !e.is_empty()) {
            request = request.header(http::header::IF_NONE_MATCH, etag);
        }
        let request = request.body(Vec::new()).map_err(|e| format!("{path}: {e}"))?;
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = response.status();
        let etag =
            response.headers().get(http::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let limited = http_body_util::Limited::new(response.into_body(), MAX_DOCUMENT_BYTES as usize);
        let body = limited.collect().await.map_err(|e| format!("{path}: {e}"))?.to_bytes();
        Ok((status, etag, body.to_vec()))
    }
}

fn convert(source: &str, body: &[u8]) -> Result<Document, String> {
    let document: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("{source}: not JSON: {e}"))?;
    Document::convert(source.to_owned(), &document).map_err(|e| format!("{source}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::super::mirror::unused_client;
    use super::*;

    #[tokio::test]
    async fn a_document_that_failed_leaves_its_group_version_without_a_schema_and_is_reported() {
        let openapi = OpenApi::new(unused_client());
        let widgets = serde_json::json!({"openapi": "3.0.0", "components": {"schemas": {"com.example.v1.Widget": {
            "type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}]}}}});
        openapi.store(
            "example.com/v1",
            "/openapi/v3/apis/example.com/v1?hash=A".into(),
            convert("/openapi/v3/apis/example.com/v1", widgets.to_string().as_bytes()),
        );
        openapi.store(
            "broken.example.com/v1",
            "/openapi/v3/apis/broken.example.com/v1?hash=B".into(),
            convert("x", b"{"),
        );
        assert!(openapi
            .document("example.com/v1")
            .is_some_and(|d| d.schema.type_of("example.com/v1", "Widget").is_some()));
        assert!(openapi.document("broken.example.com/v1").is_none());
        assert_eq!(openapi.health(), Health { converted: 1, failed: vec!["broken.example.com/v1".into()] });
        // The same URL is not fetched again before the retry delay; another is.
        assert!(openapi.is_current("broken.example.com/v1", "/openapi/v3/apis/broken.example.com/v1?hash=B"));
        assert!(!openapi.is_current("broken.example.com/v1", "/openapi/v3/apis/broken.example.com/v1?hash=C"));
    }
}
