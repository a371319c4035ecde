//! CEL for webhook `matchConditions` (docs/semantics.md §4.5) and ValidatingAdmissionPolicies
//! (docs/policies.md), on the `cel` crate with kube-cel's Kubernetes libraries, with cel-go's
//! error words and never a value in an error. A leaf like `go`: `config` compiles with it,
//! `pipeline` evaluates with it.
//!
//! - [`compile`] parses an expression once, when the configuration loads, checks what can be
//!   checked without cel-go's type checker (variables, functions, `request` fields, a result
//!   that is evidently not a bool) and rewrites the tree so that evaluation is metered and
//!   behaves as cel-go where the `cel` crate does not (see `check.rs`).
//! - [`evaluate`] runs one webhook's conditions in list order against [`Variables`], with the
//!   API server's outcome rules: a false condition wins over errors, errors without a false
//!   go to the caller's failurePolicy.
//! - [`Variables`] holds `object`, `oldObject` and `request` converted to CEL values; the
//!   pipeline keeps one per review and converts each object version once.
//! - For policies, [`compile_in`] compiles in the environment of one kind of expression
//!   ([`Env`]: `params`, `variables`, `authorizer`, the result type), and [`with_session`]
//!   runs the phases of one evaluation ([`Session`]) over an [`Activation`], `variables`
//!   evaluated lazily and memoized per phase (`session.rs`).
//!
//! Evaluation is bounded (`runtime.rs`): every call and every comprehension iteration is a
//! step, large strings and lists cost in proportion to their size, with the API server's
//! budgets (1,000,000 per expression, 2,500,000 per webhook); the review's deadline is the
//! only time bound.

use kube_cel::cel;

pub(crate) mod authorizer;
mod check;
mod convert;
mod functions;
mod names;
mod runtime;
mod session;
#[cfg(test)]
mod tests;
mod types;

pub(crate) use check::{Authz, Env, Returns};
pub(crate) use convert::{json_value, request_value};
pub(crate) use runtime::{evaluate, Condition, Outcome, Variables, DEADLINE_PASSED};
#[cfg(test)]
pub(crate) use runtime::{evaluate_within, Limits};
pub(crate) use session::{with_session, Activation, Declared, Evaluated, Failure, PhaseLimits, Session};

/// One compiled `matchConditions[].expression`.
#[derive(Debug)]
pub(crate) struct Program {
    /// The parsed expression, rewritten for metered evaluation.
    expr: cel::IdedExpr,
    /// The variables it reads, so that only those are converted.
    pub(crate) uses: Uses,
}

/// Which of the request-dependent variables an expression reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Uses {
    pub(crate) object: bool,
    pub(crate) old_object: bool,
    pub(crate) request: bool,
    /// Calls `check` on the authorizer: evaluation may wait for the API server.
    pub(crate) authorizer: bool,
}

impl Uses {
    pub(crate) fn union(self, other: Self) -> Self {
        Self {
            object: self.object || other.object,
            old_object: self.old_object || other.old_object,
            request: self.request || other.request,
            authorizer: self.authorizer || other.authorizer,
        }
    }
}

/// Compiles one expression (already trimmed, as the API server compiles it on validation).
/// `Err` is the detail of the API server's `Invalid value` error: `compilation failed: …` or
/// `must evaluate to bool but got …`.
pub(crate) fn compile(expression: &str) -> Result<Program, String> {
    check::compile(expression)
}

/// Compiles one expression of an admission policy in `env` (its declarations and result type).
/// `Err` as for [`compile`].
pub(crate) fn compile_in(expression: &str, env: &Env) -> Result<Program, String> {
    check::compile_in(expression, env)
}
