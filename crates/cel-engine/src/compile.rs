//! Compilation (being written).
pub struct Program;
pub struct Declarations;
pub fn compile() {}
