//! Layer 1: configuration and `.ai/` scripts come only from the base repository's default
//! branch. Everything here runs `git` on a repository whose worktree is hostile, so every call
//! is hardened:
//!
//! - wrun's environment is not inherited (no `GIT_DIR`, `GIT_SSH_COMMAND`, `GIT_CONFIG_*` from the
//!   host); system and global config are not read; no terminal prompt;
//! - `core.hooksPath=/dev/null` (no hooks), `core.fsmonitor=false`, no untracked cache,
//!   `diff.external` and textconv off, no pager, no proxy or SSH command, no credential helper;
//! - `protocol.allow=never` with only `file`, `git`, `ssh` and `https` allowed: no `ext::` or
//!   other remote helpers named by a URL;
//! - files are never checked out by git (which would apply `.gitattributes` filters from the
//!   worktree): upstream's `.ai/` is listed with `ls-tree` and each blob written by wrun through a
//!   cap-std handle on the worktree.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, DirBuilder, OpenOptions, Permissions};

/// The directory upstream owns in every worktree.
pub const AI_DIR: &str = ".ai";

/// A git operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// git could not be started.
    #[error("cannot run git ({}): {source}; install git or put it on PATH", git.display())]
    Spawn {
        /// The binary tried.
        git: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// git ran and failed.
    #[error("git {args} failed in {}: {stderr}", repo.display())]
    Failed {
        /// The repository.
        repo: PathBuf,
        /// The arguments, joined.
        args: String,
        /// git's own message.
        stderr: String,
    },
    /// A ref is not of the form `REMOTE/BRANCH` or has characters git would read as options.
    #[error("base ref {0:?} is not REMOTE/BRANCH (for example origin/main)")]
    BadRef(String),
    /// Writing the overlay into the worktree failed.
    #[error("cannot write upstream's .ai/ into the worktree: {0}")]
    Overlay(#[source] std::io::Error),
    /// Upstream could not be fetched; the worktree's `.ai/` was removed.
    #[error(
        "upstream {base} could not be fetched, so the worktree's .ai/ was removed and no helper runs (fail closed): {cause}"
    )]
    FetchFailed {
        /// The ref.
        base: String,
        /// git's message.
        cause: String,
    },
}

/// A repository, with the git binary to run on it.
#[derive(Debug, Clone)]
pub struct Repo {
    git: PathBuf,
    dir: PathBuf,
}

/// The base ref of a review: a remote and its default branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRef {
    /// The remote (`origin`).
    pub remote: String,
    /// The branch (`main`).
    pub branch: String,
}

impl BaseRef {
    /// Parses `REMOTE/BRANCH`. Names that start with `-`, contain `..`, whitespace, control
    /// characters or any of git's ref metacharacters are refused.
    pub fn parse(text: &str) -> Result<Self, GitError> {
        let bad = || GitError::BadRef(text.to_owned());
        let (remote, branch) = text.split_once('/').ok_or_else(bad)?;
        let valid = |s: &str| {
            !s.is_empty()
                && !s.starts_with(['-', '.', '/'])
                && !s.ends_with(['/', '.'])
                && !s.contains("..")
                && !s.contains("//")
                && !s.ends_with(".lock")
                && !s
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\@{}".contains(c))
        };
        if !valid(remote) || remote.contains('/') || !valid(branch) {
            return Err(bad());
        }
        Ok(Self {
            remote: remote.to_owned(),
            branch: branch.to_owned(),
        })
    }

    /// The remote-tracking ref the fetch writes: `refs/remotes/REMOTE/BRANCH`.
    pub fn tracking_ref(&self) -> String {
        format!("refs/remotes/{}/{}", self.remote, self.branch)
    }
}

impl std::fmt::Display for BaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.remote, self.branch)
    }
}

/// The configuration every git call gets on the command line (protected config, which a
/// repository's own `.git/config` cannot override for hooks and protocols).
const HARDENING: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.sshCommand=ssh",
    "core.gitProxy=",
    "core.askPass=",
    "credential.helper=",
    "diff.external=",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.ssh.allow=always",
    "protocol.https.allow=always",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "transfer.fsckObjects=true",
    "advice.detachedHead=false",
];

impl Repo {
    /// A repository at `dir`, using `git` (an absolute path; see [`crate::ambient::which`]).
    pub fn new(git: PathBuf, dir: &Path) -> Self {
        // git matches `safe.directory` against the real path.
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        Self { git, dir }
    }

    /// The repository's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs git with the hardened configuration and returns its stdout.
    ///
    /// # Security
    /// Starts a process with wrun's authority, with a cleared environment (only `PATH`, `HOME`
    /// pointing nowhere and git's own switches) and every hook, filter, helper and external
    /// program turned off on the command line.
    #[allow(clippy::disallowed_methods)] // the host's one git entry point, hardened above
    fn git(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let mut command = Command::new(&self.git);
        command
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C")
            .arg("-C")
            .arg(&self.dir)
            .arg("-c")
            .arg(format!("safe.directory={}", self.dir.display()));
        for setting in HARDENING {
            command.arg("-c").arg(setting);
        }
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let output = command.output().map_err(|source| GitError::Spawn {
            git: self.git.clone(),
            source,
        })?;
        if !output.status.success() {
            return Err(GitError::Failed {
                repo: self.dir.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }

    /// Fetches the base branch into its remote-tracking ref.
    pub fn fetch(&self, base: &BaseRef) -> Result<(), GitError> {
        let refspec = format!("+refs/heads/{}:{}", base.branch, base.tracking_ref());
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            // Not the repository's `remote.*.uploadpack`, which would be a command of its choosing.
            "--upload-pack=git-upload-pack",
            "--end-of-options",
            &base.remote,
            &refspec,
        ])
        .map(drop)
    }

    /// The commit the base's remote-tracking ref points at.
    pub fn commit_of(&self, base: &BaseRef) -> Result<String, GitError> {
        let spec = format!("{}^{{commit}}", base.tracking_ref());
        let out = self.git(&["rev-parse", "--verify", "--quiet", "--end-of-options", &spec])?;
        let id = String::from_utf8_lossy(&out).trim().to_owned();
        if id.len() < 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GitError::Failed {
                repo: self.dir.clone(),
                args: format!("rev-parse {spec}"),
                stderr: format!("unexpected output {id:?}"),
            });
        }
        Ok(id)
    }

    /// The bytes of `path` at `commit` (`git cat-file blob COMMIT:PATH`, never textconv'd).
    pub fn read(&self, commit: &str, path: &str) -> Result<Vec<u8>, GitError> {
        self.git(&["cat-file", "blob", &format!("{commit}:{path}")])
    }

    /// The files under `.ai/` at `commit`: `(mode, blob id, path)`.
    fn ai_tree(&self, commit: &str) -> Result<Vec<(String, String, String)>, GitError> {
        let out = self.git(&["ls-tree", "-r", "-z", "--full-tree", commit, "--", AI_DIR])?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (meta, path) = entry.split_once('\t')?;
                let mut meta = meta.split(' ');
                let (mode, kind, id) = (meta.next()?, meta.next()?, meta.next()?);
                (kind == "blob").then(|| (mode.to_owned(), id.to_owned(), path.to_owned()))
            })
            .collect())
    }
}

/// What the overlay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The base ref.
    pub base: String,
    /// The commit upstream's `.ai/` came from.
    pub commit: String,
    /// Files written.
    pub files: usize,
    /// Whether the worktree had a `.ai` of its own that was removed.
    pub replaced: bool,
}

/// The `.ai/` overlay of seed 001: fetch the base branch (unless `fetch` is false and the ref is
/// already there), delete the worktree's `.ai` (whatever it is: directory, file or symlink) and
/// write upstream's in its place. If the fetch fails the worktree's `.ai` is still deleted and
/// the error says so.
///
/// # Security
/// Opens the worktree once and makes every change through that handle: a `.ai` symlink is
/// removed, never followed.
pub fn overlay(repo: &Repo, worktree: &Path, base: &BaseRef, fetch: bool) -> Result<Overlay, GitError> {
    let root = Dir::open_ambient_dir(worktree, ambient_authority()).map_err(GitError::Overlay)?;
    let fetched = if fetch { repo.fetch(base) } else { Ok(()) };
    let commit = fetched.and_then(|()| repo.commit_of(base));
    let replaced = remove_ai(&root).map_err(GitError::Overlay)?;
    let commit = commit.map_err(|e| GitError::FetchFailed {
        base: base.to_string(),
        cause: e.to_string(),
    })?;
    let entries = repo.ai_tree(&commit)?;
    root.create_dir(AI_DIR).map_err(GitError::Overlay)?;
    let mut files = 0;
    for (mode, id, path) in entries {
        let rel = Path::new(&path);
        if rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        if let Some(parent) = rel.parent() {
            let mut builder = DirBuilder::new();
            builder.recursive(true);
            root.create_dir_with(parent, &builder)
                .map_err(GitError::Overlay)?;
        }
        let bytes = repo.git(&["cat-file", "blob", &id])?;
        if mode == "120000" {
            let target = String::from_utf8_lossy(&bytes).into_owned();
            root.symlink(target, rel).map_err(GitError::Overlay)?;
        } else {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            let mut file = root.open_with(rel, &options).map_err(GitError::Overlay)?;
            file.write_all(&bytes).map_err(GitError::Overlay)?;
            let executable = mode == "100755";
            use cap_std::fs::PermissionsExt;
            file.set_permissions(Permissions::from_mode(if executable { 0o755 } else { 0o644 }))
                .map_err(GitError::Overlay)?;
        }
        files += 1;
    }
    Ok(Overlay {
        base: base.to_string(),
        commit,
        files,
        replaced,
    })
}

/// Removes the worktree's `.ai`, whatever it is. Returns whether there was one.
fn remove_ai(root: &Dir) -> std::io::Result<bool> {
    match root.symlink_metadata(AI_DIR) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => root.remove_dir_all(AI_DIR).map(|()| true),
        Ok(_) => root.remove_file(AI_DIR).map(|()| true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_refs_are_remote_slash_branch_and_nothing_git_would_misread() {
        let b = BaseRef::parse("origin/main").expect("valid");
        assert_eq!(b.tracking_ref(), "refs/remotes/origin/main");
        assert_eq!(
            BaseRef::parse("upstream/release/1.2").expect("valid").branch,
            "release/1.2"
        );
        for bad in [
            "main",
            "-origin/main",
            "origin/--upload-pack=x",
            "origin/a..b",
            "origin/ma in",
            "origin/main.lock",
            "origin/",
            "/main",
            "origin/x:y",
            "origin/@{-1}",
            "origin/ma\nin",
        ] {
            assert!(BaseRef::parse(bad).is_err(), "{bad:?}");
        }
    }
}
