//! The `authorizer` variable: Kubernetes' CEL authz library
//! (staging/src/k8s.io/apiserver/pkg/cel/library/authz.go) on our evaluator.
//!
//! ```text
//! authorizer.path('/healthz').check('get').allowed()
//! authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('x').check('update')
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('create').reason()
//! authorizer.requestResource.check('delete').errored()
//! ```
//!
//! The rewrite (check.rs) turns every step of a chain rooted at `authorizer` into
//! `@gateway.authz(target, 'method', args…)`; the builder values between steps are opaque.
//! `check(verb)` asks the [`Authorizer`] of the evaluation (a SubjectAccessReview in cluster
//! mode, answers cached per review); without one, it is an evaluation error, which the
//! webhook's failurePolicy answers.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use kube_cel::cel;

use cel::common::ast::{Expr, LiteralValue};
use cel::objects::{Opaque, Value};
use cel::{ExecutionError, FunctionContext, ResolveResult};

use super::names;

/// Who is asked about: the requesting user, or a service account.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    Requester,
    ServiceAccount { namespace: String, name: String },
}

/// One authorization question.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Check {
    pub(crate) subject: Subject,
    pub(crate) verb: String,
    pub(crate) target: Target,
}

/// A resource check; the version is always `*`, as authz.go asks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct ResourceTarget {
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) field_selector: String,
    pub(crate) label_selector: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Path(String),
    Resource(ResourceTarget),
}

/// The answer to a [`Check`]: `error` is set when the authorizer could not decide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    pub(crate) reason: String,
    pub(crate) error: Option<String>,
}

/// Answers checks for one review.
pub(crate) trait Authorizer: Send + Sync {
    fn authorize(&self, check: &Check) -> Decision;
}

/// What `authorizer` needs of the review being evaluated.
#[derive(Clone)]
pub(crate) struct Scope {
    pub(crate) authorizer: Arc<dyn Authorizer>,
    /// `authorizer.requestResource`: the resource the request is for.
    pub(crate) request_resource: ResourceTarget,
}

thread_local! {
    /// The scope of the evaluation running on this thread, if it has an authorizer.
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// Runs `f` with `scope` as the authorizer of the evaluations it makes on this thread.
pub(crate) fn with_scope<R>(scope: Option<Scope>, f: impl FnOnce() -> R) -> R {
    let previous = SCOPE.with(|s| s.replace(scope));
    let result = f();
    SCOPE.with(|s| s.replace(previous));
    result
}

/// A value of the authz library: a builder on its way to a check, or a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Authz {
    /// `authorizer`, or `authorizer.serviceAccount(…)`.
    Root(Subject),
    /// `….path(p)`.
    Path(Subject, String),
    /// `….group(g)`.
    Group(Subject, String),
    /// `….resource(r)` and its refinements, or `authorizer.requestResource`.
    Resource(Subject, ResourceTarget),
    Decision(Decision),
}

impl Opaque for Authz {
    fn runtime_type_name(&self) -> &str {
        match self {
            Self::Root(_) => "kubernetes.authorization.Authorizer",
            Self::Path(..) => "kubernetes.authorization.PathCheck",
            Self::Group(..) => "kubernetes.authorization.GroupCheck",
            Self::Resource(..) => "kubernetes.authorization.ResourceCheck",
            Self::Decision(_) => "kubernetes.authorization.Decision",
        }
    }
}

impl fmt::Display for Authz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.runtime_type_name())
    }
}

/// `@gateway.authz()`: the `authorizer` variable itself.
pub(super) fn root() -> ResolveResult {
    Ok(Value::Opaque(Arc::new(Authz::Root(Subject::Requester))))
}

/// `@gateway.authz(target, 'method', args…)`: one step of a chain.
pub(super) fn step(ftx: &FunctionContext<'_, '_>) -> ResolveResult {
    let target = Value::resolve(&ftx.args[0], ftx.ptx)?;
    let method = match &ftx.args.get(1).map(|a| &a.expr) {
        Some(Expr::Literal(LiteralValue::String(s))) => s.inner().to_owned(),
        _ => return Err(ftx.error("authorizer: malformed call")),
    };
    let mut args = Vec::new();
    for arg in &ftx.args[2..] {
        match Value::resolve(arg, ftx.ptx)? {
            Value::String(s) => args.push(s.to_string()),
            other => {
                return Err(ExecutionError::function_error(
                    &method,
                    format!("no such overload: {method} takes strings, got {}", other.type_of()),
                ))
            }
        }
    }
    let Value::Opaque(opaque) = &target else {
        return Err(ExecutionError::function_error(
            &method,
            format!("no such overload: {}.{method}", target.type_of()),
        ));
    };
    let Some(authz) = opaque.downcast_ref::<Authz>() else {
        return Err(ExecutionError::function_error(&method, "no such overload"));
    };
    next(authz, &method, &args).map(|value| match value {
        Next::Authz(authz) => Value::Opaque(Arc::new(authz)),
        Next::Value(value) => value,
    })
}

enum Next {
    Authz(Authz),
    Value(Value),
}

fn next(authz: &Authz, method: &str, args: &[String]) -> Result<Next, ExecutionError> {
    let overload = || {
        ExecutionError::function_error(
            method,
            format!(
                "no such overload: {}.{method} with {} argument(s)",
                authz.runtime_type_name(),
                args.len()
            ),
        )
    };
    let one = || match args {
        [one] => Ok(one.clone()),
        _ => Err(overload()),
    };
    let next = match (authz, method) {
        (Authz::Root(_), "serviceAccount") => match args {
            [namespace, name] => {
                if !is_dns_subdomain(name) {
                    return Err(ExecutionError::function_error(method, "Invalid service account name"));
                }
                if !is_dns_label(namespace) {
                    return Err(ExecutionError::function_error(method, "Invalid service account namespace"));
                }
                Authz::Root(Subject::ServiceAccount { namespace: namespace.clone(), name: name.clone() })
            }
            _ => return Err(overload()),
        },
        (Authz::Root(subject), "path") => {
            let path = one()?;
            if path.trim().is_empty() {
                return Err(ExecutionError::function_error(method, "path must not be empty"));
            }
            Authz::Path(subject.clone(), path)
        }
        (Authz::Root(subject), "group") => Authz::Group(subject.clone(), one()?),
        (Authz::Root(subject), "requestResource") if args.is_empty() => {
            let resource = SCOPE.with(|s| s.borrow().as_ref().map(|scope| scope.request_resource.clone()));
            Authz::Resource(subject.clone(), resource.ok_or_else(unavailable)?)
        }
        (Authz::Group(subject, group), "resource") => {
            let resource = one()?;
            if resource.trim().is_empty() {
                return Err(ExecutionError::function_error(method, "resource must not be empty"));
            }
            Authz::Resource(
                subject.clone(),
                ResourceTarget { group: group.clone(), resource, ..ResourceTarget::default() },
            )
        }
        (
            Authz::Resource(subject, target),
            "subresource" | "namespace" | "name" | "fieldSelector" | "labelSelector",
        ) => {
            let mut target = target.clone();
            let value = one()?;
            match method {
                "subresource" => target.subresource = value,
                "namespace" => target.namespace = value,
                "name" => target.name = value,
                "fieldSelector" => target.field_selector = value,
                _ => target.label_selector = value,
            }
            Authz::Resource(subject.clone(), target)
        }
        (Authz::Path(subject, path), "check") => {
            decide(Check { subject: subject.clone(), verb: one()?, target: Target::Path(path.clone()) })?
        }
        (Authz::Resource(subject, target), "check") => decide(Check {
            subject: subject.clone(),
            verb: one()?,
            target: Target::Resource(target.clone()),
        })?,
        (Authz::Decision(decision), _) if args.is_empty() => {
            return Ok(Next::Value(match method {
                "allowed" => Value::Bool(decision.allowed),
                "reason" => Value::String(Arc::new(decision.reason.clone())),
                "errored" => Value::Bool(decision.error.is_some()),
                "error" => Value::String(Arc::new(decision.error.clone().unwrap_or_default())),
                _ => return Err(overload()),
            }))
        }
        _ => return Err(overload()),
    };
    Ok(Next::Authz(next))
}

/// Asks the evaluation's authorizer (its cost is the API server's, charged by the rewrite; the
/// time it takes counts against the review's deadline like any other).
fn decide(check: Check) -> Result<Authz, ExecutionError> {
    let authorizer = SCOPE.with(|s| s.borrow().as_ref().map(|scope| scope.authorizer.clone()));
    let authorizer = authorizer.ok_or_else(unavailable)?;
    let decision = authorizer.authorize(&check);
    Ok(Authz::Decision(decision))
}

/// RFC 1123 label: what a namespace name must be.
fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// RFC 1123 subdomain: what a service account name must be.
fn is_dns_subdomain(value: &str) -> bool {
    value.len() <= 253 && value.split('.').all(is_dns_label)
}

fn unavailable() -> ExecutionError {
    ExecutionError::function_error(
        names::AUTHORIZER,
        "authorizer is not available: admission-gateway has no cluster to send SubjectAccessReviews to (run it with --kube)",
    )
}
