//! `TypedValue.Merge` (`sigs.k8s.io/structured-merge-diff/v6/typed/merge.go`) with
//! `ruleKeepRHS`: the live object (lhs) merged with the apply configuration (rhs).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::convert::{deduce, invalid_atom, no_type};
use crate::path::{list_item_pe, prefix_from, VErr};
use crate::schema::{ListDef, MapDef, Rel, Schema, TypeRefDef};

static NULL: Value = Value::Null;

pub(crate) struct Merger<'a> {
    pub(crate) schema: &'a Schema,
}

/// A list's items indexed by path element (`indexListPathElements`).
struct Indexed<'a> {
    pes: Vec<String>,
    observed: HashMap<String, &'a Value>,
}

impl<'a> Merger<'a> {
    /// `mergingWalker.merge`: the merged value, None when there is none (an empty list
    /// result of a granular walk, or an error), and the errors.
    pub(crate) fn merge(
        &self,
        tr: &'a TypeRefDef,
        lhs: Option<&'a Value>,
        rhs: Option<&'a Value>,
        errs: &mut Vec<VErr>,
    ) -> Option<Value> {
        if lhs.is_none() && rhs.is_none() {
            errs.push(VErr::new("at least one of lhs and rhs must be provided"));
            return None;
        }
        let Some(a) = self.schema.resolve(tr) else {
            errs.push(VErr::new(no_type(tr)));
            return None;
        };
        // With both sides present and atoms that differ (a deduced type holding a map on one
        // side and a scalar on the other), upstream first walks the lhs atom on a copy of the
        // walker whose result it drops; only the rhs atom's walk makes the result.
        let atom = if rhs.is_none() { deduce(a, lhs, false) } else { deduce(a, rhs, false) };
        if let Some((m, rel)) = atom.map {
            self.do_map(m, rel, lhs, rhs, errs)
        } else if atom.scalar.is_some() {
            leaf(lhs, rhs)
        } else if let Some((l, rel)) = atom.list {
            self.do_list(l, rel, lhs, rhs, errs)
        } else {
            errs.push(VErr::new(invalid_atom(tr)));
            None
        }
    }

    fn do_map(
        &self,
        t: &'a MapDef,
        rel: Rel,
        lhs: Option<&'a Value>,
        rhs: Option<&'a Value>,
        errs: &mut Vec<VErr>,
    ) -> Option<Value> {
        let l = lhs.and_then(Value::as_object);
        let r = rhs.and_then(Value::as_object);
        let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
        if rel == Rel::Atomic || empty {
            return leaf(lhs, rhs);
        }
        let mut out = Map::new();
        for (key, lv) in l.into_iter().flatten() {
            let rv = r.and_then(|r| r.get(key));
            self.map_item(t, &mut out, key, Some(lv), rv, errs);
        }
        for (key, rv) in r.into_iter().flatten() {
            if !l.is_some_and(|l| l.contains_key(key)) {
                self.map_item(t, &mut out, key, None, Some(rv), errs);
            }
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }

    fn map_item(
        &self,
        t: &'a MapDef,
        out: &mut Map<String, Value>,
        key: &str,
        lhs: Option<&'a Value>,
        rhs: Option<&'a Value>,
        errs: &mut Vec<VErr>,
    ) {
        let tr = t.find_field(key).map_or(&*t.element_type, |f| &f.ty);
        let start = errs.len();
        let v = self.merge(tr, lhs, rhs, errs);
        prefix_from(errs, start, || format!(".{key}"));
        if let Some(v) = v {
            out.insert(key.to_string(), v);
        }
    }

    fn do_list(
        &self,
        t: &'a ListDef,
        rel: Rel,
        lhs: Option<&'a Value>,
        rhs: Option<&'a Value>,
        errs: &mut Vec<VErr>,
    ) -> Option<Value> {
        let l = lhs.and_then(Value::as_array);
        let r = rhs.and_then(Value::as_array);
        let empty = l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty);
        if rel == Rel::Atomic || empty {
            return leaf(lhs, rhs);
        }
        if l.is_none() && r.is_none() {
            return None;
        }
        self.visit_list_items(t, rel, l, r, errs)
    }

    fn index(
        &self,
        t: &'a ListDef,
        rel: Rel,
        items: Option<&'a Vec<Value>>,
        allow_duplicates: bool,
        errs: &mut Vec<VErr>,
    ) -> Indexed<'a> {
        let items = items.map_or(&[][..], Vec::as_slice);
        let mut ix =
            Indexed { pes: Vec::with_capacity(items.len()), observed: HashMap::with_capacity(items.len()) };
        for (i, child) in items.iter().enumerate() {
            let pe = match list_item_pe(self.schema, t, rel, child, false) {
                Ok(pe) => pe,
                Err(e) => {
                    errs.push(VErr::new(format!("element {i}: {e}")));
                    continue;
                }
            };
            let canon = pe.canon(false);
            match ix.observed.get_mut(&canon) {
                Some(_) if !allow_duplicates => {
                    errs.push(VErr::new(format!("duplicate entries for key {}", pe.display(false))));
                    continue;
                }
                Some(seen) => *seen = &NULL,
                None => {
                    ix.observed.insert(canon.clone(), child);
                }
            }
            ix.pes.push(canon);
        }
        ix
    }

    /// `visitListItems`: configuration items keep their relative order, live-only items keep
    /// theirs, interleaved by upstream's two-cursor walk.
    fn visit_list_items(
        &self,
        t: &'a ListDef,
        rel: Rel,
        lhs: Option<&'a Vec<Value>>,
        rhs: Option<&'a Vec<Value>>,
        errs: &mut Vec<VErr>,
    ) -> Option<Value> {
        let mut index_errs = Vec::new();
        let rx = self.index(t, rel, rhs, false, &mut index_errs);
        let lx = self.index(t, rel, lhs, true, &mut index_errs);
        if !index_errs.is_empty() {
            errs.extend(index_errs);
            return None;
        }
        let mut out = Vec::with_capacity(lx.pes.len().max(rx.pes.len()));
        // The rhs elements also in lhs, in rhs order.
        let mut shared = rx.pes.iter().filter(|c| lx.observed.contains_key(*c)).map(String::as_str);
        let mut next_shared = shared.next();
        let mut merged_rhs: HashSet<&str> = HashSet::with_capacity(rx.pes.len());
        let (l_len, r_len) = (lx.pes.len(), rx.pes.len());
        let (mut li, mut ri) = (0, 0);
        while li < l_len || ri < r_len {
            if li < l_len && ri < r_len {
                let lc = &lx.pes[li];
                if *lc == rx.pes[ri] {
                    merged_rhs.insert(lc);
                    let (lchild, rchild) = (lx.observed.get(lc).copied(), rx.observed.get(lc).copied());
                    self.list_item(t, lchild, rchild, &mut out);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if rx.observed.contains_key(lc) && next_shared.is_some_and(|s| s != lc) {
                    li += 1;
                    continue;
                }
            }
            if li < l_len {
                let lc = &lx.pes[li];
                if !rx.observed.contains_key(lc) {
                    let lchild = lhs.map(|l| &l[li]);
                    self.list_item(t, lchild, None, &mut out);
                    li += 1;
                    continue;
                } else if merged_rhs.contains(lc.as_str()) {
                    li += 1;
                }
            }
            if ri < r_len {
                let rc = &rx.pes[ri];
                merged_rhs.insert(rc);
                let (lchild, rchild) = (lx.observed.get(rc).copied(), rx.observed.get(rc).copied());
                self.list_item(t, lchild, rchild, &mut out);
                ri += 1;
                if next_shared == Some(rc.as_str()) {
                    next_shared = shared.next();
                }
            }
        }
        (!out.is_empty()).then_some(Value::Array(out))
    }

    /// `mergeListItem`. Upstream drops the errors of list items (`errs = append(errs, errs...)`
    /// on a shadowed variable), so this does too.
    fn list_item(
        &self,
        t: &'a ListDef,
        lhs: Option<&'a Value>,
        rhs: Option<&'a Value>,
        out: &mut Vec<Value>,
    ) {
        let mut dropped = Vec::new();
        if let Some(v) = self.merge(&t.element_type, lhs, rhs, &mut dropped) {
            out.push(v);
        }
    }
}

/// `doLeaf` with `ruleKeepRHS`.
fn leaf(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}
