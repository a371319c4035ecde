//! ValidatingAdmissionPolicy, MutatingAdmissionPolicy and their bindings (and the parameter
//! objects a `paramKind` names), loaded from the same sources as the fleet: defaulted and validated as the
//! API server does on create (`pkg/apis/admissionregistration/{v1/defaults.go,validation/validation.go}`
//! in kubernetes/kubernetes), every problem named, expressions compiled once. Both kinds share
//! this code: a [`Policies`] holds the policies of one [`PolicyKind`]. Evaluated by
//! `pipeline::policy` (validating) and `pipeline::mutating_policy`; docs/policies.md tells
//! the whole story.
//!
//! Order (docs/policies.md, "Order"): policies named `*.static.k8s.io` first, then the others,
//! each group by name; a policy's bindings by name; parameters by namespace, then name.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::compile::ReinvocationPolicy;
use super::equivalence::Equivalence;
use super::manifest::{ApiVersion, ObjectMeta, RuleWithOperations, WebhookConfiguration, WebhookKind};
use super::mode::Mode;
use super::rules::{Rule, RuleIndex};
use super::selector::Selector;
use super::{Finding, Problem};
use crate::cel::{self, Authz, Declared, Env, Program, Returns};

pub(crate) mod manifest;
use super::validate::{messages, names};
mod compile;
#[cfg(test)]
mod mutating_tests;
mod params;
mod read;
#[cfg(test)]
pub(crate) mod tests;
mod validate;

use compile::{compile_binding, compile_policy};
use manifest::{BindingObject, MatchResources, PolicyObject};
use messages::{duplicate, forbidden, invalid, quote};
pub(crate) use params::{Param, ParamSet};
use read::{read_kind, ReadKind};

/// One document of a kind the policies use, and where it was found.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub(crate) file: PathBuf,
    /// `Kind "name"`, as every problem names the object.
    pub(crate) object: String,
    pub(crate) value: Value,
}

/// What the configuration sources held for policies, in file order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Documents {
    /// `ValidatingAdmissionPolicy`, v1 or v1beta1.
    pub(crate) policies: Vec<Found>,
    /// `ValidatingAdmissionPolicyBinding`, v1 or v1beta1.
    pub(crate) bindings: Vec<Found>,
    /// `MutatingAdmissionPolicy`, v1, v1beta1 or v1alpha1.
    pub(crate) mutating_policies: Vec<Found>,
    /// `MutatingAdmissionPolicyBinding`, v1, v1beta1 or v1alpha1.
    pub(crate) mutating_bindings: Vec<Found>,
    /// Every object of another kind: a parameter when a policy's `paramKind` names its kind,
    /// else refused as an unsupported object.
    pub(crate) others: Vec<Found>,
}

/// The two kinds of admission policy; one code path loads both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum PolicyKind {
    #[default]
    Validating,
    Mutating,
}

impl PolicyKind {
    pub(crate) fn policy(self) -> &'static str {
        match self {
            PolicyKind::Validating => "ValidatingAdmissionPolicy",
            PolicyKind::Mutating => "MutatingAdmissionPolicy",
        }
    }

    pub(crate) fn binding(self) -> &'static str {
        match self {
            PolicyKind::Validating => "ValidatingAdmissionPolicyBinding",
            PolicyKind::Mutating => "MutatingAdmissionPolicyBinding",
        }
    }

    /// The versions of `admissionregistration.k8s.io` the kind is read in (the API server
    /// converts each to v1; their fields are the same).
    fn versions(self) -> &'static [&'static str] {
        match self {
            PolicyKind::Validating => &["v1", "v1beta1"],
            PolicyKind::Mutating => &["v1", "v1beta1", "v1alpha1"],
        }
    }
}

/// Every policy of one kind, binding and parameter, compiled; empty when none is configured.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    policies: Vec<Arc<Policy>>,
    /// The resources stored together, for `matchPolicy: Equivalent` (built-in table unless
    /// [`Policies::set_equivalence`] gave the snapshot's).
    equivalence: Option<Arc<Equivalence>>,
    /// From (group, resource) to the positions of the policies with bindings whose
    /// `matchConstraints` can match it ([`Policies::candidates`]).
    index: RuleIndex,
}

/// Annotation naming the validating webhook a policy is meant to replace:
/// `<ValidatingWebhookConfiguration name>/<webhook name>`.
pub(crate) const REPLACES_ANNOTATION: &str = "admission-gateway/replaces";
/// Names of manifest-only ("static") policies and bindings end so (KEP-5793).
pub(crate) const STATIC_SUFFIX: &str = ".static.k8s.io";
const API_GROUP: &str = "admissionregistration.k8s.io";

/// One policy with its bindings, compiled.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) kind: PolicyKind,
    pub(crate) name: String,
    /// Named `*.static.k8s.io`: evaluated first, exempt from nothing but the auth reviews.
    pub(crate) is_static: bool,
    /// From `admission-gateway/mode` and `admission-gateway/canary-percent`.
    pub(crate) mode: Mode,
    /// From `admission-gateway/replaces`.
    pub(crate) replaces: Option<Replaces>,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) param_kind: Option<ParamKind>,
    /// `None` only when the object had none (refused at load).
    pub(crate) match_constraints: Option<Matcher>,
    pub(crate) match_conditions: Vec<Expression>,
    pub(crate) variables: Vec<Declared>,
    pub(crate) validations: Vec<CompiledValidation>,
    pub(crate) audit_annotations: Vec<CompiledAuditAnnotation>,
    /// A MutatingAdmissionPolicy's `spec.mutations`, in order.
    pub(crate) mutations: Vec<CompiledMutation>,
    /// A MutatingAdmissionPolicy's `spec.reinvocationPolicy` (unset acts as `Never`).
    pub(crate) reinvocation: ReinvocationPolicy,
    /// In evaluation order (by name).
    pub(crate) bindings: Vec<Binding>,
    /// The configured parameters of `param_kind`.
    pub(crate) params: ParamSet,
    /// `spec.matchConstraints.resourceRules` without their names.
    rules: Vec<RuleWithOperations>,
}

impl Policy {
    /// Some expression calls the `authorizer`: evaluation may block on SubjectAccessReviews, so
    /// the stage runs it off the serving thread, inside `cel::authorizer::with_scope`.
    pub(crate) fn uses_authorizer(&self) -> bool {
        let uses = |e: &Expression| e.program.as_ref().is_ok_and(|p| p.uses.authorizer);
        self.match_conditions.iter().any(uses)
            || self.variables.iter().any(|v| v.program.as_ref().is_ok_and(|p| p.uses.authorizer))
            || self.validations.iter().any(|v| uses(&v.expression))
            || self.mutations.iter().any(|m| m.expression.as_ref().is_some_and(uses))
    }

    /// The rules of `spec.matchConstraints.resourceRules`, as webhook rules (their
    /// `resourceNames` dropped): what the policy can match, for `registration`.
    pub(crate) fn rules(&self) -> &[RuleWithOperations] {
        &self.rules
    }
}

/// `<configuration>/<webhook>` of `admission-gateway/replaces`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Replaces {
    pub(crate) configuration: String,
    pub(crate) webhook: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
    /// A value validation refused: every config error denies with
    /// `unrecognized failure policy: '<value>'`.
    Unrecognized(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamKind {
    pub(crate) api_version: String,
    pub(crate) kind: String,
}

/// A compiled MatchResources.
#[derive(Clone, Debug)]
pub(crate) struct Matcher {
    pub(crate) namespace_selector: Selector,
    pub(crate) object_selector: Selector,
    pub(crate) resource_rules: Vec<NamedRule>,
    pub(crate) exclude_resource_rules: Vec<NamedRule>,
    /// `matchPolicy: Equivalent` (the default).
    pub(crate) equivalent: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct NamedRule {
    pub(crate) rule: Rule,
    pub(crate) resource_names: Vec<String>,
}

/// An expression as written (trimmed) and compiled (`Err`: the compile error).
#[derive(Clone, Debug)]
pub(crate) struct Expression {
    pub(crate) name: String,
    pub(crate) expression: String,
    pub(crate) program: Result<Arc<Program>, String>,
}

#[derive(Clone, Debug)]
pub(crate) struct CompiledValidation {
    pub(crate) expression: Expression,
    /// Trimmed; `None` when unset or blank.
    pub(crate) message: Option<String>,
    pub(crate) message_expression: Option<Expression>,
    /// As written; `None`: `Invalid`.
    pub(crate) reason: Option<String>,
}

/// One mutation: its patch type and expression; `expression` is `None` when the patch type's
/// body is missing (refused at load; upstream then fails every request it matches with
/// `expected N compiled evaluators`).
#[derive(Clone, Debug)]
pub(crate) struct CompiledMutation {
    pub(crate) patch_type: cel::PatchType,
    pub(crate) expression: Option<Expression>,
}

#[derive(Clone, Debug)]
pub(crate) struct CompiledAuditAnnotation {
    pub(crate) key: String,
    pub(crate) value: Expression,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Deny,
    Warn,
    Audit,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub(crate) name: String,
    /// In list order; unknown values dropped (refused at load).
    pub(crate) validation_actions: Vec<Action>,
    pub(crate) param_ref: Option<ParamRef>,
    pub(crate) match_resources: Option<Matcher>,
}

#[derive(Clone, Debug)]
pub(crate) struct ParamRef {
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) selector: Option<Selector>,
    /// `parameterNotFoundAction: Deny` (unset behaves as `Allow`).
    pub(crate) deny_when_not_found: bool,
}

/// The policies of both kinds, compiled.
#[derive(Debug, Default)]
pub(crate) struct Compiled {
    pub(crate) validating: Policies,
    pub(crate) mutating: Policies,
}

impl Policies {
    /// Compiles `documents`; every problem goes to `problems`, naming file, object, field and,
    /// for an expression, the expression. The policies are returned even when there are
    /// problems (the caller refuses the configuration then).
    pub(crate) fn compile(documents: Documents, problems: &mut Vec<Problem>) -> Compiled {
        let validating = read_kind(PolicyKind::Validating, documents.policies, documents.bindings, problems);
        let mutating = read_kind(
            PolicyKind::Mutating,
            documents.mutating_policies,
            documents.mutating_bindings,
            problems,
        );
        // Parameters: objects whose apiVersion and kind some paramKind names.
        let kinds: HashSet<(String, String)> = validating
            .0
            .iter()
            .chain(&mutating.0)
            .filter_map(|(_, p)| p.spec.param_kind.as_ref())
            .filter_map(|k| Some((k.api_version.clone()?, k.kind.clone()?)))
            .collect();
        let mut params: BTreeMap<(String, String), ParamSet> = BTreeMap::new();
        for found in documents.others {
            let api_version = found.value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            let kind = found.value.get("kind").and_then(Value::as_str).unwrap_or_default();
            let key = (api_version.to_owned(), kind.to_owned());
            if !kinds.contains(&key) {
                problems.push(Problem {
                    severity: super::Severity::Error,
                    file: found.file.clone(),
                    object: Some(found.object.clone()),
                    webhook: None,
                    field: None,
                    message: format!(
                        "unsupported object {api_version}, Kind={kind}: expected admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, ValidatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy or MutatingAdmissionPolicyBinding, v1 Namespace, an object a policy's paramKind names, {} {}, or a v1 List of them",
                        super::settings::API_VERSION,
                        super::settings::KIND
                    ),
                });
                continue;
            }
            let param = Param::of_object(Arc::new(found.value.clone()));
            let what = if param.namespace.is_empty() {
                param.name.clone()
            } else {
                format!("{}/{}", param.namespace, param.name)
            };
            if !params.entry(key).or_default().insert(param) {
                let finding = Finding::error("metadata.name", duplicate(&what));
                problems.push(Problem::in_object(&found.file, &found.object, finding));
            }
        }
        Compiled {
            validating: compile_kind(PolicyKind::Validating, validating, &params, problems),
            mutating: compile_kind(PolicyKind::Mutating, mutating, &params, problems),
        }
    }

    /// Indexes each policy that has bindings by what its `matchConstraints` can match, as the
    /// snapshot indexes webhooks (`config/compile.rs`): its `resourceRules` and, under
    /// `matchPolicy: Equivalent`, the resources stored with theirs; its `excludeResourceRules`
    /// too, whose Equivalent search fails a request it reaches a resource of unknown kind
    /// with (k8s.io/apiserver `pkg/admission/plugin/policy/matching/matching.go`). A policy
    /// without `resourceRules` matches every request, and one without `matchConstraints`
    /// fails every request with a configuration error (`…/policy/generic/policy_matcher.go`):
    /// both are candidates everywhere.
    fn index(&mut self) {
        let mut index = RuleIndex::default();
        let equivalence = self.equivalence();
        for (position, policy) in self.policies.iter().enumerate().filter(|(_, p)| !p.bindings.is_empty()) {
            match &policy.match_constraints {
                Some(matcher) if !matcher.resource_rules.is_empty() => {
                    let rules = matcher.resource_rules.iter().chain(&matcher.exclude_resource_rules);
                    index.add(
                        position,
                        rules.map(|named| &named.rule),
                        matcher.equivalent.then_some(equivalence),
                    );
                }
                _ => index.add_everywhere(position),
            }
        }
        self.index = index;
    }

    /// The policies with bindings that may match a request for `resource` of `group` as it was
    /// requested (`requestResource`), with their positions in [`Policies::iter`], in evaluation
    /// order: the others' `matchConstraints` cannot.
    pub(crate) fn candidates(
        &self,
        group: &str,
        resource: &str,
    ) -> impl Iterator<Item = (usize, &Arc<Policy>)> {
        let positions = self.index.candidates(group, resource);
        positions.into_iter().filter_map(|position| Some((position, self.policies.get(position)?)))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Every policy in evaluation order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policies.iter()
    }

    /// Matches `matchPolicy: Equivalent` against `equivalence` (the snapshot's, with its
    /// configured custom resources) instead of the built-in table alone.
    pub(crate) fn set_equivalence(&mut self, equivalence: Arc<Equivalence>) {
        self.equivalence = Some(equivalence);
        self.index();
    }

    /// The registry `matchPolicy: Equivalent` searches.
    pub(crate) fn equivalence(&self) -> &Equivalence {
        static BUILT_IN: OnceLock<Equivalence> = OnceLock::new();
        match &self.equivalence {
            Some(equivalence) => equivalence,
            None => BUILT_IN.get_or_init(|| Equivalence::new(&[])),
        }
    }
}

/// Compiles the policies and bindings of one kind, with the parameters their paramKinds name.
fn compile_kind(
    kind: PolicyKind,
    read: ReadKind,
    params: &BTreeMap<(String, String), ParamSet>,
    problems: &mut Vec<Problem>,
) -> Policies {
    let ReadKind(read_policies, read_bindings) = read;
    // Names: unique per kind; static rules.
    let mut names = HashSet::new();
    let static_policies: HashSet<String> = read_policies
        .iter()
        .map(|(_, p)| p.metadata.name.clone())
        .filter(|n| n.ends_with(STATIC_SUFFIX))
        .collect();
    let mut policies: Vec<Policy> = Vec::new();
    for (found, object) in read_policies {
        let mut findings = Vec::new();
        if !object.metadata.name.is_empty() && !names.insert(object.metadata.name.clone()) {
            findings.push(Finding::error("metadata.name", duplicate(&object.metadata.name)));
        }
        let key =
            object.spec.param_kind.as_ref().and_then(|k| Some((k.api_version.clone()?, k.kind.clone()?)));
        let own_params = key.and_then(|key| params.get(&key).cloned()).unwrap_or_default();
        let policy = compile_policy(kind, &object, own_params, &mut findings);
        problems.extend(findings.into_iter().map(|f| Problem::in_object(&found.file, &found.object, f)));
        policies.push(policy);
    }
    let mut binding_names = HashSet::new();
    let mut bindings: Vec<(String, Binding)> = Vec::new();
    for (found, object) in read_bindings {
        let mut findings = Vec::new();
        if !object.metadata.name.is_empty() && !binding_names.insert(object.metadata.name.clone()) {
            findings.push(Finding::error("metadata.name", duplicate(&object.metadata.name)));
        }
        let binding = compile_binding(kind, &object, &static_policies, &mut findings);
        problems.extend(findings.into_iter().map(|f| Problem::in_object(&found.file, &found.object, f)));
        bindings.push((object.spec.policy_name.clone(), binding));
    }
    bindings.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    for policy in &mut policies {
        policy.bindings =
            bindings.iter().filter(|(name, _)| *name == policy.name).map(|(_, b)| b.clone()).collect();
    }
    policies.sort_by(|a, b| (!a.is_static, &a.name).cmp(&(!b.is_static, &b.name)));
    let policies = policies.into_iter().map(Arc::new).collect();
    let mut policies = Policies { policies, equivalence: None, index: RuleIndex::default() };
    policies.index();
    policies
}
