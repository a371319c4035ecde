use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

use super::*;

fn server_name(host: &str) -> ServerName<'static> {
    ServerName::try_from(host.to_owned()).unwrap()
}

/// 2025-01-01T00:00:00Z.
const NOW: u64 = 1_735_689_600;

fn certificate(dns: &[&str], ips: &[&str]) -> Certificate {
    Certificate {
        not_before: 0,
        not_after: i64::MAX,
        has_san_extension: !dns.is_empty() || !ips.is_empty(),
        dns_names: dns.iter().map(|n| n.to_string()).collect(),
        ip_addresses: ips.iter().map(|ip| x509::canonical_ip(ip.parse().unwrap())).collect(),
        ..Certificate::default()
    }
}

fn hostname(leaf: &Certificate, host: &str) -> Result<(), String> {
    verify_hostname(leaf, &server_name(host)).map_err(|e| e.to_string())
}

#[test]
fn hostnames_match_and_fail_as_in_go() {
    let ips = certificate(&["webhook.example.com"], &["10.0.0.1", "::1", "::ffff:127.0.0.1"]);
    assert_eq!(hostname(&ips, "127.0.0.1"), Ok(()), "an IPv4-mapped SAN is the IPv4 address");
    assert_eq!(hostname(&ips, "::1"), Ok(()));
    assert_eq!(
        hostname(&ips, "10.0.0.2"),
        Err("x509: certificate is valid for 10.0.0.1, ::1, 127.0.0.1, not 10.0.0.2".into())
    );
    let names = certificate(&["a.example.com", "*.other.com"], &[]);
    assert_eq!(
        hostname(&names, "127.0.0.1"),
        Err("x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs".into())
    );
    assert_eq!(hostname(&names, "A.Example.COM"), Ok(()));
    assert_eq!(hostname(&names, "a.example.com."), Ok(()));
    assert_eq!(hostname(&names, "x.other.com"), Ok(()));
    assert_eq!(
        hostname(&names, "x.y.other.com"),
        Err("x509: certificate is valid for a.example.com, *.other.com, not x.y.other.com".into())
    );
    assert_eq!(
        hostname(&certificate(&[], &["10.0.0.1"]), "webhook.default.svc"),
        Err("x509: certificate is not valid for any names, but wanted to match webhook.default.svc".into())
    );
    let legacy = Certificate { common_name: Some("webhook.default.svc".into()), ..certificate(&[], &[]) };
    assert_eq!(
        hostname(&legacy, "webhook.default.svc"),
        Err("x509: certificate relies on legacy Common Name field, use SANs instead".into())
    );
}

#[test]
fn a_certificate_in_the_pool_gets_gos_leaf_checks_in_gos_order() {
    let pooled = |leaf: &Certificate, host: &str| {
        WebhookVerifier::verify_pooled(
            leaf,
            &server_name(host),
            UnixTime::since_unix_epoch(Duration::from_secs(NOW)),
        )
        .map_err(|e| e.to_string())
    };
    let leaf = certificate(&[], &["127.0.0.1"]);
    assert_eq!(pooled(&leaf, "127.0.0.1"), Ok(()));
    let with_usages = |oids: &[&[u8]]| Certificate {
        ext_key_usages: oids.iter().map(|oid| oid.to_vec()).collect(),
        ..leaf.clone()
    };
    let client_auth: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
    let unknown: &[u8] = &[0x2a, 0x03];
    assert_eq!(pooled(&with_usages(&[client_auth, x509::OID_SERVER_AUTH]), "127.0.0.1"), Ok(()));
    assert_eq!(pooled(&with_usages(&[x509::OID_ANY_EXTENDED_KEY_USAGE]), "127.0.0.1"), Ok(()));
    for usages in [&[client_auth][..], &[unknown]] {
        assert_eq!(
            pooled(&with_usages(usages), "127.0.0.1"),
            Err("x509: certificate specifies an incompatible key usage".into())
        );
    }
    // Validity before the name, the name before the key usage, a critical extension first.
    let expired = Certificate { not_after: 1_609_459_200, ..with_usages(&[client_auth]) };
    let expiry = "x509: certificate has expired or is not yet valid: current time 2025-01-01T00:00:00Z is after 2021-01-01T00:00:00Z";
    assert_eq!(pooled(&expired, "127.0.0.2"), Err(expiry.into()));
    assert_eq!(
        pooled(&Certificate { not_before: 1_767_225_600, ..leaf.clone() }, "127.0.0.1"),
        Err("x509: certificate has expired or is not yet valid: current time 2025-01-01T00:00:00Z is before 2026-01-01T00:00:00Z".into())
    );
    assert_eq!(
        pooled(&with_usages(&[client_auth]), "127.0.0.2"),
        Err("x509: certificate is valid for 127.0.0.1, not 127.0.0.2".into())
    );
    assert_eq!(
        pooled(&Certificate { unhandled_critical_extension: true, ..expired }, "127.0.0.2"),
        Err("x509: unhandled critical extension".into())
    );
}

/// A verifier trusting `bundle`, and what it says of `presented` for 127.0.0.1 at [`NOW`].
fn verdict(bundle: &[&rcgen::Certificate], presented: &rcgen::Certificate) -> Result<(), String> {
    let mut roots = RootCertStore::empty();
    let mut pool = HashSet::new();
    for cert in bundle {
        roots.add(cert.der().clone()).unwrap();
        pool.insert(cert.der().to_vec());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebhookVerifier::new(Arc::new(roots), Arc::new(pool), provider).unwrap();
    let now = UnixTime::since_unix_epoch(Duration::from_secs(NOW));
    verifier
        .verify_server_cert(presented.der(), &[], &server_name("127.0.0.1"), &[], now)
        .map(|_| ())
        .map_err(|error| match error {
            rustls::Error::InvalidCertificate(error) => Refusal::from_certificate_error(&error).to_string(),
            other => format!("not a certificate error: {other:?}"),
        })
}

fn params(names: &[&str], customize: impl FnOnce(&mut CertificateParams)) -> CertificateParams {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(2026, 1, 1);
    customize(&mut params);
    params
}

#[test]
fn verdicts_on_pooled_and_chained_certificates() {
    let ca_key = KeyPair::generate().unwrap();
    let ca_params = params(&[], |p| p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained));
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let issue = |names: &[&str], customize: fn(&mut CertificateParams)| {
        params(names, customize).signed_by(&KeyPair::generate().unwrap(), &issuer).unwrap()
    };
    let self_signed = |names: &[&str], customize: fn(&mut CertificateParams)| {
        params(names, |p| {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            customize(p);
        })
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
    };
    let failed = |x509: &str| Err(format!("tls: failed to verify certificate: x509: {x509}"));

    // In the pool: Go's rules, where webpki says CaUsedAsEndEntity.
    let pinned = self_signed(&["127.0.0.1"], |_| {});
    assert_eq!(verdict(&[&pinned], &pinned), Ok(()));
    let any_usage =
        self_signed(&["127.0.0.1"], |p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::Any]);
    assert_eq!(verdict(&[&pinned, &any_usage], &any_usage), Ok(()));
    // Not in the pool: webpki decides, in Go's words and Go's order.
    assert_eq!(verdict(&[&ca], &issue(&["127.0.0.1"], |_| {})), Ok(()));
    assert_eq!(
        verdict(&[&pinned], &self_signed(&["127.0.0.1"], |_| {})),
        failed("certificate signed by unknown authority")
    );
    assert_eq!(
        verdict(&[&pinned], &self_signed(&["10.0.0.1"], |_| {})),
        failed("certificate is valid for 10.0.0.1, not 127.0.0.1"),
    );
    assert_eq!(
        verdict(&[&ca], &issue(&["127.0.0.1"], |p| p.not_after = rcgen::date_time_ymd(2024, 6, 1))),
        failed("certificate has expired or is not yet valid: current time 2025-01-01T00:00:00Z is after 2024-06-01T00:00:00Z"),
    );
    assert_eq!(
        verdict(
            &[&ca],
            &issue(&["127.0.0.1"], |p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth])
        ),
        failed("certificate specifies an incompatible key usage"),
    );
    assert_eq!(
        verdict(&[&ca], &issue(&["webhook.example.com"], |_| {})),
        failed("cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs")
    );
}
