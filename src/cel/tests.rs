use serde_json::{json, Value as Json};

use super::*;

fn pod() -> Json {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.example.com/web:1.2", "resources": {"limits": {"memory": "512Mi"}}},
                {"name": "sidecar", "image": "docker.io/envoy:1.30"}
            ],
            "hostNetwork": false, "priority": 7, "ratio": 0.5
        }
    })
}

fn request() -> Json {
    json!({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "status", "requestSubResource": "status",
        "name": "web", "namespace": "prod", "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:ctrl", "uid": "u-1",
                     "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"scopes": ["a"]}},
        "dryRun": true,
        "options": {"kind": "UpdateOptions", "fieldManager": "kubectl"}
    })
}

/// Evaluates `(name, expression)` conditions against the sample pod as `object`, the same pod
/// with another label as `oldObject`, and the sample request.
fn eval(conditions: &[(&str, &str)]) -> Outcome {
    eval_with(conditions, Some(&pod()), Some(&old_pod()))
}

fn old_pod() -> Json {
    let mut old = pod();
    old["metadata"]["labels"]["tier"] = json!("back");
    old
}

fn eval_with(conditions: &[(&str, &str)], object: Option<&Json>, old: Option<&Json>) -> Outcome {
    let programs: Vec<Program> = conditions
        .iter()
        .map(|(_, e)| compile(e.trim()).unwrap_or_else(|err| panic!("{e}: {err}")))
        .collect();
    let conditions: Vec<Condition<'_>> = conditions
        .iter()
        .zip(&programs)
        .map(|((name, expression), program)| Condition { name, expression, program })
        .collect();
    let variables = Variables {
        object: Some(json_value(object)),
        old_object: Some(json_value(old)),
        request: Some(request_value(&request())),
    };
    let outcome = evaluate(&conditions, &variables, None);
    assert!(variables.object.is_some() && variables.request.is_some(), "variables are given back");
    outcome
}

fn is_true(expression: &str) {
    assert_eq!(eval(&[("c", expression)]), Outcome::Match, "{expression}");
}

fn is_false(expression: &str) {
    assert_eq!(eval(&[("c", expression)]), Outcome::False { condition: "c".into() }, "{expression}");
}

fn error_of(expression: &str) -> String {
    match eval(&[("c", expression)]) {
        Outcome::Error { message, conditions } => {
            assert_eq!(conditions, ["c"], "{expression}: {message}");
            message
        }
        other => panic!("{expression}: expected an error of the condition, got {other:?}"),
    }
}

/// Every function of the API server's 1.36 environment (k8s.io/apiserver
/// `pkg/cel/environment/base.go`), by name.
const FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "bool",
    "dyn",
    "type",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "value",
    "hasValue",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "strings.quote",
    "format",
    "isSorted",
    "sum",
    "min",
    "max",
    "slice",
    "sort",
    "flatten",
    "distinct",
    "first",
    "last",
    "lists.range",
    "reverse",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "find",
    "findAll",
    "ip",
    "isIP",
    "ip.isCanonical",
    "family",
    "isLoopback",
    "isUnspecified",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "cidr",
    "isCIDR",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
    "quantity",
    "isQuantity",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "format.dns1123Label",
    "format.named",
    "validate",
    "path",
    "group",
    "resource",
    "check",
    "allowed",
    "reason",
    "errored",
    "error",
    "serviceAccount",
];

#[test]
fn every_function_of_the_environment_resolves() {
    for name in FUNCTIONS {
        assert!(super::registry().has_name(name), "{name} is not registered");
    }
    for absent in ["math.greatest", "base64.encode", "jsonpatch.escapeKey"] {
        assert!(!super::registry().has_name(absent), "{absent} is not in the API server's 1.36 environment");
    }
}

#[test]
fn outcomes_follow_the_matcher() {
    const ERR: &str = "object.spec.missing == 1";
    let error = "expression 'object.spec.missing == 1' resulted in error: no such key: missing";
    let cases: &[(&[(&str, &str)], Outcome)] = &[
        (&[("a", "true")], Outcome::Match),
        (&[("a", "true"), ("b", "1 == 1")], Outcome::Match),
        (&[], Outcome::Match),
        (&[("a", "false")], Outcome::False { condition: "a".into() }),
        (&[("a", "false"), ("b", "false")], Outcome::False { condition: "a".into() }),
        (&[("a", "true"), ("b", "false"), ("c", "true")], Outcome::False { condition: "b".into() }),
        // A false condition wins over errors, before or after it.
        (&[("a", ERR), ("b", "false"), ("c", ERR)], Outcome::False { condition: "b".into() }),
        (
            &[("a", "true"), ("b", ERR)],
            Outcome::Error { message: error.into(), conditions: vec!["b".into()] },
        ),
        // The same error twice is reported once; two different ones as a list.
        (
            &[("a", ERR), ("b", "true"), ("c", ERR)],
            Outcome::Error { message: error.into(), conditions: vec!["a".into(), "c".into()] },
        ),
        (
            &[("a", ERR), ("b", "object.nope == 1")],
            Outcome::Error {
                message: format!(
                    "[{error}, expression 'object.nope == 1' resulted in error: no such key: nope]"
                ),
                conditions: vec!["a".into(), "b".into()],
            },
        ),
    ];
    for (conditions, expected) in cases {
        assert_eq!(&eval(conditions), expected, "{conditions:?}");
    }
}

#[test]
fn variables() {
    // object, oldObject
    is_true("object.metadata.name == 'web'");
    is_true("object.spec.priority == 7 && object.spec.ratio == 0.5");
    is_true("oldObject.metadata.labels.tier == 'back' && object.metadata.labels.tier == 'front'");
    is_false("object.spec.hostNetwork == true");
    // request, every field the API server exposes
    is_true("request.kind.group == '' && request.kind.version == 'v1' && request.kind.kind == 'Pod'");
    is_true("request.resource.resource == 'pods' && request.requestResource.resource == 'pods'");
    is_true("request.requestKind.kind == 'Pod'");
    is_true("request.subResource == 'status' && request.requestSubResource == 'status'");
    is_true("request.name == 'web' && request.namespace == 'prod' && request.operation == 'UPDATE'");
    is_true("request.userInfo.username.startsWith('system:serviceaccount:kube-system:')");
    is_true("request.userInfo.uid == 'u-1' && 'system:authenticated' in request.userInfo.groups");
    is_true("request.userInfo.extra.scopes == ['a']");
    is_true("request.dryRun");
    is_true("request.options.fieldManager == 'kubectl'");
    // namespaceObject exists and is null for webhooks
    is_true("namespaceObject == null");
    // Absent objects are null, and selecting from null is an error (not `false`).
    let delete =
        eval_with(&[("c", "object == null && oldObject.metadata.name == 'web'")], None, Some(&pod()));
    assert_eq!(delete, Outcome::Match);
    let on_null = eval_with(&[("c", "object.metadata.name == 'web'")], None, Some(&pod()));
    assert!(
        matches!(&on_null, Outcome::Error { message, .. } if message.ends_with("resulted in error: no such key: metadata")),
        "{on_null:?}"
    );
}

#[test]
fn library_functions() {
    is_true("has(object.metadata.labels) && !has(object.metadata.annotations)");
    is_true("has(object.metadata.labels.app)");
    is_true("object.metadata.name.matches('^w.b$') && !object.metadata.name.matches('^x')");
    is_true("object.spec.containers[0].image.startsWith('registry.example.com/')");
    is_true("object.spec.containers[1].image.endsWith(':1.30')");
    is_true("object.spec.containers.all(c, c.image.contains('/'))");
    is_false("object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))");
    is_true("object.spec.containers.exists(c, c.name == 'sidecar')");
    is_true("object.spec.containers.exists_one(c, c.name == 'app')");
    is_true("object.spec.containers.filter(c, c.image.startsWith('docker.io/')).size() == 1");
    is_true("object.spec.containers.map(c, c.name) == ['app', 'sidecar']");
    is_true("object.spec.containers.map(c, c.name.startsWith('s'), c.name) == ['sidecar']");
    is_true("object.metadata.labels.all(k, k in ['app', 'tier'])");
    is_true("object.metadata.labels.exists(k, object.metadata.labels[k] == 'front')");
    is_true("size(object.spec.containers) == 2 && object.metadata.name.size() == 3");
    is_true("object.metadata.?annotations.orValue({}).size() == 0");
    is_true("'a,b'.split(',') == ['a', 'b'] && ['x', 'y'].join('-') == 'x-y'");
    is_true("object.metadata.name.upperAscii() == 'WEB' && 'a-b'.replace('-', '_') == 'a_b'");
    is_true("sets.contains(['a', 'b', 'c'], ['a'])");
    is_true("[3, 1, 2].sort() == [1, 2, 3] && lists.range(3) == [0, 1, 2] && [1, 1].distinct() == [1]");
    is_true("'%s-%d'.format(['x', 1]) == 'x-1'");
    is_true("format.dns1123Label().validate('web').hasValue() == false");
    is_true("semver('1.2.3').isLessThan(semver('1.10.0'))");
    is_true("duration('1m') > duration('59s') && timestamp('2024-01-01T00:00:00Z') < timestamp('2025-01-01T00:00:00Z')");
}

#[test]
fn quantity_ip_and_cidr() {
    is_true("quantity(object.spec.containers[0].resources.limits.memory).isLessThan(quantity('1Gi'))");
    is_true("quantity('1.5').asApproximateFloat() == 1.5 && isQuantity('10m') && !isQuantity('ten')");
    // Go's ParseQuantity rejects surrounding whitespace.
    is_true("!isQuantity(' 1Gi') && !isQuantity('1Gi ')");
    assert!(error_of("quantity(' 1Gi').isInteger()").ends_with(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ));
    assert!(error_of("quantity('1Gi\\n').isInteger()").ends_with(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ));
    is_true("ip('10.0.0.1').family() == 4 && isIP('::1') && !isIP('10.0.0.256')");
    is_true("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP('192.168.0.1')");
    is_true("isCIDR('fd00::/8') && cidr('10.0.0.0/8').prefixLength() == 8");
}

#[test]
fn without_a_cluster_the_authorizer_is_an_evaluation_error() {
    for expression in [
        "authorizer.group('').resource('pods').namespace('prod').check('delete').allowed()",
        "authorizer.requestResource.check('update').allowed()",
        "authorizer.serviceAccount('kube-system', 'ctrl').group('').resource('pods').check('get').allowed()",
    ] {
        let message = error_of(expression);
        assert!(
            message.ends_with("authorizer is not available: admission-gateway has no cluster to send SubjectAccessReviews to (run it with --kube)"),
            "{expression}: {message}"
        );
    }
    // With a false condition beside it, the webhook is skipped all the same.
    let outcome = eval(&[("a", "authorizer.requestResource.check('get').allowed()"), ("b", "false")]);
    assert_eq!(outcome, Outcome::False { condition: "b".into() });
}

/// Allows what it lists, records every question, and fails (errored decision) on verb `fail`.
#[derive(Default)]
struct Fake {
    allow: Vec<authorizer::Check>,
    asked: std::sync::Mutex<Vec<authorizer::Check>>,
}

impl authorizer::Authorizer for Fake {
    fn authorize(&self, check: &authorizer::Check) -> authorizer::Decision {
        self.asked.lock().unwrap().push(check.clone());
        if check.verb == "fail" {
            return authorizer::Decision {
                error: Some("webhook authorizer down".into()),
                ..Default::default()
            };
        }
        let allowed = self.allow.contains(check);
        authorizer::Decision {
            allowed,
            reason: if allowed { "RBAC: allowed".into() } else { String::new() },
            error: None,
        }
    }
}

fn with_fake<R>(fake: std::sync::Arc<Fake>, f: impl FnOnce() -> R) -> R {
    let scope = authorizer::Scope {
        authorizer: fake,
        request_resource: authorizer::ResourceTarget {
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "prod".into(),
            name: "web".into(),
            ..Default::default()
        },
    };
    authorizer::with_scope(Some(scope), f)
}

fn resource(group: &str, resource: &str, namespace: &str, name: &str) -> authorizer::ResourceTarget {
    authorizer::ResourceTarget {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

#[test]
fn the_authorizer_asks_each_check_as_the_authz_library_builds_it() {
    use authorizer::{Check, Subject, Target};
    let deployments = Check {
        subject: Subject::Requester,
        verb: "update".into(),
        target: Target::Resource(resource("apps", "deployments", "prod", "web")),
    };
    let fake = std::sync::Arc::new(Fake { allow: vec![deployments.clone()], ..Fake::default() });
    with_fake(fake.clone(), || {
        is_true("authorizer.group('apps').resource('deployments').namespace('prod').name('web').check('update').allowed()");
        is_false(
            "authorizer.group('apps').resource('deployments').namespace('prod').check('update').allowed()",
        );
        is_true("authorizer.group('apps').resource('deployments').namespace('prod').name('web').check('update').reason() == 'RBAC: allowed'");
        is_false("authorizer.path('/healthz').check('get').allowed()");
        is_true("!authorizer.serviceAccount('kube-system', 'ctrl').group('').resource('pods').subresource('log').check('get').errored()");
        is_true("authorizer.requestResource.check('patch').error() == ''");
        is_true("authorizer.path('/metrics').check('fail').errored() && authorizer.path('/metrics').check('fail').error() == 'webhook authorizer down'");
    });
    let asked = fake.asked.lock().unwrap().clone();
    assert!(asked.contains(&deployments), "{asked:?}");
    assert!(asked.contains(&Check {
        subject: Subject::Requester,
        verb: "get".into(),
        target: Target::Path("/healthz".into())
    }));
    let service_account = Subject::ServiceAccount { namespace: "kube-system".into(), name: "ctrl".into() };
    let logs = authorizer::ResourceTarget { subresource: "log".into(), ..resource("", "pods", "", "") };
    assert!(
        asked.contains(&Check {
            subject: service_account,
            verb: "get".into(),
            target: Target::Resource(logs)
        }),
        "{asked:?}"
    );
    let request = authorizer::ResourceTarget {
        subresource: "scale".into(),
        ..resource("apps", "deployments", "prod", "web")
    };
    assert!(
        asked.contains(&Check {
            subject: Subject::Requester,
            verb: "patch".into(),
            target: Target::Resource(request)
        }),
        "{asked:?}"
    );
}

#[test]
fn the_authz_library_refuses_what_authz_go_refuses() {
    with_fake(std::sync::Arc::new(Fake::default()), || {
        for (expression, error) in [
            ("authorizer.path('  ').check('get').allowed()", "path must not be empty"),
            ("authorizer.group('apps').resource('').check('get').allowed()", "resource must not be empty"),
            (
                "authorizer.serviceAccount('Not_A_Namespace', 'sa').path('/x').check('get').allowed()",
                "Invalid service account namespace",
            ),
            (
                "authorizer.serviceAccount('ns', 'bad name').path('/x').check('get').allowed()",
                "Invalid service account name",
            ),
        ] {
            let message = error_of(expression);
            assert!(message.contains(error), "{expression}: {message}");
        }
    });
}

#[test]
fn compile_errors() {
    let cases: &[(&str, &str)] = &[
        ("object.metadata.name ==", "compilation failed: ERROR: <input>:1:"),
        ("1 +* 2", "compilation failed: ERROR: <input>:1:"),
        (
            "foo == 1",
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^",
        ),
        ("params.x == 1", "undeclared reference to 'params' (in container '')"),
        ("object.spec.containers.all(c, d.name == 'x')", "undeclared reference to 'd' (in container '')"),
        // Not in the API server's 1.36 environment.
        ("cel.bind(x, 1, x == 1)", "undeclared reference to 'x' (in container '')"),
        ("math.greatest(1, 2) == 2", "undeclared reference to 'math' (in container '')"),
        // Type-checked as the API server does at creation.
        ("1 + 1.0 == 2.0", "found no matching overload for '_+_' applied to '(int, double)'"),
        ("30 == 30.0", "found no matching overload for '_==_' applied to '(int, double)'"),
        ("[1, 'a'] == []", "expected type 'int' but found 'string'"),
        ("'%d'.format(['x']) == 'x'", "error during formatting: decimal clause can only be used on integers"),
        ("'abc'.matches('(')", "invalid matches argument"),
        // Conversions of constants are made when the program is built.
        ("int('12x') == 12", "program instantiation failed: type conversion error from 'string' to 'int'"),
        ("authorizer.group('apps').check('get').allowed()", "found no matching overload for 'check'"),
        ("object.name.nosuch()", "undeclared reference to 'nosuch' (in container '')"),
        ("request.uid == 'x'", "compilation failed: ERROR: <input>:1:8: undefined field 'uid'\n | request.uid == 'x'\n | .......^"),
        ("request.object.metadata.name == 'x'", "undefined field 'object'"),
        ("request.userInfo.name == 'x'", "undefined field 'name'"),
        ("request.kind.resource == 'x'", "undefined field 'resource'"),
        (
            "Foo{a: 1} == null",
            "compilation failed: ERROR: <input>:1:4: undeclared reference to 'Foo' (in container '')\n | Foo{a: 1} == null\n | ...^",
        ),
        // No two-argument `existsOne` macro upstream: the call of an undeclared function.
        ("[1].existsOne(x, x == 1)", "compilation failed: ERROR: <input>:1:14: undeclared reference to 'existsOne'"),
        // Every error of the checker, in the order of their positions.
        (
            "nope == 1 && 1 + 1.0 == 2.0",
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope == 1 && 1 + 1.0 == 2.0\n | ^\nERROR: <input>:1:16: found no matching overload for '_+_' applied to '(int, double)'\n | nope == 1 && 1 + 1.0 == 2.0\n | ...............^",
        ),
        ("1", "must evaluate to bool but got int"),
        ("'yes'", "must evaluate to bool but got string"),
        ("[true]", "must evaluate to bool but got list(bool)"),
        ("object.spec.hostNetwork", "must evaluate to bool but got dyn"),
        ("object", "must evaluate to bool but got dyn"),
        ("request.name", "must evaluate to bool but got string"),
        ("request.kind", "must evaluate to bool but got kubernetes.GroupVersionKind"),
        ("size(object.spec.containers)", "must evaluate to bool but got int"),
        ("object.spec.priority + 1", "must evaluate to bool but got int"),
        ("object.spec.containers.map(c, c.name)", "must evaluate to bool but got list(dyn)"),
    ];
    for (expression, expected) in cases {
        match compile(expression) {
            Ok(_) => panic!("{expression}: compiled"),
            Err(error) => {
                assert!(error.starts_with(expected) || error.contains(expected), "{expression}: {error}")
            }
        }
    }
    // Comprehension variables, qualified functions and the request's dyn fields are fine.
    for expression in [
        "object.spec.containers.all(c, c.name != '')",
        "[1, 2].exists(x, [3].all(y, x < y))",
        "sets.intersects(['a'], ['a'])",
        "request.options.anything == 1",
        "request.userInfo.extra['x'] == ['y']",
        "request.dryRun",
        "has(request.subResource)",
        "object.?metadata.?labels.?app.orValue('') == 'web'",
        // What the API server's environment has and an older gateway refused.
        "url('https://x').getHost() == 'x'",
        "dyn(30) == 30.0",
        "type(object) == map",
        "object.metadata.labels.all(k, v, v != '')",
        "['a', 'b'].transformList(i, v, v + string(i)) == ['a0', 'b1']",
    ] {
        compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    }
}

fn eval_within(conditions: &[(&str, &str)], limits: Limits) -> Outcome {
    let programs: Vec<Program> = conditions.iter().map(|(_, e)| compile(e).unwrap()).collect();
    let conditions: Vec<Condition<'_>> = conditions
        .iter()
        .zip(&programs)
        .map(|((name, expression), program)| Condition { name, expression, program })
        .collect();
    let variables = Variables { object: Some(json_value(Some(&pod()))), ..Variables::default() };
    evaluate_within(&conditions, &variables, limits)
}

const EXPRESSION_BUDGET: &str = "operation cancelled: actual cost limit exceeded";
const WEBHOOK_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

#[test]
fn evaluation_is_bounded_by_steps() {
    let small = Limits { per_expression: 1_000, per_webhook: 2_500, deadline: None };
    // Every comprehension iteration is a step.
    let loop_of = |n: u32| format!("lists.range({n}).all(i, i >= 0)");
    assert_eq!(eval_within(&[("a", &loop_of(100))], small), Outcome::Match);
    let over = eval_within(&[("a", &loop_of(600))], small);
    assert_eq!(
        over,
        Outcome::Error {
            message: format!("expression '{}' resulted in error: {EXPRESSION_BUDGET}", loop_of(600)),
            conditions: vec!["a".into()],
        }
    );
    // A false condition still wins over one that ran out of its own budget.
    let outcome = eval_within(&[("a", &loop_of(600)), ("b", "false")], small);
    assert_eq!(outcome, Outcome::False { condition: "b".into() });
    // The webhook's budget ends the whole evaluation, and then no false wins (activation.go).
    let outcome = eval_within(
        &[("a", "false"), ("b", &loop_of(400)), ("c", &loop_of(400)), ("d", &loop_of(400))],
        small,
    );
    assert_eq!(outcome, Outcome::Error { message: WEBHOOK_BUDGET.into(), conditions: vec![] });
    // map/filter count their elements too.
    let mapped = "lists.range(600).map(i, i * 2).size() > 0";
    assert!(matches!(eval_within(&[("a", mapped)], small), Outcome::Error { .. }));
}

#[test]
fn evaluation_is_bounded_by_size() {
    let small = Limits { per_expression: 1_000, per_webhook: 2_500, deadline: None };
    // Strings built by concatenation are charged by their size (one step per 10 bytes)...
    let doubling = "[object.metadata.name + object.metadata.name].map(a, a + a + a + a + a + a + a + a + a + a).map(b, b + b + b + b + b + b + b + b + b + b).map(c, c + c + c + c + c + c + c + c + c + c).size() > 0";
    assert!(
        matches!(eval_within(&[("a", doubling)], small), Outcome::Error { message, .. } if message.ends_with(EXPRESSION_BUDGET))
    );
    // ... and a call that would build something huge is charged before it runs.
    let blowup = "'x'.replace('', 'yyyyyyyyyyyyyyyyyyyy').replace('', 'yyyyyyyyyyyyyyyyyyyy').replace('', 'yyyyyyyyyyyyyyyyyyyy').replace('', 'yyyyyyyyyyyyyyyyyyyy').replace('', 'yyyyyyyyyyyyyyyyyyyy').replace('', 'yyyyyyyyyyyyyyyyyyyy').size() > 0";
    assert!(
        matches!(eval(&[("a", blowup)]), Outcome::Error { message, .. } if message.ends_with(EXPRESSION_BUDGET))
    );
    // cel-go caps lists.range itself.
    assert!(error_of("lists.range(2000000).size() > 0")
        .ends_with("lists.range: size 2000000 exceeds maximum allowed (1000000)"));
    // A call charged far past the limit in one go: its cost is spent as cel-go's tracker
    // spends it, more than the webhook's whole budget (activation.go then stops everything).
    for expression in
        ["lists.range(4000).distinct().size() > 0", "sets.contains(lists.range(4000), lists.range(4000))"]
    {
        let outcome = eval(&[("a", expression)]);
        assert_eq!(
            outcome,
            Outcome::Error { message: WEBHOOK_BUDGET.into(), conditions: vec![] },
            "{expression}"
        );
    }
    // Bounded by cost, not by a clock: no timing is asserted here (the load test and benches
    // measure speed), the outcomes above show each evaluation was stopped by its budget.
}

#[test]
fn evaluation_is_bounded_by_cost_not_by_time() {
    // Nested loops far beyond any budget: stopped by the budget, whatever the clock says.
    let nested = "lists.range(1000).all(a, lists.range(1000).all(b, lists.range(1000).all(c, true)))";
    let outcome = eval(&[("a", nested), ("b", nested)]);
    assert!(
        matches!(&outcome, Outcome::Error { message, .. } if message.contains(EXPRESSION_BUDGET)),
        "{outcome:?}"
    );
    // The review's deadline is the only time bound: an evaluation still running then fails as
    // a whole, with a text that says so. (A deadline already past: no timing involved.)
    let limits =
        Limits { per_expression: u64::MAX, per_webhook: u64::MAX, deadline: Some(std::time::Instant::now()) };
    let outcome = eval_within(&[("a", "true"), ("b", nested), ("c", "false")], limits);
    assert_eq!(
        outcome,
        Outcome::Error {
            message: "evaluation cancelled: the review's deadline passed before it finished, no further conditions will be run".into(),
            conditions: vec![],
        }
    );
    // Ordinary work is nowhere near the bounds.
    is_true("lists.range(2000).map(i, i * 2).filter(i, i % 4 == 0).size() == 1000");
}

#[test]
fn variables_not_lent_stay_unconverted() {
    let program = compile("object == null").unwrap();
    let conditions = [Condition { name: "c", expression: "object == null", program: &program }];
    let variables = Variables { request: Some(request_value(&request())), ..Variables::default() };
    assert_eq!(evaluate(&conditions, &variables, None), Outcome::Match, "an unconverted object is null");
    assert!(variables.object.is_none() && variables.old_object.is_none(), "nothing is made up for them");
    assert!(variables.request.is_some(), "what was lent comes back");
}

/// The error text reaches the API server's answer and the log: it must not carry the object's
/// values (a Secret's data passes through admission).
#[test]
fn evaluation_errors_never_quote_a_value() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                        "data": {"password": "aHVudGVyMg=="}, "count": 3, "list": [1]});
    for expression in [
        "object.data.password + 1 == 2",
        "object.data < 1",
        "-object.data.password == 1",
        "object.list[object.data.password] == 1",
        "object.data[object.list] == 1",
        "object.count / 0 == 1",
        "object.count % 0 == 1",
        "object.list[7] == 1",
    ] {
        let Outcome::Error { message, .. } = eval_with(&[("c", expression)], Some(&secret), None) else {
            panic!("{expression} evaluated");
        };
        assert!(
            !message.contains("aHVudGVyMg") && !message.contains("password\""),
            "{expression}: {message}"
        );
        assert!(!message.contains("Map(") && !message.contains("List("), "{expression}: {message}");
    }
}

#[test]
fn a_conversions_argument_reports_its_own_error() {
    // The `cel` crate said "Missing argument or target" for an argument that failed.
    for (expression, key) in [
        ("string(object.spec.missing) == 'x'", "missing"),
        ("size(object.spec.missing) == 1", "missing"),
        ("int(oldObject.metadata.nope) == 1", "nope"),
    ] {
        assert_eq!(
            error_of(expression),
            format!("expression '{expression}' resulted in error: no such key: {key}")
        );
    }
    is_true("string(object.spec.priority) == '7'");
}

#[test]
fn policy_environments_declare_what_their_kind_of_expression_sees() {
    let env = |params: bool, variables: Option<&[&str]>, authorizer: Authz, result: Returns| Env {
        params,
        variables: variables.map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
        authorizer,
        result,
        variable_types: Vec::new(),
        mutation: None,
    };
    let compiles = |expression: &str, env: &Env| compile_in(expression, env).map(|_| ());
    let validation = env(true, Some(&["a"]), Authz::Declared, Returns::Bool);
    assert_eq!(compiles("params.x == variables.a", &validation), Ok(()));
    assert!(compiles("variables.b == 1", &validation).unwrap_err().contains("undefined field 'b'"));
    let no_params = env(false, Some(&[]), Authz::Declared, Returns::Bool);
    assert!(compiles("params == null", &no_params).unwrap_err().contains("undeclared reference to 'params'"));
    let condition = env(true, None, Authz::Declared, Returns::Bool);
    assert!(compiles("variables.a == 1", &condition)
        .unwrap_err()
        .contains("undeclared reference to 'variables'"));
    let message = env(true, Some(&[]), Authz::Undeclared, Returns::String);
    assert_eq!(compiles("'a' + string(params.x)", &message), Ok(()));
    assert!(compiles("authorizer.path('/').check('get').reason()", &message)
        .unwrap_err()
        .contains("undeclared reference to 'authorizer'"));
    assert_eq!(compiles("1 == 1", &message), Err("must evaluate to string but got bool".to_owned()));
    let audit = env(false, Some(&[]), Authz::FailsAtRuntime, Returns::StringOrNull);
    assert_eq!(compiles("null", &audit), Ok(()));
    assert_eq!(compiles("'v'", &audit), Ok(()));
    assert_eq!(
        compiles("1", &audit),
        Err("must evaluate to one of [string null_type] but got int".to_owned())
    );
    assert!(
        compile_in("authorizer.path('/').check('get').reason()", &audit).unwrap().uses == Uses::default()
    );
    let variable = env(false, Some(&[]), Authz::Declared, Returns::Any);
    assert_eq!(compiles("[1, 2]", &variable), Ok(()));
}

#[test]
fn a_session_evaluates_variables_lazily_once_per_phase() {
    let declared = |name: &str, expression: &str, before: &[&str]| {
        let env = Env {
            variables: Some(before.iter().map(|s| (*s).to_owned()).collect()),
            result: Returns::Any,
            ..Env::default()
        };
        Declared { name: name.to_owned(), program: compile_in(expression, &env).map(std::sync::Arc::new) }
    };
    let variables = [
        declared("broken", "object.missing", &[]),
        declared("name", "object.metadata.name", &["broken"]),
        declared("shout", "variables.name + '!'", &["broken", "name"]),
    ];
    let env = Env { variables: Some(vec!["broken".into(), "name".into(), "shout".into()]), ..Env::default() };
    let program = |e: &str| compile_in(e, &env).unwrap();
    let mut activation = Activation { object: Some(json_value(Some(&pod()))), ..Activation::default() };
    let limits = PhaseLimits { per_expression: 1_000_000, per_phase: 10_000_000 };
    with_session(&mut activation, &variables, |session| {
        session.begin_phase(limits);
        assert_eq!(session.eval(&program("variables.shout == 'web!'")), Ok(Evaluated::Bool(true)));
        assert_eq!(session.eval(&program("variables.name == 'web'")), Ok(Evaluated::Bool(true)));
        assert_eq!(
            session.eval(&program("variables.broken == 1")),
            Err(Failure::Expression(
                "composited variable \"broken\" fails to evaluate: no such key: missing".into()
            ))
        );
    });
    assert!(activation.object.is_some(), "the object is given back");
}
