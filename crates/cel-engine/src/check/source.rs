//! What the parsed tree no longer tells: the parser (`crates/cel-parser`) expands
//! `range.existsOne(x, p)` as it expands `range.exists_one(x, p)`, while the API server's
//! environment has no two-argument `existsOne` macro (cel-go's `StandardMacros` hold
//! `exists_one` only; `existsOne` takes three arguments, from the two-variable
//! comprehensions): there it stays a call of an undeclared function. The source tells which
//! spelling each such comprehension had; those spelled `existsOne` are turned back into calls.

use cel_parser::ast::{
    Ast, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo,
};

/// The spellings of the two-argument exists-one calls of `source`, in source order:
/// `true` for `existsOne`, `false` for `exists_one`.
fn exists_one_spellings(source: &str) -> Vec<bool> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some(end) = skip_literal_or_comment(b, i) {
            i = end;
            continue;
        }
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &source[start..i];
            let after_dot = source[..start].trim_end().ends_with('.');
            if after_dot && (word == "existsOne" || word == "exists_one") && argument_count(b, i) == Some(2) {
                out.push(word == "existsOne");
            }
            continue;
        }
        i += 1;
    }
    out
}

/// The end of the string or bytes literal or `//` comment starting at `i`, if one does.
fn skip_literal_or_comment(b: &[u8], i: usize) -> Option<usize> {
    if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
        return Some(b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p));
    }
    // Prefixes: r, b, rb, br (any case), directly before the quote, not part of a word.
    let mut j = i;
    let mut raw = false;
    while j < b.len() && j - i < 2 && matches!(b[j], b'r' | b'R' | b'b' | b'B') {
        raw |= matches!(b[j], b'r' | b'R');
        j += 1;
    }
    let q = *b.get(j)?;
    if q != b'\'' && q != b'"' {
        return None;
    }
    let triple = b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q);
    let mut k = if triple { j + 3 } else { j + 1 };
    while k < b.len() {
        if !raw && b[k] == b'\\' {
            k += 2;
            continue;
        }
        if b[k] == q && (!triple || (b.get(k + 1) == Some(&q) && b.get(k + 2) == Some(&q))) {
            return Some(k + if triple { 3 } else { 1 });
        }
        k += 1;
    }
    Some(b.len())
}

/// The number of arguments of the call whose name ends at `i` (`None` when no `(` follows).
fn argument_count(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) != Some(&b'(') {
        return None;
    }
    i += 1;
    let mut depth = 0usize;
    let mut commas = 0;
    let mut any = false;
    while i < b.len() {
        if let Some(end) = skip_literal_or_comment(b, i) {
            any = true;
            i = end;
            continue;
        }
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return Some(if any { commas + 1 } else { 0 }),
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => commas += 1,
            c if !c.is_ascii_whitespace() => any = true,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The predicate of a comprehension the parser built from a two-argument exists-one call.
fn exists_one_predicate(e: &IdedExpr) -> Option<&IdedExpr> {
    let Expr::Comprehension(c) = &e.expr else { return None };
    if c.iter_var2.is_some() || c.accu_var != "@result" {
        return None;
    }
    let Expr::Call(step) = &c.loop_step.expr else { return None };
    let Expr::Call(result) = &c.result.expr else { return None };
    let int_init = matches!(&c.accu_init.expr, Expr::Literal(LiteralValue::Int(i)) if *i == 0);
    (step.func_name == "_?_:_" && step.args.len() == 3 && result.func_name == "_==_" && int_init)
        .then(|| &step.args[0])
}

/// Turns the exists-one comprehensions spelled `existsOne` back into calls.
pub(super) fn restore_exists_one_calls(ast: &Ast) -> Ast {
    let source = &ast.source_info.source;
    let spellings = exists_one_spellings(source);
    if !spellings.contains(&true) {
        return ast.clone();
    }
    let mut rebuilder = Rebuilder { spellings, next: 0, source_info: ast.source_info.clone() };
    let expr = rebuilder.rebuild(&ast.expr);
    Ast { expr, source_info: rebuilder.source_info }
}

/// The offset of the first argument of the call whose `(` is at `open`.
fn first_argument_offset(source: &str, open: usize) -> usize {
    let after = &source[open + 1..];
    open + 1 + (after.len() - after.trim_start().len())
}

struct Rebuilder {
    spellings: Vec<bool>,
    /// The index in `spellings` of the next exists-one comprehension.
    next: usize,
    source_info: SourceInfo,
}

impl Rebuilder {
    /// The iteration variable of a restored call, as its first argument: the node of the
    /// accumulator's initial value (a node the expansion made, at the call's `(`), moved to
    /// the argument's offset in the source.
    fn variable(&mut self, c: &ComprehensionExpr) -> IdedExpr {
        let id = c.accu_init.id;
        if let Some((open, _)) = self.source_info.offset_for(id) {
            let start = first_argument_offset(&self.source_info.source, open as usize) as u32;
            self.source_info.add_offset(id, start, start + c.iter_var.len() as u32);
        }
        IdedExpr { id, expr: Expr::Ident(c.iter_var.clone()) }
    }

    /// Rebuilds `e`, visiting exists-one comprehensions in the source order of their names:
    /// the range (the call's target) first, then the name, then the predicate.
    fn rebuild(&mut self, e: &IdedExpr) -> IdedExpr {
        if let (Some(pred), Expr::Comprehension(c)) = (exists_one_predicate(e), &e.expr) {
            return self.rebuild_exists_one(e, c, pred);
        }
        let mut out = e.clone();
        self.rebuild_children(&mut out);
        out
    }

    fn rebuild_exists_one(&mut self, e: &IdedExpr, c: &ComprehensionExpr, pred: &IdedExpr) -> IdedExpr {
        let range = self.rebuild(&c.iter_range);
        let spelled_exists_one = self.spellings.get(self.next).copied().unwrap_or(false);
        self.next += 1;
        let pred = self.rebuild(pred);
        if spelled_exists_one {
            let var = self.variable(c);
            return IdedExpr {
                id: e.id,
                expr: Expr::Call(CallExpr {
                    func_name: "existsOne".into(),
                    target: Some(Box::new(range)),
                    args: vec![var, pred],
                }),
            };
        }
        let mut out = e.clone();
        if let Expr::Comprehension(oc) = &mut out.expr {
            oc.iter_range = range;
            if let Expr::Call(step) = &mut oc.loop_step.expr {
                step.args[0] = pred;
            }
        }
        out
    }

    fn rebuild_children(&mut self, out: &mut IdedExpr) {
        match &mut out.expr {
            Expr::Call(c) => {
                if let Some(t) = &mut c.target {
                    **t = self.rebuild(t);
                }
                for a in &mut c.args {
                    *a = self.rebuild(a);
                }
            }
            Expr::Comprehension(c) => {
                c.iter_range = self.rebuild(&c.iter_range);
                c.accu_init = self.rebuild(&c.accu_init);
                c.loop_cond = self.rebuild(&c.loop_cond);
                c.loop_step = self.rebuild(&c.loop_step);
                c.result = self.rebuild(&c.result);
            }
            Expr::List(l) => {
                for x in &mut l.elements {
                    *x = self.rebuild(x);
                }
            }
            Expr::Map(m) => {
                for entry in &mut m.entries {
                    if let EntryExpr::MapEntry(me) = &mut entry.expr {
                        me.key = self.rebuild(&me.key);
                        me.value = self.rebuild(&me.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &mut s.entries {
                    if let EntryExpr::StructField(f) = &mut entry.expr {
                        f.value = self.rebuild(&f.value);
                    }
                }
            }
            Expr::Select(s) => *s.operand = self.rebuild(&s.operand),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_in_source_order() {
        assert_eq!(exists_one_spellings("[1].existsOne(x, x == 1)"), vec![true]);
        assert_eq!(exists_one_spellings("[1].exists_one(x, x == 1)"), vec![false]);
        assert_eq!(exists_one_spellings("{'a':1}.existsOne(k, v, v == 1)"), Vec::<bool>::new());
        assert_eq!(exists_one_spellings("'.existsOne(a, b)' + x.existsOne(a, f(b, c))"), vec![true]);
        assert_eq!(exists_one_spellings(r"r'\' + x // .existsOne(a, b)"), Vec::<bool>::new());
        assert_eq!(
            exists_one_spellings(r#"'''.existsOne(a, b)''' + b".existsOne(a, b)""#),
            Vec::<bool>::new()
        );
        assert_eq!(
            exists_one_spellings("[[1].exists_one(x, x == 1)].existsOne(y, [2].existsOne(z, z))"),
            vec![false, true, true]
        );
    }
}
