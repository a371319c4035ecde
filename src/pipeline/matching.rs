//! Stage 1, for webhooks and ValidatingAdmissionPolicies alike: does a request reach them?
//! (docs/semantics.md §3, §4; docs/policies.md, "Evaluation".)
//!
//! One matcher, in parts both use:
//! - `exempt.rs`: the requests some never see, one table read the webhooks' and the policies'
//!   way;
//! - `rules.rs`: rules against the request, then under `matchPolicy: Equivalent` against the
//!   resources stored with it;
//! - `selectors.rs`: namespace and object selectors against labels (which `config/selector.rs`
//!   reads off objects, for the configuration and the cluster's namespaces too);
//! - `namespace.rs`: which namespace labels a request's selectors read, the labels the review
//!   looked up (`Review::fetch_namespace`), and the 404 and 500 a request fails with when they
//!   could not be had.
//!
//! Then each kind's order: `webhook.rs` a webhook's (matchConditions come after, in
//! `conditions.rs`), `resources.rs` a policy's `matchConstraints` and a binding's
//! `matchResources` (the evaluation around them is `policy.rs`).
//!
//! Only the candidates are matched: the snapshot indexes webhooks and policies by the (group,
//! resource) their rules can match (`config/rules.rs`). A review's object is read and its
//! namespace looked up only for a candidate whose rules match the request.

pub(crate) mod exempt;
pub(crate) mod namespace;
pub(crate) mod resources;
pub(crate) mod rules;
mod selectors;
mod webhook;

pub(crate) use namespace::{reads_namespace_labels, NamespaceLabels};
pub(crate) use webhook::{needs_namespace, not_convertible, rule_match, selected, should_call, Skip};

#[cfg(test)]
mod tests;
