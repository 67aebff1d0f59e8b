//! The WebAssembly backend: WASI preview 1 command modules, in process, under wasmtime.
//!
//! # What a helper gets
//! Its arguments, the guarded environment of its job, its stdin (bytes or closed), stdout and
//! stderr into capped [`Capture`]s, the worktree preopened (read-only unless the job says
//! `ReadWrite`; both directory and file operations are checked) and only the further
//! directories the job lists. Nothing else: no sockets (TCP, UDP and name lookup are denied;
//! preview 1 can only use sockets handed to it, and none are), no inherited stdio, env or
//! args, no host functions beyond `wasi_snapshot_preview1`.
//!
//! # What it cannot exceed
//! - wall time: an epoch ticker interrupts compiled code at the deadline, and a timer around
//!   the whole call stops a guest blocked inside a host call;
//! - fuel, when the job sets it (a separate engine meters fuel; others pay nothing for it);
//! - linear memory and tables ([`limiter`]): a growth past the limit traps and the run ends
//!   `OutOfMemory`;
//! - native stack: `max_wasm_stack`, so deep recursion traps instead of crashing the host;
//! - module size, before anything is compiled;
//! - output, through the shared capture.
//!
//! Every epoch tick the guest also yields to the tokio executor, so a CPU-bound helper does
//! not starve the other helpers running on the same worker thread.
//!
//! # What it does not guarantee
//! Compiled code is trusted to be wasmtime's: a bug in wasmtime or cranelift is outside what
//! this module can contain (the native sandbox is the layer for that).

mod cache;
mod limiter;
mod stdio;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module, PoolingAllocationConfig, Store,
    Trap, UpdateDeadline,
};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use self::cache::{DiskCache, MemoryCache};
use self::limiter::MemoryLimiter;
use self::stdio::CaptureStream;
use crate::Error;
use crate::capture::Capture;
use crate::checked::{Checked, Ended, MountRules};
use crate::job::{Access, Job, Mount, Program, Stdin, WasmModule};
use crate::limits::ByteSize;
use crate::outcome::{Backend, CacheUse, Outcome, Status};
use crate::sandbox::{BoxFuture, Sandbox};

/// How often the epoch ticks: the granularity of the wall-clock timeout and of yielding to
/// the executor. Epoch checks cost a few percent at any rate; 10 ms keeps a timeout within
/// 10 ms of its value and many helpers on one thread responsive.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The import module a preview 1 command may use.
const WASI_P1: &str = "wasi_snapshot_preview1";

/// How instances get their memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Allocator {
    /// Memory is mapped per instance when it starts. Lowest idle footprint.
    OnDemand,
    /// Slots are reserved up front for this many concurrent instances; instantiation is then
    /// a slot reuse. For hosts that run many helpers.
    Pooling {
        /// Concurrent instances (each reserves address space, not memory).
        instances: u32,
    },
}

/// Configuration of a [`WasmSandbox`]. [`WasmConfig::default`]: on-demand allocation, no disk
/// cache, 64 concurrent runs, 128 MiB module cap, 1 MiB wasm stack.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WasmConfig {
    /// Where compiled code is cached across processes; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// The instance allocator.
    pub allocator: Allocator,
    /// Runs executing at once; further runs wait their turn.
    pub max_concurrent: u32,
    /// Largest module accepted, checked before compiling.
    pub max_module_size: ByteSize,
    /// Native stack a guest may use; deeper recursion traps as a stack overflow.
    pub max_wasm_stack: ByteSize,
}

impl Default for WasmConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            allocator: Allocator::OnDemand,
            max_concurrent: 64,
            max_module_size: crate::limits::MAX_MODULE_SIZE,
            max_wasm_stack: ByteSize::mib(1),
        }
    }
}

/// Store data of one run.
struct RunState {
    wasi: WasiP1Ctx,
    limiter: MemoryLimiter,
}

/// An engine, its linker and caches, for one engine configuration (fuel on or off).
struct EngineSet {
    engine: Engine,
    linker: Linker<RunState>,
    provided: HashSet<(String, String)>,
    memory: MemoryCache<RunState>,
    disk: Option<DiskCache>,
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

/// Runs WASI preview 1 command modules. Create one per process (or per configuration) and
/// share it: engines, compiled code and the epoch ticker are reused by every run.
#[derive(Debug)]
pub struct WasmSandbox {
    config: WasmConfig,
    plain: OnceLock<Result<Arc<EngineSet>, String>>,
    fueled: OnceLock<Result<Arc<EngineSet>, String>>,
    permits: Semaphore,
}

/// How a prepared module was obtained, or why it may not run.
enum Prepared {
    Ready(InstancePre<RunState>, CacheUse),
    Refused(String),
}

/// The error the epoch callback raises at the deadline.
#[derive(Debug, thiserror::Error)]
#[error("wall-clock timeout")]
struct Deadline;

impl WasmSandbox {
    /// A sandbox with `config`. Checks the cache directory (created `0700` if missing; refused
    /// if another user owns it or others may write it). Engines are built on first use.
    pub fn new(config: WasmConfig) -> Result<Self, Error> {
        if let Some(dir) = &config.cache_dir {
            cache::ensure_private_dir(dir)?;
        }
        if config.max_concurrent == 0 {
            return Err(Error::Engine("max_concurrent must be greater than zero".into()));
        }
        if let Allocator::Pooling { instances } = config.allocator
            && instances < config.max_concurrent
        {
            return Err(Error::Engine(format!(
                "the pooling allocator has {instances} instance slots but max_concurrent is {}: the runs beyond {instances} would fail; give it at least as many slots as concurrent runs",
                config.max_concurrent
            )));
        }
        let permits = Semaphore::new(config.max_concurrent as usize);
        Ok(Self {
            config,
            plain: OnceLock::new(),
            fueled: OnceLock::new(),
            permits,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WasmConfig {
        &self.config
    }

    fn engine_set(&self, fuel: bool) -> Result<Arc<EngineSet>, Error> {
        let cell = if fuel { &self.fueled } else { &self.plain };
        cell.get_or_init(|| {
            build_engine_set(&self.config, fuel)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::Engine)
    }

    /// Whether wrun provides the import `module::name` to helpers (the WASI preview 1 functions
    /// of wasmtime-wasi's linker).
    pub fn provides(&self, module: &str, name: &str) -> Result<bool, Error> {
        let set = self.engine_set(false)?;
        Ok(set.provided.contains(&(module.to_owned(), name.to_owned())))
    }

    /// Compiles (or loads from cache) `module` for the engine its limits need, without running
    /// it. Returns the refusal reason if the module may not run.
    pub async fn precompile(&self, module: &WasmModule, fuel: bool) -> Result<Result<(), String>, Error> {
        let set = self.engine_set(fuel)?;
        Ok(match prepare(&set, module, &self.config).await? {
            Prepared::Ready(..) => Ok(()),
            Prepared::Refused(reason) => Err(reason),
        })
    }

    async fn run_wasm(&self, job: Job) -> Result<Outcome, Error> {
        if !matches!(job.program, Program::Wasm(_)) {
            return Err(Error::Unsupported {
                backend: "wasm",
                reason: "it is a native program; run it with the native sandbox".into(),
            });
        }
        let checked = Checked::new(job, MOUNT_RULES)?;
        let Program::Wasm(module) = &checked.program else {
            unreachable!("checked above");
        };
        let mut mounts = checked.mounts.clone();
        // The worktree is also the helper's working directory: preview 1 has no working
        // directory, and wasi-libc resolves relative paths against a preopen named `.`.
        if let Some(worktree) = checked.worktree() {
            mounts.push(Mount::new(worktree.host.clone(), ".", worktree.access));
        }
        // Protected paths of a writable mount: the run is confined with Landlock (or refused).
        #[cfg(target_os = "linux")]
        let confinement = crate::protect::LandlockPlan::for_mounts(&mounts)?;
        let set = self.engine_set(checked.limits.fuel.is_some())?;

        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Error::Engine("the sandbox is shutting down".into()))?;
        // The timeout counts from here: waiting for a permit is the host's queue, not the
        // helper's time.
        let deadline = Instant::now() + checked.limits.timeout;

        let (pre, cache_use) = match prepare(&set, module, &self.config).await? {
            Prepared::Ready(pre, cache_use) => (pre, cache_use),
            Prepared::Refused(reason) => return Ok(checked.refused(Backend::Wasm, reason)),
        };

        let stdout = Capture::new(checked.limits.stdout_cap);
        let stderr = Capture::new(checked.limits.stderr_cap);
        let execution = Execution {
            engine: set.engine.clone(),
            pre,
            name: module.name().to_owned(),
            args: checked.args.clone(),
            env: checked.env.clone(),
            stdin: checked.stdin.clone(),
            mounts,
            limits: checked.limits.clone(),
            deadline,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
        };
        #[cfg(target_os = "linux")]
        let executed = match confinement {
            Some(plan) => execution.run_confined(plan).await?,
            None => execution.run().await?,
        };
        #[cfg(not(target_os = "linux"))]
        let executed = execution.run().await?;
        Ok(checked.outcome(
            Ended {
                status: executed.status,
                stdout: stdout.finish(),
                stderr: stderr.finish(),
                fuel_consumed: executed.fuel_consumed,
                peak_memory: Some(executed.peak),
                cache: cache_use,
            },
            Backend::Wasm,
        ))
    }
}

/// Everything one run needs, owned, so that it can run on another thread.
struct Execution {
    engine: Engine,
    pre: InstancePre<RunState>,
    name: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Stdin,
    mounts: Vec<Mount>,
    limits: crate::Limits,
    deadline: Instant,
    stdout: Capture,
    stderr: Capture,
}

/// How a run ended.
struct Executed {
    status: Status,
    fuel_consumed: Option<u64>,
    peak: u64,
}

impl Execution {
    /// Runs the guest to its end on the current task.
    async fn run(self) -> Result<Executed, Error> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.arg(&self.name)
            .args(&self.args)
            .envs(&self.env)
            .stdout(CaptureStream(self.stdout.clone()))
            .stderr(CaptureStream(self.stderr.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        match &self.stdin {
            Stdin::Closed => {}
            Stdin::Bytes(bytes) => {
                wasi.stdin(MemoryInputPipe::new(bytes::Bytes::copy_from_slice(bytes)));
            }
            Stdin::Stream(fd) => {
                let reader = self::stdio::stream_reader(fd).map_err(|source| Error::Spawn {
                    what: "reading stdin".into(),
                    source,
                })?;
                wasi.stdin(wasmtime_wasi::cli::AsyncStdinStream::new(reader));
            }
        }
        for mount in &self.mounts {
            let perms = match mount.access {
                Access::ReadOnly => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(&mount.host, &mount.guest, perms)
                .map_err(|e| Error::Mount {
                    host: mount.host.clone(),
                    guest: mount.guest.clone(),
                    reason: format!("{e:#}"),
                })?;
        }

        let mut store = Store::new(
            &self.engine,
            RunState {
                wasi: wasi.build_p1(),
                limiter: MemoryLimiter::new(self.limits.memory),
            },
        );
        store.limiter(|s| &mut s.limiter);
        if let Some(fuel) = self.limits.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| Error::Engine(format!("setting fuel: {e}")))?;
        }
        let deadline = self.deadline;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Err(wasmtime::Error::new(Deadline))
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });

        let pre = self.pre;
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call_async(&mut store, ()).await
        };
        let result = tokio::time::timeout_at(deadline.into(), run).await;

        let status = match result {
            Err(_elapsed) => Status::TimedOut,
            Ok(Ok(())) => Status::Exited { code: 0 },
            Ok(Err(e)) => classify(&e, store.data().limiter.hit()),
        };
        let fuel_consumed = self
            .limits
            .fuel
            .map(|budget| budget.saturating_sub(store.get_fuel().unwrap_or(0)));
        let peak = store.data().limiter.peak() as u64;
        Ok(Executed {
            status,
            fuel_consumed,
            peak,
        })
    }

    /// Runs the guest on a thread of its own confined by `plan` (Landlock), with a runtime of
    /// its own: every file-system call of the guest is made from that thread or from threads
    /// it starts, all of which the confinement covers. The thread ends with the run, or as
    /// soon as the caller stops waiting for it (its future dropped): the guest yields at every
    /// epoch tick, and the run is dropped there.
    #[cfg(target_os = "linux")]
    async fn run_confined(self, plan: crate::protect::LandlockPlan) -> Result<Executed, Error> {
        let (mut tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("wrun-wasm-confined".into())
            .spawn(move || {
                let result = (|| {
                    plan.enforce()
                        .map_err(|e| Error::Engine(format!("confining the run with Landlock: {e}")))?;
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| Error::Engine(format!("starting the confined run's runtime: {e}")))?;
                    Ok(runtime.block_on(async {
                        tokio::select! {
                            result = self.run() => Some(result),
                            () = tx.closed() => None,
                        }
                    }))
                })();
                match result {
                    Ok(Some(result)) => {
                        let _ = tx.send(result);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::Engine(format!("starting the confined run's thread: {e}")))?;
        rx.await
            .map_err(|_| Error::Engine("the confined run's thread ended without a result".into()))?
    }
}

impl Sandbox for WasmSandbox {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn run<'a>(&'a self, job: Job) -> BoxFuture<'a, Result<Outcome, Error>> {
        Box::pin(self.run_wasm(job))
    }
}

/// Maps how wasmtime ended a run to a status. Never looks at message text.
fn classify(error: &wasmtime::Error, memory_limit_hit: bool) -> Status {
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return Status::Exited { code: exit.0 };
    }
    if error.downcast_ref::<Deadline>().is_some() {
        return Status::TimedOut;
    }
    if memory_limit_hit {
        return Status::OutOfMemory;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Status::OutOfFuel,
        Some(Trap::Interrupt) => Status::TimedOut,
        Some(trap) => Status::Trapped {
            message: trap.to_string(),
        },
        // A host function refused the call (an exit status of 126 or more, for one): the root
        // cause says what; the wasm backtrace around it is noise for a review.
        None => Status::Trapped {
            message: error.root_cause().to_string(),
        },
    }
}

/// As wasmtime's own CLI: any guest path, nested or `/` itself; no files (a preopen is a
/// directory).
const MOUNT_RULES: MountRules<'static> = MountRules {
    cover: &[],
    inside: &[],
    files: false,
};

fn build_engine_set(config: &WasmConfig, fuel: bool) -> Result<EngineSet, Error> {
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

/// Header of a WebAssembly core module: magic and version 1.
const CORE_MODULE_HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";
/// Header of a WebAssembly component: magic, version 0x0d, layer 1.
const COMPONENT_HEADER: [u8; 8] = *b"\0asm\x0d\0\x01\0";

async fn prepare(set: &Arc<EngineSet>, module: &WasmModule, config: &WasmConfig) -> Result<Prepared, Error> {
    if let Some(pre) = set.memory.get(module.sha256()) {
        return Ok(Prepared::Ready(pre, CacheUse::Memory));
    }
    let bytes = module.bytes();
    if bytes.len() as u64 > config.max_module_size.bytes() {
        return Ok(Prepared::Refused(format!(
            "the module is {} bytes, above the {} module size cap",
            bytes.len(),
            config.max_module_size
        )));
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

    let (compiled, cache_use) = match set
        .disk
        .as_ref()
        .and_then(|d| d.load(&set.engine, module.sha256()))
    {
        Some(compiled) => (compiled, CacheUse::Disk),
        None => {
            // Compiling takes milliseconds to seconds of CPU: keep it off the executor.
            let worker_set = set.clone();
            let worker_module = module.clone();
            let compiled = tokio::task::spawn_blocking(move || compile(&worker_set, &worker_module))
                .await
                .map_err(|e| Error::Engine(format!("compile task failed: {e}")))??;
            (compiled, CacheUse::Compiled)
        }
    };

    if let Some(reason) = check_interface(set, &compiled) {
        return Ok(Prepared::Refused(reason));
    }
    let pre = match set.linker.instantiate_pre(&compiled) {
        Ok(pre) => pre,
        Err(e) => {
            return Ok(Prepared::Refused(format!(
                "the module cannot be linked against WASI: {e:#}"
            )));
        }
    };
    set.memory.insert(*module.sha256(), pre.clone());
    Ok(Prepared::Ready(pre, cache_use))
}

fn compile(set: &EngineSet, module: &WasmModule) -> Result<Module, Error> {
    let compiled = Module::new(&set.engine, module.bytes()).map_err(|e| Error::InvalidModule {
        message: format!("{e:#}"),
    })?;
    if let Some(disk) = &set.disk
        && let Ok(serialized) = compiled.serialize()
    {
        disk.store(module.sha256(), &serialized);
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
