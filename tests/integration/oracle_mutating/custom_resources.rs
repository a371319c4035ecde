//! Cases on a custom resource, its schema an OpenAPI v3 document as kube-apiserver publishes a
//! CRD's (`/openapi/v3/apis/example.com/v1`): the oracle serves it to upstream's type converter
//! manager, the gateway reads it from its `GatewayConfig`'s `openAPIDocuments`. Both convert it
//! (kube-openapi's schemaconv; `structured_merge::schema::Schema::from_openapi`), so every
//! apply configuration here also checks the conversion: list types and keys with defaults,
//! sets, atomic lists and maps, preserve-unknown-fields, int-or-string, ObjectMeta by `allOf`.

use serde_json::{json, Value};

use super::{ac, binding, jp, namespace, Case};

/// The Widget CRD's published document; Gadget is a second kind of the group-version.
pub(super) fn document() -> Value {
    let meta =
        json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]});
    let kind = |kind: &str, spec: Value| {
        json!({"type": "object",
               "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": kind}],
               "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": meta, "spec": spec}})
    };
    let widget_spec = json!({"type": "object", "properties": {
        "replicas": {"type": "integer", "format": "int32"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                  "items": {"type": "object", "required": ["port"], "properties": {
                      "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}, "name": {"type": "string"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
        "settings": {"type": "object", "additionalProperties": {"type": "string"}},
        "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "string"}}},
        "template": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                           "items": {"type": "object", "properties": {"name": {"type": "string"}, "image": {"type": "string"}}}}}}}});
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}, "paths": {},
           "components": {"schemas": {
               "com.example.v1.Widget": kind("Widget", widget_spec),
               "com.example.v1.Gadget": kind("Gadget", json!({"type": "object", "properties": {"size": {"type": "string"}}})),
               "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
                   "name": {"type": "string"}, "namespace": {"type": "string"},
                   "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                   "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                   "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge",
                                  "items": {"type": "string", "default": ""}}}}}}})
}

fn widget(kind: &str, group: &str) -> Value {
    if kind != "Widget" {
        return json!({"apiVersion": format!("{group}/v1"), "kind": kind,
                      "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": "m"}});
    }
    json!({"apiVersion": format!("{group}/v1"), "kind": kind,
           "metadata": {"name": "w", "namespace": "default", "labels": {"app": "w"}, "finalizers": ["a"]},
           "spec": {"replicas": 1, "ports": [{"port": 80, "protocol": "TCP", "name": "http"}, {"port": 53, "protocol": "UDP"}],
                    "tags": ["x"], "args": ["run"], "selector": {"app": "w"}, "settings": {"a": "1"}, "size": 3,
                    "template": {"containers": [{"name": "c", "image": "one"}]}}})
}

fn review(object: &Value, group: &str, resource: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": "0f0f0f0f-1111-4222-8333-444444444444",
                       "kind": {"group": group, "version": "v1", "kind": object["kind"]},
                       "resource": {"group": group, "version": "v1", "resource": resource},
                       "name": "w", "namespace": "default", "operation": "CREATE",
                       "userInfo": {"username": "alice"}, "object": object,
                       "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}})
}

fn policy(group: &str, resource: &str, mutations: Vec<Value>) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
           "metadata": {"name": "p"},
           "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                    "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [group], "apiVersions": ["v1"], "resources": [resource]}]},
                    "mutations": mutations}})
}

/// A case on `kind` of `group` (its resource `resource`), with the Widget document served.
fn on(name: &str, kind: &str, group: &str, resource: &str, mutations: Vec<Value>) -> Case {
    Case {
        name: format!("crd-{name}"),
        config: vec![namespace(), policy(group, resource, mutations), binding("b", "p")],
        review: review(&widget(kind, group), group, resource),
        openapi: json!({"apis/example.com/v1": document()}),
    }
}

pub(super) fn cases() -> Vec<Case> {
    let widget = |name: &str, mutation: Value| on(name, "Widget", "example.com", "widgets", vec![mutation]);
    vec![
        widget("ports-by-keys-with-default", ac("Object{spec: Object.spec{ports: [Object.spec.ports{port: 80, name: 'web'}, Object.spec.ports{port: 443, protocol: 'TCP'}]}}")),
        widget("ports-order", ac("Object{spec: Object.spec{ports: [Object.spec.ports{port: 8080}, Object.spec.ports{port: 53, protocol: 'UDP', name: 'dns'}]}}")),
        widget("set-union", ac("Object{spec: Object.spec{tags: ['y', 'x']}}")),
        widget("list-without-type-is-atomic", ac("Object{spec: Object.spec{args: ['other']}}")),
        widget("atomic-map", ac("Object{spec: Object.spec{selector: {'app': 'v'}}}")),
        widget("granular-map", ac("Object{spec: Object.spec{settings: {'b': '2'}, replicas: 3}}")),
        widget("undeclared-field", ac("Object{spec: Object.spec{colour: 'red'}}")),
        widget("preserved-unknown-fields", ac("Object{spec: Object.spec{extra: Object.spec.extra{anything: {'deep': 'x'}, more: [1, 2], known: 'k'}}}")),
        // A CEL list inside a plain CEL map of an Object reaches upstream's converter as a Go
        // value it cannot read (`[]ref.Val`): listed in known-differences-mutating.txt.
        widget("list-in-plain-map", ac("Object{spec: Object.spec{extra: Object.spec.extra{anything: {'deep': [1, 2]}}}}")),
        widget("int-or-string", ac("Object{spec: Object.spec{size: '1Gi'}}")),
        widget("wrong-type", ac("Object{spec: Object.spec{replicas: 'three'}}")),
        widget("object-meta-by-allof", ac("Object{metadata: Object.metadata{labels: {'team': 'a'}, finalizers: ['b', 'a']}}")),
        widget("nested-keyed-list", ac("Object{spec: Object.spec{template: Object.spec.template{labels: {'l': 'v'}, containers: [Object.spec.template.containers{name: 'c', image: 'two'}, Object.spec.template.containers{name: 'd', image: 'd'}]}}}")),
        widget("duplicate-keys", ac("Object{spec: Object.spec{ports: [Object.spec.ports{port: 1}, Object.spec.ports{port: 1, protocol: 'TCP'}]}}")),
        widget("json-patch", jp("[JSONPatch{op: 'add', path: '/spec/tags/-', value: 'z'}, JSONPatch{op: 'replace', path: '/spec/replicas', value: 4}]")),
        on("second-kind-of-the-document", "Gadget", "example.com", "gadgets", vec![ac("Object{spec: Object.spec{size: 's'}}")]),
        on("kind-missing-from-its-document", "Sprocket", "example.com", "sprockets", vec![ac("Object{spec: Object.spec{size: 's'}}")]),
        on("no-document-apply", "Widget", "other.example.com", "widgets", vec![ac("Object{spec: Object.spec{replicas: 2}}")]),
        // Upstream answers 503 without a converter even for a JSON Patch; the gateway applies
        // it (docs/differences.md): listed in known-differences-mutating.txt.
        on("no-document-json-patch", "Widget", "other.example.com", "widgets", vec![jp("[JSONPatch{op: 'replace', path: '/spec/replicas', value: 2}]")]),
    ]
}
