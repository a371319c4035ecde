//! A real Prometheus (Debian's package, provisioned on first use: `support::provision`) scrapes the gateway's
//! `/metrics`: the families parse as Prometheus reads them, PromQL over its HTTP API returns
//! the series a scripted set of reviews produced, and every query of the Grafana dashboard in
//! `deploy/grafana/admission-gateway.json` is valid PromQL with data behind its main panels.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{
    eventually, http_client, mutating, validating, webhook, Fleet, MockWebhook, TestGateway,
};

/// `prometheus` on a free loopback port scraping `target` every second; killed when dropped.
struct Prometheus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Self {
        let binary = crate::support::provision::prometheus();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: admission-gateway\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = crate::support::free_port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        Prometheus { child, address, _dir: dir }
    }

    /// An instant PromQL query: Prometheus's `data` on success, its error text otherwise.
    async fn query(&self, promql: &str) -> Result<Value, String> {
        let body = format!("query={}", urlencode(promql));
        let request = http::Request::post(format!("http://{}/api/v1/query", self.address))
            .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let (_, text) = send(&http_client(), request).await?;
        let answer: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if answer["status"] == "success" {
            Ok(answer["data"].clone())
        } else {
            Err(format!("{}: {}", answer["errorType"], answer["error"]))
        }
    }

    /// The value of a query that returns one sample, once it does (up to 30 s).
    async fn value(&self, promql: &str) -> f64 {
        let mut last = Value::Null;
        for _ in 0..60 {
            if let Ok(data) = self.query(promql).await {
                if let Some(value) = data["result"][0]["value"][1].as_str() {
                    return value.parse().unwrap();
                }
                last = data;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("{promql}: no sample within 30 s: {last}");
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_api_servers_families_and_the_dashboard_queries_work() {
    let allow = MockWebhook::allowing().spawn().await;
    let deny = MockWebhook::denying("no").spawn().await;
    let label =
        MockWebhook::patching(json!([{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}]))
            .spawn()
            .await;
    let gateway = TestGateway::start(Fleet::of([
        mutating("m", [webhook("label.prometheus.example.com", &label)]),
        validating(
            "v",
            [webhook("allow.prometheus.example.com", &allow), webhook("deny.prometheus.example.com", &deny)],
        ),
        validating("s", [webhook("shadow.prometheus.example.com", &deny)])
            .annotate("admission-gateway/mode", "shadow"),
    ]))
    .await;
    let prometheus = Prometheus::start(&gateway.metrics_address().to_string());

    for _ in 0..3 {
        assert!(gateway.mutate(&fixtures::review(POD_CREATE)).await.allowed());
        assert!(!gateway.validate(&fixtures::review(POD_CREATE)).await.allowed());
    }
    assert!(eventually(Duration::from_secs(5), || async { deny.calls() == 6 }).await, "shadow calls made");

    // The target is up: every line of /metrics parsed.
    assert_eq!(prometheus.value(r#"up{job="admission-gateway"}"#).await, 1.0);
    let requests = prometheus
        .value(r#"sum(apiserver_admission_webhook_request_total{name="deny.prometheus.example.com", type="validating", operation="CREATE", code="400", rejected="true"})"#)
        .await;
    assert_eq!(requests, 3.0);
    let mutated = prometheus
        .value(r#"sum(apiserver_admission_webhook_admission_duration_seconds_count{name="label.prometheus.example.com", type="admit", rejected="false"})"#)
        .await;
    assert_eq!(mutated, 3.0);
    let rejections = prometheus
        .value(r#"sum(apiserver_admission_webhook_rejection_count{name="deny.prometheus.example.com", error_type="no_error", rejection_code="400"})"#)
        .await;
    assert_eq!(rejections, 3.0);
    let shadow = prometheus
        .value(r#"sum(admission_gateway_shadow_results_total{webhook="shadow.prometheus.example.com", result="agree"})"#)
        .await;
    assert_eq!(shadow, 3.0, "the shadow denial agrees with the denied decision");
    let p99 = prometheus
        .value(r#"histogram_quantile(0.99, sum by (le) (apiserver_admission_webhook_admission_duration_seconds_bucket{name="allow.prometheus.example.com"}))"#)
        .await;
    assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99}");

    // Every dashboard query is valid PromQL here; the per-webhook panels have data once a
    // rate has two scrapes to work with.
    let rates = eventually(Duration::from_secs(15), || async {
        prometheus
            .query("rate(apiserver_admission_webhook_request_total[1m])")
            .await
            .is_ok_and(|data| data["result"].as_array().is_some_and(|result| !result.is_empty()))
    })
    .await;
    assert!(rates, "no rate within 15 s");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/grafana/admission-gateway.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut with_data = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            // Grafana's variables, as Grafana would fill them in.
            let promql = expr.replace("$__rate_interval", "1m").replace("$webhook", ".*");
            let data =
                prometheus.query(&promql).await.unwrap_or_else(|e| panic!("{}: {expr}: {e}", panel["title"]));
            if !data["result"].as_array().unwrap().is_empty() {
                with_data.push(panel["title"].as_str().unwrap().to_owned());
            }
        }
    }
    for title in [
        "Webhook calls per second, by HTTP code",
        "Rejections per second, by webhook and cause",
        "Shadow and canary results per second",
        "Configuration generation",
    ] {
        assert!(
            with_data.iter().any(|t| t == title),
            "{title:?} has no data; panels with data: {with_data:?}"
        );
    }
}
