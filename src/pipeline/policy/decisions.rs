//! The decisions of one (binding, param) evaluation (k8s.io/apiserver
//! `pkg/admission/plugin/policy/validating/{validator.go,dispatcher.go}`): matchConditions,
//! validations, messages, audit annotations; then the binding's actions on each, the
//! configuration errors, and the Status a denial fails the request with.

use super::denial::denial;
use super::*;

/// One decision of an evaluation.
#[derive(Debug)]
struct Decision {
    kind: DecisionKind,
    message: String,
    /// `reason` of the validation (`None`: Invalid).
    reason: Option<String>,
    /// 0-based index in `spec.validations` (0 for whole-evaluation errors).
    index: usize,
    seconds: f64,
}

#[derive(Debug, PartialEq, Eq)]
enum DecisionKind {
    /// A false validation: through the binding's actions.
    Deny,
    /// An expression error: through the actions under Fail, allowed under Ignore.
    Error,
    /// An audit annotation error under Fail: a denial regardless of the actions.
    Enforced,
}

/// What one evaluation gives: its decisions, and the audit annotation values it produced.
pub(super) struct Evaluation {
    decisions: Vec<Decision>,
    annotations: Vec<(String, String)>,
}

fn whole(message: String) -> Decision {
    Decision { kind: DecisionKind::Error, message, reason: None, index: 0, seconds: 0.0 }
}

/// One (binding, param) evaluation: matchConditions, validations, messages, audit
/// annotations. `None`: skipped by a false condition (or an error under Ignore).
pub(super) fn evaluate_binding(
    policy: &Policy,
    binding: &Binding,
    activation: &mut Activation,
    result: &mut PolicyResult,
) -> Option<Evaluation> {
    // matchConditions: `namespaceObject` is null there.
    if !policy.match_conditions.is_empty() {
        let namespace = activation.namespace_object.take();
        let started = Instant::now();
        let outcome = with_session(activation, &[], |session| conditions(policy, session));
        activation.namespace_object = namespace;
        let observe = |result: &mut PolicyResult, errors: usize| {
            let seconds = started.elapsed().as_secs_f64();
            result.conditions.push(ConditionCheck { errors, seconds });
        };
        match outcome {
            Conditions::Match => {}
            Conditions::False(name) => {
                observe(result, 0);
                result
                    .steps
                    .push(format!("binding {:?}: matchCondition {name:?} is false: skipped", binding.name));
                return None;
            }
            Conditions::Error(message, errors) => {
                observe(result, errors.max(1));
                result.steps.push(format!("binding {:?}: matchConditions failed: {message}", binding.name));
                if policy.failure_policy == FailurePolicy::Ignore {
                    result.failed_open = true;
                    result.checks.push(Check {
                        binding: binding.name.clone(),
                        error_type: error_type(&message),
                        enforcement_action: "allow",
                        seconds: 0.0,
                    });
                    return None;
                }
                return Some(Evaluation { decisions: vec![whole(message)], annotations: Vec::new() });
            }
        }
    }
    let evaluation = with_session(activation, &policy.variables, |session| validations(policy, session));
    for decision in &evaluation.decisions {
        let index = decision.index;
        let line = match decision.kind {
            DecisionKind::Deny => format!("binding {:?}: validation {index} is false", binding.name),
            DecisionKind::Enforced => {
                format!("binding {:?}: audit annotation failed: {}", binding.name, decision.message)
            }
            _ => format!("binding {:?}: validation {index} failed: {}", binding.name, decision.message),
        };
        result.steps.push(line);
    }
    if evaluation.decisions.is_empty() && !policy.validations.is_empty() {
        result.steps.push(format!("binding {:?}: every validation is true", binding.name));
    }
    Some(evaluation)
}

pub(super) enum Conditions {
    Match,
    False(String),
    /// The aggregated message, and how many conditions failed (0: the phase failed).
    Error(String, usize),
}

/// matchConditions: every condition in order; a false one wins over errors.
pub(super) fn conditions(policy: &Policy, session: &mut Session<'_>) -> Conditions {
    session.begin_phase(limits(MATCH_CONDITIONS_BUDGET));
    let mut errors: Vec<String> = Vec::new();
    let mut first_false = None;
    for condition in &policy.match_conditions {
        let program = match &condition.program {
            Ok(program) => program,
            Err(error) => {
                errors.push(format!("compilation error: {error}"));
                continue;
            }
        };
        match session.eval(program) {
            Ok(Evaluated::Bool(true)) => {}
            Ok(Evaluated::Bool(false)) => {
                first_false.get_or_insert_with(|| condition.name.clone());
            }
            Ok(other) => errors.push(resulted(
                &condition.expression,
                &format!("must evaluate to bool but got {}", type_of(&other)),
            )),
            Err(Failure::Expression(error)) => errors.push(resulted(&condition.expression, &error)),
            Err(Failure::Phase(error)) => return Conditions::Error(error, 0),
        }
    }
    if let Some(name) = first_false {
        return Conditions::False(name);
    }
    if errors.is_empty() {
        return Conditions::Match;
    }
    let failed = errors.len();
    let mut distinct: Vec<String> = Vec::new();
    for error in errors {
        if !distinct.contains(&error) {
            distinct.push(error);
        }
    }
    let message = if distinct.len() == 1 { distinct.remove(0) } else { format!("[{}]", distinct.join(", ")) };
    Conditions::Error(message, failed)
}

fn resulted(expression: &str, error: &str) -> String {
    format!("expression '{expression}' resulted in error: {error}")
}

fn type_of(value: &Evaluated) -> &'static str {
    match value {
        Evaluated::Bool(_) => "bool",
        Evaluated::String(_) => "string",
        Evaluated::Null => "null_type",
        Evaluated::Other(name) => name,
    }
}

/// The validations, then every messageExpression, on one budget; then the audit
/// annotations on a fresh one.
fn validations(policy: &Policy, session: &mut Session<'_>) -> Evaluation {
    session.begin_phase(limits(EVALUATION_BUDGET));
    let mut decisions: Vec<Option<Decision>> = Vec::new();
    let mut phase_error = None;
    for (index, validation) in policy.validations.iter().enumerate() {
        let started = Instant::now();
        // Only a false validation carries its `reason`; errors are `Invalid`.
        let decision = |kind: DecisionKind, message: String| {
            Some(Decision {
                reason: validation.reason.clone().filter(|_| kind == DecisionKind::Deny),
                kind,
                message,
                index,
                seconds: started.elapsed().as_secs_f64(),
            })
        };
        let expression = &validation.expression;
        let program = match &expression.program {
            Ok(program) => program,
            Err(error) => {
                decisions.push(decision(DecisionKind::Error, format!("compilation error: {error}")));
                continue;
            }
        };
        decisions.push(match session.eval(program) {
            Ok(Evaluated::Bool(true)) => None,
            // Anything but `true` denies (validator.go: `EvalResult != celtypes.True`); a
            // result that is not a bool only gets here past the load-time checks (`dyn`).
            Ok(_) => decision(DecisionKind::Deny, String::new()),
            Err(Failure::Expression(error)) => {
                decision(DecisionKind::Error, resulted(&expression.expression, &error))
            }
            Err(Failure::Phase(error)) => {
                phase_error = Some(error);
                break;
            }
        });
    }
    if let Some(error) = phase_error {
        return Evaluation { decisions: vec![whole(error)], annotations: Vec::new() };
    }
    // Every messageExpression, of passing validations too, with variables evaluated
    // afresh on what is left of the budget.
    session.forget_variables();
    let mut messages: Vec<Option<String>> = Vec::new();
    for validation in &policy.validations {
        let message = match validation.message_expression.as_ref().map(|m| &m.program) {
            Some(Ok(program)) => match session.eval(program) {
                Ok(Evaluated::String(text)) => Some(text),
                Ok(_) | Err(Failure::Expression(_)) => None,
                Err(Failure::Phase(error)) => {
                    phase_error = Some(error);
                    break;
                }
            },
            _ => None,
        };
        messages.push(message);
    }
    let mut decisions: Vec<Decision> = match phase_error {
        Some(error) => {
            // Every validation that did not itself fail becomes an error decision.
            let failed_message = format!("failed messageExpression: {error}");
            decisions
                .into_iter()
                .enumerate()
                .map(|(index, decision)| match decision {
                    Some(d) if d.kind == DecisionKind::Error => d,
                    other => Decision {
                        kind: DecisionKind::Error,
                        message: failed_message.clone(),
                        reason: other.and_then(|d| d.reason),
                        index,
                        seconds: 0.0,
                    },
                })
                .collect()
        }
        None => decisions
            .into_iter()
            .zip(policy.validations.iter().zip(messages))
            .filter_map(|(decision, (validation, message))| {
                let mut decision = decision?;
                if decision.kind == DecisionKind::Deny {
                    decision.message = message_of(validation, message);
                }
                Some(decision)
            })
            .collect(),
    };
    // Audit annotations, on a fresh budget.
    let mut annotations = Vec::new();
    if !policy.audit_annotations.is_empty() {
        session.begin_phase(limits(EVALUATION_BUDGET));
        for annotation in &policy.audit_annotations {
            let value = &annotation.value;
            let program = match &value.program {
                Ok(program) => program,
                Err(error) => {
                    decisions.push(enforced(format!("compilation error: {error}")));
                    continue;
                }
            };
            match session.eval(program) {
                Ok(Evaluated::String(text)) => {
                    let text = text.trim();
                    if !text.is_empty() {
                        annotations.push((annotation.key.clone(), cut(text, MAX_AUDIT_VALUE_BYTES).to_owned()));
                    }
                }
                Ok(Evaluated::Null) => {}
                Ok(other) => decisions.push(Decision {
                    kind: DecisionKind::Enforced,
                    message: format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        value.expression,
                        type_of(&other)
                    ),
                    reason: None,
                    index: 0,
                    seconds: 0.0,
                }),
                Err(Failure::Expression(error)) => {
                    if policy.failure_policy != FailurePolicy::Ignore {
                        decisions.push(enforced(resulted(&value.expression, &error)));
                    }
                }
                Err(Failure::Phase(error)) => {
                    return Evaluation { decisions: vec![whole(error)], annotations: Vec::new() };
                }
            }
        }
    }
    Evaluation { decisions, annotations }
}

fn enforced(message: String) -> Decision {
    Decision { kind: DecisionKind::Enforced, message, reason: None, index: 0, seconds: 0.0 }
}

/// The message of a false validation: the messageExpression's, else `message`, else the expression.
fn message_of(validation: &CompiledValidation, evaluated: Option<String>) -> String {
    if let Some(text) = evaluated {
        let text = text.trim();
        if !text.is_empty() && text.len() <= MAX_MESSAGE_BYTES && !text.contains('\n') {
            return text.to_owned();
        }
    }
    if let Some(message) = &validation.message {
        return message.clone();
    }
    format!("failed expression: {}", validation.expression.expression.trim())
}

/// The first `max` bytes of `text`, at a character boundary (a Rust string cannot hold the
/// split character the API server's byte cut may leave).
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The metric's `error_type`, from the decision's message (the same for both kinds:
/// `validating/errors.go`, `mutating/errors.go`).
pub(super) fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation") {
        "compile_error"
    } else if message.starts_with("validation failed due to running out of cost budget") {
        "out_of_budget"
    } else {
        "invalid_error"
    }
}

/// The binding's `validationActions` on each deny decision.
pub(super) fn apply(
    policy: &Policy,
    binding: &Binding,
    evaluation: Evaluation,
    review: &IncomingReview,
    result: &mut PolicyResult,
) {
    for (key, value) in evaluation.annotations {
        result.audit_annotations.push((key, value));
    }
    for decision in evaluation.decisions {
        let error_type = error_type(&decision.message);
        match decision.kind {
            DecisionKind::Error if policy.failure_policy == FailurePolicy::Ignore => {
                result.failed_open = true;
                result.checks.push(Check {
                    binding: binding.name.clone(),
                    error_type,
                    enforcement_action: "allow",
                    seconds: decision.seconds,
                });
                continue;
            }
            DecisionKind::Enforced => {
                let inner = format!(
                    "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                    policy.name, binding.name, decision.message
                );
                result.denials.push(denial(review, &inner, None));
                result.checks.push(Check {
                    binding: binding.name.clone(),
                    error_type,
                    enforcement_action: "deny",
                    seconds: decision.seconds,
                });
                continue;
            }
            _ => {}
        }
        for action in &binding.validation_actions {
            match action {
                Action::Deny => {
                    let inner = format!(
                        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                        policy.name, binding.name, decision.message
                    );
                    result.denials.push(denial(review, &inner, decision.reason.as_deref()));
                }
                Action::Warn => result.warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    policy.name, binding.name, decision.message
                )),
                Action::Audit => result.audit_failures.push(audit_entry(policy, binding, &decision)),
            }
            result.checks.push(Check {
                binding: binding.name.clone(),
                error_type,
                enforcement_action: match action {
                    Action::Deny => "deny",
                    Action::Warn => "warn",
                    Action::Audit => "audit",
                },
                seconds: decision.seconds,
            });
        }
    }
}

/// An entry of the `validation_failure` annotation (fields ordered when published).
fn audit_entry(policy: &Policy, binding: &Binding, decision: &Decision) -> Value {
    let actions: Vec<&str> = binding.validation_actions.iter().map(|a| a.as_str()).collect();
    json!({
        "message": decision.message,
        "policy": policy.name,
        "binding": binding.name,
        "expressionIndex": decision.index,
        "validationActions": actions,
    })
}

/// A configuration error of the policy (`binding` `None`) or of a binding.
pub(super) fn config_error(
    policy: &Policy,
    binding: Option<&Binding>,
    error: &str,
    review: &IncomingReview,
    result: &mut PolicyResult,
) {
    let message = match binding {
        None => format!("failed to configure policy: {error}"),
        Some(_) => format!("failed to configure binding: {error}"),
    };
    let message = match &policy.failure_policy {
        FailurePolicy::Ignore => {
            result.failed_open = true;
            return;
        }
        FailurePolicy::Fail => message,
        FailurePolicy::Unrecognized(value) => format!("unrecognized failure policy: '{value}'"),
    };
    let inner = match binding {
        None => format!("ValidatingAdmissionPolicy '{}' denied request: {message}", policy.name),
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
            policy.name, binding.name
        ),
    };
    result.denials.push(denial(review, &inner, None));
}
