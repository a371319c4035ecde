//! cel-go's `checker/checker.go`: the walk over the (macro-expanded) tree that gives every
//! node its type, resolving names, selections, calls (overloads by unification) and
//! comprehensions, and reporting cel-go's errors.

use std::collections::HashMap;

use cel_parser::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::decls;
use super::types::{
    format_function, is_assignable, is_assignable_list, is_dyn_or_error, most_general, rename_params,
    substitute, CheckedType, Mapping,
};
use super::TypeEnv;

pub(super) struct Checker<'a> {
    pub(super) env: &'a TypeEnv,
    /// Comprehension scopes, innermost last.
    pub(super) scopes: Vec<HashMap<String, CheckedType>>,
    pub(super) types: HashMap<u64, CheckedType>,
    pub(super) mapping: Mapping,
    pub(super) counter: usize,
    pub(super) errors: Vec<(u64, String)>,
    /// References to type names the runtime does not know, by node.
    pub(super) undefined_types: HashMap<u64, String>,
    /// References to type names (constants at runtime), by node.
    pub(super) type_names: std::collections::HashSet<u64>,
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

impl<'a> Checker<'a> {
    pub(super) fn new(env: &'a TypeEnv) -> Checker<'a> {
        Checker {
            env,
            scopes: Vec::new(),
            types: HashMap::new(),
            mapping: Mapping::default(),
            counter: 0,
            errors: Vec::new(),
            undefined_types: HashMap::new(),
            type_names: std::collections::HashSet::new(),
        }
    }

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

    /// Records a global reference that names a type: a constant for the planner, or a
    /// failure when the runtime's type provider does not know it.
    fn note_type_name(&mut self, id: u64, name: &str) {
        if self.env.undefined_at_runtime(name) {
            self.undefined_types.insert(id, name.to_owned());
        } else if !self.env.variables.contains_key(name.strip_prefix('.').unwrap_or(name))
            && matches!(self.env.global(name), Some(CheckedType::Type(_)))
        {
            self.type_names.insert(id);
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

    pub(super) fn check(&mut self, e: &IdedExpr) {
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
                    if self.local(name).is_none() {
                        self.note_type_name(e.id, name);
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
                        self.note_type_name(e.id, &q.join("."));
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
        let Some(field_type) = self.env.field_type(object, field) else {
            self.error(id, format!("unexpected failed resolution of '{object}'"));
            return None;
        };
        match field_type {
            Some(t) => Some(t),
            None => {
                self.error(id, format!("undefined field '{field}'"));
                None
            }
        }
    }

    /// The overloads of the function `name` the environment declares: every library of the
    /// base environment, and the `jsonpatch` library in a mutation's.
    fn overloads(&self, name: &str) -> Option<&'static [decls::Overload]> {
        let found = decls::functions().get(name).or_else(|| match self.env.mutation {
            true => decls::mutation_functions().get(name),
            false => None,
        });
        found.map(Vec::as_slice)
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
        let Some(target) = call.target.as_deref() else {
            match self.overloads(name) {
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
            if self.overloads(&qualified).is_some() {
                self.resolve_overload_or_error(e, &qualified, None, &call.args);
                return;
            }
        }
        self.check(target);
        if self.overloads(name).is_some() {
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
            Expr::Literal(LiteralValue::String(s)) => s.clone(),
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
        for overload in self.overloads(name).unwrap_or_default() {
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
                    overload.args.iter().map(|a| rename_params(a, &names)).collect(),
                    rename_params(&overload.result, &names),
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

    fn check_struct(&mut self, e: &IdedExpr, type_name: &str, entries: &[cel_parser::ast::IdedEntryExpr]) {
        let name = type_name.strip_prefix('.').unwrap_or(type_name);
        let resolved = decls::type_identifier(name).or_else(|| {
            (self.env.objects.contains_key(name) || self.env.resolves(name))
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
