//! The one contract every backend implements.

use std::future::Future;
use std::pin::Pin;

use crate::{Error, Job, Outcome};

/// A boxed, sendable future: what [`Sandbox::run`] returns so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs jobs. Implemented by the wasm backend and the native backend; a host holds a
/// `dyn Sandbox` and gets the same [`Outcome`] from either.
///
/// `run` never panics on input and never outlives the job's timeout by more than the time it
/// takes to tear the helper down. A helper hitting a limit returns `Ok` with a status saying
/// which; `Err` means the job could not be started (invalid limits, unreadable module, bad
/// mount) or wrun failed.
///
/// **Cancellation.** Dropping the future `run` returned (a host's own timeout, a client gone)
/// stops the run: a wasm guest is dropped at its next epoch tick (on the caller's task, or on
/// the thread of a confined run, which then ends), a native helper's whole process tree is
/// killed and its cgroup emptied, and its spawner retired. Nothing of the run is left once
/// the drop has returned, or promptly after.
pub trait Sandbox: Send + Sync + std::fmt::Debug {
    /// Short backend name, for diagnostics.
    fn name(&self) -> &'static str;

    /// Runs one job to completion.
    fn run<'a>(&'a self, job: Job) -> BoxFuture<'a, Result<Outcome, Error>>;

    /// Whether `job`'s directories would be mounted where the job says (binds, preopens): false
    /// where it would run without a sandbox, which mounts nothing (a native job in mode `off`,
    /// or `auto` where bwrap cannot run). A host that must place something over a path of the
    /// worktree asks this first, and otherwise writes it there. Every backend that confines
    /// binds, the default.
    fn binds<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, bool> {
        let _ = job;
        Box::pin(async { true })
    }
}
