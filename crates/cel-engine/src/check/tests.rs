//! Accepted and refused expressions, with cel-go's texts (cel-go `checker/checker_test.go`,
//! `cel/validator_test.go`, `ext/formatting_test.go`; the k8s admission environment).

use super::*;

/// The admission environment of a policy with params, an authorizer and one composited
/// variable `variables.num` (int).
fn env() -> TypeEnv {
    let mut env = TypeEnv::admission(true, true);
    env.composited_variable("num", Some(&CheckedType::Int));
    env.composited_variable("opt", Some(&CheckedType::optional(CheckedType::Int)));
    env
}

fn run(source: &str) -> Result<String, Vec<String>> {
    let parsed = crate::parse(source).map_err(|e| vec![e])?;
    check(&parsed, &env()).map(|t| t.format())
}

#[test]
fn accepted() {
    let cases: &[(&str, &str)] = &[
        ("1 + 2", "int"),
        ("[]", "list(dyn)"),
        ("{}", "map(dyn, dyn)"),
        ("[1]", "list(int)"),
        ("{1: 2u, 2: 3u}", "map(int, uint)"),
        ("{'a': 1, 'b': 2}.a", "int"),
        ("size([] + [1])", "int"),
        ("b'abc' + b'def'", "bytes"),
        ("1.0 + 2.0 * 3.0 - 1.0 / 2.20202 != 66.6", "bool"),
        ("null == null && null != null", "bool"),
        ("1u + 2u * 3u - 1u / 2u == 6u % 1u", "bool"),
        ("int(1u) + int(uint('1'))", "int"),
        ("false && !true || false ? 2 : 3", "int"),
        ("dyn(1) + 1.0", "double"),
        ("object.a + 1.0", "double"),
        ("object.a", "dyn"),
        ("type(object) == int", "bool"),
        ("type(null) == null_type", "bool"),
        ("type(type) == type", "bool"),
        ("list == type([1]) && map == type({1:2u})", "bool"),
        ("1 in [1, 2, 3]", "bool"),
        ("1 in dyn([1, 2, 3])", "bool"),
        ("'a' in {'a': 1}", "bool"),
        ("[1] + [dyn('string')]", "list(dyn)"),
        ("[dyn('string')] + [1]", "list(dyn)"),
        ("1 <= 1.0 && 1u <= 1.0 && 1.0 <= 1 && 1.0 <= 1u && 1 <= 1u && 1u <= 1", "bool"),
        ("[1].map(x, [x, x]).map(x, [x, x])", "list(list(list(int)))"),
        ("[1, 2].filter(x, x > 1)", "list(int)"),
        ("[1, 2].exists_one(x, x > 1) || [1].exists_one(x, x == 1)", "bool"),
        ("[{'z': 0}].exists(y, y.z == 0)", "bool"),
        ("int('abc')", "int"),
        ("duration('1h2m3.5s')", "duration"),
        ("timestamp('2023-01-01T00:00:00Z') + duration('24h')", "timestamp"),
        ("timestamp('2023-01-01T00:00:00.123+01:00').getHours('UTC')", "int"),
        ("timestamp(0)", "timestamp"),
        ("'abc'.matches('^a.c$') && matches('abc', 'b')", "bool"),
        // Optionals.
        ("object.?a.orValue(1)", "dyn"),
        ("object.?a", "optional_type(dyn)"),
        ("has(object.a.b)", "bool"),
        ("optional.of(1).optMap(x, x + 1)", "optional_type(int)"),
        ("optional.of(1).optFlatMap(x, optional.of(x + 1))", "optional_type(int)"),
        ("optional.none().orValue('x')", "string"),
        ("[?optional.of(1), 2]", "list(int)"),
        ("{?'key': {'a': 'b'}.?value}", "map(string, string)"),
        ("{'a': 1}[?'a'].hasValue()", "bool"),
        ("[1, 2][?0].value()", "int"),
        // `variables.opt` is dyn (an optional output is converted to dyn).
        ("variables.opt.orValue(2)", "int"),
        ("[1].first()", "optional_type(int)"),
        ("optional.unwrap([optional.of(1)])", "list(int)"),
        // Two-variable comprehensions.
        ("{'a': 1}.all(k, v, v > 0)", "bool"),
        ("[1, 2].exists(i, v, i == v)", "bool"),
        ("[1, 2].existsOne(i, v, i == v)", "bool"),
        ("[1, 2].transformList(i, v, v * 2)", "list(int)"),
        ("[1, 2].transformList(i, v, i > 0, double(v))", "list(double)"),
        ("{'a': 1}.transformMap(k, v, v + 1)", "map(string, int)"),
        ("{'a': 1}.transformMapEntry(k, v, {v: k})", "map(int, string)"),
        // Strings, lists, sets, regex.
        ("'abc'.charAt(1) + 'a'.lowerAscii() + 'A'.upperAscii() + ' x '.trim()", "string"),
        ("'abc'.indexOf('b') + 'abc'.lastIndexOf('b', 2)", "int"),
        ("'a,b'.split(',').join('-')", "string"),
        ("'%s and %d'.format(['a', 1])", "string"),
        ("'%d%%'.format([object.a])", "string"),
        ("'%.2f'.format([1.0])", "string"),
        ("'%s'.format([[1, 'a']])", "string"),
        ("strings.quote('a')", "string"),
        ("[1, 2].sum() + [1].max() + [1].min() + [1, 2].indexOf(1)", "int"),
        ("[1, 2].isSorted()", "bool"),
        ("[3, 1].sort()", "list(int)"),
        ("[3, 1].sortBy(x, -x)", "list(int)"),
        ("[[1], [2]].flatten().slice(0, 1).reverse().distinct()", "list(int)"),
        ("lists.range(3)", "list(int)"),
        ("sets.contains([1], [2]) || sets.intersects([1], [1]) || sets.equivalent([1], [1])", "bool"),
        ("'abc'.find('b') + 'abc'.findAll('b')[0] + 'abc'.findAll('b', 1)[0]", "string"),
        // Kubernetes libraries.
        ("url('https://x').getHost() + url('https://x').getQuery()['a'][0]", "string"),
        ("isURL('x') && isIP('1.2.3.4') && isCIDR('10.0.0.0/8') && ip.isCanonical('1.2.3.4')", "bool"),
        ("string(ip('1.2.3.4')) + string(cidr('10.0.0.0/8'))", "string"),
        (
            "cidr('10.0.0.0/8').containsIP('10.1.2.3') && cidr('10.0.0.0/8').containsIP(ip('10.0.0.1'))",
            "bool",
        ),
        ("ip('1.2.3.4').family() + cidr('10.0.0.0/8').prefixLength()", "int"),
        ("quantity('1Gi').add(1).isGreaterThan(quantity('1'))", "bool"),
        ("sign(quantity('1')) + quantity('1').asInteger()", "int"),
        ("semver('1.0.0').major() + semver('v1', true).minor()", "int"),
        ("format.dns1123Label().validate('x').hasValue()", "bool"),
        ("format.named('uuid').value().validate('x')", "optional_type(list(string))"),
        // Admission variables.
        ("request.userInfo.username == 'x'", "bool"),
        ("request.userInfo.extra['a'][0]", "string"),
        ("request.kind.group + request.requestResource.resource + request.operation", "string"),
        ("request.options", "dyn"),
        ("has(request.name)", "bool"),
        ("namespaceObject.metadata.labels['a'] == 'b'", "bool"),
        ("namespaceObject.status.conditions[0].lastTransitionTime", "timestamp"),
        ("authorizer.group('apps').resource('deployments').namespace('ns').check('get').allowed()", "bool"),
        ("authorizer.requestResource.check('get').reason()", "string"),
        ("authorizer.path('/healthz').check('get').errored()", "bool"),
        ("params.x == object.y", "bool"),
        ("variables.num + 1", "int"),
        ("object == null", "bool"),
    ];
    for (source, want) in cases {
        assert_eq!(run(source), Ok((*want).to_owned()), "{source}");
    }
}

#[test]
fn refused() {
    let cases: &[(&str, &[&str])] = &[
        ("1 + 1.0", &["found no matching overload for '_+_' applied to '(int, double)'"]),
        ("1 == 1.0", &["found no matching overload for '_==_' applied to '(int, double)'"]),
        ("request.name == null", &["found no matching overload for '_==_' applied to '(string, null)'"]),
        ("foo", &["undeclared reference to 'foo' (in container '')"]),
        ("fun()", &["undeclared reference to 'fun' (in container '')"]),
        ("'string'.fun()", &["undeclared reference to 'fun' (in container '')"]),
        ("[].length", &["type 'list(_var0)' does not support field selection"]),
        ("int{}", &["'int' is not a message type"]),
        ("Msg{}", &["undeclared reference to 'Msg' (in container '')"]),
        (
            "[].map(x, [].map(y, x in y && y in x))",
            &["found no matching overload for '@in' applied to '(list(dyn), dyn)'"],
        ),
        (
            "true.all(e, 0)",
            &[
                "expression of type 'bool' cannot be range of a comprehension (must be list, map, or dynamic)",
                "expected type 'bool' but found 'int'",
            ],
        ),
        ("[1].exists(y, y > 10) && y < 5", &["undeclared reference to 'y' (in container '')"]),
        ("{?'key': 'hi'}", &["expected type 'optional_type(string)' but found 'string'"]),
        ("[?'value']", &["expected type 'optional_type(string)' but found 'string'"]),
        // The validators.
        ("[1, 'a']", &["expected type 'int' but found 'string'"]),
        ("[1, dyn(2)]", &["expected type 'int' but found 'dyn'"]),
        // cel-go's validator panics on an optional entry of a type without parameters.
        ("[?object.a, 1]", &["runtime error: index out of range [0] with length 0"]),
        ("{?'a': object.a}", &["runtime error: index out of range [0] with length 0"]),
        ("'a'.matches('[[:foo:]]')", &["invalid matches argument"]),
        // cel-go's checker alone types it list(list(dyn)); the validator then refuses it.
        ("{}.map(c, [c, type(c)])", &["expected type 'dyn' but found 'type(dyn)'"]),
        ("object.x in ['hello', 0]", &["expected type 'string' but found 'int'"]),
        ("{'hello': 'world', 1: '!'}", &["expected type 'string' but found 'int'"]),
        ("duration('1x')", &["invalid duration argument"]),
        ("duration('')", &["invalid duration argument"]),
        ("timestamp('bad')", &["invalid timestamp argument"]),
        ("timestamp('2023-02-29T00:00:00Z')", &["invalid timestamp argument"]),
        ("timestamp('0000-01-01T00:00:00Z')", &["invalid timestamp argument"]),
        // cel-go 0.32 (the oracle's) holds the string to RFC 3339's grammar first.
        ("timestamp('2023-01-01T1:00:00Z')", &["invalid timestamp argument"]),
        ("timestamp('2023-01-01T00:00:00,5Z')", &["invalid timestamp argument"]),
        ("timestamp('2023-01-01T00:00:00+24:00')", &["invalid timestamp argument"]),
        ("timestamp('2023-01-01t00:00:00z')", &["invalid timestamp argument"]),
        ("type(quantity('1')) == kubernetes.Quantity", &["undeclared reference to 'kubernetes' (in container '')"]),
        ("kubernetes.Quantity{}", &["undeclared reference to 'kubernetes.Quantity' (in container '')"]),
        ("timestamp(253402300800)", &["invalid timestamp argument"]),
        ("'a'.matches('[')", &["invalid matches argument"]),
        ("matches('(', 'a')", &["invalid matches argument"]),
        (
            "'%d'.format(['x'])",
            &["error during formatting: decimal clause can only be used on integers, was given string"],
        ),
        (
            "'%d'.format([duration('1s')])",
            &["error during formatting: decimal clause can only be used on integers, was given google.protobuf.Duration"],
        ),
        ("'%d %d %d'.format([0, 1])", &["index 2 out of range"]),
        ("'%a'.format([1])", &["could not parse formatting clause: unrecognized formatting clause \"a\""]),
        ("'%d'.format([1, 2])", &["too many arguments supplied to string.format (expected 1, got 2)"]),
        ("'abc %'.format([1])", &["unexpected end of string"]),
        (
            "'%x'.format([0.5])",
            &["error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double"],
        ),
        (
            "'%s'.format([request])",
            &["error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given kubernetes.AdmissionRequest"],
        ),
        ("'%e'.format([null])", &["error during formatting: scientific clause can only be used on doubles, was given null_type"]),
        // The environment: what 1.36 does not declare.
        (
            "cel.bind(x, 1, x)",
            &[
                "undeclared reference to 'x' (in container '')",
                "undeclared reference to 'x' (in container '')",
                "undeclared reference to 'cel' (in container '')",
                "undeclared reference to 'bind' (in container '')",
            ],
        ),
        ("[1].includes(1)", &["undeclared reference to 'includes' (in container '')"]),
        ("'abc'.reverse()", &["found no matching overload for 'reverse' applied to 'string.()'"]),
        ("quantity('1').sign()", &["found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"]),
        (
            "math.abs(1)",
            &["undeclared reference to 'math' (in container '')", "undeclared reference to 'abs' (in container '')"],
        ),
        ("['a'].sum()", &["found no matching overload for 'sum' applied to 'list(string).()'"]),
        ("ip('1.2.3.4').foo", &["type 'net.IP' does not support field selection"]),
        ("quantity('1').foo", &["unexpected failed resolution of 'kubernetes.Quantity'"]),
        ("request.foo", &["undefined field 'foo'"]),
        // Library object types have no field table in the API server's type provider.
        (
            "authorizer.serviceAccount('ns', 'sa').requestResource",
            &["unexpected failed resolution of 'kubernetes.authorization.Authorizer'"],
        ),
        ("has(request.nope)", &["undefined field 'nope'"]),
        ("variables.nope", &["undefined field 'nope'"]),
        ("1.matches('a')", &["found no matching overload for 'matches' applied to 'int.(string)'"]),
        ("!1", &["found no matching overload for '!_' applied to '(int)'"]),
        ("1 && true", &["expected type 'bool' but found 'int'"]),
        (
            "optional.of(1).optFlatMap(x, x + 1)",
            &["found no matching overload for '_?_:_' applied to '(bool, int, optional_type(dyn))'"],
        ),
        // Macro expansion (cel-go parse errors).
        ("[1].all(i, i, true)", &["duplicate variable name: i"]),
        ("[1].transformList(1, v, v)", &["argument must be a simple name"]),
        ("optional.of(1).optMap(1, 2)", &["optMap() variable name must be a simple identifier"]),
        ("[1].all(__result__, true)", &["iteration variable overwrites accumulator variable"]),
    ];
    for (source, want) in cases {
        let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(run(source), Err(want), "{source}");
    }
}

#[test]
fn webhook_environment_has_no_params_variables_or_authorizer() {
    let env = TypeEnv::admission(false, false);
    for (source, name) in
        [("params.a", "params"), ("variables.a", "variables"), ("authorizer.path('/')", "authorizer")]
    {
        let parsed = crate::parse(source).unwrap();
        let errors = check(&parsed, &env).unwrap_err();
        assert_eq!(errors[0], format!("undeclared reference to '{name}' (in container '')"), "{source}");
    }
}

#[test]
fn result_types() {
    assert_eq!(check_result_type(&CheckedType::Bool, &[CheckedType::Bool]), Ok(()));
    assert_eq!(
        check_result_type(&CheckedType::Dyn, &[CheckedType::Bool]),
        Err("must evaluate to bool but got dyn".into())
    );
    assert_eq!(
        check_result_type(&CheckedType::Int, &[CheckedType::String, CheckedType::Null]),
        Err("must evaluate to one of [string null_type] but got int".into())
    );
    assert_eq!(
        check_result_type(&CheckedType::Duration, &[CheckedType::Bool]),
        Err("must evaluate to bool but got google.protobuf.Duration".into())
    );
    assert_eq!(variable_type(Some(&CheckedType::optional(CheckedType::Int))), CheckedType::Dyn);
    assert_eq!(
        variable_type(Some(&CheckedType::list(CheckedType::Struct("x".into())))),
        CheckedType::list(CheckedType::Dyn)
    );
}

#[test]
fn program_instantiation() {
    let e = env();
    let cases = [
        ("'abc'.find('[')", Some("program instantiation failed: error parsing regexp: missing closing ]: `[`")),
        ("'abc'.findAll('a)')", Some("program instantiation failed: error parsing regexp: unexpected ): `a)`")),
        ("matches('abc', '(a')", Some("program instantiation failed: error parsing regexp: missing closing ): `(a`")),
        ("'abc'.findAll('*', 1)", Some("program instantiation failed: error parsing regexp: missing argument to repetition operator: `*`")),
        ("'abc'.find('a{1001}')", Some("program instantiation failed: error parsing regexp: invalid repeat count: `{1001}`")),
        ("'abc'.find('[z-a]')", Some("program instantiation failed: error parsing regexp: invalid character class range: `z-a`")),
        ("'abc'.find('\\\\q')", Some("program instantiation failed: error parsing regexp: invalid escape sequence: `\\q`")),
        ("'abc'.find('a**')", Some("program instantiation failed: error parsing regexp: invalid nested repetition operator: `**`")),
        ("'abc'.find('[[:alpha:]]+(?i)b\\\\d{2,3}')", None),
        ("'abc'.find('a{2}{3}')", Some("program instantiation failed: error parsing regexp: invalid nested repetition operator: `{2}{3}`")),
        ("'abc'.find('(?P<n>a)(?:b)(?i:c)a{,2}x{')", None),
        ("'abc'.find('[\\\\n-a]\\\\w{1000}')", None),
        ("'abc'.find(object.p)", None),
    ];
    for (source, want) in cases {
        let parsed = crate::parse(source).unwrap();
        let checked = check_detailed(&parsed, &e).unwrap();
        assert_eq!(checked.instantiation_error.as_deref(), want, "{source}");
    }
}

#[test]
fn go_durations_and_timestamps() {
    use super::validate::{go_parse_duration, go_parse_rfc3339};
    for (s, ns) in [
        ("0", Some(0)),
        ("1s", Some(1_000_000_000)),
        ("-1.5h", Some(-5_400_000_000_000)),
        ("1h2m", Some(3_720_000_000_000)),
        (".5s", Some(500_000_000)),
        ("1\u{b5}s", Some(1_000)),
        ("2562047h47m16.854775807s", Some(9_223_372_036_854_775_807)),
        ("2562048h", None),
        ("1", None),
        ("s", None),
        (".s", None),
        ("1x", None),
        ("", None),
        ("-", None),
    ] {
        assert_eq!(go_parse_duration(s), ns, "{s}");
    }
    for (s, secs) in [
        ("1970-01-01T00:00:00Z", Some(0)),
        ("1970-01-01T01:00:00+01:00", Some(0)),
        ("2000-02-29T23:59:59.999999999Z", Some(951_868_799)),
        ("1970-01-01T1:00:00Z", Some(3600)),
        ("0001-01-01T00:00:00Z", Some(-62_135_596_800)),
        ("1970-01-01 00:00:00Z", None),
        ("1970-01-01T24:00:00Z", None),
        ("1970-01-01T00:00:60Z", None),
        ("1970-13-01T00:00:00Z", None),
        ("1970-01-01T00:00:00", None),
        ("1970-01-01T00:00:00z", None),
    ] {
        assert_eq!(go_parse_rfc3339(s), secs, "{s}");
    }
}

/// k8s `pkg/admission/plugin/cel/compile_test.go` `TestCompileValidatingPolicyExpression`.
#[test]
fn kubernetes_compile_cases() {
    let accepted = [
        "object.foo < params.x",
        "namespaceObject.metadata.name.startsWith('test')",
        "object.foo == oldObject.foo",
        "object == null || oldObject == null || object.foo == oldObject.foo",
        "object.spec.string.matches('[0-9]+')",
        "object.spec.string.findAll('[0-9]+').size() > 0",
        "object.spec.list.isSorted()",
        "url(object.spec.endpoint).getHostname() in ['ok1', 'ok2']",
        "request.kind.group == 'example.com' && request.kind.version == 'v1' && request.kind.kind == 'Fake'",
        "request.resource.group == 'example.com' && request.resource.version == 'v1' && request.resource.resource == 'fake' && request.subResource == 'scale'",
        "request.requestKind.group == 'example.com' && request.requestKind.version == 'v1' && request.requestKind.kind == 'Fake'",
        "request.requestResource.group == 'example.com' && request.requestResource.version == 'v1' && request.requestResource.resource == 'fake' && request.requestSubResource == 'scale'",
        "request.name == 'fake-name'",
        "request.namespace == 'fake-namespace'",
        "request.operation == 'CREATE'",
        "request.userInfo.username == 'admin'",
        "request.userInfo.uid == '014fbff9a07c'",
        "request.userInfo.groups == ['system:authenticated', 'my-admin-group']",
        "request.userInfo.extra == {'some-key': ['some-value1', 'some-value2']}",
        "request.dryRun == false",
        "request.options == {'whatever': 'you want'}",
        "authorizer.group('') != null",
        "namespaceObject.metadata != null",
        "namespaceObject.metadata.name == 'test'",
        "namespaceObject.metadata.generateName == 'test'",
        "namespaceObject.metadata.namespace == 'testns'",
        "'test' in namespaceObject.metadata.labels",
        "'test' in namespaceObject.metadata.annotations",
        "namespaceObject.metadata.UID == '12345'",
        "type(namespaceObject.metadata.creationTimestamp) == google.protobuf.Timestamp",
        "type(namespaceObject.metadata.deletionTimestamp) == google.protobuf.Timestamp",
        "namespaceObject.metadata.deletionGracePeriodSeconds == 5",
        "namespaceObject.metadata.generation == 2",
        "namespaceObject.metadata.resourceVersion == 'v1'",
        "namespaceObject.metadata.finalizers[0] == 'testEnv'",
        "namespaceObject.spec.finalizers[0] == 'testEnv'",
        "namespaceObject.status.phase == 'Active'",
        "namespaceObject.status.conditions[0].status == 'True'",
        "namespaceObject.status.conditions[0].type == 'NamespaceDeletionDiscoveryFailure'",
        "type(namespaceObject.status.conditions[0].lastTransitionTime) == google.protobuf.Timestamp",
        "namespaceObject.status.conditions[0].message == 'Unknow'",
        "namespaceObject.status.conditions[0].reason == 'Invalid'",
    ];
    let env = TypeEnv::admission(true, true);
    for source in accepted {
        let parsed = crate::parse(source).unwrap();
        assert_eq!(check(&parsed, &env), Ok(CheckedType::Bool), "{source}");
    }
    let refused = [
        ("1 < 'asdf'", "found no matching overload for '_<_' applied to '(int, string)'"),
        ("request.foo1 == 'nope'", "undefined field 'foo1'"),
        ("request.resource.foo2 == 'nope'", "undefined field 'foo2'"),
        ("request.requestKind.foo3 == 'nope'", "undefined field 'foo3'"),
        ("request.requestResource.foo4 == 'nope'", "undefined field 'foo4'"),
        ("request.userInfo.foo5 == 'nope'", "undefined field 'foo5'"),
        ("namespaceObject.foo1 == 'nope'", "undefined field 'foo1'"),
        ("namespaceObject.metadata.foo2 == 'nope'", "undefined field 'foo2'"),
        ("namespaceObject.spec.foo3 == 'nope'", "undefined field 'foo3'"),
        ("namespaceObject.status.foo4 == 'nope'", "undefined field 'foo4'"),
        ("namespaceObject.status.conditions[0].foo5 == 'nope'", "undefined field 'foo5'"),
        ("object.foo < invalid.x", "undeclared reference to 'invalid' (in container '')"),
        ("test() == true", "undeclared reference to 'test' (in container '')"),
    ];
    for (source, want) in refused {
        let parsed = crate::parse(source).unwrap();
        assert_eq!(check(&parsed, &env), Err(vec![want.to_owned()]), "{source}");
    }
    let bare = TypeEnv::admission(false, false);
    for (source, want) in [
        ("object.foo < params.x", "undeclared reference to 'params' (in container '')"),
        ("authorizer.group('') != null", "undeclared reference to 'authorizer' (in container '')"),
    ] {
        let parsed = crate::parse(source).unwrap();
        assert_eq!(check(&parsed, &bare), Err(vec![want.to_owned()]), "{source}");
    }
}

/// cel-go `ext/comprehensions_test.go`: the two-variable macros' errors.
#[test]
fn two_variable_comprehension_errors() {
    let cases = [
        ("[].all(i, i, i < i)", "duplicate variable name: i"),
        ("[].all(__result__, i, __result__ < i)", "iteration variable overwrites accumulator variable"),
        ("[].all(j, __result__, __result__ < j)", "iteration variable overwrites accumulator variable"),
        ("[].all(i.j, k, i.j < k)", "argument must be a simple name"),
        ("[].all(j, i.k, j < i.k)", "argument must be a simple name"),
        ("1.all(j, k, j < k)", "cannot be range"),
        ("[].exists(i.j, k, i.j < k)", "argument must be a simple name"),
        ("''.exists(j, k, j < k)", "cannot be range"),
        ("[].existsOne(j, i.k, j < i.k)", "argument must be a simple name"),
        ("[].exists_one(i.j, k, i.j < k)", "argument must be a simple name"),
        ("''.existsOne(j, k, j < k)", "cannot be range"),
        ("[].transformList(j, i.k, j + i.k)", "argument must be a simple name"),
        ("{}.transformMap(i.j, k, i.j + k)", "argument must be a simple name"),
        ("{}.transformMapEntry(j, i.k, {j: i.k})", "argument must be a simple name"),
        ("{}.transformMapEntry(j, k, 'bad filter', {k: j})", "no matching overload"),
        ("[1, 2].transformList(i, v, v % 2 == 0 ? [v] : v)", "no matching overload"),
        (
            "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, []) == {}",
            "no matching overload",
        ),
    ];
    for (source, want) in cases {
        let errors = run(source).unwrap_err();
        assert!(errors.iter().any(|e| e.contains(want)), "{source}: {errors:?}");
    }
    assert_eq!(
        run("1.all(j, k, j < k)"),
        Err(vec![
            "expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)"
                .into()
        ])
    );
    assert_eq!(run("[1, 1].transformMapEntry(i, v, {v: i})"), Ok("map(int, int)".into()));
}

/// cel-go's planner folds conversions of constants (`OptOptimize`): their errors fail the
/// program, which Kubernetes reports as a compile error.
#[test]
fn constant_conversions() {
    let e = env();
    let cases = [
        ("int('abc') == 1", Some("type conversion error from 'string' to 'int'")),
        ("int('12') == 12", None),
        ("int('+12') == 12", None),
        ("uint('+1') == 1u", Some("type conversion error from 'string' to 'uint'")),
        ("uint(-1) == 1u", Some("unsigned integer overflow")),
        ("int(1e20) == 1", Some("integer overflow")),
        ("int(18446744073709551615u) == 1", Some("integer overflow")),
        ("double('1e400') == 1.0", Some("type conversion error from 'string' to 'double'")),
        ("double('-Inf') < 0.0", None),
        ("bool('yes')", Some("type conversion error from 'string' to 'bool'")),
        ("bool('T')", None),
        ("string(b'\\xff') == ''", Some("invalid UTF-8 in bytes, cannot convert to string")),
        ("int(string(1e6)) == 1", Some("type conversion error from 'string' to 'int'")),
        ("int(string(100.0)) == 100", None),
        (
            "duration(string(1)) == duration('1s')",
            Some("type conversion error from 'string' to 'google.protobuf.Duration'"),
        ),
        ("timestamp(string(1)) == timestamp(1)", Some("invalid RFC 3339 timestamp \"1\"")),
        (
            "timestamp(string(b'2023-01-01t00:00:00z')) == timestamp(1)",
            Some("type conversion error from 'string' to 'google.protobuf.Timestamp'"),
        ),
        ("timestamp(string(b'9999-12-31T23:59:59-01:00')) == timestamp(1)", Some("timestamp overflow")),
        (
            "type(request) == kubernetes.AdmissionRequest",
            Some("reference to undefined type: kubernetes.AdmissionRequest"),
        ),
        (
            "type(1) == google.protobuf.Int64Value",
            Some("reference to undefined type: google.protobuf.Int64Value"),
        ),
        ("kubernetes.AdmissionRequest{name: 'x'}.name == 'x'", None),
        // A constant index is an attribute qualifier: null, lists, maps, types, bytes,
        // durations and timestamps cannot be.
        ("object[null] == 1", Some("invalid qualifier type: types.Null")),
        ("object[[1]] == 1", Some("invalid qualifier type: *types.baseList")),
        ("object[{}] == 1", Some("invalid qualifier type: *types.baseMap")),
        ("object[int] == 1", Some("invalid qualifier type: *types.Type")),
        ("object[?duration('1s')].hasValue()", Some("invalid qualifier type: types.Duration")),
        ("object[1.5] == object[true]", None),
        ("int(dyn('x')) == 1", Some("type conversion error from 'string' to 'int'")),
        ("int(object.x) == 1", None),
        ("'a'.matches(string(b'['))", Some("error parsing regexp: missing closing ]: `[`")),
        ("[int('1'), 2][0] == int('x')", Some("type conversion error from 'string' to 'int'")),
    ];
    for (source, want) in cases {
        let parsed = crate::parse(source).unwrap();
        let checked = check_detailed(&parsed, &e).unwrap_or_else(|errors| panic!("{source}: {errors:?}"));
        let want = want.map(|w| format!("program instantiation failed: {w}"));
        assert_eq!(checked.instantiation_error, want, "{source}");
    }
}

#[test]
fn errors_past_one_hundred_are_counted() {
    let source = vec!["x"; 103].join(" + ");
    let errors = run(&source).unwrap_err();
    assert_eq!(errors.len(), 101);
    assert_eq!(errors[100], "3 more errors were truncated");
}

/// cel-go `checker/checker_test.go`: optional selections and literals.
#[test]
fn optionals_of_cel_go() {
    use CheckedType as T;
    let cases: &[(T, &str, &str)] = &[
        (T::map(T::String, T::String), "a.?b", "optional_type(string)"),
        (T::map(T::String, T::String), "type(a.?b) == optional_type", "bool"),
        (T::optional(T::map(T::String, T::String)), "a.b", "optional_type(string)"),
        (T::optional(T::Dyn), "a.dynamic", "optional_type(dyn)"),
        (T::optional(T::Dyn), "has(a.dynamic)", "bool"),
        (T::optional(T::map(T::String, T::Dyn)), "has(a.?b.c)", "bool"),
        (T::optional(T::map(T::String, T::String)), "{?'nested': a.b}", "map(string, string)"),
        (T::optional(T::String), "[?a, ?a, 'world']", "list(string)"),
        (T::Dyn, "{?'key': {'a': 'b'}.?value}.key", "string"),
    ];
    for (a, source, want) in cases {
        let mut env = TypeEnv::new();
        env.variable("a", a.clone());
        let parsed = crate::parse(source).unwrap();
        assert_eq!(check(&parsed, &env).map(|t| t.format()), Ok((*want).to_owned()), "{source}");
    }
}

// Differential runs against upstream (the oracle's k8s.io/apiserver 0.36.4 with cel-go 0.32,
// unpacked by tests/oracle/provision.sh under ~/.cache/admission-gateway/oracle-sysroot):
// build the program below in GOPATH mode against the sysroot as provision.sh builds the
// oracle (GO111MODULE=off GOPATH=<dir>:<sysroot>/usr/share/gocode GOROOT=<sysroot>/usr/lib/go-1.27
// GOCACHE=~/.cache/admission-gateway/oracle-gocache go build), feed it one JSON string a line,
// and compare with `CEL_CHECK_EXPRS=FILE cargo test -p cel-engine differential_dump --
// --ignored --nocapture` (messages compared as sets: cel-go sorts them by position).
// RETURN_BOOL=1 makes the expressions' return type bool (k8s's `must evaluate to bool`:
// a `dyn` output is refused, as [`check_result_type`] does).
// `differential_generate` writes a call of every declared overload and variants with a
// wrong argument. At the time of writing: 0 differences over ~1,300 expressions, except a
// parser one (`.s` keeps its leading dot upstream).
//
// // Compiles each stdin line (a JSON string: a CEL expression) with kube-apiserver's admission
// // compiler (params, authorizer, variables num=1 and opt=optional.of(1)) and prints one JSON
// // line: {"ok": bool, "type": output type, "err": error detail}.
// package main
//
// import (
// 	"bufio"
// 	"encoding/json"
// 	"fmt"
// 	"os"
//
// 	celgo "cel.dev/cel-go/cel"
// 	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
// 	"k8s.io/apiserver/pkg/cel/environment"
// )
//
// type expr struct{ e, name string }
//
// func (x expr) GetExpression() string         { return x.e }
// func (x expr) ReturnTypes() []*celgo.Type {
// 	if os.Getenv("RETURN_BOOL") != "" && x.name == "" {
// 		return []*celgo.Type{celgo.BoolType}
// 	}
// 	return []*celgo.Type{celgo.AnyType}
// }
// func (x expr) GetName() string                { return x.name }
//
// func main() {
// 	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
// 	c, err := plugincel.NewCompositedCompiler(base)
// 	if err != nil {
// 		panic(err)
// 	}
// 	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
// 	c.CompileAndStoreVariable(expr{"1", "num"}, opts, environment.NewExpressions)
// 	c.CompileAndStoreVariable(expr{"optional.of(1)", "opt"}, opts, environment.NewExpressions)
// 	for _, v := range [][2]string{{"request.userInfo", "st"}, {"[1]", "lst"}, {"{'a': [1]}", "mp"}, {"type(1)", "ty"}, {"null", "nul"}, {"duration('1s')", "dur"}, {"1 + 'a'", "bad"}, {"[request]", "lstr"}} {
// 		c.CompileAndStoreVariable(expr{v[0], v[1]}, opts, environment.NewExpressions)
// 	}
// 	in := bufio.NewScanner(os.Stdin)
// 	in.Buffer(make([]byte, 1<<20), 1<<20)
// 	out := json.NewEncoder(os.Stdout)
// 	for in.Scan() {
// 		var src string
// 		if err := json.Unmarshal(in.Bytes(), &src); err != nil {
// 			panic(err)
// 		}
// 		res := map[string]any{}
// 		func() {
// 			defer func() {
// 				if p := recover(); p != nil {
// 					res["ok"] = false
// 					res["err"] = fmt.Sprintf("panic: %v", p)
// 				}
// 			}()
// 			r := c.CompileCELExpression(expr{e: src}, opts, environment.NewExpressions)
// 			res["ok"] = r.Error == nil
// 			if r.Error != nil {
// 				res["err"] = r.Error.Detail
// 			} else {
// 				res["type"] = fmt.Sprint(r.OutputType)
// 			}
// 		}()
// 		out.Encode(res)
// 	}
// }

/// A differential run against upstream: `CEL_CHECK_EXPRS=FILE` (one JSON string a line)
/// prints, for each, `{"ok":…,"type":…}` or `{"ok":false,"err":[messages]}` on standard error.
#[test]
#[ignore]
fn differential_dump() {
    let Ok(path) = std::env::var("CEL_CHECK_EXPRS") else { return };
    let text = std::fs::read_to_string(path).unwrap();
    let mut env = env();
    // As the Go side: variables compiled in order, each seeing the earlier ones.
    for (name, source) in [
        ("st", "request.userInfo"),
        ("lst", "[1]"),
        ("mp", "{'a': [1]}"),
        ("ty", "type(1)"),
        ("nul", "null"),
        ("dur", "duration('1s')"),
        ("bad", "1 + 'a'"),
        ("lstr", "[request]"),
    ] {
        let output = check(&crate::parse(source).unwrap(), &env).ok();
        env.composited_variable(name, output.as_ref());
    }
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let source: String = serde_json::from_str(line).unwrap();
        let out = match crate::parse(&source) {
            Err(e) => serde_json::json!({"ok": false, "err": [format!("PARSE {e}")]}),
            Ok(parsed) => match check_detailed(&source::restore_exists_one_calls(&parsed), &env) {
                Err(errors) => {
                    let messages: Vec<String> = errors.into_iter().map(|e| e.message).collect();
                    serde_json::json!({"ok": false, "err": messages})
                }
                Ok(checked) => match checked.instantiation_error {
                    Some(e) => serde_json::json!({"ok": false, "err": [e]}),
                    None => serde_json::json!({"ok": true, "type": checked.output.display()}),
                },
            },
        };
        eprintln!("DIFF {out}");
    }
}

/// No two-argument `existsOne` in the API server's environment (cel-go's `StandardMacros`).
#[test]
fn exists_one_spelled_exists_one_is_a_call() {
    let env = env();
    assert_eq!(
        check_source("[1].existsOne(x, x == 1)", &env).map(|c| c.output),
        Err([
            "ERROR: <input>:1:14: undeclared reference to 'existsOne' (in container '')",
            " | [1].existsOne(x, x == 1)",
            " | .............^",
            "ERROR: <input>:1:15: undeclared reference to 'x' (in container '')",
            " | [1].existsOne(x, x == 1)",
            " | ..............^",
            "ERROR: <input>:1:18: undeclared reference to 'x' (in container '')",
            " | [1].existsOne(x, x == 1)",
            " | .................^",
        ]
        .join("\n"))
    );
    assert_eq!(check_source("[1].exists_one(x, x == 1)", &env).map(|c| c.output), Ok(CheckedType::Bool));
    assert_eq!(
        check_source("{'a': 1}.existsOne(k, v, v == 1)", &env).map(|c| c.output),
        Ok(CheckedType::Bool)
    );
    assert_eq!(
        check_source("[[1].exists_one(x, x == 1)].exists_one(y, y)", &env).map(|c| c.output),
        Ok(CheckedType::Bool)
    );
}

/// Writes calls of every declared overload (and of each with one argument of a wrong type)
/// to `CEL_CHECK_GEN=FILE`, for [`differential_dump`] and upstream.
#[test]
#[ignore]
fn differential_generate() {
    let Ok(path) = std::env::var("CEL_CHECK_GEN") else { return };
    fn sample(t: &CheckedType) -> String {
        use CheckedType as T;
        match t {
            T::Int | T::Param(_) => "1".into(),
            T::Uint => "1u".into(),
            T::Double => "1.5".into(),
            T::String => "'a'".into(),
            T::Bytes => "b'a'".into(),
            T::Bool => "true".into(),
            T::Null => "null".into(),
            T::Duration => "duration('1s')".into(),
            T::Timestamp => "timestamp(0)".into(),
            T::Dyn => "object.x".into(),
            T::List(e) => format!("[{}]", sample(e)),
            T::Map(k, v) => format!("{{{}: {}}}", sample(k), sample(v)),
            T::Type(_) => "int".into(),
            T::Opaque(n, ps) if n == "optional_type" => format!("optional.of({})", sample(&ps[0])),
            T::Opaque(n, _) if n == "net.IP" => "ip('1.2.3.4')".into(),
            T::Opaque(n, _) if n == "net.CIDR" => "cidr('10.0.0.0/8')".into(),
            T::Struct(n) => match n.as_str() {
                "kubernetes.Quantity" => "quantity('1')".into(),
                "kubernetes.URL" => "url('https://a')".into(),
                "kubernetes.Semver" => "semver('1.0.0')".into(),
                "kubernetes.NamedFormat" => "format.dns1123Label()".into(),
                "kubernetes.authorization.Authorizer" => "authorizer".into(),
                "kubernetes.authorization.PathCheck" => "authorizer.path('/')".into(),
                "kubernetes.authorization.GroupCheck" => "authorizer.group('')".into(),
                "kubernetes.authorization.ResourceCheck" => "authorizer.group('').resource('pods')".into(),
                "kubernetes.authorization.Decision" => "authorizer.path('/').check('get')".into(),
                _ => "request".into(),
            },
            _ => "object".into(),
        }
    }
    fn wrong(t: &CheckedType) -> String {
        match t {
            CheckedType::Bool => "1".into(),
            CheckedType::Dyn | CheckedType::Param(_) => "[1, 2]".into(),
            _ => "true".into(),
        }
    }
    fn render(name: &str, member: bool, args: &[String]) -> Option<String> {
        let bin = |op: &str| format!("({} {op} {})", args[0], args[1]);
        Some(match (name, args.len()) {
            ("_+_", 2) => bin("+"),
            ("_-_", 2) => bin("-"),
            ("_*_", 2) => bin("*"),
            ("_/_", 2) => bin("/"),
            ("_%_", 2) => bin("%"),
            ("_==_", 2) => bin("=="),
            ("_!=_", 2) => bin("!="),
            ("_<_", 2) => bin("<"),
            ("_<=_", 2) => bin("<="),
            ("_>_", 2) => bin(">"),
            ("_>=_", 2) => bin(">="),
            ("_&&_", 2) => bin("&&"),
            ("_||_", 2) => bin("||"),
            ("@in", 2) => bin("in"),
            ("_[_]", 2) => format!("{}[{}]", args[0], args[1]),
            ("_[?_]", 2) => format!("{}[?{}]", args[0], args[1]),
            ("!_", 1) => format!("!{}", args[0]),
            ("-_", 1) => format!("-({})", args[0]),
            ("_?_:_", 3) => format!("({} ? {} : {})", args[0], args[1], args[2]),
            (n, _) if n.starts_with('@') || n.starts_with("_?") || n.starts_with("cel.@") => return None,
            (n, _) if member => format!("{}.{n}({})", args[0], args[1..].join(", ")),
            (n, _) => format!("{n}({})", args.join(", ")),
        })
    }
    let mut out = String::new();
    let mut names: Vec<_> = decls::functions().keys().collect();
    names.sort();
    for name in names {
        for o in &decls::functions()[name.as_str()] {
            let good: Vec<String> = o.args.iter().map(sample).collect();
            let mut variants = vec![good.clone()];
            for i in 0..good.len() {
                let mut v = good.clone();
                v[i] = wrong(&o.args[i]);
                variants.push(v);
            }
            for v in variants {
                if let Some(e) = render(name, o.member, &v) {
                    out.push_str(&serde_json::to_string(&e).unwrap());
                    out.push('\n');
                }
            }
        }
    }
    std::fs::write(path, out).unwrap();
}

/// cel-go's report of the errors (common/error.go `ToDisplayString`): `ERROR: <input>:L:C:`
/// with the 1-based column, the line (tabs as spaces), a caret padded with dots (full-width
/// ones under characters of more than one byte), the errors sorted by position. The expected
/// texts are upstream's, from the oracle (tests/oracle/main.go) after `compilation failed: `.
#[test]
fn errors_are_reported_at_their_position_as_cel_go_prints_them() {
    let cases: &[(&str, &[&str])] = &[
        (
            "1 + 1.0 == 2.0",
            &[
                "ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, double)'",
                " | 1 + 1.0 == 2.0",
                " | ..^",
            ],
        ),
        // Two errors, in the order of their positions.
        (
            "x + y == 1",
            &[
                "ERROR: <input>:1:1: undeclared reference to 'x' (in container '')",
                " | x + y == 1",
                " | ^",
                "ERROR: <input>:1:5: undeclared reference to 'y' (in container '')",
                " | x + y == 1",
                " | ....^",
            ],
        ),
        // The line of the error, not the first.
        (
            "object.metadata.name == 1 &&\n  y == 2",
            &["ERROR: <input>:2:3: undeclared reference to 'y' (in container '')", " |   y == 2", " | ..^"],
        ),
        (
            "\tfoo == 1",
            &["ERROR: <input>:1:2: undeclared reference to 'foo' (in container '')", " |  foo == 1", " | .^"],
        ),
        // A negative number is at its sign.
        (
            "'%x'.format([-0.0]) == ''",
            &[
                "ERROR: <input>:1:14: error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double",
                " | '%x'.format([-0.0]) == ''",
                " | .............^",
            ],
        ),
        (
            "[1].all(x, -2)",
            &["ERROR: <input>:1:12: expected type 'bool' but found 'int'", " | [1].all(x, -2)", " | ...........^"],
        ),
        // Columns count characters; the padding under a wide one is full-width.
        (
            "'héllo' == 'a' && 'ü' + 1 == 'b'",
            &[
                "ERROR: <input>:1:23: found no matching overload for '_+_' applied to '(string, int)'",
                " | 'héllo' == 'a' && 'ü' + 1 == 'b'",
                " | ..．................．..^",
            ],
        ),
        (
            "'日本語' + x == 'a'",
            &[
                "ERROR: <input>:1:9: undeclared reference to 'x' (in container '')",
                " | '日本語' + x == 'a'",
                " | .．．．....^",
            ],
        ),
        // Inside the parser's macros, the engine's macros, and a macro that is not one.
        (
            "[1].all(x, x + 'a')",
            &[
                "ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(int, string)'",
                " | [1].all(x, x + 'a')",
                " | .............^",
            ],
        ),
        (
            "[1,2].map(x, x + z) == []",
            &[
                "ERROR: <input>:1:18: undeclared reference to 'z' (in container '')",
                " | [1,2].map(x, x + z) == []",
                " | .................^",
            ],
        ),
        (
            "{'a': 1}.all(k, v, v + 'a')",
            &[
                "ERROR: <input>:1:22: found no matching overload for '_+_' applied to '(int, string)'",
                " | {'a': 1}.all(k, v, v + 'a')",
                " | .....................^",
            ],
        ),
        (
            "has(object.a) && object.sortBy(x, zz) == []",
            &[
                "ERROR: <input>:1:35: undeclared reference to 'zz' (in container '')",
                " | has(object.a) && object.sortBy(x, zz) == []",
                " | ..................................^",
            ],
        ),
        (
            "optional.of(1).optMap(x, x + 'a') == optional.none()",
            &[
                "ERROR: <input>:1:28: found no matching overload for '_+_' applied to '(int, string)'",
                " | optional.of(1).optMap(x, x + 'a') == optional.none()",
                " | ...........................^",
            ],
        ),
        // At a node an expansion made: the macro call's `(`.
        (
            "[1].exists_one(x, 'a')",
            &[
                "ERROR: <input>:1:15: found no matching overload for '_?_:_' applied to '(string, int, int)'",
                " | [1].exists_one(x, 'a')",
                " | ..............^",
            ],
        ),
        (
            "[1].transformList(i, v, v, v) == []",
            &[
                "ERROR: <input>:1:18: found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'",
                " | [1].transformList(i, v, v, v) == []",
                " | .................^",
            ],
        ),
        (
            "{'a': 1}.exists(k, v,\n  'x')",
            &["ERROR: <input>:2:3: expected type 'bool' but found 'string'", " |   'x')", " | ..^"],
        ),
        (
            "[1].existsOne(x, x == 1)",
            &[
                "ERROR: <input>:1:14: undeclared reference to 'existsOne' (in container '')",
                " | [1].existsOne(x, x == 1)",
                " | .............^",
                "ERROR: <input>:1:15: undeclared reference to 'x' (in container '')",
                " | [1].existsOne(x, x == 1)",
                " | ..............^",
                "ERROR: <input>:1:18: undeclared reference to 'x' (in container '')",
                " | [1].existsOne(x, x == 1)",
                " | .................^",
            ],
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(check_source(source, &env()).map(|c| c.output), Err(expected.join("\n")), "{source:?}");
    }
}

/// An error at a node without a source offset has cel-go's `NoLocation` (line -1, no line
/// shown) and comes first; the report stops after 100 errors and says how many more there were.
#[test]
fn errors_without_position_come_first_and_the_report_is_cut_at_100() {
    let at = |line, column| Some(cel_parser::ast::Location { line, column });
    let error = |location, message: &str| CheckError { id: 0, location, message: message.into() };
    assert_eq!(
        display_errors(&[error(at(1, 2), "second"), error(None, "first")], "a + b"),
        "ERROR: <input>:-1:0: first\nERROR: <input>:1:3: second\n | a + b\n | ..^"
    );
    let many: Vec<CheckError> = (0..102).map(|i| error(None, &format!("e{i}"))).collect();
    let report = display_errors(&many, "x");
    assert_eq!(report.lines().count(), 101);
    assert!(report.ends_with("ERROR: <input>:-1:0: e99\n2 more errors were truncated"), "{report}");
}
