#![allow(clippy::module_inception)]
#[allow(clippy::all)]
mod gen;

mod macros;
mod parse;
#[allow(non_snake_case)]
mod parser;

pub use parser::*;
