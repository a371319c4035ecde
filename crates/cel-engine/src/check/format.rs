//! `ext.Strings` v2's `format` validator (cel-go `ext/formatting.go`,
//! `stringFormatValidator`): a constant format string with a list literal of arguments is
//! parsed at check time and each clause checked against its argument's type.

use cel_parser::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::types::CheckedType;

type Errors = Vec<(u64, String)>;

/// `stringFormatValidator` (strings v2: `parseFormatString` with the checker's
/// interpolator, no precision limit): a constant format string with a list literal of
/// arguments is parsed and each clause checked against its argument's type.
pub(super) fn string_format(e: &IdedExpr, ty: &dyn Fn(u64) -> CheckedType, errors: &mut Errors) {
    let Expr::Call(call) = &e.expr else { return };
    if call.func_name != "format" || call.args.len() != 1 {
        return;
    }
    let Some(target) = call.target.as_deref() else { return };
    let Expr::Literal(LiteralValue::String(format)) = &target.expr else { return };
    let Expr::List(list) = &call.args[0].expr else { return };
    let args = &list.elements;
    let mut requested = 0usize;
    match parse_format(format, args, ty, &mut requested) {
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
