//! The functions the rewrite (check.rs) inserts: metering, cel-go's field selection, a linear
//! `map`/`filter`, size charges, the missing authorizer and Go's quantity whitespace rule.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use kube_cel::cel;

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelOptional, CelString, MAP_TYPE};
use cel::common::value::Val;
use cel::objects::{OptionalValue, Value};
use cel::{Context, ExecutionError, FunctionContext, ResolveResult};

use super::names;
use super::runtime::{charge, literal_str, size_steps, BYTES_PER_STEP};

/// `@guard(x)`: `true` once `x` evaluates, else `x`'s own error.
pub(super) fn guard(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    Value::resolve(&ftx.args[0], ftx.ptx)?;
    Ok(Value::Bool(true))
}

/// `@step()`: one step.
pub(super) fn step() -> ResolveResult {
    charge(1)?;
    Ok(Value::Bool(true))
}

/// `@select(operand, 'field', test)`: `operand.field`, or `has(operand.field)` when `test`.
/// Only maps have fields: selecting from null (an absent `object`) or a scalar is an error,
/// as in cel-go.
/// `@select(operand, 'field', test, optional)` is `operand.?field`, absent when the field
/// is; a selection from an optional value is optional too.
pub(super) fn select(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
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
pub(super) fn map(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
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
pub(super) fn sized(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
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
pub(super) fn charged(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
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

/// `authorizer` used other than as the receiver of the authz library's methods.
pub(super) fn authorizer() -> ResolveResult {
    Err(ExecutionError::function_error(
        names::AUTHORIZER,
        "authorizer is not available: admission-gateway has no cluster to send SubjectAccessReviews to (run it with --kube)",
    ))
}

/// Go's `resource.ParseQuantity` takes no surrounding whitespace (kube-cel trims it).
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";

/// `@quantity(s)` around `quantity(s)`: `s`, or Go's error.
pub(super) fn quantity(s: Arc<String>) -> ResolveResult {
    if s.starts_with(char::is_whitespace) {
        return Err(ExecutionError::function_error(names::QUANTITY, QUANTITY_FORMAT));
    }
    if s.ends_with(char::is_whitespace) {
        return Err(ExecutionError::function_error(names::QUANTITY, QUANTITY_SUFFIX));
    }
    Ok(Value::String(s))
}

/// `@isQuantity(s)` around `isQuantity(s)`: `s`, or an empty string (not a quantity).
pub(super) fn is_quantity(s: Arc<String>) -> ResolveResult {
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Ok(Value::String(Arc::new(String::new())));
    }
    Ok(Value::String(s))
}
