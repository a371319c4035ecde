//! `net.IP` and `net.CIDR` (k8s.io/apiserver `pkg/cel/library/ip.go` and `cidr.go`): `ip`,
//! `isIP`, `ip.isCanonical`, `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`,
//! `isLinkLocalUnicast`, `isGlobalUnicast`, `cidr`, `isCIDR`, `containsIP`, `containsCIDR`,
//! `ip()`, `masked`, `prefixLength` and `string(ip|cidr)`, over a port of Go's `net/netip`
//! parsing, formatting and predicates with their error texts (IPv6 zones and IPv4-mapped IPv6
//! addresses refused, as the library refuses them).

pub(crate) mod netip;

use std::any::Any;

use self::netip::{Addr, Prefix};
use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::library::semver::go_quote;
use crate::value::{Object, Value};

pub(crate) const IP_TYPE: &str = "net.IP";
pub(crate) const CIDR_TYPE: &str = "net.CIDR";

/// A `net.IP` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ip(Addr);

/// A `net.CIDR` value (the address as written, not masked, and the prefix length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr(Prefix);

impl Object for Ip {
    fn type_name(&self) -> &'static str {
        IP_TYPE
    }

    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<Ip>().is_some_and(|o| o == self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Object for Cidr {
    fn type_name(&self) -> &'static str {
        CIDR_TYPE
    }

    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<Cidr>().is_some_and(|o| o == self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The library's `parseIPAddr`.
fn parse_ip(raw: &str) -> Result<Addr, String> {
    let addr = netip::parse_addr(raw).map_err(|e| {
        format!("IP Address {} parse error during conversion from string: {e}", go_quote(raw))
    })?;
    if addr.has_zone() {
        return Err(format!("IP address {} with zone value is not allowed", go_quote(raw)));
    }
    if addr.is_4in6() {
        return Err(format!("IPv4-mapped IPv6 address {} is not allowed", go_quote(raw)));
    }
    Ok(addr)
}

/// The library's `parseCIDR`, with the prefix `stringToCIDR` adds (upstream's error texts
/// say "network address parse error during conversion from string" twice).
fn parse_cidr(raw: &str) -> Result<Prefix, String> {
    let prefix = netip::parse_prefix(raw).map_err(|e| {
        format!(
            "network address parse error during conversion from string: network address parse error during conversion from string: {e}"
        )
    })?;
    if prefix.addr.is_4in6() {
        return Err(format!(
            "network address parse error during conversion from string: IPv4-mapped IPv6 address {} is not allowed",
            go_quote(raw)
        ));
    }
    Ok(prefix)
}

fn string_arg(value: &Value) -> Result<&str> {
    value.as_str().ok_or_else(Error::no_match)
}

fn ip_arg(value: &Value) -> Result<&Addr> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<Ip>().map(|ip| &ip.0).ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn cidr_arg(value: &Value) -> Result<&Prefix> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<Cidr>().map(|c| &c.0).ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn ip_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let addr = parse_ip(string_arg(&args[0])?).map_err(Error::new)?;
    Ok(Value::object(Ip(addr)))
}

fn is_ip(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(parse_ip(string_arg(&args[0])?).is_ok()))
}

fn is_canonical(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let raw = string_arg(&args[0])?;
    let addr = parse_ip(raw).map_err(Error::new)?;
    Ok(Value::Bool(addr.to_string() == raw))
}

fn family(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(if ip_arg(&args[0])?.is_4() { 4 } else { 6 }))
}

fn is_unspecified(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(ip_arg(&args[0])?.is_unspecified()))
}

fn is_loopback(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(ip_arg(&args[0])?.is_loopback()))
}

fn is_link_local_multicast(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(ip_arg(&args[0])?.is_link_local_multicast()))
}

fn is_link_local_unicast(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(ip_arg(&args[0])?.is_link_local_unicast()))
}

fn is_global_unicast(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(ip_arg(&args[0])?.is_global_unicast()))
}

fn ip_to_string(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::string(ip_arg(&args[0])?.to_string()))
}

fn cidr_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let prefix = parse_cidr(string_arg(&args[0])?).map_err(Error::new)?;
    Ok(Value::object(Cidr(prefix)))
}

fn is_cidr(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(parse_cidr(string_arg(&args[0])?).is_ok()))
}

fn cidr_to_string(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::string(cidr_arg(&args[0])?.to_string()))
}

fn contains_ip(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let cidr = cidr_arg(&args[0])?;
    let contained = match &args[1] {
        // An unparsable string: upstream's `cidrContainsIP` answers `no such overload` for
        // the error value it is handed (where `containsCIDR` passes the parse error on).
        Value::String(s) => cidr.contains(&parse_ip(s).map_err(|_| Error::no_such_overload())?),
        other => cidr.contains(ip_arg(other)?),
    };
    Ok(Value::Bool(contained))
}

fn contains_cidr(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let cidr = cidr_arg(&args[0])?;
    let parsed;
    let other = match &args[1] {
        Value::String(s) => {
            parsed = parse_cidr(s).map_err(Error::new)?;
            &parsed
        }
        other => cidr_arg(other)?,
    };
    Ok(Value::Bool(cidr.overlaps(other) && cidr.bits <= other.bits))
}

fn cidr_ip(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::object(Ip(cidr_arg(&args[0])?.addr.clone())))
}

fn masked(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::object(Cidr(cidr_arg(&args[0])?.masked())))
}

fn prefix_length(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(i64::from(cidr_arg(&args[0])?.bits)))
}

fn string_cost(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].size().unwrap_or(1))
}

/// cel-go's `actualSize` of the library's values: an IP is 4 or 16 bytes, a CIDR
/// ⌈prefix length / 8⌉ bytes, a string its characters.
fn actual_size(value: &Value) -> u64 {
    match value {
        Value::Object(o) => {
            if let Some(ip) = o.as_any().downcast_ref::<Ip>() {
                if ip.0.is_4() {
                    4
                } else {
                    16
                }
            } else if let Some(cidr) = o.as_any().downcast_ref::<Cidr>() {
                u64::from(cidr.0.bits).div_ceil(8)
            } else {
                1
            }
        }
        other => other.size().unwrap_or(1),
    }
}

/// cost.go's `containsIP`: the comparison of the CIDR's bytes, and the parse of a string.
fn contains_ip_cost(args: &[Value], _: &Value) -> u64 {
    let cidr = actual_size(&args[0]);
    let mut cost = traversal_cost(cidr + cidr);
    if matches!(args[1], Value::String(_)) {
        cost += traversal_cost(actual_size(&args[1]));
    }
    cost
}

/// cost.go's `containsCIDR`: the comparison, the masking (+1), and the parse of a string.
fn contains_cidr_cost(args: &[Value], _: &Value) -> u64 {
    let cidr = actual_size(&args[0]);
    let mut cost = traversal_cost(cidr + cidr) + traversal_cost(cidr) + 1;
    if matches!(args[1], Value::String(_)) {
        cost += traversal_cost(actual_size(&args[1]));
    }
    cost
}

pub(super) fn register(registry: &mut Registry) {
    registry.global("ip", 1, ip_of, Cost::Of(string_cost));
    registry.global("isIP", 1, is_ip, Cost::Of(string_cost));
    registry.global(
        "ip.isCanonical",
        1,
        is_canonical,
        Cost::Of(|args, _| traversal_cost(2 * args[0].size().unwrap_or(1))),
    );
    registry.method("family", 0, family, Cost::Fixed(1));
    registry.method("isUnspecified", 0, is_unspecified, Cost::Fixed(1));
    registry.method("isLoopback", 0, is_loopback, Cost::Fixed(1));
    registry.method("isLinkLocalMulticast", 0, is_link_local_multicast, Cost::Fixed(1));
    registry.method("isLinkLocalUnicast", 0, is_link_local_unicast, Cost::Fixed(1));
    registry.method("isGlobalUnicast", 0, is_global_unicast, Cost::Fixed(1));
    // `string(ip)`, `string(cidr)`: not in cost.go, cel-go's default 1.
    registry.global("string", 1, ip_to_string, Cost::Fixed(1));
    registry.global("string", 1, cidr_to_string, Cost::Fixed(1));

    registry.global("cidr", 1, cidr_of, Cost::Of(string_cost));
    registry.global("isCIDR", 1, is_cidr, Cost::Of(string_cost));
    registry.method("containsIP", 1, contains_ip, Cost::Of(contains_ip_cost));
    registry.method("containsCIDR", 1, contains_cidr, Cost::Of(contains_cidr_cost));
    // `cidr.ip()`: a field's access, nominal cost.
    registry.method("ip", 0, cidr_ip, Cost::Fixed(1));
    registry.method("masked", 0, masked, Cost::Fixed(1));
    registry.method("prefixLength", 0, prefix_length, Cost::Fixed(1));
}

#[cfg(test)]
mod tests;
