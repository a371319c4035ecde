//! Evaluation of a compiled [`Program`] with cel-go's semantics and runtime cost.
//!
//! - Errors are values until something absorbs or reports them: `&&` and `||` absorb an error
//!   when the other side decides (false, true), the macros inherit that through their steps,
//!   and a limit or a cancellation is fatal (never absorbed).
//! - Cost is cel-go's `CostTracker`: 1 per identifier, selection and index, 0 per constant,
//!   10 per list and 30 per map built, each call's own cost ([`crate::func::Cost`]) after it
//!   returns; the limit is checked after every charge, as cel-go's observer does.
//! - Interruption: a comprehension checks the caller's deadline every
//!   [`INTERRUPT_CHECK_FREQUENCY`] iterations (cel-go's `InterruptCheckFrequency`, which the
//!   API server sets to 100); a deadline never changes an answer, it only stops the work.

use std::sync::Arc;
use std::time::Instant;

use crate::compile::Program;
use crate::error::{Error, Result};
use crate::func::{self, Ctx, Host, Overloads};
use crate::value::{lookup, Key, Map, Value};

/// How often a comprehension checks for cancellation, in iterations.
pub const INTERRUPT_CHECK_FREQUENCY: u32 = 100;

const LIST_CREATE_COST: u64 = 10;
const MAP_CREATE_COST: u64 = 30;
const STRUCT_CREATE_COST: u64 = 40;

/// The cost spent so far, the limit, and the caller's deadline.
#[derive(Debug)]
pub struct Meter {
    pub cost: u64,
    pub limit: u64,
    pub deadline: Option<Instant>,
    ticks: u32,
}

/// Limits of one evaluation.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The cost limit (the API server's `PerCallLimit`, 1,000,000, unless a budget left is
    /// smaller).
    pub cost: u64,
    pub deadline: Option<Instant>,
}

impl Meter {
    pub fn new(limits: Limits) -> Meter {
        Meter { cost: 0, limit: limits.cost, deadline: limits.deadline, ticks: 0 }
    }

    pub fn charge(&mut self, cost: u64) -> Result<()> {
        self.cost = self.cost.saturating_add(cost);
        if self.cost > self.limit {
            return Err(Error::cost_limit());
        }
        Ok(())
    }

    /// A comprehension's iteration: checks the deadline every so often.
    fn tick(&mut self) -> Result<()> {
        self.ticks += 1;
        if self.ticks >= INTERRUPT_CHECK_FREQUENCY {
            self.ticks = 0;
            self.check_deadline()?;
        }
        Ok(())
    }

    pub fn check_deadline(&self) -> Result<()> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(Error::cancelled()),
            _ => Ok(()),
        }
    }
}

/// The values of the declared variables, and the lazily evaluated ones.
pub trait Activation {
    /// The value of declared variable `index` (`Value::Null` when it has none).
    fn var(&self, index: usize) -> Value;

    /// The value of lazy variable `index` (`variables.<name>`), evaluated on first use; its
    /// cost is charged to `meter`.
    fn lazy(&self, index: usize, meter: &mut Meter, host: &dyn Host) -> Result<Value> {
        let _ = (index, meter, host);
        Err(Error::new("no such variable"))
    }
}

/// An activation of plain values, in declaration order.
impl Activation for [Value] {
    fn var(&self, index: usize) -> Value {
        self.get(index).cloned().unwrap_or(Value::Null)
    }
}

impl Activation for Vec<Value> {
    fn var(&self, index: usize) -> Value {
        self.get(index).cloned().unwrap_or(Value::Null)
    }
}

/// The two-variable comprehensions (cel-go `ext.TwoVarComprehensions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comprehension {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// A compiled expression's node.
#[derive(Debug)]
pub(crate) enum Node {
    Const(Value),
    Var(usize),
    Lazy(usize),
    Local(usize),
    Select {
        operand: Box<Node>,
        field: Arc<str>,
        test: bool,
    },
    OptSelect {
        operand: Box<Node>,
        field: Arc<str>,
    },
    Index {
        operand: Box<Node>,
        index: Box<Node>,
        optional: bool,
    },
    Call {
        name: Arc<str>,
        overloads: Overloads,
        args: Vec<Node>,
    },
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    NotStrictlyFalse(Box<Node>),
    List {
        items: Vec<Node>,
        optional: Vec<bool>,
    },
    Map {
        entries: Vec<(Node, Node, bool)>,
    },
    /// A `JSONPatch{…}` or `Object…{…}` literal: its fields (name, value, optional) in order.
    Struct {
        kind: crate::mutation::Kind,
        fields: Vec<(Arc<str>, Node, bool)>,
    },
    Fold(Box<Fold>),
    Comprehension {
        kind: Comprehension,
        range: Box<Node>,
        var1: usize,
        var2: usize,
        filter: Option<Box<Node>>,
        body: Box<Node>,
    },
    Bind {
        slot: usize,
        init: Box<Node>,
        body: Box<Node>,
    },
    OptMap {
        operand: Box<Node>,
        slot: usize,
        body: Box<Node>,
        flat: bool,
    },
    OptOr {
        operand: Box<Node>,
        alternative: Box<Node>,
        value: bool,
    },
    SortBy {
        operand: Box<Node>,
        slot: usize,
        key: Box<Node>,
    },
}

/// A macro's comprehension as the parser expands it.
#[derive(Debug)]
pub(crate) struct Fold {
    range: Node,
    var1: usize,
    var2: Option<usize>,
    accu: usize,
    init: Node,
    cond: Node,
    step: Step,
    result: Node,
}

/// A comprehension's step; `accu + [e]` (the `map` and `filter` macros) appends in place
/// rather than copying the accumulated list at every iteration (cel-go's mutable list).
#[derive(Debug)]
enum Step {
    General(Node),
    Append(Node),
    AppendIf(Node, Node),
}

impl Node {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fold(
        range: Node,
        var1: usize,
        var2: Option<usize>,
        accu: usize,
        init: Node,
        cond: Node,
        step: Node,
        result: Node,
    ) -> Node {
        let step = match step {
            Node::Cond(filter, then, otherwise) if matches!(*otherwise, Node::Local(s) if s == accu) => {
                match appended(*then, accu) {
                    Ok(element) => Step::AppendIf(*filter, element),
                    Err(then) => Step::General(Node::Cond(filter, Box::new(then), otherwise)),
                }
            }
            other => match appended(other, accu) {
                Ok(element) => Step::Append(element),
                Err(other) => Step::General(other),
            },
        };
        Node::Fold(Box::new(Fold { range, var1, var2, accu, init, cond, step, result }))
    }
}

/// `accu + [e]` → `Ok(e)`; anything else back as it was.
fn appended(node: Node, accu: usize) -> std::result::Result<Node, Node> {
    match node {
        Node::Call { name, overloads, mut args }
            if &*name == "_+_" && args.len() == 2 && matches!(args[0], Node::Local(s) if s == accu) =>
        {
            let single = match &args[1] {
                Node::List { items, optional } => items.len() == 1 && !optional[0],
                Node::Const(Value::List(l)) => l.len() == 1,
                _ => false,
            };
            if !single {
                return Err(Node::Call { name, overloads, args });
            }
            match args.pop() {
                Some(Node::List { mut items, .. }) => Ok(items.pop().unwrap_or(Node::Const(Value::Null))),
                Some(Node::Const(Value::List(l))) => Ok(Node::Const(l[0].clone())),
                _ => Err(Node::Const(Value::Null)),
            }
        }
        other => Err(other),
    }
}

impl Program {
    /// Evaluates the program. `Err` is the evaluation's error (a limit, a cancellation, or a
    /// runtime error nothing absorbed).
    pub fn evaluate(&self, activation: &dyn Activation, host: &dyn Host, meter: &mut Meter) -> Result<Value> {
        let mut frame = Frame { activation, host, meter, locals: vec![Ok(Value::Null); self.locals] };
        frame.eval(&self.root)
    }
}

struct Frame<'a> {
    activation: &'a dyn Activation,
    host: &'a dyn Host,
    meter: &'a mut Meter,
    /// Comprehension variables; an accumulator may hold an error, as in cel-go.
    locals: Vec<Result<Value>>,
}

fn bool_of(v: &Result<Value>) -> Option<bool> {
    match v {
        Ok(Value::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// A non-bool operand of a logical operator is `no such overload`.
fn logical_error(v: Result<Value>) -> Error {
    match v {
        Err(e) => e,
        Ok(_) => Error::no_such_overload(),
    }
}

impl Frame<'_> {
    fn eval(&mut self, node: &Node) -> Result<Value> {
        match node {
            Node::Const(v) => Ok(v.clone()),
            Node::Var(i) => {
                self.meter.charge(1)?;
                Ok(self.activation.var(*i))
            }
            Node::Lazy(i) => {
                // `variables` and its field: an identifier and a selection.
                self.meter.charge(2)?;
                self.activation.lazy(*i, self.meter, self.host)
            }
            Node::Local(slot) => {
                self.meter.charge(1)?;
                self.locals[*slot].clone()
            }
            Node::Select { operand, field, test } => {
                let operand = self.eval(operand)?;
                if *test {
                    // has(): the presence test costs nothing itself (PresenceTestHasCost false).
                    return select_test(&operand, field);
                }
                self.meter.charge(1)?;
                select(&operand, field)
            }
            Node::OptSelect { operand, field } => {
                let operand = self.eval(operand)?;
                self.meter.charge(1)?;
                opt_select(&operand, field)
            }
            Node::Index { operand, index, optional } => {
                let operand = self.eval(operand)?;
                let index = self.eval(index)?;
                self.meter.charge(1)?;
                if *optional {
                    opt_index(&operand, &index)
                } else {
                    match operand {
                        Value::Optional(inner) => match inner {
                            None => Ok(Value::Optional(None)),
                            Some(v) => opt_index(&v, &index),
                        },
                        operand => self::index(&operand, &index),
                    }
                }
            }
            Node::Call { overloads, args, .. } => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(self.eval(arg)?);
                }
                let mut ctx = Ctx { meter: self.meter, host: self.host };
                func::dispatch(overloads, &mut ctx, &values)
            }
            Node::And(a, b) => {
                let left = self.eval(a);
                if matches!(&left, Err(e) if e.is_fatal()) || bool_of(&left) == Some(false) {
                    return left;
                }
                let right = self.eval(b);
                and(left, right)?
            }
            Node::Or(a, b) => {
                let left = self.eval(a);
                if matches!(&left, Err(e) if e.is_fatal()) || bool_of(&left) == Some(true) {
                    return left;
                }
                let right = self.eval(b);
                or(left, right)?
            }
            Node::Not(a) => {
                let v = self.eval(a)?;
                self.meter.charge(1)?;
                match v {
                    Value::Bool(b) => Ok(Value::Bool(!b)),
                    _ => Err(Error::no_such_overload()),
                }
            }
            Node::Cond(c, t, f) => match self.eval(c)? {
                Value::Bool(true) => self.eval(t),
                Value::Bool(false) => self.eval(f),
                _ => Err(Error::no_such_overload()),
            },
            Node::NotStrictlyFalse(a) => {
                let v = self.eval(a);
                self.meter.charge(1)?;
                match v {
                    Err(e) if e.is_fatal() => Err(e),
                    Ok(Value::Bool(false)) => Ok(Value::Bool(false)),
                    _ => Ok(Value::Bool(true)),
                }
            }
            Node::List { items, optional } => {
                let mut out = Vec::with_capacity(items.len());
                for (item, optional) in items.iter().zip(optional) {
                    let v = self.eval(item)?;
                    if *optional {
                        match v {
                            Value::Optional(Some(v)) => out.push((*v).clone()),
                            Value::Optional(None) => {}
                            _ => return Err(Error::no_such_overload()),
                        }
                    } else {
                        out.push(v);
                    }
                }
                self.meter.charge(LIST_CREATE_COST)?;
                Ok(Value::list(out))
            }
            Node::Map { entries } => {
                let mut map = Map::with_capacity(entries.len());
                for (k, v, optional) in entries {
                    let key = Key::from_value(&self.eval(k)?)?;
                    let value = self.eval(v)?;
                    let value = if *optional {
                        match value {
                            Value::Optional(Some(v)) => (*v).clone(),
                            Value::Optional(None) => continue,
                            _ => return Err(Error::no_such_overload()),
                        }
                    } else {
                        value
                    };
                    if map.insert(key, value).is_some() {
                        return Err(Error::new("duplicate key in map literal"));
                    }
                }
                self.meter.charge(MAP_CREATE_COST)?;
                Ok(Value::map(map))
            }
            Node::Struct { kind, fields } => {
                let built = self.build_struct(kind, fields);
                // cel-go's cost observer charges the literal whatever it evaluated to.
                if !matches!(&built, Err(e) if e.is_fatal()) {
                    self.meter.charge(STRUCT_CREATE_COST)?;
                }
                built
            }
            Node::Fold(fold) => self.fold(fold),
            Node::Comprehension { kind, range, var1, var2, filter, body } => {
                let range = self.eval(range)?;
                self.comprehension(*kind, &range, *var1, *var2, filter.as_deref(), body)
            }
            Node::Bind { slot, init, body } => {
                let init = self.eval(init);
                if matches!(&init, Err(e) if e.is_fatal()) {
                    return init;
                }
                self.locals[*slot] = init;
                self.eval(body)
            }
            Node::OptMap { operand, slot, body, flat } => match self.eval(operand)? {
                Value::Optional(None) => Ok(Value::Optional(None)),
                Value::Optional(Some(v)) => {
                    self.locals[*slot] = Ok((*v).clone());
                    let out = self.eval(body)?;
                    if *flat {
                        match out {
                            Value::Optional(_) => Ok(out),
                            _ => Err(Error::no_such_overload()),
                        }
                    } else {
                        Ok(Value::Optional(Some(Arc::new(out))))
                    }
                }
                _ => Err(Error::no_such_overload()),
            },
            Node::OptOr { operand, alternative, value } => match self.eval(operand)? {
                Value::Optional(Some(v)) => {
                    self.meter.charge(1)?;
                    Ok(if *value { (*v).clone() } else { Value::Optional(Some(v)) })
                }
                Value::Optional(None) => {
                    let alt = self.eval(alternative)?;
                    self.meter.charge(1)?;
                    if !*value && !matches!(alt, Value::Optional(_)) {
                        return Err(Error::no_such_overload());
                    }
                    Ok(alt)
                }
                _ => Err(Error::no_such_overload()),
            },
            Node::SortBy { operand, slot, key } => {
                let Value::List(list) = self.eval(operand)? else { return Err(Error::no_such_overload()) };
                let mut keyed = Vec::with_capacity(list.len());
                for item in list.iter() {
                    self.locals[*slot] = Ok(item.clone());
                    keyed.push((self.eval(key)?, item.clone()));
                }
                sort_keyed(&mut keyed)?;
                self.meter.charge(1)?;
                Ok(Value::list(keyed.into_iter().map(|(_, v)| v).collect()))
            }
        }
    }

    /// cel-go's `evalObj`: the fields in order (an optional field without a value removes
    /// the field), then the type provider's value of them.
    fn build_struct(
        &mut self,
        kind: &crate::mutation::Kind,
        fields: &[(Arc<str>, Node, bool)],
    ) -> Result<Value> {
        let mut values: indexmap::IndexMap<Arc<str>, Value> = indexmap::IndexMap::with_capacity(fields.len());
        for (name, node, optional) in fields {
            let value = self.eval(node)?;
            if !*optional {
                values.insert(name.clone(), value);
                continue;
            }
            match value {
                Value::Optional(Some(v)) => {
                    values.insert(name.clone(), (*v).clone());
                }
                Value::Optional(None) => {
                    values.shift_remove(name);
                }
                other => {
                    return Err(Error::new(format!(
                        "cannot initialize optional entry '{name}' from non-optional value {}",
                        go_value_text(&other)
                    )))
                }
            }
        }
        kind.build(values)
    }

    fn fold(&mut self, fold: &Fold) -> Result<Value> {
        let range = self.eval(&fold.range)?;
        let init = self.eval(&fold.init);
        if matches!(&init, Err(e) if e.is_fatal()) {
            return init;
        }
        let mut accu = init;
        let items: Box<dyn Iterator<Item = (Value, Value)>> = match &range {
            Value::List(list) => {
                Box::new(list.iter().enumerate().map(|(i, v)| (Value::Int(i as i64), v.clone())))
            }
            Value::Map(map) => Box::new(map.iter().map(|(k, v)| (k.to_value(), v.clone()))),
            _ => return Err(Error::new(format!("got '{}', expected iterable type", range.type_name()))),
        };
        for (first, second) in items {
            self.meter.tick()?;
            match (fold.var2, &range) {
                (Some(var2), _) => {
                    self.locals[fold.var1] = Ok(first);
                    self.locals[var2] = Ok(second);
                }
                (None, Value::List(_)) => self.locals[fold.var1] = Ok(second),
                (None, _) => self.locals[fold.var1] = Ok(first),
            }
            self.locals[fold.accu] = accu;
            let cond = self.eval(&fold.cond);
            if matches!(&cond, Err(e) if e.is_fatal()) {
                return cond;
            }
            if bool_of(&cond) == Some(false) {
                accu = std::mem::replace(&mut self.locals[fold.accu], Ok(Value::Null));
                break;
            }
            accu = match &fold.step {
                Step::General(step) => {
                    let next = self.eval(step);
                    self.locals[fold.accu] = Ok(Value::Null);
                    next
                }
                Step::Append(element) => self.append(fold.accu, None, element),
                Step::AppendIf(filter, element) => self.append(fold.accu, Some(filter), element),
            };
            if matches!(&accu, Err(e) if e.is_fatal()) {
                return accu;
            }
        }
        self.locals[fold.accu] = accu;
        let result = self.eval(&fold.result);
        self.locals[fold.accu] = Ok(Value::Null);
        result
    }

    /// `accu + [element]` (if `filter`), in place: the accumulator is taken out of its slot so
    /// that its list is not shared and can grow without a copy.
    fn append(&mut self, accu: usize, filter: Option<&Node>, element: &Node) -> Result<Value> {
        let taken = std::mem::replace(&mut self.locals[accu], Ok(Value::Null));
        if let Some(filter) = filter {
            match self.eval(filter)? {
                Value::Bool(true) => {}
                Value::Bool(false) => {
                    self.meter.charge(1)?;
                    return taken;
                }
                _ => return Err(Error::no_such_overload()),
            }
        }
        let element = self.eval(element);
        if matches!(&element, Err(e) if e.is_fatal()) {
            return element;
        }
        // accu (1), the one-element list (10), `_+_` (1), as cel-go charges `accu + [e]`.
        self.meter.charge(1 + LIST_CREATE_COST + 1)?;
        // `accu + [e]`: the accumulator's error first, as the operands are in that order.
        let accumulated = taken?;
        let element = element?;
        match accumulated {
            Value::List(mut list) => {
                Arc::make_mut(&mut list).push(element);
                Ok(Value::List(list))
            }
            _ => Err(Error::no_such_overload()),
        }
    }

    fn comprehension(
        &mut self,
        kind: Comprehension,
        range: &Value,
        var1: usize,
        var2: usize,
        filter: Option<&Node>,
        body: &Node,
    ) -> Result<Value> {
        let entries: Box<dyn Iterator<Item = (Value, Value)>> = match (range, kind) {
            (Value::List(list), _) => {
                Box::new(list.iter().enumerate().map(|(i, v)| (Value::Int(i as i64), v.clone())))
            }
            (Value::Map(map), _) => Box::new(map.iter().map(|(k, v)| (k.to_value(), v.clone()))),
            _ => return Err(Error::new(format!("got '{}', expected iterable type", range.type_name()))),
        };
        let mut all = Ok(Value::Bool(true));
        let mut exists = Ok(Value::Bool(false));
        let mut count: i64 = 0;
        let mut list = Vec::new();
        let mut map = Map::new();
        for (first, second) in entries {
            self.meter.tick()?;
            self.locals[var1] = Ok(first.clone());
            self.locals[var2] = Ok(second);
            match kind {
                Comprehension::All => {
                    let v = self.eval(body);
                    // `accu && body`, with the accumulator's cost.
                    self.meter.charge(2)?;
                    all = and(all, v)?;
                    if bool_of(&all) == Some(false) {
                        return Ok(Value::Bool(false));
                    }
                }
                Comprehension::Exists => {
                    let v = self.eval(body);
                    self.meter.charge(2)?;
                    exists = or(exists, v)?;
                    if bool_of(&exists) == Some(true) {
                        return Ok(Value::Bool(true));
                    }
                }
                Comprehension::ExistsOne => {
                    self.meter.charge(1)?;
                    match self.eval(body)? {
                        Value::Bool(true) => count += 1,
                        Value::Bool(false) => {}
                        _ => return Err(Error::no_such_overload()),
                    }
                }
                Comprehension::TransformList
                | Comprehension::TransformMap
                | Comprehension::TransformMapEntry => {
                    if let Some(filter) = filter {
                        match self.eval(filter)? {
                            Value::Bool(true) => {}
                            Value::Bool(false) => continue,
                            _ => return Err(Error::no_such_overload()),
                        }
                    }
                    let v = self.eval(body)?;
                    match kind {
                        Comprehension::TransformList => {
                            self.meter.charge(1 + LIST_CREATE_COST + 1)?;
                            list.push(v);
                        }
                        Comprehension::TransformMap => {
                            self.meter.charge(2)?;
                            map.insert(Key::from_value(&first)?, v);
                        }
                        _ => {
                            self.meter.charge(2)?;
                            let Value::Map(entry) = v else { return Err(Error::no_such_overload()) };
                            for (k, v) in entry.iter() {
                                if map.insert(k.clone(), v.clone()).is_some() {
                                    return Err(Error::new(format!(
                                        "insert failed: key {} already exists",
                                        key_text(k)
                                    )));
                                }
                            }
                        }
                    }
                }
            }
        }
        match kind {
            Comprehension::All => all,
            Comprehension::Exists => exists,
            Comprehension::ExistsOne => Ok(Value::Bool(count == 1)),
            Comprehension::TransformList => Ok(Value::list(list)),
            _ => Ok(Value::map(map)),
        }
    }
}

fn key_text(k: &Key) -> String {
    match k {
        Key::Bool(b) => b.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::String(s) => s.to_string(),
    }
}

/// `a && b` on results, absorbing errors as cel-go does (the one logic of `&&` and of the
/// macros' steps); fatal errors pass through as the outer `Err`.
fn and(a: Result<Value>, b: Result<Value>) -> Result<Result<Value>> {
    for v in [&a, &b] {
        if let Err(e) = v {
            if e.is_fatal() {
                return Err(e.clone());
            }
        }
    }
    Ok(match (bool_of(&a), bool_of(&b)) {
        (Some(false), _) | (_, Some(false)) => Ok(Value::Bool(false)),
        (Some(true), Some(true)) => Ok(Value::Bool(true)),
        (Some(true), _) => Err(logical_error(b)),
        _ => Err(logical_error(a)),
    })
}

fn or(a: Result<Value>, b: Result<Value>) -> Result<Result<Value>> {
    for v in [&a, &b] {
        if let Err(e) = v {
            if e.is_fatal() {
                return Err(e.clone());
            }
        }
    }
    Ok(match (bool_of(&a), bool_of(&b)) {
        (Some(true), _) | (_, Some(true)) => Ok(Value::Bool(true)),
        (Some(false), Some(false)) => Ok(Value::Bool(false)),
        (Some(false), _) => Err(logical_error(b)),
        _ => Err(logical_error(a)),
    })
}

fn sort_keyed(keyed: &mut [(Value, Value)]) -> Result<()> {
    let mut failed = false;
    keyed.sort_by(|(a, _), (b, _)| {
        a.compare(b).unwrap_or_else(|| {
            failed = true;
            std::cmp::Ordering::Equal
        })
    });
    if failed {
        return Err(Error::no_such_overload());
    }
    Ok(())
}

/// `operand.field`.
fn select(operand: &Value, field: &str) -> Result<Value> {
    match operand {
        Value::Map(map) => map.get(&Key::str(field)).cloned().ok_or_else(|| Error::no_such_key(field)),
        Value::Object(object) => object.select(field),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(v)) => opt_select(v, field),
        _ => Err(Error::no_such_key(field)),
    }
}

/// `has(operand.field)`: a field of null is absent (the upstream plugin: `has(params.x)` with
/// no params is `false`, not an error).
fn select_test(operand: &Value, field: &str) -> Result<Value> {
    match operand {
        Value::Map(map) => Ok(Value::Bool(map.contains_key(&Key::str(field)))),
        Value::Object(object) => object.has(field).map(Value::Bool),
        Value::Null => Ok(Value::Bool(false)),
        Value::Optional(None) => Ok(Value::Bool(false)),
        Value::Optional(Some(v)) => select_test(v, field),
        _ => Err(Error::no_such_key(field)),
    }
}

/// `operand.?field`.
fn opt_select(operand: &Value, field: &str) -> Result<Value> {
    match operand {
        Value::Map(map) => Ok(Value::Optional(map.get(&Key::str(field)).cloned().map(Arc::new))),
        Value::Object(object) => match object.has(field)? {
            true => Ok(Value::Optional(Some(Arc::new(object.select(field)?)))),
            false => Ok(Value::Optional(None)),
        },
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(v)) => opt_select(v, field),
        _ => Err(Error::no_such_key(field)),
    }
}

/// `operand[index]`.
pub(crate) fn index(operand: &Value, index: &Value) -> Result<Value> {
    match operand {
        Value::List(list) => {
            let i = list_index(index)?;
            usize::try_from(i)
                .ok()
                .and_then(|i| list.get(i))
                .cloned()
                .ok_or_else(|| Error::new(format!("index out of bounds: {i}")))
        }
        Value::Map(map) => match lookup(map, index) {
            Some(v) => Ok(v.clone()),
            None => match index {
                Value::String(s) => Err(Error::no_such_key(s)),
                Value::Bool(_) | Value::Int(_) | Value::Uint(_) | Value::Double(_) => {
                    Err(Error::new(format!("no such key: {}", scalar_text(index))))
                }
                _ => Err(Error::no_such_overload()),
            },
        },
        _ => Err(Error::no_such_overload()),
    }
}

/// `operand[?index]`.
fn opt_index(operand: &Value, index: &Value) -> Result<Value> {
    match operand {
        Value::List(list) => {
            let i = list_index(index)?;
            Ok(Value::Optional(usize::try_from(i).ok().and_then(|i| list.get(i)).cloned().map(Arc::new)))
        }
        Value::Map(map) => Ok(Value::Optional(lookup(map, index).cloned().map(Arc::new))),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(v)) => opt_index(v, index),
        _ => Err(Error::no_such_overload()),
    }
}

/// A list index: an int, a uint, or a double without a fraction.
fn list_index(index: &Value) -> Result<i64> {
    match index {
        Value::Int(i) => Ok(*i),
        Value::Uint(u) => i64::try_from(*u).map_err(|_| Error::new(format!("index out of bounds: {u}"))),
        Value::Double(d) if d.fract() == 0.0 && d.is_finite() => Ok(*d as i64),
        Value::Double(d) => Err(Error::new(format!("unsupported index value {d} in list"))),
        _ => Err(Error::no_such_overload()),
    }
}

/// Go's `%v` of a `ref.Val` (`types.NewErr`'s texts): scalars as Go prints them; other
/// values by their type.
fn go_value_text(v: &Value) -> String {
    match v {
        // `types.Null` is an int32 without a `String` method; `types.Bytes` a byte slice.
        Value::Null => "0".into(),
        Value::Bytes(b) => format!("[{}]", b.iter().map(u8::to_string).collect::<Vec<_>>().join(" ")),
        Value::String(s) => s.to_string(),
        Value::Double(d) => crate::library::standard::go_format_float(*d),
        Value::Bool(_) | Value::Int(_) | Value::Uint(_) => scalar_text(v),
        other => other.type_name().to_owned(),
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => d.to_string(),
        _ => String::new(),
    }
}

/// Compiles and evaluates `source` with the 1.36 libraries and `vars` as its variables, with
/// the API server's per-expression cost limit. For tests and tools.
pub fn evaluate_str(source: &str, vars: &[(&str, Value)]) -> std::result::Result<Value, String> {
    let names: Vec<&str> = vars.iter().map(|(n, _)| *n).collect();
    let registry = crate::library::standard();
    let program = crate::compile(source, &crate::Declarations::with_variables(&names), &registry)?;
    let values: Vec<Value> = vars.iter().map(|(_, v)| v.clone()).collect();
    let mut meter = Meter::new(Limits { cost: 1_000_000, deadline: None });
    program.evaluate(&values, &crate::NoHost, &mut meter).map_err(|e| e.message)
}

/// Runs `f` with a context for calling an overload directly (tests).
pub fn test_ctx<T>(f: impl FnOnce(&mut Ctx<'_>) -> T) -> T {
    let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: None });
    let mut ctx = Ctx { meter: &mut meter, host: &crate::NoHost };
    f(&mut ctx)
}

#[cfg(test)]
mod tests;
