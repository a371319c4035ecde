//! The parameter objects a policy's `paramKind` names, as the configuration holds them and
//! as CEL reads them (`params`), by namespace and name.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::cel;

/// A parameter object of the configuration.
#[derive(Clone, Debug)]
pub(crate) struct Param {
    /// Empty for a cluster-scoped object.
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: Arc<Value>,
    /// The object as CEL sees it, converted on first use and shared by every review of this
    /// configuration (a reload converts afresh).
    pub(crate) converted: Arc<OnceLock<cel::CelValue>>,
}

/// A parameter object with `apiVersion` and `kind` filled in when it lacks them, as the API
/// server's informers hand them to the plugin.
fn with_kind(value: Arc<Value>, api_version: &str, kind: &str) -> Arc<Value> {
    if value.get("kind").is_some() && value.get("apiVersion").is_some() {
        return value;
    }
    let mut owned = (*value).clone();
    if let Value::Object(fields) = &mut owned {
        fields.entry("apiVersion").or_insert_with(|| serde_json::json!(api_version));
        fields.entry("kind").or_insert_with(|| serde_json::json!(kind));
    }
    Arc::new(owned)
}

impl Param {
    pub(crate) fn new(
        namespace: String,
        name: String,
        labels: BTreeMap<String, String>,
        value: Arc<Value>,
    ) -> Param {
        Param { namespace, name, labels, value, converted: Arc::default() }
    }

    /// A parameter object as listed, from the configuration or the API server: its namespace,
    /// name and labels read off its metadata.
    pub(crate) fn of_object(value: Arc<Value>) -> Param {
        let metadata = value.get("metadata");
        let text = |field: &str| {
            metadata.and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let labels = crate::config::selector::decoded_labels_of(&value).unwrap_or_default();
        Param::new(text("namespace"), text("name"), labels, value)
    }

    /// `params` for CEL: the object with `apiVersion` and `kind` filled in when it lacks them,
    /// converted on first use, then shared by every review until the object changes.
    pub(crate) fn cel(&self, api_version: &str, kind: &str) -> cel::CelValue {
        self.converted
            .get_or_init(|| {
                let value = with_kind(Arc::clone(&self.value), api_version, kind);
                cel::json_value(Some(&value))
            })
            .clone()
    }
}

/// The parameter objects of one kind, by namespace (empty for cluster-scoped objects) then
/// name: a `paramRef.name` is one lookup, a selector reads one namespace, never the whole kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct ParamSet(BTreeMap<String, BTreeMap<String, Arc<Param>>>);

impl ParamSet {
    /// Adds `param`, or replaces the object of its namespace and name (then `false`).
    pub(crate) fn insert(&mut self, param: Param) -> bool {
        let names = self.0.entry(param.namespace.clone()).or_default();
        names.insert(param.name.clone(), Arc::new(param)).is_none()
    }

    /// Removes the object `name` of `namespace`, if there is one.
    pub(crate) fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(names) = self.0.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.0.remove(namespace);
            }
        }
    }

    /// The objects of `namespace` that `name` names (at most one), or all of them without a
    /// name, in name order.
    pub(crate) fn select(&self, namespace: &str, name: Option<&str>) -> Vec<Arc<Param>> {
        let Some(names) = self.0.get(namespace) else { return Vec::new() };
        match name {
            Some(name) => names.get(name).into_iter().cloned().collect(),
            None => names.values().cloned().collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every object, by namespace then name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Param>> {
        self.0.values().flat_map(BTreeMap::values)
    }
}

impl Extend<Param> for ParamSet {
    fn extend<I: IntoIterator<Item = Param>>(&mut self, params: I) {
        for param in params {
            self.insert(param);
        }
    }
}
