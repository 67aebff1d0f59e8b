//! A pids cgroup per run, where wrun may create one: `pids.max` bounds the helper's processes
//! even when it runs as kernel uid 0 (which `RLIMIT_NPROC` does not bind), and the member list
//! lets wrun kill every survivor, including `setsid` daemons and double forks.
//!
//! cgroup v2 is used when the unified hierarchy at `/sys/fs/cgroup` offers the pids controller
//! and wrun's own cgroup is writable (a delegated subtree, as systemd gives a service with
//! `Delegate=yes`); else cgroup v1's pids hierarchy at `/sys/fs/cgroup/pids`. Without either,
//! the run falls back to `RLIMIT_NPROC` and says so in its Outcome.

use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Creates a fresh cgroup with `pids.max = max_pids`, or `None` where that is not possible.
    pub(crate) fn create(max_pids: u32) -> Option<Self> {
        let parent = parent_dir()?;
        let name = format!(
            "wrun-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        fs::create_dir(&dir).ok()?;
        let cgroup = Self { dir };
        fs::write(cgroup.dir.join("pids.max"), max_pids.to_string()).ok()?;
        Some(cgroup)
    }

    /// The file a process writes its pid to in order to join.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills every member and waits until none is left. Each member is killed and then waited
    /// for through a pidfd, so the wait ends the moment the kernel has finished it (no polling
    /// interval). Bounded: a fork bomb cannot outrun `pids.max`, and a process stuck in the
    /// kernel is given up on after [`EXIT_WAIT_MS`] per round.
    pub(crate) fn kill_all(&self) {
        for _ in 0..100 {
            let Ok(list) = fs::read_to_string(self.procs_file()) else {
                return;
            };
            let pids: Vec<i32> = list.lines().filter_map(|l| l.trim().parse().ok()).collect();
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
        self.kill_all();
        if fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // The kernel may still be releasing the last member: remove the empty cgroup in the
        // background rather than making the run wait for it.
        let dir = std::mem::take(&mut self.dir);
        std::thread::spawn(move || {
            for _ in 0..500 {
                if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
    }
}

/// Which cgroup hierarchy a run would use for its pids limit, if any.
pub(crate) fn describe() -> Option<String> {
    parent_dir().map(|d| d.display().to_string())
}

/// The directory under which this process may create a pids cgroup.
fn parent_dir() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let v2_root = Path::new("/sys/fs/cgroup");
    if fs::read_to_string(v2_root.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
    {
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let dir = v2_root.join(path.trim_start_matches('/'));
        return writable(&dir).then_some(dir);
    }
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    })?;
    let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
    writable(&dir.join("cgroup.procs")).then_some(dir)
}

fn writable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}
