//! A pids cgroup per run, where wrun may create one: `pids.max` bounds the helper's processes
//! even when it runs as kernel uid 0 (which `RLIMIT_NPROC` does not bind), and the member list
//! lets wrun kill every survivor, including `setsid` daemons and double forks.
//!
//! cgroup v2 is used when the unified hierarchy at `/sys/fs/cgroup` offers the pids controller
//! and wrun's own cgroup is writable (a delegated subtree, as systemd gives a service with
//! `Delegate=yes`); else cgroup v1's pids hierarchy at `/sys/fs/cgroup/pids`. Without either,
//! the run falls back to `RLIMIT_NPROC` and says so in its Outcome.
//!
//! Where the memory controller is available too (v1 `memory`, or `memory.max` in the same v2
//! subtree), the run also gets a memory cgroup limited to the job's memory limit: an
//! out-of-memory kill is then told apart from other deaths, and the peak is measured.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    /// `pids.current`, kept open: read after every run.
    current: Option<File>,
    memory: Option<MemoryCgroup>,
    /// Whether `peak_memory` is this run's (false once a reset failed).
    peak_valid: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
    /// The OOM-kill counter's file and the peak's, kept open: read after every run.
    events: Option<File>,
    peak: Option<File>,
}

impl MemoryCgroup {
    fn new(dir: PathBuf, v2: bool) -> Self {
        let (events, peak) = if v2 {
            ("memory.events", "memory.peak")
        } else {
            ("memory.oom_control", "memory.max_usage_in_bytes")
        };
        let peak = dir.join(peak);
        Self {
            events: File::open(dir.join(events)).ok(),
            // Writable where the kernel can reset the peak; else read-only (a first run's
            // figure is still right).
            peak: OpenOptions::new()
                .read(true)
                .write(true)
                .open(&peak)
                .or_else(|_| File::open(&peak))
                .ok(),
            dir,
            v2,
        }
    }
}

/// Reads a small cgroup file from its start (the kernel regenerates it on every read).
fn read_at_start(file: &File) -> Option<String> {
    let mut buf = [0u8; 1024];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(buf.get(..n)?).ok().map(str::to_owned)
}

impl Cgroup {
    /// Creates a fresh cgroup with `pids.max = max_pids` (and a memory limit where the memory
    /// controller is available), or `None` where no pids cgroup is possible.
    pub(crate) fn create(max_pids: u32, memory_limit: u64) -> Option<Self> {
        let (parent, v2) = parent_dir()?;
        let name = format!(
            "wrun-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(&name);
        fs::create_dir(&dir).ok()?;
        let mut cgroup = Self {
            current: File::open(dir.join("pids.current")).ok(),
            dir,
            memory: None,
            peak_valid: true.into(),
        };
        fs::write(cgroup.dir.join("pids.max"), max_pids.to_string()).ok()?;
        cgroup.memory = if v2 {
            fs::write(cgroup.dir.join("memory.max"), memory_limit.to_string())
                .ok()
                .map(|()| MemoryCgroup::new(cgroup.dir.clone(), true))
        } else {
            v1_dir("memory").and_then(|parent| {
                let dir = parent.join(&name);
                fs::create_dir(&dir).ok()?;
                let memory = MemoryCgroup::new(dir, false);
                // Swap would let the helper exceed the limit: cap memory+swap too where the
                // kernel accounts it.
                fs::write(memory.dir.join("memory.limit_in_bytes"), memory_limit.to_string()).ok()?;
                let _ = fs::write(
                    memory.dir.join("memory.memsw.limit_in_bytes"),
                    memory_limit.to_string(),
                );
                Some(memory)
            })
        };
        Some(cgroup)
    }

    /// Moves `pid` into the run's cgroups (pids, and memory when it is a separate v1
    /// hierarchy).
    pub(crate) fn join(&self, pid: i32) -> std::io::Result<()> {
        fs::write(self.procs_file(), pid.to_string())?;
        if let Some(memory) = self.memory.as_ref().filter(|m| !m.v2) {
            fs::write(memory.dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// Changes the limits the cgroup was created with.
    pub(crate) fn set_limits(&self, max_pids: u32, memory_limit: u64) -> std::io::Result<()> {
        fs::write(self.dir.join("pids.max"), max_pids.to_string())?;
        match &self.memory {
            Some(memory) if memory.v2 => {
                fs::write(memory.dir.join("memory.max"), memory_limit.to_string())?;
            }
            Some(memory) => {
                // memsw must stay at or above the plain limit: order the writes accordingly.
                let limit = memory.dir.join("memory.limit_in_bytes");
                let memsw = memory.dir.join("memory.memsw.limit_in_bytes");
                let raising = fs::read_to_string(&limit)
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
                    .is_some_and(|old| memory_limit > old);
                if raising {
                    let _ = fs::write(&memsw, memory_limit.to_string());
                    fs::write(&limit, memory_limit.to_string())?;
                } else {
                    fs::write(&limit, memory_limit.to_string())?;
                    let _ = fs::write(&memsw, memory_limit.to_string());
                }
            }
            None => {}
        }
        Ok(())
    }

    /// How many times the kernel has killed a member for exceeding the memory limit.
    pub(crate) fn oom_kills(&self) -> u64 {
        let Some(events) = self.memory.as_ref().and_then(|m| m.events.as_ref()) else {
            return 0;
        };
        read_at_start(events).map_or(0, |text| {
            text.lines()
                .filter_map(|l| l.strip_prefix("oom_kill "))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .sum()
        })
    }

    /// Starts the peak memory figure afresh (for the next run in the same cgroup): v1 resets
    /// `memory.max_usage_in_bytes` on a write of 0; v2 (Linux 6.12 and later) resets
    /// `memory.peak` for the descriptor that writes to it, which is the one kept open and read.
    /// Where the reset fails the figure is no longer reported.
    pub(crate) fn reset_peak(&self) {
        let Some(memory) = &self.memory else { return };
        let reset = match &memory.peak {
            Some(peak) if memory.v2 => peak.write_at(b"reset\n", 0).is_ok(),
            Some(peak) => peak.write_at(b"0", 0).is_ok(),
            None => false,
        };
        if !reset {
            self.peak_valid.store(false, Ordering::Relaxed);
        }
    }

    /// Peak memory of the run, where the kernel reports it.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        let peak = self.memory.as_ref()?.peak.as_ref()?;
        if !self.peak_valid.load(Ordering::Relaxed) {
            return None;
        }
        read_at_start(peak)?.trim().parse().ok()
    }

    /// The cgroup's directory (in the pids hierarchy).
    #[cfg(test)]
    pub(crate) fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The cgroup's directory, for messages.
    pub(crate) fn describe_dir(&self) -> String {
        self.dir.display().to_string()
    }

    /// The file a process writes its pid to in order to join.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills every member but `spare` (the run's spawner) and waits until none is left. Each
    /// member is killed and then waited for through a pidfd, so the wait ends the moment the kernel has finished it (no polling
    /// interval). Bounded: a fork bomb cannot outrun `pids.max`, and a process stuck in the
    /// kernel is given up on after [`EXIT_WAIT_MS`] per round.
    pub(crate) fn kill_all(&self, spare: Option<i32>) {
        // The common case after a run: nobody but the spawner is left (every live process of
        // the cgroup counts in `pids.current`).
        let alone = self
            .current
            .as_ref()
            .and_then(read_at_start)
            .and_then(|n| n.trim().parse::<u32>().ok())
            .is_some_and(|n| n <= u32::from(spare.is_some()));
        if alone {
            return;
        }
        for _ in 0..100 {
            let Ok(list) = fs::read_to_string(self.procs_file()) else {
                return;
            };
            let pids: Vec<i32> = list
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .filter(|&pid| Some(pid) != spare)
                .collect();
            if pids.is_empty() {
                return;
            }
            let pidfds: Vec<_> = pids
                .iter()
                .filter_map(|&pid| {
                    let pidfd = crate::sys::pidfd_open(pid).ok();
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    pidfd
                })
                .collect();
            for pidfd in &pidfds {
                let mut fds = [nix::poll::PollFd::new(
                    pidfd.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(EXIT_WAIT_MS));
            }
        }
    }
}

/// How long one round of [`Cgroup::kill_all`] waits for a killed process to finish exiting.
const EXIT_WAIT_MS: u8 = 100;

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all(None);
        self.current = None;
        let mut dirs = vec![std::mem::take(&mut self.dir)];
        if let Some(memory) = self.memory.take().filter(|m| !m.v2) {
            dirs.push(memory.dir);
        }
        dirs.retain(|dir| fs::remove_dir(dir).is_err());
        if dirs.is_empty() {
            return;
        }
        // The kernel may still be releasing the last member: remove the empty cgroups in the
        // background rather than making the run wait for it.
        std::thread::spawn(move || {
            for _ in 0..500 {
                dirs.retain(|dir| fs::remove_dir(dir).is_err() && dir.exists());
                if dirs.is_empty() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
    }
}

/// Which cgroup hierarchy a run would use for its pids limit, if any.
pub(crate) fn describe() -> Option<String> {
    parent_dir().map(|(d, v2)| {
        let memory = if v2 || v1_dir("memory").is_some() {
            ", memory controller too"
        } else {
            ""
        };
        format!(
            "{} (cgroup {}{memory})",
            d.display(),
            if v2 { "v2" } else { "v1" }
        )
    })
}

/// The directory under which this process may create a pids cgroup, and whether it is v2.
fn parent_dir() -> Option<(PathBuf, bool)> {
    let v2_root = Path::new("/sys/fs/cgroup");
    if fs::read_to_string(v2_root.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
    {
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let dir = v2_root.join(path.trim_start_matches('/'));
        return writable(&dir).then_some((dir, true));
    }
    v1_dir("pids").map(|d| (d, false))
}

/// This process's cgroup in the v1 hierarchy of `controller`, if it is writable.
fn v1_dir(controller: &str) -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    })?;
    let dir = Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(path.trim_start_matches('/'));
    writable(&dir.join("cgroup.procs")).then_some(dir)
}

fn writable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}
