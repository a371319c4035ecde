#!/usr/bin/env python3
"""Writes builtin.json: the structured-merge-diff schemas of Kubernetes' built-in kinds, and the
type of each kind (group/version, Kind), from client-go's apply configurations.

client-go generates `applyconfigurations/internal/internal.go` with applyconfiguration-gen from
Kubernetes' published OpenAPI: its `schemaYAML` is the SMD schema the API server's type
converter builds from the same OpenAPI (list types, map keys, atomic markers, key defaults).
The group of each API package is its `register.go`'s `GroupName` (the `core` package: "").

Run by hand when the Kubernetes version moves, against the Debian packages the test suite's
oracle provisions (tests/oracle/provision.sh):

    python3 crates/structured-merge/schema/generate.py \
        ~/.cache/admission-gateway/oracle-sysroot/usr/share/gocode/src > crates/structured-merge/schema/builtin.json

Needs PyYAML. Defaults are kept only where a list's key field has one (SMD reads them to key an
element that omits the field).
"""
import json
import os
import re
import sys

import yaml

root = sys.argv[1]
client_go = os.path.join(root, "k8s.io/client-go/applyconfigurations/internal/internal.go")
text = open(client_go).read()
schema_yaml = re.search(r"var schemaYAML = typed\.YAMLObject\(`(.*?)`\)", text, re.S).group(1)
types = yaml.safe_load(schema_yaml)["types"]

version = "unknown"
changelog = os.path.join(root, "../../doc/golang-k8s-client-go-dev/changelog.Debian.gz")
try:
    import gzip
    with gzip.open(changelog, "rt") as f:
        version = re.match(r"\S+ \(([^)]+)\)", f.readline()).group(1)
except OSError:
    pass

# Key fields of associative lists: their defaults are kept, every other default dropped.
key_fields = set()
def walk_keys(atom, named):
    lst = atom.get("list")
    if lst and lst.get("keys"):
        element = lst.get("elementType", {}).get("namedType")
        for key in lst["keys"]:
            key_fields.add((element, key))
    for part in ("map", "list"):
        inner = atom.get(part) or {}
        for field in inner.get("fields", []) or []:
            walk_keys(field.get("type", {}), named)
        if inner.get("elementType"):
            walk_keys(inner["elementType"], named)

for t in types:
    walk_keys(t, t["name"])

def clean(type_def, name):
    out = {}
    for part in ("scalar", "list", "map", "namedType", "elementRelationship"):
        if part not in type_def:
            continue
        value = type_def[part]
        if part == "map":
            m = {}
            if value.get("fields"):
                fields = []
                for field in value["fields"]:
                    f = {"name": field["name"], "type": clean(field.get("type", {}), None)}
                    if "default" in field and (name, field["name"]) in key_fields:
                        f["default"] = field["default"]
                    fields.append(f)
                m["fields"] = fields
            if value.get("elementType"):
                m["elementType"] = clean(value["elementType"], None)
            if value.get("elementRelationship"):
                m["elementRelationship"] = value["elementRelationship"]
            value = m
        elif part == "list":
            l = {"elementType": clean(value.get("elementType", {}), None)}
            for k in ("elementRelationship", "keys"):
                if value.get(k):
                    l[k] = value[k]
            value = l
        out[part] = value
    return out

definitions = {t["name"]: clean(t, t["name"]) for t in types}

# Kinds: io.k8s.api.<package>.<version>.<Kind>, the package's group from its register.go.
groups = {}
api = os.path.join(root, "k8s.io/api")
for package in sorted(os.listdir(api)):
    for ver in sorted(os.listdir(os.path.join(api, package)) if os.path.isdir(os.path.join(api, package)) else []):
        register = os.path.join(api, package, ver, "register.go")
        if not os.path.exists(register):
            continue
        found = re.search(r'GroupName\s*=\s*"([^"]*)"', open(register).read())
        if found:
            groups[(package, ver)] = found.group(1)
kinds = {}
for name, definition in definitions.items():
    parts = name.split(".")
    if len(parts) != 6 or parts[:3] != ["io", "k8s", "api"]:
        continue
    package, ver, kind = parts[3], parts[4], parts[5]
    if (package, ver) not in groups or kind.endswith("List"):
        continue
    fields = {f["name"] for f in definition.get("map", {}).get("fields", [])}
    if not {"apiVersion", "kind", "metadata"} <= fields:
        continue
    group = groups[(package, ver)]
    api_version = f"{group}/{ver}" if group else ver
    kinds[f"{api_version}, Kind={kind}"] = name

json.dump(
    {
        "source": f"k8s.io/client-go applyconfigurations/internal schemaYAML (Debian golang-k8s-client-go-dev {version}), generated from Kubernetes' published OpenAPI by applyconfiguration-gen",
        "kinds": dict(sorted(kinds.items())),
        "types": dict(sorted(definitions.items())),
    },
    sys.stdout,
    separators=(",", ":"),
)
sys.stdout.write("\n")
