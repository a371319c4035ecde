//! Evaluation for admission policies: one activation (`object`, `oldObject`, `request`,
//! `params`, `namespaceObject`, `variables`) in which the phases of one evaluation run, each
//! with its own budget (plugin/cel/activation.go, `ForInput`; policy/validating/validator.go).
//!
//! `variables.x` is evaluated on first reference and memoized until the next phase, as the
//! API server's lazy composition does (plugin/cel/composition.go); an error of a variable
//! surfaces only in the expressions that reference it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use kube_cel::cel;

use cel::common::types::CelNull;
use cel::common::value::Val;
use cel::objects::Value;
use cel::{Context, ExecutionError, FunctionContext, ResolveResult};

use super::convert::CelValue;
use super::names;
use super::runtime::{
    describe, literal_str, meter, type_name, Exhausted, Meter, DEADLINE_PASSED, EXPRESSION_BUDGET, METER,
    ROOT, WEBHOOK_BUDGET,
};
use super::Program;

/// The values of one evaluation's variables; `None` is CEL's `null`.
#[derive(Default)]
pub(crate) struct Activation {
    pub(crate) object: Option<CelValue>,
    pub(crate) old_object: Option<CelValue>,
    pub(crate) request: Option<CelValue>,
    pub(crate) namespace_object: Option<CelValue>,
    pub(crate) params: Option<CelValue>,
    /// The review's deadline, when the caller gave one: the only time bound of its phases.
    pub(crate) deadline: Option<Instant>,
}

/// One entry of `spec.variables`, compiled (`Err`: the compile error).
#[derive(Clone, Debug)]
pub(crate) struct Declared {
    pub(crate) name: String,
    pub(crate) program: Result<Arc<Program>, String>,
}

/// The budgets of one phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PhaseLimits {
    /// `PerCallLimit`, in steps.
    pub(crate) per_expression: u64,
    /// The phase's budget, in steps.
    pub(crate) per_phase: u64,
}

/// What an expression evaluated to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Evaluated {
    Bool(bool),
    String(String),
    Null,
    /// Another type, by cel-go's name.
    Other(&'static str),
}

/// Why an expression has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// An error of this expression: cel-go's text (`no such key: x`, the per-call budget).
    Expression(String),
    /// The phase is over (its budget or the deadline): the whole phase fails with this text.
    Phase(String),
}

/// Variables memoized within a phase, on the evaluating thread.
struct Table {
    declared: Vec<Declared>,
    memo: HashMap<String, Result<Value, String>>,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// Runs `f` with `activation` lent to a session (and given back) and `declared` as the
/// policy's variables.
pub(crate) fn with_session<T>(
    activation: &mut Activation,
    declared: &[Declared],
    f: impl FnOnce(&mut Session<'_>) -> T,
) -> T {
    ROOT.with(|root| {
        let slots: [(&str, &mut Option<CelValue>); 5] = [
            ("object", &mut activation.object),
            ("oldObject", &mut activation.old_object),
            ("request", &mut activation.request),
            ("namespaceObject", &mut activation.namespace_object),
            ("params", &mut activation.params),
        ];
        let mut lent = Vec::new();
        let mut bound: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
        let mut slots = slots;
        for (name, slot) in &mut slots {
            let value: Box<dyn Val> = match slot.take() {
                Some(value) => {
                    lent.push(*name);
                    value.0
                }
                None => Box::new(CelNull),
            };
            bound.insert((*name).to_owned(), value);
        }
        TABLE.with(|t| *t.borrow_mut() = Some(Table { declared: declared.to_vec(), memo: HashMap::new() }));
        let ctx = Context::Child { parent: root, variables: bound, resolver: None };
        let mut session = Session { ctx: &ctx, deadline: activation.deadline };
        let out = f(&mut session);
        TABLE.with(|t| *t.borrow_mut() = None);
        METER.set(None);
        if let Context::Child { variables: mut bound, .. } = ctx {
            for (name, slot) in &mut slots {
                if lent.contains(name) {
                    **slot = bound.remove(*name).map(CelValue);
                }
            }
        }
        out
    })
}

/// An activation in which phases run.
pub(crate) struct Session<'c> {
    ctx: &'c Context<'c>,
    deadline: Option<Instant>,
}

impl Session<'_> {
    /// Starts a phase: a fresh budget, variables evaluated afresh.
    pub(crate) fn begin_phase(&mut self, limits: PhaseLimits) {
        self.forget_variables();
        METER.set(Some(Meter {
            expression_left: limits.per_expression,
            webhook_left: limits.per_phase,
            deadline: self.deadline,
            exhausted: None,
        }));
        PER_EXPRESSION.set(limits.per_expression);
    }

    /// Variables are evaluated afresh from here on, on the same budget (the API server's
    /// messageExpressions get a new activation and the validations' remaining budget).
    pub(crate) fn forget_variables(&mut self) {
        TABLE.with(|t| {
            if let Some(table) = t.borrow_mut().as_mut() {
                table.memo.clear();
            }
        });
    }

    /// Evaluates one expression of the current phase.
    pub(crate) fn eval(&self, program: &Program) -> Result<Evaluated, Failure> {
        let per_expression = PER_EXPRESSION.get();
        meter(|m| {
            m.expression_left = per_expression;
            if m.exhausted == Some(Exhausted::Expression) {
                m.exhausted = None;
            }
        });
        let result = catch_unwind(AssertUnwindSafe(|| Value::resolve(&program.expr, self.ctx)));
        match (meter(|m| m.exhausted), result) {
            (Some(Exhausted::Webhook), _) => Err(Failure::Phase(WEBHOOK_BUDGET.to_owned())),
            (Some(Exhausted::Deadline), _) => {
                Err(Failure::Phase(format!("{DEADLINE_PASSED}, no further validation rules will be run")))
            }
            (Some(Exhausted::Expression), _) => Err(Failure::Expression(EXPRESSION_BUDGET.to_owned())),
            (None, Ok(Ok(value))) => Ok(match value {
                Value::Bool(b) => Evaluated::Bool(b),
                Value::String(s) => Evaluated::String(s.to_string()),
                Value::Null => Evaluated::Null,
                other => Evaluated::Other(type_name(&other)),
            }),
            (None, Ok(Err(error))) => Err(Failure::Expression(describe(&error))),
            (None, Err(_)) => Err(Failure::Expression("internal error: the CEL library panicked".to_owned())),
        }
    }
}

thread_local! {
    static PER_EXPRESSION: std::cell::Cell<u64> = const { std::cell::Cell::new(1_000_000) };
}

/// `@gateway.variable('name')`: the variable's value, evaluated on first reference in the
/// phase.
pub(super) fn variable(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let name = literal_str(&ftx.args[0])?.to_owned();
    let fail = |message: String| ExecutionError::function_error(names::VARIABLE, message);
    let known = TABLE.with(|t| {
        let table = t.borrow();
        let table = table.as_ref()?;
        if let Some(memo) = table.memo.get(&name) {
            return Some(Ok(memo.clone()));
        }
        table.declared.iter().rev().find(|d| d.name == name).map(|d| Err(d.program.clone()))
    });
    let program = match known {
        None => return Err(fail(format!("composited variable \"{name}\" fails to evaluate: not declared"))),
        Some(Ok(memo)) => return memo.map_err(fail),
        Some(Err(Err(compile))) => {
            return Err(fail(format!("composited variable \"{name}\" fails to compile: {compile}")))
        }
        Some(Err(Ok(program))) => program,
    };
    let result = Value::resolve(&program.expr, ftx.ptx);
    if meter(|m| m.exhausted).is_some() {
        // The phase or this expression is over budget: not memoized, the caller reports it.
        return result;
    }
    let result =
        result.map_err(|e| format!("composited variable \"{name}\" fails to evaluate: {}", describe(&e)));
    TABLE.with(|t| {
        if let Some(table) = t.borrow_mut().as_mut() {
            table.memo.insert(name, result.clone());
        }
    });
    result.map_err(fail)
}
