//! The one place the runtime starts processes: spawn, feed, drain, time out, kill, reap.
#![allow(clippy::disallowed_methods)]

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::wait::WaitStatus;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::cgroup::Cgroup;
use super::pool::Pool;
use crate::Error;
use crate::capture::Capture;
use crate::capture::Captured;
use crate::checked::Checked;
use crate::job::Stdin;
use crate::outcome::{Mechanism, Status};
use crate::sys::spawner::{Message, NoExec};

/// How long pipes are drained after the process tree is gone. A process that escaped the tree
/// (only possible unsandboxed, without a cgroup) and holds stdout open is abandoned after this.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Address space a process may reserve beyond its memory limit when a memory cgroup enforces
/// that limit (see `run`).
const ADDRESS_SPACE_HEADROOM: u64 = 8 << 30;

/// How long reaping may take after SIGKILL (a process in uninterruptible sleep).
const REAP_GRACE: Duration = Duration::from_secs(5);

pub(crate) struct Launch<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [OsString],
    pub(crate) env: &'a [(String, String)],
    pub(crate) job: &'a Checked,
    pub(crate) seccomp: Option<&'a [u8]>,
    /// In bwrap: the exit code encodes a signalled child as 128 + N.
    pub(crate) sandboxed: bool,
    pub(crate) pool: &'a Pool,
}

/// How a launched process ended and what it wrote; the caller adds what it knows (the backend,
/// the env drops, the whole wall time) to make the Outcome.
pub(crate) struct Launched {
    pub(crate) status: Status,
    pub(crate) stdout: Captured,
    pub(crate) records: crate::capture::Records,
    pub(crate) stderr: Captured,
    pub(crate) peak_memory: Option<u64>,
    /// What enforced the limits (a cgroup's, or rlimits only).
    pub(crate) enforcement: crate::outcome::Enforcement,
}

fn spawn_err(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Spawn {
        what: what.to_owned(),
        source,
    }
}

pub(crate) async fn run(launch: Launch<'_>) -> Result<Launched, Error> {
    let limits = &launch.job.limits;
    // The memory cgroup holds the helper's own memory and, in the sandbox, its /tmp (tmpfs
    // pages count there): memory + tmp_size, so that filling /tmp ends in ENOSPC, which a
    // tool can report, rather than in an out-of-memory kill.
    let cgroup_memory = if launch.sandboxed {
        limits.memory.bytes().saturating_add(limits.tmp_size.bytes())
    } else {
        limits.memory.bytes()
    };
    let mut lease = launch
        .pool
        .lease(limits.max_processes, cgroup_memory)
        .await
        .map_err(spawn_err("preparing a process"))?;
    // `RLIMIT_AS` counts address space reserved, not memory used: where a memory cgroup
    // bounds what the run uses, it only keeps a process from reserving without bound, and
    // leaves room for runtimes that reserve far more than they touch (node's V8, the JVM, Go).
    // Without one, it is the memory limit itself.
    let memory_cgroup = lease
        .cgroup()
        .is_some_and(|c| c.enforcement().memory != Mechanism::Rlimit);
    let address_space = if memory_cgroup {
        limits.memory.bytes().saturating_add(ADDRESS_SPACE_HEADROOM)
    } else {
        limits.memory.bytes()
    };
    // `(libc::RLIMIT_*, soft, hard)`, set by the spawner's child before exec.
    let mut rlimits: Vec<(u32, u64, u64)> = vec![
        (libc::RLIMIT_AS, address_space, address_space),
        (
            libc::RLIMIT_FSIZE,
            limits.max_file_size.bytes(),
            limits.max_file_size.bytes(),
        ),
        (
            libc::RLIMIT_NOFILE,
            limits.max_open_files.into(),
            limits.max_open_files.into(),
        ),
        (
            libc::RLIMIT_NPROC,
            limits.max_processes.into(),
            limits.max_processes.into(),
        ),
        (libc::RLIMIT_CORE, 0, 0),
        // No POSIX message queue can be created: they would be memory outside every cap.
        (libc::RLIMIT_MSGQUEUE, 0, 0),
    ];
    if let Some(cpu) = limits.cpu {
        // SIGXCPU at the limit, SIGKILL a second later if the helper ignores it.
        rlimits.push((libc::RLIMIT_CPU, cpu.as_secs(), cpu.as_secs() + 1));
    }
    let cwd = match (launch.job.worktree(), launch.sandboxed) {
        (Some(worktree), false) => worktree.host.as_path(),
        _ => Path::new("/"),
    };
    let mut argv: Vec<&OsStr> = Vec::with_capacity(launch.args.len() + 1);
    argv.push(launch.program.as_os_str());
    argv.extend(launch.args.iter().map(OsString::as_os_str));
    // A worktree of data only: made non-executable before bwrap binds it (an unsandboxed run
    // confines nothing, and its confinement says so).
    let no_exec = match launch.job.worktree() {
        Some(worktree) if launch.sandboxed => worktree.no_exec_except.as_deref().map(|except| NoExec {
            dir: worktree.host.as_path(),
            except,
        }),
        _ => None,
    };
    // Unsandboxed, the helper starts with no capabilities at all; in bwrap, bwrap drops them.
    let message = Message::new(
        launch.program,
        &argv,
        launch.env,
        cwd,
        &rlimits,
        !launch.sandboxed,
        no_exec,
    )
    .map_err(spawn_err(&format!("preparing {}", launch.program.display())))?;

    // The child's ends of its standard streams (and the seccomp program, its fd 3).
    let (stdin_child, stdin_parent) = match &launch.job.stdin {
        Stdin::Closed => (
            OwnedFd::from(std::fs::File::open("/dev/null").map_err(spawn_err("opening /dev/null"))?),
            None,
        ),
        Stdin::Bytes(_) => {
            let (read, write) = pipe().map_err(spawn_err("creating the stdin pipe"))?;
            (read, Some(write))
        }
        // The helper reads the file or pipe itself: nothing passes through wrun.
        Stdin::Stream(fd) => (fd.try_clone().map_err(spawn_err("passing stdin"))?, None),
    };
    let (stdout_parent, stdout_child) = pipe().map_err(spawn_err("creating the stdout pipe"))?;
    let (stderr_parent, stderr_child) = pipe().map_err(spawn_err("creating the stderr pipe"))?;
    let seccomp_fd = match launch.seccomp {
        Some(bpf) => Some(seccomp_fd(bpf).map_err(spawn_err("passing the seccomp program"))?),
        None => None,
    };
    let mut fds = vec![stdin_child.as_fd(), stdout_child.as_fd(), stderr_child.as_fd()];
    fds.extend(seccomp_fd.as_ref().map(AsFd::as_fd));

    let what = if no_exec.is_some() {
        format!(
            "starting {} in a user and mount namespace of its own, where the worktree is made non-executable (unprivileged user namespaces must be allowed, as bwrap itself needs)",
            launch.program.display()
        )
    } else {
        format!("starting {}", launch.program.display())
    };
    lease.start(&message, &fds).map_err(spawn_err(&what))?;
    drop(fds);
    drop((stdin_child, stdout_child, stderr_child, seccomp_fd));
    let deadline = tokio::time::Instant::now() + limits.timeout;

    if let (Some(stdin), Stdin::Bytes(bytes)) = (stdin_parent, &launch.job.stdin) {
        let mut stdin = tokio::net::unix::pipe::Sender::from_owned_fd(stdin)
            .map_err(spawn_err("watching the stdin pipe"))?;
        let bytes = bytes.clone();
        tokio::spawn(async move {
            // A helper that does not read its input closes the pipe: that is not an error.
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let stdout = Capture::with_records(limits.stdout_cap, limits.record_limits());
    let stderr = Capture::new(limits.stderr_cap);
    let pipe = |fd| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(spawn_err("watching an output pipe"))
    };
    let (stdout_pipe, stderr_pipe) = (pipe(stdout_parent)?, pipe(stderr_parent)?);

    // The pipes are drained while the process runs, and for at most DRAIN_GRACE after the
    // process tree is gone (a process that escaped it may hold them open).
    let gone = tokio::sync::Notify::new();
    let waiting = async {
        let waited = tokio::time::timeout_at(deadline, lease.wait()).await;
        // Whatever happened, nothing of the helper survives this point.
        lease.kill();
        let oom_killed = lease.oom_killed();
        let status = match waited {
            Ok(Ok(_)) if oom_killed => Ok(Status::OutOfMemory),
            Ok(Ok(exit)) => Ok(map_exit(exit, launch.sandboxed)),
            Ok(Err(e)) => Err(e),
            Err(_elapsed) => {
                let _ = tokio::time::timeout(REAP_GRACE, lease.wait()).await;
                Ok(Status::TimedOut)
            }
        };
        gone.notify_one();
        status
    };
    let draining = async {
        let both = async {
            tokio::join!(
                drain(stdout_pipe, stdout.clone()),
                drain(stderr_pipe, stderr.clone())
            );
        };
        tokio::select! {
            () = both => {}
            () = async {
                gone.notified().await;
                tokio::time::sleep(DRAIN_GRACE).await;
            } => {}
        }
    };
    let (status, ()) = tokio::join!(waiting, draining);
    let status = status.map_err(spawn_err(&what.replacen("starting", "running", 1)))?;
    let peak_memory = lease.cgroup().and_then(Cgroup::peak_memory);
    let enforcement = lease.cgroup().map_or(
        crate::outcome::Enforcement {
            processes: crate::outcome::Mechanism::Rlimit,
            memory: crate::outcome::Mechanism::Rlimit,
        },
        Cgroup::enforcement,
    );
    // A spawner is reused only after a sandboxed run that ended: see `pool`.
    lease.finish(launch.sandboxed && status != Status::TimedOut);
    let records = stdout.records(matches!(status, Status::Exited { .. }));
    Ok(Launched {
        status,
        stdout: stdout.finish(),
        records,
        stderr: stderr.finish(),
        peak_memory,
        enforcement,
    })
}

/// A pipe, both ends close-on-exec: `(read, write)`.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Copies a pipe into a capture until end of file; the capture never refuses bytes, so the
/// helper never blocks on a full pipe.
async fn drain(mut pipe: impl AsyncRead + Unpin, capture: Capture) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => capture.push(&buf[..n]),
        }
    }
}

/// A descriptor from which bwrap reads the seccomp program to its end: a pipe already holding
/// it and closed for writing (cheaper than a memfd), or a memfd when the program is larger
/// than a pipe holds.
fn seccomp_fd(bpf: &[u8]) -> std::io::Result<OwnedFd> {
    /// What a Linux pipe holds by default.
    const PIPE_CAPACITY: usize = 64 * 1024;
    if bpf.len() <= PIPE_CAPACITY {
        let (read, write) = pipe()?;
        std::fs::File::from(write).write_all(bpf)?;
        return Ok(read);
    }
    let memfd = nix::sys::memfd::memfd_create(c"wrun-seccomp", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(bpf)?;
    use std::io::Seek;
    file.rewind()?;
    Ok(file.into())
}

/// Maps how the process ended. Under bwrap a signalled helper shows as exit code 128 + N.
fn map_exit(exit: WaitStatus, sandboxed: bool) -> Status {
    let signal = match exit {
        WaitStatus::Signaled(_, sig, _) => sig as i32,
        WaitStatus::Exited(_, code) if sandboxed && (129..=159).contains(&code) => code - 128,
        WaitStatus::Exited(_, code) => return Status::Exited { code },
        _ => return Status::Exited { code: -1 },
    };
    match signal {
        libc::SIGXCPU => Status::OutOfCpu,
        libc::SIGXFSZ => Status::FileTooLarge,
        signal => Status::Signaled { signal },
    }
}

/// `bwrap --version`, for diagnostics.
pub(crate) async fn version(bwrap: &Path) -> String {
    match Command::new(bwrap)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .await
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok(out) => format!(
            "--version failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("cannot run: {e}"),
    }
}
