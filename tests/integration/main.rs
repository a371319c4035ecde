//! Integration tests: the real gateway, in process, on 127.0.0.1 with rcgen certificates, in
//! front of real HTTPS mock webhooks; and the real binary for `check`, `review`, `serve` and
//! `registration`.
//! No network, no cluster. Every behaviour is the one docs/semantics.md describes.

mod support;

mod bad_input;
mod breaker;
mod ca_bundle;
mod cli;
mod cli_contract;
mod client_auth;
mod cluster;
mod control_plane;
mod deploy;
mod differential;
mod drain;
mod equivalence;
mod failure_policy;
mod faults;
mod loadtest_mock;
mod logs;
mod many_operations;
mod match_conditions;
mod matching;
mod metrics;
mod modes;
mod mutating;
mod mutating_policies;
mod oracle;
mod oracle_mutating;
mod oracle_webhooks;
mod overload;
mod policies;
mod prometheus;
mod readiness;
mod recording;
mod registration;
mod reload_and_tls;
mod replay;
mod replay_world;
mod safe_reload;
mod threads;
mod traces;
mod upstream_tls;
mod validating;
