//! The mutating chain (docs/semantics.md §10), reinvocation (§11) and the mutating audit
//! annotations (§14.3).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fixtures::{self, POD_CREATE, POD_DELETE};
use crate::support::{base64, mutating, reply, validating, webhook, Fleet, MockWebhook, TestGateway};

fn add_label(key: &str, value: &str) -> Value {
    json!([{"op": "add", "path": format!("/metadata/labels/{key}"), "value": value}])
}

fn has_label(review: &Value, key: &str) -> bool {
    review["request"]["object"]["metadata"]["labels"][key].is_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_patches_reach_the_caller_as_one_combined_json_patch() {
    let team = MockWebhook::patching(add_label("team", "payments")).spawn().await;
    let owner = MockWebhook::answering(|review| {
        // Builds on the first webhook's change, so it must see it.
        let team = review["request"]["object"]["metadata"]["labels"]["team"].as_str().unwrap_or("nobody");
        reply::patch(
            review,
            &json!([{"op": "add", "path": "/metadata/annotations/owner", "value": format!("team-{team}")}]),
        )
    })
    .spawn()
    .await;
    let gateway = TestGateway::start(Fleet::of([mutating(
        "chain",
        [webhook("team.example.com", &team), webhook("owner.example.com", &owner)],
    )]))
    .await;

    // A field the gateway does not know reaches both webhooks (`review/frame.rs`).
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["futureField"] = json!(["kept"]);
    let answer = gateway.mutate(&review).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(answer.patch_type(), Some("JSONPatch"));
    let mut expected = fixtures::object(POD_CREATE);
    expected["metadata"]["labels"]["team"] = json!("payments");
    expected["metadata"]["annotations"]["owner"] = json!("team-payments");
    assert_eq!(answer.patched(&fixtures::object(POD_CREATE)), expected);
    let (first, second) = (team.only_request(), owner.only_request());
    assert_eq!(
        second.label("team"),
        Some("payments"),
        "the second webhook sees the first one's patch in request.object"
    );
    assert_eq!(first.label("team"), None);
    for sent in [&first, &second] {
        assert_eq!(sent.review["request"]["futureField"], json!(["kept"]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_annotations_are_left_out_unless_the_settings_ask_for_them() {
    // They hold the patch itself, which the API server would store at audit level Metadata.
    let team = MockWebhook::patching(add_label("team", "payments")).spawn().await;
    let hooks = || mutating("chain", [webhook("team.example.com", &team)]);
    let gateway = TestGateway::start(Fleet::of([hooks()])).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.patch().is_some(), "{}", answer.body);
    assert!(answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_0").is_some());
    assert!(
        !answer.annotation_keys().iter().any(|key| key.starts_with("patch.webhook")),
        "{:?}",
        answer.annotation_keys()
    );

    let asked =
        TestGateway::start(Fleet::of([hooks()]).settings(json!({"auditPatchAnnotations": true}))).await;
    let answer = asked.mutate(&fixtures::review(POD_CREATE)).await;
    assert!(answer.annotation("patch.webhook.admission.k8s.io_round_0_index_0").is_some(), "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_called_webhook_is_annotated_with_its_round_index_and_patch() {
    // The webhook writes its operation's keys in any order; the annotation sorts them.
    let team = MockWebhook::answering(|review| {
        let patch = r#"[{"value":"payments","path":"/metadata/labels/team","op":"add"}]"#;
        reply::respond(review, json!({"allowed": true, "patchType": "JSONPatch", "patch": base64(patch)}))
    })
    .spawn()
    .await;
    let watcher = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::start(
        Fleet::of([mutating(
            "chain",
            [webhook("team.example.com", &team), webhook("watch.example.com", &watcher)],
        )])
        .settings(json!({"auditPatchAnnotations": true})),
    )
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some(r#"{"configuration":"chain","webhook":"team.example.com","mutated":true}"#)
    );
    assert_eq!(
        answer.annotation("patch.webhook.admission.k8s.io_round_0_index_0"),
        Some(
            r#"{"configuration":"chain","webhook":"team.example.com","patch":[{"op":"add","path":"/metadata/labels/team","value":"payments"}],"patchType":"JSONPatch"}"#
        )
    );
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some(r#"{"configuration":"chain","webhook":"watch.example.com","mutated":false}"#)
    );
    assert_eq!(
        answer.annotation("patch.webhook.admission.k8s.io_round_0_index_1"),
        None,
        "a webhook that sent no patch gets no patch annotation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configurations_run_in_name_order_and_the_index_counts_webhooks_that_did_not_match() {
    let secrets_only = MockWebhook::patching(add_label("secret", "yes")).spawn().await;
    let first = MockWebhook::patching(add_label("order", "first")).spawn().await;
    let second = MockWebhook::answering(|review| {
        let seen =
            review["request"]["object"]["metadata"]["labels"]["order"].as_str().unwrap_or("none").to_owned();
        reply::patch(review, &add_label("seen", &seen))
    })
    .spawn()
    .await;
    // Listed out of order on purpose: "a-…" sorts before "b-…", which sorts before "c-…".
    let gateway = TestGateway::start(Fleet::of([
        mutating("c-second", [webhook("second.example.com", &second)]),
        mutating("a-secrets", [webhook("secrets.example.com", &secrets_only).rule(&["*"], &["secrets"])]),
        mutating("b-first", [webhook("first.example.com", &first)]),
    ]))
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(secrets_only.calls(), 0);
    assert_eq!(second.only_request().label("order"), Some("first"));
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some(r#"{"configuration":"b-first","webhook":"first.example.com","mutated":true}"#)
    );
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_2"),
        Some(r#"{"configuration":"c-second","webhook":"second.example.com","mutated":true}"#)
    );
    assert!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_0").is_none(),
        "the secrets-only webhook did not match: {:?}",
        answer.annotation_keys()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_changes_nothing_is_annotated_but_yields_no_patch() {
    // The fixture already has app=web.
    let same = MockWebhook::patching(add_label("app", "web")).spawn().await;
    let gateway = TestGateway::mutating([webhook("same.example.com", &same)]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed());
    assert_eq!(answer.patch(), None, "{}", answer.body);
    assert_eq!(answer.patch_type(), None);
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_0"),
        Some(r#"{"configuration":"fleet","webhook":"same.example.com","mutated":false}"#)
    );
    assert_eq!(answer.annotation("patch.webhook.admission.k8s.io_round_0_index_0"), None, "off by default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_ends_the_chain_and_discards_earlier_patches() {
    let label = MockWebhook::patching(add_label("team", "payments")).spawn().await;
    let deny = MockWebhook::denying("no pods today").spawn().await;
    let after = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::mutating([
        webhook("label.example.com", &label),
        webhook("deny.example.com", &deny),
        webhook("after.example.com", &after),
    ])
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(400));
    assert_eq!(answer.message(), r#"admission webhook "deny.example.com" denied the request: no pods today"#);
    assert_eq!(answer.patch(), None);
    assert_eq!(after.calls(), 0, "no webhook runs after a denial");
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_0_index_1"),
        Some(r#"{"configuration":"fleet","webhook":"deny.example.com","mutated":false}"#),
        "the denying webhook is annotated too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_on_delete_is_an_internal_error() {
    let patcher = MockWebhook::patching(add_label("gone", "yes")).spawn().await;
    let gateway = TestGateway::mutating([webhook("patcher.example.com", &patcher)]).await;

    let answer = gateway.mutate(&fixtures::review(POD_DELETE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    assert_eq!(answer.reason(), "InternalError");
    assert_eq!(
        answer.message(),
        r#"Internal error occurred: admission webhook "patcher.example.com" attempted to modify the object, which is not supported for this operation"#
    );
    assert!(patcher.only_request().object().is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admit_validates_the_mutated_object_and_answers_with_the_patch() {
    let label = MockWebhook::patching(add_label("team", "payments")).spawn().await;
    let check = MockWebhook::answering(|review| {
        if has_label(review, "team") {
            reply::allow(review)
        } else {
            reply::deny(review, "pods need a team label")
        }
    })
    .spawn()
    .await;
    let gateway = TestGateway::start(Fleet::of([
        mutating("mutate", [webhook("label.example.com", &label)]),
        validating("validate", [webhook("check.example.com", &check)]),
    ]))
    .await;

    let admitted = gateway.admit(&fixtures::review(POD_CREATE)).await;
    let validated_alone = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(admitted.allowed(), "{}", admitted.body);
    assert_eq!(admitted.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"]["team"], "payments");
    assert!(!validated_alone.allowed(), "/validate runs no mutating webhook");
    assert_eq!(label.calls(), 1);
    assert_eq!(check.calls(), 2);
}

// ---------------------------------------------------------------------------------------------
// Reinvocation (§11.7)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_if_needed_webhook_is_reinvoked_when_a_later_one_changes_the_object() {
    let add_a = MockWebhook::patching(add_label("a", "1")).spawn().await;
    let remove_tier = MockWebhook::answering(|review| {
        if has_label(review, "tier") {
            reply::patch(review, &json!([{"op": "remove", "path": "/metadata/labels/tier"}]))
        } else {
            reply::allow(review)
        }
    })
    .spawn()
    .await;
    let gateway = TestGateway::start(
        Fleet::of([mutating(
            "fleet",
            [
                webhook("add-a.example.com", &add_a).if_needed(),
                webhook("remove-tier.example.com", &remove_tier).if_needed(),
            ],
        )])
        .settings(json!({"auditPatchAnnotations": true})),
    )
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!((add_a.calls(), remove_tier.calls()), (2, 1));
    let round_1 = &add_a.requests()[1];
    assert_eq!(round_1.label("a"), Some("1"));
    assert_eq!(round_1.label("tier"), None, "round 1 sees round 0's final object");
    let labels = &answer.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"];
    assert_eq!(labels, &json!({"app": "web", "a": "1"}));
    assert_eq!(
        answer.annotation("mutation.webhook.admission.k8s.io_round_1_index_0"),
        Some(r#"{"configuration":"fleet","webhook":"add-a.example.com","mutated":false}"#)
    );
    assert!(
        answer.annotation("patch.webhook.admission.k8s.io_round_1_index_0").is_some(),
        "a reinvoked webhook's repeated patch is annotated even though it changed nothing"
    );
    assert_eq!(answer.annotation("mutation.webhook.admission.k8s.io_round_1_index_1"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addlabel_then_conditionaladdlabel_calls_them_twice_and_once() {
    let addlabel = MockWebhook::answering(|review| {
        if has_label(review, "a") {
            reply::allow(review)
        } else {
            reply::patch(review, &add_label("a", "true"))
        }
    })
    .spawn()
    .await;
    let conditional = MockWebhook::answering(|review| {
        if has_label(review, "a") {
            reply::patch(review, &add_label("b", "true"))
        } else {
            reply::allow(review)
        }
    })
    .spawn()
    .await;
    let gateway = TestGateway::mutating([
        webhook("addlabel.example.com", &addlabel).if_needed(),
        webhook("conditionaladdlabel.example.com", &conditional).if_needed(),
    ])
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(addlabel.calls(), 2);
    assert_eq!(conditional.calls(), 1);
    let labels = &answer.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"];
    assert_eq!((&labels["a"], &labels["b"]), (&json!("true"), &json!("true")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_webhooks_are_called_once_even_when_round_1_runs() {
    let never_first = MockWebhook::patching(add_label("n", "1")).spawn().await;
    let if_needed = MockWebhook::patching(add_label("i", "1")).spawn().await;
    let never_last = MockWebhook::patching(add_label("m", "1")).spawn().await;
    let gateway = TestGateway::mutating([
        webhook("never-first.example.com", &never_first),
        webhook("if-needed.example.com", &if_needed).if_needed(),
        webhook("never-last.example.com", &never_last).set("reinvocationPolicy", json!("Never")),
    ])
    .await;

    gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(if_needed.calls(), 2, "round 1 ran");
    assert_eq!(never_first.calls(), 1);
    assert_eq!(never_last.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_skipped_in_round_0_is_never_called_even_once_it_matches() {
    let early = MockWebhook::patching(add_label("early", "1")).spawn().await;
    let selective = MockWebhook::patching(add_label("selective", "1")).spawn().await;
    let enabler = MockWebhook::patching(add_label("added", "yes")).spawn().await;
    let gateway = TestGateway::mutating([
        webhook("early.example.com", &early).if_needed(),
        webhook("selective.example.com", &selective)
            .if_needed()
            .object_selector(json!({"matchLabels": {"added": "yes"}})),
        webhook("enabler.example.com", &enabler),
    ])
    .await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(early.calls(), 2, "round 1 ran");
    assert_eq!(selective.calls(), 0);
    assert!(answer.allowed());
    assert!(answer.annotation("mutation.webhook.admission.k8s.io_round_1_index_0").is_some());
    assert!(answer.annotation("mutation.webhook.admission.k8s.io_round_1_index_1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_chain_is_still_one_answer() {
    // Sequential, not concurrent: two 200 ms webhooks take at least 400 ms.
    let one = MockWebhook::patching(add_label("one", "1")).after(Duration::from_millis(200)).spawn().await;
    let two = MockWebhook::patching(add_label("two", "2")).after(Duration::from_millis(200)).spawn().await;
    let gateway =
        TestGateway::mutating([webhook("one.example.com", &one), webhook("two.example.com", &two)]).await;

    let started = tokio::time::Instant::now();
    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(started.elapsed() >= Duration::from_millis(400));
    let labels = &answer.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"];
    assert_eq!((&labels["one"], &labels["two"]), (&json!("1"), &json!("2")));
}

// ---------------------------------------------------------------------------------------------
// Patches (§10.3, §10.5)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_patch_changes_nothing_and_leaves_no_patch_annotation() {
    let empty = MockWebhook::patching(json!([])).spawn().await;
    let gateway = TestGateway::mutating([webhook("empty.example.com", &empty)]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(answer.patch(), None);
    assert_eq!(answer.annotation_keys(), ["mutation.webhook.admission.k8s.io_round_0_index_0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_does_not_apply_is_an_internal_error_whatever_the_policy() {
    let bad = MockWebhook::patching(json!([{"op": "remove", "path": "/metadata/labels/nope"}])).spawn().await;
    let gateway = TestGateway::mutating([webhook("bad.example.com", &bad).ignore()]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(500));
    assert_eq!(
        answer.message(),
        "Internal error occurred: error in remove for path: '/metadata/labels/nope': \
         Unable to remove nonexistent key: nope: missing value",
        "evanphx/json-patch v4's words (Patch.remove wraps partialDoc.remove's error)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_of_a_missing_member_adds_it_as_kube_apiserver_does() {
    let replace =
        MockWebhook::patching(json!([{"op": "replace", "path": "/metadata/labels/new", "value": "v"}]))
            .spawn()
            .await;
    let gateway = TestGateway::mutating([webhook("replace.example.com", &replace)]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(answer.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"]["new"], "v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_webhook_can_switch_a_later_one_on() {
    let enabler = MockWebhook::patching(add_label("inject", "yes")).spawn().await;
    let injector = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::mutating([
        // Selecting on labels itself, so the object's labels are read before its patch.
        webhook("enabler.example.com", &enabler).object_selector(json!({"matchLabels": {"app": "web"}})),
        webhook("injector.example.com", &injector).object_selector(json!({"matchLabels": {"inject": "yes"}})),
    ])
    .await;

    gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(injector.only_request().label("inject"), Some("yes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_being_created_is_selected_by_the_labels_earlier_webhooks_gave_it() {
    let labeller = MockWebhook::patching(add_label("env", "prod")).spawn().await;
    let prod_only = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::mutating([
        webhook("labeller.example.com", &labeller),
        webhook("prod-only.example.com", &prod_only)
            .namespace_selector(json!({"matchLabels": {"env": "prod"}})),
    ])
    .await;

    gateway.mutate(&fixtures::review(crate::support::fixtures::NAMESPACE_CREATE)).await;

    assert_eq!(prod_only.calls(), 1, "the fixture's own label is env=staging");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_webhooks_patch_is_a_json_patch_without_saying_so() {
    let legacy = MockWebhook::answering(|review| {
        reply::respond(review, json!({"allowed": true, "patch": base64(r#"[{"op":"add","path":"/metadata/labels/legacy","value":"yes"}]"#)}))
    })
    .spawn()
    .await;
    let gateway =
        TestGateway::mutating([webhook("legacy.example.com", &legacy).review_versions(&["v1beta1"])]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(legacy.only_request().review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer.patched(&fixtures::object(POD_CREATE))["metadata"]["labels"]["legacy"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_bomb_is_stopped_at_the_api_servers_copy_limit_whatever_the_failure_policy() {
    // 1 MiB added, then copied until more than 3 MiB would have been duplicated.
    let bomb = MockWebhook::patching(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1024 * 1024)}},
        {"op": "copy", "from": "/metadata/annotations/a", "path": "/metadata/annotations/b"},
        {"op": "copy", "from": "/metadata/annotations", "path": "/spec/c"},
    ]))
    .spawn()
    .await;
    let gateway = TestGateway::mutating([webhook("bomb.example.com", &bomb).ignore()]).await;

    let answer = gateway.mutate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed(), "an internal error, not a call error: Ignore does not apply");
    assert_eq!(answer.code(), Some(500));
    let message = answer.message();
    let accumulated: u64 = message
        .strip_prefix(
            "Internal error occurred: Unable to complete the copy, the accumulated size increase of copy is ",
        )
        .and_then(|rest| rest.strip_suffix(", exceeding the limit 3145728"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(accumulated > 3 * 1024 * 1024 && accumulated < 3 * 1024 * 1024 + 64, "{accumulated}");
    assert!(answer.body.len() < 4096, "no object in the answer: {} bytes", answer.body.len());
}

/// Each webhook's patch is within every bound (the copy limit, the 16 MiB answer), but the
/// chain grows the object past `maxPatchedObjectBytes` (3 MiB by default): an internal error,
/// as a patch that does not apply, under Ignore too. Raised, the same chain passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_growing_the_object_past_its_bound_is_an_internal_error() {
    let grow = |key: &str| json!([{"op": "add", "path": format!("/metadata/annotations/{key}"), "value": "x".repeat(1536 * 1024)}]);
    let first = MockWebhook::patching(json!([{"op": "add", "path": "/metadata/annotations", "value": {}}]))
        .spawn()
        .await;
    let second = MockWebhook::patching(grow("b")).spawn().await;
    let third = MockWebhook::patching(grow("c")).spawn().await;
    let fleet = |settings: Value| {
        Fleet::of([mutating(
            "growing",
            [
                webhook("first.example.com", &first).ignore(),
                webhook("second.example.com", &second).ignore(),
                webhook("third.example.com", &third).ignore(),
            ],
        )])
        .settings(settings)
    };
    let review = fixtures::review(POD_CREATE);

    let gateway = TestGateway::start(fleet(json!({}))).await;
    let answer = gateway.mutate(&review).await;
    assert!(!answer.allowed(), "an internal error, not a call error: Ignore does not apply");
    assert_eq!(answer.code(), Some(500));
    let message = answer.message();
    let size: u64 = message
        .strip_prefix("Internal error occurred: the patched object is ")
        .and_then(|rest| {
            rest.strip_suffix(
                " bytes, more than the 3145728 bytes admission-gateway allows (maxPatchedObjectBytes)",
            )
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(size > 3 * 1024 * 1024 && size < 3 * 1024 * 1024 + 65536, "{size}");
    assert!(answer.body.len() < 4096, "no object in the answer: {} bytes", answer.body.len());
    // Two patches of 1.5 MiB alone stay under the bound: the third webhook's made the difference.
    assert_eq!(third.calls(), 1);

    let raised = TestGateway::start(fleet(json!({"maxPatchedObjectBytes": "4Mi"}))).await;
    let answer = raised.mutate(&review).await;
    assert!(answer.allowed(), "{}", answer.message());
    let patched = answer.patched(&review["request"]["object"]);
    assert_eq!(patched["metadata"]["annotations"]["c"].as_str().map(str::len), Some(1536 * 1024));
}
