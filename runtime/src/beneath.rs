//! Reading a host directory the job names (a worktree the pull request controls) through
//! descriptors, one component at a time, never following a symbolic link: what the runtime
//! learns about a mount's contents cannot be redirected out of it.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};

/// Opens the directory at `path` (the mount's canonical host path) to walk beneath it.
pub(crate) fn open_root(path: &Path) -> nix::Result<OwnedFd> {
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `rel` beneath `root`, every component a real directory but the last, which is opened
/// with `last` (plus `O_NOFOLLOW`); `None` if a component does not exist or is a link.
pub(crate) fn open(root: &OwnedFd, rel: &Path, last: OFlag) -> nix::Result<Option<OwnedFd>> {
    let walk = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let count = rel.components().count();
    if count == 0 {
        // The root itself, opened as asked.
        return openat(root, ".", last | OFlag::O_CLOEXEC, Mode::empty()).map(Some);
    }
    let mut current = openat(root, ".", walk, Mode::empty())?;
    for (i, component) in rel.components().enumerate() {
        let flags = if i + 1 == count {
            last | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
        } else {
            walk
        };
        match openat(&current, component.as_os_str(), flags, Mode::empty()) {
            Ok(next) => current = next,
            Err(nix::Error::ENOENT | nix::Error::ELOOP | nix::Error::ENOTDIR) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(current))
}

/// The file type of `rel` beneath `root` (a link is a link), if it exists.
pub(crate) fn kind(root: &OwnedFd, rel: &Path) -> Option<SFlag> {
    let fd = open(root, rel, OFlag::O_PATH).ok()??;
    let st = fstat(&fd).ok()?;
    Some(SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
}

/// The entries of directory `rel` beneath `root`, with their file types (a link is a link);
/// empty if it is not a directory reached without links.
pub(crate) fn entries(root: &OwnedFd, rel: &Path) -> Vec<(OsString, SFlag)> {
    let Ok(Some(fd)) = open(root, rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY) else {
        return Vec::new();
    };
    let Ok(mut dir) = nix::dir::Dir::from_fd(fd) else {
        return Vec::new();
    };
    let dirfd = dir.as_fd().try_clone_to_owned();
    let mut out = Vec::new();
    for entry in dir.iter().flatten() {
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = dirfd
            .as_ref()
            .ok()
            .and_then(|d| fstatat(d, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok())
            .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT);
        if let Some(kind) = kind {
            use std::os::unix::ffi::OsStrExt;
            out.push((std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned(), kind));
        }
    }
    out
}

/// The most entries [`find_named`] looks at.
const MAX_FIND_ENTRIES: usize = 2_000_000;

/// The paths beneath `root` (relative, links not followed, nothing beneath a match looked at)
/// of every entry whose name is one of `names`; `None` if the tree has more than
/// [`MAX_FIND_ENTRIES`] entries.
pub(crate) fn find_named(root: &OwnedFd, names: &[OsString]) -> Option<Vec<std::path::PathBuf>> {
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([std::path::PathBuf::new()]);
    let mut seen = 0usize;
    while let Some(dir) = queue.pop_front() {
        for (name, kind) in entries(root, &dir) {
            seen += 1;
            if seen > MAX_FIND_ENTRIES {
                return None;
            }
            let rel = dir.join(&name);
            if names.contains(&name) {
                found.push(rel);
            } else if kind == SFlag::S_IFDIR {
                queue.push_back(rel);
            }
        }
    }
    Some(found)
}

/// Removes `rel` beneath `root` and, if it is a directory, everything beneath it, never
/// following a link (a link is removed, not its target).
pub(crate) fn remove(root: &OwnedFd, rel: &Path) -> nix::Result<()> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let Some(name) = rel.file_name() else {
        return Err(nix::Error::EINVAL);
    };
    let parent = rel.parent().unwrap_or(Path::new(""));
    let Some(parent_fd) = open(root, parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY)? else {
        return Ok(());
    };
    let st = match fstatat(&parent_fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(nix::Error::ENOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
        // Depth first, one directory at a time, each reached again from `root` without links.
        for (child, _) in entries(root, rel) {
            remove(root, &rel.join(child))?;
        }
        unlinkat(&parent_fd, name, UnlinkatFlags::RemoveDir)
    } else {
        unlinkat(&parent_fd, name, UnlinkatFlags::NoRemoveDir)
    }
}
