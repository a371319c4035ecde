//! The evaluator's own semantics: logic and its error absorption, selection and indexing,
//! optionals, comprehensions and their macros, costs and limits, cancellation. Expressions
//! here use no library function beyond the logical operators, so that they test this module.

use std::time::Instant;

use crate::eval::{Limits, Meter};
use crate::func::Registry;
use crate::value::{from_json, Value};
use crate::{compile, Declarations, ErrorKind, NoHost};

fn run_with(source: &str, object: serde_json::Value, limit: u64) -> (Result<Value, crate::Error>, u64) {
    let program = compile(source, &Declarations::with_variables(&["object"]), &Registry::new())
        .unwrap_or_else(|e| panic!("{source}: {e}"));
    let mut meter = Meter::new(Limits { cost: limit, deadline: None });
    let result = program.evaluate(&vec![from_json(&object)], &NoHost, &mut meter);
    (result, meter.cost)
}

fn eval(source: &str) -> Result<Value, String> {
    run_with(source, object(), u64::MAX).0.map_err(|e| e.message)
}

fn object() -> serde_json::Value {
    serde_json::json!({"metadata": {"name": "web", "labels": {"a": "x", "b": "y"}}, "spec": {"on": true, "off": false, "items": [true, false, true]}, "nothing": null})
}

fn is(source: &str, expected: bool) {
    match eval(source) {
        Ok(Value::Bool(b)) => assert_eq!(b, expected, "{source}"),
        other => panic!("{source}: {other:?}"),
    }
}

fn fails(source: &str, message: &str) {
    assert_eq!(eval(source), Err(message.to_owned()), "{source}");
}

#[test]
fn logic_absorbs_errors_where_the_other_side_decides() {
    is("object.spec.on && object.spec.on", true);
    is("object.spec.missing && false", false);
    is("false && object.spec.missing", false);
    is("object.spec.missing || true", true);
    is("true || object.spec.missing", true);
    fails("object.spec.missing && true", "no such key: missing");
    fails("true && object.spec.missing", "no such key: missing");
    fails("object.spec.missing || false", "no such key: missing");
    // The first error is reported when both sides fail.
    fails("object.spec.a && object.spec.b", "no such key: a");
    // A non-bool operand is no overload.
    fails("object.metadata.name && true", "no such overload");
    is("!object.spec.off", true);
    is("object.spec.on ? object.spec.off : object.spec.missing", false);
}

#[test]
fn selection_indexing_and_presence() {
    is("has(object.metadata.name)", true);
    is("has(object.metadata.missing)", false);
    is("has(object.nothing.x)", false);
    fails("has(object.missing.x)", "no such key: missing");
    fails("object.nothing.x", "no such key: x");
    fails("object.metadata.name.x", "no such key: x");
    fails("has(object.metadata.name.x)", "no such key: x");
    is("object.spec.items[0]", true);
    is("object.spec['items'][1]", false);
    fails("object.spec.items[3]", "index out of bounds: 3");
    fails("object.spec.items[-1]", "index out of bounds: -1");
    fails("object.metadata['missing']", "no such key: missing");
    is("{1: true}[1u]", true);
    is("{1u: true}[1]", true);
    is("{1: true}[1.0]", true);
    is("[false, true][1u]", true);
}

#[test]
fn optionals_select_index_and_chain() {
    is("object.spec.?on.orValue(false)", true);
    is("object.spec.?missing.orValue(true)", true);
    is("object.?spec.?missing.?deeper.orValue(true)", true);
    is("object.spec.items[?5].orValue(true)", true);
    is("object.spec.items[?0].orValue(false)", true);
    is("[?object.spec.?missing, ?object.spec.?on][0]", true);
    is("object.spec.?missing.or(object.spec.?on).orValue(false)", true);
    is("object.spec.?on.optMap(v, !v).orValue(true)", false);
}

#[test]
fn comprehensions_absorb_errors_as_cel_go() {
    is("object.spec.items.exists(x, x)", true);
    is("object.spec.items.all(x, x)", false);
    is("object.metadata.labels.all(k, has(object.metadata.labels.a))", true);
    // An element that errors does not matter once another decides.
    is("object.spec.items.all(x, x ? object.spec.missing : false)", false);
    is("object.spec.items.exists(x, x ? object.spec.missing : true)", true);
    fails("object.spec.items.all(x, x ? object.spec.missing : true)", "no such key: missing");
    // An element of a list literal that fails fails the list.
    fails("[object.spec.missing, false].exists(x, x)", "no such key: missing");
    is("[object.spec, false].all(x, x)", false);
    fails("[object.spec, true].all(x, x)", "no such overload");
    is("[object.spec, true].exists(x, x)", true);
    // Two variables: index and element for lists, key and value for maps.
    is("object.spec.items.all(i, v, v || !v)", true);
    is("object.metadata.labels.exists(k, v, has(object.metadata.labels.b))", true);
    fails("object.metadata.labels.all(k, v, object.metadata.labels[v])", "no such key: x");
    is("cel.bind(n, object.spec, n.on && !n.off)", true);
    is("cel.bind(n, object.spec.missing, has(object.spec.on) || n)", true);
}

#[test]
fn costs_are_cel_gos() {
    // An identifier is 1, each selection 1, a constant 0, a presence test 0 of its own.
    assert_eq!(run_with("object", object(), u64::MAX).1, 1);
    assert_eq!(run_with("object.metadata.name", object(), u64::MAX).1, 3);
    assert_eq!(run_with("has(object.metadata.name)", object(), u64::MAX).1, 2);
    assert_eq!(run_with("true", object(), u64::MAX).1, 0);
    // A literal list of constants is built once, at compile time; others cost 10 each.
    assert_eq!(run_with("[true, false]", object(), u64::MAX).1, 0);
    assert_eq!(run_with("[object]", object(), u64::MAX).1, 11);
    assert_eq!(run_with("{'a': object}", object(), u64::MAX).1, 31);
}

#[test]
fn a_cost_over_the_limit_stops_the_expression_and_nothing_absorbs_it() {
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..5000).map(|i| (format!("k{i}"), serde_json::Value::Bool(true))).collect();
    let object = serde_json::json!({"labels": labels});
    let source = "object.labels.all(k, object.labels[k]) || true";
    let (result, cost) = run_with(source, object.clone(), 1_000);
    assert_eq!(result.unwrap_err().kind, ErrorKind::CostLimit);
    assert!(cost > 1_000);
    // Within the limit: linear in the entries.
    let (result, small) = run_with(source, object, 10_000_000);
    assert_eq!(result.unwrap(), Value::Bool(true));
    assert!(small > 5000 * 4 && small < 5000 * 12, "{small}");
}

#[test]
fn sharing_makes_naming_a_large_value_in_a_loop_linear() {
    // 20,000 entries, each iteration naming the whole map twice: with copies this would be
    // 800 million entry copies; shared, it is instant. Counted in cost, not time.
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..20_000).map(|i| (format!("k{i}"), serde_json::Value::Bool(true))).collect();
    let object = serde_json::json!({"labels": labels});
    let (result, cost) =
        run_with("object.labels.all(k, object.labels[k] && has(object.labels.k0))", object, u64::MAX);
    assert_eq!(result.unwrap(), Value::Bool(true));
    assert!(cost < 20_000 * 16, "{cost}");
}

#[test]
fn a_passed_deadline_cancels_a_comprehension() {
    let program = compile("[true, true].all(x, x)", &Declarations::default(), &Registry::new()).unwrap();
    let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: Some(Instant::now()) });
    // Fewer iterations than the check interval: finishes.
    assert_eq!(program.evaluate(&Vec::new(), &NoHost, &mut meter).unwrap(), Value::Bool(true));
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..1000).map(|i| (format!("k{i}"), serde_json::Value::Bool(true))).collect();
    let program =
        compile("object.all(k, object[k])", &Declarations::with_variables(&["object"]), &Registry::new())
            .unwrap();
    let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: Some(Instant::now()) });
    let result = program.evaluate(&vec![from_json(&serde_json::Value::Object(labels))], &NoHost, &mut meter);
    assert_eq!(result.unwrap_err().kind, ErrorKind::Cancelled);
}

#[test]
fn compile_errors_name_what_is_missing() {
    let refused = |source: &str| {
        compile(source, &Declarations::with_variables(&["object"]), &Registry::new()).unwrap_err()
    };
    assert_eq!(refused("missing"), "undeclared reference to 'missing' (in container '')");
    assert_eq!(refused("object.f(1)"), "undeclared reference to 'f' (in container '')");
    assert_eq!(
        refused("object.all(k, k, true)"),
        "all() second variable must be different from the first variable"
    );
}

#[test]
fn a_value_named_is_the_value_shared_never_a_copy() {
    let object = from_json(&serde_json::json!({"labels": {"a": "x"}, "list": [1, 2]}));
    let Value::Map(fields) = &object else { panic!("a map") };
    let Some(Value::Map(labels)) = fields.get(&crate::Key::str("labels")) else { panic!("labels") };
    let registry = crate::library::standard();
    let program =
        |source: &str| compile(source, &Declarations::with_variables(&["object"]), &registry).unwrap();
    // Selected, indexed, bound to a comprehension variable, accumulated: the same allocation.
    for source in [
        "object.labels",
        "object['labels']",
        "[object.labels][0]",
        "object.list.map(x, object.labels)[1]",
        "object.labels.all(k, has(object.labels.a)) ? object.labels : object",
    ] {
        let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: None });
        let result = program(source).evaluate(&vec![object.clone()], &NoHost, &mut meter).unwrap();
        let Value::Map(out) = result else { panic!("{source}: a map") };
        assert!(std::sync::Arc::ptr_eq(labels, &out), "{source}: a copy");
    }
}
