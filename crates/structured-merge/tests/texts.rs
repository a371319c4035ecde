//! Texts and edge cases whose expected values were taken from upstream's own code
//! (evanphx/json-patch v5 and structured-merge-diff v6 as Debian packages them for
//! Kubernetes 1.36, run on the same inputs).

use serde_json::{json, Value};
use structured_merge::apply_configuration;
use structured_merge::json_patch::apply;
use structured_merge::schema::Schema;

const NIL: &str = "runtime error: invalid memory address or nil pointer dereference";

fn pod_err(live: Value, config: Value) -> String {
    let ty = Schema::builtin().type_of("v1", "Pod").unwrap();
    apply_configuration(ty, &live, &config).unwrap_err()
}

fn pod_ok(live: Value, config: Value) -> Value {
    let ty = Schema::builtin().type_of("v1", "Pod").unwrap();
    apply_configuration(ty, &live, &config).unwrap()
}

const CONV: &str = "failed to convert patch object to typed object: ";

#[test]
fn go_formatting_of_values() {
    assert_eq!(
        pod_err(json!({}), json!({"metadata": {"labels": {"z": 1000000.0}}})),
        format!("{CONV}.metadata.labels.z: expected string, got &value.valueUnstructured{{Value:1e+06}}")
    );
    assert_eq!(
        pod_err(json!({}), json!({"metadata": {"labels": {"z": {"b": [1, null, "x\n\"é", 1e-5], "a": {"c": 1.5}}}}})),
        format!("{CONV}.metadata.labels.z: expected string, got &value.valueUnstructured{{Value:map[string]interface {{}}{{\"a\":map[string]interface {{}}{{\"c\":1.5}}, \"b\":[]interface {{}}{{1, 0, \"x\\n\\\"é\", 1e-05}}}}}}")
    );
    assert_eq!(
        pod_err(json!({}), json!({"spec": {"hostNetwork": {"b": [1, null, "x\n\"é", 1e-5], "a": {"c": 1234567.0}}}})),
        format!("{CONV}.spec.hostNetwork: expected boolean, got &{{map[a:map[c:1.234567e+06] b:[1 NULL_VALUE x\n\"é 1e-05]]}}")
    );
    assert_eq!(
        pod_err(json!({}), json!({"spec": {"priority": [1]}})),
        format!("{CONV}.spec.priority: expected numeric (int or float), got []interface {{}}")
    );
}

#[test]
fn list_item_errors() {
    assert_eq!(
        pod_err(json!({}), json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80.0}, {"containerPort": 80, "protocol": "TCP"}]}]}})),
        format!("{CONV}.spec.containers[name=\"a\"].ports: duplicate entries for key [containerPort=80,protocol=\"TCP\"]")
    );
    assert_eq!(
        pod_err(json!({}), json!({"spec": {"containers": [null]}})),
        format!(
            "{CONV}.spec.containers: element 0: associative list with keys may not have non-map elements"
        )
    );
    assert_eq!(
        pod_err(json!({}), json!({"metadata": {"finalizers": [null, {"a": 1}]}})),
        format!("{CONV}errors:\n  .metadata.finalizers[={{{{undefined}}}}]: expected string, got &value.valueUnstructured{{Value:0}}\n  .metadata.finalizers: element 1: associative list without keys has an element that's a map type")
    );
    assert_eq!(
        pod_err(json!({"metadata": {"finalizers": [null]}}), json!({"metadata": {"finalizers": ["a"]}})),
        "failed to convert original object to typed object: .metadata.finalizers: element 0: associative list without keys has an element that's an explicit null"
    );
    // A missing key takes the field's default ("" for a container's name).
    assert_eq!(
        pod_ok(json!({}), json!({"spec": {"containers": [{"image": "x"}]}})),
        json!({"spec": {"containers": [{"image": "x"}]}})
    );
}

#[test]
fn merge_edge_cases() {
    assert_eq!(
        pod_ok(
            json!({"spec": {"containers": [{"name": "a"}], "nodeName": null}}),
            json!({"spec": {"containers": [{"name": "b"}]}})
        ),
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": null}})
    );
    assert_eq!(
        pod_ok(json!({"spec": {"containers": null}}), json!({"spec": {"containers": []}})),
        json!({"spec": {"containers": []}})
    );
    // No unions: both members of a volume source are kept.
    assert_eq!(
        pod_ok(
            json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "c"}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}})
        ),
        json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "c"}, "secret": {"secretName": "s"}}]}})
    );
}

#[test]
fn raw_null_nodes() {
    // `test` with null: an empty array passes, an object dereferences nil.
    assert!(apply(&json!({"a": {"b": []}}), &json!([{"op": "test", "path": "/a/b", "value": null}]))
        .unwrap()
        .is_some());
    assert_eq!(
        apply(&json!({"a": {"b": {}}}), &json!([{"op": "test", "path": "/a/b", "value": null}])),
        Err(NIL.into())
    );
    // A null set by an operation is a raw null node: a container that dereferences nil...
    let patch =
        json!([{"op": "replace", "path": "/a", "value": null}, {"op": "add", "path": "/a/x", "value": 1}]);
    assert_eq!(apply(&json!({"a": "1"}), &patch), Err(NIL.into()));
    // ...where a null of the document is a missing path.
    assert_eq!(
        apply(&json!({"a": null}), &json!([{"op": "add", "path": "/a/x", "value": 1}])),
        Err("add operation does not apply: doc is missing path: \"/a/x\": missing value".into())
    );
    let patch =
        json!([{"op": "add", "path": "/1", "value": null}, {"op": "test", "path": "/1", "value": {}}]);
    assert_eq!(apply(&json!(["a", 2]), &patch), Err(NIL.into()));
    // At the end it is JSON null again.
    let out =
        apply(&json!({"a": "1"}), &json!([{"op": "add", "path": "/b", "value": null}])).unwrap().unwrap();
    assert_eq!(out, json!({"a": "1", "b": null}));
}
