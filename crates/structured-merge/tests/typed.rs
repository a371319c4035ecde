//! The typed round trip of built-in kinds (`structured_merge::typed`), each text as kube-apiserver
//! 1.36 answers it (checked against it by the differential test, `oracle_mutating/typed.rs`).

use serde_json::{json, Value};
use structured_merge::typed::{DecodeError, GoTypes};

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec, "status": {}})
}

fn trip(object: &Value, before: Option<&Value>) -> Result<Value, String> {
    GoTypes::builtin()
        .round_trip("v1", "Pod", object, before)
        .expect("a built-in kind")
        .map_err(|DecodeError(e)| e)
}

#[test]
fn custom_resources_are_not_round_tripped() {
    let types = GoTypes::builtin();
    assert!(types.round_trip("example.com/v1", "Widget", &json!({}), None).is_none());
    assert!(types.knows("apps/v1", "Deployment"));
    assert!(!types.knows("v1", "Deployment"));
}

#[test]
fn unknown_members_are_named_with_their_place_unless_the_object_had_them() {
    let object = pod(json!({"containers": [{"name": "c", "z": 1}], "zz": true}));
    assert_eq!(
        trip(&object, None).unwrap_err(),
        "strict decoding error: unknown field \"spec.containers[0].z\", unknown field \"spec.zz\""
    );
    // A newer Kubernetes sent `zz`: not the mutation's doing, kept as it is.
    let before = pod(json!({"containers": [{"name": "c", "z": 1}], "zz": true}));
    let kept = trip(&object, Some(&before)).unwrap();
    assert_eq!(kept["spec"]["zz"], json!(true));
    assert_eq!(kept["spec"]["containers"][0]["z"], json!(1));
}

#[test]
fn wrong_types_are_encoding_json_errors_with_the_go_path() {
    let image = pod(json!({"containers": [{"name": "c", "image": 1}]}));
    assert_eq!(
        trip(&image, None).unwrap_err(),
        "json: cannot unmarshal number into Go struct field Container.spec.containers.image of type string"
    );
    let port = pod(json!({"containers": [{"name": "c", "readinessProbe": {"httpGet": {"port": {"a": 1}}}}]}));
    assert_eq!(
        trip(&port, None).unwrap_err(),
        "json: cannot unmarshal object into Go struct field HTTPGetAction.spec.containers.readinessProbe.ProbeHandler.httpGet.port of type int32"
    );
    let overflow =
        pod(json!({"containers": [{"name": "c", "ports": [{"containerPort": 3_000_000_000u64}]}]}));
    assert_eq!(
        trip(&overflow, None).unwrap_err(),
        "json: cannot unmarshal number 3000000000 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    let list = pod(json!({"containers": "c"}));
    assert_eq!(
        trip(&list, None).unwrap_err(),
        "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container"
    );
    let quantity = pod(json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}));
    assert!(trip(&quantity, None).unwrap_err().starts_with("quantities must match the regular expression"));
}

#[test]
fn the_encoding_drops_empty_members_and_writes_the_always_written_ones() {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {}, "labels": {"a": "b"}},
        "spec": {"containers": [{"name": null, "image": "", "resources": {"limits": {"cpu": "1000m", "memory": 1024}}}]}});
    let typed = trip(&object, None).unwrap();
    assert_eq!(
        typed,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "labels": {"a": "b"}},
               "spec": {"containers": [{"name": "", "resources": {"limits": {"cpu": "1", "memory": "1024"}}}]},
               "status": {}})
    );
    // A pointer to zero is not nil.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 0, "selector": null, "template": {"spec": {"containers": null}}}});
    let typed = GoTypes::builtin().round_trip("apps/v1", "Deployment", &deployment, None).unwrap().unwrap();
    assert_eq!(typed["spec"]["replicas"], json!(0));
    assert_eq!(typed["spec"]["template"]["spec"]["containers"], Value::Null);
    assert_eq!(typed["status"], json!({}));
}
