//! `clientConfig`: `ValidateWebhookURL` and `ValidateWebhookService`
//! (`staging/src/k8s.io/apiserver/pkg/util/webhook/validation.go`), and the `caBundle`.

use super::super::manifest::{ServiceReference, WebhookClientConfig};
use super::messages::{invalid, quote, required};
use super::names::dns1123_subdomain;
use super::{ca_bundle, Path, Report};
use crate::go::url;

const PORTS: std::ops::RangeInclusive<i64> = 1..=65535;

/// `ValidateWebhookURL`'s hint, appended to its format errors.
const URL_FORM: &str = "; desired format: https://host[/path]";

pub(super) fn client_config(config: &WebhookClientConfig, at: &Path, r: &mut Report) {
    match (&config.url, &config.service) {
        (Some(url), None) => webhook_url(url, &at.child("url"), r),
        (None, Some(service)) => webhook_service(service, &at.child("service"), r),
        _ => r.error(at, required("exactly one of url or service is required")),
    }
    if let Some(Err(detail)) = config.ca_bundle.as_deref().map(ca_bundle::decode) {
        // Upstream never shows a bundle's bytes.
        r.error(&at.child("caBundle"), invalid("\"<value omitted>\"", &detail));
    }
}

/// `ValidateWebhookURL` with `forceHttps`, over a port of Go's `url.Parse`.
fn webhook_url(raw: &str, at: &Path, r: &mut Report) {
    let url = match url::parse(raw) {
        Ok(url) => url,
        Err(e) => {
            r.error(at, required(&format!("url must be a valid URL: {e}{URL_FORM}")));
            return;
        }
    };
    if url.scheme != "https" {
        let detail = format!("'https' is the only allowed URL scheme{URL_FORM}");
        r.error(at, invalid(&quote(&url.scheme), &detail));
    }
    if url.host.is_empty() {
        let detail = format!("host must be specified{URL_FORM}");
        r.error(at, invalid(&quote(&url.host), &detail));
    }
    if let Some(user) = &url.user {
        r.error(at, invalid(&quote(user), "user information is not permitted in the URL"));
    }
    if !url.fragment.is_empty() {
        r.error(at, invalid(&quote(&url.fragment), "fragments are not permitted in the URL"));
    }
    if !url.raw_query.is_empty() {
        r.error(at, invalid(&quote(&url.raw_query), "query parameters are not permitted in the URL"));
    }
}

/// `ValidateWebhookService`. An unset port is the defaulted 443.
fn webhook_service(service: &ServiceReference, at: &Path, r: &mut Report) {
    if service.name.is_empty() {
        r.error(&at.child("name"), required(""));
    }
    if service.namespace.is_empty() {
        r.error(&at.child("namespace"), required(""));
    }
    if let Some(port) = service.port.filter(|p| !PORTS.contains(p)) {
        r.error(
            &at.child("port"),
            invalid(&port.to_string(), "port is not valid: must be between 1 and 65535, inclusive"),
        );
    }
    if let Some(path) = service.path.as_deref() {
        service_path(path, &at.child("path"), r);
    }
}

fn service_path(path: &str, at: &Path, r: &mut Report) {
    if path.is_empty() || path == "/" {
        return;
    }
    if path == "//" {
        r.error(at, invalid(&quote(path), "segment[0] may not be empty"));
        return;
    }
    if !path.starts_with('/') {
        r.error(at, invalid(&quote(path), "must start with a '/'"));
    }
    // Like upstream, drop the first character whatever it is, and one trailing '/'.
    let mut chars = path.chars();
    chars.next();
    let rest = chars.as_str();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, segment) in rest.split('/').enumerate() {
        if segment.is_empty() {
            let detail = format!("segment[{i}] may not be empty");
            r.error(at, invalid(&quote(path), &detail));
            continue;
        }
        for failure in dns1123_subdomain(segment) {
            r.error(at, invalid(&quote(path), &format!("segment[{i}]: {failure}")));
        }
    }
}
