//! Module preparation: the bytes checked, compiled or loaded from a cache, their imports
//! checked against what the linker provides, and pre-instantiated.

use std::sync::Arc;

use wasmtime::{InstancePre, Module};

use super::engine::{EngineSet, RunState};
use super::{WASI_P1, WasmConfig};
use crate::Error;
use crate::job::WasmModule;
use crate::outcome::CacheUse;

/// How a prepared module was obtained, or why it may not run.
pub(super) enum Prepared {
    Ready(InstancePre<RunState>, CacheUse),
    Refused(String),
}

/// Header of a WebAssembly core module: magic and version 1.
const CORE_MODULE_HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";
/// Header of a WebAssembly component: magic, version 0x0d, layer 1.
const COMPONENT_HEADER: [u8; 8] = *b"\0asm\x0d\0\x01\0";

pub(super) async fn prepare(
    set: &Arc<EngineSet>,
    module: &WasmModule,
    config: &WasmConfig,
) -> Result<Prepared, Error> {
    if module.len() > config.max_module_size.bytes() {
        return Ok(Prepared::Refused(format!(
            "the module is {} bytes, above the {} module size cap",
            module.len(),
            config.max_module_size
        )));
    }
    // A module file whose identity was recorded: its digest, without reading it.
    let id = module.file_id();
    let indexed = id.and_then(|id| {
        set.memory
            .digest_of(&id)
            .or_else(|| set.disk.as_ref().and_then(|d| d.digest_of(&id)))
    });
    if let Some(sha256) = indexed
        && let Some(ready) = cached(set, &sha256)
    {
        if let Some(id) = id {
            set.memory.record(id, sha256);
        }
        return Ok(ready);
    }

    let bytes = module.bytes()?;
    let sha256 = *module.sha256()?;
    let remember = |sha256: [u8; 32]| {
        if let Some(id) = id {
            set.memory.record(id, sha256);
            if let Some(disk) = &set.disk {
                disk.record(&id, &sha256);
            }
        }
    };
    if let Some(ready) = cached(set, &sha256) {
        remember(sha256);
        return Ok(ready);
    }
    match bytes.get(..8) {
        Some(h) if h == CORE_MODULE_HEADER => {}
        Some(h) if h == COMPONENT_HEADER => {
            return Ok(Prepared::Refused(
                "the module is a WebAssembly component (WASI preview 2); wrun runs WASI preview 1 \
                 command modules: build the helper for wasm32-wasip1"
                    .into(),
            ));
        }
        _ => {
            return Err(Error::InvalidModule {
                message: "the file does not start with the WebAssembly module header (\\0asm, version 1)"
                    .into(),
            });
        }
    }

    // Compiling takes milliseconds to seconds of CPU: keep it off the executor.
    let worker_set = set.clone();
    let worker_module = module.clone();
    let compiled = tokio::task::spawn_blocking(move || compile(&worker_set, &worker_module))
        .await
        .map_err(|e| Error::Engine(format!("compile task failed: {e}")))??;
    let ready = ready(set, &sha256, compiled, CacheUse::Compiled);
    if matches!(ready, Prepared::Ready(..)) {
        remember(sha256);
    }
    Ok(ready)
}

/// The prepared module for `sha256` from the memory cache, or else compiled code from the disk
/// cache, prepared.
fn cached(set: &EngineSet, sha256: &[u8; 32]) -> Option<Prepared> {
    if let Some(pre) = set.memory.get(sha256) {
        return Some(Prepared::Ready(pre, CacheUse::Memory));
    }
    let compiled = set.disk.as_ref().and_then(|d| d.load(&set.engine, sha256))?;
    Some(ready(set, sha256, compiled, CacheUse::Disk))
}

/// `compiled`, checked against what the linker provides and pre-instantiated (and kept in the
/// memory cache), or why it may not run.
fn ready(set: &EngineSet, sha256: &[u8; 32], compiled: Module, cache_use: CacheUse) -> Prepared {
    if let Some(reason) = check_interface(set, &compiled) {
        return Prepared::Refused(reason);
    }
    match set.linker.instantiate_pre(&compiled) {
        Ok(pre) => {
            set.memory.insert(*sha256, pre.clone());
            Prepared::Ready(pre, cache_use)
        }
        Err(e) => Prepared::Refused(format!("the module cannot be linked against WASI: {e:#}")),
    }
}

fn compile(set: &EngineSet, module: &WasmModule) -> Result<Module, Error> {
    let compiled = Module::new(&set.engine, module.bytes()?).map_err(|e| Error::InvalidModule {
        message: format!("{e:#}"),
    })?;
    if let Some(disk) = &set.disk
        && let Ok(serialized) = compiled.serialize()
    {
        disk.store(module.sha256()?, &serialized);
    }
    Ok(compiled)
}

/// Refuses a module that imports anything but the WASI preview 1 functions wrun provides, or
/// that is not a command (no `_start`). One line per offending import.
fn check_interface(set: &EngineSet, module: &Module) -> Option<String> {
    let missing: Vec<String> = module
        .imports()
        .filter(|i| {
            !set.provided
                .contains(&(i.module().to_owned(), i.name().to_owned()))
        })
        .map(|i| {
            let what = if i.module() == WASI_P1 {
                "a WASI preview 1 function wrun does not provide".to_owned()
            } else {
                format!(
                    "module `{}` is not WASI preview 1; helpers may import only `{WASI_P1}`",
                    i.module()
                )
            };
            format!("imports `{}::{}`: {what}", i.module(), i.name())
        })
        .collect();
    if !missing.is_empty() {
        return Some(missing.join("\n"));
    }
    let has_start = module
        .exports()
        .any(|e| e.name() == "_start" && matches!(e.ty(), wasmtime::ExternType::Func(_)));
    if !has_start {
        return Some("the module exports no `_start` function: it is not a WASI command (build a binary, not a library)".into());
    }
    None
}
