//! Webhook server certificates, trusted and refused as kube-apiserver's Go client does
//! (`src/crypto/x509/verify.go`): a self-signed certificate that is its own `caBundle` is the
//! whole chain, `basicConstraints CA:TRUE` or not, once its validity, its IP/DNS SANs and its
//! extended key usage pass; refusals read as crypto/tls words them.

use std::process::Command;

use admission_gateway::certs::{self, Ca, Leaf};
use rcgen::ExtendedKeyUsagePurpose;

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::mock_webhook::Mock;
use crate::support::{ca, server_tls_with_foreign_key, webhook, Answer, MockWebhook, TestGateway};

const HOOK: &str = "self-signed.example.com";

/// A certificate made by the real `openssl req -x509` with its defaults, for this
/// subjectAltName. openssl is provisioned on first use (`support::provision::openssl`); a test
/// that cannot have it fails naming it, never skips.
fn openssl_self_signed(subject_alt_name: &str) -> Leaf {
    let openssl = crate::support::provision::openssl();
    let dir = tempfile::tempdir().expect("temporary directory");
    let run = |args: &[&str]| {
        let output = Command::new(openssl)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{} does not run: {e}", openssl.display()));
        assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-days",
        "30",
        "-subj",
        "/CN=webhook.default.svc",
        "-addext",
        &format!("subjectAltName={subject_alt_name}"),
    ]);
    let text = run(&["x509", "-in", "cert.pem", "-noout", "-text"]);
    assert!(text.contains("CA:TRUE"), "openssl's default is a CA certificate:\n{text}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("openssl output");
    Leaf { cert_pem: read("cert.pem"), key_pem: read("key.pem") }
}

/// An rcgen self-signed CA:TRUE certificate for 127.0.0.1, otherwise as `customize` makes it.
fn rcgen_self_signed(names: &[&str], customize: impl FnOnce(&mut rcgen::CertificateParams)) -> Leaf {
    certs::self_signed(names, customize).expect("self-signed certificate")
}

/// A validating webhook behind `mock` trusting `ca_bundle`, called once.
async fn call(mock: &Mock, ca_bundle: &str) -> Answer {
    let gateway = TestGateway::validating([webhook(HOOK, mock).ca_bundle(ca_bundle)]).await;
    let answer = gateway.validate(&fixtures::review(POD_CREATE)).await;
    gateway.shutdown().await;
    answer
}

/// The API server's message for a call that failed with `reason`.
fn failed(mock: &Mock, reason: &str) -> String {
    format!(
        r#"Internal error occurred: failed calling webhook "{HOOK}": failed to call webhook: Post "{}?timeout=10s": {reason}"#,
        mock.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_made_by_openssl_is_trusted_as_its_own_ca_bundle() {
    let leaf = openssl_self_signed("IP:127.0.0.1");
    let mock = MockWebhook::denying("reached").spawn_serving(&leaf).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    assert_eq!(answer.message(), format!(r#"admission webhook "{HOOK}" denied the request: reached"#));
    assert_eq!(mock.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_ca_certificate_made_by_rcgen_is_trusted_as_its_own_ca_bundle() {
    let leaf = rcgen_self_signed(&["127.0.0.1"], |_| {});
    let mock = MockWebhook::denying("reached").spawn_serving(&leaf).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    assert_eq!(answer.message(), format!(r#"admission webhook "{HOOK}" denied the request: reached"#));
    assert_eq!(mock.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_for_another_address_is_refused_with_gos_hostname_error() {
    let leaf = rcgen_self_signed(&["127.0.0.2", "webhook.default.svc"], |_| {});
    let mock = MockWebhook::allowing().spawn_serving(&leaf).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    // For an IP address Go lists the IP SANs only.
    assert_eq!(
        answer.message(),
        failed(
            &mock,
            "tls: failed to verify certificate: x509: certificate is valid for 127.0.0.2, not 127.0.0.1"
        )
    );
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_self_signed_certificate_is_refused_with_gos_validity_error() {
    let leaf = rcgen_self_signed(&["127.0.0.1"], |params| {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let mock = MockWebhook::allowing().spawn_serving(&leaf).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    let message = answer.message();
    let prefix = failed(
        &mock,
        "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time ",
    );
    let now = message
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(" is after 2021-01-01T00:00:00Z"))
        .unwrap_or_else(|| panic!("{message}"));
    // RFC 3339, in UTC: 2026-05-01T12:00:00Z.
    assert!(now.len() == 20 && now.starts_with("20") && now.ends_with('Z'), "{message}");
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_for_clients_only_is_refused_with_gos_key_usage_error() {
    let leaf = rcgen_self_signed(&["127.0.0.1"], |params| {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    });
    let mock = MockWebhook::allowing().spawn_serving(&leaf).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    assert_eq!(
        answer.message(),
        failed(
            &mock,
            "tls: failed to verify certificate: x509: certificate specifies an incompatible key usage"
        )
    );
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_an_unrelated_ca_is_signed_by_an_unknown_authority() {
    let unrelated = Ca::new("an unrelated CA").unwrap().issue(&["127.0.0.1"]).unwrap();
    let mock = MockWebhook::allowing().spawn_serving(&unrelated).await;

    let answer = call(&mock, &ca().ca_bundle()).await;

    assert_eq!(
        answer.message(),
        failed(&mock, "tls: failed to verify certificate: x509: certificate signed by unknown authority")
    );
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_that_is_not_the_ca_bundle_is_signed_by_an_unknown_authority() {
    // A webhook whose certificate was regenerated while its caBundle still holds the old one.
    let old = rcgen_self_signed(&["127.0.0.1"], |_| {});
    let new = rcgen_self_signed(&["127.0.0.1"], |_| {});
    let mock = MockWebhook::allowing().spawn_serving(&new).await;

    let answer = call(&mock, &old.ca_bundle()).await;

    assert_eq!(
        answer.message(),
        failed(&mock, "tls: failed to verify certificate: x509: certificate signed by unknown authority")
    );
    assert_eq!(mock.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_the_ca_bundle_certificate_without_its_key_fails_the_handshake_signature() {
    let leaf = rcgen_self_signed(&["127.0.0.1"], |_| {});
    let impostor_key = rcgen_self_signed(&["127.0.0.1"], |_| {});
    let tls = server_tls_with_foreign_key(&leaf, &impostor_key, &[b"http/1.1"]);
    let mock = MockWebhook::allowing().spawn_with_tls(tls).await;

    let answer = call(&mock, &leaf.ca_bundle()).await;

    // rcgen's keys are ECDSA P-256.
    assert_eq!(
        answer.message(),
        failed(&mock, "tls: invalid signature by the server certificate: ECDSA verification failure")
    );
    assert_eq!(mock.calls(), 0);
}
