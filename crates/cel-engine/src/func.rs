//! The function registry: each library adds its overloads; a call is dispatched on its name,
//! its style (receiver or global) and its argument count, then on the arguments' types (an
//! overload that does not take them answers [`Error::no_match`] and the next one is tried).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::value::Value;

/// What a function can reach beyond its arguments.
pub struct Ctx<'a> {
    pub(crate) meter: &'a mut crate::eval::Meter,
    pub(crate) host: &'a dyn Host,
}

impl Ctx<'_> {
    /// Charges `cost` units now (for work a function does before its result exists, so a
    /// limit stops it before the work, not after).
    pub fn charge(&mut self, cost: u64) -> Result<()> {
        self.meter.charge(cost)
    }

    pub fn host(&self) -> &dyn Host {
        self.host
    }
}

/// What the embedding program provides to functions that reach outside the expression: the
/// authorizer's checks.
pub trait Host: Sync {
    /// An authorization check (`authorizer.…check(verb)`): the decision, or an error text.
    fn authorize(&self, _request: &crate::value::Map) -> Result<Value> {
        Err(Error::new("authorizer is not available"))
    }
}

/// A host with nothing to offer.
pub struct NoHost;

impl Host for NoHost {}

/// An overload's implementation: `args` holds the receiver first for a receiver-style call.
pub type Call = fn(&mut Ctx<'_>, &[Value]) -> Result<Value>;

/// An overload's runtime cost: cel-go's `ActualCostEstimator.CallCost` for it, from the
/// arguments and the result.
#[derive(Clone, Copy)]
pub enum Cost {
    /// A constant cost (cel-go's default for an O(1) function is 1).
    Fixed(u64),
    /// Computed from the arguments and the result.
    Of(fn(&[Value], &Value) -> u64),
}

impl Cost {
    pub fn of(&self, args: &[Value], result: &Value) -> u64 {
        match self {
            Cost::Fixed(cost) => *cost,
            Cost::Of(f) => f(args, result),
        }
    }
}

/// One overload of a function.
#[derive(Clone)]
pub struct Overload {
    pub call: Call,
    pub cost: Cost,
}

impl std::fmt::Debug for Overload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Overload")
    }
}

/// How a function is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Style {
    /// `f(a, b)`
    Global,
    /// `a.f(b)`
    Receiver,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    name: &'static str,
    style: Style,
    /// Arguments, the receiver not counted.
    arity: usize,
}

/// Every function of an environment (and whether it builds the literals of a mutation's
/// types, [`crate::mutation::register`]).
#[derive(Clone, Default)]
pub struct Registry {
    overloads: HashMap<Signature, Arc<[Overload]>>,
    pub(crate) mutation_types: bool,
}

/// The overloads a call site resolved to at compile time.
pub type Overloads = Arc<[Overload]>;

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds an overload of `name` (tried after those already added).
    pub fn add(&mut self, name: &'static str, style: Style, arity: usize, call: Call, cost: Cost) {
        let signature = Signature { name, style, arity };
        let mut overloads: Vec<Overload> =
            self.overloads.get(&signature).map(|o| o.to_vec()).unwrap_or_default();
        overloads.push(Overload { call, cost });
        self.overloads.insert(signature, overloads.into());
    }

    /// Adds a global function.
    pub fn global(&mut self, name: &'static str, arity: usize, call: Call, cost: Cost) {
        self.add(name, Style::Global, arity, call, cost);
    }

    /// Adds a receiver-style function (`arity` not counting the receiver).
    pub fn method(&mut self, name: &'static str, arity: usize, call: Call, cost: Cost) {
        self.add(name, Style::Receiver, arity, call, cost);
    }

    pub fn find(&self, name: &str, style: Style, arity: usize) -> Option<Overloads> {
        // Signatures are few; the name is borrowed for the lookup through a linear scan-free
        // key built on the stack.
        self.overloads
            .iter()
            .find(|(s, _)| s.style == style && s.arity == arity && s.name == name)
            .map(|(_, o)| o.clone())
    }

    /// Whether the environment builds `JSONPatch{…}` and `Object…{…}` literals
    /// ([`crate::mutation::register`]).
    pub fn has_mutation_types(&self) -> bool {
        self.mutation_types
    }

    /// Whether any overload of `name` exists, in any style.
    pub fn has_name(&self, name: &str) -> bool {
        self.overloads.keys().any(|s| s.name == name)
    }
}

/// Calls the first overload that takes `args`, charging its cost; `no such overload` when none
/// does.
pub fn dispatch(overloads: &[Overload], ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    for overload in overloads {
        match (overload.call)(ctx, args) {
            Err(e) if e.kind == crate::error::ErrorKind::NoMatch => continue,
            Err(e) => {
                // cel-go's observer charges a call that failed too (its result, an error, has
                // size 1).
                if !e.is_fatal() {
                    ctx.charge(overload.cost.of(args, &Value::Null))?;
                }
                return Err(e);
            }
            Ok(result) => {
                ctx.charge(overload.cost.of(args, &result))?;
                return Ok(result);
            }
        }
    }
    Err(Error::no_such_overload())
}

/// cel-go's cost factor for traversing strings and bytes: 0.1 per byte.
pub const STRING_TRAVERSAL_FACTOR: f64 = 0.1;

/// `ceil(size × 0.1)`: the cost of one pass over a string or bytes.
pub fn traversal_cost(size: u64) -> u64 {
    (size as f64 * STRING_TRAVERSAL_FACTOR).ceil() as u64
}
