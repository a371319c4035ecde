//! The merge against what upstream's plugin was seen to do (kube-apiserver 1.36 with its
//! MutatingAdmissionPolicy plugin run in process), on built-in kinds' schemas.

use serde_json::{json, Value};

use super::*;
use schema::Schema;

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}}, "spec": spec})
}

fn apply(kind: (&str, &str), live: &Value, config: Value) -> Result<Value, String> {
    let ty = Schema::builtin().type_of(kind.0, kind.1).expect("a built-in kind");
    let mut config = config;
    config["apiVersion"] = json!(kind.0);
    config["kind"] = json!(kind.1);
    apply_configuration(ty, live, &config)
}

fn containers(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| json!({"name": n, "image": format!("{n}:1")})).collect())
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|c| c["name"].as_str().or(c.as_str()).unwrap()).collect()
}

#[test]
fn a_keyed_list_is_merged_item_by_item_and_the_rest_of_the_object_kept() {
    let live = pod(json!({"containers": [{"name": "c", "image": "c:1", "args": ["x"]}], "nodeName": "n"}));
    let merged = apply(
        ("v1", "Pod"),
        &live,
        json!({"metadata": {"labels": {"team": "a"}}, "spec": {"containers": [{"name": "c", "image": "c:2"}, {"name": "d", "image": "d:1"}]}}),
    )
    .unwrap();
    assert_eq!(merged["metadata"]["labels"], json!({"app": "web", "team": "a"}));
    assert_eq!(
        merged["spec"]["containers"],
        json!([{"name": "c", "image": "c:2", "args": ["x"]}, {"name": "d", "image": "d:1"}])
    );
    assert_eq!(merged["spec"]["nodeName"], json!("n"));
}

#[test]
fn merged_lists_are_ordered_as_structured_merge_diff_orders_them() {
    // (live, configuration, result), seen upstream for containers and finalizers alike.
    let cases: [(&[&str], &[&str], &[&str]); 4] = [
        (&["c", "d"], &["z"], &["c", "d", "z"]),
        (&["c", "d"], &["z", "d"], &["c", "z", "d"]),
        (&["a", "b", "c", "d"], &["c", "a"], &["b", "c", "d", "a"]),
        (&["a", "b", "c", "d"], &["b"], &["a", "b", "c", "d"]),
    ];
    for (live, config, expected) in cases {
        let merged = apply(
            ("v1", "Pod"),
            &pod(json!({"containers": containers(live)})),
            json!({"spec": {"containers": containers(config)}}),
        )
        .unwrap();
        assert_eq!(names(&merged["spec"]["containers"]), expected, "containers {live:?} + {config:?}");
        let with = |f: &[&str]| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": f}});
        let merged = apply(("v1", "Pod"), &with(live), json!({"metadata": {"finalizers": config}})).unwrap();
        assert_eq!(names(&merged["metadata"]["finalizers"]), expected, "finalizers {live:?} + {config:?}");
    }
}

#[test]
fn a_value_on_an_atomic_list_map_or_struct_is_refused_even_if_unchanged() {
    let live = pod(json!({"containers": [{"name": "c", "args": ["x"]}], "nodeSelector": {"a": "b"}}));
    let error = apply(
        ("v1", "Pod"),
        &live,
        json!({"spec": {"nodeSelector": {"a": "b"}, "containers": [{"name": "c", "args": ["y"]}], "tolerations": []}}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.containers[0].args, .spec.nodeSelector, .spec.tolerations"
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}}});
    let error = apply(
        ("apps/v1", "Deployment"),
        &deployment,
        json!({"spec": {"selector": {"matchLabels": {"a": "c"}}}}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"
    );
}

#[test]
fn what_the_schema_refuses_is_named_with_its_path() {
    let live = pod(json!({"containers": [{"name": "c"}]}));
    let cases = [
        (json!({"spec": {"foo": 1}}), ".spec.foo: field not declared in schema"),
        (
            json!({"metadata": {"labels": {"a": 1}}}),
            ".metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}",
        ),
        (
            json!({"spec": {"priority": "high"}}),
            ".spec.priority: expected numeric (int or float), got string",
        ),
        (
            json!({"spec": {"nodeName": null}}),
            ".spec.nodeName: expected string, got &value.valueUnstructured{Value:0}",
        ),
        (
            json!({"spec": {"containers": [{"name": "x"}, {"name": "x"}]}}),
            ".spec.containers: duplicate entries for key [name=\"x\"]",
        ),
        (
            json!({"metadata": {"finalizers": ["a", "a"]}}),
            ".metadata.finalizers: duplicate entries for key [=\"a\"]",
        ),
    ];
    for (config, expected) in cases {
        let error = apply(("v1", "Pod"), &live, config.clone()).unwrap_err();
        assert_eq!(error, format!("failed to convert patch object to typed object: {expected}"), "{config}");
    }
    // Several problems: under `errors:`, one per line; an undeclared member ends its map's walk.
    let error = apply(
        ("v1", "Pod"),
        &live,
        json!({"metadata": {"labels": {"a": 1}}, "spec": {"foo": 1, "priority": "x"}}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "failed to convert patch object to typed object: errors:\n  .metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}\n  .spec.foo: field not declared in schema"
    );
}

#[test]
fn a_key_an_item_omits_takes_its_fields_default() {
    let live = pod(
        json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}),
    );
    let merged = apply(
        ("v1", "Pod"),
        &live,
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}),
    )
    .unwrap();
    assert_eq!(
        merged["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http", "hostPort": 8080}])
    );
}

#[test]
fn kinds_are_found_by_api_version_and_unknown_ones_are_not() {
    let schema = Schema::builtin();
    assert!(schema.type_of("v1", "ConfigMap").is_some());
    assert!(schema.type_of("apps/v1", "Deployment").is_some());
    assert!(schema.type_of("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy").is_some());
    assert!(schema.type_of("example.com/v1", "Widget").is_none());
    assert!(schema.type_of("v1", "PodList").is_none());
}

#[test]
fn large_lists_and_maps_merge_to_the_expected_result() {
    // 10,000 keyed items (the configuration's in reverse) and a map of 100,000 members: matched
    // through hash maps, so this stays linear.
    let n = 10_000;
    let live_names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let live = pod(
        json!({"containers": live_names.iter().map(|n| json!({"name": n, "image": "i"})).collect::<Vec<_>>()}),
    );
    let config: Vec<Value> = live_names.iter().rev().map(|n| json!({"name": n, "image": "j"})).collect();
    let merged = apply(("v1", "Pod"), &live, json!({"spec": {"containers": config}})).unwrap();
    let result = merged["spec"]["containers"].as_array().unwrap();
    assert_eq!(result.len(), n);
    assert!(result.iter().all(|c| c["image"] == "j"));
    let labels: serde_json::Map<String, Value> =
        (0..100_000).map(|i| (format!("l{i}"), json!("v"))).collect();
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "labels": labels}});
    let merged = apply(("v1", "ConfigMap"), &live, json!({"metadata": {"labels": {"new": "x"}}})).unwrap();
    assert_eq!(merged["metadata"]["labels"].as_object().unwrap().len(), 100_001);
}
