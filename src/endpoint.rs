//! The endpoint a review arrived at, which decides the dispatchers it goes through. A leaf:
//! the routes pick it, the pipeline runs by it, metrics, traces and reports name it.

/// Which dispatchers a review goes through (the endpoint it arrived at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/mutate`: the mutating chain only.
    Mutate,
    /// `/validate`: the validating webhooks only.
    Validate,
    /// `/admit`: the mutating chain, then the validating webhooks on its result.
    Admit,
}

impl Endpoint {
    /// Every endpoint, in declaration order (`endpoint as usize` indexes it).
    pub(crate) const ALL: [Endpoint; 3] = [Endpoint::Mutate, Endpoint::Validate, Endpoint::Admit];

    /// The name in metrics' `stage` label and in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Mutate => "mutate",
            Self::Validate => "validate",
            Self::Admit => "admit",
        }
    }
}
