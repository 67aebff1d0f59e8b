//! wrun's host layer: everything that turns an operator's policy, the upstream repository's
//! helper definitions and a request into a [`wrun_runtime::Job`], and the `wrun` command.
//!
//! This crate is the only place that reads wrun's own environment ([`ambient`]).
#![forbid(unsafe_code)]

pub mod ambient;
pub mod args;
pub mod audit;
pub mod check;
pub mod definitions;
pub mod expand;
pub mod findings;
pub mod git;
pub mod helper;
pub mod install;
pub mod policy;
pub mod protect;
pub mod resolve;
pub mod session;
pub mod shell;
pub mod untrusted;
pub mod worktree;

/// Test support: asserts that the schema checked in at `policies/<file>` is `current` (with
/// `WRUN_BLESS=1`, rewrites it first) and returns a validator for it.
#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a test switch, not wrun reading its environment
pub(crate) fn checked_in_schema(file: &str, current: &str) -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../policies")
        .join(file);
    if std::env::var_os("WRUN_BLESS").is_some() {
        std::fs::write(&path, current).expect("write schema");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == current,
        "policies/{file} is out of date: run `WRUN_BLESS=1 cargo test -p wrun-host schema`"
    );
    let schema: serde_json::Value = serde_json::from_str(current).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}
