//! A mutation's CEL as the 1.36 plugin compiles, evaluates and converts it (k8s
//! `pkg/cel/mutation/typeresolver_test.go`, `pkg/admission/plugin/policy/mutating/patch/*_test.go`,
//! and what the plugin was seen to answer).

use serde_json::json;

use super::*;
use crate::check::{check_source, TypeEnv};
use crate::eval::{Limits, Meter};
use crate::value::{from_json, Map, Object as _};
use crate::{compile, Declarations, NoHost};

/// A mutation's environment: a policy without params, with the authorizer and a variable
/// `variables.v` (dyn).
fn env() -> TypeEnv {
    let mut env = TypeEnv::admission(false, true);
    env.composited_variable("v", None);
    env.with_mutation();
    env
}

/// The environment of the same policy's matchConditions and variables.
fn base_env() -> TypeEnv {
    let mut env = TypeEnv::admission(false, true);
    env.composited_variable("v", None);
    env
}

fn registry() -> Registry {
    let mut registry = crate::library::standard();
    register(&mut registry);
    registry
}

fn object() -> Value {
    from_json(&json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 1}}))
}

/// The checked type, or cel-go's report.
fn checked(source: &str) -> Result<CheckedType, String> {
    let checked = check_source(source, &env())?;
    if let Some(error) = checked.instantiation_error {
        return Err(error);
    }
    Ok(checked.output)
}

/// The checker's messages only.
fn refused(source: &str, environment: &TypeEnv) -> Vec<String> {
    let parsed = crate::parse(source).unwrap_or_else(|e| panic!("{source}: {e}"));
    crate::check::check(&parsed, environment).expect_err(source)
}

/// Checks (in the mutation environment), compiles and evaluates `source` with `object`; the
/// value or the evaluation's error, and the cost.
fn run(source: &str) -> (Result<Value, String>, u64) {
    checked(source).unwrap_or_else(|e| panic!("{source}: {e}"));
    let program = compile(source, &Declarations::with_variables(&["object"]), &registry())
        .unwrap_or_else(|e| panic!("{source}: {e}"));
    let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: None });
    let result = program.evaluate(&vec![object()], &NoHost, &mut meter);
    (result.map_err(|e| e.message), meter.cost)
}

fn eval(source: &str) -> Result<Value, String> {
    run(source).0
}

fn patch(source: &str) -> Result<serde_json::Value, MutationError> {
    let output = checked(source).unwrap_or_else(|e| panic!("{source}: {e}"));
    check_mutation(PatchType::JsonPatch, &output).unwrap_or_else(|e| panic!("{source}: {e}"));
    json_patch(&eval(source).unwrap_or_else(|e| panic!("{source}: {e}")))
}

fn apply(source: &str) -> Result<serde_json::Value, MutationError> {
    let output = checked(source).unwrap_or_else(|e| panic!("{source}: {e}"));
    check_mutation(PatchType::ApplyConfiguration, &output).unwrap_or_else(|e| panic!("{source}: {e}"));
    apply_configuration(&eval(source).unwrap_or_else(|e| panic!("{source}: {e}")))
}

fn error(message: &str) -> Result<serde_json::Value, MutationError> {
    Err(MutationError::Error(message.to_owned()))
}

#[test]
fn a_mutation_must_give_its_patch_types_result() {
    let json_patch = |source: &str| check_mutation(PatchType::JsonPatch, &checked(source).unwrap());
    let apply = |source: &str| check_mutation(PatchType::ApplyConfiguration, &checked(source).unwrap());
    let op = r#"JSONPatch{op: "add", path: "/spec/replicas", value: 3}"#;
    assert_eq!(json_patch(&format!("[{op}]")), Ok(()));
    assert_eq!(json_patch(&format!("object.spec.replicas > 1 ? [{op}] : []")), Ok(()));
    assert_eq!(json_patch(&format!("[{op}].filter(p, false)")), Ok(()));
    assert_eq!(json_patch(&format!("[{op}].map(p, p)")), Ok(()));
    assert_eq!(json_patch("[]"), Err("must evaluate to list(JSONPatch) but got list(dyn)".into()));
    assert_eq!(json_patch("true"), Err("must evaluate to list(JSONPatch) but got bool".into()));
    assert_eq!(json_patch(op), Err("must evaluate to list(JSONPatch) but got JSONPatch".into()));
    assert_eq!(json_patch("variables.v"), Err("must evaluate to list(JSONPatch) but got dyn".into()));
    assert_eq!(apply("Object{}"), Ok(()));
    assert_eq!(apply("true ? Object{} : Object{spec: 1}"), Ok(()));
    assert_eq!(apply("[1]"), Err("must evaluate to Object but got list(int)".into()));
    assert_eq!(apply("variables.v"), Err("must evaluate to Object but got dyn".into()));
    assert_eq!(apply("Object.spec{}"), Err("must evaluate to Object but got Object.spec".into()));
    assert_eq!(apply(&format!("[{op}]")), Err("must evaluate to Object but got list(JSONPatch)".into()));
}

#[test]
fn json_patch_fields_are_typed_by_the_resolver() {
    let env = env();
    assert_eq!(
        refused(r#"JSONPatch{op: "add", foo: "x"}"#, &env),
        vec!["expected type of field 'foo' is '' but provided type is 'string'"]
    );
    assert_eq!(
        refused("JSONPatch{foo: null}", &env),
        vec!["expected type of field 'foo' is '' but provided type is 'null'"]
    );
    assert_eq!(
        refused("JSONPatch{foo: [1]}", &env),
        vec!["expected type of field 'foo' is '' but provided type is 'list(int)'"]
    );
    assert_eq!(
        refused("JSONPatch{op: 1}", &env),
        vec!["expected type of field 'op' is 'string' but provided type is 'int'"]
    );
    assert_eq!(
        refused("JSONPatch{path: 1}", &env),
        vec!["expected type of field 'path' is 'string' but provided type is 'int'"]
    );
    assert_eq!(
        refused("JSONPatch{from: b'x'}", &env),
        vec!["expected type of field 'from' is 'string' but provided type is 'bytes'"]
    );
    assert_eq!(refused("Invalid{}", &env), vec!["undeclared reference to 'Invalid' (in container '')"]);
    // `Object` and names under it; not names that only start alike.
    assert_eq!(refused("ObjectMeta{}", &env), vec!["undeclared reference to 'ObjectMeta' (in container '')"]);
    assert_eq!(
        refused("JSONPatch.op{}", &env),
        vec!["undeclared reference to 'JSONPatch.op' (in container '')"]
    );
    assert_eq!(
        refused(r#"JSONPatch{op: "add", value: Invalid{}}"#, &env),
        vec!["undeclared reference to 'Invalid' (in container '')"]
    );
    // cel-go's report puts the error at the field's `:`.
    assert_eq!(
        checked("JSONPatch{foo: 'x'}"),
        Err("ERROR: <input>:1:14: expected type of field 'foo' is '' but provided type is 'string'\n | JSONPatch{foo: 'x'}\n | .............^".into())
    );
    // `value` and the fields of objects are dyn; a dyn field name passes the checker.
    assert_eq!(checked("JSONPatch{value: [1, 2]}.value"), Ok(CheckedType::Dyn));
    assert_eq!(checked("JSONPatch{op: 'add'}.op"), Ok(CheckedType::String));
    assert_eq!(checked("Object{spec: 1}.spec"), Ok(CheckedType::Dyn));
    assert_eq!(checked("JSONPatch{foo: dyn('x')}"), Ok(CheckedType::Struct("JSONPatch".into())));
    assert_eq!(checked("JSONPatch{}.foo").map(|t| t.display()), Ok(String::new()));
    // That nil type is exactly no type, not even itself (cel-go `Type.IsExactType`).
    assert_eq!(
        refused("JSONPatch{}.foo == JSONPatch{}.bar", &env),
        vec!["found no matching overload for '_==_' applied to '(, )'"]
    );
    assert_eq!(
        refused("JSONPatch{}.foo == 'a'", &env),
        vec!["found no matching overload for '_==_' applied to '(, string)'"]
    );
    assert_eq!(checked("JSONPatch{}.foo == dyn('a')"), Ok(CheckedType::Bool));
    // The homogeneous-literal validator starts over at an element without a type.
    assert_eq!(checked("[JSONPatch{}.foo, JSONPatch{}.bar, 1]"), Ok(CheckedType::list(CheckedType::Dyn)));
    assert_eq!(refused("[1, JSONPatch{}.foo]", &env), vec!["expected type 'int' but found ''"]);
    assert_eq!(refused("{'a': JSONPatch{}.foo, 'b': 1}", &env), vec!["expected type '' but found 'int'"]);
    assert_eq!(
        refused("{'a': JSONPatch{}.foo, 'b': JSONPatch{}.bar}", &env),
        vec!["expected type '' but found ''"]
    );
    assert_eq!(
        checked("Object.spec.containers{name: 'c', image: 1, ports: [80]}"),
        Ok(CheckedType::Struct("Object.spec.containers".into()))
    );
}

#[test]
fn json_patch_fields_are_checked_when_built() {
    assert_eq!(eval("JSONPatch{foo: dyn('x')}"), Err("unexpected JSONPatchType field: foo".into()));
    assert_eq!(
        eval("JSONPatch{op: dyn(1)}"),
        Err("unexpected type int64 for JSONPatchType 'op' field".into())
    );
    assert_eq!(
        eval("JSONPatch{path: dyn(1u)}"),
        Err("unexpected type uint64 for JSONPatchType 'path' field".into())
    );
    assert_eq!(
        eval("JSONPatch{from: dyn(null)}"),
        Err("unexpected type structpb.NullValue for JSONPatchType 'from' field".into())
    );
    assert_eq!(
        eval("JSONPatch{op: dyn([1])}"),
        Err("unexpected type []ref.Val for JSONPatchType 'op' field".into())
    );
    assert_eq!(
        eval("JSONPatch{op: dyn(JSONPatch{})}"),
        Err("unexpected type *mutation.JSONPatchVal for JSONPatchType 'op' field".into())
    );
    // A type's Go value is its name.
    assert_eq!(patch("[JSONPatch{op: dyn(int), path: '/a'}]"), Ok(json!([{"op": "int", "path": "/a"}])));
    assert_eq!(
        eval("JSONPatch{?op: dyn('add')}"),
        Err("cannot initialize optional entry 'op' from non-optional value add".into())
    );
    assert_eq!(
        eval("Object{?a: dyn(null)}"),
        Err("cannot initialize optional entry 'a' from non-optional value 0".into())
    );
    assert_eq!(
        eval("Object{?a: dyn(b'ab')}"),
        Err("cannot initialize optional entry 'a' from non-optional value [97 98]".into())
    );
    assert_eq!(
        eval("Object{?a: dyn(1e6)}"),
        Err("cannot initialize optional entry 'a' from non-optional value 1e+06".into())
    );
    // A field's value fails first.
    assert_eq!(eval("JSONPatch{op: 'a', value: 1 / 0}"), Err("division by zero".into()));
}

#[test]
fn json_patch_operations() {
    assert_eq!(
        patch(
            r#"[JSONPatch{op: "add", path: "/spec/replicas", value: 3}, JSONPatch{op: "remove", path: "/spec/x"}]"#
        ),
        Ok(json!([{"op": "add", "path": "/spec/replicas", "value": 3}, {"op": "remove", "path": "/spec/x"}]))
    );
    // `from` only when not empty; `op` and `path` always, empty when not written.
    assert_eq!(
        patch(
            r#"[JSONPatch{op: "move", from: "/a", path: "/b"}, JSONPatch{op: "copy", from: "", path: "/b"}]"#
        ),
        Ok(json!([{"op": "move", "from": "/a", "path": "/b"}, {"op": "copy", "path": "/b"}]))
    );
    assert_eq!(patch("[JSONPatch{value: 1}]"), Ok(json!([{"op": "", "path": "", "value": 1}])));
    // `value: null` is a value; an optional field without a value is not written.
    assert_eq!(
        patch("[JSONPatch{op: 'add', path: '/a', value: null}, JSONPatch{op: 'add', path: '/a', ?value: optional.none()}]"),
        Ok(json!([{"op": "add", "path": "/a", "value": null}, {"op": "add", "path": "/a"}]))
    );
    assert_eq!(
        patch("[JSONPatch{op: 'add', ?op: optional.none(), ?path: optional.of('/p')}]"),
        Ok(json!([{"op": "", "path": "/p"}]))
    );
    // The last of a field written twice.
    assert_eq!(
        patch("[JSONPatch{op: 'add', op: 'remove', path: '/a'}]"),
        Ok(json!([{"op": "remove", "path": "/a"}]))
    );
    assert_eq!(
        patch("[JSONPatch{op: 'test', path: '/metadata/labels/' + jsonpatch.escapeKey('k8s.io/a~b'), value: 'x'}]"),
        Ok(json!([{"op": "test", "path": "/metadata/labels/k8s.io~1a~0b", "value": "x"}]))
    );
    assert_eq!(patch("object.spec.replicas > 5 ? [JSONPatch{op: 'remove', path: '/a'}] : []"), Ok(json!([])));
    assert_eq!(patch("[JSONPatch{op: 'remove', path: '/a'}].filter(p, false)"), Ok(json!([])));
}

#[test]
fn json_patch_values_convert_as_protobuf_values() {
    let value = |v: &str| {
        patch(&format!("[JSONPatch{{op: 'add', path: '/a', value: {v}}}]")).map(|ops| ops[0]["value"].clone())
    };
    let max = (1i64 << 53) - 1;
    assert_eq!(value(&max.to_string()), Ok(json!(max)));
    assert_eq!(value(&format!("-{max}")), Ok(json!(-max)));
    assert_eq!(value(&(max + 1).to_string()), Ok(json!("9007199254740992")));
    assert_eq!(value(&format!("-{}", max + 1)), Ok(json!("-9007199254740992")));
    assert_eq!(value("9223372036854775807"), Ok(json!("9223372036854775807")));
    assert_eq!(value(&format!("{max}u")), Ok(json!(max)));
    assert_eq!(value(&format!("{}u", max + 1)), Ok(json!("9007199254740992")));
    assert_eq!(value("1.0"), Ok(json!(1)));
    assert_eq!(value("-0.0"), Ok(json!(0)));
    assert_eq!(value("1.5"), Ok(json!(1.5)));
    assert_eq!(value("1e300"), Ok(json!(1e300)));
    assert_eq!(value("true"), Ok(json!(true)));
    assert_eq!(value("null"), Ok(json!(null)));
    assert_eq!(value("'s'"), Ok(json!("s")));
    assert_eq!(value("b'\\x00\\xffab\\xfb'"), Ok(json!("AP9hYvs=")));
    assert_eq!(value("b'\\xfb\\xff'"), Ok(json!("+/8=")));
    assert_eq!(value("duration('1h')"), Ok(json!("3600s")));
    assert_eq!(value("duration('1.5s')"), Ok(json!("1.5s")));
    assert_eq!(value("timestamp('2024-01-02T03:04:05.120Z')"), Ok(json!("2024-01-02T03:04:05.12Z")));
    assert_eq!(
        value("[dyn(1), dyn('a'), dyn([2.5]), dyn({'k': null})]"),
        Ok(json!([1, "a", [2.5], {"k": null}]))
    );
    assert_eq!(value("optional.of(2)"), Ok(json!(2)));
    assert_eq!(value("object.metadata.labels"), Ok(json!({"app": "web"})));
    assert_eq!(value("object.spec"), Ok(json!({"replicas": 1})));

    let prefix = "JSONPath valueExpression evaluated to a type that could not marshal to JSON: ";
    let refused = |v: &str, message: &str| {
        assert_eq!(value(v), Err(MutationError::Error(format!("{prefix}{message}"))), "{v}");
    };
    refused("optional.none()", "optional.none() dereference");
    refused("int", "type conversion not supported for 'type'");
    refused("{1: 'a'}", "unsupported type conversion from 'int' to string");
    refused("{true: 'a'}", "type conversion error from bool to 'string'");
    refused("JSONPatch{}", "cannot convert to native type: *structpb.Value");
    refused("ip('10.0.0.1')", "type conversion error from 'IP' to '*structpb.Value'");
    let marshal =
        "json: error calling MarshalJSON for type *structpb.Value: proto: google.protobuf.Value.number_value";
    refused("double('NaN')", &format!("{marshal}: invalid NaN value"));
    refused("[1.0, -double('inf')]", &format!("{marshal}: invalid -Inf value"));
    // protojson writes a map's entries in key order.
    refused("{'b': double('NaN'), 'a': double('inf')}", &format!("{marshal}: invalid +Inf value"));
    // Conversion errors come before marshalling.
    refused("[dyn(double('NaN')), dyn(optional.none())]", "optional.none() dereference");
}

#[test]
fn escape_key() {
    assert_eq!(super::escape_key("a/b~c"), "a~1b~0c");
    assert_eq!(super::escape_key("~1/~0"), "~01~1~00");
    assert_eq!(eval("jsonpatch.escapeKey('k8s.io/my~label')"), Ok(Value::string("k8s.io~1my~0label")));
    assert_eq!(eval("jsonpatch.escapeKey(dyn(1))"), Err("no such overload".into()));
    assert_eq!(
        refused("jsonpatch.escapeKey(1)", &env()),
        vec!["found no matching overload for 'jsonpatch.escapeKey' applied to '(int)'"]
    );
    // One traversal of the string: ceil(25 × 0.1).
    assert_eq!(run(&format!("jsonpatch.escapeKey('{}')", "a/".repeat(12) + "b")).1, 3);
}

#[test]
fn objects_build_the_apply_configuration() {
    assert_eq!(apply("Object{}"), Ok(json!({})));
    assert_eq!(
        apply(
            r#"Object{spec: Object.spec{replicas: 3, template: Object.spec.template{containers: [
                Object.spec.template.containers{name: "nginx", image: "nginx", args: ["-g"]}]}}}"#
        ),
        Ok(
            json!({"spec": {"replicas": 3, "template": {"containers": [{"name": "nginx", "image": "nginx", "args": ["-g"]}]}}})
        )
    );
    // Field names and types are nobody's business here; plain maps anywhere, optionals.
    assert_eq!(
        apply(
            r#"Object{metadata: Object.metadata{labels: {?"x": optional.none(), "y": "2"}, weird: [dyn(1), dyn({"a": [dyn(true), dyn(null)]})]}}"#
        ),
        Ok(json!({"metadata": {"labels": {"y": "2"}, "weird": [1, {"a": [true, null]}]}}))
    );
    assert_eq!(apply("Object{?spec: optional.none(), ?kind: optional.of('x')}"), Ok(json!({"kind": "x"})));
    // Objects in a map under an object take the map's path.
    assert_eq!(apply("Object{spec: {'a': Object.spec{x: 1}}}"), Ok(json!({"spec": {"a": {"x": 1}}})));
    // ints stay int64 (exact), doubles as Go writes them, null kept.
    assert_eq!(
        apply("Object{a: 9223372036854775807, b: 2.0, c: 0.5, d: null, e: int, f: optional.none()}"),
        Ok(json!({"a": 9223372036854775807i64, "b": 2, "c": 0.5, "d": null, "e": "int", "f": null}))
    );
    assert_eq!(apply("Object{spec: object.spec}"), Ok(json!({"spec": {"replicas": 1}})));
    assert_eq!(apply("Object{a: 1u}"), Err(MutationError::Unrepresentable("uint64".into())));
    assert_eq!(apply("Object{a: [b'x']}"), Err(MutationError::Unrepresentable("[]uint8".into())));
    assert_eq!(
        apply("Object{a: {'t': timestamp(0)}}"),
        Err(MutationError::Unrepresentable("time.Time".into()))
    );
    assert_eq!(apply("Object{a: double('NaN')}"), Err(MutationError::Unrepresentable("float64 NaN".into())));
    assert_eq!(apply("Object{a: {1: 'x'}}"), error("invalid return type: *dynamic.ObjectVal"));
}

#[test]
fn object_type_names_must_follow_the_field_path() {
    let mismatch = |found: &str, expected: &str| {
        format!(
            "type mismatch: unexpected type name \"{found}\", expected \"{expected}\", which matches field name path from root Object type"
        )
    };
    assert_eq!(
        apply("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'c'}]}}"),
        Ok(json!({"spec": {"containers": [{"name": "c"}]}}))
    );
    assert_eq!(
        apply("Object{spec: Object.spec{containers: [Object.spec.containers.item{name: 'c'}]}}"),
        error(&mismatch("Object.spec.containers.item", "Object.spec.containers"))
    );
    assert_eq!(apply("Object{spec: Object.metadata{}}"), error(&mismatch("Object.metadata", "Object.spec")));
    assert_eq!(
        apply("Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.metadata{}}}}"),
        error(&mismatch("Object.spec.template.metadata", "Object.spec.template.spec"))
    );
    assert_eq!(
        apply("Object{spec: {'a': [Object.status{}]}}"),
        error(&mismatch("Object.status", "Object.spec"))
    );
    // Every mismatch, in the order written.
    assert_eq!(
        apply("Object{a: Object.b{}, c: Object.c{d: Object.e{}}}"),
        error(&format!(
            "{}\n{}",
            mismatch("Object.b", "Object.a"),
            &mismatch("Object.e", "Object.c.d")["type mismatch: ".len()..]
        ))
    );
    // A JSON Patch value is checked against its own name only.
    assert_eq!(
        patch("[JSONPatch{op: 'add', path: '/metadata/labels', value: Object.spec{a: 'b'}}]"),
        Ok(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]))
    );
    assert_eq!(
        patch("[JSONPatch{op: 'add', path: '/spec', value: Object.spec{a: Object.spec.b{}}}]"),
        error(&mismatch("Object.spec.b", "Object.spec.a"))
    );
    let direct = DynObject { type_name: "Object.x".into(), fields: Default::default() };
    assert!(type_name_errors(&direct).is_empty());
}

#[test]
fn objects_in_json_patch_values() {
    let value = |v: &str| {
        patch(&format!("[JSONPatch{{op: 'add', path: '/a', value: {v}}}]")).map(|ops| ops[0]["value"].clone())
    };
    // Through Go values and structpb.NewValue: every number a float64.
    assert_eq!(
        value("Object.spec{a: 9007199254740993, b: [dyn(1u), dyn('x'), dyn(b'y')], c: {'d': 2.5}, e: Object.spec.e{}}"),
        Ok(json!({"a": 9007199254740992i64, "b": [1, "x", "eQ=="], "c": {"d": 2.5}, "e": {}}))
    );
    let prefix = "JSONPath valueExpression evaluated to a type that could not marshal to JSON: ";
    assert_eq!(
        value("Object.spec{a: null}"),
        error(&format!("{prefix}proto: invalid type: structpb.NullValue"))
    );
    assert_eq!(
        value("Object.spec{a: [duration('1s')]}"),
        error(&format!("{prefix}proto: invalid type: time.Duration"))
    );
    assert_eq!(
        value("Object.spec{labels: {1: 'a'}}"),
        error(&format!(
            "{prefix}fail to convert field \"labels\": map key '\\x01' is of type types.Int, not string"
        ))
    );
    assert_eq!(
        value("Object.spec{labels: {65u: 'a'}}"),
        error(&format!(
            "{prefix}fail to convert field \"labels\": map key 'A' is of type types.Uint, not string"
        ))
    );
    assert_eq!(
        value("optional.of(Object.spec{a: double('inf')})"),
        error(&format!("{prefix}json: error calling MarshalJSON for type *structpb.Struct: proto: google.protobuf.Value.number_value: invalid +Inf value"))
    );
    // An object in a list or a map: the 1.36 plugin panics (the object converts to a Struct).
    assert_eq!(
        value("{'a': Object.spec.a{}}"),
        Err(MutationError::Panic(
            "reflect.Value.SetMapIndex: value of type *structpb.Struct is not assignable to type *structpb.Value".into()
        ))
    );
    assert_eq!(
        value("[Object.spec.containers{name: 'c'}]"),
        Err(MutationError::Panic(
            "reflect.Set: value of type *structpb.Struct is not assignable to type *structpb.Value".into()
        ))
    );
    // ... unless converting the object fails first.
    assert_eq!(
        value("[Object.a{b: null}]"),
        error(&format!("{prefix}proto: invalid type: structpb.NullValue"))
    );
}

#[test]
fn patch_types_are_declared_for_mutations_only() {
    let base = base_env();
    for (source, message) in [
        ("JSONPatch{op: 'add'}", "undeclared reference to 'JSONPatch' (in container '')"),
        ("Object{}", "undeclared reference to 'Object' (in container '')"),
        ("Object.spec{}", "undeclared reference to 'Object.spec' (in container '')"),
    ] {
        assert_eq!(refused(source, &base), vec![message], "{source}");
    }
    assert_eq!(
        refused("jsonpatch.escapeKey('a')", &base),
        vec![
            "undeclared reference to 'jsonpatch' (in container '')",
            "undeclared reference to 'escapeKey' (in container '')"
        ]
    );
    // Nor does the base registry build them.
    let base_registry = crate::library::standard();
    let declarations = Declarations::with_variables(&["object"]);
    assert_eq!(
        compile("JSONPatch{}", &declarations, &base_registry).err(),
        Some("unknown type 'JSONPatch'".into())
    );
    assert_eq!(
        compile("jsonpatch.escapeKey('a')", &declarations, &base_registry).err(),
        Some("undeclared reference to 'escapeKey' (in container '')".into())
    );
    assert!(!base_registry.has_mutation_types());
    assert!(registry().has_mutation_types());
    // A type name is no value at runtime.
    for (source, name) in [
        ("type(JSONPatch{}) == JSONPatch", "JSONPatch"),
        ("Object.spec", "Object.spec"),
        ("[Object]", "Object"),
    ] {
        assert_eq!(
            checked(source),
            Err(format!("program instantiation failed: reference to undefined type: {name}"))
        );
    }
}

#[test]
fn literals_cost_cel_gos_struct_creation() {
    assert_eq!(run("JSONPatch{op: 'add'}").1, 40);
    assert_eq!(run("Object{a: Object.a{}}").1, 80);
    // A list of one; `object.metadata.name` (an identifier and two selections), `_+_`, `object`.
    assert_eq!(
        run("[JSONPatch{op: 'add', path: object.metadata.name + '/x', value: object}]").1,
        10 + 40 + 3 + 1 + 1
    );
    // A literal that fails is charged too.
    assert_eq!(run("JSONPatch{foo: dyn(1)}").1, 40);
}

#[test]
fn values_of_the_patch_types() {
    let is = |source: &str, expected: bool| assert_eq!(eval(source), Ok(Value::Bool(expected)), "{source}");
    is("Object{spec: Object.spec{replicas: 3}} == Object{spec: Object.spec{replicas: 1 + 2}}", true);
    is("Object{a: 1} == Object{a: 1.0}", false);
    is("dyn(Object{a: 1}) == dyn(Object.a{a: 1})", false);
    is("dyn(Object{}) == dyn(JSONPatch{})", false);
    is("Object{a: {'k': 'v'}} == Object{a: {'k': 'v'}}", true);
    // reflect.DeepEqual never finds two cel-go lists equal (they hold a function).
    is("Object{a: [1]} == Object{a: [1]}", false);
    is("[[1]].all(l, Object{a: l} == Object{a: l})", true);
    is("JSONPatch{op: 'add', value: 1} == JSONPatch{op: 'add', value: 1.0}", true);
    is("JSONPatch{op: 'add'} == JSONPatch{op: 'add', value: null}", false);
    is("JSONPatch{op: 'add', path: '/a'}.path == '/a' && !has(JSONPatch{}.op) && has(JSONPatch{value: 1}.value)", true);
    is("Object{intList: [1, 2, 3]}.intList.sum() == 6", true);
    is("has(Object{a: 1}.a) && !has(Object{a: 1}.b) && Object{}.b == null", true);
    is("Object{}.?existing == optional.none() && Object{a: 2}.?a == optional.of(2)", true);
    is(
        "Object{?spec: optional.ofNonZeroValue(Object.spec{?replicas: Object{}.?replicas})} == Object{}",
        true,
    );
    is("Object{s: Object.s{a: 1}}.s == {'a': 1}", true);
    is("type(Object.spec{}) == type(Object.spec{a: 1}) && type(Object.spec{}) != type(Object{})", true);
    assert_eq!(eval("JSONPatch{}.foo"), Err("unsupported indexer: foo".into()));
    assert_eq!(eval("has(JSONPatch{}.foo)"), Err("unsupported field: foo".into()));
}

/// Operations of a JSON Patch as many times as `n`: each with a path, a value, and a `from`
/// every other one.
fn many_operations(n: usize) -> Value {
    let ops = (0..n)
        .map(|i| {
            Value::object(JsonPatch {
                op: "add".into(),
                path: format!("/metadata/labels/l{i}").into(),
                from: if i % 2 == 0 { "/x".into() } else { "".into() },
                value: Some(Value::list(vec![Value::Int(i as i64), Value::string("v")])),
            })
        })
        .collect();
    Value::list(ops)
}

fn object_with_labels(n: usize) -> Value {
    let mut labels = Map::with_capacity(n);
    for i in 0..n {
        labels.insert(crate::value::Key::String(format!("l{i}").into()), Value::string("v"));
    }
    let mut metadata = indexmap::IndexMap::new();
    metadata.insert("labels".into(), Value::map(labels));
    let mut fields = indexmap::IndexMap::new();
    fields.insert(
        "metadata".into(),
        Value::object(DynObject { type_name: "Object.metadata".into(), fields: metadata }),
    );
    Value::object(DynObject { type_name: "Object".into(), fields })
}

#[test]
fn large_values_convert_whole() {
    let ops = json_patch(&many_operations(10_000)).unwrap();
    assert_eq!(ops.as_array().map(Vec::len), Some(10_000));
    assert_eq!(ops[9_999], json!({"op": "add", "path": "/metadata/labels/l9999", "value": [9999, "v"]}));
    assert_eq!(ops[9_998]["from"], json!("/x"));
    let object = apply_configuration(&object_with_labels(10_000)).unwrap();
    assert_eq!(object["metadata"]["labels"].as_object().map(|m| m.len()), Some(10_000));
    assert_eq!(object["metadata"]["labels"]["l9999"], json!("v"));
    // Four times as many: each converted whole, in one pass over its input (no timing is
    // asserted here: speed is the benches' and the load test's to measure).
    let ops = json_patch(&many_operations(40_000)).unwrap();
    assert_eq!(ops.as_array().map(Vec::len), Some(40_000));
    let object = apply_configuration(&object_with_labels(40_000)).unwrap();
    assert_eq!(object["metadata"]["labels"].as_object().map(|m| m.len()), Some(40_000));
}

#[test]
fn large_literals_evaluate() {
    let (ops, cost) = run(
        "lists.range(10000).map(i, JSONPatch{op: 'add', path: '/metadata/labels/l' + string(i), value: i})",
    );
    let ops = json_patch(&ops.unwrap()).unwrap();
    assert_eq!(ops.as_array().map(Vec::len), Some(10_000));
    assert_eq!(ops[1234], json!({"op": "add", "path": "/metadata/labels/l1234", "value": 1234}));
    assert!(cost > 10_000 * 40, "{cost}");
    let (object, _) =
        run("Object{metadata: Object.metadata{labels: lists.range(10000).map(i, 'l' + string(i)).transformMapEntry(i, k, {k: 'v'})}}");
    let object = apply_configuration(&object.unwrap()).unwrap();
    assert_eq!(object["metadata"]["labels"].as_object().map(|m| m.len()), Some(10_000));
}

#[test]
fn the_object_trait_defaults_keep_library_values_as_they_were() {
    // An IP has no fields: selection and presence fail as before; no zero value.
    assert_eq!(eval("dyn(ip('10.0.0.1')).a"), Err("no such key: a".into()));
    assert_eq!(eval("has(dyn(ip('10.0.0.1')).a)"), Err("no such key: a".into()));
    assert_eq!(eval("dyn(ip('10.0.0.1')).?a"), Err("no such key: a".into()));
    assert_eq!(eval("optional.ofNonZeroValue(ip('10.0.0.1')).hasValue()"), Ok(Value::Bool(true)));
    assert_eq!(eval("type(ip('10.0.0.1')) == net.IP"), Ok(Value::Bool(true)));
    let object = DynObject { type_name: "Object.a".into(), fields: Default::default() };
    assert_eq!(object.type_name(), "Object");
    assert!(object.is_zero());
}
