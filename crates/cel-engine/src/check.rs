//! The type checker: cel-go's `checker.Check` as kube-apiserver 1.36 runs it when a
//! ValidatingAdmissionPolicy or a webhook's matchConditions are created — names resolved
//! against the declared variables and the function table of every library of the
//! environment ([`decls`]), overloads resolved by cel-go's unification ([`types`]), then the
//! environment's AST validators (`ValidateHomogeneousAggregateLiterals`,
//! `ValidateDurationLiterals`, `ValidateTimestampLiterals`, `ValidateRegexLiterals`, the
//! strings library's `format` validator). Messages are cel-go's texts, each at the node cel-go
//! reports it at and that node's place in the source ([`CheckError`]); [`display_errors`]
//! prints them as cel-go does (`ERROR: <input>:1:3: …`, the line, a caret under the column).
//!
//! What the API server refuses at creation, in its order (k8s `CompileCELExpression`):
//! 1. parse errors;
//! 2. [`check_detailed`] errors (`compilation failed: …`): the macros cel-go expands at
//!    parse time and the parser (`crates/cel-parser`) leaves as calls, the checker, the
//!    validators; each error at its position, in cel-go's report ([`display_errors`]);
//! 3. [`check_result_type`] (`must evaluate to bool but got dyn`) against the expression's
//!    return types: `[bool]` for validations and matchConditions, `[string]` for
//!    messageExpression, `[string, null_type]` for auditAnnotations' valueExpression, none
//!    for variables (Kubernetes lists `AnyType` there);
//! 4. [`Checked::instantiation_error`] (`program instantiation failed: …`).
//!
//! Environments ([`TypeEnv::admission`]): webhook matchConditions have no `params` and an
//! authorizer; a policy's validations, matchConditions, auditAnnotations and variables have
//! `params` when it has a paramKind, the authorizer, and `variables`
//! ([`TypeEnv::composited_variable`] for each earlier variable); its messageExpressions
//! have no authorizer (k8s `validating/plugin.go`). A MutatingAdmissionPolicy's mutations
//! have, besides, the patch types and `jsonpatch.escapeKey` ([`TypeEnv::with_mutation`]) and
//! their own result check ([`crate::mutation::check_mutation`]); its matchConditions and
//! variables do not.

use std::collections::HashMap;

use cel_parser::ast::{Ast, Location, SourceInfo};

mod checker;
pub mod decls;
mod env;
mod format;
mod goregex;
mod macros;
mod program;
mod report;
mod source;
pub mod types;
mod validate;

pub use env::{TypeEnv, VARIABLES_TYPE};
pub use report::display_errors;
pub use types::CheckedType;

use checker::Checker;
use types::substitute;

/// k8s `convertCelTypeToDeclType`: the type `variables.<name>` gets from its expression's
/// output type — primitives, lists and maps (converted recursively) keep theirs, anything
/// else is `dyn`.
pub fn variable_type(output: Option<&CheckedType>) -> CheckedType {
    match output {
        None => CheckedType::Dyn,
        Some(t) => match t {
            CheckedType::Bool
            | CheckedType::Bytes
            | CheckedType::Double
            | CheckedType::Duration
            | CheckedType::Int
            | CheckedType::Null
            | CheckedType::String
            | CheckedType::Timestamp
            | CheckedType::Uint => t.clone(),
            CheckedType::List(e) => CheckedType::list(variable_type(Some(e))),
            CheckedType::Map(k, v) => CheckedType::map(variable_type(Some(k)), variable_type(Some(v))),
            _ => CheckedType::Dyn,
        },
    }
}

/// k8s `CompileCELExpression`'s result-type check: the output type must be exactly one of
/// `expected` (a `dyn` output is refused where `bool` is required). The error is k8s's
/// reason text (`must evaluate to bool but got dyn`).
pub fn check_result_type(output: &CheckedType, expected: &[CheckedType]) -> Result<(), String> {
    if expected.iter().any(|t| output.is_exact(t)) {
        return Ok(());
    }
    Err(if expected.len() == 1 {
        format!("must evaluate to {} but got {}", expected[0].display(), output.display())
    } else {
        let list: Vec<String> = expected.iter().map(CheckedType::display).collect();
        format!("must evaluate to one of [{}] but got {}", list.join(" "), output.display())
    })
}

/// One error, at the node (parser id) cel-go reports it at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    pub id: u64,
    /// Where that node starts in the source (`None` for a node without a source offset,
    /// cel-go's `NoLocation`).
    pub location: Option<Location>,
    pub message: String,
}

impl CheckError {
    /// The error `message` at the node `id` of a tree whose offsets `source_info` holds.
    pub fn at(id: u64, message: String, source_info: &SourceInfo) -> CheckError {
        CheckError { id, location: source_info.start_location(id), message }
    }
}

/// A checked expression.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The expression's type (`ast.OutputType()`).
    pub output: CheckedType,
    /// What `env.Program` would refuse after a successful check (a type conversion of a
    /// constant that fails, `int('abc')`; a constant pattern of `matches`/`find`/`findAll`
    /// that does not compile), as Kubernetes reports it: `program instantiation failed: …`.
    pub instantiation_error: Option<String>,
}

/// Checks `expr` as the API server does at creation; `Err` holds cel-go's messages (macro
/// expansion errors, then checker errors, or the validators' errors), in report order.
pub fn check(ast: &Ast, env: &TypeEnv) -> Result<CheckedType, Vec<String>> {
    check_detailed(ast, env).map(|c| c.output).map_err(|errors| {
        let total = errors.len();
        let mut messages: Vec<String> = errors.into_iter().take(MAX_ERRORS).map(|e| e.message).collect();
        if total > MAX_ERRORS {
            messages.push(format!("{} more errors were truncated", total - MAX_ERRORS));
        }
        messages
    })
}

/// cel-go's `common.Errors` keeps the first 100 errors and reports how many it dropped.
pub(crate) const MAX_ERRORS: usize = 100;

/// Parses `source` as the API server's environment does: [`crate::parse`], and what only the
/// source tells — a two-argument `existsOne` is no macro there (the parser expands it as
/// `exists_one`), so it is turned back into the call of an undeclared function, as upstream
/// checks it. `Err` holds the parse error's text.
pub fn parse_source(source: &str) -> Result<Ast, String> {
    Ok(source::restore_exists_one_calls(&crate::parse(source)?))
}

/// [`parse_source`] and [`check_detailed`]. `Err` holds the parse error's text, or cel-go's
/// report of the errors ([`display_errors`]).
pub fn check_source(source: &str, env: &TypeEnv) -> Result<Checked, String> {
    check_detailed(&parse_source(source)?, env).map_err(|errors| display_errors(&errors, source))
}

/// [`check`] with the ids of the errors and the program-instantiation outcome.
pub fn check_detailed(ast: &Ast, env: &TypeEnv) -> Result<Checked, Vec<CheckError>> {
    let mut source_info = ast.source_info.clone();
    let located = |errors: Vec<(u64, String)>, source_info: &SourceInfo| {
        errors.into_iter().map(|(id, message)| CheckError::at(id, message, source_info)).collect::<Vec<_>>()
    };
    let expanded = macros::expand(&ast.expr, &mut source_info).map_err(|e| located(e, &source_info))?;
    let mut checker = Checker::new(env);
    checker.check(&expanded);
    if !checker.errors.is_empty() {
        return Err(located(checker.errors, &source_info));
    }
    let mapping = std::mem::take(&mut checker.mapping);
    let types: HashMap<u64, CheckedType> =
        checker.types.iter().map(|(id, t)| (*id, substitute(&mapping, t, true))).collect();
    let errors = validate::validate(&expanded, &types);
    if !errors.is_empty() {
        return Err(located(errors, &source_info));
    }
    let output = types.get(&expanded.id).cloned().unwrap_or(CheckedType::Dyn);
    Ok(Checked {
        output,
        instantiation_error: program::instantiation_error(
            &expanded,
            &checker.undefined_types,
            &checker.type_names,
        ),
    })
}

#[cfg(test)]
mod tests;
