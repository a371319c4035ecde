//! The macros cel-go expands at parse time that the parser (`crates/cel-parser`) leaves as calls:
//! the two-variable comprehensions (`ext.TwoVarComprehensions`), `optMap`/`optFlatMap`
//! (optionals) and `sortBy` (`ext.Lists` v2+), expanded here exactly as cel-go expands them,
//! so that the checker sees (and reports on) the tree cel-go checks. `cel.bind` is not
//! expanded: `ext.Bindings` is not part of the API server's environment. The nodes an
//! expansion makes are at the macro call's source offset, copies at their original's
//! (cel-go parser/helper.go, `exprHelper.nextMacroID` and `exprHelper.Copy`).

use cel_parser::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, SourceInfo,
};

const ACCU: &str = "@result";
const OLD_ACCU: &str = "__result__";
const TARGET: &str = "@target";

/// Rebuilds a parsed tree with cel-go's remaining macro expansions, adding the offsets of
/// the nodes it makes to `source_info`; `Err` holds the expansion errors (parse errors in
/// cel-go) with the id of the offending node.
pub(crate) fn expand(e: &IdedExpr, source_info: &mut SourceInfo) -> Result<IdedExpr, Vec<(u64, String)>> {
    let mut x = Expander { next: max_id(e) + 1, macro_call: e.id, source_info, errors: Vec::new() };
    let out = x.expr(e);
    if x.errors.is_empty() {
        Ok(out)
    } else {
        Err(x.errors)
    }
}

fn max_id(e: &IdedExpr) -> u64 {
    let mut m = e.id;
    visit(e, &mut |n| m = m.max(n.id));
    m
}

/// Calls `f` on every node under `e` (not `e` itself).
pub(crate) fn visit(e: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    let each = |c: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)| {
        f(c);
        visit(c, f);
    };
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                each(t, f);
            }
            for a in &c.args {
                each(a, f);
            }
        }
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                each(x, f);
            }
        }
        Expr::List(l) => {
            for x in &l.elements {
                each(x, f);
            }
        }
        Expr::Map(m) => {
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        each(&me.key, f);
                        each(&me.value, f);
                    }
                    EntryExpr::StructField(sf) => each(&sf.value, f),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        each(&me.key, f);
                        each(&me.value, f);
                    }
                    EntryExpr::StructField(sf) => each(&sf.value, f),
                }
            }
        }
        Expr::Select(s) => each(&s.operand, f),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

struct Expander<'a> {
    next: u64,
    /// The id of the macro call being expanded: where the nodes it makes are.
    macro_call: u64,
    source_info: &'a mut SourceInfo,
    errors: Vec<(u64, String)>,
}

impl Expander<'_> {
    /// A fresh id, for a node of the macro call being expanded.
    fn id(&mut self) -> u64 {
        self.id_at(self.macro_call)
    }

    /// A fresh id at the source offset of the node `like`.
    fn id_at(&mut self, like: u64) -> u64 {
        self.next += 1;
        if let Some((start, stop)) = self.source_info.offset_for(like) {
            self.source_info.add_offset(self.next, start, stop);
        }
        self.next
    }

    fn node(&mut self, expr: Expr) -> IdedExpr {
        IdedExpr { id: self.id(), expr }
    }

    fn ident(&mut self, name: &str) -> IdedExpr {
        self.node(Expr::Ident(name.to_owned()))
    }

    fn call(&mut self, name: &str, target: Option<IdedExpr>, args: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::Call(CallExpr { func_name: name.to_owned(), target: target.map(Box::new), args }))
    }

    fn bool(&mut self, b: bool) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Boolean(b)))
    }

    fn int(&mut self, i: i64) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Int(i)))
    }

    fn list(&mut self, elements: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::List(ListExpr::new(elements)))
    }

    /// A deep copy with fresh ids (cel-go's `ExprFactory.Copy`).
    fn copy(&mut self, e: &IdedExpr) -> IdedExpr {
        let mut out = e.clone();
        self.renumber(&mut out);
        out
    }

    fn renumber(&mut self, e: &mut IdedExpr) {
        e.id = self.id_at(e.id);
        match &mut e.expr {
            Expr::Call(c) => {
                if let Some(t) = &mut c.target {
                    self.renumber(t);
                }
                for a in &mut c.args {
                    self.renumber(a);
                }
            }
            Expr::Comprehension(c) => {
                for x in
                    [&mut c.iter_range, &mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result]
                {
                    self.renumber(x);
                }
            }
            Expr::List(l) => l.elements.iter_mut().for_each(|x| self.renumber(x)),
            Expr::Map(MapExpr { entries }) => {
                for entry in entries {
                    entry.id = self.id_at(entry.id);
                    match &mut entry.expr {
                        EntryExpr::MapEntry(me) => {
                            self.renumber(&mut me.key);
                            self.renumber(&mut me.value);
                        }
                        EntryExpr::StructField(sf) => self.renumber(&mut sf.value),
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &mut s.entries {
                    entry.id = self.id_at(entry.id);
                    if let EntryExpr::StructField(sf) = &mut entry.expr {
                        self.renumber(&mut sf.value);
                    }
                }
            }
            Expr::Select(s) => self.renumber(&mut s.operand),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn comprehension(
        &mut self,
        range: IdedExpr,
        var1: &str,
        var2: Option<&str>,
        accu: &str,
        init: IdedExpr,
        cond: IdedExpr,
        step: IdedExpr,
        result: IdedExpr,
    ) -> IdedExpr {
        self.node(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: range,
            iter_var: var1.to_owned(),
            iter_var2: var2.map(str::to_owned),
            accu_var: accu.to_owned(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        })))
    }

    fn expr(&mut self, e: &IdedExpr) -> IdedExpr {
        let expr = match &e.expr {
            Expr::Call(c) => {
                let target = c.target.as_deref().map(|t| self.expr(t));
                let args: Vec<IdedExpr> = c.args.iter().map(|a| self.expr(a)).collect();
                if let Some(target) = target {
                    self.macro_call = e.id;
                    match self.receiver_macro(&c.func_name, target, args) {
                        Ok(expanded) => return expanded,
                        Err((target, args)) => Expr::Call(CallExpr {
                            func_name: c.func_name.clone(),
                            target: Some(Box::new(target)),
                            args,
                        }),
                    }
                } else {
                    Expr::Call(CallExpr { func_name: c.func_name.clone(), target: None, args })
                }
            }
            Expr::Comprehension(c) => {
                if c.iter_var == ACCU || c.iter_var == OLD_ACCU {
                    self.errors.push((e.id, "iteration variable overwrites accumulator variable".into()));
                }
                Expr::Comprehension(Box::new(ComprehensionExpr {
                    iter_range: self.expr(&c.iter_range),
                    iter_var: c.iter_var.clone(),
                    iter_var2: c.iter_var2.clone(),
                    accu_var: c.accu_var.clone(),
                    accu_init: self.expr(&c.accu_init),
                    loop_cond: self.expr(&c.loop_cond),
                    loop_step: self.expr(&c.loop_step),
                    result: self.expr(&c.result),
                }))
            }
            Expr::List(l) => Expr::List(ListExpr {
                elements: l.elements.iter().map(|x| self.expr(x)).collect(),
                optional_indices: l.optional_indices.clone(),
            }),
            Expr::Map(m) => {
                let mut m = m.clone();
                for entry in &mut m.entries {
                    if let EntryExpr::MapEntry(me) = &mut entry.expr {
                        me.key = self.expr(&me.key);
                        me.value = self.expr(&me.value);
                    }
                }
                Expr::Map(m)
            }
            Expr::Struct(s) => {
                let mut s = s.clone();
                for entry in &mut s.entries {
                    if let EntryExpr::StructField(sf) = &mut entry.expr {
                        sf.value = self.expr(&sf.value);
                    }
                }
                Expr::Struct(s)
            }
            Expr::Select(s) => {
                let mut s = s.clone();
                *s.operand = self.expr(&s.operand);
                Expr::Select(s)
            }
            other => other.clone(),
        };
        IdedExpr { id: e.id, expr }
    }

    /// The expansion of a receiver macro, or the call's parts back when `name` with this
    /// many arguments is not one.
    fn receiver_macro(
        &mut self,
        name: &str,
        target: IdedExpr,
        mut args: Vec<IdedExpr>,
    ) -> Result<IdedExpr, (IdedExpr, Vec<IdedExpr>)> {
        let n = args.len();
        match (name, n) {
            ("all" | "exists" | "existsOne" | "exists_one", 3)
            | ("transformList" | "transformMap" | "transformMapEntry", 3 | 4) => {
                let Some((v1, v2)) = self.iter_vars(&args[0], &args[1]) else {
                    return Ok(target);
                };
                let body = args.pop().expect("three arguments");
                let filter = if n == 4 { args.pop() } else { None };
                let accu = || ACCU;
                let expanded = match name {
                    "all" => {
                        let init = self.bool(true);
                        let a = self.ident(accu());
                        let cond = self.call("@not_strictly_false", None, vec![a]);
                        let a = self.ident(accu());
                        let step = self.call("_&&_", None, vec![a, body]);
                        let result = self.ident(accu());
                        self.comprehension(target, &v1, Some(&v2), ACCU, init, cond, step, result)
                    }
                    "exists" => {
                        let init = self.bool(false);
                        let a = self.ident(accu());
                        let not = self.call("!_", None, vec![a]);
                        let cond = self.call("@not_strictly_false", None, vec![not]);
                        let a = self.ident(accu());
                        let step = self.call("_||_", None, vec![a, body]);
                        let result = self.ident(accu());
                        self.comprehension(target, &v1, Some(&v2), ACCU, init, cond, step, result)
                    }
                    "existsOne" | "exists_one" => {
                        let init = self.int(0);
                        let cond = self.bool(true);
                        let a = self.ident(accu());
                        let one = self.int(1);
                        let plus = self.call("_+_", None, vec![a, one]);
                        let a = self.ident(accu());
                        let step = self.call("_?_:_", None, vec![body, plus, a]);
                        let a = self.ident(accu());
                        let one = self.int(1);
                        let result = self.call("_==_", None, vec![a, one]);
                        self.comprehension(target, &v1, Some(&v2), ACCU, init, cond, step, result)
                    }
                    _ => {
                        let (init, step) = if name == "transformList" {
                            let init = self.list(Vec::new());
                            let a = self.ident(accu());
                            let l = self.list(vec![body]);
                            (init, self.call("_+_", None, vec![a, l]))
                        } else {
                            let init = self.node(Expr::Map(MapExpr { entries: Vec::new() }));
                            let a = self.ident(accu());
                            let call_args = if name == "transformMap" {
                                let k = self.ident(&v1);
                                vec![a, k, body]
                            } else {
                                vec![a, body]
                            };
                            (init, self.call("cel.@mapInsert", None, call_args))
                        };
                        let step = match filter {
                            Some(filter) => {
                                let a = self.ident(accu());
                                self.call("_?_:_", None, vec![filter, step, a])
                            }
                            None => step,
                        };
                        let cond = self.bool(true);
                        let result = self.ident(accu());
                        self.comprehension(target, &v1, Some(&v2), ACCU, init, cond, step, result)
                    }
                };
                Ok(expanded)
            }
            ("optMap" | "optFlatMap", 2) => {
                let var = match &args[0].expr {
                    Expr::Ident(v) => v.clone(),
                    _ => {
                        self.errors.push((
                            args[0].id,
                            format!("{name}() variable name must be a simple identifier"),
                        ));
                        return Ok(target);
                    }
                };
                let body = args.pop().expect("two arguments");
                // cel-go 0.32 (the oracle's) binds a target that is not an identifier to
                // `@target` first, so that it is evaluated once.
                let (bound, target) = match target.expr {
                    Expr::Ident(_) => (None, target),
                    _ => (Some(target), self.ident(TARGET)),
                };
                let target_copy = self.copy(&target);
                let has_value = self.call("hasValue", Some(target), Vec::new());
                let value = self.call("value", Some(target_copy), Vec::new());
                let range = self.list(Vec::new());
                let cond = self.bool(false);
                let step = self.ident(&var);
                let fold = self.comprehension(range, "#unused", None, &var, value, cond, step, body);
                let present =
                    if name == "optMap" { self.call("optional.of", None, vec![fold]) } else { fold };
                let none = self.call("optional.none", None, Vec::new());
                let result = self.call("_?_:_", None, vec![has_value, present, none]);
                Ok(match bound {
                    None => result,
                    Some(bound) => {
                        let range = self.list(Vec::new());
                        let cond = self.bool(false);
                        let step = self.ident(TARGET);
                        self.comprehension(range, "#unused", None, TARGET, bound, cond, step, result)
                    }
                })
            }
            ("sortBy", 2) => {
                if !matches!(
                    target.expr,
                    Expr::List(_) | Expr::Select(_) | Expr::Ident(_) | Expr::Comprehension(_) | Expr::Call(_)
                ) {
                    self.errors.push((
                        target.id,
                        "sortBy can only be applied to a list, identifier, comprehension, call or select expression"
                            .into(),
                    ));
                    return Ok(target);
                }
                let input = "@__sortBy_input__";
                let var = match &args[0].expr {
                    Expr::Ident(v) => v.clone(),
                    _ => {
                        self.errors.push((args[0].id, "argument is not an identifier".into()));
                        return Ok(target);
                    }
                };
                if var == ACCU || var == OLD_ACCU {
                    self.errors
                        .push((args[0].id, "iteration variable overwrites accumulator variable".into()));
                    return Ok(target);
                }
                let key = args.pop().expect("two arguments");
                let range = self.ident(input);
                let init = self.list(Vec::new());
                let cond = self.bool(true);
                let a = self.ident(ACCU);
                let l = self.list(vec![key]);
                let step = self.call("_+_", None, vec![a, l]);
                let result = self.ident(ACCU);
                let keys = self.comprehension(range, &var, None, ACCU, init, cond, step, result);
                let recv = self.ident(input);
                let sorted = self.call("@sortByAssociatedKeys", Some(recv), vec![keys]);
                let range = self.list(Vec::new());
                let cond = self.bool(false);
                let step = self.ident(input);
                Ok(self.comprehension(range, "#unused", None, input, target, cond, step, sorted))
            }
            _ => Err((target, args)),
        }
    }

    /// `extractIterVars` of the two-variable macros.
    fn iter_vars(&mut self, a0: &IdedExpr, a1: &IdedExpr) -> Option<(String, String)> {
        let simple = |e: &IdedExpr| match &e.expr {
            Expr::Ident(v) => Some(v.clone()),
            _ => None,
        };
        let Some(v1) = simple(a0) else {
            self.errors.push((a0.id, "argument must be a simple name".into()));
            return None;
        };
        let Some(v2) = simple(a1) else {
            self.errors.push((a1.id, "argument must be a simple name".into()));
            return None;
        };
        if v1 == v2 {
            self.errors.push((a1.id, format!("duplicate variable name: {v1}")));
            return None;
        }
        if v1 == ACCU || v1 == OLD_ACCU {
            self.errors.push((a0.id, "iteration variable overwrites accumulator variable".into()));
            return None;
        }
        if v2 == ACCU || v2 == OLD_ACCU {
            self.errors.push((a1.id, "iteration variable overwrites accumulator variable".into()));
            return None;
        }
        Some((v1, v2))
    }
}
