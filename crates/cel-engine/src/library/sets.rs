//! cel-go `ext/sets.go`: `sets.contains`, `sets.equivalent`, `sets.intersects` over lists, with
//! CEL's heterogeneous equality (`[1].contains([1.0])`). Each is charged by the library's own
//! cost tracker, `1 + ⌊|a| × |b| × factor⌋` (factor 2 for `equivalent`), before the work.

use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry};
use crate::value::Value;

pub(super) fn register(registry: &mut Registry) {
    registry.global("sets.contains", 2, contains, Cost::Fixed(0));
    registry.global("sets.equivalent", 2, equivalent, Cost::Fixed(0));
    registry.global("sets.intersects", 2, intersects, Cost::Fixed(0));
}

/// cel-go `trackSetsCost(factor)`.
pub(crate) fn sets_cost(a: &[Value], b: &[Value], factor: f64) -> u64 {
    let product = (a.len() as u64).wrapping_mul(b.len() as u64);
    1u64.saturating_add((product as f64 * factor) as u64)
}

fn lists(args: &[Value]) -> Result<(&[Value], &[Value])> {
    match (&args[0], &args[1]) {
        (Value::List(a), Value::List(b)) => Ok((a, b)),
        _ => Err(Error::no_match()),
    }
}

/// Whether every element of `sub` equals some element of `list`.
pub(crate) fn contains_all(list: &[Value], sub: &[Value]) -> bool {
    sub.iter().all(|x| list.iter().any(|y| x.equals(y)))
}

fn contains(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (a, b) = lists(args)?;
    ctx.charge(sets_cost(a, b, 1.0))?;
    Ok(Value::Bool(contains_all(a, b)))
}

fn equivalent(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (a, b) = lists(args)?;
    ctx.charge(sets_cost(a, b, 2.0))?;
    Ok(Value::Bool(contains_all(a, b) && contains_all(b, a)))
}

fn intersects(ctx: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let (a, b) = lists(args)?;
    ctx.charge(sets_cost(a, b, 1.0))?;
    Ok(Value::Bool(a.iter().any(|x| b.iter().any(|y| x.equals(y)))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::test_ctx;

    fn ints(v: &[i64]) -> Value {
        Value::list(v.iter().map(|i| Value::Int(*i)).collect())
    }

    fn call(f: crate::func::Call, a: Value, b: Value) -> (Value, u64) {
        test_ctx(|ctx| {
            let before = ctx.meter.cost;
            let r = f(ctx, &[a, b]).unwrap();
            (r, ctx.meter.cost - before)
        })
    }

    #[test]
    fn contains_table() {
        // cel-go ext/sets_test.go
        let cases: Vec<(Value, Value, bool)> = vec![
            (ints(&[]), ints(&[]), true),
            (ints(&[1]), ints(&[]), true),
            (ints(&[1]), ints(&[1]), true),
            (ints(&[1]), ints(&[1, 1]), true),
            (ints(&[1, 1]), ints(&[1]), true),
            (ints(&[2, 1]), ints(&[1]), true),
            (ints(&[1, 2, 3, 4]), ints(&[2, 3]), true),
            (ints(&[1]), ints(&[2]), false),
            (ints(&[]), ints(&[1]), false),
            (Value::list(vec![Value::Int(1)]), Value::list(vec![Value::Double(1.0), Value::Uint(1)]), true),
            (
                Value::list(vec![Value::Int(1), Value::Uint(2)]),
                Value::list(vec![Value::Double(2.0), Value::Uint(1)]),
                true,
            ),
            (Value::list(vec![Value::Int(1), Value::Double(2.1)]), Value::list(vec![Value::Uint(2)]), false),
            (Value::list(vec![ints(&[1]), ints(&[2, 3])]), Value::list(vec![ints(&[2, 3])]), true),
            (
                Value::list(vec![Value::string("a"), Value::Int(1)]),
                Value::list(vec![Value::Bool(true)]),
                false,
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(call(contains, a.clone(), b.clone()).0, Value::Bool(want), "{a:?} contains {b:?}");
        }
    }

    #[test]
    fn equivalent_and_intersects() {
        assert_eq!(call(equivalent, ints(&[]), ints(&[])).0, Value::Bool(true));
        assert_eq!(call(equivalent, ints(&[1]), ints(&[1, 1])).0, Value::Bool(true));
        assert_eq!(call(equivalent, ints(&[1, 2, 3]), ints(&[3, 2, 1])).0, Value::Bool(true));
        assert_eq!(
            call(
                equivalent,
                Value::list(vec![Value::Int(1)]),
                Value::list(vec![Value::Uint(1), Value::Double(1.0)])
            )
            .0,
            Value::Bool(true)
        );
        assert_eq!(call(equivalent, ints(&[1, 2]), ints(&[2, 2, 2])).0, Value::Bool(false));
        assert_eq!(call(equivalent, ints(&[1]), ints(&[])).0, Value::Bool(false));
        assert_eq!(call(intersects, ints(&[1]), ints(&[1])).0, Value::Bool(true));
        assert_eq!(call(intersects, ints(&[1, 2]), ints(&[2, 3])).0, Value::Bool(true));
        assert_eq!(call(intersects, ints(&[]), ints(&[])).0, Value::Bool(false));
        assert_eq!(call(intersects, ints(&[1]), ints(&[])).0, Value::Bool(false));
        assert_eq!(
            call(intersects, Value::list(vec![Value::Double(1.0)]), Value::list(vec![Value::Uint(1)])).0,
            Value::Bool(true)
        );
    }

    #[test]
    fn costs() {
        // trackSetsCost: 1 + |a|·|b|·factor.
        assert_eq!(call(contains, ints(&[1, 2, 3]), ints(&[1, 2])).1, 7);
        assert_eq!(call(intersects, ints(&[]), ints(&[1, 2])).1, 1);
        assert_eq!(call(equivalent, ints(&[1, 2, 3]), ints(&[1, 2])).1, 13);
    }

    #[test]
    fn not_lists() {
        test_ctx(|ctx| {
            let e = contains(ctx, &[Value::Int(1), ints(&[])]).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::NoMatch);
        });
    }
}
