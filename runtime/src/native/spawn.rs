//! The one place the runtime starts processes: spawn, feed, drain, time out, kill, reap.
#![allow(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::resource::Resource;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::cgroup::Cgroup;
use crate::Error;
use crate::capture::Capture;
use crate::capture::Captured;
use crate::job::{Job, Stdin};
use crate::outcome::Status;
use crate::sys::ChildSetup;

/// How long pipes are drained after the process tree is gone. A process that escaped the tree
/// (only possible unsandboxed, without a cgroup) and holds stdout open is abandoned after this.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long reaping may take after SIGKILL (a process in uninterruptible sleep).
const REAP_GRACE: Duration = Duration::from_secs(5);

pub(crate) struct Launch<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [OsString],
    pub(crate) env: &'a [(String, String)],
    pub(crate) job: &'a Job,
    pub(crate) seccomp: Option<&'a [u8]>,
    /// In bwrap: the exit code encodes a signalled child as 128 + N.
    pub(crate) sandboxed: bool,
}

/// How a launched process ended and what it wrote; the caller adds what it knows (the backend,
/// the env drops, the whole wall time) to make the Outcome.
pub(crate) struct Launched {
    pub(crate) status: Status,
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    pub(crate) peak_memory: Option<u64>,
    pub(crate) cgroup: bool,
}

fn spawn_err(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Spawn {
        what: what.to_owned(),
        source,
    }
}

pub(crate) async fn run(launch: Launch<'_>) -> Result<Launched, Error> {
    let limits = &launch.job.limits;
    let cgroup = Cgroup::create(limits.max_processes, limits.memory.bytes());
    let procs = match &cgroup {
        Some(cg) => cg
            .procs_files()
            .iter()
            .map(|f| std::fs::OpenOptions::new().write(true).open(f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(spawn_err("opening the run's cgroup"))?,
        None => Vec::new(),
    };
    let seccomp_fd = match launch.seccomp {
        Some(bpf) => Some(seccomp_fd(bpf).map_err(spawn_err("passing the seccomp program"))?),
        None => None,
    };

    let mut rlimits = vec![
        (Resource::RLIMIT_AS, limits.memory.bytes(), limits.memory.bytes()),
        (
            Resource::RLIMIT_FSIZE,
            limits.max_file_size.bytes(),
            limits.max_file_size.bytes(),
        ),
        (
            Resource::RLIMIT_NOFILE,
            limits.max_open_files.into(),
            limits.max_open_files.into(),
        ),
        (
            Resource::RLIMIT_NPROC,
            limits.max_processes.into(),
            limits.max_processes.into(),
        ),
        (Resource::RLIMIT_CORE, 0, 0),
    ];
    if let Some(cpu) = limits.cpu {
        // SIGXCPU at the limit, SIGKILL a second later if the helper ignores it.
        rlimits.push((Resource::RLIMIT_CPU, cpu.as_secs(), cpu.as_secs() + 1));
    }

    let mut cmd = Command::new(launch.program);
    cmd.args(launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(match launch.job.stdin {
            Stdin::Closed => Stdio::null(),
            Stdin::Bytes(_) => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    match (&launch.job.worktree, launch.sandboxed) {
        (Some(worktree), false) => cmd.current_dir(&worktree.host),
        _ => cmd.current_dir("/"),
    };
    ChildSetup {
        rlimits,
        cgroup_procs: procs.iter().map(|f| f.as_raw_fd()).collect(),
        seccomp: seccomp_fd.as_ref().map(|f| f.as_raw_fd()),
    }
    .install(&mut cmd);

    let mut child = cmd
        .spawn()
        .map_err(spawn_err(&format!("starting {}", launch.program.display())))?;
    drop(procs);
    drop(seccomp_fd);
    let pgid = child.id().map(|id| nix::unistd::Pid::from_raw(id as i32));
    let deadline = tokio::time::Instant::now() + limits.timeout;

    if let (Some(mut stdin), Stdin::Bytes(bytes)) = (child.stdin.take(), &launch.job.stdin) {
        let bytes = bytes.clone();
        tokio::spawn(async move {
            // A helper that does not read its input closes the pipe: that is not an error.
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let stdout = Capture::new(limits.stdout_cap);
    let stderr = Capture::new(limits.stderr_cap);
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(drain(s, stdout.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(drain(s, stderr.clone()))),
    ];

    let waited = tokio::time::timeout_at(deadline, child.wait()).await;
    // Whatever happened, nothing of the helper survives this point.
    if let Some(pgid) = pgid {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.start_kill();
    if let Some(cg) = &cgroup {
        cg.kill_all();
    }
    let status = match waited {
        Ok(Ok(_)) if cgroup.as_ref().is_some_and(Cgroup::oom_killed) => Status::OutOfMemory,
        Ok(Ok(exit)) => map_exit(exit, launch.sandboxed),
        Ok(Err(e)) => return Err(spawn_err("waiting for the helper")(e)),
        Err(_elapsed) => {
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
            Status::TimedOut
        }
    };
    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_GRACE, reader).await.is_err() {
            abort.abort();
        }
    }
    Ok(Launched {
        status,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        peak_memory: cgroup.as_ref().and_then(Cgroup::peak_memory),
        cgroup: cgroup.is_some(),
    })
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

/// A memfd holding the seccomp program, at a descriptor number of 10 or more (so moving it to
/// fd 3 in the child is always a real `dup2` that clears close-on-exec).
fn seccomp_fd(bpf: &[u8]) -> std::io::Result<OwnedFd> {
    let memfd = nix::sys::memfd::memfd_create(c"wrun-seccomp", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(bpf)?;
    use std::io::Seek;
    file.rewind()?;
    let high = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))?;
    Ok(crate::sys::own_fd(high))
}

/// Maps how the process ended. Under bwrap a signalled helper shows as exit code 128 + N.
fn map_exit(exit: ExitStatus, sandboxed: bool) -> Status {
    let signal = match (exit.code(), exit.signal()) {
        (_, Some(sig)) => Some(sig),
        (Some(code), None) if sandboxed && (129..=159).contains(&code) => Some(code - 128),
        (Some(code), None) => return Status::Exited { code },
        (None, None) => return Status::Exited { code: -1 },
    };
    match signal {
        Some(libc::SIGXCPU) => Status::OutOfCpu,
        Some(libc::SIGXFSZ) => Status::FileTooLarge,
        Some(signal) => Status::Signaled { signal },
        None => Status::Exited { code: -1 },
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
