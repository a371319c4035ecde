//! CEL as kube-apiserver 1.36 evaluates it (cel-go with the Kubernetes libraries), for
//! admission-gateway's matchConditions and admission policies.
//!
//! - Values are shared, not copied ([`value`]): an object converted once is read by every
//!   expression and every comprehension iteration through reference counts.
//! - Evaluation charges cel-go's runtime cost ([`eval`]): the same units, the same per-call
//!   function costs, so an expression is cut where the API server cuts it. A caller's deadline
//!   reaches the evaluation as a cancellation flag, checked as cel-go checks its interrupts.
//! - The parser is the `cel` crate's (`crates/cel-parser`: its ANTLR grammar and macro
//!   expansion, with each node's source offset for the checker's error positions); compilation
//!   ([`compile`]) resolves names and functions once, and evaluation is this crate's own.
//! - A MutatingAdmissionPolicy's mutations ([`mutation`], opt-in per environment): the
//!   `JSONPatch` and `Object…` types and `jsonpatch.escapeKey`, the result-type check of a
//!   mutation, and the conversion of its value to the JSON Patch or the object upstream's
//!   patchers apply.

pub mod check;
pub mod compile;
pub mod error;
pub mod eval;
pub mod func;
mod go;
pub mod library;
pub mod mutation;
pub mod value;

pub use compile::{compile, Declarations, Program};
pub use error::{Error, ErrorKind, Result};
pub use eval::{Activation, Limits, Meter};
pub use func::{Cost, Ctx, Host, NoHost, Registry, Style};
pub use value::{Key, Map, Object, Type, Value};

/// The parser's syntax tree (`crates/cel-parser`, the `cel` crate's), for callers that
/// inspect an expression.
pub use cel_parser::ast;

/// Parses `source` (optional syntax on, as the API server's environment): the tree with the
/// source offset of each node, or the parser's errors reported as cel-go reports them (the
/// checker's report, `check::display_errors`).
pub fn parse(source: &str) -> std::result::Result<ast::Ast, String> {
    cel_parser::Parser::new().enable_optional_syntax(true).parse(source).map_err(|errors| {
        let errors: Vec<check::CheckError> = errors
            .errors
            .into_iter()
            .map(|e| check::CheckError {
                id: e.expr_id,
                location: (e.pos.0 > 0).then(|| ast::Location {
                    line: e.pos.0.unsigned_abs(),
                    column: e.pos.1.unsigned_abs().saturating_sub(1),
                }),
                message: e.msg,
            })
            .collect();
        check::display_errors(&errors, source)
    })
}
