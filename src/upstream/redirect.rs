//! Redirects, followed as the API server follows them: its webhook client is client-go's rest
//! client over a plain Go `http.Client` with no `CheckRedirect`, so Go's defaults apply
//! (`src/net/http/client.go`, `Client.do` and `redirectBehavior`):
//! - 307 and 308 are followed with the same method and body, 301, 302 and 303 with a `GET`
//!   and no body; other statuses, and a redirect without a `Location`, are the answer;
//! - a relative `Location` is resolved against the URL that answered (RFC 3986 §5.2, as
//!   `URL.ResolveReference`), its fragment is not sent;
//! - the tenth redirect in a row is not followed: `Post "<Location>": stopped after 10
//!   redirects`;
//! - the request's headers go along; the call's deadline covers the whole chain.

use http::{Method, StatusCode, Uri};

/// Go's default `CheckRedirect` refuses the redirect that would make this many requests more.
pub(super) const MAX_REDIRECTS: usize = 10;

/// The method and body a redirect is followed with, or `None` if `status` is not followed.
pub(super) fn follow(status: StatusCode, method: &Method) -> Option<(Method, bool)> {
    match status.as_u16() {
        301..=303 if method == Method::GET || method == Method::HEAD => Some((method.clone(), false)),
        301..=303 => Some((Method::GET, false)),
        307 | 308 => Some((method.clone(), true)),
        _ => None,
    }
}

/// `location` resolved against `base`, without its fragment. The error is `url.Parse`'s.
pub(super) fn resolve(base: &Uri, location: &str) -> Result<Uri, String> {
    crate::go::url::parse(location)?;
    let reference = location.split_once('#').map_or(location, |(before, _)| before);
    let scheme = base.scheme_str().unwrap_or("https");
    let target = if has_scheme(reference) {
        reference.to_owned()
    } else if let Some(rest) = reference.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else {
        let authority = base.authority().map_or("", |a| a.as_str());
        let (path, query) = match reference.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (reference, None),
        };
        let query = match query {
            Some(query) => Some(query),
            None if path.is_empty() => base.query(),
            None => None,
        };
        let mut target = format!("{scheme}://{authority}{}", resolve_path(base.path(), path));
        if let Some(query) = query {
            target.push('?');
            target.push_str(query);
        }
        target
    };
    target.parse::<Uri>().map_err(|e| format!("parse {target:?}: {e}"))
}

/// Whether `reference` starts with a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else { return false };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Go's `resolvePath`: `reference` merged with `base`, dot segments removed.
fn resolve_path(base: &str, reference: &str) -> String {
    let full = if reference.is_empty() {
        base.to_owned()
    } else if !reference.starts_with('/') {
        let directory = base.rfind('/').map_or("", |i| &base[..=i]);
        format!("{directory}{reference}")
    } else {
        reference.to_owned()
    };
    let mut segments: Vec<&str> = Vec::new();
    let mut last = "";
    for segment in full.split('/').skip(1) {
        last = segment;
        match segment {
            "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut path = format!("/{}", segments.join("/"));
    // A final `.` or `..` names a directory.
    if matches!(last, "." | "..") && !path.ends_with('/') {
        path.push('/');
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_as_rfc_3986_says() {
        let base: Uri = "https://127.0.0.1:8443/a/b/hook?timeout=10s".parse().unwrap();
        for (location, resolved) in [
            ("https://other:9443/x?y=1#frag", "https://other:9443/x?y=1"),
            ("//other:9443/x", "https://other:9443/x"),
            ("/root", "https://127.0.0.1:8443/root"),
            ("sibling", "https://127.0.0.1:8443/a/b/sibling"),
            ("../up?q=2", "https://127.0.0.1:8443/a/up?q=2"),
            ("./", "https://127.0.0.1:8443/a/b/"),
            ("..", "https://127.0.0.1:8443/a/"),
            ("../../../../x", "https://127.0.0.1:8443/x"),
            ("?only=query", "https://127.0.0.1:8443/a/b/hook?only=query"),
            ("#fragment", "https://127.0.0.1:8443/a/b/hook?timeout=10s"),
        ] {
            assert_eq!(resolve(&base, location).unwrap().to_string(), resolved, "{location}");
        }
        assert_eq!(
            resolve(&base, "https://bad host/").unwrap_err(),
            r#"parse "https://bad host/": invalid character " " in host name"#
        );
    }

    #[test]
    fn statuses_follow_gos_client() {
        assert_eq!(follow(StatusCode::TEMPORARY_REDIRECT, &Method::POST), Some((Method::POST, true)));
        assert_eq!(follow(StatusCode::PERMANENT_REDIRECT, &Method::POST), Some((Method::POST, true)));
        for status in [StatusCode::MOVED_PERMANENTLY, StatusCode::FOUND, StatusCode::SEE_OTHER] {
            assert_eq!(follow(status, &Method::POST), Some((Method::GET, false)), "{status}");
        }
        for status in [StatusCode::MULTIPLE_CHOICES, StatusCode::NOT_MODIFIED, StatusCode::OK] {
            assert_eq!(follow(status, &Method::POST), None, "{status}");
        }
    }
}
