//! Reloads that must never open the gate: a configuration file rewritten in place is read only
//! once it has settled, an emptied file never replaces what it held, and a fleet is emptied
//! only on purpose (`allowEmptyFleet`). docs/configuration.md, "Hot reload".

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{eventually, validating, webhook, Fleet, MockWebhook, TestGateway};

/// Longer than a poll (2 s) plus the settle time: a reload, if any, has happened by then. The
/// tests wait for events (a refusal counted, a fleet served) at most this long.
const A_RELOAD: Duration = Duration::from_secs(4);

/// Rewrites `path` in place (truncate, then write), as `echo … > file` or a careless editor
/// does, optionally pausing half-way.
fn write_in_place(path: &std::path::Path, text: &str, pause_half_way: Option<Duration>) {
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(path).expect("open in place");
    match pause_half_way {
        Some(pause) => {
            let half = text.len() / 2;
            let half = (0..=half).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            file.write_all(&text.as_bytes()[..half]).unwrap();
            file.flush().unwrap();
            std::thread::sleep(pause);
            file.write_all(&text.as_bytes()[half..]).unwrap();
        }
        None => file.write_all(text.as_bytes()).unwrap(),
    }
}

/// Whether the gateway counts more than `before` refused reloads within [`A_RELOAD`]: the
/// event a test about a refused write waits for.
async fn refused_after(gateway: &TestGateway, before: u64) -> bool {
    eventually(A_RELOAD, || async { reload_failures(gateway).await > before }).await
}

async fn reload_failures(gateway: &TestGateway) -> u64 {
    let (_, text) = gateway.admin_get("/metrics").await;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("admission_gateway_config_reloads_total{result=\"failure\"}")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_emptied_in_place_never_replaces_what_it_held() {
    let deny = MockWebhook::denying("still guarded").spawn().await;
    let gateway = TestGateway::validating([webhook("deny.example.com", &deny)]).await;
    let review = fixtures::review(POD_CREATE);
    let file = gateway.config_dir().join("fleet.yaml");
    // A second file keeps the fleet non-empty: only the emptied file's own rule guards.
    let other = MockWebhook::allowing().spawn().await;
    let extra = Fleet::of([validating("extra", [webhook("other.example.com", &other)])]).yaml();
    std::fs::write(gateway.config_dir().join("extra.yaml"), extra).unwrap();
    assert!(
        eventually(A_RELOAD, || async {
            gateway.validate(&review).await;
            other.calls() > 0
        })
        .await
    );

    let before = reload_failures(&gateway).await;
    write_in_place(&file, "", None);
    assert!(refused_after(&gateway, before).await, "the refusal is counted");
    let answer = gateway.validate(&review).await;
    assert!(!answer.allowed(), "an emptied file must not empty the fleet: {}", answer.body);

    // Whitespace and comments are empty too.
    let before = reload_failures(&gateway).await;
    write_in_place(&file, "# nothing yet\n---\n", None);
    assert!(refused_after(&gateway, before).await, "the refusal is counted");
    assert!(!gateway.validate(&review).await.allowed());

    // The file's real next content is served.
    let allow = MockWebhook::allowing().spawn().await;
    write_in_place(
        &file,
        &Fleet::of([validating("fleet", [webhook("allow.example.com", &allow)])]).yaml(),
        None,
    );
    assert!(eventually(A_RELOAD, || async { gateway.validate(&review).await.allowed() }).await);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_emptied_only_on_purpose() {
    let deny = MockWebhook::denying("still guarded").spawn().await;
    let gateway = TestGateway::validating([webhook("deny.example.com", &deny)]).await;
    let review = fixtures::review(POD_CREATE);

    // Valid, but without a webhook: refused.
    let before = reload_failures(&gateway).await;
    gateway.reconfigure(&Fleet::default().namespace("team-a", &[]));
    assert!(refused_after(&gateway, before).await, "the refusal is counted");
    assert!(!gateway.validate(&review).await.allowed(), "no webhooks left is refused by default");

    // Said on purpose: served.
    gateway.reconfigure(&Fleet::default().settings(json!({"allowEmptyFleet": true})));
    assert!(eventually(A_RELOAD, || async { gateway.validate(&review).await.allowed() }).await);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternating_valid_invalid_empty_and_torn_writes_under_load_give_no_wrong_answer() {
    let deny_a = MockWebhook::denying("policy a").spawn().await;
    let deny_b = MockWebhook::denying("policy b").spawn().await;
    let fleet_a = Fleet::of([validating("fleet", [webhook("a.example.com", &deny_a)])]).yaml();
    let fleet_b = Fleet::of([validating("fleet", [webhook("b.example.com", &deny_b)])]).yaml();
    let gateway = Arc::new(TestGateway::validating([webhook("a.example.com", &deny_a)]).await);
    let file = gateway.config_dir().join("fleet.yaml");

    // Reviews flow the whole time; every valid fleet denies, so any allow is a wrong answer.
    let (stop, answers, wrong) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (gateway, stop, answers, wrong) = (gateway.clone(), stop.clone(), answers.clone(), wrong.clone());
        tokio::spawn(async move {
            let review = fixtures::review(POD_CREATE);
            while !stop.load(Ordering::SeqCst) {
                let answer = gateway.validate(&review).await;
                answers.fetch_add(1, Ordering::SeqCst);
                if answer.http_status != 200 || answer.allowed() {
                    wrong.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let writer = tokio::task::spawn_blocking(move || {
        for round in 0..100 {
            let valid = if round % 8 < 4 { &fleet_a } else { &fleet_b };
            match round % 4 {
                0 => write_in_place(&file, valid, None),
                1 => write_in_place(&file, "apiVersion: admissionregistration.k8s.io/v1\nkind: [", None),
                2 => write_in_place(&file, "", None),
                _ => write_in_place(&file, valid, Some(Duration::from_millis(30))),
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        // End on a valid fleet.
        write_in_place(&file, &fleet_b, None);
    });
    writer.await.unwrap();
    // Reviews go on until the last write is served.
    let last_served = eventually(A_RELOAD, || async {
        gateway.validate(&fixtures::review(POD_CREATE)).await.message().contains("policy b")
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    assert!(answers.load(Ordering::SeqCst) > 100, "reviews flowed during the writes");
    assert_eq!(wrong.load(Ordering::SeqCst), 0, "of {} answers", answers.load(Ordering::SeqCst));
    assert!(last_served, "the last write is served within {A_RELOAD:?}");
}
