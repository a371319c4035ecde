//! What a ValidatingAdmissionPolicy's turn leaves in the metrics, logs and spans: the API
//! server's policy and match-condition families, the gateway's own policy families, the
//! comparisons with the decision and with a replaced webhook (docs/policies.md).

use super::super::modes::{CallMode, ShadowMode};
use super::super::policy::mutating::MutatingResult;
use super::super::policy::{ConditionCheck, PolicyResult};
use crate::config::policy::Policy;
use crate::logging::Untrusted;
use crate::review::decode::IncomingReview;
use crate::telemetry::names;
use crate::traces::Parent;

/// One policy evaluated: the API server's check families for each decision acted on (not for
/// a shadowed policy, which acts on nothing), the gateway's time per policy, and a span.
pub(crate) fn policy_evaluated(
    result: &PolicyResult,
    mode: CallMode,
    operation: &'static str,
    trace: &Parent,
) {
    let policy = &result.policy.name;
    match_conditions(policy, &result.conditions, operation);
    if !matches!(mode, CallMode::Shadow(_)) {
        for check in &result.checks {
            let labels = [
                ("policy", policy.clone()),
                ("policy_binding", check.binding.clone()),
                ("error_type", check.error_type.to_owned()),
                ("enforcement_action", check.enforcement_action.to_owned()),
            ];
            metrics::counter!(names::POLICY_CHECKS, &labels).increment(1);
            metrics::histogram!(names::POLICY_CHECK_DURATION, &labels).record(check.seconds);
        }
    }
    metrics::histogram!(names::POLICY_DURATION, "policy" => policy.clone(), "mode" => mode.as_str())
        .record(result.elapsed.as_secs_f64());
    let decision = if result.denials.is_empty() { "allowed" } else { "denied" };
    trace.policy(policy, mode.as_str(), decision, result.elapsed);
}

/// One mutating policy's turn in one round: the API server's families (a check per mutation
/// run, the match-condition families with `type="validate"`, as upstream's mutating plugin
/// passes it), the gateway's time per policy, and a span.
pub(crate) fn mutating_policy_evaluated(
    result: &MutatingResult,
    mode: CallMode,
    operation: &'static str,
    trace: &Parent,
) {
    let policy = &result.policy.name;
    match_conditions(policy, &result.conditions, operation);
    if !matches!(mode, CallMode::Shadow(_)) {
        for check in &result.checks {
            let labels = [
                ("policy", policy.clone()),
                ("policy_binding", check.binding.clone()),
                ("error_type", check.error_type.to_owned()),
            ];
            metrics::counter!(names::MUTATING_POLICY_CHECKS, &labels).increment(1);
            metrics::histogram!(names::MUTATING_POLICY_CHECK_DURATION, &labels).record(check.seconds);
        }
    }
    metrics::histogram!(names::POLICY_DURATION, "policy" => policy.clone(), "mode" => mode.as_str())
        .record(result.elapsed.as_secs_f64());
    let decision = match (result.errors > 0, result.mutated) {
        (true, _) => "denied",
        (false, true) => "mutated",
        (false, false) => "allowed",
    };
    trace.policy(policy, mode.as_str(), decision, result.elapsed);
}

/// The match-condition families as the API server records them for a policy (`type="validate"`
/// for both kinds, as both plugins pass it): the time of conditions that excluded or failed,
/// and each failed condition (no exclusion count).
fn match_conditions(policy: &str, conditions: &[ConditionCheck], operation: &'static str) {
    for condition in conditions {
        let labels = [
            ("name", policy.to_owned()),
            ("kind", "policy".to_owned()),
            ("type", "validate".to_owned()),
            ("operation", operation.to_owned()),
        ];
        if condition.errors > 0 {
            metrics::counter!(names::MATCH_CONDITION_ERRORS, &labels).increment(condition.errors as u64);
        }
        metrics::histogram!(names::MATCH_CONDITION_DURATION, &labels).record(condition.seconds);
    }
}

/// A shadowed policy's decision compared with the request's: counted, a disagreement logged
/// (names and the uid only).
pub(crate) fn policy_shadow(
    policy: &Policy,
    mode: ShadowMode,
    result: &'static str,
    disagreement: &'static str,
    uid: &str,
) {
    let mode = mode.as_str();
    metrics::counter!(
        names::POLICY_SHADOW_RESULTS,
        "policy" => policy.name.clone(),
        "mode" => mode,
        "result" => result,
        "disagreement" => disagreement,
    )
    .increment(1);
    if result == "disagree" {
        let uid = Untrusted(uid);
        tracing::info!(policy = %policy.name, %uid, mode, kind = disagreement, "shadow policy disagrees with the decision");
    }
}

/// A policy's decision compared with the webhook it replaces: counted; a disagreement logged at
/// debug with the request's identity (never its object).
pub(crate) fn policy_paired(
    policy: &Policy,
    configuration: &str,
    webhook: &str,
    result: &'static str,
    disagreement: &'static str,
    request: &IncomingReview,
) {
    metrics::counter!(
        names::POLICY_AGREEMENT,
        "policy" => policy.name.clone(),
        "configuration" => configuration.to_owned(),
        "webhook" => webhook.to_owned(),
        "result" => result,
        "disagreement" => disagreement,
    )
    .increment(1);
    if result != "agree" {
        let r = &request.request;
        tracing::debug!(
            policy = %policy.name,
            configuration,
            webhook,
            result,
            kind = disagreement,
            uid = %Untrusted(&r.uid.value),
            operation = request.operation().as_str(),
            resource = %Untrusted(&request.resource().resource),
            namespace = %Untrusted(&r.namespace),
            name = %Untrusted(&r.name),
            "policy and the webhook it replaces disagree"
        );
    }
}
