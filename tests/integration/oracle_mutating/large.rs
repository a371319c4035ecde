//! Large inputs against upstream: objects and mutations of thousands of members, where a merge
//! or a patch that went quadratic, or an order taken from the wrong side, would show. Each case
//! is one policy on one object; what must agree is what every other case compares.

use serde_json::{json, Map, Value};

use super::{ac, binding, case, jp, policy, Case, PODS};

/// `n` containers `c0`, `c1`, … with an image each and every third with `args`.
fn containers(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut c = json!({"name": format!("c{i}"), "image": format!("img{i}")});
            if i % 3 == 0 {
                c["args"] = json!([format!("a{i}")]);
            }
            c
        })
        .collect()
}

fn with_object(mut case: Case, object: Value) -> Case {
    case.review["request"]["object"] = object;
    case
}

fn pod(containers: Vec<Value>, labels: Map<String, Value>, finalizers: Vec<String>) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web", "namespace": "default", "labels": labels, "finalizers": finalizers},
           "spec": {"containers": containers}})
}

fn labels(n: usize) -> Map<String, Value> {
    (0..n).map(|i| (format!("example.com/l{i}"), json!(format!("v{i}")))).collect()
}

fn one(name: &str, mutation: Value) -> Case {
    case(name, "Pod", vec![policy("p", "Never", "Fail", PODS, vec![mutation]), binding("b", "p")])
}

pub(super) fn cases() -> Vec<Case> {
    let few_labels = labels(3);
    vec![
        // 3,000 containers, every second one restated in reverse order with a new image, and
        // 500 new ones between them: SMD's two-cursor order over thousands of items.
        with_object(
            one(
                "large-containers-merged-by-key",
                ac("Object{spec: Object.spec{containers: object.spec.containers.filter(c, int(c.name.substring(1)) % 2 == 0).map(c, Object.spec.containers{name: c.name, image: c.image + ':2'}).reverse() + ['n0', 'n1', 'n2'].map(n, Object.spec.containers{name: n, image: n})}}"),
            ),
            pod(containers(3000), few_labels.clone(), vec![]),
        ),
        // 5,000 labels removed one JSON Patch operation each.
        with_object(
            one(
                "large-json-patch-removes-every-label",
                jp("object.metadata.labels.map(k, JSONPatch{op: 'remove', path: '/metadata/labels/' + jsonpatch.escapeKey(k)})"),
            ),
            pod(containers(1), labels(5000), vec![]),
        ),
        // 4,000 finalizers as a set, 2,000 of them restated in another order with 1,000 new.
        with_object(
            one(
                "large-set-union",
                ac("Object{metadata: Object.metadata{finalizers: object.metadata.finalizers.filter(f, int(f.substring(2)) % 2 == 1).reverse() + object.metadata.finalizers.filter(f, int(f.substring(2)) < 1000).map(f, f + 'x')}}"),
            ),
            pod(containers(1), few_labels.clone(), (0..4000).map(|i| format!("f/{i}")).collect()),
        ),
        // 1,000 atomic lists named in one refusal (compared as a set).
        with_object(
            one(
                "large-atomic-refusal",
                ac("Object{spec: Object.spec{containers: object.spec.containers.map(c, Object.spec.containers{name: c.name, args: ['z']})}}"),
            ),
            pod(containers(1000), few_labels.clone(), vec![]),
        ),
        // 20,000 labels merged with 2,000 more, half of them already there.
        with_object(
            one(
                "large-labels-merged",
                ac("Object{metadata: Object.metadata{labels: {'example.com/new': 'n', 'example.com/l7': 'changed'}}}"),
            ),
            pod(containers(2), labels(20_000), vec![]),
        ),
        // 2,000 JSON Patch additions to a list, each at the end.
        with_object(
            one(
                "large-json-patch-appends",
                jp("object.spec.containers.map(c, JSONPatch{op: 'add', path: '/spec/containers/-', value: {'name': c.name + '-copy', 'image': string(c.image)}})"),
            ),
            pod(containers(2000), few_labels, vec![]),
        ),
    ]
}
