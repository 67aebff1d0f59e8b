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
    /// The rules for `mounts`, or `None` if no writable mount has protected paths. An error if
    /// some do and the kernel has no Landlock (the job cannot be run as asked).
    pub(crate) fn for_mounts(mounts: &[Mount]) -> Result<Option<Self>, Error> {
        let Some(first) = mounts
            .iter()
            .find(|m| m.access == Access::ReadWrite && !m.protected.is_empty())
        else {
            return Ok(None);
        };
        let refuse = |reason: String| Error::Mount {
            host: first.host.clone(),
            guest: first.guest.clone(),
            reason,
        };
        let abi = landlock::abi().ok_or_else(|| {
            refuse(
                "it is writable with protected paths, which wasm helpers get only where the kernel provides Landlock, and this one does not (see `wrun doctor`); run the helper read-only"
                    .into(),
            )
        })?;
        let (all, file) = (access::writes(abi), access::file_writes(abi));
        let io = |what: &str, e: nix::Error| refuse(format!("{what}: {e}"));
        let mut rules = Vec::new();
        let mut done: BTreeSet<&Path> = BTreeSet::new();
        for mount in mounts.iter().filter(|m| m.access == Access::ReadWrite) {
            if !done.insert(&mount.host) {
                continue;
            }
            let root = openat(
                nix::fcntl::AT_FDCWD,
                &mount.host,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io("opening the mount", e))?;
            if mount.protected.is_empty() {
                rules.push((root, all));
                continue;
            }
            let protected: BTreeSet<&Path> = mount.protected.iter().map(PathBuf::as_path).collect();
            let mut spine: BTreeSet<PathBuf> = BTreeSet::from([PathBuf::new()]);
            for p in &mount.protected {
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
                    if spine.contains(&rel) || protected.contains(rel.as_path()) {
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
                    let kind = fstat(&fd).map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT);
                    match kind {
                        Ok(SFlag::S_IFDIR) => rules.push((fd, all)),
                        Ok(SFlag::S_IFREG) => rules.push((fd, file)),
                        _ => {}
                    }
                }
            }
        }
        Ok(Some(Self { handled: all, rules }))
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

/// Opens directory `rel` beneath `root` without following a link; `None` if it is missing.
fn open_beneath_dir(root: &OwnedFd, rel: &Path) -> nix::Result<Option<OwnedFd>> {
    crate::beneath::open(root, rel, OFlag::O_PATH | OFlag::O_DIRECTORY)
}
