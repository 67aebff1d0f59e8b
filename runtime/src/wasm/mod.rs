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
mod engine;
mod limiter;
mod prepare;
mod run;
mod stdio;
#[cfg(target_os = "linux")]
mod threads;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use self::engine::{EngineSet, build_engine_set};
use self::prepare::{Prepared, prepare};
use self::run::Execution;
use crate::Error;
use crate::capture::Capture;
use crate::checked::{Checked, Ended, MountRules};
use crate::job::{Job, Mount, Program, WasmModule};
use crate::limits::ByteSize;
use crate::outcome::{Backend, Outcome};
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

/// Runs WASI preview 1 command modules. Create one per process (or per configuration) and
/// share it: engines, compiled code and the epoch ticker are reused by every run.
#[derive(Debug)]
pub struct WasmSandbox {
    config: WasmConfig,
    plain: OnceLock<Result<Arc<EngineSet>, String>>,
    fueled: OnceLock<Result<Arc<EngineSet>, String>>,
    permits: Semaphore,
    /// The threads runs are made on.
    #[cfg(target_os = "linux")]
    threads: threads::RunThreads,
}

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
            #[cfg(target_os = "linux")]
            threads: threads::RunThreads::default(),
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
            return Err(Error::Unsupported {
                backend: "wasm",
                reason: "it is a native program; run it with the native sandbox".into(),
            });
        };
        let mut mounts = checked.mounts.clone();
        // The worktree is also the helper's working directory: preview 1 has no working
        // directory, and wasi-libc resolves relative paths against a preopen named `.`.
        if let Some(worktree) = checked.worktree() {
            mounts.push(Mount::new(worktree.host.clone(), ".", worktree.access));
            // A directory mounted inside the worktree (`/work/.ai`) is reached by relative
            // paths too (`.ai/x`): wasi-libc picks the preopen with the longest matching name.
            let inner = format!("{}/", worktree.guest.trim_end_matches('/'));
            let nested: Vec<Mount> = checked
                .mounts
                .iter()
                .filter_map(|m| {
                    let rel = m.guest.strip_prefix(&inner)?;
                    Some(Mount::new(m.host.clone(), rel, m.access))
                })
                .collect();
            mounts.extend(nested);
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
        // A memory limit below what the module starts with would fail at instantiation with
        // wasmtime's words; say it in the job's.
        let declared = pre
            .module()
            .resources_required()
            .max_initial_memory_size
            .unwrap_or(0)
            .saturating_mul(64 << 10);
        if declared > checked.limits.memory.bytes() {
            return Ok(checked.refused(
                Backend::Wasm,
                format!(
                    "the module declares {} of initial linear memory, more than the memory limit of {}; give it at least that",
                    crate::ByteSize(declared),
                    checked.limits.memory
                ),
            ));
        }

        let stdout = Capture::with_records(checked.limits.stdout_cap, checked.limits.record_limits());
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
        let executed = execution.run_on_thread(confinement, &self.threads).await?;
        #[cfg(not(target_os = "linux"))]
        let executed = execution.run(false).await?;
        let records = stdout.records(matches!(executed.status, crate::Status::Exited { .. }));
        Ok(checked.outcome(
            Ended {
                status: executed.status,
                stdout: stdout.finish(),
                records,
                stderr: stderr.finish(),
                fuel_consumed: executed.fuel_consumed,
                peak_memory: Some(executed.peak),
                cache: cache_use,
            },
            Backend::Wasm,
        ))
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

/// Checks `job` as the wasm sandbox does before it runs one (limits, preopens), without
/// compiling or running anything: what a host's dry run (`wrun explain`) reports.
pub fn check(job: &Job) -> Result<(), Error> {
    Checked::new(job.clone(), MOUNT_RULES).map(drop)
}

/// As wasmtime's own CLI: any guest path, nested or `/` itself; no files (a preopen is a
/// directory).
const MOUNT_RULES: MountRules<'static> = MountRules {
    cover: &[],
    inside: &[],
    files: false,
    follows_links: false,
};
