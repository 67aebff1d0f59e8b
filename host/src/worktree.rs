//! The pull request's worktree, opened once, and upstream's `.ai/` as wrun keeps it.
//!
//! Every host-side read of the worktree (argument checks, program resolution, protected paths,
//! git isolation) goes through one directory handle, as cap-std asks: a path inside it is
//! resolved beneath the handle, never through a link out of it. Opening it by path is the one
//! step that uses ambient authority, and says so.
//!
//! What a helper sees at `.ai/` is upstream's copy in wrun's storage, not the worktree's own
//! `.ai` (the pull request's): host-side reads of `.ai/…` go through [`Worktree::ai`].

use std::path::{Path, PathBuf};

use cap_std::AmbientAuthority;
use cap_std::fs::Dir;

/// An opened worktree: its handle and its canonical path (for mounts and messages), with
/// upstream's `.ai/` once attached.
#[derive(Debug)]
pub struct Worktree {
    dir: Dir,
    path: PathBuf,
    ai: Option<(Dir, PathBuf)>,
}

impl Worktree {
    /// Opens the worktree at `path` (made canonical first).
    ///
    /// # Ambient authority
    /// Opens a path of the host's file system.
    pub fn open(path: &Path, ambient: AmbientAuthority) -> std::io::Result<Self> {
        let path = std::fs::canonicalize(path)?;
        let dir = Dir::open_ambient_dir(&path, ambient)?;
        Ok(Self { dir, path, ai: None })
    }

    /// Attaches upstream's `.ai/` (a directory of wrun's, at `path`): what helpers see at the
    /// worktree's `.ai/`, and what host-side resolution of `.ai/…` reads.
    ///
    /// # Ambient authority
    /// Opens a path of the host's file system (wrun's own storage).
    pub fn with_ai(mut self, path: &Path, ambient: AmbientAuthority) -> std::io::Result<Self> {
        let path = std::fs::canonicalize(path)?;
        let dir = Dir::open_ambient_dir(&path, ambient)?;
        self.ai = Some((dir, path));
        Ok(self)
    }

    /// The handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Upstream's `.ai/`, once attached: its handle and its canonical path.
    pub fn ai(&self) -> Option<(&Dir, &Path)> {
        self.ai.as_ref().map(|(dir, path)| (dir, path.as_path()))
    }
}
