//! Label selectors against a request, webhooks' and policies' alike (docs/semantics.md §4.3,
//! §4.4; k8s.io/apiserver `pkg/admission/plugin/webhook/predicates/namespace` and
//! `…/predicates/object`, which the policies' matcher uses too). Where the labels come from is
//! each matcher's: `webhook.rs`, `resources.rs`.

use std::borrow::Borrow;

use crate::config::selector::{Labels, Selector};

/// No labels, for an object that has none to give.
pub(crate) static NO_LABELS: Labels = Labels::new();

/// §4.4: the empty selector matches without reading labels; else the labels of the object or
/// of the old object must match (`None`: no such object, or one without metadata, which no
/// selector matches). The old object's are read only when the object's do not match.
pub(crate) fn object_selected<A: Borrow<Labels>, B: Borrow<Labels>>(
    selector: &Selector,
    object: impl FnOnce() -> Option<A>,
    old_object: impl FnOnce() -> Option<B>,
) -> bool {
    selector.is_empty()
        || object().is_some_and(|labels| selector.matches(labels.borrow()))
        || old_object().is_some_and(|labels| selector.matches(labels.borrow()))
}

/// §4.3 for a request scoped to a namespace: the empty selector matches without reading
/// labels; else the namespace's `labels` decide, or why they could not be had.
pub(crate) fn namespace_selected<L: Borrow<Labels>, E>(
    selector: &Selector,
    labels: impl FnOnce() -> Result<L, E>,
) -> Result<bool, E> {
    if selector.is_empty() {
        return Ok(true);
    }
    Ok(selector.matches(labels()?.borrow()))
}
