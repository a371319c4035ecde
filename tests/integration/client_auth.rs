//! `serve --client-ca`: only callers presenting a client certificate issued by that CA (the API
//! server, given one in its admission configuration) reach the admission endpoints.

use std::sync::Arc;

use admission_gateway::certs::{Ca, Leaf};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::support::fixtures::{self, POD_CREATE};
use crate::support::gateway::send;
use crate::support::{ca, client_tls, validating, webhook, Fleet, MockWebhook, TestGateway};

/// Trusts the test CA; presents `identity` when given.
fn client(identity: Option<&Leaf>) -> crate::support::HttpsClient {
    let tls = match identity {
        None => client_tls(ca()),
        Some(leaf) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca().cert_pem.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            let chain = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .unwrap()
        }
    };
    let https =
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
    hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https)
}

async fn review(
    gateway: &TestGateway,
    client: &crate::support::HttpsClient,
) -> Result<(u16, String), String> {
    let request = http::Request::post(format!("https://{}/validate", gateway.address()))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(fixtures::review(POD_CREATE).to_string())))
        .unwrap();
    send(client, request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_clients_with_a_certificate_from_the_client_ca_are_served() {
    let allow = MockWebhook::allowing().spawn().await;
    let callers = Ca::new("API server client CA").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, &callers.cert_pem).unwrap();
    let fleet = Fleet::of([validating("fleet", [webhook("allow.example.com", &allow)])]);
    let gateway = TestGateway::start_with(fleet, |options| options.client_ca = Some(client_ca)).await;

    let apiserver = callers.issue(&["kube-apiserver"]).unwrap();
    let (status, body) = review(&gateway, &client(Some(&apiserver))).await.expect("served");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""allowed":true"#), "{body}");

    let anonymous = review(&gateway, &client(None)).await;
    assert!(anonymous.is_err(), "no client certificate: refused in the handshake, got {anonymous:?}");
    let stranger = Ca::new("someone else").unwrap().issue(&["kube-apiserver"]).unwrap();
    let foreign = review(&gateway, &client(Some(&stranger))).await;
    assert!(foreign.is_err(), "a certificate from another CA: refused, got {foreign:?}");
    assert_eq!(allow.calls(), 1, "only the authenticated review reached the fleet");
    gateway.shutdown().await;
}
