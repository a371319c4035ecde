//! The parser and syntax tree of the `cel` crate 0.13.0 (<https://github.com/cel-rust/cel-rust>,
//! MIT, see LICENSE), without its interpreter: the ANTLR-generated lexer and parser
//! (`parser/gen`), the visitor that builds the tree with its macro expansions, and the tree
//! ([`ast`]). What changed from 0.13.0 is listed in README.md; the main change is that
//! [`parser::Parser::parse`] returns the tree with its [`ast::SourceInfo`] (the source offset
//! of every node), which cel-go's checker errors are positioned by.

pub mod ast;
pub mod parser;

pub use ast::{Ast, IdedExpr, Location, SourceInfo};
pub use parser::{ParseError, ParseErrors, Parser};
