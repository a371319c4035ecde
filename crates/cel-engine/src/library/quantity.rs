//! `kubernetes.Quantity` (k8s.io/apiserver `pkg/cel/library/quantity.go`): `quantity`,
//! `isQuantity`, `sign`, `isGreaterThan`, `isLessThan`, `compareTo`, `asApproximateFloat`,
//! `asInteger`, `isInteger`, `add`, `sub`, over a port of apimachinery's
//! `resource.Quantity`: its two forms (an int64 with a power-of-ten scale, or an arbitrary
//! precision decimal, `inf.Dec`) are kept apart because they are observable (`isInteger` is
//! false for the decimal form, whatever its value).

mod amount;
mod big;

use std::any::Any;
use std::cmp::Ordering;
use std::sync::Mutex;

use self::amount::{lock, parse, Amount};
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::value::{Object, Value};

pub(crate) const TYPE_NAME: &str = "kubernetes.Quantity";

/// A `kubernetes.Quantity` value. Comparing it (`compareTo`, `isGreaterThan`, `isLessThan`)
/// with a decimal-form quantity turns the receiver itself into the decimal form, as
/// upstream's `Quantity.Cmp` does through its pointer, hence the lock.
#[derive(Debug)]
pub struct Quantity {
    amount: Mutex<Amount>,
    /// Made by `add`/`sub` (upstream's `*Quantity`, where `quantity()` makes a `Quantity`):
    /// upstream's `Equal` takes only the value form on its right, so `a == q.add(…)` is
    /// `no such overload` whatever `a` is, and `q.add(…) == quantity(…)` compares.
    #[allow(dead_code)] // for the evaluator's equality, once it can answer an error
    pub(crate) from_arithmetic: bool,
}

impl Quantity {
    fn new(amount: Amount, from_arithmetic: bool) -> Quantity {
        Quantity { amount: Mutex::new(amount), from_arithmetic }
    }

    fn get(&self) -> Amount {
        lock(&self.amount).clone()
    }

    /// `Quantity.Cmp` through the receiver's pointer: when either side is decimal, the
    /// receiver becomes decimal.
    fn cmp_mut(&self, other: &Amount) -> Result<Ordering> {
        let mut amount = lock(&self.amount);
        if other.is_dec() && !amount.is_dec() {
            *amount = Amount::new_dec(amount.as_dec());
        }
        let amount = amount.clone();
        amount.cmp(other)
    }
}

impl Object for Quantity {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn equals(&self, other: &dyn Object) -> bool {
        match other.as_any().downcast_ref::<Quantity>() {
            // Upstream's `Equal` can also fail (two int64 forms whose scales differ by more than
            // int32 holds: a recovered division by zero); that error becomes false here.
            Some(other) => self.get().cmp(&other.get()).is_ok_and(|o| o == Ordering::Equal),
            None => false,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn quantity_arg(value: &Value) -> Result<&Quantity> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<Quantity>().ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn string_arg(value: &Value) -> Result<&str> {
    value.as_str().ok_or_else(Error::no_match)
}

fn string_cost(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].size().unwrap_or(1))
}

fn quantity_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let amount = parse(string_arg(&args[0])?).map_err(Error::new)?;
    Ok(Value::object(Quantity::new(amount, false)))
}

fn is_quantity(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(parse(string_arg(&args[0])?).is_ok()))
}

fn sign(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(quantity_arg(&args[0])?.get().sign()))
}

fn compare(args: &[Value]) -> Result<Ordering> {
    let q = quantity_arg(&args[0])?;
    let other = quantity_arg(&args[1])?.get();
    q.cmp_mut(&other)
}

fn is_greater_than(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare(args)? == Ordering::Greater))
}

fn is_less_than(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare(args)? == Ordering::Less))
}

fn compare_to(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(compare(args)? as i64))
}

fn as_approximate_float(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Double(quantity_arg(&args[0])?.get().as_f64()))
}

fn as_integer(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    match quantity_arg(&args[0])?.get().as_i64() {
        Some(v) => Ok(Value::Int(v)),
        None => Err(Error::new("cannot convert value to integer")),
    }
}

fn is_integer(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(quantity_arg(&args[0])?.get().as_i64().is_some()))
}

fn arithmetic(args: &[Value], sub: bool) -> Result<Value> {
    let q = quantity_arg(&args[0])?.get();
    let y = match &args[1] {
        Value::Int(i) => Amount::Int { value: *i, scale: 0 },
        other => quantity_arg(other)?.get(),
    };
    Ok(Value::object(Quantity::new(q.add(&y, sub)?, true)))
}

fn add(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    arithmetic(args, false)
}

fn sub(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    arithmetic(args, true)
}

pub(super) fn register(registry: &mut Registry) {
    registry.global("quantity", 1, quantity_of, Cost::Of(string_cost));
    registry.global("isQuantity", 1, is_quantity, Cost::Of(string_cost));
    // A global function upstream (`cel.Overload`), not a method: `sign(q)`.
    registry.global("sign", 1, sign, Cost::Fixed(1));
    registry.method("isGreaterThan", 1, is_greater_than, Cost::Fixed(1));
    registry.method("isLessThan", 1, is_less_than, Cost::Fixed(1));
    registry.method("compareTo", 1, compare_to, Cost::Fixed(1));
    registry.method("asApproximateFloat", 0, as_approximate_float, Cost::Fixed(1));
    registry.method("asInteger", 0, as_integer, Cost::Fixed(1));
    registry.method("isInteger", 0, is_integer, Cost::Fixed(1));
    registry.method("add", 1, add, Cost::Fixed(1));
    registry.method("sub", 1, sub, Cost::Fixed(1));
}

#[cfg(test)]
pub(crate) mod tests;
