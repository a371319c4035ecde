//! The validations behind the named formats, as apimachinery 0.36 and kube-openapi write them:
//! `util/validation` (lengths in "characters"), `api/validate/content` (lengths in "bytes"),
//! `api/validation`'s name functions (with `maskTrailingDash`), `strfmt`'s uuid, byte, date
//! and datetime, and `url.ParseRequestURI` for uri. Lengths are byte lengths, as Go's `len`.

use std::sync::LazyLock;

use regex::Regex;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^{fmt}$")).expect("a valid pattern")
}

/// Over bytes: a masked name may end inside a character, as Go's byte slicing leaves it.
fn anchored_bytes(fmt: &str) -> regex::bytes::Regex {
    regex::bytes::Regex::new(&format!("^{fmt}$")).expect("a valid pattern")
}

static DNS1123_LABEL: LazyLock<regex::bytes::Regex> = LazyLock::new(|| anchored_bytes(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<regex::bytes::Regex> =
    LazyLock::new(|| anchored_bytes(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<regex::bytes::Regex> = LazyLock::new(|| anchored_bytes(DNS1035_LABEL_FMT));
static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_KEY_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
        .expect("a valid pattern")
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
        .expect("a valid pattern")
});
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
        .expect("a valid pattern")
});

/// `RegexError`: the message, its examples and the pattern.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

/// `util/validation.MaxLenError`.
fn max_len_characters(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `content.MaxLenError`.
fn max_len_bytes(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `util/validation.IsDNS1123Label`.
fn is_dns1123_label(value: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_characters(63));
    }
    if !DNS1123_LABEL.is_match(value) {
        if DNS1123_SUBDOMAIN.is_match(value) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `util/validation.IsDNS1123Subdomain` (`bytes`: `content.IsDNS1123Subdomain`'s length text).
fn is_dns1123_subdomain(value: &[u8], bytes: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(if bytes { max_len_bytes(253) } else { max_len_characters(253) });
    }
    if !DNS1123_SUBDOMAIN.is_match(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `util/validation.IsDNS1035Label`.
fn is_dns1035_label(value: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_characters(63));
    }
    if !DNS1035_LABEL.is_match(value) {
        errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// `maskTrailingDash`: a trailing `-` (past the first character) replaces the last *two*
/// characters with `a`, as upstream does.
fn mask_trailing_dash(name: &str) -> Vec<u8> {
    let mut out = name.as_bytes().to_vec();
    if name.len() > 1 && name.ends_with('-') {
        // Byte slicing as Go's: what is left may end inside a character.
        out.truncate(name.len() - 2);
        out.push(b'a');
    }
    out
}

pub(super) fn dns1123_label(s: &str) -> Vec<String> {
    is_dns1123_label(s.as_bytes())
}

pub(super) fn dns1123_label_prefix(s: &str) -> Vec<String> {
    is_dns1123_label(&mask_trailing_dash(s))
}

pub(super) fn dns1123_subdomain(s: &str) -> Vec<String> {
    is_dns1123_subdomain(s.as_bytes(), false)
}

pub(super) fn dns1123_subdomain_prefix(s: &str) -> Vec<String> {
    is_dns1123_subdomain(&mask_trailing_dash(s), false)
}

pub(super) fn dns1035_label(s: &str) -> Vec<String> {
    is_dns1035_label(s.as_bytes())
}

pub(super) fn dns1035_label_prefix(s: &str) -> Vec<String> {
    is_dns1035_label(&mask_trailing_dash(s))
}

/// `content.IsLabelKey` (`validation.IsQualifiedName`).
pub(super) fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix.as_bytes(), true)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_bytes(63)));
    }
    if !LABEL_KEY.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `content.IsLabelValue`.
pub(super) fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_bytes(63));
    }
    if !LABEL_VALUE.is_match(value) {
        errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `url.ParseRequestURI`'s error, as is.
pub(super) fn uri(s: &str) -> Vec<String> {
    match crate::library::url::parse_request_uri(s) {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

pub(super) fn uuid(s: &str) -> Vec<String> {
    if UUID.is_match(s) {
        Vec::new()
    } else {
        vec!["does not match the UUID format".into()]
    }
}

pub(super) fn byte(s: &str) -> Vec<String> {
    if BASE64.is_match(s) {
        Vec::new()
    } else {
        vec!["invalid base64".into()]
    }
}

/// `time.Parse("2006-01-02", s)` succeeds: four digits, two, two, the month and day in range.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    if !(1..=12).contains(&month) {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    (1..=days).contains(&day)
}

pub(super) fn date(s: &str) -> Vec<String> {
    if is_date(s) {
        Vec::new()
    } else {
        vec!["invalid date".into()]
    }
}

/// Go's `strings.ToLower`: Unicode simple lowercase, one character for one (`İ` → `i`).
fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == '\u{130}' {
                return 'i';
            }
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) => l,
                _ => c,
            }
        })
        .collect()
}

/// `strfmt.IsDateTime`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = go_lower(s);
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(m) = DATE_TIME.captures(parts[1]) else {
        return false;
    };
    let group = |i| m.get(i).map_or("", |g| g.as_str());
    group(1) <= "23" && group(2) <= "59" && group(3) <= "59"
}

pub(super) fn datetime(s: &str) -> Vec<String> {
    if is_date_time(s) {
        Vec::new()
    } else {
        vec!["invalid datetime".into()]
    }
}
