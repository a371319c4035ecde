//! The schemas an apply configuration is merged with (docs/policies.md, "Schemas"): the kind's
//! structured-merge-diff schema, as kube-apiserver's MutatingAdmissionPolicy plugin builds it
//! from its own OpenAPI v3 for each group-version
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/typeconverter.go`).
//!
//! Looked up in this order, by group-version as upstream does:
//! 1. the built-in kinds' schemas embedded in the binary (`structured_merge::schema::Schema::builtin`);
//! 2. the OpenAPI documents the `GatewayConfig` names (`openAPIDocuments`: custom resources
//!    outside cluster mode);
//! 3. in cluster mode, the API server's published OpenAPI (`cluster/openapi.rs`).
//!
//! A group-version found nowhere has no schema: kube-apiserver answers 503 then. A
//! group-version found without the kind fails the mutation as upstream's converter does
//! (`no corresponding type for …`).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use structured_merge::schema::Schema;

/// The most bytes an OpenAPI document may have (the API server's own for CRDs are far smaller).
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

/// One converted OpenAPI document and the group-versions its kinds belong to.
pub(crate) struct Document {
    /// Where it came from, for messages (a file, or an API server path).
    pub(crate) source: String,
    pub(crate) api_versions: BTreeSet<String>,
    pub(crate) schema: Schema,
    /// A digest of the document as read: two documents are the same when their sources and
    /// digests are (a reload compares settings).
    digest: u64,
}

impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.digest == other.digest
    }
}

impl Eq for Document {}

impl std::fmt::Debug for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Document")
            .field("source", &self.source)
            .field("api_versions", &self.api_versions)
            .finish()
    }
}

impl Document {
    /// `document` (OpenAPI v3 or v2 JSON) converted as upstream converts it; Err: the problems.
    pub(crate) fn convert(source: String, document: &serde_json::Value) -> Result<Document, String> {
        let schema = Schema::from_openapi(document)?;
        let api_versions = schema.api_versions().map(str::to_owned).collect();
        let digest = {
            use std::hash::{Hash as _, Hasher as _};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            document.to_string().hash(&mut hasher);
            hasher.finish()
        };
        Ok(Document { source, api_versions, schema, digest })
    }

    /// Reads and converts a file (JSON; a YAML file is read as YAML).
    pub(crate) fn read(path: &Path) -> Result<Document, String> {
        let bytes = read_bounded(path)?;
        let document: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(document) => document,
            Err(json_error) => {
                serde_norway::from_slice(&bytes).map_err(|_| format!("not JSON: {json_error}"))?
            }
        };
        Document::convert(path.display().to_string(), &document)
    }
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(format!("larger than {} MiB", MAX_DOCUMENT_BYTES >> 20));
    }
    Ok(bytes)
}

/// Where the cluster's published documents are kept (`cluster/openapi.rs`).
pub(crate) trait Published: Send + Sync {
    /// The document covering `api_version`, if the API server published one.
    fn document(&self, api_version: &str) -> Option<Arc<Document>>;
}

/// The schema found for a group-version.
pub(crate) enum Found {
    Builtin(&'static Schema),
    Loaded(Arc<Document>),
}

impl Found {
    pub(crate) fn schema(&self) -> &Schema {
        match self {
            Found::Builtin(schema) => schema,
            Found::Loaded(document) => &document.schema,
        }
    }
}

/// The sources of one evaluation, in order.
#[derive(Clone, Default)]
pub(crate) struct Schemas {
    configured: Arc<Vec<Arc<Document>>>,
    cluster: Option<Arc<dyn Published>>,
}

impl Schemas {
    pub(crate) fn new(configured: Arc<Vec<Arc<Document>>>, cluster: Option<Arc<dyn Published>>) -> Schemas {
        Schemas { configured, cluster }
    }

    /// Whether the API server's own documents are a source (cluster mode): then a group-version
    /// none has is one the API server has no type converter for either.
    pub(crate) fn cluster_published(&self) -> bool {
        self.cluster.is_some()
    }

    /// The schema of `api_version` ("v1", "apps/v1", "example.com/v1"), None when no source
    /// has one.
    pub(crate) fn of(&self, api_version: &str) -> Option<Found> {
        let builtin = Schema::builtin();
        if builtin.has_api_version(api_version) {
            return Some(Found::Builtin(builtin));
        }
        if let Some(document) = self.configured.iter().find(|d| d.api_versions.contains(api_version)) {
            return Some(Found::Loaded(Arc::clone(document)));
        }
        self.cluster.as_ref()?.document(api_version).map(Found::Loaded)
    }
}
