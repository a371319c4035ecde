//! From source to a [`Program`]: `crates/cel-parser` parses (the `cel` crate's grammar and macros);
//! here names are resolved once — comprehension variables to slots, declared variables to
//! the activation's indexes, type names to constants, calls to their overloads — the macros
//! the parser leaves as calls (two-variable comprehensions, `cel.bind`, the optional macros,
//! `sortBy`) are built, and constant literals are folded as cel-go's `OptOptimize` folds them.

use std::sync::Arc;

use cel_parser::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::eval::Node;
use crate::func::{Registry, Style};
use crate::value::{Key, Map, Type, Value};

/// The names an expression may use besides functions and comprehension variables.
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Top-level variables (`object`, `request`, `params`, …); a name's index is its slot in
    /// the [`Activation`](crate::eval::Activation).
    pub variables: Vec<String>,
    /// The composited variables (`variables.<name>`), evaluated lazily by the activation; a
    /// name's index is what [`Activation::lazy`](crate::eval::Activation::lazy) receives.
    pub lazy: Vec<String>,
    /// The name the lazy variables are reached through (`variables`).
    pub lazy_root: Option<String>,
}

impl Declarations {
    pub fn with_variables(names: &[&str]) -> Declarations {
        Declarations { variables: names.iter().map(|n| (*n).to_owned()).collect(), ..Declarations::default() }
    }
}

/// A compiled expression.
#[derive(Debug)]
pub struct Program {
    pub(crate) root: Node,
    /// Comprehension variable slots the evaluation needs.
    pub(crate) locals: usize,
    /// Which declared variables the expression reads (by index).
    pub reads: Vec<bool>,
    /// Which lazy variables it reads (by index).
    pub reads_lazy: Vec<bool>,
}

/// Compiles `source` against `declarations` and the functions of `registry`. `Err` is the
/// compile error's text.
pub fn compile(source: &str, declarations: &Declarations, registry: &Registry) -> Result<Program, String> {
    let parsed = crate::parse(source)?;
    let mut compiler = Compiler {
        declarations,
        registry,
        scopes: Vec::new(),
        max_locals: 0,
        reads: vec![false; declarations.variables.len()],
        reads_lazy: vec![false; declarations.lazy.len()],
    };
    let root = compiler.expr(&parsed.expr)?;
    Ok(Program { root, locals: compiler.max_locals, reads: compiler.reads, reads_lazy: compiler.reads_lazy })
}

struct Compiler<'a> {
    declarations: &'a Declarations,
    registry: &'a Registry,
    /// Comprehension variables in scope, innermost last; a name's position is its slot.
    scopes: Vec<String>,
    max_locals: usize,
    reads: Vec<bool>,
    reads_lazy: Vec<bool>,
}

type Compiled = Result<Node, String>;

fn undeclared(name: &str) -> String {
    format!("undeclared reference to '{name}' (in container '')")
}

impl Compiler<'_> {
    fn push(&mut self, name: &str) -> usize {
        self.scopes.push(name.to_owned());
        self.max_locals = self.max_locals.max(self.scopes.len());
        self.scopes.len() - 1
    }

    fn pop(&mut self, n: usize) {
        self.scopes.truncate(self.scopes.len() - n);
    }

    fn local(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rposition(|n| n == name)
    }

    fn expr(&mut self, e: &IdedExpr) -> Compiled {
        match &e.expr {
            Expr::Literal(literal) => Ok(Node::Const(literal_value(literal))),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                // A qualified name (`google.protobuf.Timestamp`) or `variables.x`.
                if let Some(node) = self.qualified(e)? {
                    return Ok(node);
                }
                let operand = self.expr(&select.operand)?;
                Ok(Node::Select {
                    operand: Box::new(operand),
                    field: Arc::from(select.field.as_str()),
                    test: select.test,
                })
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let items = list.elements.iter().map(|e| self.expr(e)).collect::<Result<Vec<_>, _>>()?;
                let optional: Vec<bool> =
                    (0..items.len()).map(|i| list.optional_indices.contains(&i)).collect();
                if optional.iter().all(|o| !o) && items.iter().all(|n| matches!(n, Node::Const(_))) {
                    let values =
                        items.into_iter().map(|n| if let Node::Const(v) = n { v } else { Value::Null });
                    return Ok(Node::Const(Value::list(values.collect())));
                }
                Ok(Node::List { items, optional })
            }
            Expr::Map(map) => {
                let mut entries = Vec::with_capacity(map.entries.len());
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(m) => {
                            entries.push((self.expr(&m.key)?, self.expr(&m.value)?, m.optional))
                        }
                        EntryExpr::StructField(_) => return Err("struct fields in a map literal".into()),
                    }
                }
                if let Some(folded) = fold_map(&entries) {
                    return Ok(Node::Const(folded));
                }
                Ok(Node::Map { entries })
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range)?;
                let init = self.expr(&c.accu_init)?;
                let accu = self.push(&c.accu_var);
                let var1 = self.push(&c.iter_var);
                let var2 = c.iter_var2.as_deref().map(|v| self.push(v));
                let cond = self.expr(&c.loop_cond);
                let step = self.expr(&c.loop_step);
                self.pop(if var2.is_some() { 2 } else { 1 });
                let result = self.expr(&c.result);
                self.pop(1);
                Ok(Node::fold(range, var1, var2, accu, init, cond?, step?, result?))
            }
            Expr::Struct(s) => {
                let name = s.type_name.strip_prefix('.').unwrap_or(&s.type_name);
                let kind = match self.registry.has_mutation_types() {
                    true => crate::mutation::Kind::of(name),
                    false => None,
                };
                let Some(kind) = kind else { return Err(format!("unknown type '{}'", s.type_name)) };
                let mut fields = Vec::with_capacity(s.entries.len());
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => {
                            fields.push((Arc::from(f.field.as_str()), self.expr(&f.value)?, f.optional))
                        }
                        EntryExpr::MapEntry(_) => return Err("map entries in a struct literal".into()),
                    }
                }
                Ok(Node::Struct { kind, fields })
            }
            Expr::Unspecified => Err("unspecified expression".into()),
        }
    }

    fn ident(&mut self, name: &str) -> Compiled {
        if let Some(slot) = self.local(name) {
            return Ok(Node::Local(slot));
        }
        if let Some(i) = self.declarations.variables.iter().position(|v| v == name) {
            self.reads[i] = true;
            return Ok(Node::Var(i));
        }
        if let Some(t) = Type::from_ident(name) {
            return Ok(Node::Const(Value::Type(t)));
        }
        Err(undeclared(name))
    }

    /// `a.b.c` as one dotted name, when `a` is not a variable: a type name, or a lazy
    /// variable `variables.x`.
    fn qualified(&mut self, e: &IdedExpr) -> Result<Option<Node>, String> {
        let Some(name) = dotted(e) else { return Ok(None) };
        let root = name.split('.').next().unwrap_or_default();
        if self.local(root).is_some() || self.declarations.variables.iter().any(|v| v == root) {
            return Ok(None);
        }
        if let Some(lazy_root) = &self.declarations.lazy_root {
            if root == lazy_root {
                if let Some((_, field)) = name.split_once('.') {
                    if let Some(i) = self.declarations.lazy.iter().position(|v| v == field) {
                        self.reads_lazy[i] = true;
                        return Ok(Some(Node::Lazy(i)));
                    }
                    if !field.contains('.') {
                        return Err(undeclared(&name));
                    }
                }
            }
        }
        if let Some(t) = Type::from_ident(&name) {
            return Ok(Some(Node::Const(Value::Type(t))));
        }
        Ok(None)
    }

    fn call(&mut self, call: &CallExpr) -> Compiled {
        let name = call.func_name.as_str();
        let args = &call.args;
        match (name, call.target.as_deref(), args.len()) {
            ("_&&_", None, 2) => {
                return Ok(Node::And(Box::new(self.expr(&args[0])?), Box::new(self.expr(&args[1])?)));
            }
            ("_||_", None, 2) => {
                return Ok(Node::Or(Box::new(self.expr(&args[0])?), Box::new(self.expr(&args[1])?)));
            }
            ("!_", None, 1) => return Ok(Node::Not(Box::new(self.expr(&args[0])?))),
            ("_?_:_", None, 3) => {
                return Ok(Node::Cond(
                    Box::new(self.expr(&args[0])?),
                    Box::new(self.expr(&args[1])?),
                    Box::new(self.expr(&args[2])?),
                ));
            }
            ("@not_strictly_false", None, 1) => {
                return Ok(Node::NotStrictlyFalse(Box::new(self.expr(&args[0])?)))
            }
            ("_[_]", None, 2) => {
                return Ok(Node::Index {
                    operand: Box::new(self.expr(&args[0])?),
                    index: Box::new(self.expr(&args[1])?),
                    optional: false,
                });
            }
            ("_[?_]", None, 2) => {
                return Ok(Node::Index {
                    operand: Box::new(self.expr(&args[0])?),
                    index: Box::new(self.expr(&args[1])?),
                    optional: true,
                });
            }
            ("_?._", None, 2) => {
                let field = match &args[1].expr {
                    Expr::Literal(LiteralValue::String(s)) => Arc::from(s.as_str()),
                    _ => return Err("unsupported optional field selection".into()),
                };
                return Ok(Node::OptSelect { operand: Box::new(self.expr(&args[0])?), field });
            }
            _ => {}
        }
        if let Some(target) = call.target.as_deref() {
            if let Some(node) = self.receiver_macro(name, target, args)? {
                return Ok(node);
            }
            // `optional.of(x)`, `lists.range(n)`: a dotted global, when the target is not a value.
            if let Some(prefix) = dotted(target) {
                let root = prefix.split('.').next().unwrap_or_default();
                let shadowed =
                    self.local(root).is_some() || self.declarations.variables.iter().any(|v| v == root);
                let qualified = format!("{prefix}.{name}");
                if !shadowed && self.registry.has_name(&qualified) {
                    return self.function(&qualified, Style::Global, None, args);
                }
            }
            return self.function(name, Style::Receiver, Some(target), args);
        }
        self.function(name, Style::Global, None, args)
    }

    fn function(
        &mut self,
        name: &str,
        style: Style,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Compiled {
        let Some(overloads) = self.registry.find(name, style, args.len()) else {
            return Err(match self.registry.has_name(name) {
                true => {
                    format!("found no matching overload for '{name}' applied to {} argument(s)", args.len())
                }
                false => format!("undeclared reference to '{name}' (in container '')"),
            });
        };
        let mut nodes = Vec::with_capacity(args.len() + 1);
        if let Some(target) = target {
            nodes.push(self.expr(target)?);
        }
        for arg in args {
            nodes.push(self.expr(arg)?);
        }
        if style == Style::Global && CONVERSIONS.contains(&name) {
            if let [Node::Const(value)] = nodes.as_slice() {
                return fold_conversion(&overloads, value.clone());
            }
        }
        Ok(Node::Call { name: Arc::from(name), overloads, args: nodes })
    }

    /// The macros the parser leaves as calls: two-variable comprehensions, `cel.bind`,
    /// `optMap`/`optFlatMap`, `or`/`orValue` (lazy), `sortBy`.
    fn receiver_macro(
        &mut self,
        name: &str,
        target: &IdedExpr,
        args: &[IdedExpr],
    ) -> Result<Option<Node>, String> {
        let ident = |e: &IdedExpr| match &e.expr {
            Expr::Ident(n) => Ok(n.clone()),
            _ => Err(format!("{name}() variable names must be simple identifiers")),
        };
        use crate::eval::Comprehension as C;
        let two = |kind: C| (kind, 3usize);
        let shape = match (name, args.len()) {
            ("all", 3) => Some(two(C::All)),
            ("exists", 3) => Some(two(C::Exists)),
            ("existsOne" | "exists_one", 3) => Some(two(C::ExistsOne)),
            ("transformList", 3 | 4) => Some((C::TransformList, args.len())),
            ("transformMap", 3 | 4) => Some((C::TransformMap, args.len())),
            ("transformMapEntry", 3 | 4) => Some((C::TransformMapEntry, args.len())),
            _ => None,
        };
        if let Some((kind, n)) = shape {
            let range = self.expr(target)?;
            let (a, b) = (ident(&args[0])?, ident(&args[1])?);
            if a == b {
                return Err(format!("{name}() second variable must be different from the first variable"));
            }
            let var1 = self.push(&a);
            let var2 = self.push(&b);
            let filter = if n == 4 { Some(self.expr(&args[2])) } else { None };
            let body = self.expr(&args[n - 1]);
            self.pop(2);
            return Ok(Some(Node::Comprehension {
                kind,
                range: Box::new(range),
                var1,
                var2,
                filter: filter.transpose()?.map(Box::new),
                body: Box::new(body?),
            }));
        }
        if let ("bind", 3, Some("cel")) = (name, args.len(), dotted(target).as_deref()) {
            if self.local("cel").is_none() {
                let var = ident(&args[0])?;
                let init = self.expr(&args[1])?;
                let slot = self.push(&var);
                let body = self.expr(&args[2]);
                self.pop(1);
                return Ok(Some(Node::Bind { slot, init: Box::new(init), body: Box::new(body?) }));
            }
        }
        match (name, args.len()) {
            ("optMap" | "optFlatMap", 2) => {
                let var = ident(&args[0])?;
                let operand = self.expr(target)?;
                let slot = self.push(&var);
                let body = self.expr(&args[1]);
                self.pop(1);
                Ok(Some(Node::OptMap {
                    operand: Box::new(operand),
                    slot,
                    body: Box::new(body?),
                    flat: name == "optFlatMap",
                }))
            }
            ("or" | "orValue", 1) => Ok(Some(Node::OptOr {
                operand: Box::new(self.expr(target)?),
                alternative: Box::new(self.expr(&args[0])?),
                value: name == "orValue",
            })),
            ("sortBy", 2) => {
                let var = ident(&args[0])?;
                let operand = self.expr(target)?;
                let slot = self.push(&var);
                let key = self.expr(&args[1]);
                self.pop(1);
                Ok(Some(Node::SortBy { operand: Box::new(operand), slot, key: Box::new(key?) }))
            }
            _ => Ok(None),
        }
    }
}

/// cel-go's type conversion functions (`overloads.IsTypeConversionFunction`).
const CONVERSIONS: &[&str] =
    &["bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"];

/// A conversion of a constant, made once when the program is built (cel-go's `OptOptimize`,
/// `maybeOptimizeConstUnary`): one that cannot work refuses the program, as the API server
/// refuses it at creation (`program instantiation failed: …`).
fn fold_conversion(overloads: &crate::func::Overloads, value: Value) -> Compiled {
    let mut meter = crate::eval::Meter::new(crate::eval::Limits { cost: u64::MAX, deadline: None });
    let mut ctx = crate::func::Ctx { meter: &mut meter, host: &crate::func::NoHost };
    match crate::func::dispatch(overloads, &mut ctx, &[value]) {
        Ok(folded) => Ok(Node::Const(folded)),
        Err(error) => Err(format!("{INSTANTIATION_FAILED}{}", error.message)),
    }
}

/// The prefix of a compile error cel-go reports when the program is built, not checked.
pub const INSTANTIATION_FAILED: &str = "program instantiation failed: ";

/// `a.b.c` as a dotted name, when the expression is only identifiers and selections.
fn dotted(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => dotted(&s.operand).map(|prefix| format!("{prefix}.{}", s.field)),
        _ => None,
    }
}

fn literal_value(literal: &LiteralValue) -> Value {
    match literal {
        LiteralValue::Boolean(b) => Value::Bool(*b),
        LiteralValue::Bytes(b) => Value::Bytes(Arc::from(b.as_slice())),
        LiteralValue::Double(d) => Value::Double(*d),
        LiteralValue::Int(i) => Value::Int(*i),
        LiteralValue::Null => Value::Null,
        LiteralValue::String(s) => Value::String(Arc::from(s.as_str())),
        LiteralValue::UInt(u) => Value::Uint(*u),
    }
}

/// A map literal of constants, built once (cel-go's `maybeBuildMapLiteral`); `None` when an
/// entry is not constant, optional, or its key is not a valid key.
fn fold_map(entries: &[(Node, Node, bool)]) -> Option<Value> {
    let mut map = Map::with_capacity(entries.len());
    for (k, v, optional) in entries {
        match (k, v, optional) {
            (Node::Const(k), Node::Const(v), false) => {
                let key = Key::from_value(k).ok()?;
                if map.insert(key, v.clone()).is_some() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(Value::map(map))
}
