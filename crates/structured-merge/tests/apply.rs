//! Apply configurations merged with the built-in kinds' schemas (smd.go, SMD v6 typed/merge.go).

use serde_json::{json, Value};
use structured_merge::apply_configuration;
use structured_merge::schema::{Schema, TypeRef};

fn pod() -> TypeRef<'static> {
    Schema::builtin().type_of("v1", "Pod").unwrap()
}

fn live_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "a"}},
           "spec": {"nodeSelector": {"disk": "ssd"},
                    "containers": [{"name": "c", "image": "i1", "args": ["x"],
                                    "ports": [{"containerPort": 80}]},
                                   {"name": "d", "image": "i2"}]}})
}

fn cfg(v: Value) -> Value {
    let mut v = v;
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Pod");
    v
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect()
}

#[test]
fn kinds_are_mapped() {
    let s = Schema::builtin();
    assert!(s.type_of("v1", "Pod").is_some());
    assert!(s.type_of("v1", "ConfigMap").is_some());
    assert!(s.type_of("apps/v1", "Deployment").is_some());
    assert!(s.type_of("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration").is_some());
    assert!(s.type_of("v1", "PodList").is_none());
    assert!(s.type_of("apps/v1", "Pod").is_none());
    assert!(s.type_of("v1", "Deployment").is_none());
}

#[test]
fn undeclared_field_is_refused() {
    let e = apply_configuration(pod(), &live_pod(), &cfg(json!({"spec": {"foo": 1}}))).unwrap_err();
    assert_eq!(e, "failed to convert patch object to typed object: .spec.foo: field not declared in schema");
}

#[test]
fn wrong_scalar_types_are_refused() {
    let e = apply_configuration(pod(), &live_pod(), &cfg(json!({"metadata": {"labels": {"a": 1}}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: .metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}"
    );
    let dep = Schema::builtin().type_of("apps/v1", "Deployment").unwrap();
    let e = apply_configuration(dep, &json!({"spec": {}}), &json!({"spec": {"replicas": "3"}}));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: .spec.replicas: expected numeric (int or float), got string"
    );
    let e = apply_configuration(pod(), &live_pod(), &cfg(json!({"spec": {"hostNetwork": "yes"}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: .spec.hostNetwork: expected boolean, got &{yes}"
    );
}

#[test]
fn several_errors_are_listed() {
    let e =
        apply_configuration(pod(), &live_pod(), &cfg(json!({"metadata": {"labels": {"a": 1, "b": true}}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: errors:\n  .metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}\n  .metadata.labels.b: expected string, got &value.valueUnstructured{Value:true}"
    );
}

#[test]
fn null_is_refused_in_a_configuration() {
    let e = apply_configuration(pod(), &live_pod(), &cfg(json!({"spec": {"nodeName": null}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: .spec.nodeName: expected string, got &value.valueUnstructured{Value:0}"
    );
    let e = apply_configuration(pod(), &live_pod(), &cfg(json!({"metadata": {"labels": null}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert patch object to typed object: .metadata.labels: expected map, got &{NULL_VALUE}"
    );
}

#[test]
fn duplicate_keys_are_refused_in_a_configuration() {
    let c = cfg(json!({"spec": {"containers": [{"name": "x"}, {"name": "x", "image": "i"}]}}));
    assert_eq!(
        apply_configuration(pod(), &live_pod(), &c).unwrap_err(),
        "failed to convert patch object to typed object: .spec.containers: duplicate entries for key [name=\"x\"]"
    );
    let c = cfg(json!({"metadata": {"finalizers": ["a", "a"]}}));
    assert_eq!(
        apply_configuration(pod(), &live_pod(), &c).unwrap_err(),
        "failed to convert patch object to typed object: .metadata.finalizers: duplicate entries for key [=\"a\"]"
    );
}

#[test]
fn duplicates_in_the_live_object_are_tolerated() {
    let mut live = live_pod();
    live["spec"]["containers"] =
        json!([{"name": "x", "image": "1"}, {"name": "x", "image": "2"}, {"name": "y"}]);
    let out =
        apply_configuration(pod(), &live, &cfg(json!({"spec": {"containers": [{"name": "z"}]}}))).unwrap();
    assert_eq!(names(&out["spec"]["containers"]), ["x", "x", "y", "z"]);
    // A duplicated key named by the configuration collapses into the configuration's item.
    let out = apply_configuration(
        pod(),
        &live,
        &cfg(json!({"spec": {"containers": [{"name": "x", "image": "3"}]}})),
    );
    assert_eq!(out.unwrap()["spec"]["containers"], json!([{"name": "x", "image": "3"}, {"name": "y"}]));
}

#[test]
fn atomic_lists_maps_and_structs_are_refused() {
    let c =
        cfg(json!({"spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "args": ["y"]}]}}));
    assert_eq!(
        apply_configuration(pod(), &live_pod(), &c).unwrap_err(),
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.containers[0].args, .spec.nodeSelector"
    );
    let c = cfg(json!({"spec": {"containers": [{"name": "d"}, {"name": "c", "args": []}]}}));
    assert_eq!(
        apply_configuration(pod(), &live_pod(), &c).unwrap_err(),
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.containers[1].args"
    );
    let dep = Schema::builtin().type_of("apps/v1", "Deployment").unwrap();
    let c = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
    assert_eq!(
        apply_configuration(dep, &json!({"spec": {}}), &c).unwrap_err(),
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"
    );
}

#[test]
fn keyed_list_items_merge_per_key() {
    let c =
        cfg(json!({"spec": {"containers": [{"name": "c", "image": "new"}, {"name": "e", "image": "i3"}]}}));
    let out = apply_configuration(pod(), &live_pod(), &c).unwrap();
    let cs = &out["spec"]["containers"];
    assert_eq!(names(cs), ["c", "d", "e"]);
    assert_eq!(cs[0], json!({"name": "c", "image": "new", "args": ["x"], "ports": [{"containerPort": 80}]}));
    assert_eq!(out["spec"]["nodeSelector"], json!({"disk": "ssd"}));
    assert_eq!(out["metadata"]["labels"], json!({"app": "a"}));
}

#[test]
fn key_defaults_match_items() {
    // ports are keyed by containerPort and protocol; protocol defaults to "TCP".
    let c = cfg(
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}}),
    );
    let out = apply_configuration(pod(), &live_pod(), &c).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])
    );
}

fn order(live: &[&str], config: &[&str]) -> Vec<String> {
    let mut l = live_pod();
    l["metadata"]["finalizers"] = json!(live);
    l["spec"]["containers"] = Value::Array(live.iter().map(|n| json!({"name": n})).collect());
    let c = cfg(json!({"metadata": {"finalizers": config},
                       "spec": {"containers": config.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}}));
    let out = apply_configuration(pod(), &l, &c).unwrap();
    let set: Vec<String> = out["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(names(&out["spec"]["containers"]), set, "keyed list and set in the same order");
    set
}

#[test]
fn merged_list_order_is_visit_list_items_order() {
    assert_eq!(order(&["c", "d"], &["z"]), ["c", "d", "z"]);
    assert_eq!(order(&["c", "d"], &["z", "d"]), ["c", "z", "d"]);
    assert_eq!(order(&["a", "b", "c", "d"], &["c", "a"]), ["b", "c", "d", "a"]);
    assert_eq!(order(&["a", "b", "c", "d"], &["b"]), ["a", "b", "c", "d"]);
    assert_eq!(order(&["a", "b"], &["b", "a"]), ["b", "a"]);
    assert_eq!(order(&[], &["x", "y"]), ["x", "y"]);
}

#[test]
fn granular_maps_merge_and_scalars_are_replaced() {
    let ty = Schema::builtin().type_of("v1", "ConfigMap").unwrap();
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let c = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"b": "3", "c": "4"}, "immutable": true});
    let out = apply_configuration(ty, &live, &c).unwrap();
    assert_eq!(out["data"], json!({"a": "1", "b": "3", "c": "4"}));
    assert_eq!(out["immutable"], true);
    assert_eq!(out["metadata"], json!({"name": "c"}));
}

#[test]
fn an_invalid_live_object_is_reported() {
    let mut live = live_pod();
    live["spec"]["bogus"] = json!(1);
    let e = apply_configuration(pod(), &live, &cfg(json!({"metadata": {"labels": {"b": "c"}}})));
    assert_eq!(
        e.unwrap_err(),
        "failed to convert original object to typed object: .spec.bogus: field not declared in schema"
    );
}

#[test]
fn deduced_types_merge_maps_and_replace_lists() {
    let ty = Schema::builtin().named_type("__untyped_deduced_").unwrap();
    let live = json!({"spec": {"a": 1, "l": [1, 2], "m": {"x": "y"}}});
    let c = json!({"spec": {"b": 2, "l": [3], "m": {"z": "w"}}});
    let out = apply_configuration(ty, &live, &c).unwrap();
    assert_eq!(out, json!({"spec": {"a": 1, "b": 2, "l": [3], "m": {"x": "y", "z": "w"}}}));
}

#[test]
fn a_schema_from_json() {
    let s = Schema::from_json(r#"{"types": [
        {"name": "w", "map": {"fields": [
            {"name": "items", "type": {"list": {"elementType": {"namedType": "item"}, "elementRelationship": "associative", "keys": ["id"]}}},
            {"name": "tags", "type": {"list": {"elementType": {"scalar": "string"}}}}]}},
        {"name": "item", "map": {"fields": [{"name": "id", "type": {"scalar": "numeric"}}, {"name": "v", "type": {"scalar": "string"}}]}}],
        "kinds": {"example.com/v1": {"Widget": "w"}}}"#).unwrap();
    let ty = s.type_of("example.com/v1", "Widget").unwrap();
    let out = apply_configuration(
        ty,
        &json!({"items": [{"id": 1, "v": "a"}]}),
        &json!({"items": [{"id": 1.0, "v": "b"}]}),
    );
    assert_eq!(out.unwrap(), json!({"items": [{"id": 1.0, "v": "b"}]}));
    // A list without a list type is neither atomic nor associative: SMD cannot merge it.
    let e = apply_configuration(ty, &json!({"tags": ["a"]}), &json!({"tags": ["b"]})).unwrap_err();
    assert_eq!(e, "failed to merge patch: errors:\n  .tags: element 0: invalid indexing of non-associative list\n  .tags: element 0: invalid indexing of non-associative list");
    assert!(Schema::from_json("{}").is_err());
}

#[test]
fn large_keyed_lists_and_maps() {
    let n = 10_000;
    let live_cs: Vec<Value> = (0..n).map(|i| json!({"name": format!("c{i}"), "image": "old"})).collect();
    let cfg_cs: Vec<Value> =
        (n / 2..n + n / 2).rev().map(|i| json!({"name": format!("c{i}"), "image": "new"})).collect();
    let mut live = live_pod();
    live["spec"]["containers"] = Value::Array(live_cs);
    let out = apply_configuration(pod(), &live, &cfg(json!({"spec": {"containers": cfg_cs}}))).unwrap();
    let cs = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), n + n / 2);
    // Live-only items first (c0…c4999); then the configuration's items in its order.
    assert_eq!(cs[0]["name"], "c0");
    assert_eq!(cs[n / 2 - 1]["name"], format!("c{}", n / 2 - 1));
    assert_eq!(cs[n / 2], json!({"name": format!("c{}", n + n / 2 - 1), "image": "new"}));
    assert_eq!(cs[cs.len() - 1], json!({"name": format!("c{}", n / 2), "image": "new"}));

    let ty = Schema::builtin().type_of("v1", "ConfigMap").unwrap();
    let m = 100_000;
    let data: serde_json::Map<String, Value> = (0..m).map(|i| (format!("k{i}"), json!("v"))).collect();
    let more: serde_json::Map<String, Value> =
        (m / 2..m + m / 2).map(|i| (format!("k{i}"), json!("w"))).collect();
    let out = apply_configuration(ty, &json!({"data": data}), &json!({"data": more})).unwrap();
    let d = out["data"].as_object().unwrap();
    assert_eq!(d.len(), m + m / 2);
    assert_eq!(d["k0"], "v");
    assert_eq!(d[&format!("k{}", m - 1)], "w");
}
