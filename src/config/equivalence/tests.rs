use super::*;
use crate::review::Operation;

fn rule(groups: &[&str], versions: &[&str], resources: &[&str]) -> Rule {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Rule::compile(&crate::config::manifest::RuleWithOperations {
        operations: vec!["*".into()],
        api_groups: strings(groups),
        api_versions: strings(versions),
        resources: strings(resources),
        scope: Some("*".into()),
    })
}

fn request<'a>(group: &'a str, version: &'a str, resource: &'a str, subresource: &'a str) -> RuleRequest<'a> {
    RuleRequest { operation: Operation::Create, group, version, resource, subresource, namespace: "ns" }
}

fn gv(member: Member<'_>) -> String {
    format!("{}/{}", member.group, member.version)
}

fn widgets() -> CustomResource {
    CustomResource {
        group: "example.com".into(),
        resource: "widgets".into(),
        kind: "Widget".into(),
        versions: vec!["v1".into(), "v1beta1".into()],
    }
}

#[test]
fn equivalents_are_the_versions_sharing_storage_in_registration_order() {
    let registry = Equivalence::new(&[widgets()]);
    type Case = ((&'static str, &'static str, &'static str), &'static [&'static str]);
    let cases: [Case; 9] = [
        (
            ("extensions", "v1beta1", "deployments"),
            &["extensions/v1beta1", "apps/v1", "apps/v1beta2", "apps/v1beta1"],
        ),
        (("apps", "v1", "daemonsets"), &["extensions/v1beta1", "apps/v1", "apps/v1beta2"]),
        (("apps", "v1", "statefulsets"), &["apps/v1", "apps/v1beta2", "apps/v1beta1"]),
        (("networking.k8s.io", "v1", "networkpolicies"), &["extensions/v1beta1", "networking.k8s.io/v1"]),
        (("", "v1", "events"), &["/v1", "events.k8s.io/v1", "events.k8s.io/v1beta1"]),
        (
            ("autoscaling", "v1", "horizontalpodautoscalers"),
            &["autoscaling/v2", "autoscaling/v1", "autoscaling/v2beta1", "autoscaling/v2beta2"],
        ),
        (("example.com", "v1beta1", "widgets"), &["example.com/v1", "example.com/v1beta1"]),
        // A version not listed shares storage with nothing known; neither does a lone resource.
        (("example.com", "v2", "widgets"), &[]),
        (("", "v1", "pods"), &[]),
    ];
    for ((group, version, resource), expected) in cases {
        let found: Vec<String> = registry.equivalents(group, version, resource).map(gv).collect();
        assert_eq!(found, expected, "{group}/{version} {resource}");
    }
    // The custom resources are the configured ones only.
    assert_eq!(Equivalence::new(&[]).equivalents("example.com", "v1", "widgets").count(), 0);
}

#[test]
fn kinds_of_resources_and_subresources() {
    let registry = Equivalence::new(&[widgets()]);
    let kind = |group: &str, version: &str, resource: &str, subresource: &str| {
        registry
            .equivalents(group, version, resource)
            .find(|m| m.group == group && m.version == version)
            .and_then(|m| m.kind(subresource))
            .map(|k| k.to_string())
    };
    let cases = [
        (("apps", "v1", "deployments", ""), Some("apps/v1, Kind=Deployment")),
        (("apps", "v1", "deployments", "status"), Some("apps/v1, Kind=Deployment")),
        (("apps", "v1", "deployments", "scale"), Some("autoscaling/v1, Kind=Scale")),
        (("apps", "v1beta2", "deployments", "scale"), Some("apps/v1beta2, Kind=Scale")),
        (("apps", "v1beta1", "statefulsets", "scale"), Some("apps/v1beta1, Kind=Scale")),
        (("extensions", "v1beta1", "replicasets", "scale"), Some("extensions/v1beta1, Kind=Scale")),
        (
            ("extensions", "v1beta1", "deployments", "rollback"),
            Some("extensions/v1beta1, Kind=DeploymentRollback"),
        ),
        (("apps", "v1", "deployments", "rollback"), None),
        (("apps", "v1", "daemonsets", "scale"), None),
        (
            ("certificates.k8s.io", "v1", "certificatesigningrequests", "approval"),
            Some("certificates.k8s.io/v1, Kind=CertificateSigningRequest"),
        ),
        (("", "v1", "events", ""), Some("/v1, Kind=Event")),
        (("example.com", "v1beta1", "widgets", "status"), Some("example.com/v1beta1, Kind=Widget")),
        (("example.com", "v1", "widgets", "scale"), Some("autoscaling/v1, Kind=Scale")),
        (("example.com", "v1", "widgets", "frobnicate"), None),
    ];
    for ((group, version, resource, subresource), expected) in cases {
        assert_eq!(
            kind(group, version, resource, subresource).as_deref(),
            expected,
            "{group}/{version} {resource}/{subresource}"
        );
    }
}

#[test]
fn the_search_walks_rules_first_then_equivalents_and_the_first_hit_wins() {
    let registry = Equivalence::new(&[]);
    let hit = |rules: &[Rule], request: RuleRequest<'_>| {
        registry.search(rules, &request).map(|hit| (gv(hit.member), hit.kind.map(|k| k.to_string())))
    };
    let deployment = request("extensions", "v1beta1", "deployments", "");
    let v1beta1 = rule(&["apps"], &["v1beta1"], &["deployments"]);
    let v1 = rule(&["apps"], &["v1"], &["deployments"]);
    // An earlier rule beats a later one, even when the later names an earlier equivalent.
    assert_eq!(
        hit(&[v1beta1.clone(), v1.clone()], deployment),
        Some(("apps/v1beta1".into(), Some("apps/v1beta1, Kind=Deployment".into())))
    );
    assert_eq!(
        hit(&[v1.clone(), v1beta1.clone()], deployment),
        Some(("apps/v1".into(), Some("apps/v1, Kind=Deployment".into())))
    );
    // Within one rule, the first equivalent in registration order.
    assert_eq!(
        hit(&[rule(&["apps"], &["*"], &["deployments"])], deployment).map(|h| h.0),
        Some("apps/v1".into())
    );
    // The requested resource itself is never a hit (it was checked already).
    assert_eq!(hit(&[rule(&["extensions"], &["v1beta1"], &["deployments"])], deployment), None);
    // Same subresource: deployments/scale matches `deployments/scale`, not `deployments`.
    let scale = request("extensions", "v1beta1", "deployments", "scale");
    assert_eq!(hit(std::slice::from_ref(&v1), scale), None);
    assert_eq!(
        hit(&[rule(&["apps"], &["v1"], &["deployments/scale"])], scale),
        Some(("apps/v1".into(), Some("autoscaling/v1, Kind=Scale".into())))
    );
    // A subresource the table has no kind for is a hit without a kind.
    let unknown = request("extensions", "v1beta1", "deployments", "frobnicate");
    assert_eq!(hit(&[rule(&["apps"], &["v1"], &["deployments/*"])], unknown), Some(("apps/v1".into(), None)));
    // Resources that share nothing: no hit.
    assert_eq!(hit(&[rule(&["*"], &["*"], &["*"])], request("", "v1", "pods", "")), None);
    assert_eq!(hit(&[v1], request("apps", "v1", "statefulsets", "")), None);
}

#[test]
fn related_pairs_feed_the_candidate_index() {
    let registry = Equivalence::new(&[widgets()]);
    assert_eq!(registry.related("apps", "deployments"), [("extensions", "deployments")]);
    assert_eq!(registry.related("networking.k8s.io", "ingresses"), [("extensions", "ingresses")]);
    assert_eq!(registry.related("events.k8s.io", "events"), [("", "events")]);
    assert_eq!(registry.related("example.com", "widgets"), Vec::<(&str, &str)>::new());
    assert_eq!(registry.related("", "pods"), Vec::<(&str, &str)>::new());
    let mut wildcard = registry.related("apps", "*");
    wildcard.sort_unstable();
    assert_eq!(wildcard, [("extensions", "*")]);
}

#[test]
fn the_table_is_consistent() {
    for shared in BUILT_IN {
        assert!(shared.served.len() >= 2, "{} shares storage with nothing", shared.resource);
        for (i, served) in shared.served.iter().enumerate() {
            assert!(
                !shared.served[..i].iter().any(|s| (s.group, s.version) == (served.group, served.version)),
                "{} listed twice at {}/{}",
                shared.resource,
                served.group,
                served.version
            );
        }
        let others = BUILT_IN.iter().filter(|s| !std::ptr::eq(*s, shared));
        for other in others.filter(|o| o.resource == shared.resource) {
            assert!(
                !other.served.iter().any(|o| shared.served.iter().any(|s| s.group == o.group)),
                "{} is in two entries",
                shared.resource
            );
        }
    }
}
