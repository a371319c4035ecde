//! The type checker: cel-go's `checker.Check` as kube-apiserver 1.36 runs it when a
//! ValidatingAdmissionPolicy or a webhook's matchConditions are created — names resolved
//! against the declared variables and the function table of every library of the
//! environment ([`decls`]), overloads resolved by cel-go's unification ([`types`]), then the
//! environment's AST validators (`ValidateHomogeneousAggregateLiterals`,
//! `ValidateDurationLiterals`, `ValidateTimestampLiterals`, `ValidateRegexLiterals`, the
//! strings library's `format` validator). Messages are cel-go's texts; the parser keeps no
//! source positions, so they carry no `<input>:line:column` prefix (each error keeps the id
//! of the node it is reported at, see [`CheckError`]; cel-go prints them sorted by position).
//!
//! What the API server refuses at creation, in its order (k8s `CompileCELExpression`):
//! 1. parse errors;
//! 2. [`check_detailed`] errors (`compilation failed: …`): the macros cel-go expands at
//!    parse time and the `cel` crate leaves as calls, the checker, the validators;
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
//! have no authorizer (k8s `validating/plugin.go`).

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

pub mod decls;
mod goregex;
mod macros;
mod program;
mod source;
pub mod types;
mod validate;

pub use types::CheckedType;

use types::{
    format_function, is_assignable, is_assignable_list, is_dyn_or_error, most_general, substitute, Mapping,
};

/// The variables (and object types) an expression is checked against.
#[derive(Clone, Debug, Default)]
pub struct TypeEnv {
    variables: HashMap<String, CheckedType>,
    objects: HashMap<String, HashMap<String, CheckedType>>,
}

/// The name of the object type of `variables` (k8s `composition.go`).
pub const VARIABLES_TYPE: &str = "kubernetes.variables";

impl TypeEnv {
    pub fn new() -> TypeEnv {
        TypeEnv::default()
    }

    /// Declares a variable (its name may be dotted: `authorizer.requestResource`).
    pub fn variable(&mut self, name: &str, t: CheckedType) -> &mut TypeEnv {
        self.variables.insert(name.to_owned(), t);
        self
    }

    /// Declares an object type and its fields (a Kubernetes `DeclType`).
    pub fn object(&mut self, name: &str, fields: &[(&str, CheckedType)]) -> &mut TypeEnv {
        let fields = fields.iter().map(|(n, t)| ((*n).to_owned(), t.clone())).collect();
        self.objects.insert(name.to_owned(), fields);
        self
    }

    /// The admission environment of k8s `pkg/admission/plugin/cel/compile.go`: `object`,
    /// `oldObject` (dyn), `request` (`kubernetes.AdmissionRequest`), `namespaceObject`
    /// (`kubernetes.Namespace`), `params` (dyn) when the policy has a paramKind, `authorizer`
    /// and `authorizer.requestResource` when an authorizer is available.
    pub fn admission(has_params: bool, has_authorizer: bool) -> TypeEnv {
        let mut env = TypeEnv::new();
        let s = |n: &str| CheckedType::Struct(n.to_owned());
        let string = || CheckedType::String;
        let strings = || CheckedType::list(CheckedType::String);
        env.object(
            "kubernetes.GroupVersionKind",
            &[("group", string()), ("version", string()), ("kind", string())],
        );
        env.object(
            "kubernetes.GroupVersionResource",
            &[("group", string()), ("version", string()), ("resource", string())],
        );
        env.object(
            "kubernetes.UserInfo",
            &[
                ("username", string()),
                ("uid", string()),
                ("groups", strings()),
                ("extra", CheckedType::map(CheckedType::String, strings())),
            ],
        );
        env.object(
            "kubernetes.AdmissionRequest",
            &[
                ("kind", s("kubernetes.GroupVersionKind")),
                ("resource", s("kubernetes.GroupVersionResource")),
                ("subResource", string()),
                ("requestKind", s("kubernetes.GroupVersionKind")),
                ("requestResource", s("kubernetes.GroupVersionResource")),
                ("requestSubResource", string()),
                ("name", string()),
                ("namespace", string()),
                ("operation", string()),
                ("userInfo", s("kubernetes.UserInfo")),
                ("dryRun", CheckedType::Bool),
                ("options", CheckedType::Dyn),
            ],
        );
        env.object("kubernetes.NamespaceSpec", &[("finalizers", strings())]);
        env.object(
            "kubernetes.NamespaceCondition",
            &[
                ("status", string()),
                ("type", string()),
                ("lastTransitionTime", CheckedType::Timestamp),
                ("message", string()),
                ("reason", string()),
            ],
        );
        env.object(
            "kubernetes.NamespaceStatus",
            &[("conditions", CheckedType::list(s("kubernetes.NamespaceCondition"))), ("phase", string())],
        );
        let labels = || CheckedType::map(CheckedType::String, CheckedType::String);
        env.object(
            "kubernetes.NamespaceMetadata",
            &[
                ("name", string()),
                ("generateName", string()),
                ("namespace", string()),
                ("labels", labels()),
                ("annotations", labels()),
                ("UID", string()),
                ("creationTimestamp", CheckedType::Timestamp),
                ("deletionGracePeriodSeconds", CheckedType::Int),
                ("deletionTimestamp", CheckedType::Timestamp),
                ("generation", CheckedType::Int),
                ("resourceVersion", string()),
                ("finalizers", strings()),
            ],
        );
        env.object(
            "kubernetes.Namespace",
            &[
                ("metadata", s("kubernetes.NamespaceMetadata")),
                ("spec", s("kubernetes.NamespaceSpec")),
                ("status", s("kubernetes.NamespaceStatus")),
            ],
        );
        env.variable("object", CheckedType::Dyn);
        env.variable("oldObject", CheckedType::Dyn);
        env.variable("namespaceObject", s("kubernetes.Namespace"));
        env.variable("request", s("kubernetes.AdmissionRequest"));
        if has_params {
            env.variable("params", CheckedType::Dyn);
        }
        if has_authorizer {
            env.variable("authorizer", s("kubernetes.authorization.Authorizer"));
            env.variable("authorizer.requestResource", s("kubernetes.authorization.ResourceCheck"));
        }
        env
    }

    /// Declares `variables` (an object of type `kubernetes.variables`, no fields yet), as the
    /// composited compiler of a policy does.
    pub fn with_variables(&mut self) -> &mut TypeEnv {
        self.objects.entry(VARIABLES_TYPE.to_owned()).or_default();
        self.variables.insert("variables".to_owned(), CheckedType::Struct(VARIABLES_TYPE.to_owned()));
        self
    }

    /// Adds `variables.<name>` of the type of that variable's checked expression, converted as
    /// Kubernetes converts it ([`variable_type`]); `None` when its expression failed to compile
    /// (it is then `dyn`).
    pub fn composited_variable(&mut self, name: &str, output: Option<&CheckedType>) -> &mut TypeEnv {
        self.with_variables();
        let t = variable_type(output);
        self.objects.entry(VARIABLES_TYPE.to_owned()).or_default().insert(name.to_owned(), t);
        self
    }

    /// Whether a reference to the type name `name` fails the program (`reference to
    /// undefined type`): the object types declared here (Kubernetes' `DeclType`s resolve as
    /// type names in the checker, not in the runtime's type provider) and some protobuf
    /// well-known types.
    fn undefined_at_runtime(&self, name: &str) -> bool {
        let name = name.strip_prefix('.').unwrap_or(name);
        !self.variables.contains_key(name)
            && (self.objects.contains_key(name) || decls::undefined_at_runtime(name))
    }

    fn global(&self, name: &str) -> Option<CheckedType> {
        let name = name.strip_prefix('.').unwrap_or(name);
        if let Some(t) = self.variables.get(name) {
            return Some(t.clone());
        }
        if let Some(t) = decls::type_identifier(name) {
            return Some(t);
        }
        if self.objects.contains_key(name) {
            return Some(CheckedType::type_of(CheckedType::Struct(name.to_owned())));
        }
        None
    }
}

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
    pub message: String,
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
pub fn check(expr: &IdedExpr, env: &TypeEnv) -> Result<CheckedType, Vec<String>> {
    check_detailed(expr, env).map(|c| c.output).map_err(|errors| {
        let total = errors.len();
        let mut messages: Vec<String> = errors.into_iter().take(MAX_ERRORS).map(|e| e.message).collect();
        if total > MAX_ERRORS {
            messages.push(format!("{} more errors were truncated", total - MAX_ERRORS));
        }
        messages
    })
}

/// cel-go's `common.Errors` keeps the first 100 errors and reports how many it dropped.
const MAX_ERRORS: usize = 100;

/// Parses and checks `source`: [`check_detailed`], and what only the source tells — a
/// two-argument `existsOne` is no macro in the API server's environment (the parser expands
/// it as `exists_one`), so it is checked as the call of an undeclared function, as upstream
/// checks it. `Err` holds the parse error's text, or cel-go's messages.
pub fn check_source(source: &str, env: &TypeEnv) -> Result<Checked, Vec<String>> {
    let parsed = crate::parse(source).map_err(|e| vec![e])?;
    let parsed = source::restore_exists_one_calls(&parsed, source);
    check_detailed(&parsed, env).map_err(|errors| errors.into_iter().map(|e| e.message).collect())
}

/// [`check`] with the ids of the errors and the program-instantiation outcome.
pub fn check_detailed(expr: &IdedExpr, env: &TypeEnv) -> Result<Checked, Vec<CheckError>> {
    let to_errors = |v: Vec<(u64, String)>| {
        v.into_iter().map(|(id, message)| CheckError { id, message }).collect::<Vec<_>>()
    };
    let expanded = macros::expand(expr).map_err(to_errors)?;
    let mut checker = Checker {
        env,
        scopes: Vec::new(),
        types: HashMap::new(),
        mapping: Mapping::default(),
        counter: 0,
        errors: Vec::new(),
        undefined_types: HashMap::new(),
    };
    checker.check(&expanded);
    if !checker.errors.is_empty() {
        return Err(to_errors(checker.errors));
    }
    let mapping = std::mem::take(&mut checker.mapping);
    let types: HashMap<u64, CheckedType> =
        checker.types.iter().map(|(id, t)| (*id, substitute(&mapping, t, true))).collect();
    let errors = validate::validate(&expanded, &types);
    if !errors.is_empty() {
        return Err(to_errors(errors));
    }
    let output = types.get(&expanded.id).cloned().unwrap_or(CheckedType::Dyn);
    Ok(Checked {
        output,
        instantiation_error: program::instantiation_error(&expanded, &checker.undefined_types),
    })
}

struct Checker<'a> {
    env: &'a TypeEnv,
    /// Comprehension scopes, innermost last.
    scopes: Vec<HashMap<String, CheckedType>>,
    types: HashMap<u64, CheckedType>,
    mapping: Mapping,
    counter: usize,
    errors: Vec<(u64, String)>,
    /// References to type names the runtime does not know, by node.
    undefined_types: HashMap<u64, String>,
}

fn undeclared(name: &str) -> String {
    format!("undeclared reference to '{name}' (in container '')")
}

fn type_mismatch(expected: &CheckedType, actual: &CheckedType) -> String {
    format!("expected type '{}' but found '{}'", expected.format(), actual.format())
}

/// `a.b.c` as its qualifiers, when the chain of (non-test) selections ends in an identifier.
fn qualifiers(e: &IdedExpr) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = e;
    loop {
        match &cur.expr {
            Expr::Select(s) if !s.test => {
                out.push(s.field.clone());
                cur = &s.operand;
            }
            Expr::Ident(n) if !out.is_empty() => {
                out.push(n.clone());
                out.reverse();
                return Some(out);
            }
            _ => return None,
        }
    }
}

/// `containers.ToQualifiedName`: a dotted name of identifiers and selections.
fn qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => qualified_name(&s.operand).map(|p| format!("{p}.{}", s.field)),
        _ => None,
    }
}

impl Checker<'_> {
    fn error(&mut self, id: u64, message: String) {
        self.errors.push((id, message));
    }

    fn set_type(&mut self, e: &IdedExpr, t: CheckedType) {
        self.types.insert(e.id, t);
    }

    fn get_type(&self, e: &IdedExpr) -> CheckedType {
        self.types.get(&e.id).cloned().unwrap_or(CheckedType::Error)
    }

    fn new_type_var(&mut self) -> CheckedType {
        let t = CheckedType::Param(format!("_var{}", self.counter));
        self.counter += 1;
        t
    }

    fn is_assignable(&mut self, t1: &CheckedType, t2: &CheckedType) -> bool {
        match is_assignable(&self.mapping, t1, t2) {
            Some(m) => {
                self.mapping = m;
                true
            }
            None => false,
        }
    }

    fn local(&self, name: &str) -> Option<CheckedType> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    fn resolve_simple(&self, name: &str) -> Option<CheckedType> {
        if !name.starts_with('.') {
            if let Some(t) = self.local(name) {
                return Some(t);
            }
        }
        self.env.global(name)
    }

    fn check(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Literal(l) => {
                let t = match l {
                    LiteralValue::Boolean(_) => CheckedType::Bool,
                    LiteralValue::Bytes(_) => CheckedType::Bytes,
                    LiteralValue::Double(_) => CheckedType::Double,
                    LiteralValue::Int(_) => CheckedType::Int,
                    LiteralValue::Null => CheckedType::Null,
                    LiteralValue::String(_) => CheckedType::String,
                    LiteralValue::UInt(_) => CheckedType::Uint,
                };
                self.set_type(e, t);
            }
            Expr::Ident(name) => match self.resolve_simple(name) {
                Some(t) => {
                    if self.local(name).is_none() && self.env.undefined_at_runtime(name) {
                        self.undefined_types.insert(e.id, name.clone());
                    }
                    self.set_type(e, t)
                }
                None => {
                    self.set_type(e, CheckedType::Error);
                    self.error(e.id, undeclared(name));
                }
            },
            Expr::Select(s) => {
                if let Some(q) = qualifiers(e) {
                    let resolved = if self.local(&q[0]).is_some() && !q[0].starts_with('.') {
                        None
                    } else {
                        self.env.global(&q.join("."))
                    };
                    if let Some(t) = resolved {
                        let name = q.join(".");
                        if self.env.undefined_at_runtime(&name) {
                            self.undefined_types.insert(e.id, name);
                        }
                        self.set_type(e, t);
                        return;
                    }
                }
                let mut t = self.check_select_field(e, &s.operand, &s.field, false);
                if s.test {
                    t = CheckedType::Bool;
                }
                let t = substitute(&self.mapping, &t, false);
                self.set_type(e, t);
            }
            Expr::Call(_) => self.check_call(e),
            Expr::List(l) => {
                let mut elems: Option<CheckedType> = None;
                for (i, x) in l.elements.iter().enumerate() {
                    self.check(x);
                    let mut t = self.get_type(x);
                    if l.optional_indices.contains(&i) {
                        let (inner, is_opt) = t.unwrap_optional();
                        let inner = inner.clone();
                        if !is_opt && !matches!(inner, CheckedType::Dyn) {
                            self.error(x.id, type_mismatch(&CheckedType::optional(inner.clone()), &inner));
                        }
                        t = inner;
                    }
                    elems = Some(self.join_types(elems, t));
                }
                let elems = match elems {
                    Some(t) => t,
                    None => self.new_type_var(),
                };
                self.set_type(e, CheckedType::list(elems));
            }
            Expr::Map(m) => {
                let (mut kt, mut vt): (Option<CheckedType>, Option<CheckedType>) = (None, None);
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else { continue };
                    self.check(&me.key);
                    let k = self.get_type(&me.key);
                    kt = Some(self.join_types(kt, k));
                    self.check(&me.value);
                    let mut v = self.get_type(&me.value);
                    if me.optional {
                        let (inner, is_opt) = v.unwrap_optional();
                        let inner = inner.clone();
                        if !is_opt && !matches!(inner, CheckedType::Dyn) {
                            self.error(
                                me.value.id,
                                type_mismatch(&CheckedType::optional(inner.clone()), &inner),
                            );
                        }
                        v = inner;
                    }
                    vt = Some(self.join_types(vt, v));
                }
                let (k, v) = match (kt, vt) {
                    (Some(k), Some(v)) => (k, v),
                    _ => (self.new_type_var(), self.new_type_var()),
                };
                self.set_type(e, CheckedType::map(k, v));
            }
            Expr::Struct(s) => self.check_struct(e, &s.type_name, &s.entries),
            Expr::Comprehension(c) => {
                self.check(&c.iter_range);
                self.check(&c.accu_init);
                let range = substitute(&self.mapping, &self.get_type(&c.iter_range), false);
                let accu = self.get_type(&c.accu_init);
                self.scopes.push(HashMap::from([(c.accu_var.clone(), accu.clone())]));
                let two = c.iter_var2.is_some();
                let (v1, v2) = match &range {
                    CheckedType::List(elem) => {
                        if two {
                            (CheckedType::Int, (**elem).clone())
                        } else {
                            ((**elem).clone(), CheckedType::Error)
                        }
                    }
                    CheckedType::Map(k, v) => ((**k).clone(), (**v).clone()),
                    CheckedType::Dyn | CheckedType::Error | CheckedType::Param(_) => {
                        self.is_assignable(&CheckedType::Dyn, &range);
                        (CheckedType::Dyn, CheckedType::Dyn)
                    }
                    other => {
                        self.error(
                            c.iter_range.id,
                            format!(
                                "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                                other.format()
                            ),
                        );
                        (CheckedType::Error, CheckedType::Error)
                    }
                };
                let mut scope = HashMap::from([(c.iter_var.clone(), v1)]);
                if let Some(var2) = &c.iter_var2 {
                    scope.insert(var2.clone(), v2);
                }
                self.scopes.push(scope);
                self.check(&c.loop_cond);
                self.assert_type(&c.loop_cond, &CheckedType::Bool);
                self.check(&c.loop_step);
                self.assert_type(&c.loop_step, &accu);
                self.scopes.pop();
                self.check(&c.result);
                self.scopes.pop();
                let t = substitute(&self.mapping, &self.get_type(&c.result), false);
                self.set_type(e, t);
            }
            Expr::Unspecified => {
                self.set_type(e, CheckedType::Error);
                self.error(e.id, "unexpected unspecified type: ".into());
            }
        }
    }

    fn assert_type(&mut self, e: &IdedExpr, t: &CheckedType) {
        let actual = self.get_type(e);
        if !self.is_assignable(t, &actual) {
            self.error(e.id, type_mismatch(t, &actual));
        }
    }

    /// `joinTypes` (aggregate literals take `dyn` on disagreement; the homogeneous validator
    /// reports it afterwards).
    fn join_types(&mut self, previous: Option<CheckedType>, current: CheckedType) -> CheckedType {
        match previous {
            None => current,
            Some(p) => {
                if self.is_assignable(&p, &current) {
                    most_general(&p, &current)
                } else {
                    CheckedType::Dyn
                }
            }
        }
    }

    fn lookup_field(&mut self, id: u64, object: &str, field: &str) -> Option<CheckedType> {
        let Some(fields) = self.env.objects.get(object) else {
            self.error(id, format!("unexpected failed resolution of '{object}'"));
            return None;
        };
        match fields.get(field) {
            Some(t) => Some(t.clone()),
            None => {
                self.error(id, format!("undefined field '{field}'"));
                None
            }
        }
    }

    fn check_select_field(
        &mut self,
        e: &IdedExpr,
        operand: &IdedExpr,
        field: &str,
        optional: bool,
    ) -> CheckedType {
        self.check(operand);
        let operand_type = substitute(&self.mapping, &self.get_type(operand), false);
        let (target, is_opt) = operand_type.unwrap_optional();
        let target = target.clone();
        let result = match &target {
            CheckedType::Map(_, v) => (**v).clone(),
            CheckedType::Struct(name) => self.lookup_field(e.id, name, field).unwrap_or(CheckedType::Error),
            CheckedType::Param(_) => {
                self.is_assignable(&CheckedType::Dyn, &target);
                CheckedType::Dyn
            }
            other => {
                if !is_dyn_or_error(other) {
                    self.error(e.id, format!("type '{}' does not support field selection", other.format()));
                }
                CheckedType::Dyn
            }
        };
        if is_opt || optional {
            CheckedType::optional(result)
        } else {
            result
        }
    }

    fn check_call(&mut self, e: &IdedExpr) {
        let Expr::Call(call) = &e.expr else { return };
        let name = call.func_name.as_str();
        if name == "_?._" {
            self.check_opt_select(e);
            return;
        }
        for a in &call.args {
            self.check(a);
        }
        let functions = decls::functions();
        let Some(target) = call.target.as_deref() else {
            match functions.get(name) {
                Some(_) => self.resolve_overload_or_error(e, name, None, &call.args),
                None => {
                    self.error(e.id, undeclared(name));
                    self.set_type(e, CheckedType::Error);
                }
            }
            return;
        };
        if let Some(prefix) = qualified_name(target) {
            let qualified = format!("{prefix}.{name}");
            if functions.contains_key(&qualified) {
                self.resolve_overload_or_error(e, &qualified, None, &call.args);
                return;
            }
        }
        self.check(target);
        if functions.contains_key(name) {
            self.resolve_overload_or_error(e, name, Some(target), &call.args);
            return;
        }
        self.set_type(e, CheckedType::Error);
        self.error(e.id, undeclared(name));
    }

    fn check_opt_select(&mut self, e: &IdedExpr) {
        let Expr::Call(call) = &e.expr else { return };
        if call.args.len() != 2 || call.target.is_some() {
            let t = if call.target.is_some() { " member call with" } else { "" };
            self.error(
                e.id,
                format!(
                    "unsupported optional field selection: incorrect signature.{t} argument count: {}",
                    call.args.len()
                ),
            );
            return;
        }
        let field = match &call.args[1].expr {
            Expr::Literal(LiteralValue::String(s)) => s.inner().to_owned(),
            _ => {
                self.error(call.args[1].id, "unsupported optional field selection".into());
                return;
            }
        };
        let t = self.check_select_field(e, &call.args[0], &field, true);
        let t = substitute(&self.mapping, &t, false);
        self.set_type(e, t);
    }

    fn resolve_overload_or_error(
        &mut self,
        e: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) {
        let t = self.resolve_overload(e, name, target, args).unwrap_or(CheckedType::Error);
        self.set_type(e, t);
    }

    fn resolve_overload(
        &mut self,
        call: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<CheckedType> {
        let mut arg_types: Vec<CheckedType> = Vec::new();
        if let Some(t) = target {
            arg_types.push(self.get_type(t));
        }
        arg_types.extend(args.iter().map(|a| self.get_type(a)));
        let mut result: Option<CheckedType> = None;
        for overload in &decls::functions()[name] {
            if overload.member != target.is_some() {
                continue;
            }
            if name == "_&&_" || name == "_||_" {
                let mut failed = false;
                for (i, t) in arg_types.iter().enumerate() {
                    if !self.is_assignable(t, &CheckedType::Bool) {
                        self.error(args[i].id, type_mismatch(&CheckedType::Bool, t));
                        failed = true;
                    }
                }
                return (!failed).then_some(CheckedType::Bool);
            }
            let (candidate_args, candidate_result) = if overload.params.is_empty() {
                (overload.args.clone(), overload.result.clone())
            } else {
                let mut names = HashMap::new();
                for p in &overload.params {
                    if let CheckedType::Param(fresh) = self.new_type_var() {
                        names.insert(p.clone(), fresh);
                    }
                }
                (
                    overload.args.iter().map(|a| types::rename_params(a, &names)).collect(),
                    types::rename_params(&overload.result, &names),
                )
            };
            if let Some(m) = is_assignable_list(&self.mapping, &arg_types, &candidate_args) {
                self.mapping = m;
                let fn_result = substitute(&self.mapping, &candidate_result, false);
                result = Some(match result {
                    None => fn_result,
                    Some(r) if !matches!(r, CheckedType::Dyn) && !fn_result.is_exact(&r) => CheckedType::Dyn,
                    Some(r) => r,
                });
            }
        }
        if result.is_none() {
            let shown: Vec<CheckedType> =
                arg_types.iter().map(|t| substitute(&self.mapping, t, true)).collect();
            let refs: Vec<&CheckedType> = shown.iter().collect();
            self.error(
                call.id,
                format!(
                    "found no matching overload for '{name}' applied to '{}'",
                    format_function(None, &refs, target.is_some())
                ),
            );
        }
        result
    }

    fn check_struct(&mut self, e: &IdedExpr, type_name: &str, entries: &[cel::common::ast::IdedEntryExpr]) {
        let name = type_name.strip_prefix('.').unwrap_or(type_name);
        let resolved = decls::type_identifier(name).or_else(|| {
            self.env
                .objects
                .contains_key(name)
                .then(|| CheckedType::type_of(CheckedType::Struct(name.to_owned())))
        });
        let Some(CheckedType::Type(Some(inner))) = resolved else {
            self.error(e.id, undeclared(type_name));
            self.set_type(e, CheckedType::Error);
            return;
        };
        let (result, object) = match *inner {
            CheckedType::Struct(n) => (CheckedType::Struct(n.clone()), Some(n)),
            other => {
                self.error(e.id, format!("'{}' is not a message type", other.type_name()));
                (CheckedType::Error, None)
            }
        };
        self.set_type(e, result);
        for entry in entries {
            let EntryExpr::StructField(f) = &entry.expr else { continue };
            self.check(&f.value);
            let field_type = match &object {
                Some(o) => self.lookup_field(entry.id, o, &f.field).unwrap_or(CheckedType::Error),
                None => {
                    self.error(entry.id, format!("unexpected failed resolution of '{type_name}'"));
                    CheckedType::Error
                }
            };
            let mut vt = self.get_type(&f.value);
            if f.optional {
                let (inner, is_opt) = vt.unwrap_optional();
                let inner = inner.clone();
                if !is_opt && !matches!(inner, CheckedType::Dyn) {
                    self.error(f.value.id, type_mismatch(&CheckedType::optional(inner.clone()), &inner));
                }
                vt = inner;
            }
            if !self.is_assignable(&field_type, &vt) {
                self.error(
                    entry.id,
                    format!(
                        "expected type of field '{}' is '{}' but provided type is '{}'",
                        f.field,
                        field_type.format(),
                        vt.format()
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
