//! Evaluation for admission policies: one activation (`object`, `oldObject`, `request`,
//! `params`, `namespaceObject`, `variables`) in which the phases of one evaluation run, each
//! with its own budget (plugin/cel/activation.go, `ForInput`; policy/validating/validator.go).
//!
//! `variables.x` is evaluated on first reference and memoized until the next phase, as the
//! API server's lazy composition does (plugin/cel/composition.go): with a cost limit of its
//! own, its cost charged to the phase's budget after the expression that first read it (not
//! to that expression's own limit); an error of a variable surfaces only in the expressions
//! that reference it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use cel_engine::{Error, Host, Meter, Value};

use super::check::AUTHORIZER_SLOT;
use super::convert::CelValue;
use super::runtime::{run, Ran, BUDGET_SPENT, DEADLINE_PASSED};
use super::Program;

/// The values of one evaluation's variables; `None` is CEL's `null`.
#[derive(Clone, Default)]
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
    /// `PerCallLimit`, in cel-go's cost units.
    pub(crate) per_expression: u64,
    /// The phase's budget, in cel-go's cost units.
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
    /// An error of this expression: cel-go's text (`no such key: x`, the per-call limit).
    Expression(String),
    /// The phase is over (its budget or the deadline): the whole phase fails with this text.
    Phase(String),
}

/// Runs `f` with a session over `activation` and `declared` as the policy's variables.
pub(crate) fn with_session<T>(
    activation: &mut Activation,
    declared: &[Declared],
    f: impl FnOnce(&mut Session<'_>) -> T,
) -> T {
    let value = |v: &Option<CelValue>| v.as_ref().map_or(Value::Null, |v| v.0.clone());
    // In `check::POLICY` order.
    let values = vec![
        value(&activation.object),
        value(&activation.old_object),
        value(&activation.request),
        value(&activation.namespace_object),
        super::authorizer::value(true),
        value(&activation.params),
    ];
    let mut session = Session {
        values,
        declared,
        memo: RefCell::new(HashMap::new()),
        composition: Cell::new(0),
        limits: PhaseLimits { per_expression: 1_000_000, per_phase: 10_000_000 },
        remaining: 10_000_000,
        deadline: activation.deadline,
    };
    f(&mut session)
}

/// An activation in which phases run.
pub(crate) struct Session<'d> {
    values: Vec<Value>,
    declared: &'d [Declared],
    /// Variables evaluated in this phase, by name.
    memo: RefCell<HashMap<String, Result<Value, String>>>,
    /// The cost of the variables evaluated since the last expression ended.
    composition: Cell<u64>,
    limits: PhaseLimits,
    /// What is left of the phase's budget.
    remaining: u64,
    deadline: Option<Instant>,
}

/// One expression's view of the session: its own lazy variables' names, and whether its
/// `authorizer` fails at every use.
struct Scope<'s, 'd> {
    session: &'s Session<'d>,
    program: &'s Program,
}

impl Session<'_> {
    /// Starts a phase: a fresh budget, variables evaluated afresh.
    pub(crate) fn begin_phase(&mut self, limits: PhaseLimits) {
        self.forget_variables();
        self.limits = limits;
        self.remaining = limits.per_phase;
    }

    /// Variables are evaluated afresh from here on, on the same budget (the API server's
    /// messageExpressions get a new activation and the validations' remaining budget).
    pub(crate) fn forget_variables(&mut self) {
        self.memo.borrow_mut().clear();
    }

    /// Evaluates one expression of the current phase.
    pub(crate) fn eval(&mut self, program: &Program) -> Result<Evaluated, Failure> {
        Ok(match self.eval_value(program)? {
            Value::Bool(b) => Evaluated::Bool(b),
            Value::String(s) => Evaluated::String(s.to_string()),
            Value::Null => Evaluated::Null,
            other => Evaluated::Other(other.type_name()),
        })
    }

    /// Evaluates a mutation of the current phase and turns its value into the JSON its
    /// patcher applies: a JSON Patch's operations or an apply configuration's object
    /// (`cel_engine::mutation`); `Ok(Err(_))` when the value cannot be made one.
    pub(crate) fn eval_mutation(
        &mut self,
        program: &Program,
        patch_type: super::PatchType,
    ) -> Result<Result<serde_json::Value, super::MutationError>, Failure> {
        let value = self.eval_value(program)?;
        Ok(match patch_type {
            super::PatchType::JsonPatch => cel_engine::mutation::json_patch(&value),
            super::PatchType::ApplyConfiguration => cel_engine::mutation::apply_configuration(&value),
        })
    }

    fn eval_value(&mut self, program: &Program) -> Result<Value, Failure> {
        let mut meter = self.meter();
        let scope = Scope { session: self, program };
        let ran = run(program, &scope, &cel_engine::NoHost, &mut meter);
        let composition = self.composition.replace(0);
        if composition > self.remaining {
            return Err(Failure::Phase(BUDGET_SPENT.to_owned()));
        }
        self.remaining -= composition;
        if meter.cost > self.remaining {
            return Err(Failure::Phase(BUDGET_SPENT.to_owned()));
        }
        self.remaining -= meter.cost;
        match ran {
            Ran::Cancelled => {
                Err(Failure::Phase(format!("{DEADLINE_PASSED}, no further validation rules will be run")))
            }
            Ran::Error(error) => Err(Failure::Expression(error)),
            Ran::Value(value) => Ok(value),
        }
    }

    fn meter(&self) -> Meter {
        Meter::new(cel_engine::Limits { cost: self.limits.per_expression, deadline: self.deadline })
    }

    /// `variables.<name>`: memoized, else evaluated now on a meter of its own.
    fn variable(&self, name: &str) -> cel_engine::Result<Value> {
        if let Some(memo) = self.memo.borrow().get(name) {
            return memo.clone().map_err(Error::new);
        }
        let Some(declared) = self.declared.iter().rev().find(|d| d.name == name) else {
            return Err(Error::new(format!(
                "composited variable \"{name}\" fails to evaluate: not declared"
            )));
        };
        let program = match &declared.program {
            Ok(program) => Arc::clone(program),
            Err(compile) => {
                return Err(Error::new(format!("composited variable \"{name}\" fails to compile: {compile}")))
            }
        };
        let mut meter = self.meter();
        let scope = Scope { session: self, program: &program };
        let ran = run(&program, &scope, &cel_engine::NoHost, &mut meter);
        self.composition.set(self.composition.get().saturating_add(meter.cost));
        let result = match ran {
            Ran::Cancelled => return Err(Error::cancelled()),
            Ran::Value(value) => Ok(value),
            Ran::Error(error) => Err(format!("composited variable \"{name}\" fails to evaluate: {error}")),
        };
        self.memo.borrow_mut().insert(name.to_owned(), result.clone());
        result.map_err(Error::new)
    }
}

impl cel_engine::Activation for Scope<'_, '_> {
    fn var(&self, index: usize) -> Value {
        if index == AUTHORIZER_SLOT && self.program.authorizer_fails {
            return super::authorizer::value(false);
        }
        self.session.values.get(index).cloned().unwrap_or(Value::Null)
    }

    fn lazy(&self, index: usize, _meter: &mut Meter, _host: &dyn Host) -> cel_engine::Result<Value> {
        match self.program.lazy.get(index) {
            Some(name) => self.session.variable(name),
            None => Err(Error::new("no such variable")),
        }
    }
}
