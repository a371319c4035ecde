#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/<target>/ from the repository's fixtures:
tests/fixtures/reviews/*.json, deploy/base/fleet/fleet.yaml and config/gateway.example.yaml.
Run from anywhere: python3 fuzz/make-corpus.py (needs PyYAML)."""
import base64, glob, json, os, yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


reviews = sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/reviews/*.json")))
objects = []
for path in reviews:
    name = os.path.basename(path)[:-5]
    text = open(path).read()
    write("review_decode", name, text)
    obj = json.loads(text)["request"].get("object")
    if isinstance(obj, dict):
        objects.append((name, obj))

# json_patch: object NUL patch, one patch of each operation per fixture object.
patches = [
    [{"op": "add", "path": "/metadata/labels/team", "value": "payments"}],
    [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
    [{"op": "remove", "path": "/metadata/labels"}],
    [{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"}],
    [{"op": "move", "from": "/metadata/labels", "path": "/metadata/annotations"}],
    [{"op": "copy", "from": "/spec/containers/0", "path": "/spec/containers/-"}],
    [{"op": "test", "path": "/kind", "value": "Pod"}, {"op": "add", "path": "/spec/x", "value": [1, 2.5, None, True]}],
    [{"op": "add", "path": "/spec/containers/-1", "value": {}}, {"op": "remove", "path": "/spec/containers/0"}],
    [],
]
for name, obj in objects:
    for i, patch in enumerate(patches):
        write("json_patch", f"{name}-{i}", json.dumps(obj) + "\0" + json.dumps(patch))

# Patches of many operations (more than the text path takes: src/pipeline/object.rs), over
# many containers, on the Pod: labels added one by one, and a mix of every operation.
pod = dict(objects)["pod-create"]
many_labels = [{"op": "add", "path": "/metadata/labels", "value": {}}]
many_labels += [{"op": "add", "path": f"/metadata/labels/l{i}", "value": str(i)} for i in range(2000)]
write("json_patch", "pod-create-many-labels", json.dumps(pod) + "\0" + json.dumps(many_labels))
mix = [{"op": "add", "path": "/spec/many", "value": []}]
for i in range(40):
    mix += [
        {"op": "add", "path": "/spec/many/-", "value": {"i": i, "tags": ["a"]}},
        {"op": "replace", "path": f"/spec/many/{i}/i", "value": str(i)},
        {"op": "copy", "from": f"/spec/many/{i}/tags", "path": f"/spec/many/{i}/copied"},
        {"op": "move", "from": f"/spec/many/{i}/copied", "path": f"/spec/many/{i}/moved"},
        {"op": "test", "path": f"/spec/many/{i}/moved", "value": ["a"]},
        {"op": "add", "path": "/spec/many/0", "value": None},
        {"op": "remove", "path": "/spec/many/0"},
    ]
write("json_patch", "pod-create-many-mixed", json.dumps(pod) + "\0" + json.dumps(mix))

# config_load: the example fleet and settings, alone, together, and as JSON.
fleet = read("deploy/base/fleet/fleet.yaml")
settings = read("config/gateway.example.yaml")
write("config_load", "fleet.yaml", fleet)
write("config_load", "gateway.example.yaml", settings)
write("config_load", "fleet-and-settings.yaml", fleet + "\n---\n" + settings)
documents = [d for d in yaml.safe_load_all(fleet) if d]
write("config_load", "fleet.json", json.dumps(documents[0], indent=1))
hook = documents[0]["webhooks"][0]
richer = json.loads(json.dumps(documents[0]))
richer["webhooks"].append(dict(hook, name="url.platform.example.com",
    clientConfig={"url": "https://policy.example.com:8443/validate?x=1"},
    namespaceSelector={"matchLabels": {"env": "prod"},
                       "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
    objectSelector={"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]},
    matchConditions=[{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}],
    matchPolicy="Equivalent"))
namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "policy", "labels": {"env": "prod"}}}
write("config_load", "fleet-richer.yaml", yaml.safe_dump_all([richer, namespace]))
write("config_load", "list.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [richer, namespace]}))

# label_selector: selector NUL labels, from the selectors above and the fixtures' labels.
selectors = [{}, richer["webhooks"][1]["namespaceSelector"], richer["webhooks"][1]["objectSelector"],
             {"matchExpressions": [{"key": "example.com/tier", "operator": "NotIn", "values": ["x"]},
                                   {"key": "env", "operator": "Exists"}]}]
label_sets = [{}, {"env": "prod", "tier": "a"}] + [o.get("metadata", {}).get("labels", {}) for _, o in objects]
for i, selector in enumerate(selectors):
    for j, labels in enumerate(label_sets[:4]):
        write("label_selector", f"selector-{i}-{j}", json.dumps(selector) + "\0" + json.dumps(labels))

# go_compat: first byte picks the function (see fuzz_targets/go_compat.rs).
go = [
    (0, "https://policy.example.com:8443/validate?x=1#f"), (0, "https://user:pw@[::1]:443/p"),
    (0, "https://%zz"), (1, "1s"), (1, "100ms"), (1, "1h2m3.5s"), (1, "0.3333333333333333333h"),
    (1, "1µs"), (2, base64.b64encode(b'[{"op":"add"}]').decode()), (2, "YWJj\r\nZA=="), (3, '{"a":[1,"<x>",null]}'),
    (3, '"\\u2028"'), (4, "-9223372036854775808"), (4, "caf\u00e9\x07"), (5, "10s"),
]
for i, (which, text) in enumerate(go):
    write("go_compat", f"seed-{i}", bytes([which]) + text.encode())
print("seeds written under", CORPUS)
