//! `clientConfig.caBundle` as real manifests write it: base64 wrapped over several lines, which
//! the API server decodes as Go's `base64.StdEncoding` does (line breaks skipped), and which
//! must hold at least one PEM certificate.

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::{ca, validating, webhook, webhook_at, Fleet, MockWebhook, TestGateway};

/// `encoded` as `base64 -w 76` writes it, each line ended by `line_break`.
fn wrapped(encoded: &str, line_break: &str) -> String {
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
        .collect();
    assert!(lines.len() > 1, "the test CA's bundle spans several lines");
    lines.join(line_break) + line_break
}

/// A validating webhook trusting the test CA through a wrapped `caBundle` is called over TLS.
async fn check_wrapped_bundle_is_trusted(line_break: &str) {
    let mock = MockWebhook::allowing().spawn().await;
    let bundle = wrapped(&ca().ca_bundle(), line_break);
    let gateway = TestGateway::validating([webhook("wrapped.example.com", &mock).ca_bundle(&bundle)]).await;

    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;

    assert!(answer.allowed(), "{}", answer.body);
    assert_eq!(mock.calls(), 1, "the webhook is called: its certificate is trusted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_bundle_wrapped_with_line_feeds_trusts_the_webhook() {
    check_wrapped_bundle_is_trusted("\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_bundle_wrapped_with_crlf_trusts_the_webhook() {
    check_wrapped_bundle_is_trusted("\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_bundle_that_is_not_a_bundle_of_certificates_is_refused_at_load() {
    use base64::Engine as _;
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let no_pem = "unable to load root certificates: unable to parse bytes as PEM block";
    let cases = [
        ("abc*".to_owned(), "illegal base64 data at input byte 3"),
        ("Zm9v\nYmE\n".to_owned(), "illegal base64 data at input byte 6"),
        (encode("not a PEM bundle"), no_pem),
        (
            encode("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"),
            no_pem,
        ),
    ];
    for (bundle, detail) in cases {
        let dir = tempfile::tempdir().expect("temporary directory");
        let file = dir.path().join("fleet.yaml");
        let fleet = Fleet::of([validating(
            "fleet",
            [
                webhook_at("good.example.com", "https://127.0.0.1:8443/"),
                webhook_at("bad.example.com", "https://127.0.0.1:8443/").ca_bundle(&bundle),
            ],
        )]);
        std::fs::write(&file, fleet.yaml()).expect("write the manifest");

        let checked = crate::support::binary::run(&["check", "--config", &file.display().to_string()]).await;

        assert_eq!(checked.status.code(), Some(1), "{bundle:?} loads");
        let stdout = String::from_utf8_lossy(&checked.stdout);
        let problems: Vec<&str> = stdout.lines().filter(|line| line.starts_with("error: ")).collect();
        assert_eq!(
            problems,
            [format!(
                "error: {}: ValidatingWebhookConfiguration \"fleet\": webhook \"bad.example.com\": \
                 webhooks[1].clientConfig.caBundle: Invalid value: \"<value omitted>\": {detail}",
                file.display()
            )],
            "{bundle:?}"
        );
    }
}
