//! Evaluation: one webhook's conditions, metered, with the API server's outcome rules
//! (`matchconditions/matcher.go`, `plugin/cel/activation.go`).
//!
//! The bound. cel-go charges a cost per operation against 1,000,000 per expression and
//! 2,500,000 per webhook (`apis/cel/config.go`); the `cel` crate has no cost model, so the
//! rewritten tree (check.rs) charges here: one step per call and per comprehension iteration,
//! one per [`BYTES_PER_STEP`] bytes (or elements) of strings and lists built by calls that grow
//! them, and — before the call — the size of what `replace`, `lists.range`, `distinct` and the
//! `sets` functions would build or compare. The same budgets apply, in steps, with the API
//! server's error texts. On top, a webhook's conditions together may run for [`DEADLINE`] at
//! most: a check made at every step, for what steps underestimate.

use kube_cel::cel;
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelNull, CelOptional, CelString, MAP_TYPE};
use cel::common::value::Val;
use cel::objects::{OptionalValue, Value};
use cel::{Context, ExecutionError, FunctionContext, ResolveResult};
use kube_cel::KubeCelExt;

use super::convert::CelValue;
use super::Program;

/// Wall-clock limit for one webhook's conditions together.
pub(crate) const DEADLINE: Duration = Duration::from_millis(100);

/// The bounds of one webhook's evaluation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `PerCallLimit`, in steps.
    pub(crate) per_expression: u64,
    /// `RuntimeCELCostBudgetMatchConditions`, in steps.
    pub(crate) per_webhook: u64,
    pub(crate) deadline: Duration,
}

pub(crate) const LIMITS: Limits =
    Limits { per_expression: 1_000_000, per_webhook: 2_500_000, deadline: DEADLINE };
/// Size charged as one step (cel-go charges string work at 0.1 per byte).
const BYTES_PER_STEP: u64 = 10;

/// cel-go's text when one expression goes over `PerCallLimit` (an error of that condition).
const EXPRESSION_BUDGET: &str = "operation cancelled: actual cost limit exceeded";
/// activation.go's text when the webhook's budget is spent (an error of the whole evaluation).
const WEBHOOK_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Names of the functions the rewrite inserts (not spellable in CEL: `@` starts no
/// identifier), and of every function the environment has.
pub(super) mod names {
    pub(crate) const STEP: &str = "@gateway.step";
    pub(crate) const SELECT: &str = "@gateway.select";
    pub(crate) const MAP: &str = "@gateway.map";
    pub(crate) const SIZED: &str = "@gateway.sized";
    pub(crate) const CHARGED: &str = "@gateway.charged";
    pub(crate) const AUTHORIZER: &str = "@gateway.authorizer";
    pub(crate) const QUANTITY: &str = "@gateway.quantity";
    pub(crate) const IS_QUANTITY: &str = "@gateway.isQuantity";

    /// The `cel` crate's built-ins and kube-cel's functions for the features enabled in
    /// Cargo.toml (a test checks each resolves). A function missing here is refused at load.
    const FUNCTIONS: &[&str] = &[
        // cel
        "contains",
        "size",
        "max",
        "min",
        "startsWith",
        "endsWith",
        "string",
        "bytes",
        "double",
        "int",
        "uint",
        "optional.none",
        "optional.of",
        "optional.ofNonZeroValue",
        "value",
        "hasValue",
        "or",
        "orValue",
        "matches",
        "duration",
        "timestamp",
        "getFullYear",
        "getMonth",
        "getDayOfYear",
        "getDayOfMonth",
        "getDate",
        "getDayOfWeek",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        // kube-cel: strings, format
        "charAt",
        "indexOf",
        "lastIndexOf",
        "lowerAscii",
        "upperAscii",
        "replace",
        "split",
        "substring",
        "trim",
        "join",
        "strings.quote",
        "reverse",
        "format",
        // lists, sets
        "isSorted",
        "sum",
        "slice",
        "sort",
        "flatten",
        "distinct",
        "first",
        "last",
        "lists.range",
        "sets.contains",
        "sets.equivalent",
        "sets.intersects",
        // regex
        "find",
        "findAll",
        // ip, cidr
        "ip",
        "isIP",
        "ip.isCanonical",
        "family",
        "isLoopback",
        "isUnspecified",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "isIPv4",
        "isIPv6",
        "cidr",
        "isCIDR",
        "containsIP",
        "containsCIDR",
        "prefixLength",
        "masked",
        "isCIDRv4",
        "isCIDRv6",
        // quantity, semver (with the comparisons they share)
        "quantity",
        "isQuantity",
        "isInteger",
        "asInteger",
        "asApproximateFloat",
        "sign",
        "add",
        "sub",
        "isGreaterThan",
        "isLessThan",
        "compareTo",
        "semver",
        "isSemver",
        "major",
        "minor",
        "patch",
        // named formats
        "format.dns1123Label",
        "format.dns1123Subdomain",
        "format.dns1035Label",
        "format.dns1035LabelPrefix",
        "format.dns1123LabelPrefix",
        "format.dns1123SubdomainPrefix",
        "format.qualifiedName",
        "format.labelValue",
        "format.uri",
        "format.uuid",
        "format.byte",
        "format.date",
        "format.datetime",
        "format.named",
        "validate",
    ];

    pub(crate) fn is_function(name: &str) -> bool {
        FUNCTIONS.contains(&name)
    }

    #[cfg(test)]
    pub(crate) fn all() -> &'static [&'static str] {
        FUNCTIONS
    }
}

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
enum Exhausted {
    Expression,
    Webhook,
    Deadline,
}

#[derive(Clone, Copy)]
struct Meter {
    expression_left: u64,
    webhook_left: u64,
    deadline: Instant,
    exhausted: Option<Exhausted>,
}

thread_local! {
    /// The environment: built-ins, kube-cel's libraries, the rewrite's functions. Built once
    /// per thread (a `cel::Context` is not `Sync`); each evaluation adds a child scope.
    static ROOT: Context<'static> = root();
    /// The meter of the evaluation running on this thread.
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
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
    ctx.add_function(names::QUANTITY, quantity);
    ctx.add_function(names::IS_QUANTITY, is_quantity);
    ctx
}

/// Evaluates every condition in list order against `variables` (lent to the evaluation and
/// given back), and decides as the API server's matcher: a false condition wins, then errors.
pub(crate) fn evaluate(conditions: &[Condition<'_>], variables: &mut Variables) -> Outcome {
    evaluate_within(conditions, variables, LIMITS)
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
        deadline: Instant::now() + limits.deadline,
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
                whole = Some(format!(
                    "match conditions ran longer than admission-gateway's limit of {} ms, no further conditions will be run",
                    limits.deadline.as_millis()
                ));
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

/// An evaluation error in cel-go's words where they are known.
fn describe(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload => "no such overload".to_owned(),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        ExecutionError::FunctionError { function, message } if function.starts_with("@gateway.") => {
            message.clone()
        }
        other => other.to_string(),
    }
}

fn type_name(value: &Value) -> &'static str {
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

fn meter<T>(f: impl FnOnce(&mut Meter) -> T) -> T {
    METER.with(|cell| {
        let mut meter = cell.get().unwrap_or(Meter {
            // Evaluated outside `evaluate` (probes in tests).
            expression_left: LIMITS.per_expression,
            webhook_left: LIMITS.per_webhook,
            deadline: Instant::now() + LIMITS.deadline,
            exhausted: None,
        });
        let out = f(&mut meter);
        cell.set(Some(meter));
        out
    })
}

/// Spends `steps`; an error once a budget or the deadline is exhausted (then every later
/// charge fails too, so the evaluation unwinds quickly; `evaluate` reports which).
fn charge(steps: u64) -> Result<(), ExecutionError> {
    let exhausted = meter(|m| {
        if m.exhausted.is_none() {
            if steps > m.expression_left {
                m.exhausted = Some(Exhausted::Expression);
            } else if steps > m.webhook_left {
                m.exhausted = Some(Exhausted::Webhook);
            } else if Instant::now() >= m.deadline {
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

fn size_steps(size: usize) -> u64 {
    u64::try_from(size).unwrap_or(u64::MAX) / BYTES_PER_STEP
}

fn literal_str(expr: &IdedExpr) -> Result<&str, ExecutionError> {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => Ok(s.inner()),
        _ => Err(ExecutionError::function_error(names::STEP, "internal error: malformed rewrite")),
    }
}

// ---------------------------------------------------------------------------------------------
// The rewrite's functions.

/// `@step()`: one step.
fn step() -> ResolveResult {
    charge(1)?;
    Ok(Value::Bool(true))
}

/// `@select(operand, 'field', test)`: `operand.field`, or `has(operand.field)` when `test`.
/// Only maps have fields: selecting from null (an absent `object`) or a scalar is an error,
/// as in cel-go.
/// `@select(operand, 'field', test, optional)` is `operand.?field`, absent when the field
/// is; a selection from an optional value is optional too.
fn select(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let flag = |i: usize| {
        ftx.args
            .get(i)
            .is_some_and(|a| matches!(&a.expr, Expr::Literal(LiteralValue::Boolean(b)) if *b.inner()))
    };
    let (test, mut optional) = (flag(2), flag(3));
    let resolved = Value::resolve_val(&ftx.args[0], ftx.ptx)?;
    let field = literal_str(&ftx.args[1])?;
    let operand: Cow<'_, dyn Val> = match resolved.downcast_ref::<CelOptional>() {
        Some(inner) => match inner.inner() {
            None => return Ok(Value::Opaque(Arc::new(OptionalValue::none()))),
            Some(value) => {
                optional = true;
                Cow::Owned(value.clone_as_boxed())
            }
        },
        None => resolved,
    };
    if operand.get_type() != MAP_TYPE {
        return Err(ExecutionError::no_such_key(field));
    }
    let key = CelString::from(field);
    let container = operand.as_container().ok_or(ExecutionError::NoSuchOverload)?;
    let present = container.contains(&key)?;
    if test {
        return Ok(Value::Bool(present));
    }
    if optional && !present {
        return Ok(Value::Opaque(Arc::new(OptionalValue::none())));
    }
    let indexer = operand.as_indexer().ok_or(ExecutionError::NoSuchOverload)?;
    let value = Value::try_from(indexer.get(&key)?.as_ref())?;
    Ok(if optional { Value::Opaque(Arc::new(OptionalValue::of(value))) } else { value })
}

/// `@map(range, 'x', filter, element)`: `range.map(x, filter, element)` in one pass.
fn map(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let range = Value::resolve_val(&ftx.args[0], ftx.ptx)?;
    let var = literal_str(&ftx.args[1])?;
    let iterable = range.as_iterable().ok_or(ExecutionError::NoSuchOverload)?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        charge(1)?;
        let mut variables: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
        variables.insert(var.to_owned(), item.clone_as_boxed());
        let scope = Context::Child { parent: ftx.ptx, variables, resolver: None };
        match Value::resolve(&ftx.args[2], &scope)? {
            Value::Bool(true) => out.push(Value::resolve(&ftx.args[3], &scope)?),
            Value::Bool(false) => {}
            _ => return Err(ExecutionError::NoSuchOverload),
        }
    }
    Ok(Value::List(Arc::new(out)))
}

fn value_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        _ => 0,
    }
}

/// `@sized(call)`: the call, charged by the size of what it built.
fn sized(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let value = Value::resolve(&ftx.args[0], ftx.ptx)?;
    charge(size_steps(value_size(&value)))?;
    Ok(value)
}

fn val_len(value: &dyn Val) -> usize {
    match Value::try_from(value) {
        Ok(v) => value_size(&v),
        Err(_) => 0,
    }
}

fn val_str(value: &dyn Val) -> Option<&str> {
    value.downcast_ref::<CelString>().map(CelString::inner)
}

/// `@charged('qualified name', 'function', has_target, target?, args…)`: evaluates the
/// receiver and arguments once, charges what the call is about to do, then makes the call.
fn charged(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let qualified = literal_str(&ftx.args[0])?;
    let function = literal_str(&ftx.args[1])?;
    let has_target = matches!(&ftx.args[2].expr, Expr::Literal(LiteralValue::Boolean(b)) if *b.inner());
    let (target, args) = if has_target {
        (Some(Value::resolve_val(&ftx.args[3], ftx.ptx)?), &ftx.args[4..])
    } else {
        (None, &ftx.args[3..])
    };
    let args: Vec<Cow<'_, dyn Val>> =
        args.iter().map(|a| Value::resolve_val(a, ftx.ptx)).collect::<Result<_, _>>()?;
    let len = |v: Option<&Cow<'_, dyn Val>>| v.map_or(0, |v| val_len(v.as_ref()));
    let steps = match qualified {
        "replace" => {
            let text = target.as_ref().and_then(|t| val_str(t.as_ref())).unwrap_or_default();
            let pattern = args.first().and_then(|p| val_str(p.as_ref())).unwrap_or_default();
            let with = args.get(1).and_then(|w| val_str(w.as_ref())).unwrap_or_default();
            let matches =
                if pattern.is_empty() { text.chars().count() + 1 } else { text.matches(pattern).count() };
            size_steps(text.len() + matches.saturating_mul(with.len()))
        }
        "lists.range" => match args.first().map(|a| Value::try_from(a.as_ref())) {
            Some(Ok(Value::Int(n))) => u64::try_from(n).unwrap_or(0),
            _ => 0,
        },
        "distinct" => {
            let n = u64::try_from(len(target.as_ref())).unwrap_or(u64::MAX);
            n.saturating_mul(n) / BYTES_PER_STEP
        }
        _ => {
            let (a, b) = (len(args.first()), len(args.get(1)));
            u64::try_from(a.saturating_mul(b)).unwrap_or(u64::MAX) / BYTES_PER_STEP
        }
    };
    charge(steps)?;
    // The call itself, on the values already computed.
    let mut variables: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
    let ident = |name: &str| IdedExpr { id: 0, expr: Expr::Ident(name.to_owned()) };
    let call_target = match (&target, qualified.split_once('.')) {
        (Some(t), _) => {
            variables.insert("@target".into(), t.as_ref().clone_as_boxed());
            Some(Box::new(ident("@target")))
        }
        (None, Some((prefix, _))) => Some(Box::new(ident(prefix))),
        (None, None) => None,
    };
    let mut call_args = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let name = format!("@arg{i}");
        variables.insert(name.clone(), arg.as_ref().clone_as_boxed());
        call_args.push(ident(&name));
    }
    let call = IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr { func_name: function.to_owned(), target: call_target, args: call_args }),
    };
    let scope = Context::Child { parent: ftx.ptx, variables, resolver: None };
    Value::resolve(&call, &scope)
}

/// `authorizer`: the gateway has no cluster to ask.
fn authorizer() -> ResolveResult {
    Err(ExecutionError::function_error(
        names::AUTHORIZER,
        "authorizer is not available: admission-gateway has no cluster to send SubjectAccessReviews to",
    ))
}

/// Go's `resource.ParseQuantity` takes no surrounding whitespace (kube-cel trims it).
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";

/// `@quantity(s)` around `quantity(s)`: `s`, or Go's error.
fn quantity(s: Arc<String>) -> ResolveResult {
    if s.starts_with(char::is_whitespace) {
        return Err(ExecutionError::function_error(names::QUANTITY, QUANTITY_FORMAT));
    }
    if s.ends_with(char::is_whitespace) {
        return Err(ExecutionError::function_error(names::QUANTITY, QUANTITY_SUFFIX));
    }
    Ok(Value::String(s))
}

/// `@isQuantity(s)` around `isQuantity(s)`: `s`, or an empty string (not a quantity).
fn is_quantity(s: Arc<String>) -> ResolveResult {
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Ok(Value::String(Arc::new(String::new())));
    }
    Ok(Value::String(s))
}

#[cfg(test)]
pub(super) fn resolves(name: &str) -> bool {
    let probe = IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr { func_name: name.to_owned(), target: None, args: Vec::new() }),
    };
    ROOT.with(|root| {
        !matches!(
            catch_unwind(AssertUnwindSafe(|| Value::resolve(&probe, root))),
            Ok(Err(ExecutionError::UndeclaredReference(_)))
        )
    })
}
