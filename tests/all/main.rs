//! Workspace integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod wasm_capabilities;
mod wasm_engine;
mod wasm_limits;
