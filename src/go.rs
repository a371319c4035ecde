//! Ports of the Go standard library behaviour that kube-apiserver's decisions and messages
//! depend on.
//!
//! Why ports and not crates: what the API server accepts, and the words it refuses with, are
//! part of the decisions and messages the gateway must reproduce, and those are Go's. Crates
//! follow other specifications: `url` implements WHATWG URLs (Go's `net/url` is RFC 3986 with
//! its own leniencies and error texts), the `base64` crate has no mode that skips line breaks
//! and counts error offsets in the original input, `humantime` and friends read other duration
//! grammars, and no crate reproduces `strconv.Quote` or `encoding/json`'s syntax errors. Each
//! submodule names the Go source it follows and pins it with tables from Go's own tests.
//!
//! - [`base64`]: `encoding/base64.StdEncoding.DecodeString`, the decoding of every `[]byte`
//!   JSON field (`caBundle`, a webhook response's `patch`).
//! - [`duration`]: `time.ParseDuration`, in integers.
//! - [`json_errors`]: `encoding/json`'s scanner (syntax) and type error texts.
//! - [`json_marshal`]: how `encoding/json` writes strings and `json.RawMessage`.
//! - [`strconv`]: `strconv.Quote` (`%q`) and `strconv.Atoi` with its errors.
//! - [`url`]: the parts of `net/url.Parse` webhook URL validation relies on.

pub(crate) mod base64;
pub(crate) mod duration;
pub(crate) mod json_errors;
pub(crate) mod json_marshal;
pub(crate) mod strconv;
pub(crate) mod url;
