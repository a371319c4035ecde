//! Evaluation: one webhook's conditions with the API server's outcome rules and budgets
//! (`matchconditions/matcher.go`, `plugin/cel/activation.go`): each expression limited to
//! `PerCallLimit` (1,000,000) in cel-go's cost units, the webhook's conditions together to
//! 2,500,000 (`apis/cel/config.go`), the cost of each expression subtracted after it ran. No
//! wall-clock limit decides: the only time bound is the review's own deadline (the caller's
//! `?timeout=`, less the gateway's margin), checked as cel-go checks its interrupts, so an
//! evaluation that cannot finish in time fails under the webhook's failurePolicy, as a call
//! that timed out does.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use cel_engine::{ErrorKind, Meter, Value};

use super::convert::CelValue;
use super::Program;

/// The bounds of one webhook's evaluation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `PerCallLimit`, in cel-go's cost units.
    pub(crate) per_expression: u64,
    /// `RuntimeCELCostBudgetMatchConditions`, in cel-go's cost units.
    pub(crate) per_webhook: u64,
    /// The review's deadline, when the caller gave one.
    pub(crate) deadline: Option<Instant>,
}

pub(crate) const LIMITS: Limits =
    Limits { per_expression: 1_000_000, per_webhook: 2_500_000, deadline: None };
/// The text of an evaluation stopped by the review's deadline.
pub(crate) const DEADLINE_PASSED: &str =
    "evaluation cancelled: the review's deadline passed before it finished";
/// activation.go's text when the budget is spent (an error of the whole evaluation).
pub(super) const BUDGET_SPENT: &str =
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

/// The request-dependent variables, converted once per review and shared with each evaluation.
#[derive(Clone, Default)]
pub(crate) struct Variables {
    pub(crate) object: Option<CelValue>,
    pub(crate) old_object: Option<CelValue>,
    pub(crate) request: Option<CelValue>,
}

/// What one expression's run came to.
pub(super) enum Ran {
    Value(Value),
    /// An error of the expression (cel-go's text).
    Error(String),
    /// The review's deadline passed: the evaluation as a whole is over.
    Cancelled,
}

/// Runs `program` with `meter`, a panic in the engine an error of the expression (never an
/// answer by default).
pub(super) fn run(
    program: &Program,
    activation: &dyn cel_engine::Activation,
    host: &dyn cel_engine::Host,
    meter: &mut Meter,
) -> Ran {
    match catch_unwind(AssertUnwindSafe(|| program.program.evaluate(activation, host, meter))) {
        Ok(Ok(value)) => Ran::Value(value),
        Ok(Err(error)) if error.kind == ErrorKind::Cancelled => Ran::Cancelled,
        Ok(Err(error)) => Ran::Error(error.message),
        Err(_) => Ran::Error("internal error: the CEL engine panicked".to_owned()),
    }
}

/// Evaluates every condition in list order against `variables`, and decides as the API
/// server's matcher: a false condition wins, then errors. `deadline` is the review's.
pub(crate) fn evaluate(
    conditions: &[Condition<'_>],
    variables: &Variables,
    deadline: Option<Instant>,
) -> Outcome {
    evaluate_within(conditions, variables, Limits { deadline, ..LIMITS })
}

pub(crate) fn evaluate_within(
    conditions: &[Condition<'_>],
    variables: &Variables,
    limits: Limits,
) -> Outcome {
    let value = |v: &Option<CelValue>| v.as_ref().map_or(Value::Null, |v| v.0.clone());
    let authorizer = super::authorizer::value(true);
    // In `check::SLOTS` order; namespaceObject is always null for webhooks (§4.5), params
    // undeclared.
    let values = vec![
        value(&variables.object),
        value(&variables.old_object),
        value(&variables.request),
        Value::Null,
        authorizer,
        Value::Null,
    ];
    let mut errors: Vec<String> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut first_false = None;
    let mut remaining = limits.per_webhook;
    // Every condition is evaluated (activation.go evaluates them all before the matcher looks
    // for a false one): a later condition that spends the webhook's budget fails the whole.
    for condition in conditions {
        let mut meter =
            Meter::new(cel_engine::Limits { cost: limits.per_expression, deadline: limits.deadline });
        let ran = run(condition.program, &values, &cel_engine::NoHost, &mut meter);
        if meter.cost > remaining {
            return Outcome::Error { message: BUDGET_SPENT.to_owned(), conditions: Vec::new() };
        }
        remaining -= meter.cost;
        let error = match ran {
            Ran::Cancelled => {
                return Outcome::Error {
                    message: format!("{DEADLINE_PASSED}, no further conditions will be run"),
                    conditions: Vec::new(),
                }
            }
            Ran::Value(Value::Bool(true)) => continue,
            Ran::Value(Value::Bool(false)) => {
                first_false.get_or_insert_with(|| condition.name.to_owned());
                continue;
            }
            Ran::Value(other) => format!("must evaluate to bool but got {}", other.type_name()),
            Ran::Error(error) => error,
        };
        errors.push(format!("expression '{}' resulted in error: {error}", condition.expression));
        failed.push(condition.name.to_owned());
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
