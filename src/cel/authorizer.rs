//! The `authorizer` variable: Kubernetes' CEL authz library
//! (staging/src/k8s.io/apiserver/pkg/cel/library/authz.go) on the CEL engine.
//!
//! ```text
//! authorizer.path('/healthz').check('get').allowed()
//! authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('x').check('update')
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('create').reason()
//! authorizer.requestResource.check('delete').errored()
//! ```
//!
//! `authorizer` is a library object; each method of the chain an overload registered in the
//! gateway's registry ([`register`]), the builders between steps library objects too.
//! `check(verb)` asks the [`Authorizer`] of the evaluation (a SubjectAccessReview in cluster
//! mode, answers cached per review); without one, it is an evaluation error, which the
//! webhook's failurePolicy answers. Costs are the API server's (`library/cost.go`): 350,000 per
//! `check`, 1 per builder and accessor.

use std::cell::RefCell;
use std::sync::Arc;

use cel_engine::{Cost, Ctx, Error, Object, Registry, Value};

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
pub(super) enum Authz {
    /// `authorizer`, or `authorizer.serviceAccount(…)`.
    Root(Subject),
    /// `….path(p)`.
    Path(Subject, String),
    /// `….group(g)`.
    Group(Subject, String),
    /// `….resource(r)` and its refinements, or `authorizer.requestResource`.
    Resource(Subject, ResourceTarget),
    Decision(Decision),
    /// `authorizer` where the expression may not use it (`auditAnnotations`): every use fails.
    Unavailable,
}

impl Object for Authz {
    fn type_name(&self) -> &'static str {
        match self {
            Self::Root(_) | Self::Unavailable => "kubernetes.authorization.Authorizer",
            Self::Path(..) => "kubernetes.authorization.PathCheck",
            Self::Group(..) => "kubernetes.authorization.GroupCheck",
            Self::Resource(..) => "kubernetes.authorization.ResourceCheck",
            Self::Decision(_) => "kubernetes.authorization.Decision",
        }
    }

    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<Authz>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn field(&self, name: &str) -> Option<Value> {
        match (self, name) {
            (Self::Root(subject), "requestResource") => {
                let resource =
                    SCOPE.with(|s| s.borrow().as_ref().map(|scope| scope.request_resource.clone()));
                Some(match resource {
                    Some(resource) => Value::object(Authz::Resource(subject.clone(), resource)),
                    None => Value::object(Authz::Unavailable),
                })
            }
            _ => None,
        }
    }
}

/// The value of `authorizer`: usable, or failing at every use.
pub(super) fn value(usable: bool) -> Value {
    Value::object(if usable { Authz::Root(Subject::Requester) } else { Authz::Unavailable })
}

/// Registers the library's methods.
pub(super) fn register(registry: &mut Registry) {
    const ONE: Cost = Cost::Fixed(1);
    registry.method("path", 1, path, ONE);
    registry.method("group", 1, group, ONE);
    registry.method("resource", 1, resource, ONE);
    registry.method("subresource", 1, subresource, ONE);
    registry.method("namespace", 1, namespace, ONE);
    registry.method("name", 1, name, ONE);
    registry.method("fieldSelector", 1, field_selector, ONE);
    registry.method("labelSelector", 1, label_selector, ONE);
    registry.method("serviceAccount", 2, service_account, ONE);
    registry.method("check", 1, check, Cost::Fixed(350_000));
    registry.method("allowed", 0, allowed, ONE);
    registry.method("reason", 0, reason, ONE);
    registry.method("errored", 0, errored, ONE);
    registry.method("error", 0, error, ONE);
}

macro_rules! methods {
    ($($function:ident => $method:literal),* $(,)?) => {
        $(fn $function(_: &mut Ctx<'_>, args: &[Value]) -> cel_engine::Result<Value> {
            step($method, args)
        })*
    };
}

methods! {
    path => "path", group => "group", resource => "resource", subresource => "subresource",
    namespace => "namespace", name => "name", field_selector => "fieldSelector",
    label_selector => "labelSelector", service_account => "serviceAccount", check => "check",
    allowed => "allowed", reason => "reason", errored => "errored", error => "error",
}

/// One step of a chain: `args[0]` the receiver, the rest strings.
fn step(method: &str, args: &[Value]) -> cel_engine::Result<Value> {
    let Some(Value::Object(target)) = args.first() else { return Err(Error::no_match()) };
    let Some(authz) = target.as_any().downcast_ref::<Authz>() else { return Err(Error::no_match()) };
    let mut strings = Vec::with_capacity(args.len() - 1);
    for arg in &args[1..] {
        match arg {
            Value::String(s) => strings.push(s.to_string()),
            _ => return Err(Error::no_such_overload()),
        }
    }
    next(authz, method, &strings).map(|value| match value {
        Next::Authz(authz) => Value::object(authz),
        Next::Value(value) => value,
    })
}

enum Next {
    Authz(Authz),
    Value(Value),
}

fn next(authz: &Authz, method: &str, args: &[String]) -> cel_engine::Result<Next> {
    if *authz == Authz::Unavailable {
        return Err(unavailable());
    }
    let overload = || {
        Error::new(format!(
            "no such overload: {}.{method} with {} argument(s)",
            authz.type_name(),
            args.len()
        ))
    };
    let one = || match args {
        [one] => Ok(one.clone()),
        _ => Err(overload()),
    };
    let next = match (authz, method) {
        (Authz::Root(_), "serviceAccount") => match args {
            [namespace, name] => {
                if !is_dns_subdomain(name) {
                    return Err(Error::new("Invalid service account name"));
                }
                if !is_dns_label(namespace) {
                    return Err(Error::new("Invalid service account namespace"));
                }
                Authz::Root(Subject::ServiceAccount { namespace: namespace.clone(), name: name.clone() })
            }
            _ => return Err(overload()),
        },
        (Authz::Root(subject), "path") => {
            let path = one()?;
            if path.trim().is_empty() {
                return Err(Error::new("path must not be empty"));
            }
            Authz::Path(subject.clone(), path)
        }
        (Authz::Root(subject), "group") => Authz::Group(subject.clone(), one()?),
        (Authz::Group(subject, group), "resource") => {
            let resource = one()?;
            if resource.trim().is_empty() {
                return Err(Error::new("resource must not be empty"));
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
                "reason" => Value::string(decision.reason.as_str()),
                "errored" => Value::Bool(decision.error.is_some()),
                "error" => Value::string(decision.error.clone().unwrap_or_default()),
                _ => return Err(overload()),
            }))
        }
        _ => return Err(overload()),
    };
    Ok(Next::Authz(next))
}
/// Asks the evaluation's authorizer (its cost is the API server's, charged by the rewrite; the
/// time it takes counts against the review's deadline like any other).
fn decide(check: Check) -> cel_engine::Result<Authz> {
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

fn unavailable() -> Error {
    Error::new(
        "authorizer is not available: admission-gateway has no cluster to send SubjectAccessReviews to (run it with --kube)",
    )
}
