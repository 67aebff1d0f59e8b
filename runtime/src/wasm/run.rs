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
    /// Runs the guest to its end on the current task.
    pub(super) async fn run(self) -> Result<Executed, Error> {
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

    /// Runs the guest on a thread of its own confined by `plan` (Landlock), with a runtime of
    /// its own: every file-system call of the guest is made from that thread or from threads
    /// it starts, all of which the confinement covers. The thread ends with the run, or as
    /// soon as the caller stops waiting for it (its future dropped): the guest yields at every
    /// epoch tick, and the run is dropped there.
    #[cfg(target_os = "linux")]
    pub(super) async fn run_confined(self, plan: crate::protect::LandlockPlan) -> Result<Executed, Error> {
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
