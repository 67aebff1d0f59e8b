//! The seccomp program handed to bwrap (`--seccomp FD`), built once per sandbox with
//! libseccomp.
//!
//! Default allow, with these refused (`EPERM`, or `EAFNOSUPPORT` for sockets):
//! - calls of another architecture: i386 (`int 0x80`) and x32 system calls (libseccomp's
//!   bad-architecture action: kill the process);
//! - `ptrace`, `process_vm_readv`/`writev`: from inside, `ptrace(ATTACH, 1)` otherwise stops
//!   bwrap's pid 1 and hangs the run;
//! - `io_uring_*`, `bpf`, `perf_event_open`, `userfaultfd`: large kernel attack surface;
//! - `keyctl`, `add_key`, `request_key`: the kernel keyring is not namespaced;
//! - `mount`, `umount2`, `unshare`, `setns`, `pivot_root`, `open_by_handle_at`,
//!   `name_to_handle_at`, and `clone`/`clone3` asking for new namespaces;
//! - `socket`/`socketpair` of any family but `AF_UNIX` (`AF_VSOCK` otherwise works without a
//!   network namespace);
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`: injecting input into a terminal;
//! - module loading, `kexec`, `reboot`, swap, accounting, quotas: nothing a helper needs.

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

/// Namespace flags of `clone(2)`.
const CLONE_NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u64;

const DENIED: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "pivot_root",
    "chroot",
    "open_by_handle_at",
    "name_to_handle_at",
    "fsopen",
    "fsmount",
    "fsconfig",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "lookup_dcookie",
    "personality",
];

/// Builds the BPF program, as bwrap reads it from a file descriptor.
pub(crate) fn build() -> Result<Vec<u8>, String> {
    let err = |what: &str, e: libseccomp::error::SeccompError| format!("seccomp: {what}: {e}");
    let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).map_err(|e| err("new filter", e))?;
    ctx.set_act_badarch(ScmpAction::KillProcess)
        .map_err(|e| err("bad-arch action", e))?;
    // The filter knows only the native architecture: i386 calls and (on x86_64) x32 calls,
    // which libseccomp checks for, hit the bad-arch action.
    let eperm = ScmpAction::Errno(libc::EPERM);
    for name in DENIED {
        let call = ScmpSyscall::from_name(name).map_err(|e| err(name, e))?;
        ctx.add_rule(eperm, call).map_err(|e| err(name, e))?;
    }
    let rule = |ctx: &mut ScmpFilterContext, action, name: &str, cmp: ScmpArgCompare| {
        let call = ScmpSyscall::from_name(name).map_err(|e| err(name, e))?;
        ctx.add_rule_conditional(action, call, &[cmp])
            .map(drop)
            .map_err(|e| err(name, e))
    };
    let no_family = ScmpAction::Errno(libc::EAFNOSUPPORT);
    for name in ["socket", "socketpair"] {
        rule(
            &mut ctx,
            no_family,
            name,
            ScmpArgCompare::new(0, ScmpCompareOp::NotEqual, libc::AF_UNIX as u64),
        )?;
    }
    for request in [libc::TIOCSTI, libc::TIOCLINUX] {
        rule(
            &mut ctx,
            eperm,
            "ioctl",
            ScmpArgCompare::new(1, ScmpCompareOp::MaskedEqual(0xffff_ffff), request),
        )?;
    }
    // One rule per namespace flag: any of them set refuses the call.
    for bit in 0..64 {
        let flag = 1u64 << bit;
        if flag & CLONE_NAMESPACE_FLAGS != 0 {
            rule(
                &mut ctx,
                eperm,
                "clone",
                ScmpArgCompare::new(0, ScmpCompareOp::MaskedEqual(flag), flag),
            )?;
        }
    }
    // clone3 passes its flags in memory, where seccomp cannot look: refuse it with ENOSYS so
    // libc falls back to clone, which the rule above checks.
    let clone3 = ScmpSyscall::from_name("clone3").map_err(|e| err("clone3", e))?;
    ctx.add_rule(ScmpAction::Errno(libc::ENOSYS), clone3)
        .map_err(|e| err("clone3", e))?;

    let memfd = nix::sys::memfd::memfd_create(c"wrun-seccomp", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .map_err(|e| format!("seccomp: memfd: {e}"))?;
    ctx.export_bpf(&memfd).map_err(|e| err("export", e))?;
    let mut file = std::fs::File::from(memfd);
    use std::io::{Read, Seek};
    file.rewind().map_err(|e| format!("seccomp: rewind: {e}"))?;
    let mut bpf = Vec::new();
    file.read_to_end(&mut bpf)
        .map_err(|e| format!("seccomp: read back: {e}"))?;
    Ok(bpf)
}
