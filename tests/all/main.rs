//! Workspace integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stderr)]

mod conformance;
mod native;
mod wasm_capabilities;
mod wasm_engine;
mod wasm_limits;
