//! The uniform result of a run, whatever the backend.
//!
//! A helper that hits a limit is not an error of wrun: it ends with a [`Status`] here. Errors
//! ([`crate::Error`]) are for jobs wrun cannot start and for wrun itself failing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capture::{Captured, Records};
use crate::env::DroppedEnv;
use crate::limits::ByteSize;

/// How the helper ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Status {
    /// The helper exited with this code (0 when a wasm `_start` returned).
    Exited {
        /// The exit code.
        code: i32,
    },
    /// The wall-clock timeout expired.
    TimedOut,
    /// The fuel budget ran out.
    OutOfFuel,
    /// The helper asked for more memory than its limit.
    OutOfMemory,
    /// The helper crashed: a wasm trap (unreachable, stack overflow, out-of-bounds access...).
    Trapped {
        /// What trapped.
        message: String,
    },
    /// A native helper was killed by this signal (for the sandboxed path: an exit code of
    /// 129-159 from bwrap, which reports a signalled child as 128 + N, as shells do).
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// A native helper used up its CPU-time limit (`SIGXCPU`).
    OutOfCpu,
    /// A native helper tried to write past the file-size limit (`SIGXFSZ`).
    FileTooLarge,
    /// wrun refused to run the job for a policy reason (an import it does not provide, a
    /// component where a module was expected, a module over the size cap).
    Refused {
        /// Why, and what to do about it.
        reason: String,
    },
}

impl Status {
    /// Whether the helper ran to an exit with code 0.
    pub fn success(&self) -> bool {
        matches!(self, Status::Exited { code: 0 })
    }
}

impl std::fmt::Display for Status {
    /// How the helper ended, for a person: `exited with code 1`, `timed out`, …
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Exited { code } => write!(f, "exited with code {code}"),
            Status::TimedOut => f.write_str("timed out"),
            Status::OutOfFuel => f.write_str("ran out of fuel"),
            Status::OutOfMemory => f.write_str("exceeded its memory limit"),
            Status::Trapped { message } => write!(f, "trapped: {message}"),
            Status::Signaled { signal } => write!(f, "was killed by signal {signal}"),
            Status::OutOfCpu => f.write_str("used up its CPU time"),
            Status::FileTooLarge => f.write_str("tried to write past its file-size limit"),
            Status::Refused { reason } => write!(f, "was refused: {reason}"),
        }
    }
}

/// Which backend ran the helper and how it was confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Backend {
    /// In-process WebAssembly under wasmtime: always sandboxed.
    Wasm,
    /// A native process.
    Native {
        /// How it was confined.
        confinement: Confinement,
        /// What enforced its process and memory limits.
        enforcement: Enforcement,
    },
}

/// How a native helper was confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Confinement {
    /// Inside bubblewrap with seccomp.
    Bwrap,
    /// Not sandboxed (mode `auto` without a working bwrap, or mode `off`): limits, env guard
    /// and output caps still applied.
    Unsandboxed {
        /// Why.
        reason: String,
    },
}

/// What enforced a native helper's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    /// What bounded its number of processes (a cgroup also let wrun kill every survivor).
    pub processes: Mechanism,
    /// What bounded its memory: a cgroup for the whole run (its /tmp included in the sandbox),
    /// or `RLIMIT_AS` for each process only.
    pub memory: Mechanism,
}

/// One way a limit is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// A cgroup of the unified hierarchy (`pids.max`, `memory.max`).
    CgroupV2,
    /// A cgroup of a v1 hierarchy (`pids.max`, `memory.limit_in_bytes`).
    CgroupV1,
    /// Resource limits only: `RLIMIT_NPROC` (which binds no process of kernel uid 0), or
    /// `RLIMIT_AS` per process.
    Rlimit,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::CgroupV2 => "cgroup v2",
            Mechanism::CgroupV1 => "cgroup v1",
            Mechanism::Rlimit => "rlimits only",
        })
    }
}

/// Resources the run used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Wall time from start to end, including instantiation.
    #[serde(with = "crate::limits::duration_ms", rename = "wall_time_ms")]
    pub wall_time: Duration,
    /// Fuel consumed, when fuel was metered.
    pub fuel_consumed: Option<u64>,
    /// Peak linear memory of the instance (wasm), when known.
    pub peak_memory: Option<ByteSize>,
    /// Whether the compiled module came from a cache (memory or disk) instead of a compile.
    pub cache: CacheUse,
}

/// Where the compiled code of a run came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheUse {
    /// Not applicable (nothing compiled, or the job was refused before).
    #[default]
    None,
    /// The in-memory cache of this process.
    Memory,
    /// The on-disk cache.
    Disk,
    /// Compiled for this run.
    Compiled,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// How the helper ended.
    pub status: Status,
    /// Standard output as captured.
    pub stdout: Captured,
    /// The records (findings, rules, the tool) read from stdout as it was written, whole, up
    /// to the `findings` and `findings_cap` limits, whatever the stdout cap kept; those past
    /// them counted as dropped.
    #[serde(default, skip_serializing_if = "Records::is_empty")]
    pub records: Records,
    /// Standard error as captured.
    pub stderr: Captured,
    /// Resources used.
    pub usage: Usage,
    /// Which backend ran it.
    pub backend: Backend,
    /// Environment variables the runtime's guard dropped (names only).
    pub env_dropped: Vec<DroppedEnv>,
    /// What the helper created beneath a writable mount with the name of one of its protected
    /// paths (a nested `.git` with hooks, when `.git` is protected), removed after the run, as
    /// guest paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// What the host did around the run that a reader of the outcome must know, in words (where
    /// nothing could bind upstream's `.ai/` over the worktree's, that it was written into the
    /// worktree instead). The runtime itself adds none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Outcome {
    /// An outcome for a job refused before it ran.
    pub fn refused(backend: Backend, reason: impl Into<String>, env_dropped: Vec<DroppedEnv>) -> Self {
        Self {
            status: Status::Refused {
                reason: reason.into(),
            },
            stdout: Captured::empty(),
            records: Records::default(),
            stderr: Captured::empty(),
            usage: Usage::default(),
            backend,
            env_dropped,
            removed: Vec::new(),
            notes: Vec::new(),
        }
    }
}
