//! One policy and one binding compiled from their defaulted, validated objects: the
//! expressions each in the environment of its kind, the match resources, the gateway's own
//! annotations (mode, canary percent, the webhook replaced).

use super::*;

pub(super) fn compile_policy(
    kind: PolicyKind,
    object: &PolicyObject,
    params: ParamSet,
    findings: &mut Vec<Finding>,
) -> Policy {
    let mut report = validate::Report::default();
    validate::policy(object, kind, &mut report);
    let spec = &object.spec;
    let name = object.metadata.name.clone();
    let is_static = name.ends_with(STATIC_SUFFIX);
    if is_static && spec.param_kind.is_some() {
        report.error(
            "spec.paramKind",
            forbidden(&format!("a static policy (named *{STATIC_SUFFIX}) may not use parameters")),
        );
    }
    let has_params = spec.param_kind.is_some();
    let variable_names: Vec<String> = spec.variables.iter().map(|v| v.name.clone()).collect();
    // Each variable's checked type, as the expressions after it see `variables.<name>`.
    let mut variable_types: Vec<Option<cel::CheckedType>> = Vec::new();
    let env = |variables: Option<Vec<String>>,
               types: &[Option<cel::CheckedType>],
               authorizer: Authz,
               result: Returns| Env {
        params: has_params,
        variables,
        authorizer,
        result,
        variable_types: types.to_vec(),
        mutation: None,
    };
    // `text` as upstream compiles and quotes it: trimmed for matchConditions and audit
    // annotations, as written for the others.
    let compile = |at: String, name: &str, text: &str, env: Env, report: &mut validate::Report| {
        let program = cel::compile_in(text, &env).map(Arc::new);
        if let Err(error) = &program {
            if !text.trim().is_empty() {
                report.error(&at, invalid(&quote(text), error));
            }
        }
        Expression { name: name.to_owned(), expression: text.to_owned(), program }
    };
    let match_conditions = spec
        .match_conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let env = env(None, &[], Authz::Declared, Returns::Bool);
            compile(
                format!("spec.matchConditions[{i}].expression"),
                &c.name,
                c.expression.trim(),
                env,
                &mut report,
            )
        })
        .collect();
    let mut variables = Vec::with_capacity(spec.variables.len());
    for (i, v) in spec.variables.iter().enumerate() {
        let env = env(Some(variable_names[..i].to_vec()), &variable_types, Authz::Declared, Returns::Any);
        let compiled =
            compile(format!("spec.variables[{i}].expression"), &v.name, &v.expression, env, &mut report);
        variable_types.push(compiled.program.as_ref().ok().map(|p| p.output.clone()));
        variables.push(Declared { name: v.name.clone(), program: compiled.program });
    }
    let validations = spec
        .validations
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let all = Some(variable_names.clone());
            let expression = compile(
                format!("spec.validations[{i}].expression"),
                "",
                &v.expression,
                env(all.clone(), &variable_types, Authz::Declared, Returns::Bool),
                &mut report,
            );
            let message_expression =
                v.message_expression.as_deref().filter(|m| !m.trim().is_empty()).map(|m| {
                    compile(
                        format!("spec.validations[{i}].messageExpression"),
                        "",
                        m,
                        env(all.clone(), &variable_types, Authz::Undeclared, Returns::String),
                        &mut report,
                    )
                });
            CompiledValidation {
                expression,
                message: v.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned),
                message_expression,
                reason: v.reason.clone(),
            }
        })
        .collect();
    let audit_annotations = spec
        .audit_annotations
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let value = if a.value_expression.trim().len() > validate::MAX_VALUE_EXPRESSION_BYTES {
                Expression {
                    name: String::new(),
                    expression: a.value_expression.trim().to_owned(),
                    program: Err("valueExpression too long".to_owned()),
                }
            } else {
                compile(
                    format!("spec.auditAnnotations[{i}].valueExpression"),
                    "",
                    &a.value_expression,
                    env(
                        Some(variable_names.clone()),
                        &variable_types,
                        Authz::FailsAtRuntime,
                        Returns::StringOrNull,
                    ),
                    &mut report,
                )
            };
            CompiledAuditAnnotation { key: a.key.clone(), value }
        })
        .collect();
    let mutations = spec
        .mutations
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let (patch_type, body, field) = match m.patch_type.as_deref() {
                Some("JSONPatch") => (cel::PatchType::JsonPatch, &m.json_patch, "jsonPatch"),
                Some("ApplyConfiguration") => {
                    (cel::PatchType::ApplyConfiguration, &m.apply_configuration, "applyConfiguration")
                }
                // Refused by validation.
                _ => return None,
            };
            let expression = body.as_ref().map(|body| {
                let env = Env {
                    mutation: Some(patch_type),
                    ..env(Some(variable_names.clone()), &variable_types, Authz::Declared, Returns::Any)
                };
                let at = format!("spec.mutations[{i}].{field}.expression");
                compile(at, "", &body.expression, env, &mut report)
            });
            Some(CompiledMutation { patch_type, expression })
        })
        .collect();
    let (mode, replaces) = annotations(kind, &object.metadata.annotations, &mut report);
    findings.extend(report.findings);
    Policy {
        kind,
        mutations,
        reinvocation: match spec.reinvocation_policy.as_deref() {
            Some("IfNeeded") => ReinvocationPolicy::IfNeeded,
            _ => ReinvocationPolicy::Never,
        },
        is_static,
        mode,
        replaces,
        failure_policy: match spec.failure_policy.as_deref() {
            None | Some("Fail") => FailurePolicy::Fail,
            Some("Ignore") => FailurePolicy::Ignore,
            Some(other) => FailurePolicy::Unrecognized(other.to_owned()),
        },
        param_kind: spec.param_kind.as_ref().map(|k| ParamKind {
            api_version: k.api_version.clone().unwrap_or_default(),
            kind: k.kind.clone().unwrap_or_default(),
        }),
        match_constraints: spec.match_constraints.as_ref().map(matcher),
        rules: spec
            .match_constraints
            .iter()
            .flat_map(|m| m.resource_rules.iter().map(manifest::NamedRule::rule))
            .collect(),
        match_conditions,
        variables,
        validations,
        audit_annotations,
        bindings: Vec::new(),
        params,
        name,
    }
}

/// The gateway's annotations: mode, canary share, the webhook replaced.
fn annotations(
    kind: PolicyKind,
    annotations: &BTreeMap<String, String>,
    report: &mut validate::Report,
) -> (Mode, Option<Replaces>) {
    // The same rules as on a ValidatingWebhookConfiguration.
    let as_configuration = WebhookConfiguration {
        kind: WebhookKind::Validating,
        version: ApiVersion::V1,
        metadata: ObjectMeta { annotations: annotations.clone(), ..ObjectMeta::default() },
        webhooks: Vec::new(),
    };
    let mode = Mode::of(&as_configuration).unwrap_or_else(|findings| {
        report.findings.extend(findings);
        Mode::Enforce
    });
    let replaces = annotations.get(REPLACES_ANNOTATION).and_then(|value| {
        let parsed = value.split_once('/').filter(|(configuration, webhook)| {
            !configuration.is_empty()
                && !webhook.is_empty()
                && !webhook.contains('/')
                && names::dns1123_subdomain(configuration).is_empty()
                && names::dns1123_subdomain(webhook).is_empty()
        });
        if parsed.is_none() {
            let configuration = match kind {
                PolicyKind::Validating => "ValidatingWebhookConfiguration",
                PolicyKind::Mutating => "MutatingWebhookConfiguration",
            };
            report.error(
                &format!("metadata.annotations[{REPLACES_ANNOTATION}]"),
                invalid(
                    &quote(value),
                    &format!("must be <configuration>/<webhook>: the name of a {configuration} and of one of its webhooks"),
                ),
            );
        }
        parsed.map(|(configuration, webhook)| Replaces {
            configuration: configuration.to_owned(),
            webhook: webhook.to_owned(),
        })
    });
    (mode, replaces)
}

/// A MatchResources with the API server's defaults (Equivalent, `{}` selectors, scope `*`).
fn matcher(resources: &MatchResources) -> Matcher {
    let selector = |s: &Option<crate::config::manifest::LabelSelector>| {
        s.as_ref().map(Selector::compile).unwrap_or_default()
    };
    let rules = |rules: &[manifest::NamedRule]| {
        rules
            .iter()
            .map(|r| NamedRule { rule: Rule::compile(&r.rule()), resource_names: r.resource_names.clone() })
            .collect()
    };
    Matcher {
        namespace_selector: selector(&resources.namespace_selector),
        object_selector: selector(&resources.object_selector),
        resource_rules: rules(&resources.resource_rules),
        exclude_resource_rules: rules(&resources.exclude_resource_rules),
        equivalent: resources.match_policy.as_deref().is_none_or(|p| p == "Equivalent"),
    }
}

pub(super) fn compile_binding(
    kind: PolicyKind,
    object: &BindingObject,
    static_policies: &HashSet<String>,
    findings: &mut Vec<Finding>,
) -> Binding {
    let mut report = validate::Report::default();
    validate::binding(object, kind, &mut report);
    let spec = &object.spec;
    if object.metadata.name.ends_with(STATIC_SUFFIX) {
        if spec.param_ref.is_some() {
            report.error(
                "spec.paramRef",
                forbidden(&format!("a static binding (named *{STATIC_SUFFIX}) may not use parameters")),
            );
        }
        if !spec.policy_name.is_empty() && !static_policies.contains(&spec.policy_name) {
            report.error(
                "spec.policyName",
                invalid(
                    &quote(&spec.policy_name),
                    &format!("a static binding (named *{STATIC_SUFFIX}) must name a static policy of the configuration"),
                ),
            );
        }
    }
    findings.extend(report.findings);
    Binding {
        name: object.metadata.name.clone(),
        validation_actions: spec
            .validation_actions
            .iter()
            .filter_map(|a| match a.as_str() {
                "Deny" => Some(Action::Deny),
                "Warn" => Some(Action::Warn),
                "Audit" => Some(Action::Audit),
                _ => None,
            })
            .collect(),
        param_ref: spec.param_ref.as_ref().map(|p| ParamRef {
            name: p.name.clone(),
            namespace: p.namespace.clone().filter(|n| !n.is_empty()),
            selector: p.selector.as_ref().map(Selector::compile),
            deny_when_not_found: p.parameter_not_found_action.as_deref() == Some("Deny"),
        }),
        match_resources: spec.match_resources.as_ref().map(matcher),
    }
}
