//! Evaluation: one webhook's conditions, metered, with the API server's outcome rules
//! (`matchconditions/matcher.go`, `plugin/cel/activation.go`).
//!
//! The bound. cel-go charges a cost per operation against 1,000,000 per expression and
//! 2,500,000 per webhook (`apis/cel/config.go`); the `cel` crate has no cost model, so the
//! rewritten tree (check.rs) charges here: one step per call and per comprehension iteration,
//! one per [`BYTES_PER_STEP`] bytes (or elements) of strings and lists built by calls that grow
//! them, and — before the call — the size of what `replace`, `lists.range`, `distinct` and the
//! `sets` functions would build or compare. The same budgets apply, in steps, with the API
//! server's error texts. No wall-clock limit decides: the only time bound is the review's own
//! deadline (the caller's `?timeout=`, less the gateway's margin), checked at every step, so
//! an evaluation that cannot finish in time fails under the webhook's failurePolicy, as a call
//! that timed out does.

use kube_cel::cel;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::CelNull;
use cel::common::value::Val;
use cel::objects::Value;
use cel::{Context, ExecutionError};
use kube_cel::KubeCelExt;

use super::convert::CelValue;
use super::functions::{authorizer, charged, guard, is_quantity, map, quantity, select, sized, step};
use super::{names, Program};

/// The bounds of one webhook's evaluation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `PerCallLimit`, in steps.
    pub(crate) per_expression: u64,
    /// `RuntimeCELCostBudgetMatchConditions`, in steps.
    pub(crate) per_webhook: u64,
    /// The review's deadline, when the caller gave one.
    pub(crate) deadline: Option<Instant>,
}

pub(crate) const LIMITS: Limits =
    Limits { per_expression: 1_000_000, per_webhook: 2_500_000, deadline: None };
/// The text of an evaluation stopped by the review's deadline.
pub(crate) const DEADLINE_PASSED: &str =
    "evaluation cancelled: the review's deadline passed before it finished";
/// Size charged as one step (cel-go charges string work at 0.1 per byte).
pub(super) const BYTES_PER_STEP: u64 = 10;

/// cel-go's text when one expression goes over `PerCallLimit` (an error of that condition).
pub(super) const EXPRESSION_BUDGET: &str = "operation cancelled: actual cost limit exceeded";
/// activation.go's text when the webhook's budget is spent (an error of the whole evaluation).
pub(super) const WEBHOOK_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// One condition to evaluate: its name, its expression as written, its program.
pub(crate) struct Condition<'a> {
    pub(crate) name: &'a str,
    pub(crate) expression: &'a str,
    pub(crate) program: &'a Program,
}

/// What a webhook's conditions decided (matcher.go, `Match`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No condition is false and none failed: call the webhook.
    Match,
    /// This condition, the first false one in list order: skip the webhook.
    False { condition: String },
    /// No condition is false, and evaluation failed: `message` as the API server aggregates it;
    /// `conditions` names those that failed (empty when the evaluation failed as a whole).
    Error { message: String, conditions: Vec<String> },
}

/// The request-dependent variables, converted once and lent to each evaluation.
#[derive(Default)]
pub(crate) struct Variables {
    pub(crate) object: Option<CelValue>,
    pub(crate) old_object: Option<CelValue>,
    pub(crate) request: Option<CelValue>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Exhausted {
    Expression,
    Webhook,
    Deadline,
}

#[derive(Clone, Copy)]
pub(super) struct Meter {
    pub(super) expression_left: u64,
    pub(super) webhook_left: u64,
    pub(super) deadline: Option<Instant>,
    pub(super) exhausted: Option<Exhausted>,
}

thread_local! {
    /// The environment: built-ins, kube-cel's libraries, the rewrite's functions. Built once
    /// per thread (a `cel::Context` is not `Sync`); each evaluation adds a child scope.
    pub(super) static ROOT: Context<'static> = root();
    /// The meter of the evaluation running on this thread.
    pub(super) static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

fn root() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.register_all();
    ctx.add_function(names::STEP, step);
    ctx.add_function(names::SELECT, select);
    ctx.add_function(names::MAP, map);
    ctx.add_function(names::SIZED, sized);
    ctx.add_function(names::CHARGED, charged);
    ctx.add_function(names::AUTHORIZER, authorizer);
    ctx.add_function(names::AUTHZ_ROOT, super::authorizer::root);
    ctx.add_function(names::AUTHZ, super::authorizer::step);
    ctx.add_function(names::QUANTITY, quantity);
    ctx.add_function(names::IS_QUANTITY, is_quantity);
    ctx.add_function(names::VARIABLE, super::session::variable);
    ctx.add_function(names::GUARD, guard);
    ctx
}

/// Evaluates every condition in list order against `variables` (lent to the evaluation and
/// given back), and decides as the API server's matcher: a false condition wins, then errors.
/// `deadline` is the review's.
pub(crate) fn evaluate(
    conditions: &[Condition<'_>],
    variables: &mut Variables,
    deadline: Option<Instant>,
) -> Outcome {
    evaluate_within(conditions, variables, Limits { deadline, ..LIMITS })
}

pub(crate) fn evaluate_within(
    conditions: &[Condition<'_>],
    variables: &mut Variables,
    limits: Limits,
) -> Outcome {
    ROOT.with(|root| {
        let lent = [variables.object.is_some(), variables.old_object.is_some(), variables.request.is_some()];
        let mut bound: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
        let null = || -> Box<dyn Val> { Box::new(CelNull) };
        let lend = |slot: &mut Option<CelValue>| slot.take().map_or_else(null, |v| v.0);
        bound.insert("object".into(), lend(&mut variables.object));
        bound.insert("oldObject".into(), lend(&mut variables.old_object));
        bound.insert("request".into(), lend(&mut variables.request));
        // Shared with admission policies; webhooks always get null (§4.5).
        bound.insert("namespaceObject".into(), null());
        let ctx = Context::Child { parent: root, variables: bound, resolver: None };
        let outcome = evaluate_in(&ctx, conditions, limits);
        if let Context::Child { variables: mut bound, .. } = ctx {
            // Only what was lent: a null standing in for an unconverted variable stays here.
            let mut give_back = |slot: &mut Option<CelValue>, lent: bool, name: &str| {
                if lent {
                    *slot = bound.remove(name).map(CelValue);
                }
            };
            give_back(&mut variables.object, lent[0], "object");
            give_back(&mut variables.old_object, lent[1], "oldObject");
            give_back(&mut variables.request, lent[2], "request");
        }
        outcome
    })
}

fn evaluate_in(ctx: &Context<'_>, conditions: &[Condition<'_>], limits: Limits) -> Outcome {
    METER.set(Some(Meter {
        expression_left: limits.per_expression,
        webhook_left: limits.per_webhook,
        deadline: limits.deadline,
        exhausted: None,
    }));
    let mut errors: Vec<String> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut first_false = None;
    let mut whole = None;
    // Every condition is evaluated (activation.go evaluates them all before the matcher looks
    // for a false one): a later condition that spends the webhook's budget fails the whole.
    for condition in conditions {
        meter(|m| {
            m.expression_left = limits.per_expression;
            m.exhausted = None;
        });
        let result = catch_unwind(AssertUnwindSafe(|| Value::resolve(&condition.program.expr, ctx)));
        let exhausted = meter(|m| m.exhausted);
        let error = match (exhausted, result) {
            (Some(Exhausted::Webhook), _) => {
                whole = Some(WEBHOOK_BUDGET.to_owned());
                break;
            }
            (Some(Exhausted::Deadline), _) => {
                whole = Some(format!("{DEADLINE_PASSED}, no further conditions will be run"));
                break;
            }
            (Some(Exhausted::Expression), _) => EXPRESSION_BUDGET.to_owned(),
            (None, Ok(Ok(Value::Bool(true)))) => continue,
            (None, Ok(Ok(Value::Bool(false)))) => {
                first_false.get_or_insert_with(|| condition.name.to_owned());
                continue;
            }
            (None, Ok(Ok(other))) => format!("must evaluate to bool but got {}", type_name(&other)),
            (None, Ok(Err(error))) => describe(&error),
            (None, Err(_)) => "internal error: the CEL library panicked".to_owned(),
        };
        errors.push(format!("expression '{}' resulted in error: {error}", condition.expression));
        failed.push(condition.name.to_owned());
    }
    METER.set(None);
    if let Some(message) = whole {
        return Outcome::Error { message, conditions: Vec::new() };
    }
    if let Some(condition) = first_false {
        return Outcome::False { condition };
    }
    if errors.is_empty() {
        return Outcome::Match;
    }
    Outcome::Error { message: aggregate(&errors), conditions: failed }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is, several distinct ones as
/// `[a, b]`.
fn aggregate(errors: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for error in errors {
        if !distinct.contains(&error.as_str()) {
            distinct.push(error);
        }
    }
    match distinct.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// An evaluation error in cel-go's words where they are known. Never a value: the `cel`
/// crate's own texts print the operands (`{:?}` of a whole map, e.g. a Secret's `data`), and
/// this text goes into the answer and the log, so those variants are named by type only.
pub(super) fn describe(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::UnsupportedBinaryOperator(..) => "no such overload".to_owned(),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        ExecutionError::FunctionError { function, message } if function.starts_with("@gateway.") => {
            message.clone()
        }
        ExecutionError::UnsupportedTargetType { target } => {
            format!("unsupported target type '{}'", type_name(target))
        }
        ExecutionError::NotSupportedAsMethod { method, target } => {
            format!("method '{method}' not supported on type '{}'", type_name(target))
        }
        ExecutionError::UnsupportedKeyType(key) => format!("unsupported key type '{}'", type_name(key)),
        ExecutionError::UnsupportedMapIndex(index)
        | ExecutionError::UnsupportedListIndex(index)
        | ExecutionError::UnsupportedIndex(index, _) => {
            format!("unsupported index type '{}'", type_name(index))
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(Value::Int(index)) => format!("index '{index}' out of range"),
        ExecutionError::IndexOutOfBounds(_) => "index out of range".to_owned(),
        // The rest carry counts, type names or the expression, never a value.
        other => other.to_string(),
    }
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "bool",
        Value::Null => "null_type",
        Value::Duration(_) => "google.protobuf.Duration",
        Value::Timestamp(_) => "google.protobuf.Timestamp",
        _ => "dyn",
    }
}

pub(super) fn meter<T>(f: impl FnOnce(&mut Meter) -> T) -> T {
    METER.with(|cell| {
        let mut meter = cell.get().unwrap_or(Meter {
            // Evaluated outside `evaluate` (probes in tests).
            expression_left: LIMITS.per_expression,
            webhook_left: LIMITS.per_webhook,
            deadline: None,
            exhausted: None,
        });
        let out = f(&mut meter);
        cell.set(Some(meter));
        out
    })
}

/// Spends `steps`; an error once a budget or the deadline is exhausted (then every later
/// charge fails too, so the evaluation unwinds quickly; `evaluate` reports which).
pub(super) fn charge(steps: u64) -> Result<(), ExecutionError> {
    let exhausted = meter(|m| {
        if m.exhausted.is_none() {
            if steps > m.expression_left {
                m.exhausted = Some(Exhausted::Expression);
            } else if steps > m.webhook_left {
                m.exhausted = Some(Exhausted::Webhook);
            } else if m.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                m.exhausted = Some(Exhausted::Deadline);
            } else {
                m.expression_left -= steps;
                m.webhook_left -= steps;
            }
        }
        m.exhausted
    });
    match exhausted {
        None => Ok(()),
        Some(_) => Err(ExecutionError::function_error(names::STEP, EXPRESSION_BUDGET)),
    }
}

pub(super) fn size_steps(size: usize) -> u64 {
    u64::try_from(size).unwrap_or(u64::MAX) / BYTES_PER_STEP
}

pub(super) fn literal_str(expr: &IdedExpr) -> Result<&str, ExecutionError> {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => Ok(s.inner()),
        _ => Err(ExecutionError::function_error(names::STEP, "internal error: malformed rewrite")),
    }
}

#[cfg(test)]
pub(super) fn resolves(name: &str) -> bool {
    let probe = IdedExpr {
        id: 0,
        expr: Expr::Call(cel::common::ast::CallExpr {
            func_name: name.to_owned(),
            target: None,
            args: Vec::new(),
        }),
    };
    ROOT.with(|root| {
        !matches!(
            catch_unwind(AssertUnwindSafe(|| Value::resolve(&probe, root))),
            Ok(Err(ExecutionError::UndeclaredReference(_)))
        )
    })
}
