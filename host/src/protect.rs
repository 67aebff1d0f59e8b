//! Which paths of a writable worktree stay read-only for the helper: the places from which
//! code later runs on the host outside any sandbox. A hook planted in `.git/hooks`, a
//! `core.fsmonitor` added to `.git/config`, a rewritten `.ai/` would run the next time
//! anything on the host runs git in the worktree, or the next time helpers are read from it.
//!
//! - `.git` and `.ai` at the top of the worktree, whether they exist or not (a missing one
//!   cannot be created);
//! - the git directory a `.git` file points to, when it lies inside the worktree;
//! - every nested repository's `.git` (a directory or a file), at any depth.
//!
//! The runtime enforces them as a property of the worktree's mount ([`wrun_runtime::Mount::protect`]).

use std::path::{Path, PathBuf};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

/// The names protected at the top of every writable worktree.
pub const TOP_LEVEL: &[&str] = &[".git", ".ai"];

/// The most directory entries looked at to find nested repositories.
const MAX_ENTRIES: usize = 2_000_000;

/// The protected paths could not be determined; the writable run is refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot determine the protected paths of the writable worktree {}: {reason}", worktree.display())]
pub struct ProtectError {
    worktree: PathBuf,
    reason: String,
}

/// The paths of `worktree` a writable helper may not change (relative to it).
///
/// # Security
/// Walks the worktree through a directory handle, never following a symbolic link.
pub fn protected_paths(worktree: &crate::worktree::Worktree) -> Result<Vec<PathBuf>, ProtectError> {
    Ok(scan(worktree)?.protected)
}

/// What one walk of a worktree found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The paths a writable helper may not change (see [`protected_paths`]).
    pub protected: Vec<PathBuf>,
    /// The first entry (outside `.git`) whose name is not a plain name: one perl's magic open
    /// runs or reads as a mode ([`crate::args::is_magic_name`]), or one with a control
    /// character, which splits a line-based file list into such names.
    pub unplain: Option<PathBuf>,
}

/// Walks `worktree` once: its protected paths and its first name that is not plain.
///
/// # Security
/// Walks the worktree through a directory handle, never following a symbolic link.
pub fn scan(worktree: &crate::worktree::Worktree) -> Result<Scan, ProtectError> {
    let fail = |reason: String| ProtectError {
        worktree: worktree.path().to_owned(),
        reason,
    };
    let root = worktree.dir();
    let real_root = worktree.path();
    let mut out: Vec<PathBuf> = TOP_LEVEL.iter().map(PathBuf::from).collect();
    if let Some(gitdir) = gitdir_inside(root, real_root, Path::new(".git")) {
        out.push(gitdir);
    }
    // Breadth first, one directory open at a time, never into a `.git`.
    let mut queue: std::collections::VecDeque<PathBuf> = std::collections::VecDeque::from([PathBuf::new()]);
    let mut seen = 0usize;
    let mut unplain = None;
    while let Some(dir) = queue.pop_front() {
        let handle = if dir.as_os_str().is_empty() {
            root.try_clone().map_err(|e| fail(e.to_string()))?
        } else {
            match root.open_dir_nofollow(&dir) {
                Ok(d) => d,
                Err(e) => return Err(fail(format!("cannot open {}: {e}", dir.display()))),
            }
        };
        let entries = handle
            .entries()
            .map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(fail(format!(
                    "it has more than {MAX_ENTRIES} entries; nested repositories cannot all be found, so no writable run is allowed"
                )));
            }
            let name = entry.file_name();
            let rel = dir.join(&name);
            if unplain.is_none() && name != ".git" {
                let text = name.to_string_lossy();
                if crate::args::is_magic_name(&text) || text.chars().any(char::is_control) {
                    unplain = Some(rel.clone());
                }
            }
            let kind = entry.file_type().map_err(|e| fail(e.to_string()))?;
            if name == ".git" {
                if !dir.as_os_str().is_empty() {
                    out.push(rel.clone());
                    if let Some(gitdir) = gitdir_inside(root, real_root, &rel) {
                        out.push(gitdir);
                    }
                }
                continue;
            }
            // The worktree's own .ai is the pull request's, which no helper sees: upstream's is
            // mounted over it (or written in its place).
            if kind.is_dir() && !kind.is_symlink() && rel != Path::new(crate::git::AI_DIR) {
                queue.push_back(rel);
            }
        }
    }
    out.sort();
    out.dedup();
    // A protected file with a second name elsewhere could be written through that name.
    for p in ["config", "index"].iter().map(|f| Path::new(".git").join(f)) {
        if let Ok(meta) = root.symlink_metadata(&p) {
            use cap_std::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(fail(format!(
                    "{} has {} hard links: a helper could change it through another name",
                    p.display(),
                    meta.nlink()
                )));
            }
        }
    }
    Ok(Scan {
        protected: out,
        unplain,
    })
}

/// Where a `.git` file (`gitdir: PATH`, as linked worktrees and submodules have) points, when
/// that is a directory inside the worktree (whose real path is `real_root`).
fn gitdir_inside(root: &Dir, real_root: &Path, dot_git: &Path) -> Option<PathBuf> {
    let meta = root.symlink_metadata(dot_git).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = root.read_to_string(dot_git).ok()?;
    let target = Path::new(text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim());
    let relative = if target.is_absolute() {
        std::fs::canonicalize(target)
            .ok()?
            .strip_prefix(real_root)
            .ok()?
            .to_owned()
    } else {
        dot_git.parent().unwrap_or(Path::new("")).join(target)
    };
    let canonical = root.canonicalize(&relative).ok()?;
    let is_dir = root.symlink_metadata(&canonical).is_ok_and(|m| m.is_dir());
    (!canonical.as_os_str().is_empty() && is_dir).then_some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worktree at `path`, opened.
    fn open(path: &std::path::Path) -> crate::worktree::Worktree {
        crate::worktree::Worktree::open(path, cap_std::ambient_authority()).expect("open")
    }

    #[test]
    fn top_level_nested_and_gitdir_targets_are_protected() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path();
        for dir in [
            ".git/hooks",
            "vendor/lib/.git",
            "src/deep/er",
            "meta/gitdir",
            "sub",
        ] {
            std::fs::create_dir_all(wt.join(dir)).expect("mkdir");
        }
        std::fs::write(wt.join("sub/.git"), "gitdir: ../meta/gitdir\n").expect("write");
        std::os::unix::fs::symlink("/", wt.join("src/root-link")).expect("symlink");
        let found = protected_paths(&open(wt)).expect("walk");
        let expect: Vec<PathBuf> = [".ai", ".git", "meta/gitdir", "sub/.git", "vendor/lib/.git"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(found, expect);
    }

    #[test]
    fn the_scan_finds_the_first_name_that_is_not_plain_at_any_depth() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path();
        std::fs::create_dir_all(wt.join("src/routes")).expect("mkdir");
        for plain in ["src/routes/+page.svelte", "src/a|b", "src/a b", "README"] {
            std::fs::write(wt.join(plain), "").expect("write");
        }
        assert_eq!(scan(&open(wt)).expect("walk").unplain, None);
        for (i, bad) in ["x|", "|x", " x", "x ", "<x", "+>x", "-", "a\nb", "a\x1bb"]
            .iter()
            .enumerate()
        {
            let dir = wt.join(format!("d{i}/deep"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join(bad), "").expect("write");
            let found = scan(&open(wt)).expect("walk").unplain;
            assert_eq!(found, Some(PathBuf::from(format!("d{i}/deep/{bad}"))), "{bad:?}");
            std::fs::remove_dir_all(wt.join(format!("d{i}"))).expect("rm");
        }
        // A directory's name counts too.
        std::fs::create_dir_all(wt.join("src/id|")).expect("mkdir");
        assert_eq!(
            scan(&open(wt)).expect("walk").unplain,
            Some(PathBuf::from("src/id|"))
        );
    }

    #[test]
    fn a_hard_linked_git_config_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join(".git")).expect("mkdir");
        std::fs::write(tmp.path().join(".git/config"), "").expect("write");
        std::fs::hard_link(tmp.path().join(".git/config"), tmp.path().join("innocent")).expect("link");
        assert!(protected_paths(&open(tmp.path())).is_err());
    }
}
