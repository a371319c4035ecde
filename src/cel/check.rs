//! Load-time checks, then compilation by the CEL engine (`crates/cel-engine`).
//!
//! An expression is checked as the API server checks it at creation: parsed, type-checked by
//! the engine's checker (cel-go's, against the declarations of plugin/cel/compile.go: `object`,
//! `oldObject` dyn, `request` a typed AdmissionRequest, `authorizer`, `namespaceObject`,
//! `params`, `variables`) and the environment's validators, its result type checked; a refusal
//! is upstream's text, `compilation failed: ` and cel-go's report of every error with its
//! position (`ERROR: <input>:1:3: …`, the line, a caret).
//!
//! Then the walker refuses what only the gateway cannot run, in the same report: `variables`
//! other than as `variables.<name>`, and, should the checker let them through, undeclared
//! names, unknown `request` fields and `variables.x` not declared before, message construction.
//! Then the engine compiles.

use cel_engine::ast::{CallExpr, Expr, IdedExpr};
use cel_engine::check::{display_errors, CheckError, CheckedType, TypeEnv};
use cel_engine::mutation::PatchType;
use cel_engine::Declarations;

use super::{mutation_registry, registry, Program, Uses};

/// The declared variables of the webhook environment (compile.go, `createEnvForOpts`).
pub(super) const OBJECT: &str = "object";
pub(super) const OLD_OBJECT: &str = "oldObject";
pub(super) const REQUEST: &str = "request";
pub(super) const NAMESPACE_OBJECT: &str = "namespaceObject";
pub(super) const AUTHORIZER: &str = "authorizer";
pub(super) const PARAMS: &str = "params";
pub(super) const VARIABLES: &str = "variables";

pub(super) fn compile(expression: &str) -> Result<Program, String> {
    compile_in(expression, &Env::default())
}

/// The declared variables, each at its slot in every activation (a name not declared in an
/// environment keeps its slot under a name no expression can write).
pub(super) const SLOTS: [&str; 6] = [OBJECT, OLD_OBJECT, REQUEST, NAMESPACE_OBJECT, AUTHORIZER, PARAMS];
/// The slot of `authorizer`.
pub(super) const AUTHORIZER_SLOT: usize = 4;

/// Compiles `expression` in `env` (the declarations and result type of one kind of
/// expression, plugin/cel/compile.go): parsed, type-checked as the API server checks it at
/// creation (cel-go's checker and the environment's validators, `cel_engine::check`), its
/// result type checked, then built; every refusal in the API server's words.
pub(super) fn compile_in(expression: &str, env: &Env) -> Result<Program, String> {
    // k8s plugin/cel/compile.go: `compilation failed: ` and cel-go's `Issues.String()`.
    let failed =
        |errors: &[CheckError]| format!("compilation failed: {}", display_errors(errors, expression));
    let parsed = cel_engine::check::parse_source(expression)
        .map_err(|errors| format!("compilation failed: {errors}"))?;
    // The checker first: what it refuses, upstream refuses with the same report (all its
    // errors); the walker then refuses what only the gateway cannot run.
    let types = type_env(env);
    let checked = cel_engine::check::check_detailed(&parsed, &types).map_err(|errors| failed(&errors))?;
    let mut walker = Walker { env: env.clone(), ..Walker::default() };
    walker.walk(&parsed.expr);
    if !walker.errors.is_empty() {
        let errors: Vec<CheckError> = walker
            .errors
            .into_iter()
            .map(|(id, message)| CheckError::at(id, message, &parsed.source_info))
            .collect();
        return Err(failed(&errors));
    }
    let expected: &[CheckedType] = match env.result {
        Returns::Bool => &[CheckedType::Bool],
        Returns::String => &[CheckedType::String],
        Returns::StringOrNull => &[CheckedType::String, CheckedType::Null],
        Returns::Any => &[],
    };
    if let Some(patch_type) = env.mutation {
        cel_engine::mutation::check_mutation(patch_type, &checked.output)?;
    } else if !expected.is_empty() {
        cel_engine::check::check_result_type(&checked.output, expected)?;
    }
    if let Some(error) = checked.instantiation_error {
        return Err(error);
    }
    let declared = |name: &str| match name {
        AUTHORIZER => env.authorizer != Authz::Undeclared,
        PARAMS => env.params,
        _ => true,
    };
    let variables =
        SLOTS.iter().map(|n| if declared(n) { (*n).to_owned() } else { format!("@{n}") }).collect();
    let lazy = env.variables.clone().unwrap_or_default();
    let declarations = Declarations { variables, lazy: lazy.clone(), lazy_root: Some(VARIABLES.to_owned()) };
    let functions = if env.mutation.is_some() { mutation_registry() } else { registry() };
    let program = cel_engine::compile(expression, &declarations, functions).map_err(|error| {
        if error.starts_with(cel_engine::compile::INSTANTIATION_FAILED) {
            error
        } else {
            format!("compilation failed: ERROR: <input>: {error}")
        }
    })?;
    let reads = |slot: usize| program.reads.get(slot).copied().unwrap_or(false);
    let uses = Uses {
        object: reads(0),
        old_object: reads(1),
        request: reads(2),
        authorizer: reads(AUTHORIZER_SLOT) && env.authorizer == Authz::Declared,
    };
    Ok(Program {
        program,
        lazy,
        uses,
        authorizer_fails: env.authorizer == Authz::FailsAtRuntime,
        output: checked.output,
    })
}

/// The declarations the checker sees for `env`: the admission variables, and
/// `variables.<name>` typed by each variable's checked expression.
fn type_env(env: &Env) -> TypeEnv {
    let mut types = TypeEnv::admission(env.params, env.authorizer != Authz::Undeclared);
    if env.mutation.is_some() {
        types.with_mutation();
    }
    if let Some(names) = &env.variables {
        types.with_variables();
        for (i, name) in names.iter().enumerate() {
            types.composited_variable(name, env.variable_types.get(i).and_then(Option::as_ref));
        }
    }
    types
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
    /// The checked types of `variables`, by index (`None`, or missing: it did not compile;
    /// the checker then sees `dyn`).
    pub(crate) variable_types: Vec<Option<CheckedType>>,
    /// A MutatingAdmissionPolicy's mutation: the patch types and `jsonpatch.escapeKey` are
    /// declared, and the result must be this patch type's (`cel_engine::mutation`).
    pub(crate) mutation: Option<PatchType>,
}

#[derive(Default)]
struct Walker {
    env: Env,
    /// Comprehension variables in scope, innermost last.
    scope: Vec<String>,
    /// Each error with the id of the node it is at.
    errors: Vec<(u64, String)>,
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

/// The macros the parser leaves as calls, and how many leading identifiers each binds:
/// two-variable comprehensions, `cel.bind`, the optional and `sortBy` macros.
fn binds(call: &CallExpr) -> usize {
    let idents = |n: usize| call.args.iter().take(n).all(|a| matches!(a.expr, Expr::Ident(_)));
    let n = match (call.func_name.as_str(), call.args.len()) {
        ("all" | "exists" | "existsOne" | "exists_one", 3) => 2,
        ("transformList" | "transformMap" | "transformMapEntry", 3 | 4) => 2,
        ("optMap" | "optFlatMap" | "sortBy", 2) => 1,
        ("bind", 3) if matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(c)) if c == "cel") => {
            1
        }
        _ => 0,
    };
    if call.target.is_some() && idents(n) {
        n
    } else {
        0
    }
}

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

    fn error(&mut self, id: u64, error: String) {
        self.errors.push((id, error));
    }

    fn undeclared(&mut self, id: u64, name: &str) {
        self.error(id, format!("undeclared reference to '{name}' (in container '')"));
    }

    fn walk(&mut self, expr: &IdedExpr) {
        match &expr.expr {
            Expr::Ident(name) => {
                if self.bound(name) {
                    return;
                }
                match name.as_str() {
                    VARIABLES if self.env.variables.is_some() => self.error(
                        expr.id,
                        "admission-gateway reads variables only as variables.<name>".to_owned(),
                    ),
                    n if self.declared(n) => {}
                    // Type names (`int`, `string`, …) and qualified function prefixes are the
                    // engine's to resolve.
                    n if cel_engine::Type::from_ident(n).is_some() => {}
                    n => self.undeclared(expr.id, n),
                }
            }
            Expr::Select(select) => {
                if !select.test
                    && matches!(&select.operand.expr, Expr::Ident(v) if v == VARIABLES)
                    && self.declared(VARIABLES)
                {
                    let known = self.env.variables.as_ref().is_some_and(|v| v.contains(&select.field));
                    if !known {
                        self.error(expr.id, format!("undefined field '{}'", select.field));
                    }
                    return;
                }
                if let Some((root, _)) = select_path(expr) {
                    // `google.protobuf.Timestamp` and the like: a qualified name, the engine's.
                    if !self.bound(root)
                        && !self.declared(root)
                        && cel_engine::Type::from_ident(&dotted(expr)).is_some()
                    {
                        return;
                    }
                }
                self.walk(&select.operand);
            }
            Expr::Call(call) => self.walk_call(call),
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range);
                self.walk(&c.accu_init);
                self.scope.push(c.iter_var.clone());
                if let Some(second) = &c.iter_var2 {
                    self.scope.push(second.clone());
                }
                self.scope.push(c.accu_var.clone());
                self.walk(&c.loop_cond);
                self.walk(&c.loop_step);
                self.walk(&c.result);
                self.scope.truncate(self.scope.len() - if c.iter_var2.is_some() { 3 } else { 2 });
            }
            Expr::List(list) => list.elements.iter().for_each(|e| self.walk(e)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel_engine::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        self.walk(&entry.key);
                        self.walk(&entry.value);
                    }
                }
            }
            // `JSONPatch{…}` and `Object…{…}` in a mutation: the checker resolved the type.
            Expr::Struct(structure) if self.env.mutation.is_some() => {
                for field in &structure.entries {
                    if let cel_engine::ast::EntryExpr::StructField(field) = &field.expr {
                        self.walk(&field.value);
                    }
                }
            }
            Expr::Struct(structure) => self.error(
                expr.id,
                format!(
                    "undeclared reference to '{}' (in container ''): message construction is not supported",
                    structure.type_name
                ),
            ),
            Expr::Literal(_) => {}
            Expr::Unspecified => self.error(expr.id, "unspecified expression".to_owned()),
        }
    }

    fn walk_call(&mut self, call: &CallExpr) {
        let n = binds(call);
        if let Some(target) = call.target.as_deref() {
            // `sets.contains(…)`, `optional.of(…)`: a qualified function name, not a selection
            // from a variable; the engine resolves it.
            let prefix = matches!(&target.expr, Expr::Ident(p) if !self.bound(p) && !self.declared(p));
            let bind = n > 0 && call.func_name == "bind";
            if (!prefix || n > 0) && !bind {
                self.walk(target);
            }
        }
        let names: Vec<String> = call.args[..n]
            .iter()
            .filter_map(|a| match &a.expr {
                Expr::Ident(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        // `cel.bind(x, init, body)`: `init` is outside the binding.
        let (outside, inside) = if call.func_name == "bind" && n == 1 { (2, 2) } else { (n, n) };
        for arg in &call.args[n..outside] {
            self.walk(arg);
        }
        self.scope.extend(names.iter().cloned());
        for arg in &call.args[inside..] {
            self.walk(arg);
        }
        self.scope.truncate(self.scope.len() - names.len());
    }
}

/// `a.b.c` as one dotted name.
fn dotted(expr: &IdedExpr) -> String {
    match select_path(expr) {
        Some((root, path)) if path.is_empty() => root.to_owned(),
        Some((root, path)) => format!("{root}.{}", path.join(".")),
        None => String::new(),
    }
}
