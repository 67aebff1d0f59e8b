//! The one thing a backend launches: a [`Job`] the runtime has checked, and the one place an
//! [`Outcome`] is made from a run.
//!
//! [`Checked::new`] validates the limits, runs the environment guard, and checks the mounts
//! against the backend's [`MountRules`]: guest paths, host objects (made canonical), and the
//! protected paths of writable mounts, walked through directory handles without following a
//! link. Every backend starts from a `Checked`, so none can skip a step, and ends with
//! [`Checked::outcome`], so every Outcome carries the same wall time, dropped variables and
//! shape.

use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};

use crate::Error;
#[cfg(target_os = "linux")]
use crate::beneath;
use crate::capture::Captured;
use crate::env::{self, DroppedEnv};
use crate::job::{Access, Job, Mount, Program, SandboxMode, Stdin};
use crate::limits::{ByteSize, Limits};
use crate::outcome::{Backend, CacheUse, Outcome, Status, Usage};

/// Which guest paths and host objects a backend can mount.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MountRules<'a> {
    /// Guest paths a mount may neither be nor contain (the backend's own system directories).
    pub(crate) cover: &'a [&'a str],
    /// Guest paths a mount may not lie inside (read-only or special file systems).
    pub(crate) inside: &'a [&'a str],
    /// Whether a regular file may be mounted (at a guest path of its own).
    pub(crate) files: bool,
    /// Whether the backend follows symbolic links on the way to a mount point (bwrap resolves
    /// a destination inside an earlier mount through that mount's host directory): then no
    /// component of a mount point inside another mount may be a link.
    pub(crate) follows_links: bool,
}

/// A job checked for one backend.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) program: Program,
    pub(crate) args: Vec<String>,
    /// The worktree (first, when the job has one) and the further mounts, checked.
    pub(crate) mounts: Vec<Mount>,
    /// Whether `mounts[0]` is the worktree.
    pub(crate) has_worktree: bool,
    /// The components of protected paths that do not exist, on the host, outermost first (a
    /// backend that makes mount points there removes them after the run).
    pub(crate) missing_protected: Vec<PathBuf>,
    /// For each writable mount with protected paths (by index in `mounts`): the names of its
    /// protected paths, and the entries with those names beneath it before the run.
    named_before: Vec<NamedBefore>,
    /// The environment after the guard.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) env_dropped: Vec<DroppedEnv>,
    pub(crate) stdin: Stdin,
    pub(crate) limits: Limits,
    /// The job's sandbox mode, if it carries one (native jobs).
    pub(crate) mode: Option<SandboxMode>,
    started: Instant,
}

/// How a run ended, as the backend saw it; [`Checked::outcome`] adds the rest.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) status: Status,
    pub(crate) stdout: Captured,
    pub(crate) records: crate::capture::Records,
    pub(crate) stderr: Captured,
    pub(crate) fuel_consumed: Option<u64>,
    pub(crate) peak_memory: Option<u64>,
    pub(crate) cache: CacheUse,
}

impl Checked {
    /// Checks `job` for a backend whose mounts follow `rules`.
    pub(crate) fn new(job: Job, rules: MountRules<'_>) -> Result<Self, Error> {
        let started = Instant::now();
        job.limits.validate()?;
        let (mounts, missing_protected) = check_mounts(&job, rules)?;
        #[cfg(target_os = "linux")]
        let named_before = named_entries(&mounts)?;
        #[cfg(not(target_os = "linux"))]
        let named_before = Vec::new();
        let guarded = env::guard(&job.env);
        Ok(Self {
            has_worktree: job.worktree.is_some(),
            program: job.program,
            args: job.args,
            mounts,
            missing_protected,
            named_before,
            env: guarded.vars,
            env_dropped: guarded.dropped,
            stdin: job.stdin,
            limits: job.limits,
            mode: job.sandbox,
            started,
        })
    }

    /// The worktree's mount, if the job has one.
    pub(crate) fn worktree(&self) -> Option<&Mount> {
        self.mounts.first().filter(|_| self.has_worktree)
    }

    /// Removes what the run created beneath a writable mount with the name of one of its
    /// protected paths (`.git` protected at the top: a new `sub/.git` with hooks would run on
    /// the host the next time git runs in `sub/`), and returns it as guest paths.
    #[cfg(target_os = "linux")]
    fn sweep(&self) -> Vec<String> {
        let mut removed = Vec::new();
        for (index, names, before) in &self.named_before {
            let Some(mount) = self.mounts.get(*index) else {
                continue;
            };
            let Ok(root) = beneath::open_root(&mount.host) else {
                continue;
            };
            let Some(after) = beneath::find_named(&root, names) else {
                continue;
            };
            for path in after.into_iter().filter(|p| !before.contains(p)) {
                // A protected path's own mount point (made for one that was missing) is the
                // backend's to remove; anything else new goes.
                let guest = format!("{}/{}", mount.guest.trim_end_matches('/'), path.display());
                if beneath::remove(&root, &path).is_ok() {
                    removed.push(guest);
                } else {
                    removed.push(format!("{guest} (could not be removed)"));
                }
            }
        }
        removed
    }

    /// Nothing to sweep where nothing was recorded.
    #[cfg(not(target_os = "linux"))]
    fn sweep(&self) -> Vec<String> {
        Vec::new()
    }

    /// The Outcome of a run that ended as `ended` says, on `backend`.
    pub(crate) fn outcome(&self, ended: Ended, backend: Backend) -> Outcome {
        let removed = self.sweep();
        Outcome {
            removed,
            status: ended.status,
            stdout: ended.stdout,
            records: ended.records,
            stderr: ended.stderr,
            usage: Usage {
                wall_time: self.started.elapsed(),
                fuel_consumed: ended.fuel_consumed,
                peak_memory: ended.peak_memory.map(ByteSize),
                cache: ended.cache,
            },
            backend,
            env_dropped: self.env_dropped.clone(),
            notes: Vec::new(),
        }
    }

    /// The Outcome of a job the backend refused to run (a module it will not instantiate).
    #[cfg(feature = "wasm")]
    pub(crate) fn refused(&self, backend: Backend, reason: impl Into<String>) -> Outcome {
        let mut outcome = Outcome::refused(backend, reason, self.env_dropped.clone());
        outcome.usage.wall_time = self.started.elapsed();
        outcome
    }
}

/// The job's worktree and further directories, checked the same way for every backend: guest
/// paths absolute without `.` or `..`; none the same as another, or covering one mounted
/// before it (which it would hide); none covering or inside what `rules` reserves; a mount may
/// lie inside one mounted before it (`/work/.git/config` after `/work`). Host paths must be
/// existing directories (or files, where `rules` allows), made canonical (bwrap resolves sources
/// from `/`). Also returns the protected paths that do not exist.
/// A writable mount's index, the names of its protected paths, and the entries with those
/// names beneath it before the run.
type NamedBefore = (usize, Vec<std::ffi::OsString>, Vec<PathBuf>);

/// For each writable mount with protected paths: their names and the entries with those
/// names beneath it now. Refuses the job when the tree is too large to look through.
#[cfg(target_os = "linux")]
fn named_entries(mounts: &[Mount]) -> Result<Vec<NamedBefore>, Error> {
    let mut out = Vec::new();
    for (index, mount) in mounts.iter().enumerate() {
        if mount.access != Access::ReadWrite || mount.protected.is_empty() {
            continue;
        }
        let mut names: Vec<std::ffi::OsString> = mount
            .protected
            .iter()
            .filter_map(|p| p.file_name().map(ToOwned::to_owned))
            .collect();
        names.sort();
        names.dedup();
        let bad = |reason: String| Error::Mount {
            host: mount.host.clone(),
            guest: mount.guest.clone(),
            reason,
        };
        let root = beneath::open_root(&mount.host).map_err(|e| bad(format!("cannot open it: {e}")))?;
        let before = beneath::find_named(&root, &names).ok_or_else(|| {
            bad("it has too many entries to find what a helper might create with a protected path's name; run the helper read-only".to_owned())
        })?;
        out.push((index, names, before));
    }
    Ok(out)
}

/// The most directories a non-executable mount keeps executable.
pub(crate) const MAX_EXEC_EXEMPT: usize = 8;

fn check_mounts(job: &Job, rules: MountRules<'_>) -> Result<(Vec<Mount>, Vec<PathBuf>), Error> {
    let inside = |a: &str, b: &str| b == "/" || a.starts_with(&format!("{}/", b.trim_end_matches('/')));
    let mut out: Vec<Mount> = Vec::new();
    let mut missing = Vec::new();
    for mount in job.worktree.iter().chain(&job.dirs) {
        let bad = |reason: &str| Error::Mount {
            host: mount.host.clone(),
            guest: mount.guest.clone(),
            reason: reason.to_owned(),
        };
        let guest = mount.guest.as_str();
        if !guest.starts_with('/') || guest.split('/').any(|c| c == ".." || c == ".") || guest.contains("//")
        {
            return Err(bad(
                "the guest path must be absolute, without `.` or `..` components",
            ));
        }
        let guest = if guest == "/" {
            guest
        } else {
            guest.trim_end_matches('/')
        };
        if let Some(r) = rules.cover.iter().find(|r| guest == **r || inside(r, guest)) {
            return Err(bad(&format!(
                "the guest path would cover {r} of the sandbox; choose another"
            )));
        }
        if let Some(r) = rules.inside.iter().find(|r| inside(guest, r)) {
            return Err(bad(&format!(
                "the guest path lies inside {r}, which the sandbox mounts read-only or for itself; choose another"
            )));
        }
        if out.iter().any(|m| m.guest == guest || inside(&m.guest, guest)) {
            return Err(bad(
                "it would be mounted at, or over, a directory mounted before it (the worktree is at /work); choose another guest path",
            ));
        }
        #[cfg(target_os = "linux")]
        if rules.follows_links
            && let Some(outer) = out
                .iter()
                .filter(|m| inside(guest, &m.guest))
                .max_by_key(|m| m.guest.len())
        {
            let rel = guest
                .strip_prefix(outer.guest.trim_end_matches('/'))
                .unwrap_or(guest)
                .trim_start_matches('/');
            if let Some(link) = link_on_the_way(&outer.host, Path::new(rel)) {
                return Err(bad(&format!(
                    "its mount point passes through {}, a symbolic link (or not a directory) in {}, which the sandbox would follow to mount it elsewhere; the mount point must be a real path",
                    link.display(),
                    outer.host.display()
                )));
            }
        }
        let host = match std::fs::canonicalize(&mount.host) {
            Ok(host) if host.is_dir() => host,
            Ok(host) if rules.files && host.is_file() => host,
            Ok(_) if rules.files => return Err(bad("not a directory or a regular file")),
            Ok(_) => return Err(bad("not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(bad(
                    "it does not exist on this host; create it, or remove the mount (a policy's [native] ro_binds entry)",
                ));
            }
            Err(e) => return Err(bad(&format!("cannot open it: {e}"))),
        };
        let mut protected = Vec::new();
        if mount.access == Access::ReadWrite && !mount.protected.is_empty() {
            let root = open_dir(&host).map_err(|e| bad(&format!("cannot open it: {e}")))?;
            for p in &mount.protected {
                let normal =
                    !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
                if !normal {
                    return Err(bad(&format!(
                        "protected path {} must be relative to the mount, without `.` or `..`",
                        p.display()
                    )));
                }
                for component in walk_protected(&root, &host, p).map_err(|e| bad(&e))? {
                    if !missing.contains(&component) {
                        missing.push(component);
                    }
                }
                if !protected.contains(p) {
                    protected.push(p.clone());
                }
            }
        }
        if let Some(except) = &mount.no_exec_except {
            if !job.worktree.as_ref().is_some_and(|w| std::ptr::eq(w, mount)) {
                return Err(bad("only the worktree mount can be made non-executable"));
            }
            if except.len() > MAX_EXEC_EXEMPT {
                return Err(bad(&format!(
                    "at most {MAX_EXEC_EXEMPT} directories can stay executable"
                )));
            }
            if let Some(name) = except
                .iter()
                .find(|n| n.is_empty() || *n == "." || *n == ".." || n.contains(['/', '\0']))
            {
                return Err(bad(&format!(
                    "{name:?} cannot stay executable: name a directory at the top of the mount"
                )));
            }
        }
        let mut checked = Mount::new(host, guest, mount.access);
        checked.protected = protected;
        checked.no_exec_except = mount.no_exec_except.clone();
        out.push(checked);
    }
    Ok((out, missing))
}

/// The first component of `rel` beneath `root` that is a symbolic link, or a non-directory on
/// the way to the last one; `None` when every existing component is real (a missing one is
/// made by the sandbox as a directory).
#[cfg(target_os = "linux")]
fn link_on_the_way(root: &Path, rel: &Path) -> Option<PathBuf> {
    let Ok(mut at) = open_dir(root) else {
        return Some(root.to_owned());
    };
    let count = rel.components().count();
    let mut seen = PathBuf::new();
    for (i, c) in rel.components().enumerate() {
        seen.push(c);
        let fd = match openat(
            &at,
            c.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => return None,
            Err(_) => return Some(seen),
        };
        let kind = match fstat(&fd) {
            Ok(st) => SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT,
            Err(_) => return Some(seen),
        };
        if kind == SFlag::S_IFLNK || (i + 1 < count && kind != SFlag::S_IFDIR) {
            return Some(seen);
        }
        at = fd;
    }
    None
}

/// Opens a directory for walking beneath it.
fn open_dir(path: &Path) -> nix::Result<OwnedFd> {
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Walks protected path `rel` beneath `root` one component at a time through descriptors,
/// never following a link: every component on the way must be a real directory and the path
/// itself not a link (a link could be turned to point anywhere). Returns the host paths of the
/// components that do not exist, outermost first.
fn walk_protected(root: &OwnedFd, host: &Path, rel: &Path) -> Result<Vec<PathBuf>, String> {
    let count = rel.components().count();
    let mut at: Option<OwnedFd> = None;
    let mut host_at = host.to_owned();
    for (i, c) in rel.components().enumerate() {
        host_at.push(c);
        let last = i + 1 == count;
        let parent = at.as_ref().unwrap_or(root);
        let fd = match openat(
            parent,
            c.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => {
                let mut missing = vec![host_at.clone()];
                for rest in rel.components().skip(i + 1) {
                    host_at.push(rest);
                    missing.push(host_at.clone());
                }
                return Ok(missing);
            }
            Err(e) => {
                return Err(format!("cannot inspect protected path {}: {e}", rel.display()));
            }
        };
        let kind = fstat(&fd)
            .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
            .map_err(|e| format!("cannot inspect protected path {}: {e}", rel.display()))?;
        if kind == SFlag::S_IFLNK {
            return Err(format!(
                "protected path {} is a symbolic link ({}), which cannot be kept read-only; refusing a writable mount",
                rel.display(),
                host_at.display()
            ));
        }
        if !last && kind != SFlag::S_IFDIR {
            return Err(format!(
                "protected path {}: {} is not a directory",
                rel.display(),
                host_at.display()
            ));
        }
        at = Some(fd);
    }
    Ok(Vec::new())
}
