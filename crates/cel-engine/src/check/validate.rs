//! The AST validators the API server's environment runs after a successful check, in its
//! order (k8s `environment/base.go`): homogeneous aggregate literals, duration, timestamp
//! and regex literals (cel-go `cel/validator.go`), then `ext.Strings` v2's `format`
//! validator (cel-go `ext/formatting.go`); and the regex compilation `env.Program` does for
//! constant patterns of `matches`, `find`, `findAll` (cel-go `interpreter.MatchesRegexOptimization`,
//! k8s `FindRegexOptimization`/`FindAllRegexOptimization`).

pub(crate) use crate::go::quote as go_quote;
use std::collections::HashMap;

use cel_parser::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

pub(crate) use super::goregex::go_regexp_error;
use super::types::CheckedType;

type Errors = Vec<(u64, String)>;

pub(super) fn validate(root: &IdedExpr, types: &HashMap<u64, CheckedType>) -> Errors {
    let mut errors = Vec::new();
    let ty = |id: u64| types.get(&id).cloned().unwrap_or(CheckedType::Dyn);
    if let Err(panic) = homogeneous(root, &ty, &mut errors) {
        return vec![(root.id, panic)];
    }
    let mut nodes = Vec::new();
    preorder(root, &mut nodes);
    for (name, check) in [
        ("duration", valid_duration_literal as fn(&LiteralValue) -> bool),
        ("timestamp", valid_timestamp_literal),
        ("matches", valid_regex_literal),
    ] {
        for e in &nodes {
            let Expr::Call(call) = &e.expr else { continue };
            if call.func_name != name {
                continue;
            }
            let Some(arg) = call.args.first() else { continue };
            if let Expr::Literal(l) = &arg.expr {
                if !check(l) {
                    errors.push((arg.id, format!("invalid {name} argument")));
                }
            }
        }
    }
    for e in &nodes {
        super::format::string_format(e, &ty, &mut errors);
    }
    errors
}

/// Every node, parents before children (cel-go's `MatchDescendants` order).
fn preorder<'a>(e: &'a IdedExpr, out: &mut Vec<&'a IdedExpr>) {
    out.push(e);
    for c in children(e) {
        preorder(c, out);
    }
}

pub(super) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(c.args.iter()).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(sf) => vec![&sf.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(sf) => vec![&sf.value],
            })
            .collect(),
        Expr::Select(s) => vec![&s.operand],
        _ => Vec::new(),
    }
}

/// `homogeneousAggregateLiteralValidator`: list elements, map keys and map values must be of
/// equivalent types, except under a call of `format` (the strings library exempts it).
///
/// An optional entry of a type without parameters (`[?object.a]`, `{?'k': object.a}`: `dyn`
/// passes the checker) makes cel-go's validator index an empty slice and panic; the API
/// server answers that request with an internal error, so the expression is refused: `Err`
/// is the panic's text, and the validation stops there.
fn homogeneous(root: &IdedExpr, ty: &dyn Fn(u64) -> CheckedType, errors: &mut Errors) -> Result<(), String> {
    let mut lists = Vec::new();
    let mut maps = Vec::new();
    collect_aggregates(root, false, &mut lists, &mut maps);
    let unwrap = |t: CheckedType| -> Result<CheckedType, String> {
        match t.parameters().first() {
            Some(p) => Ok((*p).clone()),
            None => Err("runtime error: index out of range [0] with length 0".to_owned()),
        }
    };
    let mismatch = |a: &CheckedType, b: &CheckedType| {
        format!("expected type '{}' but found '{}'", a.format(), b.format())
    };
    for e in lists {
        let Expr::List(l) = &e.expr else { continue };
        let mut first: Option<CheckedType> = None;
        for (i, x) in l.elements.iter().enumerate() {
            let mut t = ty(x.id);
            if l.optional_indices.contains(&i) {
                t = unwrap(t)?;
            }
            // Go's `elemType == nil`: no element yet, or one without a type.
            match &first {
                None | Some(CheckedType::Unspecified) => first = Some(t),
                Some(f) => {
                    if !f.is_equivalent(&t) {
                        errors.push((x.id, mismatch(f, &t)));
                        break;
                    }
                }
            }
        }
    }
    for e in maps {
        let Expr::Map(m) = &e.expr else { continue };
        let mut first: Option<(CheckedType, CheckedType)> = None;
        for entry in &m.entries {
            let EntryExpr::MapEntry(me) = &entry.expr else { continue };
            let kt = ty(me.key.id);
            let mut vt = ty(me.value.id);
            if me.optional {
                vt = unwrap(vt)?;
            }
            match &first {
                None | Some((CheckedType::Unspecified, CheckedType::Unspecified)) => first = Some((kt, vt)),
                Some((k0, v0)) => {
                    if !k0.is_equivalent(&kt) {
                        errors.push((me.key.id, mismatch(k0, &kt)));
                    }
                    if !v0.is_equivalent(&vt) {
                        errors.push((me.value.id, mismatch(v0, &vt)));
                    }
                }
            }
        }
    }
    Ok(())
}

fn collect_aggregates<'a>(
    e: &'a IdedExpr,
    exempt: bool,
    lists: &mut Vec<&'a IdedExpr>,
    maps: &mut Vec<&'a IdedExpr>,
) {
    match &e.expr {
        Expr::List(_) if !exempt => lists.push(e),
        Expr::Map(_) if !exempt => maps.push(e),
        _ => {}
    }
    let exempt = exempt || matches!(&e.expr, Expr::Call(c) if c.func_name == "format");
    for c in children(e) {
        collect_aggregates(c, exempt, lists, maps);
    }
}

fn valid_duration_literal(l: &LiteralValue) -> bool {
    match l {
        LiteralValue::String(s) => go_parse_duration(s).is_some(),
        _ => false,
    }
}

fn valid_timestamp_literal(l: &LiteralValue) -> bool {
    const MIN: i64 = -62135596800;
    const MAX: i64 = 253402300799;
    match l {
        LiteralValue::String(s) => {
            is_strict_rfc3339(s) && go_parse_rfc3339(s).is_some_and(|secs| (MIN..=MAX).contains(&secs))
        }
        LiteralValue::Int(i) => (MIN..=MAX).contains(i),
        _ => false,
    }
}

fn valid_regex_literal(l: &LiteralValue) -> bool {
    match l {
        LiteralValue::String(s) => go_regexp_error(s).is_none(),
        _ => true,
    }
}

/// Go's `time.ParseDuration`: the duration in nanoseconds, `None` where Go errs.
pub(crate) fn go_parse_duration(s: &str) -> Option<i128> {
    let mut rest = s.as_bytes();
    let mut neg = false;
    if let Some((&c, tail)) = rest.split_first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            rest = tail;
        }
    }
    if rest == b"0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        if !(rest[0] == b'.' || rest[0].is_ascii_digit()) {
            return None;
        }
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut whole: u128 = 0;
        for &c in &rest[..digits] {
            whole = whole.checked_mul(10)?.checked_add(u128::from(c - b'0'))?;
            if whole > 1 << 63 {
                return None;
            }
        }
        rest = &rest[digits..];
        let mut frac_digits = 0;
        let mut frac: u128 = 0;
        let mut scale: u128 = 1;
        if rest.first() == Some(&b'.') {
            rest = &rest[1..];
            frac_digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
            for &c in &rest[..frac_digits] {
                if scale < 1_000_000_000_000_000_000 {
                    frac = frac * 10 + u128::from(c - b'0');
                    scale *= 10;
                }
            }
            rest = &rest[frac_digits..];
        }
        if digits == 0 && frac_digits == 0 {
            return None;
        }
        let unit_len = rest.iter().take_while(|&&c| c != b'.' && !c.is_ascii_digit()).count();
        if unit_len == 0 {
            return None;
        }
        let unit: u128 = match std::str::from_utf8(&rest[..unit_len]).ok()? {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let v = whole.checked_mul(unit)?;
        if v > 1 << 63 {
            return None;
        }
        let v = v + frac * unit / scale;
        total = total.checked_add(v)?;
        if total > 1 << 63 {
            return None;
        }
    }
    if total > (1 << 63) - 1 && !neg {
        return None;
    }
    let total = total as i128;
    Some(if neg { -total } else { total })
}

/// cel-go's `isStrictRFC3339` (cel-go 0.32, the oracle's; checked before `time.Parse`):
/// `^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$`.
pub(crate) fn is_strict_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let two = |i: usize| u32::from(b[i] - b'0') * 10 + u32::from(b[i + 1] - b'0');
    let in_range = |i: usize, lo: u32, hi: u32| digits(i..i + 2) && (lo..=hi).contains(&two(i));
    if !(digits(0..4)
        && b[4] == b'-'
        && in_range(5, 1, 12)
        && b[7] == b'-'
        && in_range(8, 1, 31)
        && (b[10] == b'T' || b[10] == b't')
        && in_range(11, 0, 23)
        && b[13] == b':'
        && in_range(14, 0, 59)
        && b[16] == b':'
        && in_range(17, 0, 60))
    {
        return false;
    }
    let mut rest = &b[19..];
    if rest[0] == b'.' {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &rest[1 + n..];
    }
    let two_at = |r: &[u8], i: usize, hi: u32| {
        r[i].is_ascii_digit()
            && r[i + 1].is_ascii_digit()
            && u32::from(r[i] - b'0') * 10 + u32::from(r[i + 1] - b'0') <= hi
    };
    match rest {
        [z] => *z == b'Z' || *z == b'z',
        [sign, _, _, b':', _, _] if *sign == b'+' || *sign == b'-' => {
            two_at(rest, 1, 23) && two_at(rest, 4, 59)
        }
        _ => false,
    }
}

/// Go's `time.Parse(time.RFC3339, s)`: the Unix seconds, `None` where Go errs.
pub(crate) fn go_parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let mut i = 0;
    let num = |i: &mut usize, min: usize, max: usize| -> Option<i64> {
        let start = *i;
        while *i < b.len() && *i - start < max && b[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i - start < min {
            return None;
        }
        std::str::from_utf8(&b[start..*i]).ok()?.parse().ok()
    };
    let lit = |i: &mut usize, c: u8| -> Option<()> { (b.get(*i) == Some(&c)).then(|| *i += 1) };
    let year = num(&mut i, 4, 4)?;
    lit(&mut i, b'-')?;
    let month = num(&mut i, 2, 2)?;
    lit(&mut i, b'-')?;
    let day = num(&mut i, 2, 2)?;
    lit(&mut i, b'T')?;
    let hour = num(&mut i, 1, 2)?;
    lit(&mut i, b':')?;
    let minute = num(&mut i, 2, 2)?;
    lit(&mut i, b':')?;
    let second = num(&mut i, 2, 2)?;
    if i + 1 < b.len() && (b[i] == b'.' || b[i] == b',') && b[i + 1].is_ascii_digit() {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z') => {
            i += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            i += 1;
            let h = num(&mut i, 2, 2)?;
            lit(&mut i, b':')?;
            let m = num(&mut i, 2, 2)?;
            if h > 24 || m > 60 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    if i != b.len() {
        return None;
    }
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day < 1 || day > days_in_month[(month - 1) as usize] {
        return None;
    }
    // Days from civil (proleptic Gregorian), Howard Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + hour * 3600 + minute * 60 + second - offset)
}
