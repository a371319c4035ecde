//! Schemas from OpenAPI documents, converted as kube-openapi's schemaconv converts them
//! (`ToSchemaFromOpenAPI`), then used by an apply configuration.

use serde_json::{json, Value};
use structured_merge::apply_configuration;
use structured_merge::schema::Schema;

/// A custom resource's OpenAPI v3 document as kube-apiserver publishes it: the CRD's structural
/// schema with `metadata` referring to ObjectMeta.
fn widget_document() -> Value {
    json!({"openapi": "3.0.0", "components": {"schemas": {
        "com.example.v1.Widget": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                "spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["port", "protocol"],
                              "items": {"type": "object", "properties": {
                                  "port": {"type": "integer"},
                                  "protocol": {"type": "string", "default": "TCP"},
                                  "name": {"type": "string"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                 "additionalProperties": {"type": "string"}},
                    "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                              "properties": {"known": {"type": "string"}}}}}}},
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "default": ""}}}}}}})
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

#[test]
fn a_custom_resource_merges_by_its_list_map_keys_with_key_defaults() {
    let schema = Schema::from_openapi(&widget_document()).unwrap();
    let ty = schema.type_of("example.com/v1", "Widget").expect("indexed by x-kubernetes-group-version-kind");
    let live = widget(
        json!({"ports": [{"port": 80, "protocol": "TCP", "name": "a"}, {"port": 80, "protocol": "UDP"}],
                             "tags": ["x"]}),
    );
    // `protocol` defaults to TCP as a key: port 80 without protocol is the TCP entry.
    let merged =
        apply_configuration(ty, &live, &widget(json!({"ports": [{"port": 80, "name": "b"}], "tags": ["y"]})));
    assert_eq!(
        merged.unwrap()["spec"],
        json!({"ports": [{"port": 80, "protocol": "TCP", "name": "b"}, {"port": 80, "protocol": "UDP"}], "tags": ["x", "y"]})
    );
    assert!(schema.type_of("example.com/v1", "Gadget").is_none());
    assert!(schema.type_of("v1", "Widget").is_none());
}

#[test]
fn lists_without_a_list_type_and_atomic_maps_are_refused() {
    let schema = Schema::from_openapi(&widget_document()).unwrap();
    let ty = schema.type_of("example.com/v1", "Widget").unwrap();
    let live = widget(json!({}));
    let refused = apply_configuration(ty, &live, &widget(json!({"args": ["a"], "selector": {"k": "v"}})));
    assert_eq!(
        refused.unwrap_err(),
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.args, .spec.selector"
    );
}

#[test]
fn undeclared_fields_are_refused_unless_preserved() {
    let schema = Schema::from_openapi(&widget_document()).unwrap();
    let ty = schema.type_of("example.com/v1", "Widget").unwrap();
    let live = widget(json!({}));
    let refused = apply_configuration(ty, &live, &widget(json!({"color": "red"})));
    assert_eq!(
        refused.unwrap_err(),
        "failed to convert patch object to typed object: .spec.color: field not declared in schema"
    );
    let kept =
        apply_configuration(ty, &live, &widget(json!({"extra": {"anything": {"deep": 1}}, "size": "1Gi"})));
    assert_eq!(kept.unwrap()["spec"], json!({"extra": {"anything": {"deep": 1}}, "size": "1Gi"}));
    let numeric = apply_configuration(ty, &live, &widget(json!({"size": 3})));
    assert_eq!(numeric.unwrap()["spec"]["size"], json!(3));
}

#[test]
fn an_openapi_v2_document_converts_the_same() {
    let mut v2 = json!({"swagger": "2.0", "definitions": widget_document()["components"]["schemas"].clone()});
    v2["definitions"]["com.example.v1.Widget"]["properties"]["metadata"] =
        json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
    let schema = Schema::from_openapi(&v2).unwrap();
    let ty = schema.type_of("example.com/v1", "Widget").unwrap();
    let merged = apply_configuration(
        ty,
        &widget(json!({"tags": ["x"]})),
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"labels": {"a": "b"}}}),
    );
    assert_eq!(merged.unwrap()["metadata"], json!({"name": "w", "labels": {"a": "b"}}));
}

#[test]
fn problems_are_all_reported_by_model() {
    let mut doc = widget_document();
    let spec = &mut doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"];
    spec["args"]["x-kubernetes-list-type"] = json!("bag");
    spec["selector"]["x-kubernetes-map-type"] = json!("loose");
    spec["odd"] = json!({"type": "file"});
    spec["bare"] = json!({"type": "array"});
    let Err(e) = Schema::from_openapi(&doc) else { panic!("the problems are refused") };
    let mut lines: Vec<&str> = e.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "inlined in inlined in com.example.v1.Widget: `items` must be specified on arrays",
            "inlined in inlined in com.example.v1.Widget: unknown list type bag",
            "inlined in inlined in com.example.v1.Widget: unknown map type loose",
            "inlined in inlined in com.example.v1.Widget: unrecognized type: 'file'",
        ]
    );
    assert!(Schema::from_openapi(&json!({"openapi": "3.0.0"})).is_err());
}
