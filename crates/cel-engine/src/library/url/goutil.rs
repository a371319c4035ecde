//! Go's `net/url` (Go 1.26+, strict colons): `ParseRequestURI`, `Parse`, escaping,
//! `EscapedPath`, `Hostname`, `Port`, `ParseQuery` and `String`, ported on bytes (Go strings
//! may hold any bytes: an unescaped `%ff` is kept as the byte until it reaches CEL).

use crate::library::ip::netip;
use crate::library::semver::go_quote;

const ENCODE_PATH: u8 = 1;
// 1 << 1 is `encodePathSegment`, which nothing here uses.
const ENCODE_HOST: u8 = 1 << 2;
const ENCODE_ZONE: u8 = 1 << 3;
const ENCODE_USER_PASSWORD: u8 = 1 << 4;
const ENCODE_QUERY_COMPONENT: u8 = 1 << 5;
const ENCODE_FRAGMENT: u8 = 1 << 6;
const HEX_CHAR: u8 = 1 << 7;

/// Go's generated `encoding_table.go`: for each byte, the modes that leave it unescaped.
#[rustfmt::skip]
const TABLE: [u8; 256] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x4c, 0x0c, 0x00, 0x5f, 0x00, 0x5f, 0x0c, 0x4c, 0x4c, 0x4c, 0x5f, 0x5d, 0x7f, 0x7f, 0x41,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x4f, 0x5d, 0x0c, 0x5f, 0x0c, 0x40,
    0x43, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
    0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x0c, 0x00, 0x0c, 0x00, 0x7f,
    0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
    0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x00, 0x00, 0x00, 0x7f, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

fn is_hex(c: u8) -> bool {
    TABLE[c as usize] & HEX_CHAR != 0
}

fn unhex(c: u8) -> u8 {
    9 * (c >> 6) + (c & 15)
}

fn should_escape(c: u8, mode: u8) -> bool {
    TABLE[c as usize] & mode == 0
}

/// Bytes as Go's `strconv.Quote` shows them: a byte that is not UTF-8 (an escape's cut, as
/// `%2\xc3`) as `\xHH`.
fn quote(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let valid = go_quote(chunk.valid());
        out.push_str(&valid[1..valid.len() - 1]);
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

/// `unescape`, with its `EscapeError` and `InvalidHostError` texts.
pub(super) fn unescape(s: &[u8], mode: u8) -> Result<Vec<u8>, String> {
    let mut n = 0;
    let mut has_plus = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                n += 1;
                if i + 2 >= s.len() || !is_hex(s[i + 1]) || !is_hex(s[i + 2]) {
                    let rest = &s[i..];
                    let rest = &rest[..rest.len().min(3)];
                    return Err(format!("invalid URL escape {}", quote(rest)));
                }
                if mode == ENCODE_HOST && unhex(s[i + 1]) < 8 && &s[i..i + 3] != b"%25" {
                    return Err(format!("invalid URL escape {}", quote(&s[i..i + 3])));
                }
                if mode == ENCODE_ZONE {
                    let v = (unhex(s[i + 1]) << 4) | unhex(s[i + 2]);
                    if &s[i..i + 3] != b"%25" && v != b' ' && should_escape(v, ENCODE_HOST) {
                        return Err(format!("invalid URL escape {}", quote(&s[i..i + 3])));
                    }
                }
                i += 3;
            }
            b'+' => {
                has_plus = mode == ENCODE_QUERY_COMPONENT;
                i += 1;
            }
            c => {
                if (mode == ENCODE_HOST || mode == ENCODE_ZONE) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!("invalid character {} in host name", quote(&s[i..i + 1])));
                }
                i += 1;
            }
        }
    }
    if n == 0 && !has_plus {
        return Ok(s.to_vec());
    }
    let plus = if mode == ENCODE_QUERY_COMPONENT { b' ' } else { b'+' };
    let mut t = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                t.push((unhex(s[i + 1]) << 4) | unhex(s[i + 2]));
                i += 2;
            }
            b'+' => t.push(plus),
            c => t.push(c),
        }
        i += 1;
    }
    Ok(t)
}

/// `escape`.
pub(super) fn escape(s: &[u8], mode: u8) -> Vec<u8> {
    const UPPERHEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut t = Vec::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == ENCODE_QUERY_COMPONENT {
            t.push(b'+');
        } else if should_escape(c, mode) {
            t.extend_from_slice(&[b'%', UPPERHEX[(c >> 4) as usize], UPPERHEX[(c & 15) as usize]]);
        } else {
            t.push(c);
        }
    }
    t
}

/// `url.Userinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Userinfo {
    username: Vec<u8>,
    password: Option<Vec<u8>>,
}

/// `url.URL`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Url {
    pub(super) scheme: Vec<u8>,
    opaque: Vec<u8>,
    user: Option<Userinfo>,
    pub(super) host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    omit_host: bool,
    force_query: bool,
    pub(super) raw_query: Vec<u8>,
    fragment: Vec<u8>,
    raw_fragment: Vec<u8>,
}

fn contains(s: &[u8], c: u8) -> bool {
    s.contains(&c)
}

fn index(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

fn last_index(s: &[u8], c: u8) -> Option<usize> {
    s.iter().rposition(|&b| b == c)
}

/// `getScheme`.
fn get_scheme(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok((b"", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".into());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok((b"", raw)),
        }
    }
    Ok((b"", raw))
}

/// `validOptionalPort`.
fn valid_optional_port(port: &[u8]) -> bool {
    if port.is_empty() {
        return true;
    }
    if port[0] != b':' {
        return false;
    }
    port[1..].iter().all(u8::is_ascii_digit)
}

/// `validUserinfo`.
fn valid_userinfo(s: &[u8]) -> bool {
    String::from_utf8_lossy(s).chars().all(|r| {
        r.is_ascii_alphanumeric()
            || matches!(
                r,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    })
}

/// `parseHost`.
fn parse_host(scheme: &[u8], host: &[u8]) -> Result<Vec<u8>, String> {
    match last_index(host, b'[') {
        Some(open) if open > 0 => return Err("invalid IP-literal".into()),
        Some(_) => {
            let Some(close) = last_index(host, b']') else {
                return Err("missing ']' in host".into());
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(format!("invalid port {} after host", quote(colon_port)));
            }
            let colon_port = unescape(colon_port, ENCODE_HOST)?;
            // The `[` is at 0, so the last `]` is after it.
            let hostname = &host[1..close];
            let unescaped = match find(hostname, b"%25") {
                Some(zone) => {
                    let mut h = unescape(&hostname[..zone], ENCODE_HOST)?;
                    h.extend(unescape(&hostname[zone..], ENCODE_ZONE)?);
                    h
                }
                None => unescape(hostname, ENCODE_HOST)?,
            };
            let text = String::from_utf8_lossy(&unescaped);
            let addr = netip::parse_addr(&text).map_err(|e| format!("invalid host: {e}"))?;
            if addr.is_4() {
                return Err("invalid IP-literal".into());
            }
            let mut out = b"[".to_vec();
            out.extend(unescaped);
            out.push(b']');
            out.extend(colon_port);
            return Ok(out);
        }
        None => {
            if let Some(first) = index(host, b':') {
                let last = last_index(host, b':').unwrap_or(first);
                // Go 1.26's strict colons: http and https keep the first colon.
                let i = if last != first && scheme != b"http" && scheme != b"https" { last } else { first };
                let colon_port = &host[i..];
                if !valid_optional_port(colon_port) {
                    return Err(format!("invalid port {} after host", quote(colon_port)));
                }
            }
        }
    }
    unescape(host, ENCODE_HOST)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `parseAuthority`.
fn parse_authority(scheme: &[u8], authority: &[u8]) -> Result<(Option<Userinfo>, Vec<u8>), String> {
    let at = last_index(authority, b'@');
    let host = parse_host(scheme, &authority[at.map_or(0, |i| i + 1)..])?;
    let Some(at) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..at];
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match index(userinfo, b':') {
        None => Userinfo { username: unescape(userinfo, ENCODE_USER_PASSWORD)?, password: None },
        Some(colon) => Userinfo {
            username: unescape(&userinfo[..colon], ENCODE_USER_PASSWORD)?,
            password: Some(unescape(&userinfo[colon + 1..], ENCODE_USER_PASSWORD)?),
        },
    };
    Ok((Some(user), host))
}

impl Url {
    /// `setPath`.
    fn set_path(&mut self, p: &[u8]) -> Result<(), String> {
        self.path = unescape(p, ENCODE_PATH)?;
        self.raw_path = if escape(&self.path, ENCODE_PATH) == p { Vec::new() } else { p.to_vec() };
        Ok(())
    }

    /// `setFragment`.
    fn set_fragment(&mut self, f: &[u8]) -> Result<(), String> {
        self.fragment = unescape(f, ENCODE_FRAGMENT)?;
        self.raw_fragment =
            if escape(&self.fragment, ENCODE_FRAGMENT) == f { Vec::new() } else { f.to_vec() };
        Ok(())
    }

    /// `EscapedPath`.
    pub(super) fn escaped_path(&self) -> Vec<u8> {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, ENCODE_PATH)
            && unescape(&self.raw_path, ENCODE_PATH).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return b"*".to_vec();
        }
        escape(&self.path, ENCODE_PATH)
    }

    fn escaped_fragment(&self) -> Vec<u8> {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, ENCODE_FRAGMENT)
            && unescape(&self.raw_fragment, ENCODE_FRAGMENT).is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, ENCODE_FRAGMENT)
    }

    /// `Hostname` and `Port` (`splitHostPort`).
    pub(super) fn host_port(&self) -> (&[u8], &[u8]) {
        let mut host: &[u8] = &self.host;
        let mut port: &[u8] = b"";
        if let Some(colon) = last_index(host, b':') {
            if valid_optional_port(&host[colon..]) {
                port = &host[colon + 1..];
                host = &host[..colon];
            }
        }
        if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }

    /// `String`.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        if !self.scheme.is_empty() {
            buf.extend_from_slice(&self.scheme);
            buf.push(b':');
        }
        if !self.opaque.is_empty() {
            buf.extend_from_slice(&self.opaque);
        } else {
            let has_authority = !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            let omitted = self.omit_host && self.host.is_empty() && self.user.is_none();
            if has_authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.extend_from_slice(b"//");
                }
                if let Some(ui) = &self.user {
                    buf.extend(escape(&ui.username, ENCODE_USER_PASSWORD));
                    if let Some(p) = &ui.password {
                        buf.push(b':');
                        buf.extend(escape(p, ENCODE_USER_PASSWORD));
                    }
                    buf.push(b'@');
                }
                if !self.host.is_empty() {
                    buf.extend(escape(&self.host, ENCODE_HOST));
                }
            }
            let mut path = self.escaped_path();
            if self.omit_host && self.host.is_empty() && self.user.is_none() && path.starts_with(b"//") {
                buf.extend_from_slice(b"%2F");
                path.remove(0);
            }
            if !path.is_empty() && path[0] != b'/' && !self.host.is_empty() {
                buf.push(b'/');
            }
            if buf.is_empty() {
                let segment = &path[..index(&path, b'/').unwrap_or(path.len())];
                if contains(segment, b':') {
                    buf.extend_from_slice(b"./");
                }
            }
            buf.extend(path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push(b'?');
            buf.extend_from_slice(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push(b'#');
            buf.extend(self.escaped_fragment());
        }
        buf
    }
}

/// `validEncoded`.
fn valid_encoded(s: &[u8], mode: u8) -> bool {
    s.iter().all(|&c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// `parse(rawURL, viaRequest)`.
fn parse(raw: &[u8], via_request: bool) -> Result<Url, String> {
    if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() && via_request {
        return Err("empty url".into());
    }
    let mut url = Url::default();
    if raw == b"*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with(b"?") && rest.iter().filter(|&&b| b == b'?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some(q) = index(rest, b'?') {
        url.raw_query = rest[q + 1..].to_vec();
        rest = &rest[..q];
    }
    if !rest.starts_with(b"/") {
        if !url.scheme.is_empty() {
            url.opaque = rest.to_vec();
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".into());
        }
        let segment = &rest[..index(rest, b'/').unwrap_or(rest.len())];
        if contains(segment, b':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with(b"///")) && rest.starts_with(b"//") {
        let mut authority = &rest[2..];
        rest = b"";
        if let Some(i) = index(authority, b'/') {
            rest = &authority[i..];
            authority = &authority[..i];
        }
        let (user, host) = parse_authority(&url.scheme, authority)?;
        url.user = user;
        url.host = host;
    } else if !url.scheme.is_empty() && rest.starts_with(b"/") {
        url.omit_host = true;
    }
    url.set_path(rest)?;
    Ok(url)
}

/// `url.Error`'s text: `parse "<url>": <error>`.
fn url_error(raw: &[u8], err: String) -> String {
    format!("parse {}: {err}", quote(raw))
}

/// `url.ParseRequestURI`.
pub(super) fn parse_request_uri(raw: &str) -> Result<Url, String> {
    parse(raw.as_bytes(), true).map_err(|e| url_error(raw.as_bytes(), e))
}

/// `url.Parse`.
pub(super) fn parse_url(raw: &str) -> Result<Url, String> {
    let raw = raw.as_bytes();
    let (u, frag) = match index(raw, b'#') {
        Some(i) => (&raw[..i], &raw[i + 1..]),
        None => (raw, &b""[..]),
    };
    let mut url = parse(u, false).map_err(|e| url_error(u, e))?;
    if !frag.is_empty() {
        url.set_fragment(frag).map_err(|e| url_error(raw, e))?;
    }
    Ok(url)
}

/// `url.ParseQuery` (what `URL.Query` keeps: the pairs that parse, in order).
pub(super) fn parse_query(query: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    // `urlmaxqueryparams`: past 10,000 parameters, nothing is parsed.
    if query.iter().filter(|&&b| b == b'&').count() + 1 > 10_000 {
        return out;
    }
    for pair in query.split(|&b| b == b'&') {
        if contains(pair, b';') || pair.is_empty() {
            continue;
        }
        let (key, value) = match index(pair, b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        let (Ok(key), Ok(value)) =
            (unescape(key, ENCODE_QUERY_COMPONENT), unescape(value, ENCODE_QUERY_COMPONENT))
        else {
            continue;
        };
        out.push((key, value));
    }
    out
}
