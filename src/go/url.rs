//! The parts of Go's `net/url.Parse` (`src/net/url/url.go`) that `ValidateWebhookURL` looks
//! at, with its errors.
//!
//! Follows Go 1.26 (kube-apiserver's toolchain): colons in a host are strict (the first one
//! starts the port) and a bracketed host must be an IPv6 literal. Errors read as Go's
//! `*url.Error`: `parse "<url>": <reason>`.

use std::fmt::Write as _;

use super::strconv::{quote, quote_bytes};

#[cfg(test)]
mod tests;

/// A parsed URL: only the fields `ValidateWebhookURL` reads.
#[derive(Debug, Default)]
pub(crate) struct Url {
    /// Lower-cased.
    pub(crate) scheme: String,
    /// `Userinfo.String()`, with any password shown as `xxxxx` (as `URL.Redacted` does).
    pub(crate) user: Option<String>,
    /// Unescaped, port included.
    pub(crate) host: String,
    pub(crate) raw_query: String,
    /// Unescaped.
    pub(crate) fragment: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

/// `url.Parse`.
pub(crate) fn parse(raw: &str) -> Result<Url, String> {
    let wrap = |url: &str, e: String| format!("parse {}: {e}", quote(url));
    let (before, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let mut url = parse_without_fragment(before).map_err(|e| wrap(before, e))?;
    if !fragment.is_empty() {
        let fragment = unescape(fragment, Mode::Fragment).map_err(|e| wrap(raw, e))?;
        url.fragment = String::from_utf8_lossy(&fragment).into_owned();
    }
    Ok(url)
}

/// `parse(rawURL, viaRequest=false)`.
fn parse_without_fragment(raw: &str) -> Result<Url, String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_owned());
    }
    let mut url = Url::default();
    if raw == "*" {
        return Ok(url);
    }
    let (scheme, rest) = scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        url.raw_query = query.to_owned();
        rest
    };
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            return Ok(url); // opaque: `scheme:rest`, no host
        }
        let first_segment = rest.split('/').next().unwrap_or_default();
        if first_segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".to_owned());
        }
    }
    let mut path = rest;
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, tail) = after.find('/').map_or((after, ""), |i| after.split_at(i));
        let (user, host) = authority_parts(authority)?;
        url.user = user;
        url.host = host;
        path = tail;
    }
    unescape(path, Mode::Path)?;
    Ok(url)
}

/// `getScheme`: `[a-zA-Z][a-zA-Z0-9+-.]*:`, or no scheme at all.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".to_owned()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `parseAuthority`: `[userinfo@]host`.
fn authority_parts(authority: &str) -> Result<(Option<String>, String), String> {
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return Ok((None, parse_host(authority)?));
    };
    let host = parse_host(host)?; // the host is checked first, as in Go
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".to_owned());
    }
    let user = match userinfo.split_once(':') {
        None => escape_user(&unescape(userinfo, Mode::UserPassword)?),
        Some((name, password)) => {
            let name = escape_user(&unescape(name, Mode::UserPassword)?);
            unescape(password, Mode::UserPassword)?;
            format!("{name}:xxxxx")
        }
    };
    Ok((Some(user), host))
}

/// `parseHost` with Go 1.26's strict colons; returns the unescaped host.
fn parse_host(host: &str) -> Result<String, String> {
    let invalid_port = |port: &str| format!("invalid port {} after host", quote(port));
    match host.rfind('[') {
        Some(0) => {
            let close = host.rfind(']').ok_or("missing ']' in host")?;
            let port = &host[close + 1..];
            if !valid_optional_port(port) {
                return Err(invalid_port(port));
            }
            // RFC 6874: `%25` starts a zone, which has its own escaping rules.
            let zone = host[..close].find("%25").unwrap_or(close);
            let address = unescape(&host[1..zone], Mode::Host)?;
            let zone_id = unescape(&host[zone..close], Mode::Zone)?;
            let address = String::from_utf8_lossy(&address);
            if address.parse::<std::net::Ipv6Addr>().is_err() {
                return Err("invalid IP-literal".to_owned());
            }
            let mut unescaped = format!("[{address}");
            unescaped.push_str(&String::from_utf8_lossy(&zone_id));
            unescaped.push_str(&host[close..]); // `]` and digits only
            return Ok(unescaped);
        }
        Some(_) => return Err("invalid IP-literal".to_owned()),
        None => {
            if let Some(colon) = host.find(':') {
                let port = &host[colon..];
                if !valid_optional_port(port) {
                    return Err(invalid_port(port));
                }
            }
        }
    }
    Ok(String::from_utf8_lossy(&unescape(host, Mode::Host)?).into_owned())
}

/// Empty, or `:` followed by digits only.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// RFC 3986 userinfo characters (escapes are checked by [`unescape`]).
fn valid_userinfo(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c))
}

/// `shouldEscape`, for the modes parsing uses.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    // Sub-delims, `:port`, `[ipv6]`, and the few characters Go lets through in hosts.
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => c == b'?',
            Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => false,
            Mode::Host | Mode::Zone => true,
        },
        b'!' | b'(' | b')' | b'*' if mode == Mode::Fragment => false,
        _ => true,
    }
}

/// `unescape`: checks `%XX` escapes (and host characters), returns the decoded bytes.
fn unescape(s: &str, mode: Mode) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let escape_error = |from: usize| {
        let end = (from + 3).min(bytes.len());
        // Three bytes, which may cut a UTF-8 sequence: Go quotes the bytes as they are.
        format!("invalid URL escape {}", quote_bytes(&bytes[from..end]))
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        if c == b'%' {
            let (Some(hi), Some(lo)) =
                (bytes.get(i + 1).and_then(|h| hex(*h)), bytes.get(i + 2).and_then(|l| hex(*l)))
            else {
                return Err(escape_error(i));
            };
            let is_25 = &bytes[i..i + 3] == b"%25";
            // Hosts may only escape non-ASCII bytes (or `%25`, RFC 6874 zones).
            if mode == Mode::Host && hi < 8 && !is_25 {
                return Err(escape_error(i));
            }
            let v = (hi << 4) | lo;
            if mode == Mode::Zone && !is_25 && v != b' ' && should_escape(v, Mode::Host) {
                return Err(escape_error(i));
            }
            out.push(v);
            i += 3;
            continue;
        }
        if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
            let text = char::from(c).to_string();
            return Err(format!("invalid character {} in host name", quote(&text)));
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

fn hex(c: u8) -> Option<u8> {
    char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// `escape(s, encodeUserPassword)`, for `Userinfo.String()`.
fn escape_user(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for &c in raw {
        if should_escape(c, Mode::UserPassword) {
            let _ = write!(out, "%{c:02X}");
        } else {
            out.push(char::from(c));
        }
    }
    out
}
