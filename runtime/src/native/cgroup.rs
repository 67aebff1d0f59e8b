//! A pids cgroup per run, where wrun may create one: `pids.max` bounds the helper's processes
//! even when it runs as kernel uid 0 (which `RLIMIT_NPROC` does not bind), and the member list
//! lets wrun kill every survivor, including `setsid` daemons and double forks.
//!
//! Where runs get their cgroups is found once per process ([`layout`]):
//!
//! - **cgroup v2** (the unified hierarchy at `/sys/fs/cgroup`, every systemd host): a run's
//!   cgroup is a child of a cgroup whose `cgroup.subtree_control` enables `pids` (and `memory`),
//!   not merely one that lists them in `cgroup.controllers`. That is wrun's own cgroup when it is
//!   already so (the root of a container's cgroup namespace, or an operator's set-up), or the
//!   parent of the leaf `wrun` wrun moved itself into earlier. Otherwise, when the controllers
//!   are delegated to wrun's cgroup (systemd `Delegate=yes`), it is writable and wrun is its only
//!   process, wrun moves itself into a leaf `wrun` and enables them, as systemd asks of a
//!   delegated service (the "no internal processes" rule forbids enabling them while a process
//!   sits in the cgroup). Survivors are killed with `cgroup.kill` (Linux 5.14).
//! - **cgroup v1**: the `pids` and `memory` hierarchies under `/sys/fs/cgroup`; on a hybrid host
//!   each run also gets a cgroup in the unified hierarchy (`/sys/fs/cgroup/unified`), only for
//!   its `cgroup.kill`.
//! - **rlimits only** otherwise, with the reason ([`describe`], `wrun doctor`); the Outcome names
//!   which of the three enforced a run.
//!
//! Where the memory controller is available too, the run's memory cgroup is limited to the job's
//! memory limit (with no swap): an out-of-memory kill is then told apart from other deaths, and
//! the peak is measured.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::outcome::{Enforcement, Mechanism};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The leaf of a delegated v2 cgroup that wrun moves itself into to enable controllers for its
/// runs' cgroups beside it.
pub(crate) const LEAF: &str = "wrun";

/// Where runs get their cgroups on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The unified hierarchy: runs' cgroups are made under `parent`, whose
    /// `cgroup.subtree_control` enables pids (and memory when `memory`). `moved` is the leaf
    /// wrun moved itself into to enable them, if it did.
    V2 {
        parent: PathBuf,
        memory: bool,
        moved: Option<PathBuf>,
    },
    /// v1 hierarchies: this process's pids cgroup, its memory cgroup if writable, and on a
    /// hybrid host its cgroup in the unified hierarchy (for `cgroup.kill`).
    V1 {
        pids: PathBuf,
        memory: Option<PathBuf>,
        kill: Option<PathBuf>,
    },
    /// No pids cgroup can be made: why.
    Unavailable(String),
}

/// This machine's layout, found on first use.
pub(crate) fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let layout = match fs::read_to_string("/proc/self/cgroup") {
            Ok(own) => discover(Path::new("/sys/fs/cgroup"), &own, std::process::id()),
            Err(e) => Layout::Unavailable(format!("cannot read /proc/self/cgroup: {e}")),
        };
        for parent in layout.parents() {
            sweep(parent);
        }
        layout
    })
}

impl Layout {
    /// The directories runs' cgroups are made in.
    fn parents(&self) -> Vec<&Path> {
        match self {
            Layout::V2 { parent, .. } => vec![parent],
            Layout::V1 { pids, memory, kill } => std::iter::once(pids)
                .chain(memory)
                .chain(kill)
                .map(PathBuf::as_path)
                .collect(),
            Layout::Unavailable(_) => Vec::new(),
        }
    }
}

/// Removes the empty cgroups that wrun processes no longer alive left in `parent` (named
/// `wrun-PID-N`): a process killed outright, or one that exited while the kernel was still
/// releasing its last cgroup's members. A cgroup with members is never removed (the kernel
/// refuses), nor one of a process that may still be alive.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("wrun-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = pid > 0
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// Finds where runs get their cgroups under the cgroup filesystem at `root`, for the process
/// `pid` whose `/proc/self/cgroup` reads `own`. May move `pid` into a leaf of its own v2 cgroup
/// and enable controllers there (see the module's documentation).
pub(crate) fn discover(root: &Path, own: &str, pid: u32) -> Layout {
    if root.join("cgroup.controllers").exists() {
        return unified(root, own, pid);
    }
    // Whether the kernel has `cgroup.kill` shows in the cgroups made there (a root has none).
    let kill = root.join("unified/cgroup.controllers").exists().then(|| {
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let dir = root.join("unified").join(rel.trim_start_matches('/'));
        writable(&dir).then_some(dir)
    });
    match v1_dir(root, own, "pids") {
        Ok(pids) => Layout::V1 {
            pids,
            memory: v1_dir(root, own, "memory").ok(),
            kill: kill.flatten(),
        },
        Err(why) => Layout::Unavailable(why),
    }
}

/// Discovery on the unified hierarchy at `root`.
fn unified(root: &Path, own: &str, pid: u32) -> Layout {
    let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Layout::Unavailable("cgroup v2 is mounted but /proc/self/cgroup has no 0:: entry".to_owned());
    };
    let rel = rel.trim_start_matches('/');
    let dir = root.join(rel);
    if let Some(ready) = ready(&dir, None) {
        return ready;
    }
    if dir.file_name().is_some_and(|n| n == LEAF)
        && let Some(ready) = dir.parent().and_then(|p| ready(p, None))
    {
        return ready;
    }
    let controllers = tokens(&dir.join("cgroup.controllers"));
    if !controllers.iter().any(|c| c == "pids") {
        return Layout::Unavailable(format!(
            "cgroup v2: the pids controller is not delegated to wrun's cgroup {} (its \
             cgroup.controllers: {:?}); run wrun in a cgroup with pids and memory delegated \
             (systemd: Delegate=yes)",
            dir.display(),
            controllers.join(" ")
        ));
    }
    if !writable(&dir) {
        return Layout::Unavailable(format!(
            "cgroup v2: wrun's cgroup {} is not writable by uid {}; delegate it (systemd: \
             Delegate=yes)",
            dir.display(),
            nix::unistd::geteuid()
        ));
    }
    let mut moved = None;
    if !rel.is_empty() {
        // A cgroup with processes of its own cannot enable controllers for its children: wrun
        // moves itself into a leaf, which it may do only if it is alone.
        let others: Vec<String> = fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.trim() != pid.to_string())
            .map(str::to_owned)
            .collect();
        if let Some(other) = others.first() {
            return Layout::Unavailable(format!(
                "cgroup v2: pids is not enabled in {}/cgroup.subtree_control, and wrun cannot \
                 enable it while {} other process(es) share its cgroup (pid {other}); start \
                 wrun in a cgroup of its own with pids and memory delegated (systemd: a service \
                 or `systemd-run --scope` with Delegate=yes)",
                dir.display(),
                others.len()
            ));
        }
        let leaf = dir.join(LEAF);
        if let Err(e) = fs::create_dir(&leaf)
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Layout::Unavailable(format!("cgroup v2: cannot create {}: {e}", leaf.display()));
        }
        if let Err(e) = fs::write(leaf.join("cgroup.procs"), pid.to_string()) {
            return Layout::Unavailable(format!(
                "cgroup v2: cannot move wrun into {}: {e}",
                leaf.display()
            ));
        }
        moved = Some(leaf);
    }
    let control = dir.join("cgroup.subtree_control");
    let wanted = if controllers.iter().any(|c| c == "memory") {
        "+pids +memory"
    } else {
        "+pids"
    };
    // All or nothing per write: fall back to pids alone if memory cannot be enabled.
    let enabled = fs::write(&control, wanted).or_else(|_| fs::write(&control, "+pids"));
    match (enabled, ready(&dir, moved)) {
        (_, Some(ready)) => ready,
        (Err(e), None) => Layout::Unavailable(format!(
            "cgroup v2: cannot enable pids in {}: {e}",
            control.display()
        )),
        (Ok(()), None) => Layout::Unavailable(format!(
            "cgroup v2: pids is still not enabled in {} after writing it",
            control.display()
        )),
    }
}

/// `dir` as the parent of runs' cgroups, if its `cgroup.subtree_control` enables pids and this
/// process may create cgroups in it.
fn ready(dir: &Path, moved: Option<PathBuf>) -> Option<Layout> {
    let enabled = tokens(&dir.join("cgroup.subtree_control"));
    (enabled.iter().any(|c| c == "pids") && writable(dir)).then(|| Layout::V2 {
        parent: dir.to_owned(),
        memory: enabled.iter().any(|c| c == "memory"),
        moved,
    })
}

/// The controller names in a `cgroup.controllers` or `cgroup.subtree_control` file.
fn tokens(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(|t| t.trim_start_matches('+').to_owned())
        .collect()
}

#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    v2: bool,
    /// `pids.current`, kept open: read after every run.
    current: Option<File>,
    memory: Option<MemoryCgroup>,
    /// The cgroup whose `cgroup.kill` ends every member at once: `dir` on v2, a cgroup of
    /// the unified hierarchy on a hybrid v1 host, none where the kernel lacks it.
    kill: Option<PathBuf>,
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
        Self::create_in(layout(), max_pids, memory_limit)
    }

    /// [`Cgroup::create`] under a given layout.
    pub(crate) fn create_in(layout: &Layout, max_pids: u32, memory_limit: u64) -> Option<Self> {
        let name = format!(
            "wrun-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let (parent, v2) = match layout {
            Layout::V2 { parent, .. } => (parent, true),
            Layout::V1 { pids, .. } => (pids, false),
            Layout::Unavailable(_) => return None,
        };
        let dir = parent.join(&name);
        fs::create_dir(&dir).ok()?;
        // Made at once, so that dropping it on any failure below removes what was created.
        let mut cgroup = Self {
            current: File::open(dir.join("pids.current")).ok(),
            kill: (v2 && dir.join("cgroup.kill").exists()).then(|| dir.clone()),
            dir,
            v2,
            memory: None,
            peak_valid: true.into(),
        };
        fs::write(cgroup.dir.join("pids.max"), max_pids.to_string()).ok()?;
        match layout {
            Layout::V2 { memory: true, .. } => {
                fs::write(cgroup.dir.join("memory.max"), memory_limit.to_string()).ok()?;
                // Swap would let the helper exceed the limit (absent without swap accounting).
                let _ = fs::write(cgroup.dir.join("memory.swap.max"), "0");
                cgroup.memory = Some(MemoryCgroup::new(cgroup.dir.clone(), true));
            }
            Layout::V1 { memory, kill, .. } => {
                if let Some(parent) = memory {
                    let dir = parent.join(&name);
                    if fs::create_dir(&dir).is_ok() {
                        cgroup.memory = Some(MemoryCgroup::new(dir, false));
                        cgroup.set_memory_v1(memory_limit).ok()?;
                    }
                }
                if let Some(parent) = kill {
                    let dir = parent.join(&name);
                    if fs::create_dir(&dir).is_ok() {
                        if dir.join("cgroup.kill").exists() {
                            cgroup.kill = Some(dir);
                        } else {
                            let _ = fs::remove_dir(&dir);
                        }
                    }
                }
            }
            _ => {}
        }
        Some(cgroup)
    }

    /// What enforced the limits of runs in this cgroup.
    pub(crate) fn enforcement(&self) -> Enforcement {
        let mechanism = if self.v2 {
            Mechanism::CgroupV2
        } else {
            Mechanism::CgroupV1
        };
        Enforcement {
            processes: mechanism,
            memory: if self.memory.is_some() {
                mechanism
            } else {
                Mechanism::Rlimit
            },
        }
    }

    /// Moves `pid` into the run's cgroups (pids, and memory and the kill cgroup when they are
    /// separate hierarchies).
    pub(crate) fn join(&self, pid: i32) -> std::io::Result<()> {
        fs::write(self.procs_file(), pid.to_string())?;
        if let Some(memory) = self.memory.as_ref().filter(|m| !m.v2) {
            fs::write(memory.dir.join("cgroup.procs"), pid.to_string())?;
        }
        if let Some(kill) = self.kill.as_ref().filter(|k| **k != self.dir) {
            fs::write(kill.join("cgroup.procs"), pid.to_string())?;
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
            Some(_) => self.set_memory_v1(memory_limit)?,
            None => {}
        }
        Ok(())
    }

    /// Sets a v1 memory cgroup's limit, with memory+swap at the same figure where the kernel
    /// accounts swap (else swap would let the helper exceed it).
    fn set_memory_v1(&self, memory_limit: u64) -> std::io::Result<()> {
        let Some(memory) = self.memory.as_ref().filter(|m| !m.v2) else {
            return Ok(());
        };
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
        Ok(())
    }

    /// Kills every member at once through `cgroup.kill`, where the kernel has it; whether it did.
    fn kill_at_once(&self) -> bool {
        self.kill
            .as_ref()
            .is_some_and(|kill| fs::write(kill.join("cgroup.kill"), "1").is_ok())
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

    /// Kills every member but `spare` (the run's spawner) and waits until none is left. With no
    /// member to spare, `cgroup.kill` ends them all at once where the kernel has it (nothing
    /// can fork past it). Each member is killed and then waited for through a pidfd, so the
    /// wait ends the moment the kernel has finished it (no polling interval). Bounded: a fork
    /// bomb cannot outrun `pids.max`, and a process stuck in the kernel is given up on after
    /// [`EXIT_WAIT_MS`] per round.
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
        if spare.is_none() {
            self.kill_at_once();
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
        let dir = std::mem::take(&mut self.dir);
        let mut dirs: Vec<PathBuf> = self.kill.take().into_iter().filter(|k| *k != dir).collect();
        dirs.push(dir);
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

/// How runs' limits are enforced on this machine, for `wrun doctor`.
pub(crate) fn describe() -> String {
    describe_layout(layout())
}

fn describe_layout(layout: &Layout) -> String {
    match layout {
        Layout::V2 {
            parent,
            memory,
            moved,
        } => {
            let mut text = format!(
                "cgroup v2: runs' cgroups under {} with pids{}{}",
                parent.display(),
                if *memory {
                    " and memory"
                } else {
                    " (memory not enabled there: memory is bounded per process by RLIMIT_AS)"
                },
                if parent.join("cgroup.kill").exists() {
                    ", killed with cgroup.kill"
                } else {
                    ""
                }
            );
            if let Some(leaf) = moved {
                text.push_str(&format!(
                    "; wrun moved itself into {} to enable them",
                    leaf.display()
                ));
            }
            text
        }
        Layout::V1 { pids, memory, kill } => {
            let mut text = format!("cgroup v1: pids under {}", pids.display());
            match memory {
                Some(memory) => text.push_str(&format!(", memory under {}", memory.display())),
                None => {
                    text.push_str(", no writable memory cgroup (memory bounded per process by RLIMIT_AS)")
                }
            }
            if let Some(kill) = kill {
                text.push_str(&format!(
                    ", killed with cgroup.kill (where the kernel has it) of the unified \
                     hierarchy under {}",
                    kill.display()
                ));
            }
            text
        }
        Layout::Unavailable(why) => format!(
            "rlimits only: {why}. RLIMIT_NPROC does not bind processes of uid 0, and survivors \
             are found by process group only"
        ),
    }
}

/// This process's cgroup in the v1 hierarchy of `controller` under `root`, if it is writable.
fn v1_dir(root: &Path, own: &str, controller: &str) -> Result<PathBuf, String> {
    let path = own
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == controller).then_some(path)
        })
        .ok_or_else(|| format!("no cgroup hierarchy has the {controller} controller"))?;
    let dir = root.join(controller).join(path.trim_start_matches('/'));
    if writable(&dir.join("cgroup.procs")) && writable(&dir) {
        Ok(dir)
    } else {
        Err(format!(
            "cgroup v1: {} is not writable by uid {}",
            dir.display(),
            nix::unistd::geteuid()
        ))
    }
}

fn writable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroupfs: files as given, relative to a temporary root.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("a temporary directory");
        for (path, text) in files {
            let path = root.path().join(path);
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        root
    }

    const SERVICE: &str = "system.slice/review.service";

    fn v2_service(controllers: &str, enabled: &str, procs: &str) -> tempfile::TempDir {
        tree(&[
            (
                "cgroup.controllers",
                "cpuset cpu io memory hugetlb pids rdma misc",
            ),
            ("cgroup.subtree_control", "cpu io memory pids"),
            ("system.slice/cgroup.subtree_control", "cpu io memory pids"),
            (&format!("{SERVICE}/cgroup.controllers"), controllers),
            (&format!("{SERVICE}/cgroup.subtree_control"), enabled),
            (&format!("{SERVICE}/cgroup.procs"), procs),
        ])
    }

    #[test]
    fn v2_controllers_listed_at_the_root_but_not_delegated_are_not_used() {
        // The root offers pids; the service's cgroup was given none (no Delegate=).
        let root = v2_service("", "", "4242\n");
        let layout = discover(root.path(), &format!("0::/{SERVICE}\n"), 4242);
        let Layout::Unavailable(why) = &layout else {
            panic!("{layout:?}")
        };
        assert!(
            why.contains("not delegated") && why.contains("Delegate=yes"),
            "{why}"
        );
        assert!(describe_layout(&layout).starts_with("rlimits only: "));
        assert!(!root.path().join(SERVICE).join(LEAF).exists());
    }

    #[test]
    fn v2_delegated_controllers_are_enabled_after_wrun_moves_into_a_leaf() {
        let root = v2_service("memory pids", "", "4242\n");
        let service = root.path().join(SERVICE);
        let layout = discover(root.path(), &format!("0::/{SERVICE}\n"), 4242);
        assert_eq!(
            layout,
            Layout::V2 {
                parent: service.clone(),
                memory: true,
                moved: Some(service.join(LEAF)),
            }
        );
        assert_eq!(
            fs::read_to_string(service.join(LEAF).join("cgroup.procs")).expect("moved"),
            "4242"
        );
        assert_eq!(
            tokens(&service.join("cgroup.subtree_control")),
            ["pids", "memory"]
        );
        let text = describe_layout(&layout);
        assert!(
            text.starts_with("cgroup v2: ") && text.contains("moved itself"),
            "{text}"
        );

        // A second discovery (another process of the same service, or after a restart) from
        // inside the leaf finds the parent ready and moves nothing.
        let layout = discover(root.path(), &format!("0::/{SERVICE}/{LEAF}\n"), 4242);
        assert_eq!(
            layout,
            Layout::V2 {
                parent: service,
                memory: true,
                moved: None,
            }
        );
    }

    #[test]
    fn v2_pids_without_memory_bounds_memory_by_rlimit() {
        let root = v2_service("pids", "", "7\n");
        let layout = discover(root.path(), &format!("0::/{SERVICE}\n"), 7);
        assert!(matches!(layout, Layout::V2 { memory: false, .. }), "{layout:?}");
        assert!(describe_layout(&layout).contains("RLIMIT_AS"));
    }

    #[test]
    fn v2_a_cgroup_shared_with_other_processes_is_left_alone_and_said_so() {
        let root = v2_service("memory pids", "", "4242\n99\n");
        let service = root.path().join(SERVICE);
        let layout = discover(root.path(), &format!("0::/{SERVICE}\n"), 4242);
        let Layout::Unavailable(why) = &layout else {
            panic!("{layout:?}")
        };
        assert!(
            why.contains("share its cgroup") && why.contains("pid 99"),
            "{why}"
        );
        assert!(!service.join(LEAF).exists());
        assert_eq!(
            tokens(&service.join("cgroup.subtree_control")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn v2_a_cgroup_already_enabling_pids_is_used_as_it_is() {
        // The root of a container's cgroup namespace, with controllers enabled by its runtime.
        let root = tree(&[
            ("cgroup.controllers", "memory pids"),
            ("cgroup.subtree_control", "memory pids"),
            ("cgroup.procs", "1\n"),
        ]);
        let layout = discover(root.path(), "0::/\n", 1);
        assert_eq!(
            layout,
            Layout::V2 {
                parent: root.path().to_owned(),
                memory: true,
                moved: None,
            }
        );
        // The root of a namespace may hold processes and enable controllers: wrun enables them
        // without moving.
        let root = tree(&[
            ("cgroup.controllers", "memory pids"),
            ("cgroup.subtree_control", ""),
            ("cgroup.procs", "1\n5\n"),
        ]);
        let layout = discover(root.path(), "0::/\n", 1);
        assert!(matches!(layout, Layout::V2 { moved: None, .. }), "{layout:?}");
    }

    #[test]
    fn v2_runs_cgroups_hold_the_limits_without_swap() {
        let root = v2_service("memory pids", "", "4242\n");
        let layout = discover(root.path(), &format!("0::/{SERVICE}\n"), 4242);
        let cgroup = Cgroup::create_in(&layout, 17, 64 << 20).expect("a cgroup");
        let dir = cgroup.dir();
        assert!(dir.starts_with(root.path().join(SERVICE)));
        let read = |f: &str| fs::read_to_string(dir.join(f)).expect(f);
        assert_eq!(
            (read("pids.max"), read("memory.max"), read("memory.swap.max")),
            ("17".to_owned(), (64u64 << 20).to_string(), "0".to_owned())
        );
        assert_eq!(
            cgroup.enforcement(),
            Enforcement {
                processes: Mechanism::CgroupV2,
                memory: Mechanism::CgroupV2,
            }
        );
    }

    #[test]
    fn v1_and_hybrid_layouts() {
        let own = "4:memory:/a\n8:pids:/a\n0::/a\n";
        let root = tree(&[
            ("pids/a/cgroup.procs", ""),
            ("memory/a/cgroup.procs", ""),
            ("unified/cgroup.controllers", ""),
            ("unified/a/cgroup.kill", ""),
        ]);
        assert_eq!(
            discover(root.path(), own, 1),
            Layout::V1 {
                pids: root.path().join("pids/a"),
                memory: Some(root.path().join("memory/a")),
                kill: Some(root.path().join("unified/a")),
            }
        );
        let layout = discover(root.path(), "4:memory:/a\n", 1);
        let Layout::Unavailable(why) = &layout else {
            panic!("{layout:?}")
        };
        assert!(why.contains("pids controller"), "{why}");
    }

    #[test]
    fn cgroups_left_by_processes_that_are_gone_are_swept() {
        let me = std::process::id();
        // pid_max is at most 2^22: this pid cannot exist.
        let root = tree(&[("wrun-99999999-0/.keep-out", ""), ("other/x", "")]);
        for name in [
            "wrun-99999999-1",
            "wrun-99999999-2",
            &format!("wrun-{me}-0"),
            "wrun-x-1",
            LEAF,
        ] {
            fs::create_dir(root.path().join(name)).expect("mkdir");
        }
        sweep(root.path());
        let mut left: Vec<String> = fs::read_dir(root.path())
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // A non-empty one stays (a cgroup with members cannot be removed either).
        let mut want = vec![
            "other".to_owned(),
            LEAF.to_owned(),
            "wrun-99999999-0".to_owned(),
            format!("wrun-{me}-0"),
            "wrun-x-1".to_owned(),
        ];
        want.sort();
        assert_eq!(left, want);
    }

    /// On this machine for real: the hierarchy wrun found is the one the kernel offers, and on
    /// a host with `cgroup.kill` every member of a run's cgroup dies by it at once.
    #[test]
    #[allow(
        clippy::disallowed_methods,
        reason = "a test: its own process tree and settings"
    )]
    fn the_real_layout_and_cgroup_kill() {
        let layout = layout();
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        // Whether the kernel offers cgroup.kill in a hybrid host's unified hierarchy: a
        // cgroup made there has the file.
        let unified = Path::new("/sys/fs/cgroup/unified");
        let probe = unified.join(format!("wrun-probe-{}", std::process::id()));
        let hybrid_kill = fs::create_dir(&probe).is_ok() && {
            let has = probe.join("cgroup.kill").exists();
            let _ = fs::remove_dir(&probe);
            has
        };
        match layout {
            Layout::V1 { kill, .. } => {
                assert!(!v2);
                assert_eq!(kill.is_some(), hybrid_kill, "{layout:?}");
            }
            Layout::V2 { .. } => assert!(v2),
            Layout::Unavailable(why) => {
                assert!(
                    !nix::unistd::geteuid().is_root() || std::env::var_os("WRUN_REQUIRE_NATIVE").is_none(),
                    "root without a pids cgroup: {why}"
                );
                return;
            }
        }
        let cgroup = Cgroup::create(16, 256 << 20).expect("a cgroup");
        assert_eq!(
            cgroup.kill.is_some(),
            hybrid_kill || v2 && cgroup.dir().join("cgroup.kill").exists()
        );
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "read x; sleep 1000 & sleep 1000 & sleep 1000 & wait"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        cgroup.join(child.id() as i32).expect("joined");
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(b"go\n").expect("go");
        }
        let members = || {
            fs::read_to_string(cgroup.procs_file())
                .map(|t| t.lines().count())
                .unwrap_or(0)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while members() < 4 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(members(), 4, "sh and its three sleeps");
        if cgroup.kill.is_some() {
            assert!(cgroup.kill_at_once(), "cgroup.kill was written");
            let status = child.wait().expect("sh ends");
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(9),
                "killed by cgroup.kill"
            );
            while members() > 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert_eq!(members(), 0, "every member is gone");
        } else {
            cgroup.kill_all(None);
            let _ = child.wait();
            assert_eq!(members(), 0, "every member is gone");
        }
    }
}
