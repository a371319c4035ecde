//! CEL for webhook `matchConditions` (docs/semantics.md §4.5) and ValidatingAdmissionPolicies
//! (docs/policies.md), on the CEL engine of `crates/cel-engine` (cel-go's semantics, runtime
//! costs and error texts, with the Kubernetes libraries of the API server's 1.36 environment,
//! over values shared rather than copied). A leaf like `go`: `config` compiles with it,
//! `pipeline` evaluates with it.
//!
//! - [`compile`] checks what the API server checks at load that can be checked without its
//!   type checker (variables, `request` fields, functions and their arity, a result that is
//!   evidently not a bool) and compiles once, when the configuration loads (`check.rs`).
//! - [`evaluate`] runs one webhook's conditions in list order against [`Variables`], with the
//!   API server's outcome rules: a false condition wins over errors, errors without a false
//!   go to the caller's failurePolicy.
//! - [`Variables`] holds `object`, `oldObject` and `request` converted to CEL values; the
//!   pipeline keeps one per review and converts each object version once; evaluations share
//!   them by reference count.
//! - For policies, [`compile_in`] compiles in the environment of one kind of expression
//!   ([`Env`]: `params`, `variables`, `authorizer`, the result type), and [`with_session`]
//!   runs the phases of one evaluation ([`Session`]) over an [`Activation`], `variables`
//!   evaluated lazily and memoized per phase (`session.rs`).
//!
//! Evaluation is bounded in cel-go's cost units with the API server's budgets (1,000,000 per
//! expression, 2,500,000 per webhook's conditions, 10,000,000 per policy phase); the review's
//! deadline is the only time bound.

use std::sync::OnceLock;

pub(crate) mod authorizer;
mod check;
mod convert;
mod runtime;
mod session;
#[cfg(test)]
mod tests;

pub(crate) use cel_engine::check::CheckedType;
pub(crate) use cel_engine::mutation::{MutationError, PatchType};
pub(crate) use check::{Authz, Env, Returns};
pub(crate) use convert::{json_value, request_value, CelValue};
pub(crate) use runtime::{evaluate, Condition, Outcome, Variables, DEADLINE_PASSED};
#[cfg(test)]
pub(crate) use runtime::{evaluate_within, Limits};
pub(crate) use session::{with_session, Activation, Declared, Evaluated, Failure, PhaseLimits, Session};

/// One compiled expression.
#[derive(Debug)]
pub(crate) struct Program {
    program: cel_engine::Program,
    /// The `variables.<name>` it may read, in the order the engine indexes them.
    lazy: Vec<String>,
    /// The variables it reads, so that only those are converted.
    pub(crate) uses: Uses,
    /// `authorizer` is declared but fails at every use (`auditAnnotations`).
    authorizer_fails: bool,
    /// Its type, as the checker found it (a variable's gives `variables.<name>` its type).
    pub(crate) output: cel_engine::check::CheckedType,
}

/// The functions of the API server's environment: the engine's libraries and the authorizer.
fn registry() -> &'static cel_engine::Registry {
    static REGISTRY: OnceLock<cel_engine::Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut registry = cel_engine::library::standard();
        authorizer::register(&mut registry);
        registry
    })
}
/// The functions and types of a mutation's environment: [`registry`]'s, the patch types'
/// literals and `jsonpatch.escapeKey` (k8s.io/apiserver `pkg/admission/plugin/cel/compile.go`).
fn mutation_registry() -> &'static cel_engine::Registry {
    static REGISTRY: OnceLock<cel_engine::Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut registry = cel_engine::library::standard();
        authorizer::register(&mut registry);
        cel_engine::mutation::register(&mut registry);
        registry
    })
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
