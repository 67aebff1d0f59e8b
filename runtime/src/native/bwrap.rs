//! The bubblewrap command line: the profile of seed 001 plus what closes its residual risks.
//!
//! Every namespace unshared, nested user namespaces disabled, `/usr` read-only with the
//! usrmerge links, a small read-only `/etc` allowlist, a fresh `/proc` with `/proc/sys`
//! read-only (bwrap 0.8 leaves it writable, and a sandbox running as kernel uid 0 could write
//! host-global knobs such as `core_pattern`), a minimal `/dev`, no `/sys`, a size-limited tmpfs
//! at `/tmp`, the worktree read-only (or read-write with `.git` and `.ai` re-bound read-only),
//! the job's further directories, `--die-with-parent`, `--new-session` and the seccomp program
//! on fd 3. The environment is not on this command line: bwrap inherits exactly the job's.

use std::ffi::OsString;
use std::path::Path;

use crate::job::{Access, Mount};

/// The fd the seccomp program is passed on.
pub(crate) const SECCOMP_FD: i32 = 3;

/// `/etc` files a helper may need to run at all: user and group names, name-service switch,
/// time zone, the dynamic loader cache, TLS certificates (for tools that validate, not fetch).
const ETC_ALLOWLIST: &[&str] = &[
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/pki",
];

/// The part of the command line that is the same for every job; built once per sandbox.
pub(crate) fn base_args() -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--dev",
        "/dev",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    for path in ETC_ALLOWLIST {
        if Path::new(path).exists() {
            a.extend(["--ro-bind".into(), (*path).into(), (*path).into()]);
        }
    }
    a
}

/// The per-job part: `/tmp`, the worktree and further directories, the working directory, the
/// seccomp fd and the program with its arguments.
pub(crate) fn job_args(
    base: &[OsString],
    tmp_size: u64,
    mounts: &[Mount],
    workdir: &str,
    program: &Path,
    args: &[String],
) -> Vec<OsString> {
    let mut a = base.to_vec();
    a.extend([
        "--size".into(),
        tmp_size.to_string().into(),
        "--tmpfs".into(),
        "/tmp".into(),
    ]);
    for mount in mounts {
        let flag = match mount.access {
            Access::ReadOnly => "--ro-bind",
            Access::ReadWrite => "--bind",
        };
        a.extend([
            flag.into(),
            mount.host.clone().into_os_string(),
            mount.guest.clone().into(),
        ]);
        if mount.access == Access::ReadWrite {
            // Git metadata and upstream helper definitions stay read-only even in a writable
            // worktree: a helper must not plant hooks or rewrite `.ai/`. Only real directories
            // or files are re-bound; a symlink would make bwrap bind its target from the host.
            for protected in [".git", ".ai"] {
                let host = mount.host.join(protected);
                if std::fs::symlink_metadata(&host).is_ok_and(|m| !m.file_type().is_symlink()) {
                    a.extend([
                        "--ro-bind".into(),
                        host.into_os_string(),
                        format!("{}/{protected}", mount.guest).into(),
                    ]);
                }
            }
            if let Some(rel) = gitdir_inside(&mount.host) {
                a.extend([
                    "--ro-bind".into(),
                    mount.host.join(&rel).into_os_string(),
                    format!("{}/{}", mount.guest, rel.display()).into(),
                ]);
            }
        }
    }
    a.extend(["--chdir".into(), workdir.into()]);
    a.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
    a.push("--".into());
    a.push(program.as_os_str().to_owned());
    a.extend(args.iter().map(OsString::from));
    a
}

/// Where a `.git` file (`gitdir: PATH`, as linked worktrees and submodules have) points, when
/// that is a real directory inside the worktree: it must be read-only too. A gitdir outside the
/// worktree is not bound at all, so it needs nothing.
fn gitdir_inside(worktree: &Path) -> Option<std::path::PathBuf> {
    let dot_git = worktree.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let resolved = std::fs::canonicalize(worktree.join(target)).ok()?;
    let root = std::fs::canonicalize(worktree).ok()?;
    let rel = resolved.strip_prefix(&root).ok()?.to_owned();
    (!rel.as_os_str().is_empty() && resolved.is_dir()).then_some(rel)
}

/// Why user namespaces may be unavailable, read from the kernel's knobs: the usual reasons
/// bwrap fails to start.
pub(crate) fn userns_diagnosis() -> Option<String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some(
            "user namespaces are disabled (user.max_user_namespaces = 0); raise it with sysctl".into(),
        );
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); set it to 1"
                .into(),
        );
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); \
             install an AppArmor profile that allows userns for bwrap, or set the sysctl to 0"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_worktrees_keep_git_and_ai_read_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join(".git")).expect("mkdir");
        std::fs::create_dir(tmp.path().join(".ai")).expect("mkdir");
        let mounts = [Mount::new(tmp.path(), "/work", Access::ReadWrite)];
        let args = job_args(
            &[],
            1024,
            &mounts,
            "/work",
            Path::new("/usr/bin/true"),
            &["x".into()],
        );
        let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let joined = text.join(" ");
        assert!(joined.contains(&format!("--bind {} /work", tmp.path().display())));
        assert!(joined.contains("/.git /work/.git"), "{joined}");
        assert!(joined.contains("/.ai /work/.ai"), "{joined}");
        assert!(joined.ends_with("--seccomp 3 -- /usr/bin/true x"), "{joined}");
    }

    #[test]
    fn a_gitdir_file_pointing_inside_the_worktree_is_protected_too() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("meta/gitdir/hooks")).expect("mkdir");
        std::fs::write(tmp.path().join(".git"), "gitdir: meta/gitdir\n").expect("write");
        let mounts = [Mount::new(tmp.path(), "/work", Access::ReadWrite)];
        let args = job_args(&[], 1024, &mounts, "/work", Path::new("/usr/bin/true"), &[]);
        let joined = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(joined.contains("/meta/gitdir /work/meta/gitdir"), "{joined}");
    }

    #[test]
    fn a_symlinked_git_dir_is_not_bound_from_the_host() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("/etc", tmp.path().join(".git")).expect("symlink");
        let mounts = [Mount::new(tmp.path(), "/work", Access::ReadWrite)];
        let args = job_args(&[], 1024, &mounts, "/work", Path::new("/usr/bin/true"), &[]);
        assert!(!args.iter().any(|a| a.to_string_lossy().ends_with("/.git")));
    }

    #[test]
    fn the_base_profile_unshares_everything_and_protects_proc_sys() {
        let joined = base_args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        for needle in [
            "--unshare-all",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--ro-bind /proc/sys /proc/sys",
            "--ro-bind /usr /usr",
        ] {
            assert!(joined.contains(needle), "{needle}");
        }
    }
}
