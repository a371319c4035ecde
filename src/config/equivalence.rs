//! Equivalent resources: the group/versions that share storage with a requested one, and the
//! kind each of them (and each of its subresources) is served as — what `matchPolicy:
//! Equivalent` searches (docs/semantics.md §4.0.4, §4.2).
//!
//! The API server learns this while installing its storage: every group/version/resource (and
//! subresource) it serves is registered with its kind, under the key of the storage it uses
//! (`RegisterKindFor` in `staging/src/k8s.io/apimachinery/pkg/runtime/mapper.go`, called from
//! `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go`; CRDs from
//! `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go`). The
//! gateway has no storage, so [`BUILT_IN`] writes the built-in part down, and the
//! `GatewayConfig`'s `equivalentResources` adds CRDs served at several versions.
//!
//! Order matters when one rule matches several equivalents: the first registered wins. The API
//! server registers the core group first, then the groups in the order of the storage
//! providers in `pkg/controlplane/instance.go` (kubernetes/kubernetes; `extensions` came before
//! `networking.k8s.io`, `policy` and `apps` while it was served), each group's versions in
//! priority order (`pkg/apis/<group>/install/install.go`). Each entry of
//! `equivalence/table.rs` lists its members in that order. Versions are listed whether or not a
//! current release still serves them: a version the cluster does not serve is never requested,
//! and a rule naming it is then matched as the API server of a release that served it would.

use std::collections::HashMap;
use std::fmt;

use super::rules::{Rule, RuleRequest};
pub(crate) use table::BUILT_IN;

mod table;

/// The kind a group/version/resource, or one of its subresources, is served as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gvk<'a> {
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) kind: &'a str,
}

impl fmt::Display for Gvk<'_> {
    /// As Go prints a `schema.GroupVersionKind`: `apps/v1, Kind=Deployment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A subresource's kind: the resource's own (`status`), or another one (`scale`).
#[derive(Clone, Copy, Debug)]
enum Sub {
    Same,
    Kind(&'static str, &'static str, &'static str),
}

/// One group/version serving a resource of a [`Shared`] entry.
#[derive(Debug)]
pub(crate) struct Served {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    subresources: &'static [(&'static str, Sub)],
}

/// One resource and the group/versions that store it together, in registration order.
#[derive(Debug)]
pub(crate) struct Shared {
    resource: &'static str,
    served: &'static [Served],
}

const fn at(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    subresources: &'static [(&'static str, Sub)],
) -> Served {
    Served { group, version, kind, subresources }
}

const fn shared(resource: &'static str, served: &'static [Served]) -> Shared {
    Shared { resource, served }
}

/// A custom resource served at several versions (`GatewayConfig.equivalentResources`, or learnt
/// from the cluster's CustomResourceDefinitions), checked. Its `status` subresource is served
/// as its own kind and `scale` as `autoscaling/v1 Scale`, as for every CRD; the API server
/// never sends a subresource the CRD does not have.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CustomResource {
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) kind: String,
    /// In the order of the CRD's `spec.versions`, the order the API server registers them.
    pub(crate) versions: Vec<String>,
}

/// Whether the built-in table already knows `group`/`resource`.
pub(crate) fn is_built_in(group: &str, resource: &str) -> bool {
    BUILT_IN.iter().any(|s| s.resource == resource && s.served.iter().any(|m| m.group == group))
}

/// One set of resources sharing storage.
#[derive(Clone, Copy, Debug)]
enum Set<'a> {
    BuiltIn(&'static Shared),
    Custom(&'a CustomResource),
}

/// One member of a set: a group/version serving the set's resource.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member<'a> {
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    source: MemberSource<'a>,
}

#[derive(Clone, Copy, Debug)]
enum MemberSource<'a> {
    BuiltIn(&'static Served),
    Custom(&'a CustomResource),
}

impl<'a> Member<'a> {
    /// The kind this member serves `subresource` (empty: the resource itself) as; `None` when
    /// the table knows no such subresource.
    pub(crate) fn kind(&self, subresource: &str) -> Option<Gvk<'a>> {
        match self.source {
            MemberSource::BuiltIn(served) => {
                let own = Gvk { group: served.group, version: served.version, kind: served.kind };
                if subresource.is_empty() {
                    return Some(own);
                }
                served.subresources.iter().find(|(name, _)| *name == subresource).map(|(_, sub)| match sub {
                    Sub::Same => own,
                    Sub::Kind(group, version, kind) => Gvk { group, version, kind },
                })
            }
            MemberSource::Custom(custom) => match subresource {
                "" | "status" => {
                    Some(Gvk { group: &custom.group, version: self.version, kind: &custom.kind })
                }
                "scale" => Some(Gvk { group: "autoscaling", version: "v1", kind: "Scale" }),
                _ => None,
            },
        }
    }

    /// As Go prints a `schema.GroupVersionResource`: `apps/v1, Resource=deployments`.
    pub(crate) fn gvr(&self) -> String {
        format!("{}/{}, Resource={}", self.group, self.version, self.resource)
    }
}

impl<'a> Set<'a> {
    fn members(self) -> impl Iterator<Item = Member<'a>> {
        let (built_in, custom) = match self {
            Set::BuiltIn(shared) => (Some(shared), None),
            Set::Custom(custom) => (None, Some(custom)),
        };
        let built_in = built_in.into_iter().flat_map(|shared| {
            shared.served.iter().map(move |served| Member {
                group: served.group,
                version: served.version,
                resource: shared.resource,
                source: MemberSource::BuiltIn(served),
            })
        });
        let custom = custom.into_iter().flat_map(|custom| {
            custom.versions.iter().map(move |version| Member {
                group: &custom.group,
                version,
                resource: &custom.resource,
                source: MemberSource::Custom(custom),
            })
        });
        built_in.chain(custom)
    }
}

/// The registry one snapshot matches against: the built-in table and the configured CRDs.
#[derive(Debug, Default)]
pub(crate) struct Equivalence {
    custom: Vec<CustomResource>,
    /// group → resource → the set it belongs to: `Ok` built-in index, `Err` custom index.
    by_group: HashMap<String, HashMap<String, Result<usize, usize>>>,
}

/// An equivalent resource a rule matched, and the kind it is served as (`None`: unknown, and
/// the request fails as in the API server).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit<'a> {
    pub(crate) member: Member<'a>,
    pub(crate) kind: Option<Gvk<'a>>,
}

impl Equivalence {
    pub(crate) fn new(custom: &[CustomResource]) -> Self {
        let mut by_group: HashMap<String, HashMap<String, Result<usize, usize>>> = HashMap::new();
        for (i, shared) in BUILT_IN.iter().enumerate() {
            for served in shared.served {
                by_group.entry(served.group.into()).or_default().insert(shared.resource.into(), Ok(i));
            }
        }
        for (i, custom) in custom.iter().enumerate() {
            by_group
                .entry(custom.group.clone())
                .or_default()
                .entry(custom.resource.clone())
                .or_insert(Err(i));
        }
        Self { custom: custom.to_vec(), by_group }
    }

    fn set(&self, group: &str, resource: &str) -> Option<Set<'_>> {
        match *self.by_group.get(group)?.get(resource)? {
            Ok(i) => BUILT_IN.get(i).map(Set::BuiltIn),
            Err(i) => self.custom.get(i).map(Set::Custom),
        }
    }

    /// Every group/version/resource stored with the requested one, itself included, in the
    /// API server's registration order; empty when it shares storage with nothing known.
    pub(crate) fn equivalents<'s>(
        &'s self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> impl Iterator<Item = Member<'s>> + 's {
        let set = self.set(group, resource);
        let known = set.is_some_and(|set| set.members().any(|m| m.group == group && m.version == version));
        set.filter(|_| known).into_iter().flat_map(Set::members)
    }

    /// The (group, resource) pairs stored with `group`/`resource` in some version, for the
    /// candidate index; `resource` `*` stands for every resource of the group.
    pub(crate) fn related(&self, group: &str, resource: &str) -> Vec<(&str, &str)> {
        let mut related: Vec<(&str, &str)> = Vec::new();
        let Some(by_resource) = self.by_group.get(group) else { return related };
        for (name, _) in by_resource.iter().filter(|(name, _)| resource == "*" || *name == resource) {
            for member in self.set(group, name).into_iter().flat_map(Set::members) {
                let pair =
                    if resource == "*" { (member.group, "*") } else { (member.group, member.resource) };
                if member.group != group && !related.contains(&pair) {
                    related.push(pair);
                }
            }
        }
        related
    }

    /// The API server's search (docs/semantics.md §4.2), run when no rule matched the request
    /// itself: rules in list order, for each rule the equivalents of the requested resource
    /// (the requested one excluded, same subresource); the first hit wins.
    pub(crate) fn search<'r>(
        &self,
        rules: impl IntoIterator<Item = &'r Rule>,
        request: &RuleRequest<'_>,
    ) -> Option<Hit<'_>> {
        let equivalents: Vec<Member<'_>> = self
            .equivalents(request.group, request.version, request.resource)
            .filter(|m| {
                (m.group, m.version, m.resource) != (request.group, request.version, request.resource)
            })
            .collect();
        rules.into_iter().find_map(|rule| {
            equivalents.iter().find_map(|member| {
                let as_if = RuleRequest {
                    group: member.group,
                    version: member.version,
                    resource: member.resource,
                    ..*request
                };
                rule.matches(&as_if).then(|| Hit { member: *member, kind: member.kind(request.subresource) })
            })
        })
    }
}

#[cfg(test)]
mod tests;
