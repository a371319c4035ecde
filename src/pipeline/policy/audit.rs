//! A policy's audit annotation values, gathered over its bindings and parameters and published
//! as `<policy>/<key>` once they are all evaluated (`…/policy/validating/dispatcher.go`).

use super::*;

/// A policy's audit annotation values over its bindings and params.
#[derive(Default)]
pub(super) struct Annotations {
    /// key (at most 20 a policy) → distinct values in order of first appearance, and the set
    /// of them (one value per binding and parameter: a selector may select many).
    values: Vec<(String, Vec<String>, std::collections::HashSet<String>)>,
}

impl Annotations {
    /// Takes the values the evaluations left in `result.audit_annotations`.
    pub(super) fn collect(&mut self, result: &mut PolicyResult) {
        for (key, value) in result.audit_annotations.drain(..) {
            match self.values.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, values, seen)) => {
                    if seen.insert(value.clone()) {
                        values.push(value);
                    }
                }
                None => self.values.push((key, vec![value.clone()], [value].into())),
            }
        }
    }

    pub(super) fn publish(self, policy: &str) -> Vec<(String, String)> {
        self.values
            .into_iter()
            .map(|(key, values, _)| (format!("{policy}/{key}"), values.join(", ")))
            .collect()
    }
}
