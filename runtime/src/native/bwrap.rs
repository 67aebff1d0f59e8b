//! The bubblewrap command line: the profile of seed 001 plus what closes its residual risks.
//!
//! Every namespace unshared, nested user namespaces disabled, `/usr` read-only with the
//! usrmerge links, a small read-only `/etc` allowlist, a fresh `/proc` with `/proc/sys`
//! read-only (bwrap 0.8 leaves it writable, and a sandbox running as kernel uid 0 could write
//! host-global knobs such as `core_pattern`), a minimal `/dev`, no `/sys`, a size-limited tmpfs
//! at `/tmp`, the worktree read-only (or read-write with `.git` and `.ai` re-bound read-only),
//! the job's further directories, `--die-with-parent`, `--new-session` and the seccomp program
//! on fd 3. The environment is not on this command line: bwrap inherits exactly the job's.

use nix::sys::stat::SFlag;
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

/// The per-job part: `/tmp`, the worktree and further directories with their protected paths
/// (each existing one re-bound read-only over itself, each missing one covered by `empty`, an
/// empty read-only directory), the working directory, the seccomp fd and the program with its
/// arguments.
pub(crate) fn job_args(
    base: &[OsString],
    tmp_size: u64,
    mounts: &[Mount],
    empty: &Path,
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
        // What is inside the mount is read through a descriptor, never through a link.
        let root = if mount.protected.is_empty() {
            None
        } else {
            crate::beneath::open_root(&mount.host).ok()
        };
        let flag = match mount.access {
            Access::ReadOnly => "--ro-bind",
            Access::ReadWrite => "--bind",
        };
        a.extend([
            flag.into(),
            mount.host.clone().into_os_string(),
            mount.guest.clone().into(),
        ]);
        // The directories on the way to a nested protected path are read-only too, with
        // their other entries bound writable again: otherwise `vendor/lib` could be renamed
        // away and a fresh `vendor/lib/.git` made in its place.
        for spine in nested_spine(mount) {
            let Some(root) = &root else { break };
            if crate::beneath::kind(root, &spine) != Some(SFlag::S_IFDIR) {
                continue;
            }
            let host_dir = mount.host.join(&spine);
            let guest_dir = format!("{}/{}", mount.guest.trim_end_matches('/'), spine.display());
            a.extend([
                "--ro-bind".into(),
                host_dir.clone().into_os_string(),
                guest_dir.clone().into(),
            ]);
            for (name, kind) in crate::beneath::entries(root, &spine) {
                let rel = spine.join(&name);
                let on_the_way = mount.protected.iter().any(|p| p == &rel || p.starts_with(&rel));
                let plain = kind == SFlag::S_IFDIR || kind == SFlag::S_IFREG;
                if on_the_way || !plain {
                    continue;
                }
                a.extend([
                    "--bind".into(),
                    host_dir.join(&name).into_os_string(),
                    format!("{guest_dir}/{}", name.to_string_lossy()).into(),
                ]);
            }
        }
        for protected in &mount.protected {
            let host = mount.host.join(protected);
            let exists = root
                .as_ref()
                .is_some_and(|root| crate::beneath::kind(root, protected).is_some());
            let source = if exists {
                host.into_os_string()
            } else {
                empty.as_os_str().to_owned()
            };
            a.extend([
                "--ro-bind".into(),
                source,
                format!("{}/{}", mount.guest.trim_end_matches('/'), protected.display()).into(),
            ]);
        }
    }
    // Nothing else is writable: the root (and `/etc`, and every directory bwrap created on
    // it) is remounted read-only once every mount point exists; `/dev` too, with a
    // size-limited tmpfs of its own at `/dev/shm`.
    a.extend([
        "--size".into(),
        tmp_size.to_string().into(),
        "--tmpfs".into(),
        "/dev/shm".into(),
        "--remount-ro".into(),
        "/dev".into(),
        "--remount-ro".into(),
        "/".into(),
    ]);
    a.extend(["--chdir".into(), workdir.into()]);
    a.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
    a.push("--".into());
    a.push(program.as_os_str().to_owned());
    a.extend(args.iter().map(OsString::from));
    a
}

/// The directories strictly between a writable mount's root and its protected paths,
/// outermost first.
fn nested_spine(mount: &Mount) -> Vec<std::path::PathBuf> {
    if mount.access != Access::ReadWrite {
        return Vec::new();
    }
    let mut spine: Vec<std::path::PathBuf> = mount
        .protected
        .iter()
        .flat_map(|p| p.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    spine.sort_by_key(|p| (p.components().count(), p.clone()));
    spine.dedup();
    spine
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
    fn protected_paths_are_bound_read_only_and_missing_ones_covered() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join(".git")).expect("mkdir");
        let mount = Mount::new(tmp.path(), "/work", Access::ReadWrite).protect([".git", ".ai"]);
        let args = job_args(
            &[],
            1024,
            &[mount],
            Path::new("/empty"),
            "/work",
            Path::new("/usr/bin/true"),
            &["x".into()],
        );
        let joined = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(joined.contains(&format!("--bind {} /work", tmp.path().display())));
        assert!(
            joined.contains(&format!("--ro-bind {}/.git /work/.git", tmp.path().display())),
            "{joined}"
        );
        assert!(joined.contains("--ro-bind /empty /work/.ai"), "{joined}");
        assert!(joined.ends_with("--seccomp 3 -- /usr/bin/true x"), "{joined}");
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
