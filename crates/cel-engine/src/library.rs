//! The function libraries of the API server's CEL environment (k8s.io/apiserver
//! `pkg/cel/environment/base.go` at 1.36: cel-go's standard library and its `strings` v2,
//! `sets`, `lists` v3, optionals and two-variable comprehensions, and the Kubernetes
//! libraries of `pkg/cel/library`), each adding its overloads to a [`Registry`].

use crate::func::Registry;

mod format;
mod ip;
mod lists;
mod optional;
mod quantity;
mod regex;
mod semver;
mod sets;
pub(crate) mod standard;
mod strings;
mod url;

/// A registry with every library of the 1.36 environment.
pub fn standard() -> Registry {
    let mut registry = Registry::new();
    register_all(&mut registry);
    registry
}

/// Adds every library's overloads to `registry`.
pub fn register_all(registry: &mut Registry) {
    standard::register(registry);
    optional::register(registry);
    strings::register(registry);
    regex::register(registry);
    lists::register(registry);
    sets::register(registry);
    quantity::register(registry);
    semver::register(registry);
    ip::register(registry);
    url::register(registry);
    format::register(registry);
}
