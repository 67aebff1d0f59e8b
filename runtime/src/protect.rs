//! Protected paths of a writable mount ([`Mount::protect`]) for code that runs in-process
//! (wasm): kept read-only with Landlock, since no mount namespace can be had there.
//!
//! Landlock only grants, and a grant covers everything beneath it, so "the worktree minus
//! `.git`" is expressed entry by entry: in each directory on the way from the mount's root to a
//! protected path (the *spine*: the root, and e.g. `vendor/` for `vendor/lib/.git`), every
//! entry that is neither a protected path nor itself on the spine is granted every write right
//! (a directory, beneath it) or the file rights (a regular file: write and truncate in place).
//! Protected paths get nothing; neither do the spine directories themselves, so no entry can
//! be created, removed or renamed in them: a missing protected path cannot be created, an
//! existing one cannot be replaced, and a new file cannot appear at the top of the worktree.
//! Hard links and renames out of a protected path are refused by Landlock itself (a file may
//! not move to where it would gain rights), and writes through a symbolic link are checked
//! against where it leads. Writable mounts without protected paths are granted whole.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};

use crate::Error;
use crate::job::{Access, Mount};
use crate::sys::landlock::{self, Ruleset, access};

/// The rules that confine one run, with their descriptors opened ahead of time.
#[derive(Debug)]
pub(crate) struct LandlockPlan {
    handled: u64,
    rules: Vec<(OwnedFd, u64)>,
}

impl LandlockPlan {
    /// The rules for `mounts`, or `None` if no writable mount has protected paths and no mount
    /// lies inside another. An error if some do and the kernel has no Landlock (the job cannot
    /// be run as asked).
    ///
    /// A mount inside another (upstream's `.ai` copy at `/work/.ai`) shadows what lies there in
    /// the outer one: a preopen is matched by the path the guest writes, and `/work/./.ai`, a
    /// `..` or a link of the outer tree would reach what lies beneath. Such a shadowed path is
    /// made unreadable as well as unwritable: reads are then handled too, every mount is granted
    /// them, and the shadowed path's outer mount is granted entry by entry as for protected
    /// paths (its spine directories keep the right to be listed, so the shadowed path's names,
    /// not its contents, can be read through the outer tree).
    pub(crate) fn for_mounts(mounts: &[Mount]) -> Result<Option<Self>, Error> {
        let shadowed = shadowed(mounts);
        let first = mounts
            .iter()
            .find(|m| m.access == Access::ReadWrite && !m.protected.is_empty())
            .or_else(|| {
                shadowed
                    .first()
                    .and_then(|(host, _)| mounts.iter().find(|m| &m.host == host))
            });
        let Some(first) = first else {
            return Ok(None);
        };
        let refuse = |reason: String| Error::Mount {
            host: first.host.clone(),
            guest: first.guest.clone(),
            reason,
        };
        let abi = landlock::abi().ok_or_else(|| {
            refuse(
                "it is writable with protected paths, or has a directory mounted inside it, which wasm helpers get only where the kernel provides Landlock, and this one does not (see `wrun doctor`); run the helper read-only, without the inner mount"
                    .into(),
            )
        })?;
        let reads = !shadowed.is_empty();
        let (dir_reads, file_reads) = if reads {
            (access::READ_FILE | access::READ_DIR, access::READ_FILE)
        } else {
            (0, 0)
        };
        let (all, file) = (access::writes(abi), access::file_writes(abi));
        let io = |what: &str, e: nix::Error| refuse(format!("{what}: {e}"));
        let mut rules: Vec<(OwnedFd, u64)> = Vec::new();
        let mut push = |fd: OwnedFd, rights: u64| {
            if rights != 0 {
                rules.push((fd, rights));
            }
        };
        let mut done: BTreeSet<&Path> = BTreeSet::new();
        for mount in mounts {
            if !done.insert(&mount.host) {
                continue;
            }
            let writable = mount.access == Access::ReadWrite;
            let (dir_writes, file_writes) = if writable { (all, file) } else { (0, 0) };
            let root = openat(
                nix::fcntl::AT_FDCWD,
                &mount.host,
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io("opening the mount", e))?;
            let is_dir = fstat(&root)
                .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
                .map_err(|e| io("inspecting the mount", e))?;
            if !is_dir {
                // A file mount: reads, and writes if writable.
                push(root, file_reads | file_writes);
                continue;
            }
            let protected: BTreeSet<&Path> = if writable {
                mount.protected.iter().map(PathBuf::as_path).collect()
            } else {
                BTreeSet::new()
            };
            let hidden: BTreeSet<&Path> = shadowed
                .iter()
                .filter(|(host, _)| host == &mount.host)
                .map(|(_, rel)| rel.as_path())
                .collect();
            if protected.is_empty() && hidden.is_empty() {
                push(root, dir_writes | dir_reads);
                continue;
            }
            let mut spine: BTreeSet<PathBuf> = BTreeSet::from([PathBuf::new()]);
            for p in protected.iter().chain(&hidden) {
                spine.extend(p.ancestors().skip(1).map(Path::to_path_buf));
            }
            for dir in &spine {
                let Some(dir_fd) = open_beneath_dir(&root, dir).map_err(|e| io("opening a directory", e))?
                else {
                    continue;
                };
                let listing = nix::dir::Dir::openat(
                    &dir_fd,
                    ".",
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                );
                let mut listing = listing.map_err(|e| io("listing a directory", e))?;
                for entry in listing.iter() {
                    let entry = entry.map_err(|e| io("listing a directory", e))?;
                    let name = entry.file_name();
                    if matches!(name.to_bytes(), b"." | b"..") {
                        continue;
                    }
                    let rel = dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
                    if spine.contains(&rel) || hidden.contains(rel.as_path()) {
                        continue;
                    }
                    let Ok(fd) = openat(
                        &dir_fd,
                        name,
                        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    ) else {
                        continue;
                    };
                    let kept = protected.contains(rel.as_path());
                    let kind = fstat(&fd).map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT);
                    match kind {
                        Ok(SFlag::S_IFDIR) if kept => push(fd, dir_reads),
                        Ok(SFlag::S_IFDIR) => push(fd, dir_writes | dir_reads),
                        Ok(SFlag::S_IFREG) if kept => push(fd, file_reads),
                        Ok(SFlag::S_IFREG) => push(fd, file_writes | file_reads),
                        _ => {}
                    }
                }
                // The spine directory itself may be listed (and opened), not changed.
                push(dir_fd, dir_reads & access::READ_DIR);
            }
        }
        let handled = all
            | if reads {
                access::READ_FILE | access::READ_DIR
            } else {
                0
            };
        Ok(Some(Self { handled, rules }))
    }

    /// Enforces the rules on the calling thread and everything it starts from now on.
    pub(crate) fn enforce(self) -> std::io::Result<()> {
        let ruleset = Ruleset::new(self.handled)?;
        for (fd, access) in &self.rules {
            ruleset.allow(fd.as_fd(), *access)?;
        }
        ruleset.restrict_self()
    }
}

/// Where a mount lies inside another (by guest path): the outer mount's host path, and the
/// inner one's path relative to it, which it shadows.
fn shadowed(mounts: &[Mount]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for outer in mounts.iter().filter(|m| m.guest.starts_with('/')) {
        for inner in mounts.iter().filter(|m| m.guest.starts_with('/')) {
            if let Ok(rel) = Path::new(&inner.guest).strip_prefix(&outer.guest)
                && !rel.as_os_str().is_empty()
            {
                out.push((outer.host.clone(), rel.to_path_buf()));
            }
        }
    }
    out
}

/// Opens directory `rel` beneath `root` without following a link; `None` if it is missing.
fn open_beneath_dir(root: &OwnedFd, rel: &Path) -> nix::Result<Option<OwnedFd>> {
    crate::beneath::open(root, rel, OFlag::O_PATH | OFlag::O_DIRECTORY)
}
