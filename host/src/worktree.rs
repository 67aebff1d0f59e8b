//! The pull request's worktree, opened once.
//!
//! Every host-side read of the worktree (argument checks, program resolution, protected paths,
//! the `.ai/` overlay, git isolation) goes through one directory handle, as cap-std asks: a
//! path inside it is resolved beneath the handle, never through a link out of it. Opening it
//! by path is the one step that uses ambient authority, and says so.

use std::path::{Path, PathBuf};

use cap_std::AmbientAuthority;
use cap_std::fs::Dir;

/// An opened worktree: its handle and its canonical path (for mounts and messages).
#[derive(Debug)]
pub struct Worktree {
    dir: Dir,
    path: PathBuf,
}

impl Worktree {
    /// Opens the worktree at `path` (made canonical first).
    ///
    /// # Ambient authority
    /// Opens a path of the host's file system.
    pub fn open(path: &Path, ambient: AmbientAuthority) -> std::io::Result<Self> {
        let path = std::fs::canonicalize(path)?;
        let dir = Dir::open_ambient_dir(&path, ambient)?;
        Ok(Self { dir, path })
    }

    /// The handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
