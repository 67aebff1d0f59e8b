//! The engines: one per configuration (fuel metered or not), each with its linker, the set of
//! imports it provides, its compiled-code caches and an epoch ticker.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::{self, WasiP1Ctx};

use super::cache::{DiskCache, MemoryCache};
use super::limiter::MemoryLimiter;
use super::{Allocator, EPOCH_TICK, WasmConfig};
use crate::Error;
use crate::limits::ByteSize;

/// Store data of one run.
pub(super) struct RunState {
    pub(super) wasi: WasiP1Ctx,
    pub(super) limiter: MemoryLimiter,
}

/// An engine, its linker and caches, for one engine configuration (fuel on or off).
pub(super) struct EngineSet {
    pub(super) engine: Engine,
    pub(super) linker: Linker<RunState>,
    pub(super) provided: HashSet<(String, String)>,
    pub(super) memory: MemoryCache<RunState>,
    pub(super) disk: Option<DiskCache>,
    ticker_stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for EngineSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSet")
            .field("disk", &self.disk)
            .finish_non_exhaustive()
    }
}

impl Drop for EngineSet {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

pub(super) fn build_engine_set(config: &WasmConfig, fuel: bool) -> Result<EngineSet, Error> {
    let engine_err = |what: &str, e: wasmtime::Error| Error::Engine(format!("{what}: {e:#}"));
    let mut c = Config::new();
    c.epoch_interruption(true)
        .consume_fuel(fuel)
        .max_wasm_stack(config.max_wasm_stack.as_usize())
        // The fiber stack holds the wasm stack plus host frames of WASI calls.
        .async_stack_size(config.max_wasm_stack.as_usize() + (1 << 20))
        .wasm_component_model(false);
    if let Allocator::Pooling { instances } = config.allocator {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_core_instances(instances)
            .total_memories(instances)
            .total_tables(instances.saturating_mul(4))
            .total_stacks(instances)
            .max_memory_size(crate::limits::MEMORY_CEILING.as_usize())
            .table_elements(1 << 20);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    let engine = Engine::new(&c).map_err(|e| engine_err("configuring wasmtime", e))?;
    let mut linker: Linker<RunState> = Linker::new(&engine);
    p1::add_to_linker_async(&mut linker, |s| &mut s.wasi).map_err(|e| engine_err("linking WASI", e))?;

    // What the linker provides, to refuse modules by name before instantiating them.
    let mut probe = Store::new(
        &engine,
        RunState {
            wasi: WasiCtxBuilder::new().build_p1(),
            limiter: MemoryLimiter::new(ByteSize(1)),
        },
    );
    let provided = linker
        .iter(&mut probe)
        .map(|(module, name, _)| (module.to_owned(), name.to_owned()))
        .collect();
    drop(probe);

    let disk = match &config.cache_dir {
        Some(dir) => Some(DiskCache::new(dir, &engine)?),
        None => None,
    };
    let ticker_stop = Arc::new(AtomicBool::new(false));
    spawn_ticker(engine.weak(), ticker_stop.clone())?;
    Ok(EngineSet {
        engine,
        linker,
        provided,
        memory: MemoryCache::new(),
        disk,
        ticker_stop,
    })
}

/// One thread per engine advances the epoch every [`EPOCH_TICK`] until the engine is dropped.
fn spawn_ticker(engine: wasmtime::EngineWeak, stop: Arc<AtomicBool>) -> Result<(), Error> {
    std::thread::Builder::new()
        .name("wrun-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .map(drop)
        .map_err(|e| Error::Engine(format!("starting the epoch thread: {e}")))
}
