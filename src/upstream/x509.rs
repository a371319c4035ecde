//! The little of a DER certificate that Go's crypto/x509 consults to trust a certificate found
//! in the root pool, and to word its refusals: the validity period, the subject's common name,
//! the subjectAltName DNS names and IP addresses, the extended key usages, and whether a critical
//! extension is one Go does not handle (`src/crypto/x509/parser.go`, `processExtensions`).
//!
//! Not a validator: whatever it cannot read makes [`Certificate::parse`] answer `None`, and the
//! caller then keeps webpki's verdict.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const BOOLEAN: u8 = 0x01;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const NUMERIC_STRING: u8 = 0x12;
const PRINTABLE_STRING: u8 = 0x13;
const T61_STRING: u8 = 0x14;
const IA5_STRING: u8 = 0x16;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const BMP_STRING: u8 = 0x1e;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
/// `[n]` context-specific tags: explicit (constructed) and implicit primitive.
const fn explicit(n: u8) -> u8 {
    0xa0 | n
}
const fn implicit(n: u8) -> u8 {
    0x80 | n
}
/// GeneralName choices Go reads (RFC 5280 §4.2.1.6): rfc822Name, dNSName, URI, iPAddress.
const GENERAL_NAME_EMAIL: u8 = implicit(1);
const GENERAL_NAME_DNS: u8 = implicit(2);
const GENERAL_NAME_URI: u8 = implicit(6);
const GENERAL_NAME_IP: u8 = implicit(7);

/// id-at-commonName, 2.5.4.3.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// id-pe-authorityInfoAccess, 1.3.6.1.5.5.7.1.1.
const OID_AUTHORITY_INFO_ACCESS: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
/// id-kp-serverAuth, 1.3.6.1.5.5.7.3.1.
pub(crate) const OID_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
/// anyExtendedKeyUsage, 2.5.29.37.0.
pub(crate) const OID_ANY_EXTENDED_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25, 0x00];

/// What Go reads of a certificate, for the checks of `Certificate.Verify` on a certificate
/// that is itself in the root pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Certificate {
    /// Seconds since the Unix epoch.
    pub(crate) not_before: i64,
    pub(crate) not_after: i64,
    /// The subject's (last) common name, as Go's `pkix.Name.CommonName`.
    pub(crate) common_name: Option<String>,
    /// Whether a subjectAltName extension is present (`hasSANExtension`).
    pub(crate) has_san_extension: bool,
    pub(crate) dns_names: Vec<String>,
    /// IPv4-mapped IPv6 addresses as IPv4, which is how Go compares and prints them.
    pub(crate) ip_addresses: Vec<IpAddr>,
    /// Every OID of the extendedKeyUsage extension (known and unknown to Go), as DER contents.
    pub(crate) ext_key_usages: Vec<Vec<u8>>,
    /// A critical extension Go does not handle (`UnhandledCriticalExtensions` is not empty).
    pub(crate) unhandled_critical_extension: bool,
}

impl Certificate {
    /// Reads a DER certificate; `None` if it is not one this reader understands.
    pub(crate) fn parse(der: &[u8]) -> Option<Self> {
        let mut certificate = Reader(Reader(der).expect(SEQUENCE)?);
        let mut tbs = Reader(certificate.expect(SEQUENCE)?);
        tbs.optional(explicit(0))?; // version
        tbs.expect(INTEGER)?; // serialNumber
        tbs.expect(SEQUENCE)?; // signature
        tbs.expect(SEQUENCE)?; // issuer
        let mut validity = Reader(tbs.expect(SEQUENCE)?);
        let not_before = time(validity.next()?)?;
        let not_after = time(validity.next()?)?;
        let subject = tbs.expect(SEQUENCE)?;
        tbs.expect(SEQUENCE)?; // subjectPublicKeyInfo
        tbs.optional(implicit(1))?; // issuerUniqueID
        tbs.optional(implicit(2))?; // subjectUniqueID
        let mut parsed =
            Self { not_before, not_after, common_name: common_name(subject)?, ..Self::default() };
        if let Some(extensions) = tbs.optional(explicit(3))? {
            let mut extensions = Reader(Reader(extensions).expect(SEQUENCE)?);
            while !extensions.is_empty() {
                let mut extension = Reader(extensions.expect(SEQUENCE)?);
                let oid = extension.expect(OID)?;
                let critical = match extension.optional(BOOLEAN)? {
                    None | Some([0x00]) => false,
                    Some([0xff]) => true,
                    Some(_) => return None,
                };
                let value = extension.expect(OCTET_STRING)?;
                let handled = parsed.read_extension(oid, value, critical)?;
                if critical && !handled {
                    parsed.unhandled_critical_extension = true;
                }
            }
        }
        Some(parsed)
    }

    /// Reads one extension as Go's `processExtensions` does; whether Go handles it, or `None`
    /// where Go refuses the certificate.
    fn read_extension(&mut self, oid: &[u8], value: &[u8], critical: bool) -> Option<bool> {
        match oid {
            // subjectAltName: unhandled if Go read no name from it.
            [0x55, 0x1d, 0x11] => {
                self.has_san_extension = true;
                let mut names = Reader(Reader(value).expect(SEQUENCE)?);
                let mut any = false;
                while !names.is_empty() {
                    let (tag, name, _) = names.next()?;
                    match tag {
                        GENERAL_NAME_DNS => {
                            self.dns_names.push(ascii(name)?);
                            any = true;
                        }
                        GENERAL_NAME_IP => {
                            self.ip_addresses.push(ip_address(name)?);
                            any = true;
                        }
                        GENERAL_NAME_EMAIL | GENERAL_NAME_URI => {
                            ascii(name)?;
                            any = true;
                        }
                        _ => {}
                    }
                }
                Some(any)
            }
            // extKeyUsage.
            [0x55, 0x1d, 0x25] => {
                let mut usages = Reader(Reader(value).expect(SEQUENCE)?);
                while !usages.is_empty() {
                    self.ext_key_usages.push(usages.expect(OID)?.to_vec());
                }
                Some(true)
            }
            // nameConstraints: unhandled if a subtree names a kind Go does not constrain.
            [0x55, 0x1d, 0x1e] => {
                let mut constraints = Reader(Reader(value).expect(SEQUENCE)?);
                let mut handled = true;
                while !constraints.is_empty() {
                    let (_, subtrees, _) = constraints.next()?;
                    let mut subtrees = Reader(subtrees);
                    while !subtrees.is_empty() {
                        let (tag, _, _) = Reader(subtrees.expect(SEQUENCE)?).next()?;
                        handled &= matches!(
                            tag,
                            GENERAL_NAME_DNS | GENERAL_NAME_IP | GENERAL_NAME_EMAIL | GENERAL_NAME_URI
                        );
                    }
                }
                Some(handled)
            }
            // subjectKeyIdentifier: Go refuses it critical.
            [0x55, 0x1d, 0x0e] => (!critical).then_some(true),
            // keyUsage, basicConstraints, cRLDistributionPoints, certificatePolicies,
            // policyMappings, authorityKeyIdentifier, policyConstraints, inhibitAnyPolicy.
            [0x55, 0x1d, 0x0f | 0x13 | 0x1f | 0x20 | 0x21 | 0x23 | 0x24 | 0x36] => Some(true),
            // Go refuses authorityInfoAccess critical.
            OID_AUTHORITY_INFO_ACCESS => (!critical).then_some(true),
            _ => Some(false),
        }
    }
}

/// The last common name of a Name (`FillFromRDNSequence` keeps the last); `Some(None)` if none.
fn common_name(name: &[u8]) -> Option<Option<String>> {
    let mut found = None;
    let mut rdns = Reader(name);
    while !rdns.is_empty() {
        let mut attributes = Reader(rdns.expect(SET)?);
        while !attributes.is_empty() {
            let mut attribute = Reader(attributes.expect(SEQUENCE)?);
            let oid = attribute.expect(OID)?;
            let (tag, value, _) = attribute.next()?;
            if oid == OID_COMMON_NAME {
                found = Some(match tag {
                    UTF8_STRING | PRINTABLE_STRING | IA5_STRING | NUMERIC_STRING | T61_STRING => {
                        String::from_utf8_lossy(value).into_owned()
                    }
                    BMP_STRING if value.len() % 2 == 0 => String::from_utf16_lossy(
                        &value
                            .chunks_exact(2)
                            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                            .collect::<Vec<_>>(),
                    ),
                    _ => return None,
                });
            }
        }
    }
    Some(found)
}

/// An IA5String as Go accepts it in a subjectAltName: ASCII only.
fn ascii(value: &[u8]) -> Option<String> {
    value.is_ascii().then(|| String::from_utf8_lossy(value).into_owned())
}

fn ip_address(value: &[u8]) -> Option<IpAddr> {
    if let Ok(octets) = <[u8; 4]>::try_from(value) {
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(value).ok()?);
    Some(canonical_ip(IpAddr::V6(v6)))
}

/// Why a PEM bundle does not read, in words (`rustls_pki_types`' own text shows the lines it
/// expected or refused as lists of byte values).
pub(crate) fn pem_problem(error: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { end_marker } => {
            format!("a PEM section has no \"-----END {}-----\" line", String::from_utf8_lossy(end_marker))
        }
        Error::IllegalSectionStart { line } => {
            format!("a PEM section starts with an illegal line {:?}", String::from_utf8_lossy(line))
        }
        Error::Base64Decode(cause) => format!("a PEM section is not valid base64: {cause}"),
        other => other.to_string(),
    }
}

/// Go's `net.IP` treats an IPv4-mapped IPv6 address as the IPv4 address (`Equal`, `String`).
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A UTCTime or GeneralizedTime in its DER form (`…Z`), as seconds since the Unix epoch.
fn time((tag, value, _): (u8, &[u8], &[u8])) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok())?
    };
    let (year, rest) = match tag {
        UTC_TIME if text.len() == 13 => {
            let yy = number(0..2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        GENERALIZED_TIME if text.len() == 15 => (number(0..4)?, 4),
        _ => return None,
    };
    if !text.ends_with('Z') {
        return None;
    }
    let field = |i: usize| number(rest + 2 * i..rest + 2 * i + 2);
    let (month, day, hour, minute, second) = (field(0)?, field(1)?, field(2)?, field(3)?, field(4)?);
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // A day past the month's end comes back as another date.
    if civil_from_days(days) != (year, month, day) {
        return None;
    }
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01: (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// Seconds since the Unix epoch as Go's `time.RFC3339` writes a UTC time.
pub(crate) fn rfc3339(seconds: i64) -> String {
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3_600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// A DER reader: definite lengths of up to four octets, low tag numbers.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next element: its tag, its contents and the whole element.
    fn next(&mut self) -> Option<(u8, &'a [u8], &'a [u8])> {
        let (&tag, rest) = self.0.split_first()?;
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (&first, mut rest) = rest.split_first()?;
        let length = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 {
                return None;
            }
            let (octets, after) = rest.split_at_checked(count)?;
            rest = after;
            octets.iter().fold(0usize, |length, &octet| (length << 8) | usize::from(octet))
        };
        let header = self.0.len() - rest.len();
        let (contents, after) = rest.split_at_checked(length)?;
        let element = self.0.get(..header + length)?;
        self.0 = after;
        Some((tag, contents, element))
    }

    /// The contents of the next element, which must have this tag.
    fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        let (found, contents, _) = self.next()?;
        (found == tag).then_some(contents)
    }

    /// The contents of the next element if it has this tag; `None` only if it is unreadable.
    fn optional(&mut self, tag: u8) -> Option<Option<&'a [u8]>> {
        if self.0.first() == Some(&tag) {
            self.expect(tag).map(Some)
        } else {
            Some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_print_like_go() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(time((UTC_TIME, b"491231235959Z", b"")), Some(2_524_607_999));
        assert_eq!(time((UTC_TIME, b"500101000000Z", b"")), Some(-631_152_000));
        assert_eq!(time((GENERALIZED_TIME, b"20240229120000Z", b"")), Some(1_709_208_000));
        for bad in [&b"20230229120000Z"[..], b"20241301000000Z", b"2024010100000Z", b"20240101000000+0100"] {
            assert_eq!(time((GENERALIZED_TIME, bad, b"")), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reads_what_go_reads_of_an_rcgen_certificate() {
        use rcgen::{
            BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa,
            KeyPair,
        };
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["webhook.example.com".to_owned(), "::ffff:10.0.0.1".to_owned()])
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, "webhook");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(2020, 1, 2);
        params.not_after = rcgen::date_time_ymd(2030, 1, 2);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let parsed = Certificate::parse(&der).expect("parses");
        assert_eq!(rfc3339(parsed.not_before), "2020-01-02T00:00:00Z");
        assert_eq!(rfc3339(parsed.not_after), "2030-01-02T00:00:00Z");
        assert_eq!(parsed.common_name.as_deref(), Some("webhook"));
        assert!(parsed.has_san_extension);
        assert_eq!(parsed.dns_names, ["webhook.example.com"]);
        assert_eq!(parsed.ip_addresses, [IpAddr::from([10, 0, 0, 1])]);
        assert_eq!(parsed.ext_key_usages, [vec![0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02]]);
        assert!(!parsed.unhandled_critical_extension);

        // An unknown critical extension is Go's UnhandledCriticalExtension; a non-critical one is not.
        for critical in [true, false] {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = rcgen::DistinguishedName::new();
            let mut extension = CustomExtension::from_oid_content(&[1, 2, 3, 4], vec![0x05, 0x00]);
            extension.set_criticality(critical);
            params.custom_extensions = vec![extension];
            let der = params.self_signed(&key).unwrap().der().to_vec();
            let parsed = Certificate::parse(&der).expect("parses");
            assert_eq!(parsed.unhandled_critical_extension, critical);
            assert!(!parsed.has_san_extension);
            assert_eq!(parsed.common_name, None);
        }
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        let der = params.self_signed(&key).unwrap().der().to_vec();
        assert!(Certificate::parse(&der).is_some());
        for cut in [0, 1, 2, 10, der.len() / 2, der.len() - 1] {
            // Every prefix is unreadable, never a panic.
            assert_eq!(Certificate::parse(&der[..cut]), None, "cut at {cut}");
        }
        assert_eq!(Certificate::parse(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(Certificate::parse(&[0x30, 0x80, 0x00, 0x00]), None);
    }
}
