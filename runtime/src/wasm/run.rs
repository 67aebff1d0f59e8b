//! One run: a store with the job's WASI context and limits, the guest called under the
//! deadline, its end classified.

use std::time::Instant;

use wasmtime::{Engine, InstancePre, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::engine::RunState;
use super::limiter::MemoryLimiter;
use super::stdio::CaptureStream;
use crate::Error;
use crate::capture::Capture;
use crate::job::{Access, Mount, Stdin};
use crate::outcome::Status;

/// The error the epoch callback raises at the deadline.
#[derive(Debug, thiserror::Error)]
#[error("wall-clock timeout")]
struct Deadline;

/// Everything one run needs, owned, so that it can run on another thread.
pub(super) struct Execution {
    pub(super) engine: Engine,
    pub(super) pre: InstancePre<RunState>,
    pub(super) name: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) stdin: Stdin,
    pub(super) mounts: Vec<Mount>,
    pub(super) limits: crate::Limits,
    pub(super) deadline: Instant,
    pub(super) stdout: Capture,
    pub(super) stderr: Capture,
}

/// How a run ended.
pub(super) struct Executed {
    pub(super) status: Status,
    pub(super) fuel_consumed: Option<u64>,
    pub(super) peak: u64,
}

impl Execution {
    /// Runs the guest to its end on the current task. With `block_here`, its file operations
    /// are made on the current thread (which must be the run's own: see
    /// [`Execution::run_on_thread`]) rather than each on tokio's blocking pool.
    pub(super) async fn run(self, block_here: bool) -> Result<Executed, Error> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.allow_blocking_current_thread(block_here);
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
                let reader = super::stdio::stream_reader(fd).map_err(|source| Error::Spawn {
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

    /// Runs the guest on a thread of its own, with a runtime of its own, its file operations
    /// made on that thread (a hop to a blocking pool per call costs more than most calls), and,
    /// with `plan`, confined by Landlock: every file-system call of the guest is made from that
    /// thread, which the confinement covers. The thread ends with the run, or as soon as the
    /// caller stops waiting for it (its future dropped): the guest yields at every epoch tick,
    /// and the run is dropped there. A guest blocked in a system call past the deadline (a read
    /// from a FIFO) is released by interrupting the call, so that the epoch deadline ends it.
    #[cfg(target_os = "linux")]
    pub(super) async fn run_on_thread(
        self,
        plan: Option<crate::protect::LandlockPlan>,
        threads: &super::threads::RunThreads,
    ) -> Result<Executed, Error> {
        let deadline = self.deadline;
        let (tx, mut rx) = tokio::sync::oneshot::channel::<Result<Executed, Error>>();
        let task = move |runtime: &tokio::runtime::Runtime, mut tx: tokio::sync::oneshot::Sender<_>| {
            let result = runtime.block_on(async {
                tokio::select! {
                    result = self.run(true) => Some(result),
                    () = tx.closed() => None,
                }
            });
            if let Some(result) = result {
                let _ = tx.send(result);
            }
        };
        let placed = match plan {
            None => threads.start(Box::new(move |runtime: &tokio::runtime::Runtime| {
                task(runtime, tx)
            }))?,
            Some(plan) => super::threads::start_dedicated(
                move || {
                    plan.enforce()
                        .map_err(|e| Error::Engine(format!("confining the run with Landlock: {e}")))
                },
                move |runtime| match runtime {
                    Ok(runtime) => task(runtime, tx),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                },
            )?,
        };
        let ended = |r: Result<Result<Executed, Error>, _>| {
            r.map_err(|_| Error::Engine("the run's thread ended without a result".into()))?
        };
        tokio::select! {
            result = &mut rx => {
                threads.finished(placed);
                return ended(result);
            }
            () = tokio::time::sleep_until((deadline + INTERRUPT_AFTER).into()) => {}
        }
        // Past the deadline and still running: blocked in a system call. Interrupt it until the
        // epoch deadline ends the run, for a bounded time. However the guest then ends (it may
        // see the interrupted call fail and exit), it ran out of time.
        let timed_out = |result| {
            ended(result).map(|executed| Executed {
                status: Status::TimedOut,
                ..executed
            })
        };
        let give_up = tokio::time::Instant::now() + INTERRUPT_FOR;
        while tokio::time::Instant::now() < give_up && placed.interrupter.interrupt(placed.run) {
            if let Ok(result) = tokio::time::timeout(INTERRUPT_EVERY, &mut rx).await {
                threads.finished(placed);
                return timed_out(result);
            }
        }
        match tokio::time::timeout(INTERRUPT_EVERY, rx).await {
            Ok(result) => {
                threads.finished(placed);
                timed_out(result)
            }
            // Blocked where a signal does not reach: the run is over for the caller; its
            // thread (not reused) ends when the call returns, its result dropped.
            Err(_) => Ok(Executed {
                status: Status::TimedOut,
                fuel_consumed: None,
                peak: 0,
            }),
        }
    }
}

/// How long after the deadline a run still going is taken to be blocked in a system call.
#[cfg(target_os = "linux")]
const INTERRUPT_AFTER: std::time::Duration = std::time::Duration::from_millis(50);
/// How often it is interrupted then.
#[cfg(target_os = "linux")]
const INTERRUPT_EVERY: std::time::Duration = std::time::Duration::from_millis(10);
/// For how long, before it is left to end on its own.
#[cfg(target_os = "linux")]
const INTERRUPT_FOR: std::time::Duration = std::time::Duration::from_secs(5);

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
