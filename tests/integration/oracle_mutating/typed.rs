//! The typed round trip of a built-in kind (`structured_merge::typed`): kube-apiserver decodes
//! a JSON Patch's result strictly into the kind's Go type and encodes it again, so a member the
//! type has not got or a value of the wrong JSON type is its 500 (whatever the failurePolicy),
//! an empty map the type omits vanishes before the next mutation, and a pointer, a list or a
//! field the type always writes comes back with its zero value.

use super::{binding, case, jp, policy, Case, PODS};

fn one(name: &str, kind: &str, failure: &str, mutations: Vec<serde_json::Value>) -> Case {
    let resources: &[&str] = match kind {
        "ConfigMap" => &["configmaps"],
        "Deployment" => &["deployments"],
        _ => PODS,
    };
    case(
        &format!("typed-{name}"),
        kind,
        vec![policy("p", "Never", failure, resources, mutations), binding("b", "p")],
    )
}

pub(super) fn cases() -> Vec<Case> {
    vec![
        one("status-exists", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/status/phase', value: 'Running'}]")]),
        one("unknown-field", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/colour', value: 'red'}]")]),
        one("unknown-fields-listed", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/zz', value: 1}, JSONPatch{op: 'add', path: '/spec/containers/0/readinessProbe', value: {'httpGet': {'port': 80, 'q': 1}}}, JSONPatch{op: 'add', path: '/spec/containers/0/z', value: 2}]")]),
        one("unknown-field-ignored-policy", "Pod", "Ignore", vec![jp("[JSONPatch{op: 'add', path: '/metadata/colour', value: 'red'}]")]),
        one("wrong-type", "Pod", "Fail", vec![jp("[JSONPatch{op: 'replace', path: '/spec/containers/0/image', value: 1}]")]),
        one("wrong-type-in-map", "ConfigMap", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/data/n', value: 1}]")]),
        one("wrong-type-struct", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/securityContext', value: 'x'}]")]),
        one("int32-overflow", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/ports', value: [{'containerPort': 3000000000}]}]")]),
        one("int-not-integral", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/activeDeadlineSeconds', value: 1.5}]")]),
        one("pointer-to-zero-kept", "Deployment", "Fail", vec![jp("[JSONPatch{op: 'replace', path: '/spec/replicas', value: 0}]")]),
        one("empty-map-vanishes", "Pod", "Fail", vec![
            jp("[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}]"),
            jp("[JSONPatch{op: 'add', path: '/metadata/annotations/x', value: 'y'}]"),
        ]),
        one("null-string-becomes-empty", "Pod", "Fail", vec![jp("[JSONPatch{op: 'replace', path: '/spec/containers/1/name', value: null}]")]),
        one("removed-list-written-null", "Pod", "Fail", vec![jp("[JSONPatch{op: 'remove', path: '/spec/containers'}]")]),
        one("bad-quantity", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/resources', value: {'limits': {'cpu': 'lots'}}}]")]),
        one("bad-quantity-suffix", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/resources', value: {'limits': {'cpu': '1Q'}}}]")]),
        one("quantities-canonical", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/resources', value: {'limits': {'cpu': '1000m', 'memory': '2048Ki'}, 'requests': {'cpu': '0.5', 'memory': '1.5Gi', 'ephemeral-storage': '12000k'}}}]")]),
        one("quantity-number", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/resources', value: {'limits': {'memory': 1024}}}]")]),
        one("int-or-string-object", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/readinessProbe', value: {'httpGet': {'port': {'a': 'b'}}}}]")]),
        one("int-or-string-name", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/containers/0/readinessProbe', value: {'httpGet': {'port': 'http'}}}]")]),
        one("time-in-utc", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: '2024-01-01T02:30:00.5+02:00'}]")]),
        one("time-not-parsed", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: 'yesterday'}]")]),
        one("time-month-out-of-range", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: '2024-13-01T00:00:00Z'}]")]),
        one("time-without-t", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: '2024-01-01 00:00:00Z'}]")]),
        one("time-one-digit-hour", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: '2024-01-01T1:00:00-01:30'}]")]),
        one("time-not-a-string", "Pod", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/metadata/deletionTimestamp', value: 5}]")]),
        one("bool-for-string", "Deployment", "Fail", vec![jp("[JSONPatch{op: 'add', path: '/spec/template/spec/nodeName', value: true}]")]),
    ]
}
