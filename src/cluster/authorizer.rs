//! The CEL `authorizer` of matchConditions, answered by the API server: each distinct check
//! of a review is one SubjectAccessReview (authorization.k8s.io/v1) for the requesting user
//! (or the service account the expression names), asked once per review and remembered for
//! the rest of it.
//!
//! CEL evaluation is synchronous; a check blocks its thread for the round trip, bounded by
//! [`CHECK_TIMEOUT`]: the pipeline evaluates such conditions on a blocking thread
//! (`pipeline/conditions.rs`), and the request is driven on the runtime the client lives on.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Deserialize;
use tokio::runtime::Handle;

use crate::cel::authorizer::{Authorizer, Check, Decision, Subject, Target};

/// How long one SubjectAccessReview may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The requesting user, as the AdmissionRequest's `userInfo` gives it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct UserInfo {
    #[serde(default)]
    username: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: BTreeMap<String, Vec<String>>,
}

/// The authorizer of one review.
pub(crate) struct ReviewAuthorizer {
    api: Api<SubjectAccessReview>,
    user: UserInfo,
    runtime: Handle,
    answered: Mutex<HashMap<Check, Decision>>,
}

impl ReviewAuthorizer {
    pub(crate) fn new(client: kube::Client, user: UserInfo, runtime: Handle) -> Self {
        Self { api: Api::all(client), user, runtime, answered: Mutex::new(HashMap::new()) }
    }

    fn review(&self, check: &Check) -> SubjectAccessReview {
        let (user, groups, uid, extra) = match &check.subject {
            Subject::Requester => (
                self.user.username.clone(),
                self.user.groups.clone(),
                self.user.uid.clone(),
                self.user.extra.clone(),
            ),
            // authz.go: serviceaccount.UserInfo(namespace, name, "").
            Subject::ServiceAccount { namespace, name } => (
                format!("system:serviceaccount:{namespace}:{name}"),
                vec!["system:serviceaccounts".to_owned(), format!("system:serviceaccounts:{namespace}")],
                String::new(),
                BTreeMap::new(),
            ),
        };
        let (resource_attributes, non_resource_attributes) = match &check.target {
            Target::Path(path) => (
                None,
                Some(NonResourceAttributes { path: Some(path.clone()), verb: Some(check.verb.clone()) }),
            ),
            Target::Resource(target) => {
                let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
                (
                    Some(ResourceAttributes {
                        group: Some(target.group.clone()),
                        version: Some("*".to_owned()),
                        field_selector: some(&target.field_selector).map(|raw| FieldSelectorAttributes {
                            raw_selector: Some(raw),
                            requirements: None,
                        }),
                        label_selector: some(&target.label_selector).map(|raw| LabelSelectorAttributes {
                            raw_selector: Some(raw),
                            requirements: None,
                        }),
                        resource: some(&target.resource),
                        subresource: some(&target.subresource),
                        namespace: some(&target.namespace),
                        name: some(&target.name),
                        verb: Some(check.verb.clone()),
                    }),
                    None,
                )
            }
        };
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user),
                groups: (!groups.is_empty()).then_some(groups),
                uid: (!uid.is_empty()).then_some(uid),
                extra: (!extra.is_empty()).then(|| extra.into_iter().collect()),
                resource_attributes,
                non_resource_attributes,
            },
            ..SubjectAccessReview::default()
        }
    }

    async fn ask(&self, check: &Check) -> Decision {
        let review = self.review(check);
        match tokio::time::timeout(CHECK_TIMEOUT, self.api.create(&PostParams::default(), &review)).await {
            Ok(Ok(answered)) => {
                let status = answered.status.unwrap_or_default();
                let error = status.evaluation_error.filter(|e| !e.is_empty());
                Decision { allowed: status.allowed, reason: status.reason.unwrap_or_default(), error }
            }
            Ok(Err(error)) => Decision {
                allowed: false,
                reason: String::new(),
                error: Some(format!("SubjectAccessReview failed: {error}")),
            },
            Err(_) => Decision {
                allowed: false,
                reason: String::new(),
                error: Some(format!(
                    "SubjectAccessReview failed: no answer within {} s",
                    CHECK_TIMEOUT.as_secs()
                )),
            },
        }
    }
}

impl Authorizer for ReviewAuthorizer {
    fn authorize(&self, check: &Check) -> Decision {
        if let Some(decision) = self.answered.lock().unwrap_or_else(|e| e.into_inner()).get(check) {
            return decision.clone();
        }
        let decision = self.runtime.block_on(self.ask(check));
        self.answered.lock().unwrap_or_else(|e| e.into_inner()).insert(check.clone(), decision.clone());
        decision
    }
}
