//! The validating fan-out (docs/semantics.md §12), warnings (§13) and the webhooks' own audit
//! annotations (§14.2).

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::support::fixtures::{self, POD_CREATE, POD_CREATE_PRIVILEGED};
use crate::support::{reply, webhook, MockWebhook, TestGateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_webhooks_are_called_concurrently() {
    // Long enough that a loaded machine still sends the three calls within it.
    let delay = Duration::from_secs(1);
    let a = MockWebhook::slow(delay).spawn().await;
    let b = MockWebhook::slow(delay).spawn().await;
    let c = MockWebhook::slow(delay).spawn().await;
    let gateway = TestGateway::validating([
        webhook("a.example.com", &a),
        webhook("b.example.com", &b),
        webhook("c.example.com", &c),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed());
    assert_eq!((a.calls(), b.calls(), c.calls()), (1, 1, 1));
    // Called one after another, each call would reach its webhook only after the previous one's
    // answer, itself at least `delay` after that call arrived: the arrivals would span at least
    // 2 × delay. Concurrent calls all arrive before the first answer can leave: within `delay`.
    // (What is measured is when the calls arrived, not how long the review took.)
    let arrivals: Vec<Instant> = [&a, &b, &c].iter().map(|mock| mock.only_request().at).collect();
    let (first, last) = (arrivals.iter().min().unwrap(), arrivals.iter().max().unwrap());
    assert!(
        last.duration_since(*first) < delay,
        "the calls arrived {:?} apart: one after another",
        last.duration_since(*first)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_deny_outweighs_any_number_of_allows() {
    let allow = MockWebhook::allowing().spawn().await;
    let deny = MockWebhook::answering(|review| {
        let privileged =
            &review["request"]["object"]["spec"]["containers"][0]["securityContext"]["privileged"];
        if privileged == true {
            reply::deny(review, "privileged pods are not allowed")
        } else {
            reply::allow(review)
        }
    })
    .spawn()
    .await;
    let also_allow = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("allow.example.com", &allow),
        webhook("privileged.example.com", &deny),
        webhook("also-allow.example.com", &also_allow),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE_PRIVILEGED)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(400));
    assert_eq!(
        answer.message(),
        r#"admission webhook "privileged.example.com" denied the request: privileged pods are not allowed"#
    );
    assert_eq!(
        (allow.calls(), deny.calls(), also_allow.calls()),
        (1, 1, 1),
        "fan-out still calls every matching webhook"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_denials_are_both_named() {
    let images = MockWebhook::denying("image not signed").spawn().await;
    let quota = MockWebhook::denying("quota exceeded").spawn().await;
    let gateway = TestGateway::validating([
        webhook("images.example.com", &images),
        webhook("quota.example.com", &quota),
    ])
    .await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.code(), Some(400));
    let message = answer.message();
    assert!(
        message.contains(r#"admission webhook "images.example.com" denied the request: image not signed"#),
        "{message}"
    );
    assert!(
        message.contains(r#"admission webhook "quota.example.com" denied the request: quota exceeded"#),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_without_message_or_reason_says_so() {
    let silent =
        MockWebhook::answering(|review| reply::respond(review, json!({"allowed": false}))).spawn().await;
    let gateway = TestGateway::validating([webhook("silent.example.com", &silent)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert_eq!(answer.code(), Some(400));
    assert_eq!(
        answer.message(),
        r#"admission webhook "silent.example.com" denied the request without explanation"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_from_several_webhooks_are_deduplicated() {
    let a = MockWebhook::answering(|review| {
        reply::respond(
            review,
            json!({"allowed": true, "warnings": ["image tag is mutable", "no resource limits on cpu"]}),
        )
    })
    .spawn()
    .await;
    let b = MockWebhook::answering(|review| {
        reply::respond(
            review,
            json!({"allowed": true, "warnings": ["image tag is mutable", "runs as a shared service account"]}),
        )
    })
    .spawn()
    .await;
    let gateway =
        TestGateway::validating([webhook("tags.example.com", &a), webhook("accounts.example.com", &b)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed());
    let mut warnings = answer.warnings();
    warnings.sort();
    assert_eq!(
        warnings,
        ["image tag is mutable", "no resource limits on cpu", "runs as a shared service account"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_of_a_denying_webhook_reach_the_caller() {
    let deny = MockWebhook::answering(|review| {
        reply::respond(
            review,
            json!({"allowed": false, "status": {"message": "no"}, "warnings": ["see the policy page"]}),
        )
    })
    .spawn()
    .await;
    let gateway = TestGateway::validating([webhook("deny.example.com", &deny)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(!answer.allowed());
    assert_eq!(answer.warnings(), ["see the policy page"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhooks_audit_annotations_come_back_under_its_name() {
    let audit = MockWebhook::answering(|review| {
        reply::respond(
            review,
            json!({"allowed": true, "auditAnnotations": {"decision": "checked", "bad/key": "dropped"}}),
        )
    })
    .spawn()
    .await;
    let gateway = TestGateway::validating([webhook("audit.example.com", &audit)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed());
    assert_eq!(answer.annotation("audit.example.com_decision"), Some("checked"));
    assert_eq!(
        answer.annotation_keys(),
        ["audit.example.com_decision"],
        "a key containing '/' is dropped (§14.2)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_matching_webhook_means_allowed_without_any_call() {
    let secrets = MockWebhook::denying("no").spawn().await;
    let gateway =
        TestGateway::validating([webhook("secrets.example.com", &secrets).rule(&["*"], &["secrets"])]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed());
    assert_eq!(answer.uid(), fixtures::uid(POD_CREATE));
    assert_eq!(secrets.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reviews_each_get_their_own_answer() {
    // Denies pods whose name ends in an odd digit, after a pause so the reviews overlap.
    let odd = MockWebhook::answering(|review| {
        let name = review["request"]["name"].as_str().unwrap_or_default();
        let last = name.chars().last().and_then(|c| c.to_digit(10)).unwrap_or(0);
        if last % 2 == 1 {
            reply::deny(review, name)
        } else {
            reply::allow(review)
        }
    })
    .after(Duration::from_millis(50))
    .spawn()
    .await;
    let gateway = TestGateway::validating([webhook("odd.example.com", &odd)]).await;
    let reviews: Vec<_> = (0..20)
        .map(|i| {
            let mut review = fixtures::review(POD_CREATE);
            review["request"]["uid"] = json!(format!("review-{i}"));
            review["request"]["name"] = json!(format!("pod-{i}"));
            review
        })
        .collect();

    let answers = futures_util::future::join_all(reviews.iter().map(|r| gateway.validate(r))).await;

    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.uid(), format!("review-{i}"));
        assert_eq!(answer.allowed(), i % 2 == 0, "pod-{i}");
        if i % 2 == 1 {
            assert!(answer.message().ends_with(&format!(": pod-{i}")), "{}", answer.message());
        }
    }
    assert_eq!(odd.calls(), 20);
}

/// A webhook is sent the caller's review as it came, with a uid of its own: every field the
/// caller sent, those the gateway does not know included (docs/differences.md, "The
/// request a webhook is sent") — except to a webhook of another review version, which is sent what
/// the gateway knows, written anew in its version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_sent_the_callers_review_with_its_own_uid() {
    let same = MockWebhook::allowing().spawn().await;
    let beta = MockWebhook::allowing().spawn().await;
    let gateway = TestGateway::validating([
        webhook("same.example.com", &same),
        webhook("beta.example.com", &beta).review_versions(&["v1beta1"]),
    ])
    .await;
    let mut review = fixtures::review(POD_CREATE);
    review["request"]["futureField"] = json!({"since": "1.99", "values": [1, "two"]});

    let answer = gateway.validate(&review).await;

    assert!(answer.allowed(), "{}", answer.body);
    let sent = same.only_request().review;
    let uid = sent["request"]["uid"].as_str().expect("a uid");
    assert_ne!(uid, review["request"]["uid"].as_str().unwrap(), "the webhook's own uid");
    let mut expected = review.clone();
    expected["request"]["uid"] = json!(uid);
    assert_eq!(sent, expected, "the caller's review, field for field");
    let beta = beta.only_request().review;
    assert_eq!(beta["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(beta["request"]["object"], review["request"]["object"]);
    assert!(beta["request"].get("futureField").is_none(), "{beta}");
}
