//! The world a replayed review sees (docs/operations.md, "The recorded world"): the namespace
//! and the caller's timeout its record carries, and the live cluster's watches with `--kube`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::record::RecordedWorld;
use crate::pipeline::matching::NamespaceLabels;
use crate::review::decode::IncomingReview;

/// What a replayed review sees of the world: its recorded namespace and the caller's timeout.
pub(super) struct Seen {
    pub(super) namespace: Option<NamespaceLabels>,
    pub(super) timeout: Option<Duration>,
}

impl Seen {
    /// The world of `record` for `review`, as `fleets` choose to see it. A recorded namespace
    /// is taken only for the request's own namespace.
    pub(super) fn of(
        world: &RecordedWorld,
        review: &IncomingReview,
        recorded_world: bool,
    ) -> anyhow::Result<Self> {
        let namespace = world
            .namespace
            .as_ref()
            .filter(|recorded| recorded_world && recorded.name == review.request.namespace)
            .map(looked_up);
        let timeout = match &world.timeout {
            None => None,
            Some(text) => {
                let nanos = crate::go::duration::parse(text)
                    .ok()
                    .and_then(|nanos| u64::try_from(nanos).ok())
                    .with_context(|| format!("the recorded timeout {text:?} is not a Go duration"))?;
                Some(Duration::from_nanos(nanos))
            }
        };
        Ok(Seen { namespace, timeout })
    }
}

/// A recorded namespace lookup, to be made again as it was.
fn looked_up(recorded: &crate::recording::Namespace) -> NamespaceLabels {
    use crate::recording::NotFound;
    match (&recorded.labels, recorded.not_found, &recorded.unavailable) {
        (Some(labels), ..) => NamespaceLabels::Found(Arc::new(labels.clone())),
        (None, Some(NotFound::Cluster), _) => NamespaceLabels::Missing { live: true },
        (None, Some(NotFound::Configuration), _) => NamespaceLabels::Missing { live: false },
        (None, None, Some(error)) => NamespaceLabels::Unavailable(error.clone()),
        // Neither labels nor a reason: a namespace without labels.
        (None, None, None) => NamespaceLabels::Found(Arc::default()),
    }
}

/// Stops the cluster's watches when the replay ends.
pub(super) struct Aborted(pub(super) Vec<tokio::task::JoinHandle<()>>);

impl Drop for Aborted {
    fn drop(&mut self) {
        self.0.iter().for_each(tokio::task::JoinHandle::abort);
    }
}
