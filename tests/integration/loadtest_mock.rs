//! A smoke run of the load-test mock webhook fleet (`loadtest/mock_webhook.rs`, the
//! `mock-webhook` example, compiled in here as a module and started in process): every action
//! over HTTPS and plain HTTP, the delay distributions, a refusing port, a few hundred requests,
//! the gateway in front of it, and the stack's floor (`loadtest/passthrough.rs`) in front of it.
//! No timing assertions: timing goals live in `loadtest/`.

#[allow(dead_code)]
#[path = "../../loadtest/mock_webhook.rs"]
mod mock_webhook;
#[allow(dead_code)]
#[path = "../../loadtest/passthrough.rs"]
mod passthrough;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::{json, Value};

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{
    ca, http_client, https_client, loopback_certificate, mutating, validating, webhook_at, Fleet, TestGateway,
};
use mock_webhook::{parse_args, parse_hook, Action, Delay, HookSpec};

const HOOKS: &[&str] = &[
    "/allow=allow",
    "/deny=deny",
    "/label=label:loadtest=yes",
    "/label-slow=label:team/x=a, delay:uniform:1ms..2ms",
    "/labels=labels:3",
    "/exp=delay:exp:1ms",
    "/lognormal=allow,delay:lognormal:1ms..3ms",
    "/error=status:503",
    "/hang=hang",
    "/reset=reset",
];

/// The mock on 127.0.0.1 (HTTPS, HTTP and a refusing port), configured from the command line.
async fn start_mock(dir: &tempfile::TempDir) -> mock_webhook::Running {
    let leaf = loopback_certificate();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    let hooks_file = dir.path().join("hooks.txt");
    std::fs::write(&hooks_file, format!("# the fleet\n\n{}\n", HOOKS[1..].join("\n"))).unwrap();
    let mut args: Vec<String> =
        ["--listen", "127.0.0.1:0", "--listen-http", "127.0.0.1:0", "--refuse", "127.0.0.1:0"]
            .map(String::from)
            .to_vec();
    args.extend([
        "--tls-cert".into(),
        cert.display().to_string(),
        "--tls-key".into(),
        key.display().to_string(),
    ]);
    args.extend(["--hook".into(), HOOKS[0].into(), "--hooks".into(), hooks_file.display().to_string()]);
    let options = parse_args(args).expect("valid arguments");
    assert_eq!(options.hooks.len(), HOOKS.len());
    mock_webhook::start(&options).await.expect("the mock starts")
}

/// POSTs `body` to `url`; the status and body, or the transport error.
async fn post(url: &str, body: &Value) -> Result<(u16, Value), String> {
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = if url.starts_with("https:") {
        https_client(ca()).request(request).await
    } else {
        http_client().request(request).await
    }
    .map_err(|e| format!("{e:?}"))?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)))))
}

fn patch_of(answer: &Value) -> Value {
    use base64::Engine as _;
    let encoded = answer["response"]["patch"].as_str().expect("a patch");
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(encoded).unwrap()).unwrap()
}

#[test]
fn hook_specs_parse() {
    assert_eq!(
        parse_hook("/a=label:team=a,delay:20ms").unwrap(),
        HookSpec {
            path: "/a".into(),
            action: Action::Label { key: "team".into(), value: "a".into() },
            delay: Some(Delay::Fixed(Duration::from_millis(20))),
        }
    );
    assert_eq!(parse_hook("*=").unwrap().action, Action::Allow);
    assert_eq!(parse_hook("/e=status:500").unwrap().action, Action::Status(500));
    assert_eq!(
        parse_hook("/u=delay:uniform:1.5ms..2s").unwrap().delay,
        Some(Delay::Uniform(Duration::from_micros(1500), Duration::from_secs(2)))
    );
    for bad in [
        "nopath",
        "a=allow",
        "/a=allow,deny",
        "/a=delay:5",
        "/a=status:1000",
        "/a=frobnicate",
        "/a=delay:uniform:2ms..1ms",
    ] {
        assert!(parse_hook(bad).is_err(), "{bad} should be refused");
    }
    assert!(parse_args(["--hook".to_string(), "/a=allow".into()]).is_err(), "no listener");
    let lognormal = Delay::LogNormal { p50: Duration::from_millis(1), p99: Duration::from_millis(10) };
    let exponential = Delay::Exponential { mean: Duration::from_millis(1) };
    for _ in 0..1000 {
        assert!(lognormal.sample() > Duration::ZERO);
        let uniform = Delay::Uniform(Duration::from_millis(1), Duration::from_millis(2)).sample();
        assert!((Duration::from_millis(1)..=Duration::from_millis(2)).contains(&uniform));
        let _ = exponential.sample();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_over_https_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let mock = start_mock(&dir).await;
    let review = fixtures::review(POD_CREATE);
    let uid = fixtures::uid(POD_CREATE);
    for base in [format!("https://{}", mock.https.unwrap()), format!("http://{}", mock.http.unwrap())] {
        let (status, answer) = post(&format!("{base}/allow?timeout=10s"), &review).await.unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["response"], json!({"uid": uid, "allowed": true}));
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");

        let (_, answer) = post(&format!("{base}/deny"), &review).await.unwrap();
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(
            answer["response"]["status"],
            json!({"code": 403, "message": "denied by mock-webhook /deny"})
        );

        let (_, answer) = post(&format!("{base}/label"), &review).await.unwrap();
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        assert_eq!(
            patch_of(&answer),
            json!([{"op": "add", "path": "/metadata/labels/loadtest", "value": "yes"}])
        );
        let mut unlabelled = review.clone();
        unlabelled["request"]["object"]["metadata"].as_object_mut().unwrap().remove("labels");
        let (_, answer) = post(&format!("{base}/label-slow"), &unlabelled).await.unwrap();
        assert_eq!(
            patch_of(&answer),
            json!([{"op": "add", "path": "/metadata/labels", "value": {"team/x": "a"}}])
        );

        let (_, answer) = post(&format!("{base}/labels"), &review).await.unwrap();
        let adds: Vec<Value> = (0..3)
            .map(|i| json!({"op": "add", "path": format!("/metadata/labels/many-{i}"), "value": i.to_string()}))
            .collect();
        assert_eq!(patch_of(&answer), json!(adds));
        let (_, answer) = post(&format!("{base}/labels"), &unlabelled).await.unwrap();
        assert_eq!(patch_of(&answer)[0], json!({"op": "add", "path": "/metadata/labels", "value": {}}));
        assert_eq!(patch_of(&answer).as_array().unwrap()[1..], adds[..]);

        let (status, _) = post(&format!("{base}/error"), &review).await.unwrap();
        assert_eq!(status, 503);
        let (status, _) = post(&format!("{base}/nowhere"), &review).await.unwrap();
        assert_eq!(status, 404);
        assert!(post(&format!("{base}/reset"), &review).await.is_err(), "reset answers nothing");
        let hang =
            tokio::time::timeout(Duration::from_millis(300), post(&format!("{base}/hang"), &review)).await;
        assert!(hang.is_err(), "hang answers nothing: {hang:?}");
    }
    let refused = tokio::net::TcpStream::connect(mock.refusing.unwrap()).await;
    assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);

    // A few hundred concurrent requests, half over each listener.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..240 {
        let address: SocketAddr = if i % 2 == 0 { mock.https.unwrap() } else { mock.http.unwrap() };
        let scheme = if i % 2 == 0 { "https" } else { "http" };
        let path = ["/label-slow", "/exp", "/lognormal"][i % 3];
        let review = review.clone();
        calls.spawn(async move { post(&format!("{scheme}://{address}{path}"), &review).await });
    }
    while let Some(result) = calls.join_next().await {
        let (status, answer) = result.unwrap().unwrap();
        assert_eq!((status, &answer["response"]["allowed"]), (200, &json!(true)), "{answer}");
    }
    let (status, stats) = {
        let request = http::Request::get(format!("http://{}/_stats", mock.http.unwrap()))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = http_client().request(request).await.unwrap();
        let status = response.status().as_u16();
        (
            status,
            String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap(),
        )
    };
    assert_eq!(status, 200);
    // PATH CALLS IN_FLIGHT; a hung call may still be in flight.
    for line in ["/allow 2 0", "/label-slow 82 0", "/exp 80 0", "/lognormal 80 0", "/error 2 0", "/reset 2 0"]
    {
        assert!(stats.lines().any(|l| l == line), "{line:?} in\n{stats}");
    }
    assert!(stats.lines().any(|l| l.starts_with("/hang 2 ")), "{stats}");
    assert_eq!(mock.fleet.calls().len(), HOOKS.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_in_front_of_the_mock_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let mock = start_mock(&dir).await;
    let at = |path: &str| format!("https://{}{path}", mock.https.unwrap());
    let dead = format!("https://{}/allow", mock.refusing.unwrap());
    let gateway = TestGateway::start(
        Fleet::of([
            mutating(
                "mutating",
                [
                    webhook_at("label.loadtest.example.com", &at("/label")),
                    webhook_at("slow.loadtest.example.com", &at("/label-slow")),
                ],
            ),
            validating(
                "validating",
                [
                    webhook_at("allow.loadtest.example.com", &at("/allow")),
                    webhook_at("error.loadtest.example.com", &at("/error")).ignore(),
                    webhook_at("reset.loadtest.example.com", &at("/reset")).ignore(),
                    webhook_at("dead.loadtest.example.com", &dead).ignore(),
                ],
            ),
        ])
        // Every call made, however often `/reset` fails (fast failure has tests of its own).
        .settings(serde_json::json!({"ejectAfterFailures": 0})),
    )
    .await;
    let review = fixtures::review(POD_CREATE);
    for _ in 0..20 {
        let answer = gateway.review("/mutate?timeout=10s", &review).await;
        assert!(answer.allowed());
        let patched = answer.patched(&fixtures::object(POD_CREATE));
        assert_eq!(patched["metadata"]["labels"]["loadtest"], "yes");
        assert_eq!(patched["metadata"]["labels"]["team/x"], "a");
        let answer = gateway.review("/validate?timeout=10s", &review).await;
        assert!(answer.allowed(), "{}", answer.body);
    }
    let calls = mock.fleet.calls();
    for path in ["/label", "/label-slow", "/allow", "/error", "/reset"] {
        let count = calls.iter().find(|(p, _, _)| p == path).map_or(0, |(_, c, _)| *c);
        assert_eq!(count, 20, "{path}: {calls:?}");
    }
}

/// The stack's floor passes the mock's answers through unread: status and body, whatever the
/// webhook says, on every serving thread; an upstream that refuses connections is a 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_passthrough_forwards_reviews_and_answers_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mock = start_mock(&dir).await;
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca().cert_pem).unwrap();
    let options = |upstream: SocketAddr, codec: bool| {
        let mut args = vec![
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--tls-cert".to_owned(),
            dir.path().join("tls.crt").display().to_string(),
            "--tls-key".to_owned(),
            dir.path().join("tls.key").display().to_string(),
            "--upstream".to_owned(),
            format!("https://{upstream}"),
            "--ca".to_owned(),
            ca_file.display().to_string(),
            "--threads".to_owned(),
            "2".to_owned(),
        ];
        if codec {
            args.push("--codec".to_owned());
        }
        passthrough::parse_args(args).expect("valid arguments")
    };
    let proxy = passthrough::start(&options(mock.https.unwrap(), false)).expect("the pass-through starts");
    let review = fixtures::review(POD_CREATE);
    let (direct, through) =
        (format!("https://{}", mock.https.unwrap()), format!("https://{}", proxy.address));
    for path in ["/allow?timeout=10s", "/deny", "/label", "/error"] {
        let expected = post(&format!("{direct}{path}"), &review).await.unwrap();
        // Connections spread over both threads: several requests each.
        for _ in 0..10 {
            assert_eq!(post(&format!("{through}{path}"), &review).await.unwrap(), expected, "{path}");
        }
    }
    let calls = mock.fleet.calls();
    for path in ["/allow", "/deny", "/label", "/error"] {
        let count = calls.iter().find(|(p, _, _)| p == path).map_or(0, |(_, c, _)| *c);
        assert_eq!(count, 11, "{path}: {calls:?}");
    }

    // With `--codec` the review and the answer are decoded and written anew: the caller gets
    // its own uid back with the webhook's verdict, and a body that is no review is a 400.
    let codec = passthrough::start(&options(mock.https.unwrap(), true)).expect("the pass-through starts");
    let uid = fixtures::uid(POD_CREATE);
    for (path, allowed) in [("/allow", true), ("/deny", false)] {
        let (status, answer) = post(&format!("https://{}{path}", codec.address), &review).await.unwrap();
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{path}: {answer}");
        assert_eq!(answer["response"], json!({"uid": uid, "allowed": allowed}), "{path}: {answer}");
    }
    let (status, answer) =
        post(&format!("https://{}/allow", codec.address), &json!({"kind": 1})).await.unwrap();
    assert_eq!(status, 400, "{answer}");
    assert!(answer.as_str().is_some_and(|text| text.starts_with("decoding the review:")), "{answer}");
    assert_eq!(mock.fleet.calls().iter().find(|(p, _, _)| p == "/allow").map(|(_, c, _)| *c), Some(12));

    let dead = passthrough::start(&options(mock.refusing.unwrap(), false)).expect("the pass-through starts");
    let (status, _) = post(&format!("https://{}/allow", dead.address), &review).await.unwrap();
    assert_eq!(status, 502);

    let bad = ["--listen", "127.0.0.1:0", "--upstream", "https://127.0.0.1:1/path"].map(String::from);
    assert!(passthrough::parse_args(bad).unwrap_err().to_string().contains("expected https://HOST:PORT"));
}
