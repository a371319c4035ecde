//! Evaluation errors, worded as cel-go words them, never holding a value.

use std::fmt;

/// An evaluation error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// An ordinary runtime error (`no such key: x`, `division by zero`, …).
    Runtime,
    /// No overload takes these arguments: the dispatcher tries the next one.
    NoMatch,
    /// The expression's cost went over its limit (cel-go's `CostLimitExceeded`).
    CostLimit,
    /// The caller cancelled the evaluation (its deadline passed).
    Cancelled,
}

impl Error {
    pub fn new(message: impl Into<String>) -> Error {
        Error { kind: ErrorKind::Runtime, message: message.into() }
    }

    /// The marker an overload returns for arguments it does not take.
    pub fn no_match() -> Error {
        Error { kind: ErrorKind::NoMatch, message: String::new() }
    }

    pub fn no_such_overload() -> Error {
        Error::new("no such overload")
    }

    pub fn no_such_key(key: &str) -> Error {
        Error::new(format!("no such key: {key}"))
    }

    pub fn cost_limit() -> Error {
        Error {
            kind: ErrorKind::CostLimit,
            message: "operation cancelled: actual cost limit exceeded".into(),
        }
    }

    pub fn cancelled() -> Error {
        Error { kind: ErrorKind::Cancelled, message: "operation interrupted".into() }
    }

    /// Whether this error stops the whole evaluation (a limit or a cancellation), rather than
    /// being a value that `&&`, `||` and the macros may absorb.
    pub fn is_fatal(&self) -> bool {
        matches!(self.kind, ErrorKind::CostLimit | ErrorKind::Cancelled)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
