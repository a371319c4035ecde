//! The admission listener's serving threads (`serve --threads`, src/server/threads.rs): as many
//! as asked, each answering reviews, all stopping on shutdown.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use crate::support::binary::{run, text, write, Served};
use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{http_client, validating, webhook, Fleet, MockWebhook};

/// The names of the process's threads that serve the admission listener.
fn serving_threads(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| name.strip_prefix("admission-").is_some_and(|n| n.parse::<u16>().is_ok()))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_of_the_threads_asked_for_serves_and_a_review_on_any_connection_is_answered() {
    let allow = MockWebhook::allowing().spawn().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::of([validating("v", [webhook("allow.threads.example.com", &allow)])]);
    let mut served = Served::serve(dir.path(), &fleet, &["--threads", "3", "--drain-delay", "0s"]);
    let serving = served
        .next_line(|line| (line["fields"]["message"] == "serving").then_some(()))
        .await
        .expect("serving within 10 s");
    assert_eq!(serving["fields"]["threads"], 3, "{serving}");
    assert_eq!(serving_threads(served.pid()), ["admission-1", "admission-2", "admission-3"]);

    // Twelve connections at once (a new client each: no connection shared), every review answered.
    let address = serving["fields"]["address"].as_str().unwrap().to_owned();
    let review = fixtures::review(POD_CREATE).to_string();
    let answers = futures_util::future::join_all((0..12).map(|_| {
        let request = http::Request::post(format!("http://{address}/validate"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(review.clone())))
            .unwrap();
        async move { send(&http_client(), request).await }
    }))
    .await;
    for answer in answers {
        let (status, body) = answer.expect("answered");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"allowed\":true"), "{body}");
    }
    assert_eq!(allow.calls(), 12);

    // Its address is in use for another process, SO_REUSEPORT notwithstanding.
    let config = dir.path().join("fleet.yaml").display().to_string();
    let mut second = Served::start(&[
        "serve",
        "--config",
        &config,
        "--insecure-http",
        "--listen",
        &address,
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let said = second.drain_lines(Duration::from_secs(3)).await;
    let exited = crate::support::eventually(Duration::from_secs(5), || {
        let exited = !second.is_running();
        async move { exited }
    })
    .await;
    assert!(exited, "a second process serves the same address: {said:#?}");
    let refusal = format!("cannot listen on {address}: Address already in use");
    assert!(said.iter().any(|line| line.contains(&refusal)), "{said:#?}");

    // SIGTERM: every thread drains and stops, and the process exits cleanly.
    let status =
        tokio::task::spawn_blocking(move || served.terminate(Duration::from_secs(10))).await.unwrap();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[tokio::test]
async fn zero_threads_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "fleet.yaml", &Fleet::of([]).yaml());
    let refused = run(&["serve", "--config", &config, "--insecure-http", "--threads", "0"]).await;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("--threads"), "{}", text(&refused.stderr));
}
