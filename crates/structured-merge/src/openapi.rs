//! OpenAPI → structured-merge-diff schema, as kube-apiserver's MutatingAdmissionPolicy plugin
//! builds the type converter of a group-version (`k8s.io/apiserver/pkg/admission/plugin/policy/
//! mutating/patch/typeconverter.go` → `k8s.io/apimachinery/pkg/util/managedfields`
//! `NewTypeConverter(models, false)` → `k8s.io/kube-openapi/pkg/schemaconv/openapi.go`
//! `ToSchemaFromOpenAPI`, its kinds indexed by `x-kubernetes-group-version-kind`).
//!
//! The models are the `components.schemas` of an OpenAPI v3 document (`/openapi/v3/apis/<g>/<v>`)
//! or the `definitions` of an OpenAPI v2 one (`/openapi/v2`, what servers before v3 serve):
//! both are JSON Schemas with the same Kubernetes extensions, and references are resolved by
//! their last path segment as upstream resolves them.
//!
//! Upstream walks the models and their properties in Go map order; the only trace of that
//! order is which of several models claiming one kind wins, and there the last in sorted
//! order wins here.

use serde_json::{json, Map, Value};

use crate::schema::Schema;

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const UNTYPED: &str = "__untyped_atomic_";
const DEDUCED: &str = "__untyped_deduced_";

impl Schema {
    /// The schema of an OpenAPI document's models (v3 `components.schemas` or v2
    /// `definitions`), its kinds those the models' `x-kubernetes-group-version-kind` name.
    /// Err: every problem upstream's conversion reports, one per line (the API server then has
    /// no type converter for the group-version).
    pub fn from_openapi(document: &Value) -> Result<Schema, String> {
        let models = document
            .pointer("/components/schemas")
            .or_else(|| document.get("definitions"))
            .and_then(Value::as_object)
            .ok_or("an OpenAPI document with neither components.schemas (v3) nor definitions (v2)")?;
        Schema::from_models(models)
    }

    /// [`Schema::from_openapi`] of the models themselves.
    pub fn from_models(models: &Map<String, Value>) -> Result<Schema, String> {
        let mut types = Vec::new();
        let mut errors = Vec::new();
        let mut kinds: Map<String, Value> = Map::new();
        let mut names: Vec<&String> = models.keys().collect();
        names.sort();
        for name in names {
            let model = &models[name];
            if reference(model).is_some() {
                // A top-level reference is skipped.
                continue;
            }
            let atom = if name == QUANTITY {
                json!({"scalar": "untyped"})
            } else if name == RAW_EXTENSION {
                untyped_atom(UNTYPED, "atomic")
            } else {
                let mut c =
                    Converter { preserve_unknown_fields: false, name: name.clone(), errors: &mut errors };
                c.visit(model)
            };
            if atom.as_object().is_some_and(Map::is_empty) {
                continue;
            }
            let mut def = atom;
            def["name"] = Value::String(name.clone());
            types.push(def);
            for (api_version, kind) in group_version_kinds(model) {
                let entry = kinds.entry(api_version).or_insert_with(|| Value::Object(Map::new()));
                entry[kind] = Value::String(name.clone());
            }
        }
        if !errors.is_empty() {
            return Err(errors.join("\n"));
        }
        types.push(named(UNTYPED, untyped_atom(UNTYPED, "atomic")));
        types.push(named(DEDUCED, untyped_atom(DEDUCED, "separable")));
        Schema::from_value(&json!({"types": types, "kinds": kinds}))
    }
}

fn named(name: &str, mut atom: Value) -> Value {
    atom["name"] = Value::String(name.to_owned());
    atom
}

/// `untypedDef` / `deducedDef`: an untyped scalar, an atomic list of untyped values and a map
/// of `map_elements` with `map_rel`.
fn untyped_atom(map_elements: &str, map_rel: &str) -> Value {
    json!({
        "scalar": "untyped",
        "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"},
        "map": {"elementType": {"namedType": map_elements}, "elementRelationship": map_rel},
    })
}

/// `$ref`'s last path segment, or that of a single-element `allOf`'s `$ref`.
fn reference(schema: &Value) -> Option<&str> {
    let text =
        schema.get("$ref").and_then(Value::as_str).filter(|r| !r.is_empty()).or_else(|| {
            match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                Some([only]) => only.get("$ref").and_then(Value::as_str).filter(|r| !r.is_empty()),
                _ => None,
            }
        })?;
    // Go's path.Split: what follows the last slash.
    let name = text.rsplit('/').next().unwrap_or(text);
    (!name.is_empty()).then_some(name)
}

/// The kinds a model is, as `apiVersion` and kind (`parseGroupVersionKind`; entries missing a
/// string member are skipped, an empty kind is not indexed).
fn group_version_kinds(model: &Value) -> Vec<(String, String)> {
    let Some(list) = model.get("x-kubernetes-group-version-kind").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|gvk| {
            let text = |key: &str| gvk.get(key).and_then(Value::as_str);
            let (group, version, kind) = (text("group")?, text("version")?, text("kind")?);
            if kind.is_empty() {
                return None;
            }
            let api_version =
                if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
            Some((api_version, kind.to_owned()))
        })
        .collect()
}

struct Converter<'e> {
    preserve_unknown_fields: bool,
    name: String,
    errors: &'e mut Vec<String>,
}

impl Converter<'_> {
    fn error(&mut self, message: impl std::fmt::Display) {
        self.errors.push(format!("{}: {message}", self.name));
    }

    /// `visitSpec`: a schema opting into preserve-unknown-fields opts its descendants in.
    fn visit(&mut self, schema: &Value) -> Value {
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
            self.preserve_unknown_fields = true;
        }
        self.parse(schema)
    }

    /// `parseSchema`.
    fn parse(&mut self, schema: &Value) -> Value {
        let ty = match schema.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        match ty {
            "" => json!({"scalar": "untyped", "list": self.list(schema), "map": self.object(schema)}),
            "object" => json!({"map": self.object(schema)}),
            "array" => json!({"list": self.list(schema)}),
            "integer" | "number" => json!({"scalar": "numeric"}),
            "boolean" => json!({"scalar": "boolean"}),
            "string" => match schema.get("format").and_then(Value::as_str).unwrap_or("") {
                "" | "byte" => json!({"scalar": "string"}),
                _ => json!({"scalar": "untyped"}),
            },
            other => {
                self.error(format_args!("unrecognized type: '{other}'"));
                json!({"scalar": "untyped"})
            }
        }
    }

    /// `makeOpenAPIRef`: a named type (with the property's own map type, if any) or the schema
    /// inlined.
    fn reference(&mut self, schema: &Value) -> Value {
        if let Some(name) = reference(schema) {
            let mut r = json!({"namedType": name});
            match map_relationship(schema) {
                Ok(Some(rel)) => r["elementRelationship"] = json!(rel),
                Ok(None) => {}
                Err(e) => self.error(e),
            }
            return r;
        }
        let mut inner = Converter {
            preserve_unknown_fields: self.preserve_unknown_fields,
            name: format!("inlined in {}", self.name),
            errors: &mut *self.errors,
        };
        inner.visit(schema)
    }

    /// `parseObject`.
    fn object(&mut self, schema: &Value) -> Value {
        let properties = schema.get("properties").and_then(Value::as_object);
        let mut fields = Vec::new();
        for (name, member) in properties.into_iter().flatten() {
            let mut field = json!({"name": name, "type": self.reference(member)});
            if let Some(default) = member.get("default") {
                field["default"] = default.clone();
            }
            fields.push(field);
        }
        let no_properties = properties.is_none_or(Map::is_empty);
        let element = match schema.get("additionalProperties") {
            None | Some(Value::Null) if self.preserve_unknown_fields || no_properties => {
                json!({"namedType": DEDUCED})
            }
            None | Some(Value::Null) => json!({}),
            Some(Value::Bool(true)) => json!({"namedType": DEDUCED}),
            Some(Value::Bool(false)) => json!({}),
            Some(element) => self.reference(element),
        };
        let mut map = json!({"fields": fields, "elementType": element});
        match map_relationship(schema) {
            Ok(Some(rel)) => map["elementRelationship"] = json!(rel),
            Ok(None) => {}
            Err(e) => self.error(e),
        }
        map
    }

    /// `parseList`.
    fn list(&mut self, schema: &Value) -> Value {
        let (rel, keys) = match list_relationship(schema) {
            Ok(found) => found,
            Err((found, e)) => {
                self.error(e);
                found
            }
        };
        let element = match schema.get("items") {
            Some(Value::Object(_)) => self.reference(&schema["items"]),
            Some(Value::Null) | None => {
                let ty = schema.get("type");
                if ty.is_some_and(|t| t.as_str().is_some_and(|t| !t.is_empty()) || t.get(0).is_some()) {
                    self.error("`items` must be specified on arrays");
                }
                json!({"namedType": UNTYPED})
            }
            Some(_) => {
                self.error("structural schema arrays must have exactly one member subtype");
                json!({"namedType": DEDUCED})
            }
        };
        let mut list = json!({"elementType": element, "elementRelationship": rel});
        if !keys.is_empty() {
            list["keys"] = json!(keys);
        }
        list
    }
}

type ListRelationship = (&'static str, Vec<String>);

/// `getListElementRelationship`: `x-kubernetes-list-type`, else the patch strategy, else atomic.
fn list_relationship(schema: &Value) -> Result<ListRelationship, (ListRelationship, String)> {
    if let Some(list_type) = schema.get("x-kubernetes-list-type") {
        return match list_type.as_str() {
            Some("atomic") => Ok(("atomic", Vec::new())),
            Some("set") => Ok(("associative", Vec::new())),
            Some("map") => match schema.get("x-kubernetes-list-map-keys") {
                None => Err((("associative", Vec::new()), "missing map keys".into())),
                Some(Value::Array(keys)) => {
                    Ok(("associative", keys.iter().filter_map(Value::as_str).map(str::to_owned).collect()))
                }
                Some(other) => Err((("associative", Vec::new()), format!("uninterpreted map keys: {other}"))),
            },
            _ => Err((("atomic", Vec::new()), format!("unknown list type {}", go_text(list_type)))),
        };
    }
    if let Some(strategy) = schema.get("x-kubernetes-patch-strategy") {
        return match strategy.as_str() {
            Some("merge" | "merge,retainKeys") => match schema.get("x-kubernetes-patch-merge-key") {
                None => Ok(("associative", Vec::new())),
                Some(Value::String(key)) => Ok(("associative", vec![key.clone()])),
                Some(other) => {
                    Err((("associative", Vec::new()), format!("uninterpreted merge key: {other}")))
                }
            },
            Some("retainKeys") => Ok(("atomic", Vec::new())),
            _ => Err((("atomic", Vec::new()), format!("unknown patch strategy {}", go_text(strategy)))),
        };
    }
    Ok(("atomic", Vec::new()))
}

/// `getMapElementRelationship`: `x-kubernetes-map-type`.
fn map_relationship(schema: &Value) -> Result<Option<&'static str>, String> {
    match schema.get("x-kubernetes-map-type") {
        None => Ok(None),
        Some(v) => match v.as_str() {
            Some("atomic") => Ok(Some("atomic")),
            Some("granular") => Ok(Some("separable")),
            _ => Err(format!("unknown map type {}", go_text(v))),
        },
    }
}

/// A JSON value as Go's `%v` prints it in these messages (strings bare).
fn go_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
