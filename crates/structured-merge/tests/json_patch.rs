//! JSON Patch with evanphx/json-patch v5's semantics (the texts are upstream's, as the plugin
//! reports them after `JSON Patch: `).

use serde_json::{json, Value};
use structured_merge::json_patch::apply;

fn cm() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
           "data": {"a": "1", "b": "2"}, "list": ["x", "y", "z"]})
}

fn ok(doc: &Value, patch: Value) -> Value {
    apply(doc, &patch).expect("no error").expect("not a failed test")
}

fn err(doc: &Value, patch: Value) -> String {
    apply(doc, &patch).expect_err("an error")
}

#[test]
fn add_replace_remove() {
    let out = ok(
        &cm(),
        json!([{"op": "add", "path": "/data/c", "value": "3"},
               {"op": "replace", "path": "/data/a", "value": "9"},
               {"op": "remove", "path": "/data/b"}]),
    );
    assert_eq!(out["data"], json!({"a": "9", "c": "3"}));
}

#[test]
fn add_with_missing_parent_fails() {
    assert_eq!(
        err(&cm(), json!([{"op": "add", "path": "/metadata/labels/a", "value": "x"}])),
        r#"add operation does not apply: doc is missing path: "/metadata/labels/a": missing value"#
    );
}

#[test]
fn replace_of_a_missing_key_fails() {
    assert_eq!(
        err(&cm(), json!([{"op": "replace", "path": "/data/nokey", "value": "x"}])),
        "replace operation does not apply: doc is missing key: /data/nokey: missing value"
    );
    assert_eq!(
        err(&cm(), json!([{"op": "replace", "path": "/nope/x", "value": "x"}])),
        "replace operation does not apply: doc is missing path: /nope/x: missing value"
    );
}

#[test]
fn remove_errors() {
    assert_eq!(
        err(&cm(), json!([{"op": "remove", "path": "/data/zz"}])),
        "error in remove for path: '/data/zz': unable to remove nonexistent key: zz: missing value"
    );
    assert_eq!(
        err(&cm(), json!([{"op": "remove", "path": "/nope/zz"}])),
        r#"remove operation does not apply: doc is missing path: "/nope/zz": missing value"#
    );
    assert_eq!(
        err(&cm(), json!([{"op": "remove", "path": "/list/7"}])),
        "error in remove for path: '/list/7': Unable to access invalid index: 7: invalid index referenced"
    );
    assert_eq!(
        err(&cm(), json!([{"op": "remove", "path": "/list/x"}])),
        r#"error in remove for path: '/list/x': strconv.Atoi: parsing "x": invalid syntax"#
    );
}

#[test]
fn unknown_and_missing_op() {
    assert_eq!(err(&cm(), json!([{"op": "frob", "path": "/a"}])), "Unexpected kind: frob");
    // The plugin always sends `op`; an empty one is `Unexpected kind: `.
    assert_eq!(err(&cm(), json!([{"op": "", "path": "/a"}])), "Unexpected kind: ");
    assert_eq!(err(&cm(), json!([{"path": "/a"}])), "Unexpected kind: unknown");
}

#[test]
fn failed_test_makes_the_whole_patch_a_no_op() {
    let patch = json!([{"op": "add", "path": "/data/c", "value": "3"},
                       {"op": "test", "path": "/data/a", "value": "other"},
                       {"op": "add", "path": "/data/d", "value": "4"}]);
    assert_eq!(apply(&cm(), &patch), Ok(None));
    let patch = json!([{"op": "test", "path": "/data/a", "value": "1"},
                       {"op": "add", "path": "/data/d", "value": "4"}]);
    assert_eq!(ok(&cm(), patch)["data"]["d"], "4");
}

#[test]
fn test_with_missing_parent_is_an_error() {
    assert_eq!(
        err(&cm(), json!([{"op": "test", "path": "/metadata/labels/a", "value": "x"}])),
        "test operation does not apply: is missing path: /metadata/labels/a: missing value"
    );
}

#[test]
fn test_with_null_never_passes() {
    let doc = json!({"data": {"n": null}});
    for path in ["/data/missing", "/data/n"] {
        let patch = json!([{"op": "test", "path": path, "value": null}]);
        assert_eq!(apply(&doc, &patch), Ok(None), "{path}");
    }
    // Without a value, a missing member passes.
    assert!(apply(&doc, &json!([{"op": "test", "path": "/data/missing"}])).unwrap().is_some());
}

#[test]
fn test_compares_structures_and_numbers_by_text() {
    let doc = json!({"spec": {"replicas": 3, "m": {"a": [1, "b"]}}});
    assert!(ok(&doc, json!([{"op": "test", "path": "/spec/m", "value": {"a": [1, "b"]}}])).is_object());
    assert_eq!(apply(&doc, &json!([{"op": "test", "path": "/spec/m", "value": {"a": [1]}}])), Ok(None));
    assert_eq!(apply(&doc, &json!([{"op": "test", "path": "/spec/replicas", "value": "3"}])), Ok(None));
    assert!(ok(&doc, json!([{"op": "test", "path": "/spec/replicas", "value": 3}])).is_object());
}

#[test]
fn path_without_leading_slash_loses_its_first_token() {
    let out = ok(&cm(), json!([{"op": "add", "path": "data/q", "value": "v"}]));
    assert_eq!(out["q"], "v");
    assert!(out["data"].get("q").is_none());
}

#[test]
fn negative_indices() {
    let out = ok(&cm(), json!([{"op": "add", "path": "/list/-1", "value": "end"}]));
    assert_eq!(out["list"], json!(["x", "y", "z", "end"]));
    let out = ok(&cm(), json!([{"op": "remove", "path": "/list/-1"}]));
    assert_eq!(out["list"], json!(["x", "y"]));
    let out = ok(&cm(), json!([{"op": "replace", "path": "/list/-3", "value": "X"}]));
    assert_eq!(out["list"], json!(["X", "y", "z"]));
    let out = ok(&cm(), json!([{"op": "add", "path": "/list/-", "value": "w"}]));
    assert_eq!(out["list"], json!(["x", "y", "z", "w"]));
    assert_eq!(
        err(&cm(), json!([{"op": "add", "path": "/list/-5", "value": "w"}])),
        "error in add for path: '/list/-5': Unable to access invalid index: -5: invalid index referenced"
    );
}

#[test]
fn move_and_copy() {
    let out = ok(
        &cm(),
        json!([{"op": "move", "from": "/data/a", "path": "/metadata/a"},
                               {"op": "copy", "from": "/list/0", "path": "/list/-"}]),
    );
    assert_eq!(out["data"], json!({"b": "2"}));
    assert_eq!(out["metadata"]["a"], "1");
    assert_eq!(out["list"], json!(["x", "y", "z", "x"]));
    assert_eq!(
        err(&cm(), json!([{"op": "move", "from": "/data/zz", "path": "/data/y"}])),
        "error in move for path: 'zz': unable to get nonexistent key: zz: missing value"
    );
    assert_eq!(
        err(&cm(), json!([{"op": "copy", "from": "/nope/zz", "path": "/data/y"}])),
        "copy operation does not apply: doc is missing from path: /nope/zz: missing value"
    );
}

#[test]
fn escaped_keys() {
    let out = ok(&cm(), json!([{"op": "add", "path": "/data/a~1b~0c", "value": "v"}]));
    assert_eq!(out["data"]["a/b~c"], "v");
}

#[test]
fn replace_of_the_root_with_a_scalar_changes_nothing() {
    assert_eq!(ok(&cm(), json!([{"op": "replace", "path": "", "value": 1}])), cm());
}

#[test]
fn many_operations_on_one_document() {
    let n = 20_000;
    let ops: Vec<Value> =
        (0..n).map(|i| json!({"op": "add", "path": format!("/data/k{i}"), "value": i.to_string()})).collect();
    let out = ok(&cm(), Value::Array(ops));
    let data = out["data"].as_object().unwrap();
    assert_eq!(data.len(), n + 2);
    assert_eq!(data["k12345"], "12345");
}
