//! `TypedValue.Merge` (`typed/merge.go`, `mergingWalker` with `ruleKeepRHS`): the live object
//! (lhs) and the configuration (rhs) walked together over the schema.

use std::collections::{HashMap, HashSet};

use serde_json::{Map as JsonMap, Value};

use crate::schema::{Atom, List, Map, Relationship, TypeRef};
use crate::validate::{path_element, PathError};

type Merged = Result<Option<Value>, Vec<PathError>>;

/// Merges `rhs` into `lhs` (either may be absent); `None` when neither leaves a value.
pub(crate) fn merge(ty: TypeRef<'_>, lhs: Option<&Value>, rhs: Option<&Value>) -> Merged {
    Walker { path: String::new() }.merge(ty, lhs, rhs)
}

struct Walker {
    path: String,
}

impl Walker {
    fn error(&self, message: String) -> Vec<PathError> {
        vec![PathError { path: self.path.clone(), message }]
    }

    fn merge(&mut self, ty: TypeRef<'_>, lhs: Option<&Value>, rhs: Option<&Value>) -> Merged {
        if lhs.is_none() && rhs.is_none() {
            return Err(self.error("at least one of lhs and rhs must be provided".to_owned()));
        }
        let Some(atom) = ty.resolve() else {
            return Err(self.error(format!("schema error: no type found matching: {}", ty.name())));
        };
        // A missing side takes whatever form the other has.
        let atom = match rhs {
            None => atom.deduce(lhs),
            Some(_) => atom.deduce(rhs),
        };
        self.handle(ty, atom, lhs, rhs)
    }

    fn handle(
        &mut self,
        ty: TypeRef<'_>,
        atom: Atom<'_>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
    ) -> Merged {
        if atom.scalar.is_some() {
            return Ok(leaf(lhs, rhs));
        }
        if let Some((list, relationship)) = atom.list {
            let (l, r) = (lhs.and_then(Value::as_array), rhs.and_then(Value::as_array));
            let empty = |side: Option<&Vec<Value>>| side.is_none_or(Vec::is_empty);
            if relationship == Relationship::Atomic || (empty(l) && empty(r)) {
                return Ok(leaf(lhs, rhs));
            }
            return self.list(ty, list, relationship, l, r);
        }
        if let Some((map, relationship)) = atom.map {
            let (l, r) = (lhs.and_then(Value::as_object), rhs.and_then(Value::as_object));
            let empty = |side: Option<&JsonMap<String, Value>>| side.is_none_or(JsonMap::is_empty);
            if relationship == Relationship::Atomic || (empty(l) && empty(r)) {
                return Ok(leaf(lhs, rhs));
            }
            return self.map(ty, map, l, r);
        }
        Err(self.error(format!("schema error: invalid atom: {}", ty.name())))
    }

    fn map(
        &mut self,
        ty: TypeRef<'_>,
        map: &Map,
        lhs: Option<&JsonMap<String, Value>>,
        rhs: Option<&JsonMap<String, Value>>,
    ) -> Merged {
        let mut out = JsonMap::new();
        let mut errors = Vec::new();
        let keys = lhs.into_iter().flat_map(|m| m.keys()).chain(
            rhs.into_iter().flat_map(|m| m.keys()).filter(|k| !lhs.is_some_and(|l| l.contains_key(*k))),
        );
        let keys: Vec<&String> = keys.collect();
        for key in keys {
            let field = map.field(key).map(|f| &f.ty).or(map.element_type.as_ref());
            let len = self.path.len();
            self.path.push('.');
            self.path.push_str(key);
            let merged = match field {
                Some(field) => {
                    self.merge(ty.with(field), lhs.and_then(|m| m.get(key)), rhs.and_then(|m| m.get(key)))
                }
                None => Err(self.error("field not declared in schema".to_owned())),
            };
            self.path.truncate(len);
            match merged {
                Ok(Some(value)) => {
                    out.insert(key.clone(), value);
                }
                Ok(None) => {}
                Err(mut e) => errors.append(&mut e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((!out.is_empty()).then_some(Value::Object(out)))
    }

    /// `visitListItems`: items merged by their path element; the configuration's items keep
    /// their relative order, the live object's others theirs, interleaved by upstream's
    /// two-cursor walk.
    fn list(
        &mut self,
        ty: TypeRef<'_>,
        list: &List,
        relationship: Relationship,
        lhs: Option<&Vec<Value>>,
        rhs: Option<&Vec<Value>>,
    ) -> Merged {
        if relationship != Relationship::Associative {
            return Err(self.error("invalid indexing of non-associative list".to_owned()));
        }
        let empty = Vec::new();
        let (lhs, rhs) = (lhs.unwrap_or(&empty), rhs.unwrap_or(&empty));
        let mut errors = Vec::new();
        let (rhs_pes, observed_rhs) = self.index(ty, list, rhs, false, &mut errors);
        let (lhs_pes, observed_lhs) = self.index(ty, list, lhs, true, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        let null = Value::Null;
        let mut shared = rhs_pes.iter().filter(|pe| observed_lhs.contains_key(pe.0.as_str()));
        let mut next_shared = shared.next();
        let mut merged_rhs: HashSet<&str> = HashSet::with_capacity(rhs_pes.len());
        let mut out = Vec::with_capacity(lhs_pes.len().max(rhs_pes.len()));
        let (l_len, r_len) = (lhs_pes.len(), rhs_pes.len());
        let (mut li, mut ri) = (0, 0);
        while li < l_len || ri < r_len {
            if li < l_len && ri < r_len {
                let pe = &lhs_pes[li].0;
                if *pe == rhs_pes[ri].0 {
                    merged_rhs.insert(pe);
                    let l = observed_lhs.get(pe.as_str()).copied().map(|v| v.unwrap_or(&null));
                    let r = observed_rhs.get(pe.as_str()).copied().flatten();
                    self.item(ty, list, pe, l, r, &mut out, &mut errors);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if observed_rhs.contains_key(pe.as_str()) && next_shared.is_some_and(|s| s.0 != *pe) {
                    // A shared item, but not the one due in this round.
                    li += 1;
                    continue;
                }
            }
            if li < l_len {
                let pe = &lhs_pes[li].0;
                if !observed_rhs.contains_key(pe.as_str()) {
                    // The item itself, not the observed one (which may be a duplicate's null).
                    let l = lhs.get(lhs_pes[li].1);
                    self.item(ty, list, pe, l, None, &mut out, &mut errors);
                    li += 1;
                    continue;
                } else if merged_rhs.contains(pe.as_str()) {
                    li += 1;
                }
            }
            if ri < r_len {
                let pe = &rhs_pes[ri].0;
                merged_rhs.insert(pe);
                let l = observed_lhs.get(pe.as_str()).copied().map(|v| v.unwrap_or(&null));
                let r = observed_rhs.get(pe.as_str()).copied().flatten();
                self.item(ty, list, pe, l, r, &mut out, &mut errors);
                ri += 1;
                if next_shared.is_some_and(|s| s.0 == *pe) {
                    next_shared = shared.next();
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((!out.is_empty()).then_some(Value::Array(out)))
    }

    /// `indexListPathElements`: each item's path element (with its index), and the item by
    /// element; a duplicate is an error, or, where allowed, observed as `None` (Go's nil).
    #[allow(clippy::type_complexity)]
    fn index<'v>(
        &self,
        ty: TypeRef<'_>,
        list: &List,
        items: &'v [Value],
        allow_duplicates: bool,
        errors: &mut Vec<PathError>,
    ) -> (Vec<(String, usize)>, HashMap<String, Option<&'v Value>>) {
        let mut pes = Vec::with_capacity(items.len());
        let mut observed: HashMap<String, Option<&'v Value>> = HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let pe = match path_element(ty, list, item) {
                Ok(pe) => pe,
                Err(error) => {
                    errors.extend(self.error(format!("element {i}: {error}")));
                    continue;
                }
            };
            match observed.get_mut(&pe) {
                Some(_) if !allow_duplicates => {
                    errors.extend(self.error(format!("duplicate entries for key {pe}")));
                    continue;
                }
                Some(slot) => *slot = None,
                None => {
                    observed.insert(pe.clone(), Some(item));
                }
            }
            pes.push((pe, i));
        }
        (pes, observed)
    }

    #[allow(clippy::too_many_arguments)]
    fn item(
        &mut self,
        ty: TypeRef<'_>,
        list: &List,
        pe: &str,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        out: &mut Vec<Value>,
        errors: &mut Vec<PathError>,
    ) {
        if lhs.is_none() && rhs.is_none() {
            return;
        }
        let len = self.path.len();
        self.path.push_str(pe);
        match self.merge(ty.with(&list.element_type), lhs, rhs) {
            Ok(Some(value)) => out.push(value),
            Ok(None) => {}
            Err(mut e) => errors.append(&mut e),
        }
        self.path.truncate(len);
    }
}

/// `ruleKeepRHS`: the configuration's value where it has one, else the live one.
fn leaf(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}
