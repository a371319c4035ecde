//! The AST validators the API server's environment runs after a successful check, in its
//! order (k8s `environment/base.go`): homogeneous aggregate literals, duration, timestamp
//! and regex literals (cel-go `cel/validator.go`), then `ext.Strings` v2's `format`
//! validator (cel-go `ext/formatting.go`); and the regex compilation `env.Program` does for
//! constant patterns of `matches`, `find`, `findAll` (cel-go `interpreter.MatchesRegexOptimization`,
//! k8s `FindRegexOptimization`/`FindAllRegexOptimization`).

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

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
        string_format(e, &ty, &mut errors);
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
            match &first {
                None => first = Some(t),
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
                None => first = Some((kt, vt)),
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
        LiteralValue::String(s) => go_parse_duration(s.inner()).is_some(),
        _ => false,
    }
}

fn valid_timestamp_literal(l: &LiteralValue) -> bool {
    const MIN: i64 = -62135596800;
    const MAX: i64 = 253402300799;
    match l {
        LiteralValue::String(s) => {
            is_strict_rfc3339(s.inner())
                && go_parse_rfc3339(s.inner()).is_some_and(|secs| (MIN..=MAX).contains(&secs))
        }
        LiteralValue::Int(i) => (MIN..=MAX).contains(i.inner()),
        _ => false,
    }
}

fn valid_regex_literal(l: &LiteralValue) -> bool {
    match l {
        LiteralValue::String(s) => go_regexp_error(s.inner()).is_none(),
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

/// Go's `%q` of a string (`strconv.Quote`).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

/// `stringFormatValidator` (strings v2: `parseFormatString` with the checker's
/// interpolator, no precision limit): a constant format string with a list literal of
/// arguments is parsed and each clause checked against its argument's type.
fn string_format(e: &IdedExpr, ty: &dyn Fn(u64) -> CheckedType, errors: &mut Errors) {
    let Expr::Call(call) = &e.expr else { return };
    if call.func_name != "format" || call.args.len() != 1 {
        return;
    }
    let Some(target) = call.target.as_deref() else { return };
    let Expr::Literal(LiteralValue::String(format)) = &target.expr else { return };
    let Expr::List(list) = &call.args[0].expr else { return };
    let args = &list.elements;
    let mut requested = 0usize;
    match parse_format(format.inner(), args, ty, &mut requested) {
        Err((id, msg)) => errors.push((id.unwrap_or(e.id), msg)),
        Ok(()) => {
            if args.len() > requested {
                errors.push((
                    e.id,
                    format!(
                        "too many arguments supplied to string.format (expected {requested}, got {})",
                        args.len()
                    ),
                ));
            }
        }
    }
}

type FormatResult = Result<(), (Option<u64>, String)>;

fn parse_format(
    s: &str,
    args: &[IdedExpr],
    ty: &dyn Fn(u64) -> CheckedType,
    requested: &mut usize,
) -> FormatResult {
    let b = s.as_bytes();
    let mut i = 0;
    let mut arg_index = 0usize;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if i + 1 < b.len() && b[i + 1] == b'%' {
            i += 2;
            continue;
        }
        *requested += 1;
        let current = arg_index;
        if i + 1 >= b.len() {
            return Err((None, "unexpected end of string".into()));
        }
        if arg_index >= args.len() {
            return Err((None, format!("index {arg_index} out of range")));
        }
        // parseAndFormatClause: precision, then the verb.
        let mut j = i + 1;
        if b[j] == b'.' {
            j += 1;
            let start = j;
            loop {
                if j >= b.len() {
                    return Err((
                        None,
                        "could not parse formatting clause: error while parsing precision: could not find end of precision specifier".into(),
                    ));
                }
                if !b[j].is_ascii_digit() {
                    break;
                }
                j += 1;
            }
            let digits = &s[start..j];
            if digits.is_empty() {
                return Err((
                    None,
                    "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax".into(),
                ));
            }
            if digits.parse::<i64>().is_err() {
                return Err((
                    None,
                    format!("could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"{digits}\": value out of range"),
                ));
            }
        }
        let verb = b[j];
        j += 1;
        let arg = &args[current];
        let t = ty(arg.id);
        let kinds =
            |ok: &[CheckedType]| matches!(t, CheckedType::Dyn) || ok.iter().any(|k| k.kind() == t.kind());
        use CheckedType as T;
        let bad = |what: &str, id: u64, t: &CheckedType| {
            Err((Some(id), format!("error during formatting: {what}, was given {}", t.type_name())))
        };
        match verb {
            b's' => {
                if let Some((id, t)) = verify_string(arg, ty) {
                    return bad(
                        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps",
                        id,
                        &t,
                    );
                }
            }
            b'd' => {
                if !kinds(&[T::Int, T::Uint]) {
                    return bad("decimal clause can only be used on integers", arg.id, &t);
                }
            }
            b'f' => {
                if !kinds(&[T::Double, T::String]) {
                    return bad("fixed-point clause can only be used on doubles", arg.id, &t);
                }
            }
            b'e' => {
                if !kinds(&[T::Double, T::String]) {
                    return bad("scientific clause can only be used on doubles", arg.id, &t);
                }
            }
            b'b' => {
                if !kinds(&[T::Int, T::Uint, T::Bool]) {
                    return bad("only integers and bools can be formatted as binary", arg.id, &t);
                }
            }
            b'x' | b'X' => {
                if !kinds(&[T::Int, T::Uint, T::String, T::Bytes]) {
                    return bad(
                        "only integers, byte buffers, and strings can be formatted as hex",
                        arg.id,
                        &t,
                    );
                }
            }
            b'o' => {
                if !kinds(&[T::Int, T::Uint]) {
                    return bad("octal clause can only be used on integers", arg.id, &t);
                }
            }
            other => {
                return Err((
                    None,
                    format!(
                        "could not parse formatting clause: unrecognized formatting clause \"{}\"",
                        char::from(other)
                    ),
                ));
            }
        }
        i = j;
        arg_index += 1;
    }
    Ok(())
}

/// `verifyString`: the id and type of the first (nested) argument `%s` cannot format.
fn verify_string(e: &IdedExpr, ty: &dyn Fn(u64) -> CheckedType) -> Option<(u64, CheckedType)> {
    use CheckedType as T;
    let t = ty(e.id);
    let ok = matches!(
        t,
        T::Dyn
            | T::List(_)
            | T::Map(..)
            | T::Int
            | T::Uint
            | T::Double
            | T::Bool
            | T::String
            | T::Timestamp
            | T::Bytes
            | T::Duration
            | T::Type(_)
            | T::Null
    );
    if !ok {
        return Some((e.id, t));
    }
    match &e.expr {
        Expr::List(l) => l.elements.iter().find_map(|x| verify_string(x, ty)),
        Expr::Map(m) => m.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => verify_string(&me.key, ty).or_else(|| verify_string(&me.value, ty)),
            EntryExpr::StructField(_) => None,
        }),
        _ => None,
    }
}
