//! The result type of an expression where it is evident without cel-go's type checker, for
//! "must evaluate to bool but got …" at load. Only the expression's root scope is looked at
//! (comprehension bodies are not), so no comprehension variable can shadow a declared one.

use std::fmt;

use kube_cel::cel;

use cel::common::ast::{operators, CallExpr, Expr, IdedExpr, LiteralValue};

use super::check::{select_path, NAMESPACE_OBJECT, OBJECT, OLD_OBJECT, PARAMS, REQUEST};

/// A CEL type, as cel-go prints it, where one is evident.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Dyn,
    Duration,
    Timestamp,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Object(&'static str),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bool => f.write_str("bool"),
            Self::Int => f.write_str("int"),
            Self::Uint => f.write_str("uint"),
            Self::Double => f.write_str("double"),
            Self::String => f.write_str("string"),
            Self::Bytes => f.write_str("bytes"),
            Self::Null => f.write_str("null_type"),
            Self::Dyn => f.write_str("dyn"),
            Self::Duration => f.write_str("google.protobuf.Duration"),
            Self::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Self::List(t) => write!(f, "list({t})"),
            Self::Map(k, v) => write!(f, "map({k}, {v})"),
            Self::Object(name) => f.write_str(name),
        }
    }
}

/// The declared type of `request` (compile.go, `BuildRequestType`): the type of `path`
/// selected from it, `None` if a field does not exist.
pub(super) fn request_field(path: &[&str]) -> Option<Ty> {
    let gvk = |rest: &[&str]| match rest {
        [] => Some(Ty::Object("kubernetes.GroupVersionKind")),
        ["group" | "version" | "kind"] => Some(Ty::String),
        _ => None,
    };
    let gvr = |rest: &[&str]| match rest {
        [] => Some(Ty::Object("kubernetes.GroupVersionResource")),
        ["group" | "version" | "resource"] => Some(Ty::String),
        _ => None,
    };
    match path {
        [] => Some(Ty::Object("kubernetes.AdmissionRequest")),
        ["kind" | "requestKind", rest @ ..] => gvk(rest),
        ["resource" | "requestResource", rest @ ..] => gvr(rest),
        ["subResource" | "requestSubResource" | "name" | "namespace" | "operation"] => Some(Ty::String),
        ["userInfo"] => Some(Ty::Object("kubernetes.UserInfo")),
        ["userInfo", "username" | "uid"] => Some(Ty::String),
        ["userInfo", "groups"] => Some(Ty::List(Box::new(Ty::String))),
        ["userInfo", "extra"] => {
            Some(Ty::Map(Box::new(Ty::String), Box::new(Ty::List(Box::new(Ty::String)))))
        }
        ["userInfo", "extra", _] => Some(Ty::List(Box::new(Ty::String))),
        ["dryRun"] => Some(Ty::Bool),
        ["options", ..] => Some(Ty::Dyn),
        _ => None,
    }
}

/// The type of `expr` if evident without inference; `None` when it is not.
pub(super) fn type_of(expr: &IdedExpr) -> Option<Ty> {
    match &expr.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => Ty::Bool,
            LiteralValue::Bytes(_) => Ty::Bytes,
            LiteralValue::Double(_) => Ty::Double,
            LiteralValue::Int(_) => Ty::Int,
            LiteralValue::Null => Ty::Null,
            LiteralValue::String(_) => Ty::String,
            LiteralValue::UInt(_) => Ty::Uint,
        }),
        Expr::List(list) => {
            let types: Vec<Option<Ty>> = list.elements.iter().map(type_of).collect();
            let element = match types.first() {
                Some(Some(first)) if types.iter().all(|t| t.as_ref() == Some(first)) => first.clone(),
                _ => Ty::Dyn,
            };
            Some(Ty::List(Box::new(element)))
        }
        Expr::Map(_) => Some(Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn))),
        Expr::Ident(_) | Expr::Select(_) => {
            if let Expr::Select(select) = &expr.expr {
                if select.test {
                    return Some(Ty::Bool);
                }
            }
            let (root, path) = select_path(expr)?;
            match root {
                OBJECT | OLD_OBJECT | PARAMS => Some(Ty::Dyn),
                REQUEST => request_field(&path),
                NAMESPACE_OBJECT if path.is_empty() => Some(Ty::Object("kubernetes.Namespace")),
                _ => None,
            }
        }
        Expr::Call(call) => call_type(call),
        Expr::Comprehension(comprehension) => match &comprehension.accu_init.expr {
            Expr::List(_) => Some(Ty::List(Box::new(Ty::Dyn))),
            _ => Some(Ty::Bool),
        },
        Expr::Struct(_) | Expr::Unspecified => None,
    }
}

fn call_type(call: &CallExpr) -> Option<Ty> {
    let args: Vec<Option<Ty>> = call.args.iter().map(type_of).collect();
    match call.func_name.as_str() {
        operators::ADD
        | operators::SUBSTRACT
        | operators::MULTIPLY
        | operators::DIVIDE
        | operators::MODULO => args.into_iter().flatten().find(|t| *t != Ty::Dyn && *t != Ty::Null),
        operators::NEGATE => args.into_iter().next().flatten().filter(|t| *t != Ty::Dyn),
        operators::CONDITIONAL => match (&args[1], &args[2]) {
            (Some(a), Some(b)) if a == b => Some(a.clone()),
            _ => None,
        },
        operators::INDEX => match args.first() {
            Some(Some(Ty::Dyn)) => Some(Ty::Dyn),
            Some(Some(Ty::List(element))) => Some((**element).clone()),
            Some(Some(Ty::Map(_, value))) => Some((**value).clone()),
            _ => None,
        },
        operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | operators::IN => Some(Ty::Bool),
        "size" | "int" => Some(Ty::Int),
        "uint" => Some(Ty::Uint),
        "double" => Some(Ty::Double),
        "string" => Some(Ty::String),
        "bytes" => Some(Ty::Bytes),
        "duration" => Some(Ty::Duration),
        "timestamp" => Some(Ty::Timestamp),
        _ => None,
    }
}
