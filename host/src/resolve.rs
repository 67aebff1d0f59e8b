//! Layer 2: only upstream code executes. A native helper's `command[0]` is accepted only if it is
//!
//! - a bare name found on the policy's `PATH` (resolved to an absolute path before spawning),
//! - an absolute path to an executable in one of the policy's `PATH` directories, or
//! - a relative path that resolves, symlinks followed, to a regular file under upstream's
//!   `.ai/` (wrun's copy of it, which helpers see at the worktree's `.ai/`).
//!
//! Everything else is refused with the reason: `./scripts/lint.sh`, `.ai/../x`, a `.ai/` symlink
//! (or a `.ai` directory symlink) pointing out, an absolute path outside the policy. The worktree
//! is hostile: it is read only through a cap-std directory handle, so no lookup can follow a
//! symlink out of it.

use std::path::{Component, Path, PathBuf};

/// Where `command[0]` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// An executable from the policy's `PATH`, absolute.
    System(PathBuf),
    /// An upstream script under `.ai/`: its path relative to the worktree (canonical, starting
    /// with `.ai/`). Inside the sandbox it is at the worktree's guest path joined with this.
    Upstream(PathBuf),
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command {command:?} refused: {reason}")]
pub struct ResolveError {
    /// The command as given.
    pub command: String,
    /// Why, and what is allowed instead.
    pub reason: String,
}

/// Resolves `command` against the policy's `path` and the worktree at `worktree`.
///
/// # Security
/// Reads the policy's `PATH` directories with wrun's authority (they are the operator's) and the
/// worktree only through a capability handle opened at its root.
pub fn resolve(
    command: &str,
    path: &[PathBuf],
    worktree: &crate::worktree::Worktree,
) -> Result<Resolved, ResolveError> {
    resolve_with(command, path, &|p| p.to_owned(), worktree)
}

/// [`resolve`] where `path` names the sandbox's directories and `host_of` says where a guest
/// path lies on the host (through the policy's `ro_binds`): a bare name is found in a guest
/// directory by looking at its host place, and resolves to the guest path.
///
/// # Security
/// As [`resolve`].
pub fn resolve_with(
    command: &str,
    path: &[PathBuf],
    host_of: &dyn Fn(&Path) -> PathBuf,
    worktree: &crate::worktree::Worktree,
) -> Result<Resolved, ResolveError> {
    let refuse = |reason: String| ResolveError {
        command: command.to_owned(),
        reason,
    };
    if command.is_empty() || command.contains(['\0', '\n']) {
        return Err(refuse("it is empty or contains NUL or newline".into()));
    }
    if !command.contains('/') {
        return path
            .iter()
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(command))
            .find(|p| is_executable(&host_of(p)))
            .map(Resolved::System)
            .ok_or_else(|| refuse("not found on the policy's PATH".into()));
    }
    let as_path = Path::new(command);
    if as_path.is_absolute() {
        let in_policy = as_path
            .parent()
            .is_some_and(|parent| path.iter().any(|dir| dir == parent));
        if in_policy && is_executable(&host_of(as_path)) {
            return Ok(Resolved::System(as_path.to_owned()));
        }
        return Err(refuse(
            "an absolute path must name an executable in one of the policy's PATH directories".into(),
        ));
    }
    let rel: PathBuf = as_path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if rel.components().next() != Some(Component::Normal(".ai".as_ref())) {
        return Err(refuse(
            "only scripts under .ai/ (upstream's helper directory) may run from the worktree".into(),
        ));
    }
    let Some((ai, _)) = worktree.ai() else {
        return Err(refuse(
            "upstream's .ai/ is not available, so no script under .ai/ can run".into(),
        ));
    };
    let inner: PathBuf = rel.components().skip(1).collect();
    if inner.as_os_str().is_empty() {
        return Err(refuse("it is not a regular file".into()));
    }
    // Upstream's .ai/ as wrun keeps it, never the worktree's. Canonicalizing through its handle
    // follows symlinks but cannot leave it: a link pointing out is an error here.
    let canonical = ai
        .canonicalize(&inner)
        .map_err(|e| refuse(format!("it does not resolve inside upstream's .ai/: {e}")))?;
    if canonical.as_os_str().is_empty() {
        return Err(refuse("it is not a regular file".into()));
    }
    let meta = ai
        .metadata(&canonical)
        .map_err(|e| refuse(format!("cannot inspect it: {e}")))?;
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    let canonical = Path::new(".ai").join(canonical);
    Ok(Resolved::Upstream(canonical))
}

/// The links on the way from `program` (an absolute path on the host) to the file it names
/// that lie outside `/usr` (which the sandbox binds whole): Debian's alternatives make
/// `/usr/bin/awk` a link to `/etc/alternatives/awk`, a link in turn to `/usr/bin/mawk`. The
/// sandbox needs each such link bound read-only at its own path, or the command is not found
/// there (exit 127). At most 16 links are followed.
///
/// # Security
/// Reads links on the host with wrun's authority; `program` came from the policy's `PATH`.
pub fn links_outside_usr(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut current = program.to_owned();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&current) else {
            break;
        };
        let next = match current.parent() {
            Some(dir) if target.is_relative() => dir.join(&target),
            _ => target,
        };
        let next: PathBuf = next.components().fold(PathBuf::new(), |mut p, c| {
            match c {
                Component::ParentDir => {
                    p.pop();
                }
                Component::CurDir => {}
                c => p.push(c),
            }
            p
        });
        if !next.starts_with("/usr") && std::fs::symlink_metadata(&next).is_ok() {
            out.push(next.clone());
        }
        current = next;
    }
    out
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// The worktree at `path`, opened, with upstream's `.ai/` from the sibling `ai`.
    fn open(path: &std::path::Path) -> crate::worktree::Worktree {
        let ai = path.parent().expect("parent").join("ai");
        crate::worktree::Worktree::open(path, cap_std::ambient_authority())
            .expect("open")
            .with_ai(&ai, cap_std::ambient_authority())
            .expect("open ai")
    }

    /// Upstream's copy in `ai`, the pull request's worktree in `wt` with a `.ai` of its own.
    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path().join("wt");
        let ai = tmp.path().join("ai");
        for dir in [ai.join("sub"), wt.join("scripts"), wt.join(".ai")] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        for file in [
            ai.join("lint.sh"),
            ai.join("sub/check.py"),
            wt.join("scripts/lint.sh"),
            wt.join(".ai/pr-only.sh"),
        ] {
            std::fs::write(file, "#!/bin/sh\n").expect("write");
        }
        std::fs::write(tmp.path().join("outside.sh"), "#!/bin/sh\n").expect("write");
        symlink("../wt/scripts/lint.sh", ai.join("to-scripts")).expect("symlink");
        symlink("../outside.sh", ai.join("to-outside")).expect("symlink");
        symlink("sub/check.py", ai.join("inner-link")).expect("symlink");
        (tmp, wt)
    }

    #[test]
    fn upstream_scripts_resolve_in_wruns_copy() {
        let (_tmp, wt) = fixture();
        for (command, expected) in [
            (".ai/lint.sh", ".ai/lint.sh"),
            ("./.ai/lint.sh", ".ai/lint.sh"),
            (".ai/sub/check.py", ".ai/sub/check.py"),
            (".ai/inner-link", ".ai/sub/check.py"),
        ] {
            assert_eq!(
                resolve(command, &[], &open(&wt)),
                Ok(Resolved::Upstream(PathBuf::from(expected))),
                "{command}"
            );
        }
    }

    #[test]
    fn everything_else_from_the_worktree_is_refused() {
        let (_tmp, wt) = fixture();
        for command in [
            "./scripts/lint.sh",
            "scripts/lint.sh",
            ".ai/../scripts/lint.sh",
            ".ai/to-scripts",
            ".ai/to-outside",
            ".ai/missing.sh",
            // The pull request's own .ai/ is never what runs.
            ".ai/pr-only.sh",
            ".ai/sub",
            ".ai",
            ".ai/",
            "../outside.sh",
            "",
        ] {
            assert!(
                resolve(command, &[], &open(&wt)).is_err(),
                "{command:?} was accepted"
            );
        }
    }

    #[test]
    fn without_upstreams_copy_no_ai_script_resolves() {
        let (_tmp, wt) = fixture();
        let bare = crate::worktree::Worktree::open(&wt, cap_std::ambient_authority()).expect("open");
        let err = resolve(".ai/pr-only.sh", &[], &bare).expect_err("refused");
        assert!(err.reason.contains("not available"), "{err}");
    }

    #[test]
    fn a_symlinked_ai_of_the_pull_request_is_not_what_resolves() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path().join("wt");
        for dir in [tmp.path().join("evil"), wt.clone(), tmp.path().join("ai")] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        std::fs::write(tmp.path().join("evil/run.sh"), "#!/bin/sh\n").expect("write");
        symlink("../evil", wt.join(".ai")).expect("symlink");
        assert!(resolve(".ai/run.sh", &[], &open(&wt)).is_err());
    }

    #[test]
    fn alternatives_links_outside_usr_are_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let alt = tmp.path().join("alternatives");
        std::fs::create_dir_all(&alt).expect("mkdir");
        symlink("/usr/bin/true", alt.join("thing")).expect("symlink");
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        symlink("../alternatives/thing", bin.join("thing")).expect("symlink");
        assert_eq!(links_outside_usr(&bin.join("thing")), vec![alt.join("thing")]);
        assert!(links_outside_usr(Path::new("/usr/bin/true")).is_empty());
    }

    #[test]
    fn bare_names_resolve_on_the_policy_path_only() {
        let (_tmp, wt) = fixture();
        let path = vec![
            PathBuf::from("/nonexistent"),
            PathBuf::from("/usr/bin"),
            PathBuf::from("relative"),
        ];
        assert_eq!(
            resolve("sh", &path, &open(&wt)),
            Ok(Resolved::System(PathBuf::from("/usr/bin/sh")))
        );
        assert!(resolve("definitely-not-a-command", &path, &open(&wt)).is_err());
        assert!(resolve("sh", &[PathBuf::from("/nonexistent")], &open(&wt)).is_err());
        assert_eq!(
            resolve("/usr/bin/sh", &path, &open(&wt)),
            Ok(Resolved::System(PathBuf::from("/usr/bin/sh")))
        );
        assert!(resolve("/bin/sh", &[PathBuf::from("/usr/local/bin")], &open(&wt)).is_err());
        assert!(resolve("/tmp/evil", &path, &open(&wt)).is_err());
    }
}
