//! One run of the MutatingAdmissionPolicy plugin on a request (k8s.io/apiserver
//! `pkg/admission/plugin/policy/mutating/{dispatcher.go,reinvocationcontext.go}` over the
//! matching and params of `…/policy/generic`, shared with the validating policies here):
//! the invocations — (policy, binding, param) in evaluation order — each through its
//! matchConditions, then its mutations in list order, each seeing the object as the previous
//! one left it, with the variables evaluated afresh for every mutation on a budget of its own.
//!
//! Errors go by the policy's failurePolicy: collected under Fail and turned, after every
//! invocation ran, into one 403 whose causes are all of them (configuration errors first);
//! dropped under Ignore. Some errors are no policy's: a status (no schema for an apply
//! configuration, 503) ends the run at once, whatever the failurePolicy.
//!
//! Reinvocation (`Rounds`): the state a request keeps across the mutating phase's two rounds,
//! as upstream's reinvocation context: invocations of `IfNeeded` policies run since the last
//! change (P), those scheduled for round 1 (R), and the object as the policies last left it.
//! Unlike webhooks', an `IfNeeded` policy is scheduled by its own change, and any successful
//! mutation asks for round 1.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::decisions::{conditions, error_type, Conditions};
use super::*;
use crate::cel::MutationError;
use crate::config::compile::ReinvocationPolicy;
use crate::config::policy::CompiledMutation;
use crate::schemas::Schemas;

use result::{denial, PolicyError};
pub(crate) use result::{Dispatch, MutatingResult, MutationCheck, Rounds};

mod apply;
mod result;
#[cfg(test)]
mod tests;

/// Runs every mutating policy on the request (round `round` of the mutating phase).
/// `applied(policy)`: whether the policy's mutations reach the object (its mode); the others
/// run on a copy of the object as they see it ([`MutatingResult::would`]).
pub(crate) fn dispatch(
    policies: &Policies,
    attributes: &Attributes<'_>,
    lookups: &dyn Lookups,
    schemas: &Schemas,
    round: u8,
    applied: &dyn Fn(&Policy) -> bool,
    rounds: &mut Rounds,
) -> Dispatch {
    let review = attributes.review;
    let mut run = Run {
        current: attributes.object.cloned(),
        state: State::new(),
        config_errors: Vec::new(),
        errors: Vec::new(),
        any_succeeded: false,
    };
    run.state.activation.deadline = attributes.deadline;
    if round == 1 {
        // Changed since the policies last left it (by a webhook): every awaiting invocation
        // runs again.
        if rounds.last.as_ref() != run.current.as_ref() {
            rounds.schedule_awaiting();
        }
    }
    let mut results = Vec::new();
    // The plugin handles CREATE, UPDATE and CONNECT only: a DELETE never reaches it.
    let handled = matches!(review.operation().as_str(), "CREATE" | "UPDATE" | "CONNECT");
    let mut candidates = candidates(policies, review).map(|(position, _)| position).peekable();
    for (position, policy) in policies.iter().enumerate().filter(|(_, p)| !p.bindings.is_empty()) {
        let started = Instant::now();
        let mut result = MutatingResult::new(policy);
        let candidate = candidates.next_if_eq(&position).is_some();
        if !handled {
            result.steps.push(format!(
                "policy {:?} skipped: mutating policies never see a {}",
                policy.name,
                review.operation().as_str()
            ));
        } else if let Some(why) = exempt::from_policy(review, policy.is_static) {
            result.steps.push(format!("policy {:?} skipped: {why}", policy.name));
        } else if !candidate {
            result.steps.push(no_match(policy));
        } else if round == 1 && !applied(policy) {
            // Its mutations are not applied: evaluated once, as a shadow webhook is called once.
            result
                .steps
                .push(format!("policy {:?}: not applied, so not evaluated again in round 1", policy.name));
        } else {
            let context = Context { policies, attributes, lookups, schemas, round, applied: applied(policy) };
            if let Err(status) = run.policy(&context, policy, rounds, &mut result) {
                result.elapsed = started.elapsed();
                results.push(result);
                return Dispatch { object: None, results, outcome: Err(status) };
            }
        }
        result.elapsed = started.elapsed();
        results.push(result);
    }
    if run.any_succeeded {
        // Any successful mutation asks for round 1, and schedules every awaiting invocation.
        rounds.schedule_awaiting();
        rounds.requested = true;
    }
    let changed = run.current.as_ref() != attributes.object;
    rounds.last.clone_from(&run.current);
    let mut errors = run.config_errors;
    errors.append(&mut run.errors);
    let outcome = match errors.first() {
        None => Ok(()),
        Some(first) => Err(denial(review, first, &errors)),
    };
    Dispatch { object: run.current.filter(|_| changed), results, outcome }
}

/// Whether round 1 must run for the policies' sake: some mutation succeeded in round 0.
pub(crate) fn wants_round_1(rounds: &Rounds) -> bool {
    rounds.requested
}

struct Context<'c, 'a> {
    policies: &'c Policies,
    attributes: &'c Attributes<'a>,
    lookups: &'c dyn Lookups,
    schemas: &'c Schemas,
    round: u8,
    applied: bool,
}

/// The state of one run.
struct Run {
    /// The object as the invocations so far left it.
    current: Option<Value>,
    state: State,
    config_errors: Vec<PolicyError>,
    errors: Vec<PolicyError>,
    any_succeeded: bool,
}

impl Run {
    /// One policy: its matchConstraints, each binding's matchResources and params, then each
    /// invocation. `Err`: a status error ends the run.
    fn policy(
        &mut self,
        context: &Context<'_, '_>,
        policy: &Arc<Policy>,
        rounds: &mut Rounds,
        result: &mut MutatingResult,
    ) -> Result<(), Status> {
        let attributes = context.attributes;
        let review = attributes.review;
        let request = request_of(attributes);
        let own = review.kind();
        let equivalence = context.policies.equivalence();
        let Some(constraints) = &policy.match_constraints else {
            self.config_error(
                policy,
                None,
                "policy contained no match constraints, a required field",
                result,
            );
            return Ok(());
        };
        let matched = match resources::matches(constraints, &request, equivalence) {
            Ok(None) => {
                result.steps.push(no_match(policy));
                return Ok(());
            }
            Ok(Some(matched)) => matched,
            Err(error) => {
                result.steps.push(format!("policy {:?}: matchConstraints failed: {error}", policy.name));
                self.config_error(policy, None, &error, result);
                return Ok(());
            }
        };
        for binding in &policy.bindings {
            if let Some(narrowing) = &binding.match_resources {
                match resources::matches(narrowing, &request, equivalence) {
                    Ok(None) => {
                        result.steps.push(format!(
                            "binding {:?}: matchResources do not match the request",
                            binding.name
                        ));
                        continue;
                    }
                    Ok(Some(_)) => {}
                    Err(error) => {
                        result
                            .steps
                            .push(format!("binding {:?}: matchResources failed: {error}", binding.name));
                        self.config_error(policy, Some(binding), &error, result);
                        continue;
                    }
                }
            }
            let params = match params::of(policy, binding, review, context.lookups) {
                Ok(params) => params,
                Err(error) => {
                    result.steps.push(format!("binding {:?}: parameters: {error}", binding.name));
                    self.config_error(policy, Some(binding), &error, result);
                    continue;
                }
            };
            if params.is_empty() {
                result
                    .steps
                    .push(format!("binding {:?}: no parameters found: nothing evaluated", binding.name));
                continue;
            }
            if (matched.group, matched.version, matched.kind)
                != (own.group.as_str(), own.version.as_str(), own.kind.as_str())
            {
                let error = format!(
                    "failed to convert object version: admission-gateway does not convert {}/{}, Kind={} to {}/{}, Kind={}",
                    own.group, own.version, own.kind, matched.group, matched.version, matched.kind
                );
                result.steps.push(format!("binding {:?}: {error}", binding.name));
                self.config_error(policy, Some(binding), &error, result);
                continue;
            }
            result.matched = true;
            for (index, param) in params.into_iter().enumerate() {
                let key = format!("{}\u{0}{}\u{0}{index}", policy.name, binding.name);
                self.invocation(context, policy, binding, param, &key, rounds, result)?;
            }
        }
        Ok(())
    }

    /// One invocation: matchConditions, the round-1 filter, then every mutation.
    #[allow(clippy::too_many_arguments)]
    fn invocation(
        &mut self,
        context: &Context<'_, '_>,
        policy: &Arc<Policy>,
        binding: &Binding,
        param: Option<crate::cel::CelValue>,
        key: &str,
        rounds: &mut Rounds,
        result: &mut MutatingResult,
    ) -> Result<(), Status> {
        self.prepare(context.attributes);
        self.state.activation.params = param;
        if !policy.match_conditions.is_empty() {
            let namespace = self.state.activation.namespace_object.take();
            let started = Instant::now();
            let outcome =
                with_session(&mut self.state.activation, &[], |session| conditions(policy, session));
            self.state.activation.namespace_object = namespace;
            let seconds = started.elapsed().as_secs_f64();
            match outcome {
                Conditions::Match => {}
                Conditions::False(name) => {
                    result.conditions.push(ConditionCheck { errors: 0, seconds });
                    result.steps.push(format!(
                        "binding {:?}: matchCondition {name:?} is false: skipped",
                        binding.name
                    ));
                    return Ok(());
                }
                Conditions::Error(message, errors) => {
                    result.conditions.push(ConditionCheck { errors: errors.max(1), seconds });
                    result
                        .steps
                        .push(format!("binding {:?}: matchConditions failed: {message}", binding.name));
                    match &policy.failure_policy {
                        FailurePolicy::Ignore => {
                            result.failed_open = true;
                            return Ok(());
                        }
                        FailurePolicy::Fail => {
                            self.evaluation_error(policy, binding, message, result);
                            return Ok(());
                        }
                        // An unknown failurePolicy counts an error as a match.
                        FailurePolicy::Unrecognized(_) => {}
                    }
                }
            }
        }
        if context.round == 1 && !rounds.scheduled.contains(key) {
            result.steps.push(format!("binding {:?}: not reinvoked", binding.name));
            return Ok(());
        }
        let before = self.current.clone();
        let mut object = if context.applied { self.current.take() } else { self.current.clone() };
        let mut failure = None;
        for (index, mutation) in policy.mutations.iter().enumerate() {
            let started = Instant::now();
            let outcome = self.mutation(context, policy, mutation, object.as_ref());
            let seconds = started.elapsed().as_secs_f64();
            match outcome {
                Ok(Mutated::Object(next)) => {
                    object = Some(next);
                    self.state.activation.object = object.as_ref().map(|o| json_value(Some(o)));
                    self.any_succeeded |= context.applied;
                    result.checks.push(MutationCheck {
                        binding: binding.name.clone(),
                        error_type: "no_error",
                        seconds,
                    });
                }
                Ok(Mutated::Unchanged) => {
                    self.any_succeeded |= context.applied;
                    result.checks.push(MutationCheck {
                        binding: binding.name.clone(),
                        error_type: "no_error",
                        seconds,
                    });
                }
                Ok(Mutated::Failed(message)) => {
                    result
                        .steps
                        .push(format!("binding {:?}: mutation {index} failed: {message}", binding.name));
                    result.checks.push(MutationCheck {
                        binding: binding.name.clone(),
                        error_type: error_type(&message),
                        seconds,
                    });
                    // The next mutation of the same policy still runs.
                    if policy.failure_policy == FailurePolicy::Ignore {
                        result.failed_open = true;
                    } else if context.applied {
                        self.evaluation_error(policy, binding, message, result);
                    } else {
                        result.errors += 1;
                    }
                }
                Err(status) => {
                    result.checks.push(MutationCheck {
                        binding: binding.name.clone(),
                        error_type: "invalid_error",
                        seconds,
                    });
                    failure = Some(status);
                    break;
                }
            }
        }
        let changed = object != before;
        if context.applied {
            self.current = object;
        } else {
            // Not applied: the object goes on as it was; what it would have become is kept.
            if let (Some(before), Some(after)) = (before, object) {
                result.would = Some((before, after));
            }
            self.state.activation.object = self.current.as_ref().map(|o| json_value(Some(o)));
        }
        if let Some(status) = failure {
            return Err(status);
        }
        if changed && context.applied {
            result.mutated = true;
            result.steps.push(format!("binding {:?}: mutated the object", binding.name));
            if context.round == 0 {
                rounds.schedule_awaiting();
            }
        } else if changed {
            result.steps.push(format!("binding {:?}: would change the object (not applied)", binding.name));
        } else {
            result.steps.push(format!("binding {:?}: the object is unchanged", binding.name));
        }
        if policy.reinvocation == ReinvocationPolicy::IfNeeded && context.applied {
            rounds.awaiting.insert(key.to_owned());
        }
        Ok(())
    }

    /// The activation's request values, once; the object as it stands.
    fn prepare(&mut self, attributes: &Attributes<'_>) {
        if !self.state.prepared {
            self.state.prepare(attributes);
            self.state.activation.object = self.current.as_ref().map(|o| json_value(Some(o)));
        }
    }

    /// One mutation: evaluated on a fresh budget with the variables afresh, then applied.
    fn mutation(
        &mut self,
        context: &Context<'_, '_>,
        policy: &Policy,
        mutation: &CompiledMutation,
        object: Option<&Value>,
    ) -> Result<Mutated, Status> {
        let Some(expression) = &mutation.expression else {
            return Err(crate::pipeline::verdict::internal_error(&format!(
                "expected {} compiled evaluators for policy {}, got {}",
                policy.mutations.len(),
                policy.name,
                policy.mutations.iter().filter(|m| m.expression.is_some()).count()
            )));
        };
        let program = match &expression.program {
            Ok(program) => program,
            // A mutation's compile error reads raw, without `compilation error: `.
            Err(error) => return Ok(Mutated::Failed(error.clone())),
        };
        let evaluated = with_session(&mut self.state.activation, &policy.variables, |session| {
            session.begin_phase(limits(EVALUATION_BUDGET));
            session.eval_mutation(program, mutation.patch_type)
        });
        let value = match evaluated {
            Ok(Ok(value)) => value,
            Ok(Err(
                MutationError::Error(text)
                | MutationError::Panic(text)
                | MutationError::Unrepresentable(text),
            )) => return Ok(Mutated::Failed(text)),
            Err(Failure::Expression(error)) => {
                return Ok(Mutated::Failed(format!(
                    "expression '{}' resulted in error: {error}",
                    expression.expression
                )))
            }
            Err(Failure::Phase(error)) => return Ok(Mutated::Failed(error)),
        };
        let Some(object) = object else {
            return Ok(Mutated::Failed("JSON Patch: no object to patch".to_owned()));
        };
        apply::mutation(context.attributes.review, context.schemas, mutation.patch_type, object, value)
    }

    fn config_error(
        &mut self,
        policy: &Policy,
        binding: Option<&Binding>,
        error: &str,
        result: &mut MutatingResult,
    ) {
        if policy.failure_policy == FailurePolicy::Ignore {
            result.failed_open = true;
            return;
        }
        result.errors += 1;
        let message = match binding {
            None => format!("policy {:?} denied request: failed to configure policy: {error}", policy.name),
            Some(binding) => format!(
                "policy '{}' with binding '{}' denied request: failed to configure binding: {error}",
                policy.name, binding.name
            ),
        };
        self.config_errors.push(PolicyError { message, reason: None });
    }

    fn evaluation_error(
        &mut self,
        policy: &Policy,
        binding: &Binding,
        error: String,
        result: &mut MutatingResult,
    ) {
        result.errors += 1;
        let message =
            format!("policy '{}' with binding '{}' denied request: {error}", policy.name, binding.name);
        self.errors.push(PolicyError { message, reason: Some("Invalid") });
    }
}

/// What one mutation did.
pub(super) enum Mutated {
    /// The object it left.
    Object(Value),
    /// Succeeded without a new object (a JSON Patch whose `test` failed).
    Unchanged,
    /// A policy error, its text.
    Failed(String),
}
