//! The one module of the runtime allowed to use `unsafe`. Each block says why it is sound.
#![allow(unsafe_code)]

use wasmtime::{Engine, Module};

/// Loads compiled code produced by [`Module::serialize`].
///
/// Callers must only pass bytes read from wrun's own cache: a file in a directory owned by the
/// current user and writable by nobody else, written atomically by this engine configuration,
/// whose SHA-256 matched the digest stored with it.
pub(crate) fn deserialize_module(engine: &Engine, compiled: &[u8]) -> wasmtime::Result<Module> {
    // SAFETY: `Module::deserialize` trusts its input to be the output of `Module::serialize`
    // (it maps it as executable code). The caller guarantees that provenance: the bytes come
    // from a user-private cache directory (checked owner and mode), were written by wrun via
    // atomic rename, and carry a SHA-256 that matched before this call; wasmtime additionally
    // checks the engine's compatibility header and rejects code from another configuration.
    unsafe { Module::deserialize(engine, compiled) }
}
