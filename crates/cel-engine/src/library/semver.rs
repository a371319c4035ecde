//! `kubernetes.Semver` (k8s.io/apiserver `pkg/cel/library/semverlib.go` at `SemverVersion(1)`,
//! as the 1.36 base environment declares it): `semver(string)`, `semver(string, bool)`,
//! `isSemver(string)`, `isSemver(string, bool)`, `major`, `minor`, `patch`, `isGreaterThan`,
//! `isLessThan`, `compareTo`, over a port of blang/semver v4's `Parse` and `Compare` with its
//! error texts.

pub(crate) use crate::go::quote as go_quote;
use std::any::Any;
use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::func::{traversal_cost, Cost, Ctx, Registry};
use crate::value::{Object, Value};

pub(crate) const TYPE_NAME: &str = "kubernetes.Semver";

const ALPHANUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789";

/// A prerelease identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pre {
    Num(u64),
    Alpha(String),
}

impl Pre {
    fn cmp(&self, other: &Pre) -> Ordering {
        match (self, other) {
            (Pre::Num(a), Pre::Num(b)) => a.cmp(b),
            (Pre::Num(_), Pre::Alpha(_)) => Ordering::Less,
            (Pre::Alpha(_), Pre::Num(_)) => Ordering::Greater,
            (Pre::Alpha(a), Pre::Alpha(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

/// blang/semver's `Version`.
#[derive(Clone, Debug)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

impl Semver {
    /// `Version.Compare` (build metadata has no precedence).
    fn compare(&self, o: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let c = a.cmp(b);
            if c != Ordering::Equal {
                return c;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }
}

impl Object for Semver {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<Semver>().is_some_and(|o| self.compare(o) == Ordering::Equal)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn contains_only(s: &str, set: &[u8]) -> bool {
    s.bytes().all(|b| set.contains(&b))
}

fn has_leading_zeroes(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Go's `strconv.ParseUint(s, 10, 64)` on a string of digits, with its error text.
fn parse_uint(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err(format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(s)));
    }
    s.parse().map_err(|_| format!("strconv.ParseUint: parsing {}: value out of range", go_quote(s)))
}

/// The major, minor or patch number.
fn number(part: &str, what: &str) -> Result<u64, String> {
    if !contains_only(part, b"0123456789") {
        return Err(format!("Invalid character(s) found in {what} number {}", go_quote(part)));
    }
    if has_leading_zeroes(part) {
        let what = what[..1].to_uppercase() + &what[1..];
        return Err(format!("{what} number must not contain leading zeroes {}", go_quote(part)));
    }
    parse_uint(part)
}

/// blang/semver v4's `Parse`.
fn parse(s: &str) -> Result<Semver, String> {
    if s.is_empty() {
        return Err("Version string empty".into());
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    if parts.len() != 3 {
        return Err("No Major.Minor.Patch elements found".into());
    }
    let major = number(parts[0], "major")?;
    let minor = number(parts[1], "minor")?;
    let mut patch_str = parts[2];
    let mut build: Vec<&str> = Vec::new();
    let mut prerelease: Vec<&str> = Vec::new();
    if let Some(i) = patch_str.find('+') {
        build = patch_str[i + 1..].split('.').collect();
        patch_str = &patch_str[..i];
    }
    if let Some(i) = patch_str.find('-') {
        prerelease = patch_str[i + 1..].split('.').collect();
        patch_str = &patch_str[..i];
    }
    let patch = number(patch_str, "patch")?;
    let mut pre = Vec::with_capacity(prerelease.len());
    for p in prerelease {
        if p.is_empty() {
            return Err("Prerelease is empty".into());
        }
        if contains_only(p, b"0123456789") {
            if has_leading_zeroes(p) {
                return Err(format!(
                    "Numeric PreRelease version must not contain leading zeroes {}",
                    go_quote(p)
                ));
            }
            pre.push(Pre::Num(parse_uint(p)?));
        } else if contains_only(p, ALPHANUM) {
            pre.push(Pre::Alpha(p.to_owned()));
        } else {
            return Err(format!("Invalid character(s) found in prerelease {}", go_quote(p)));
        }
    }
    // Build metadata is checked, and has no precedence: nothing reads it.
    for b in build {
        if b.is_empty() {
            return Err("Build meta data is empty".into());
        }
        if !contains_only(b, ALPHANUM) {
            return Err(format!("Invalid character(s) found in build meta data {}", go_quote(b)));
        }
    }
    Ok(Semver { major, minor, patch, pre })
}

/// The library's `normalizeAndParse`: a leading `v` dropped, leading zeros trimmed, missing
/// minor and patch filled with 0.
fn normalize_and_parse(s: &str) -> Result<Semver, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_owned).collect();
    for part in &mut parts {
        if part.len() > 1 {
            let trimmed = part.trim_start_matches('0');
            *part = if trimmed.is_empty() || !trimmed.as_bytes()[0].is_ascii_digit() {
                format!("0{trimmed}")
            } else {
                trimmed.to_owned()
            };
        }
    }
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        while parts.len() < 3 {
            parts.push("0".into());
        }
    }
    parse(&parts.join("."))
}

fn parse_args(args: &[Value]) -> Result<Result<Semver, String>> {
    let text = args[0].as_str().ok_or_else(Error::no_match)?;
    let normalize = match args.get(1) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Error::no_match()),
    };
    Ok(if normalize { normalize_and_parse(text) } else { parse(text) })
}

fn semver_of(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    parse_args(args)?.map(Value::object).map_err(Error::new)
}

fn is_semver(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(parse_args(args)?.is_ok()))
}

fn semver_arg(value: &Value) -> Result<&Semver> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<Semver>().ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn major(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    // `types.Int(v.Major)`: a uint64 past int64's range wraps.
    Ok(Value::Int(semver_arg(&args[0])?.major as i64))
}

fn minor(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(semver_arg(&args[0])?.minor as i64))
}

fn patch(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(semver_arg(&args[0])?.patch as i64))
}

fn compare(args: &[Value]) -> Result<Ordering> {
    Ok(semver_arg(&args[0])?.compare(semver_arg(&args[1])?))
}

fn is_greater_than(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare(args)? == Ordering::Greater))
}

fn is_less_than(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Bool(compare(args)? == Ordering::Less))
}

fn compare_to(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    Ok(Value::Int(compare(args)? as i64))
}

fn string_cost(args: &[Value], _: &Value) -> u64 {
    traversal_cost(args[0].size().unwrap_or(1))
}

pub(super) fn register(registry: &mut Registry) {
    registry.global("semver", 1, semver_of, Cost::Of(string_cost));
    registry.global("semver", 2, semver_of, Cost::Of(string_cost));
    registry.global("isSemver", 1, is_semver, Cost::Of(string_cost));
    registry.global("isSemver", 2, is_semver, Cost::Of(string_cost));
    registry.method("major", 0, major, Cost::Fixed(1));
    registry.method("minor", 0, minor, Cost::Fixed(1));
    registry.method("patch", 0, patch, Cost::Fixed(1));
    registry.method("isGreaterThan", 1, is_greater_than, Cost::Fixed(1));
    registry.method("isLessThan", 1, is_less_than, Cost::Fixed(1));
    registry.method("compareTo", 1, compare_to, Cost::Fixed(1));
}

#[cfg(test)]
mod tests {
    use crate::library::quantity::tests::check;

    /// From k8s.io/apiserver 0.36.4 itself (upstream's `semver_test.go` table first).
    #[test]
    fn upstream_cases() {
        check(&[
            (r#"semver("1.2.3")"#, r#"obj:kubernetes.Semver"#, 1),
            (r#"semver("v1.0")"#, r#"err: No Major.Minor.Patch elements found"#, 1),
            (r#"isSemver("1.2.3-beta.1+build.1")"#, r#"true"#, 2),
            (r#"isSemver("")"#, r#"false"#, 0),
            (r#"isSemver("v1.0.0")"#, r#"false"#, 1),
            (r#"isSemver(" 1.0.0")"#, r#"false"#, 1),
            (r#"isSemver("1. 0.0")"#, r#"false"#, 1),
            (r#"isSemver("1.0.0 ")"#, r#"false"#, 1),
            (r#"isSemver("01.01.01")"#, r#"false"#, 1),
            (r#"isSemver("1")"#, r#"false"#, 1),
            (r#"isSemver("1.1")"#, r#"false"#, 1),
            (r#"isSemver("", true)"#, r#"false"#, 0),
            (r#"isSemver(" 1.0.0", true)"#, r#"false"#, 1),
            (r#"isSemver("1. 0.0", true)"#, r#"false"#, 1),
            (r#"isSemver("1.0.0 ", true)"#, r#"false"#, 1),
            (r#"isSemver("v1.0.0", true)"#, r#"true"#, 1),
            (r#"isSemver("01.01.01", true)"#, r#"true"#, 1),
            (r#"isSemver("1", true)"#, r#"true"#, 1),
            (r#"isSemver("1.1", true)"#, r#"true"#, 1),
            (r#"isSemver([1, 2, 3])"#, r#"compile"#, 0),
            (r#"semver("v01.01", true) == semver("1.1.0")"#, r#"true"#, 3),
            (r#"semver("1.2.3") == semver("1.2.3")"#, r#"true"#, 3),
            (r#"semver("1.2.3") == semver("1.0.0")"#, r#"false"#, 3),
            (r#"semver("1.0.0").isLessThan(semver("1.2.3"))"#, r#"true"#, 3),
            (r#"semver("1.0.0").isLessThan(semver("1.0.0"))"#, r#"false"#, 3),
            (r#"semver("1.2.3").isGreaterThan(semver("1.0.0"))"#, r#"true"#, 3),
            (r#"semver("1.0.0").isGreaterThan(semver("1.0.0"))"#, r#"false"#, 3),
            (r#"semver("1.2.3").compareTo(semver("1.2.3"))"#, r#"0"#, 3),
            (r#"semver("1.0.0").compareTo(semver("1.2.3"))"#, r#"-1"#, 3),
            (r#"semver("1.2.3").compareTo(semver("1.0.0"))"#, r#"1"#, 3),
            (r#"semver("1.2.3").major()"#, r#"1"#, 2),
            (r#"semver("1.2.3").minor()"#, r#"2"#, 2),
            (r#"semver("1.2.3").patch()"#, r#"3"#, 2),
            (r#"semver("")"#, r#"err: Version string empty"#, 0),
            (r#"semver("1.2")"#, r#"err: No Major.Minor.Patch elements found"#, 1),
            (r#"semver("a.2.3")"#, r#"err: Invalid character(s) found in major number "a""#, 1),
            (r#"semver("01.2.3")"#, r#"err: Major number must not contain leading zeroes "01""#, 1),
            (r#"semver("1.02.3")"#, r#"err: Minor number must not contain leading zeroes "02""#, 1),
            (r#"semver("1.2.03")"#, r#"err: Patch number must not contain leading zeroes "03""#, 1),
            (r#"semver("1.2.x")"#, r#"err: Invalid character(s) found in patch number "x""#, 1),
            (r#"semver("1..3")"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (r#"semver("1.2.")"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (
                r#"semver("99999999999999999999.0.0")"#,
                r#"err: strconv.ParseUint: parsing "99999999999999999999": value out of range"#,
                3,
            ),
            (r#"semver("18446744073709551615.0.0").major()"#, r#"-1"#, 4),
            (r#"semver("9223372036854775808.1.2").major()"#, r#"-9223372036854775808"#, 4),
            (
                r#"semver("1.18446744073709551616.0")"#,
                r#"err: strconv.ParseUint: parsing "18446744073709551616": value out of range"#,
                3,
            ),
            (r#"semver("1.2.3-")"#, r#"err: Prerelease is empty"#, 1),
            (r#"semver("1.2.3-a..b")"#, r#"err: Prerelease is empty"#, 1),
            (
                r#"semver("1.2.3-01")"#,
                r#"err: Numeric PreRelease version must not contain leading zeroes "01""#,
                1,
            ),
            (r#"semver("1.2.3-0a")"#, r#"obj:kubernetes.Semver"#, 1),
            (r#"semver("1.2.3-a_b")"#, r#"err: Invalid character(s) found in prerelease "a_b""#, 1),
            (r#"semver("1.2.3+")"#, r#"err: Build meta data is empty"#, 1),
            (r#"semver("1.2.3+a..b")"#, r#"err: Build meta data is empty"#, 1),
            (r#"semver("1.2.3+a_b")"#, r#"err: Invalid character(s) found in build meta data "a_b""#, 1),
            (r#"semver("1.2.3+01").patch()"#, r#"3"#, 2),
            (
                r#"semver("1.2.3-99999999999999999999")"#,
                r#"err: strconv.ParseUint: parsing "99999999999999999999": value out of range"#,
                3,
            ),
            (r#"semver("1.2.3-ä")"#, r#"err: Invalid character(s) found in prerelease "ä""#, 1),
            (r#"semver("1.2.3-a\tb")"#, r#"err: Invalid character(s) found in prerelease "a\tb""#, 1),
            (r#"semver("1.2.3-\"")"#, r#"err: Invalid character(s) found in prerelease "\"""#, 1),
            (r#"semver("1.2.3-a\\b")"#, r#"err: Invalid character(s) found in prerelease "a\\b""#, 1),
            (r#"semver("ä.2.3")"#, r#"err: Invalid character(s) found in major number "ä""#, 1),
            (r#"semver("1.2.3+b-1").patch()"#, r#"3"#, 2),
            (r#"semver("1.2.3-rc.1+b.2").minor()"#, r#"2"#, 3),
            (r#"semver("1.2.3-rc.1") == semver("1.2.3-rc.1+build")"#, r#"true"#, 4),
            (r#"semver("1.2.3-rc.1").compareTo(semver("1.2.3"))"#, r#"-1"#, 3),
            (r#"semver("1.2.3-rc.1").compareTo(semver("1.2.3-rc.2"))"#, r#"-1"#, 3),
            (r#"semver("1.2.3-rc.10").compareTo(semver("1.2.3-rc.9"))"#, r#"1"#, 4),
            (r#"semver("1.2.3-rc.a").compareTo(semver("1.2.3-rc.1"))"#, r#"1"#, 3),
            (r#"semver("1.2.3-rc").compareTo(semver("1.2.3-rc.1"))"#, r#"-1"#, 3),
            (r#"semver("1.2.3-RC").compareTo(semver("1.2.3-rc"))"#, r#"-1"#, 3),
            (r#"semver("1.2.3-a.b").compareTo(semver("1.2.3-a"))"#, r#"1"#, 3),
            (r#"semver("2.0.0").compareTo(semver("10.0.0"))"#, r#"-1"#, 3),
            (r#"semver("1.10.0").isGreaterThan(semver("1.9.0"))"#, r#"true"#, 3),
            (r#"semver("v1.2.3", true).major()"#, r#"1"#, 2),
            (r#"semver("vv1.2.3", true)"#, r#"err: Invalid character(s) found in major number "0v1""#, 1),
            (r#"semver("1.2.3", false).major()"#, r#"1"#, 2),
            (r#"semver("v1.2.3", false)"#, r#"err: Invalid character(s) found in major number "v1""#, 1),
            (r#"semver("v1", true) == semver("1.0.0")"#, r#"true"#, 3),
            (
                r#"semver("v1-rc", true)"#,
                r#"err: short version cannot contain PreRelease/Build meta data"#,
                1,
            ),
            (
                r#"semver("1.2+b", true)"#,
                r#"err: short version cannot contain PreRelease/Build meta data"#,
                1,
            ),
            (r#"semver("1.2.3-rc+b", true).patch()"#, r#"3"#, 2),
            (r#"semver("00.000.0000", true) == semver("0.0.0")"#, r#"true"#, 4),
            (
                r#"semver("01.02.03-04", true)"#,
                r#"err: Numeric PreRelease version must not contain leading zeroes "04""#,
                2,
            ),
            (r#"semver("1.2.03-rc", true).patch()"#, r#"3"#, 2),
            (r#"semver("1.2.0a", true)"#, r#"err: Invalid character(s) found in patch number "0a""#, 1),
            (r#"semver("1.2.a", true)"#, r#"err: Invalid character(s) found in patch number "a""#, 1),
            (r#"semver("1.0a.0", true)"#, r#"err: Invalid character(s) found in minor number "0a""#, 1),
            (r#"semver("1.2.-1", true)"#, r#"obj:kubernetes.Semver"#, 1),
            (r#"semver("", true)"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 0),
            (r#"semver("v", true)"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (r#"semver(".", true)"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (r#"semver("..", true)"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (r#"semver("1...", true)"#, r#"err: strconv.ParseUint: parsing "": invalid syntax"#, 1),
            (r#"semver("1.2.3.4", true)"#, r#"err: Invalid character(s) found in patch number "3.4""#, 1),
            (r#"semver("1.2.3.4")"#, r#"err: Invalid character(s) found in patch number "3.4""#, 1),
            (r#"isSemver("1.2.3.4")"#, r#"false"#, 1),
            (r#"isSemver("1.2.3-x.y.z+a.b")"#, r#"true"#, 2),
            (r#"isSemver("1.2.3", false)"#, r#"true"#, 1),
            (r#"isSemver("v1", true)"#, r#"true"#, 1),
            (r#"semver("1.0.0").major() == 1"#, r#"true"#, 3),
            // Go quotes unprintable characters; an unassigned one (U+0378), which Go also
            // escapes, is not known here.
            (r#"semver("1.2.3-a\u00a0b")"#, r#"err: Invalid character(s) found in prerelease "a\u00a0b""#, 1),
            (r#"semver("1.2.3-a\u00adb")"#, r#"err: Invalid character(s) found in prerelease "a\u00adb""#, 1),
            (r#"semver("1.2.3-a\u200bb")"#, r#"err: Invalid character(s) found in prerelease "a\u200bb""#, 1),
            (r#"semver("1.2.3-a\u2028b")"#, r#"err: Invalid character(s) found in prerelease "a\u2028b""#, 1),
            (r#"semver("1.2.3-a\ue000b")"#, r#"err: Invalid character(s) found in prerelease "a\ue000b""#, 1),
            (r#"semver("1.2.3-a\U0001F600b")"#, r#"err: Invalid character(s) found in prerelease "a😀b""#, 1),
            (r#"semver("1.2.3-a\u0085b")"#, r#"err: Invalid character(s) found in prerelease "a\u0085b""#, 1),
            (r#"semver("1.2.3-a\x01b")"#, r#"err: Invalid character(s) found in prerelease "a\x01b""#, 1),
            (r#"semver("1.2.3-a\x7fb")"#, r#"err: Invalid character(s) found in prerelease "a\x7fb""#, 1),
            (r#"semver("1.2.3-a\ufeffb")"#, r#"err: Invalid character(s) found in prerelease "a\ufeffb""#, 1),
            (
                r#"semver("1.2.3-a\U0010FFFDb")"#,
                r#"err: Invalid character(s) found in prerelease "a\U0010fffdb""#,
                1,
            ),
            (r#"semver("1.2.3-e\u0301")"#, r#"err: Invalid character(s) found in prerelease "é""#, 1),
            (r#"semver("1.2.3-a\u3000b")"#, r#"err: Invalid character(s) found in prerelease "a\u3000b""#, 1),
            (r#"semver("1.2.3-a\ufffeb")"#, r#"err: Invalid character(s) found in prerelease "a\ufffeb""#, 1),
        ]);
    }
}
