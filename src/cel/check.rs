//! Load-time checks and the rewrite that makes evaluation metered and cel-go-like.
//!
//! The `cel` crate only parses; cel-go also type-checks against the API server's declarations
//! (compile.go: `object`, `oldObject` dyn, `request` a typed AdmissionRequest, `authorizer`,
//! `namespaceObject`). What is checked here without a type checker:
//! - every identifier is a declared variable or a comprehension variable
//!   (`undeclared reference to 'x' (in container '')`);
//! - every function exists in the environment (same message), operators excepted;
//! - fields selected from `request` exist in its declared type (`undefined field 'x'`);
//! - message construction (`Foo{…}`) is refused (no message types are declared);
//! - the result is a bool when its type is evident: literals, `request` fields, `object…`
//!   paths (dyn), arithmetic with a typed operand, conversions, `map`/`filter`
//!   (`must evaluate to bool but got int`).
//!
//! Not checked (cel-go would refuse at load; here they fail when evaluated): argument types and
//! counts, overloads, methods of the authorizer, and result types that need inference.
//!
//! The rewrite, applied to the parsed tree once:
//! - every call but the logical operators becomes `@step() ? call : null`, and every
//!   comprehension's loop condition `@step() ? cond : false`: one step each (runtime.rs);
//! - `map`/`filter` become one `@map` call, linear where the crate's expansion copies the
//!   accumulated list at every element;
//! - calls that build large values are charged by size, after the call (`@sized`) or, where
//!   one call could blow up, before it (`@charged`: `replace`, `lists.range`, `distinct`,
//!   `sets.*`);
//! - field selection is `@select`: an error on null or a non-map, as in cel-go (the crate
//!   yields `false`); `a.?f` too, absent when `f` is (the crate fails on a missing key), and
//!   selections from an optional stay optional;
//! - anything rooted at `authorizer` is `@authorizer()`, an evaluation error: the gateway has
//!   no cluster to authorize against;
//! - `quantity(s)`/`isQuantity(s)` get `@quantity(s)` / `@isQuantity(s)` around their
//!   argument: Go's `ParseQuantity` rejects the surrounding whitespace kube-cel trims.

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBool, CelString};
use kube_cel::cel;

use super::names;
use super::types::{request_field, type_of, Ty};
use super::{Program, Uses};

/// The declared variables of the webhook environment (compile.go, `createEnvForOpts`).
pub(super) const OBJECT: &str = "object";
pub(super) const OLD_OBJECT: &str = "oldObject";
pub(super) const REQUEST: &str = "request";
pub(super) const NAMESPACE_OBJECT: &str = "namespaceObject";
const AUTHORIZER: &str = "authorizer";
pub(super) const PARAMS: &str = "params";
pub(super) const VARIABLES: &str = "variables";

pub(super) fn compile(expression: &str) -> Result<Program, String> {
    compile_in(expression, &Env::default())
}

/// Compiles `expression` in `env` (the declarations and result type of one kind of
/// expression, plugin/cel/compile.go).
pub(super) fn compile_in(expression: &str, env: &Env) -> Result<Program, String> {
    let parsed = cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse(expression)
        .map_err(|errors| format!("compilation failed: {errors}"))?;
    let mut walker = Walker { env: env.clone(), ..Walker::default() };
    let result_type = type_of(&parsed);
    let expr = walker.rewrite(parsed);
    if !walker.errors.is_empty() {
        let errors: Vec<String> = walker.errors.iter().map(|e| format!("ERROR: <input>: {e}")).collect();
        return Err(format!("compilation failed: {}", errors.join("\n")));
    }
    if let Some(ty) = result_type {
        let accepted: &[Ty] = match env.result {
            Returns::Bool => &[Ty::Bool],
            Returns::String => &[Ty::String],
            Returns::StringOrNull => &[Ty::String, Ty::Null],
            Returns::Any => &[],
        };
        if !accepted.is_empty() && !accepted.contains(&ty) {
            return Err(match accepted {
                [one] => format!("must evaluate to {one} but got {ty}"),
                many => {
                    let names: Vec<String> = many.iter().map(ToString::to_string).collect();
                    format!("must evaluate to one of [{}] but got {ty}", names.join(" "))
                }
            });
        }
    }
    Ok(Program { expr, uses: walker.uses })
}

/// The result type an expression must have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Returns {
    #[default]
    Bool,
    String,
    StringOrNull,
    /// `variables`: anything.
    Any,
}

/// How `authorizer` is declared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Authz {
    /// Declared and usable.
    #[default]
    Declared,
    /// Not declared: a compile error (`messageExpression`).
    Undeclared,
    /// Declared, but every use fails when evaluated (`auditAnnotations[].valueExpression`).
    FailsAtRuntime,
}

/// What one kind of expression sees (plugin/cel/compile.go, `OptionalVariableDeclarations`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Env {
    /// `params` is declared (the policy has a `paramKind`).
    pub(crate) params: bool,
    /// `variables` is declared, with these names (the variables before this one, or all).
    pub(crate) variables: Option<Vec<String>>,
    pub(crate) authorizer: Authz,
    pub(crate) result: Returns,
}

#[derive(Default)]
struct Walker {
    env: Env,
    /// Comprehension variables in scope, innermost last.
    scope: Vec<String>,
    uses: Uses,
    errors: Vec<String>,
}

/// The root identifier and field names of a plain selection chain `a.b.c`.
pub(super) fn select_path(expr: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    match &expr.expr {
        Expr::Ident(name) => Some((name.as_str(), Vec::new())),
        Expr::Select(select) if !select.test => {
            let (root, mut path) = select_path(&select.operand)?;
            path.push(select.field.as_str());
            Some((root, path))
        }
        _ => None,
    }
}

/// The identifier at the root of a chain of selections and method calls.
fn receiver_root(expr: &IdedExpr) -> Option<&str> {
    match &expr.expr {
        Expr::Ident(name) => Some(name),
        Expr::Select(select) => receiver_root(&select.operand),
        Expr::Call(call) => receiver_root(call.target.as_deref()?),
        _ => None,
    }
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn call(func_name: &str, target: Option<IdedExpr>, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr { func_name: func_name.to_owned(), target: target.map(Box::new), args }))
}

fn string(value: &str) -> IdedExpr {
    node(Expr::Literal(LiteralValue::String(CelString::from(value))))
}

fn boolean(value: bool) -> IdedExpr {
    node(Expr::Literal(LiteralValue::Boolean(CelBool::from(value))))
}

/// `@step() ? expr : otherwise`: one metered step, then `expr`.
fn stepped(expr: IdedExpr, otherwise: IdedExpr) -> IdedExpr {
    call(operators::CONDITIONAL, None, vec![call(names::STEP, None, Vec::new()), expr, otherwise])
}

/// Operators the interpreter evaluates itself: always defined.
fn is_operator(name: &str) -> bool {
    name.starts_with('_')
        || name.starts_with('@')
        || name == operators::LOGICAL_NOT
        || name == operators::NEGATE
}

/// Functions that take their argument as the `cel` crate's `This` (see `rewrite_call`).
const CONVERSIONS: &[&str] =
    &["string", "int", "uint", "double", "bytes", "size", "duration", "timestamp", "dyn"];
/// Calls whose result can be much larger than any one argument: charged by size afterwards.
const GROWING: &[&str] = &[operators::ADD, "join", "format", "strings.quote", "split", "findAll", "flatten"];
/// Calls a single evaluation of which could be too large to run at all: charged beforehand.
const CHARGED: &[&str] =
    &["replace", "lists.range", "distinct", "sets.contains", "sets.equivalent", "sets.intersects"];

impl Walker {
    fn bound(&self, name: &str) -> bool {
        self.scope.iter().any(|s| s == name)
    }

    fn declared(&self, name: &str) -> bool {
        !self.bound(name)
            && ([OBJECT, OLD_OBJECT, REQUEST, NAMESPACE_OBJECT].contains(&name)
                || (name == AUTHORIZER && self.env.authorizer != Authz::Undeclared)
                || (name == PARAMS && self.env.params)
                || (name == VARIABLES && self.env.variables.is_some()))
    }

    /// A chain rooted at `authorizer`: every step a `@gateway.authz(target, 'method', args…)`
    /// (authorizer.rs).
    fn rewrite_authorizer(&mut self, expr: IdedExpr) -> IdedExpr {
        self.uses.authorizer = true;
        match expr.expr {
            Expr::Ident(_) => call(names::AUTHZ_ROOT, None, Vec::new()),
            Expr::Select(select) if !select.test => {
                let target = self.rewrite_authorizer(*select.operand);
                call(names::AUTHZ, None, vec![target, string(&select.field)])
            }
            Expr::Call(CallExpr { func_name, target: Some(target), args }) => {
                let mut rewritten = vec![self.rewrite_authorizer(*target), string(&func_name)];
                rewritten.extend(args.into_iter().map(|arg| self.rewrite(arg)));
                call(names::AUTHZ, None, rewritten)
            }
            // `has(authorizer.x)` and the like: nothing the library defines.
            _ => call(names::AUTHORIZER, None, Vec::new()),
        }
    }

    fn undeclared(&mut self, name: &str) {
        let error = format!("undeclared reference to '{name}' (in container '')");
        if !self.errors.contains(&error) {
            self.errors.push(error);
        }
    }

    fn rewrite(&mut self, expr: IdedExpr) -> IdedExpr {
        if let Some(root) = receiver_root(&expr) {
            if root == AUTHORIZER && !self.bound(root) && !self.declared(root) {
                self.undeclared(AUTHORIZER);
                return IdedExpr { id: expr.id, expr: Expr::Literal(LiteralValue::Null) };
            }
            if root == AUTHORIZER && self.declared(root) && !matches!(expr.expr, Expr::Ident(_)) {
                if self.env.authorizer == Authz::FailsAtRuntime {
                    return call(names::AUTHORIZER, None, Vec::new());
                }
                return self.rewrite_authorizer(expr);
            }
        }
        let id = expr.id;
        match expr.expr {
            Expr::Ident(name) => {
                if !self.bound(&name) {
                    match name.as_str() {
                        OBJECT => self.uses.object = true,
                        OLD_OBJECT => self.uses.old_object = true,
                        REQUEST => self.uses.request = true,
                        NAMESPACE_OBJECT => {}
                        PARAMS if self.env.params => {}
                        AUTHORIZER if self.env.authorizer != Authz::Undeclared => {
                            return call(names::AUTHORIZER, None, Vec::new())
                        }
                        VARIABLES if self.env.variables.is_some() => {
                            self.errors.push(
                                "admission-gateway reads variables only as variables.<name>".to_owned(),
                            );
                        }
                        _ => self.undeclared(&name),
                    }
                }
                IdedExpr { id, expr: Expr::Ident(name) }
            }
            // `variables.x`: evaluated lazily, once per phase (runtime.rs).
            Expr::Select(select)
                if !select.test
                    && matches!(&select.operand.expr, Expr::Ident(v) if v == VARIABLES)
                    && self.declared(VARIABLES) =>
            {
                let known = self.env.variables.as_ref().is_some_and(|v| v.contains(&select.field));
                if !known {
                    self.errors.push(format!("undefined field '{}'", select.field));
                }
                call(names::VARIABLE, None, vec![string(&select.field)])
            }
            Expr::Select(select) => {
                let whole = IdedExpr { id, expr: Expr::Select(select.clone()) };
                if let Some((REQUEST, path)) = select_path(&whole) {
                    if !self.bound(REQUEST) && request_field(&path).is_none() {
                        let field = path.last().copied().unwrap_or_default();
                        self.errors.push(format!("undefined field '{field}'"));
                    }
                }
                let operand = self.rewrite(*select.operand);
                call(names::SELECT, None, vec![operand, string(&select.field), boolean(select.test)])
            }
            Expr::Call(call_expr) => self.rewrite_call(call_expr),
            Expr::Comprehension(comprehension) => self.rewrite_comprehension(*comprehension),
            Expr::List(mut list) => {
                list.elements = list.elements.into_iter().map(|e| self.rewrite(e)).collect();
                IdedExpr { id, expr: Expr::List(list) }
            }
            Expr::Map(mut map) => {
                for entry in &mut map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &mut entry.expr {
                        entry.key = self.rewrite(std::mem::take(&mut entry.key));
                        entry.value = self.rewrite(std::mem::take(&mut entry.value));
                    }
                }
                IdedExpr { id, expr: Expr::Map(map) }
            }
            Expr::Struct(structure) => {
                self.errors.push(format!(
                    "undeclared reference to '{}' (in container ''): message construction is not supported",
                    structure.type_name
                ));
                IdedExpr { id, expr: Expr::Literal(LiteralValue::Null) }
            }
            Expr::Literal(literal) => IdedExpr { id, expr: Expr::Literal(literal) },
            Expr::Unspecified => {
                self.errors.push("unspecified expression".to_owned());
                IdedExpr { id, expr: Expr::Literal(LiteralValue::Null) }
            }
        }
    }

    fn rewrite_call(&mut self, call_expr: CallExpr) -> IdedExpr {
        // `string(a.b)`: the `cel` crate reports an error of its argument as "Missing argument or
        // target"; `@guard(a.b) ? string(a.b) : null` reports the argument's own error first.
        let guarded = call_expr.target.is_none()
            && call_expr.args.len() == 1
            && CONVERSIONS.contains(&call_expr.func_name.as_str())
            && matches!(call_expr.args[0].expr, Expr::Select(_))
            && select_path(&call_expr.args[0]).is_some();
        if guarded {
            let guard = call(names::GUARD, None, vec![self.rewrite(call_expr.args[0].clone())]);
            let rewritten = self.rewrite_unguarded(call_expr);
            return call(
                operators::CONDITIONAL,
                None,
                vec![guard, rewritten, node(Expr::Literal(LiteralValue::Null))],
            );
        }
        self.rewrite_unguarded(call_expr)
    }

    fn rewrite_unguarded(&mut self, call_expr: CallExpr) -> IdedExpr {
        let CallExpr { func_name, target, mut args } = call_expr;
        // `a.?f`: an optional selection, `@select(a, 'f', false, true)`.
        if func_name == operators::OPT_SELECT && target.is_none() && args.len() == 2 {
            if let Expr::Literal(LiteralValue::String(field)) = &args[1].expr {
                let field = field.inner().to_owned();
                let operand = self.rewrite(args.swap_remove(0));
                return call(
                    names::SELECT,
                    None,
                    vec![operand, string(&field), boolean(false), boolean(true)],
                );
            }
        }
        // `sets.contains(…)`: a qualified function name, not a selection from a variable.
        let qualified = match target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(prefix)) if !self.bound(prefix) && !self.declared(prefix) => {
                Some(format!("{prefix}.{func_name}"))
            }
            _ => None,
        };
        let name = match &qualified {
            Some(q) if names::is_function(q) => q.clone(),
            _ => func_name.clone(),
        };
        if !is_operator(&name) && !names::is_function(&name) {
            self.undeclared(qualified.as_deref().unwrap_or(&name));
        }
        let target = match (qualified.is_some(), target) {
            // A namespace prefix stays an identifier: the interpreter resolves the qualified name.
            (true, target) => target.map(|t| *t),
            (false, target) => target.map(|t| self.rewrite(*t)),
        };
        args = args.into_iter().map(|a| self.rewrite(a)).collect();
        match name.as_str() {
            "quantity" | "isQuantity" if args.len() == 1 && target.is_none() => {
                let guard = if name == "quantity" { names::QUANTITY } else { names::IS_QUANTITY };
                args = vec![call(guard, None, args)];
            }
            _ => {}
        }
        let rebuilt = call(&func_name, target, args);
        let charged = if CHARGED.contains(&name.as_str()) {
            let IdedExpr { expr: Expr::Call(inner), .. } = rebuilt else { unreachable!("built as a call") };
            let mut packed = vec![string(&name), string(&inner.func_name)];
            match inner.target {
                // A namespace prefix is not a value: the call is rebuilt from the name.
                Some(target) if qualified.is_none() => packed.extend([boolean(true), *target]),
                _ => packed.push(boolean(false)),
            }
            packed.extend(inner.args);
            call(names::CHARGED, None, packed)
        } else if GROWING.contains(&name.as_str()) {
            call(names::SIZED, None, vec![rebuilt])
        } else {
            rebuilt
        };
        // Logic is constant work: not worth a step.
        const CONSTANT: &[&str] = &[
            operators::LOGICAL_AND,
            operators::LOGICAL_OR,
            operators::LOGICAL_NOT,
            operators::CONDITIONAL,
            operators::NOT_STRICTLY_FALSE,
        ];
        if CONSTANT.contains(&name.as_str()) {
            return charged;
        }
        stepped(charged, node(Expr::Literal(LiteralValue::Null)))
    }

    fn rewrite_comprehension(&mut self, comprehension: ComprehensionExpr) -> IdedExpr {
        let ComprehensionExpr {
            iter_range,
            iter_var,
            iter_var2,
            accu_var,
            accu_init,
            loop_cond,
            loop_step,
            result,
        } = comprehension;
        let iter_range = self.rewrite(iter_range);
        let accu_init = self.rewrite(accu_init);
        self.scope.push(iter_var.clone());
        if let Some(second) = &iter_var2 {
            self.scope.push(second.clone());
        }
        self.scope.push(accu_var.clone());
        let built = match map_parts(&accu_var, &accu_init, &loop_cond, &loop_step) {
            // `map`/`filter`: `@map(range, 'x', filter, element)`, evaluated in one linear pass.
            Some((filter, element)) => {
                let filter = filter.map_or_else(|| boolean(true), |f| self.rewrite(f.clone()));
                let element = self.rewrite(element.clone());
                Some(call(names::MAP, None, vec![iter_range.clone(), string(&iter_var), filter, element]))
            }
            None => None,
        };
        let rewritten = built.unwrap_or_else(|| {
            let loop_cond = stepped(self.rewrite(loop_cond), boolean(false));
            let loop_step = self.rewrite(loop_step);
            let result = self.rewrite(result);
            node(Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2: iter_var2.clone(),
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            })))
        });
        self.scope.pop();
        if iter_var2.is_some() {
            self.scope.pop();
        }
        self.scope.pop();
        rewritten
    }
}

/// Recognises the `cel` crate's expansion of `map(x, e)`, `map(x, p, e)` and `filter(x, p)`:
/// an empty list accumulator, a `true` loop condition and a step `@result + [e]`, possibly
/// under `p ? … : @result`. Returns (filter, element).
fn map_parts<'e>(
    accu_var: &str,
    accu_init: &IdedExpr,
    loop_cond: &IdedExpr,
    loop_step: &'e IdedExpr,
) -> Option<(Option<&'e IdedExpr>, &'e IdedExpr)> {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if name == accu_var);
    if !matches!(&accu_init.expr, Expr::List(list) if list.elements.is_empty()) {
        return None;
    }
    if !matches!(&loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if *b.inner()) {
        return None;
    }
    let append = |e: &'e IdedExpr| -> Option<&'e IdedExpr> {
        let Expr::Call(call) = &e.expr else { return None };
        if call.func_name != operators::ADD
            || call.target.is_some()
            || call.args.len() != 2
            || !is_accu(&call.args[0])
        {
            return None;
        }
        match &call.args[1].expr {
            Expr::List(list) if list.elements.len() == 1 && list.optional_indices.is_empty() => {
                Some(&list.elements[0])
            }
            _ => None,
        }
    };
    if let Some(element) = append(loop_step) {
        return Some((None, element));
    }
    let Expr::Call(conditional) = &loop_step.expr else { return None };
    if conditional.func_name != operators::CONDITIONAL
        || conditional.args.len() != 3
        || !is_accu(&conditional.args[2])
    {
        return None;
    }
    Some((Some(&conditional.args[0]), append(&conditional.args[1])?))
}
