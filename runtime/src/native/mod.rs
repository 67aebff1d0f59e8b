//! The native backend: a subprocess inside bubblewrap, behind the same [`Sandbox`] trait and
//! returning the same [`Outcome`] as the wasm backend.
//!
//! # What a helper gets
//! The job's program (an absolute path that exists inside the sandbox: under `/usr` or a bound
//! directory) and arguments; exactly the job's guarded environment plus `HOME=/tmp`,
//! `TMPDIR=/tmp` and a default `PATH` (`/usr/local/bin:/usr/bin:/bin`) unless the policy sets
//! one; stdin `/dev/null` or the job's bytes; the worktree at its guest path (default `/work`,
//! its working directory); the job's further directories. In bubblewrap: no network, no other
//! host files (see [`bwrap`] for the profile), a seccomp filter (see [`seccomp`]).
//!
//! # What it cannot exceed
//! Wall time (the whole process tree is killed at the deadline); CPU seconds (`RLIMIT_CPU`,
//! `SIGXCPU` then `SIGKILL` a second later); address space (`RLIMIT_AS` = the memory limit) and,
//! where the memory controller is available, a memory cgroup with the same limit; file
//! size (`RLIMIT_FSIZE`, `SIGXFSZ`); open files; processes (a pids cgroup when wrun can create
//! one, else `RLIMIT_NPROC`); no core dumps; `/tmp` size; output through the shared capture.
//!
//! # No survivors
//! bwrap is pid 1's parent of a fresh pid namespace and dies with its parent
//! (`--die-with-parent`): killing it ends every process in the namespace, `setsid` daemons and
//! double forks included. Where a pids cgroup exists, wrun also kills every member before `run`
//! returns. Pipes are drained with a bound, so a process holding stdout open cannot hang the
//! run. Helpers run with `oom_score_adj = 1000`: when memory runs out they are the kernel's
//! first choice, never wrun.
//!
//! # Starting processes
//! Processes are started by spawners (see [`pool`]): small supervisors forked from the host
//! ahead of time, already in their own cgroups, which start each program the way
//! `posix_spawn` does and are reused after sandboxed runs. A run therefore pays neither for
//! forking a large host nor for creating and joining cgroups, and everything a helper forks is
//! born inside its cgroups. A spawner dies with the host (a parent-death signal), and the
//! helper with its spawner.
//!
//! # Sandbox mode
//! [`SandboxMode::Require`] refuses to run when bwrap is missing or fails its launch probe;
//! [`SandboxMode::Auto`] runs unsandboxed instead (same env guard, rlimits, cgroup, timeout,
//! process-group kill and caps, and the Outcome says `unsandboxed` with the reason);
//! [`SandboxMode::Off`] never sandboxes. Unsandboxed, a `setsid` daemon escapes the process
//! group; only the pids cgroup (when available) catches it.

pub(crate) mod bwrap;
mod cgroup;
mod pool;
pub(crate) mod seccomp;
mod spawn;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Error;
use crate::checked::{Checked, Ended, MountRules};
use crate::job::{Job, Mount, Program};
use crate::outcome::{Backend, CacheUse, Confinement, Outcome};
use crate::sandbox::{BoxFuture, Sandbox};

pub use crate::job::SandboxMode;

/// Configuration of a [`NativeSandbox`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NativeConfig {
    /// Absolute path of the `bwrap` executable, as the host resolved it; `None` if not found.
    pub bwrap: Option<PathBuf>,
    /// The sandbox mode.
    pub mode: SandboxMode,
}

impl NativeConfig {
    /// A configuration with `bwrap` at `path` (or none) and `mode`.
    pub fn new(bwrap: Option<PathBuf>, mode: SandboxMode) -> Self {
        Self { bwrap, mode }
    }
}

/// Runs native helpers. Create one per process and share it: the bwrap profile and the seccomp
/// program are built once, and the launch probe runs once.
#[derive(Debug)]
pub struct NativeSandbox {
    config: NativeConfig,
    base_args: Vec<OsString>,
    seccomp: OnceLock<Result<Vec<u8>, String>>,
    probe: tokio::sync::OnceCell<Result<(), String>>,
    pool: pool::Pool,
    /// An empty read-only directory bound over protected paths that do not exist.
    empty: tempfile::TempDir,
}

/// The default `PATH` inside the sandbox when the policy sets none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The probe program: present on every Debian-like system under `/usr`.
const PROBE_PROGRAM: &str = "/usr/bin/true";

impl NativeSandbox {
    /// A native sandbox. Nothing is spawned until the first run.
    ///
    /// It makes the calling process non-dumpable (`PR_SET_DUMPABLE` 0, which its spawners
    /// inherit): a helper that runs unsandboxed under the same user may not read the host's
    /// environment or memory through `/proc/PID/environ`, `/proc/PID/mem`, `process_vm_readv`
    /// or `ptrace`. It also means no core dumps of the host.
    ///
    /// It finds where runs get their cgroups, once per process: on a cgroup v2 host whose
    /// controllers are delegated to the process's own cgroup, and where the process is alone
    /// in it, that means moving the process into a leaf `wrun` of that cgroup (see `wrun
    /// doctor`).
    pub fn new(config: NativeConfig) -> Result<Self, Error> {
        if let Some(bwrap) = &config.bwrap
            && !bwrap.is_absolute()
        {
            return Err(Error::Program {
                path: bwrap.clone(),
                reason: "the bwrap path must be absolute (resolve it before handing it to the runtime)"
                    .into(),
            });
        }
        nix::sys::prctl::set_dumpable(false).map_err(|e| Error::Spawn {
            what: "making wrun non-dumpable".into(),
            source: e.into(),
        })?;
        // Before any process is forked: enabling v2 controllers needs wrun alone in its cgroup.
        cgroup::layout();
        let empty = tempfile::Builder::new()
            .prefix("wrun-empty-")
            .tempdir()
            .map_err(|source| Error::Spawn {
                what: "creating the empty directory for missing protected paths".into(),
                source,
            })?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(empty.path(), std::fs::Permissions::from_mode(0o555)).map_err(
                |source| Error::Spawn {
                    what: "making the empty directory read-only".into(),
                    source,
                },
            )?;
        }
        Ok(Self {
            config,
            base_args: bwrap::base_args(),
            seccomp: OnceLock::new(),
            probe: tokio::sync::OnceCell::new(),
            pool: pool::Pool::default(),
            empty,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NativeConfig {
        &self.config
    }

    /// The bwrap command line a job would run with (after `bwrap`), for `wrun explain` and
    /// benchmarks. The environment is not part of it: bwrap inherits exactly the job's.
    pub fn command_line(&self, job: &Job) -> Result<Vec<OsString>, Error> {
        let Program::Native(program) = &job.program else {
            return Err(Error::Unsupported {
                backend: "native",
                reason: "it is a wasm module".into(),
            });
        };
        let program = program.clone();
        Ok(self.bwrap_args(&Checked::new(job.clone(), MOUNT_RULES)?, &program))
    }

    fn bwrap_args(&self, job: &Checked, program: &Path) -> Vec<OsString> {
        let workdir = job.worktree().map_or("/", |w| w.guest.as_str());
        bwrap::job_args(
            &self.base_args,
            job.limits.tmp_size.bytes(),
            &job.mounts,
            self.empty.path(),
            workdir,
            program,
            &job.args,
        )
    }

    /// What this machine offers the native backend, for diagnostics (`wrun doctor`).
    pub async fn report(&self) -> Vec<(&'static str, String)> {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "absent".into())
        };
        let bwrap = match &self.config.bwrap {
            Some(path) => format!("{} ({})", path.display(), spawn::version(path).await),
            None => "not found".into(),
        };
        let seccomp = match self.seccomp_program() {
            Ok(bpf) => format!("filter builds ({} BPF instructions)", bpf.len() / 8),
            Err(e) => e,
        };
        let lsm = read("/sys/kernel/security/lsm");
        vec![
            ("bwrap", bwrap),
            (
                "user.max_user_namespaces",
                read("/proc/sys/user/max_user_namespaces"),
            ),
            (
                "kernel.unprivileged_userns_clone",
                read("/proc/sys/kernel/unprivileged_userns_clone"),
            ),
            (
                "kernel.apparmor_restrict_unprivileged_userns",
                read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            ),
            ("seccomp", seccomp),
            (
                "limits enforced by",
                cgroup::describe(),
            ),
            (
                "landlock",
                match crate::sys::landlock::abi() {
                    Some(abi) => format!(
                        "available (ABI {abi}): keeps protected paths of writable worktrees read-only for wasm helpers"
                    ),
                    None if lsm.split(',').any(|m| m == "landlock") => {
                        "listed in the LSMs but refused to this process (a container's seccomp profile?): writable wasm runs with protected paths are refused".into()
                    }
                    None => "unavailable: writable wasm runs with protected paths are refused".into(),
                },
            ),
            ("running as", format!("uid {}", nix::unistd::geteuid())),
            ("mode", format!("{:?}", self.config.mode)),
            (
                "launch probe",
                match self.probe().await {
                    Ok(()) => "ok: native helpers run in bubblewrap".into(),
                    Err(e) => e,
                },
            ),
        ]
    }

    /// The seccomp program (BPF) handed to bwrap, built on first use.
    pub fn seccomp_program(&self) -> Result<&[u8], String> {
        self.seccomp
            .get_or_init(seccomp::build)
            .as_deref()
            .map_err(Clone::clone)
    }

    /// Whether bwrap works here: it exists, the seccomp program builds, and a trivial job runs
    /// in the full profile. Runs once; the answer (or the reason, with a fix) is cached.
    pub async fn probe(&self) -> Result<(), String> {
        self.probe
            .get_or_init(|| async {
                const INSTALL: &str = "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) \
                                       or configure its absolute path";
                let Some(bwrap) = &self.config.bwrap else {
                    return Err(format!("bwrap was not found: {INSTALL}"));
                };
                if !bwrap.is_file() {
                    return Err(format!("bwrap was not found at {}: {INSTALL}", bwrap.display()));
                }
                let bpf = self.seccomp_program()?;
                let job = Checked::new(Job::native(PROBE_PROGRAM), MOUNT_RULES).map_err(|e| e.to_string())?;
                let args = bwrap::job_args(
                    &self.base_args,
                    1 << 20,
                    &[],
                    self.empty.path(),
                    "/",
                    Path::new(PROBE_PROGRAM),
                    &[],
                );
                let env = vec![("PATH".to_owned(), DEFAULT_PATH.to_owned())];
                let out = spawn::run(spawn::Launch {
                    program: bwrap,
                    args: &args,
                    env: &env,
                    job: &job,
                    seccomp: Some(bpf),
                    sandboxed: true,
                    pool: &self.pool,
                })
                .await
                .map_err(|e| e.to_string())?;
                if out.status.success() {
                    return Ok(());
                }
                let mut reason = format!(
                    "{} failed its launch probe ({:?}): {}",
                    bwrap.display(),
                    out.status,
                    out.stderr.text().trim()
                );
                match bwrap::userns_diagnosis() {
                    Some(why) => reason.push_str(&format!("; {why}")),
                    None => reason.push_str(
                        "; if wrun runs in a container, its seccomp profile may block the namespaces bwrap needs",
                    ),
                }
                Err(reason)
            })
            .await
            .clone()
    }

    async fn run_native(&self, job: Job) -> Result<Outcome, Error> {
        let Program::Native(program) = &job.program else {
            return Err(Error::Unsupported {
                backend: "native",
                reason: "it is a wasm module; run it with the wasm sandbox".into(),
            });
        };
        if !program.is_absolute() {
            return Err(Error::Program {
                path: program.clone(),
                reason: "native programs must be absolute paths (the host resolves bare names on its PATH)"
                    .into(),
            });
        }
        // Checked once, before anything is spawned, whichever path runs.
        let job = Checked::new(job, MOUNT_RULES)?;
        let Program::Native(program) = job.program.clone() else {
            return Err(Error::Unsupported {
                backend: "native",
                reason: "it is a wasm module; run it with the wasm sandbox".into(),
            });
        };
        let mode = job.mode.unwrap_or(self.config.mode);
        let mut vars = job.env.clone();
        for (name, value) in [("HOME", "/tmp"), ("TMPDIR", "/tmp"), ("PATH", DEFAULT_PATH)] {
            if !vars.iter().any(|(n, _)| n == name) {
                vars.push((name.to_owned(), value.to_owned()));
            }
        }

        let sandboxed = match mode {
            SandboxMode::Off => Err("sandbox mode is off".to_owned()),
            SandboxMode::Require | SandboxMode::Auto => self.probe().await,
        };
        let (out, confinement) = match sandboxed {
            Ok(()) => {
                let bwrap = self
                    .config
                    .bwrap
                    .as_deref()
                    .ok_or_else(|| Error::SandboxUnavailable("no bwrap".into()))?;
                let bpf = self.seccomp_program().map_err(Error::SandboxUnavailable)?;
                let args = self.bwrap_args(&job, &program);
                // bwrap creates the mount points of missing protected paths in the writable
                // mount; they are removed again after the run.
                let out = spawn::run(spawn::Launch {
                    program: bwrap,
                    args: &args,
                    env: &vars,
                    job: &job,
                    seccomp: Some(bpf),
                    sandboxed: true,
                    pool: &self.pool,
                })
                .await;
                remove_mount_points(&job.missing_protected);
                (out?, Confinement::Bwrap)
            }
            Err(reason) if mode == SandboxMode::Require => {
                return Err(Error::SandboxUnavailable(format!(
                    "{reason}. The sandbox mode is `require`; fix the above or choose `auto` to run unsandboxed"
                )));
            }
            Err(reason) if job.mounts.iter().any(|m| !m.protected.is_empty()) => {
                return Err(Error::SandboxUnavailable(format!(
                    "{reason}, and without a sandbox the protected paths of a writable worktree ({}) cannot be kept read-only; run the helper read-only, or where bwrap works",
                    job.mounts
                        .iter()
                        .flat_map(|m| m.protected.iter().map(|p| p.display().to_string()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            Err(reason) => {
                // Without the sandbox there are no binds: a program named by its place in the
                // worktree (`/work/.ai/lint.sh`) runs from the worktree's host directory.
                let host_program = host_path(&job.mounts, &program);
                let args: Vec<OsString> = job.args.iter().map(OsString::from).collect();
                let out = spawn::run(spawn::Launch {
                    program: &host_program,
                    args: &args,
                    env: &vars,
                    job: &job,
                    seccomp: None,
                    sandboxed: false,
                    pool: &self.pool,
                })
                .await?;
                (out, Confinement::Unsandboxed { reason })
            }
        };
        Ok(job.outcome(
            Ended {
                status: out.status,
                stdout: out.stdout,
                records: out.records,
                stderr: out.stderr,
                fuel_consumed: None,
                peak_memory: out.peak_memory,
                cache: CacheUse::default(),
            },
            Backend::Native {
                confinement,
                enforcement: out.enforcement,
            },
        ))
    }
}

impl Sandbox for NativeSandbox {
    fn name(&self) -> &'static str {
        "native"
    }

    fn run<'a>(&'a self, job: Job) -> BoxFuture<'a, Result<Outcome, Error>> {
        Box::pin(self.run_native(job))
    }

    fn binds<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match job.sandbox_mode().unwrap_or(self.config.mode) {
                SandboxMode::Off => false,
                SandboxMode::Require | SandboxMode::Auto => self.probe().await.is_ok(),
            }
        })
    }
}

/// Removes mount points bwrap created, innermost first, if they are still empty directories.
fn remove_mount_points(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Checks `job` as the native sandbox does before it runs one (an absolute program, limits,
/// mounts: guest paths, host paths, mount points), without running anything or needing bwrap:
/// what a host's dry run (`wrun explain`) reports.
pub fn check(job: &Job) -> Result<(), Error> {
    if let Program::Native(program) = &job.program
        && !program.is_absolute()
    {
        return Err(Error::Program {
            path: program.clone(),
            reason: "native programs must be absolute paths (the host resolves bare names on its PATH)"
                .into(),
        });
    }
    Checked::new(job.clone(), MOUNT_RULES).map(drop)
}

/// Why the native sandbox cannot mount anything at guest path `guest`, if it cannot: not
/// absolute, `.` or `..` in it, or one of its own system directories covered or entered
/// (`/usr`, `/proc`, `/tmp` itself …). A policy's binds are checked with this when it is read.
pub fn guest_path_problem(guest: &str) -> Option<String> {
    let inside = |a: &str, b: &str| b == "/" || a.starts_with(&format!("{}/", b.trim_end_matches('/')));
    if !guest.starts_with('/') || guest.split('/').any(|c| c == ".." || c == ".") || guest.contains("//") {
        return Some("the guest path must be absolute, without `.` or `..` components".into());
    }
    let guest = if guest == "/" {
        guest
    } else {
        guest.trim_end_matches('/')
    };
    if let Some(r) = MOUNT_RULES
        .cover
        .iter()
        .find(|r| guest == **r || inside(r, guest))
    {
        return Some(format!("the guest path would cover {r} of the sandbox"));
    }
    if let Some(r) = MOUNT_RULES.inside.iter().find(|r| inside(guest, r)) {
        return Some(format!(
            "the guest path lies inside {r}, which the sandbox mounts read-only or for itself"
        ));
    }
    None
}

/// Where a path of the sandbox's view lies on the host: under a mount's guest path, the same
/// place under its host directory; anything else is the same path.
fn host_path(mounts: &[Mount], program: &Path) -> PathBuf {
    mounts
        .iter()
        .find_map(|m| program.strip_prefix(&m.guest).ok().map(|rel| m.host.join(rel)))
        .unwrap_or_else(|| program.to_owned())
}

/// What the native sandbox can mount: nothing that is or covers its own system directories,
/// or lies inside its read-only or special ones; inside `/tmp` (its private tmpfs) and
/// elsewhere is fine. Files may be bound (a sanitized `.git/config`).
const MOUNT_RULES: MountRules<'static> = MountRules {
    cover: &[
        "/", "/usr", "/etc", "/proc", "/dev", "/tmp", "/bin", "/sbin", "/lib", "/lib64", "/sys",
    ],
    inside: &["/usr", "/proc", "/dev", "/sys", "/bin", "/sbin", "/lib", "/lib64"],
    files: true,
    follows_links: true,
};
