//! `kubernetes.URL` (k8s.io/apiserver `pkg/cel/library/urls.go`): `url`, `isURL`,
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`, `getQuery`, over a port
//! of Go's `net/url` (not WHATWG): a string is a URL when `url.ParseRequestURI` takes it, and
//! the value is what `url.Parse` makes of it.

mod goutil;

use std::any::Any;
use std::sync::Arc;

use self::goutil::Url as GoUrl;
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::value::{Key, Map, Object, Value};

pub(crate) const TYPE_NAME: &str = "kubernetes.URL";

/// A `kubernetes.URL` value.
#[derive(Debug)]
pub struct Url(GoUrl);

impl Object for Url {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    /// Upstream compares `URL.String()`.
    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<Url>().is_some_and(|o| o.0.to_bytes() == self.0.to_bytes())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A Go string for CEL: bytes that are not UTF-8 (an unescaped `%ff`) become U+FFFD.
fn text(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes).as_ref())
}

fn string_arg(value: &Value) -> Result<&str> {
    value.as_str().ok_or_else(Error::no_match)
}

fn url_arg(value: &Value) -> Result<&GoUrl> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<Url>().map(|u| &u.0).ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn url_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let raw = string_arg(&args[0])?;
    let parsed = goutil::parse_request_uri(raw).and_then(|_| goutil::parse_url(raw));
    match parsed {
        Ok(url) => Ok(Value::object(Url(url))),
        Err(e) => Err(Error::new(format!("URL parse error during conversion from string: {e}"))),
    }
}

fn is_url(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(goutil::parse_request_uri(string_arg(&args[0])?).is_ok()))
}

fn get_scheme(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::String(text(&url_arg(&args[0])?.scheme)))
}

fn get_host(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::String(text(&url_arg(&args[0])?.host)))
}

fn get_hostname(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::String(text(url_arg(&args[0])?.host_port().0)))
}

fn get_port(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::String(text(url_arg(&args[0])?.host_port().1)))
}

fn get_escaped_path(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::String(text(&url_arg(&args[0])?.escaped_path())))
}

/// `map(string, list(string))`, keys in order (upstream's is a Go map, unordered).
fn get_query(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let mut pairs = goutil::parse_query(&url_arg(&args[0])?.raw_query);
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut grouped: Vec<(Arc<str>, Vec<Value>)> = Vec::new();
    for (key, value) in pairs {
        let key = text(&key);
        let value = Value::String(text(&value));
        match grouped.last_mut() {
            Some((k, values)) if *k == key => values.push(value),
            _ => grouped.push((key, vec![value])),
        }
    }
    let mut map = Map::with_capacity(grouped.len());
    for (key, values) in grouped {
        // Two byte keys may read the same once made UTF-8: their values join.
        match map.get_mut(&Key::String(key.clone())) {
            Some(Value::List(list)) => Arc::make_mut(list).extend(values),
            _ => {
                map.insert(Key::String(key), Value::list(values));
            }
        }
    }
    Ok(Value::map(map))
}

/// `url.ParseRequestURI`'s verdict: its error text (`parse "…": …`) when it refuses `raw`.
pub(crate) fn parse_request_uri(raw: &str) -> std::result::Result<(), String> {
    goutil::parse_request_uri(raw).map(|_| ())
}

pub(super) fn register(registry: &mut Registry) {
    registry.global("url", 1, url_of, Cost::Of(|args, _| traversal_cost(args[0].size().unwrap_or(1))));
    // `isURL` is not in cost.go: cel-go's default 1.
    registry.global("isURL", 1, is_url, Cost::Fixed(1));
    registry.method("getScheme", 0, get_scheme, Cost::Fixed(1));
    registry.method("getHost", 0, get_host, Cost::Fixed(1));
    registry.method("getHostname", 0, get_hostname, Cost::Fixed(1));
    registry.method("getPort", 0, get_port, Cost::Fixed(1));
    registry.method("getEscapedPath", 0, get_escaped_path, Cost::Fixed(1));
    registry.method("getQuery", 0, get_query, Cost::Fixed(1));
}

#[cfg(test)]
mod tests;
