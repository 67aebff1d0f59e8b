//! The one module of the runtime allowed to use `unsafe`. Each block says why it is sound.
#![allow(unsafe_code)]

#[cfg(feature = "wasm")]
use wasmtime::{Engine, Module};

/// Loads compiled code produced by [`Module::serialize`].
///
/// Callers must only pass bytes read from wrun's own cache: a file in a directory owned by the
/// current user and writable by nobody else, written atomically by this engine configuration,
/// whose SHA-256 matched the digest stored with it.
#[cfg(feature = "wasm")]
pub(crate) fn deserialize_module(engine: &Engine, compiled: &[u8]) -> wasmtime::Result<Module> {
    // SAFETY: `Module::deserialize` trusts its input to be the output of `Module::serialize`
    // (it maps it as executable code). The caller guarantees that provenance: the bytes come
    // from a user-private cache directory (checked owner and mode), were written by wrun via
    // atomic rename, and carry a SHA-256 that matched before this call; wasmtime additionally
    // checks the engine's compatibility header and rejects code from another configuration.
    unsafe { Module::deserialize(engine, compiled) }
}

/// What a native child does between `fork` and `exec`: join its cgroup, take its rlimits, put
/// the seccomp program on fd 3 and mark every other inherited descriptor close-on-exec.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone)]
pub(crate) struct ChildSetup {
    /// `(resource, soft, hard)`.
    pub(crate) rlimits: Vec<(nix::sys::resource::Resource, u64, u64)>,
    /// Open `cgroup.procs` files of the run's cgroups.
    pub(crate) cgroup_procs: Vec<std::os::fd::RawFd>,
    /// The seccomp program, to be moved to fd 3.
    pub(crate) seccomp: Option<std::os::fd::RawFd>,
}

#[cfg(target_os = "linux")]
impl ChildSetup {
    /// Installs the setup on `cmd`.
    pub(crate) fn install(self, cmd: &mut tokio::process::Command) {
        // SAFETY: the closure runs in the forked child before exec. It only makes
        // async-signal-safe system calls (getpid, write, setrlimit, dup2, close_range), does not
        // allocate (the pid is formatted into a stack buffer, the rlimit list was allocated
        // before fork and is only read) and touches no lock.
        unsafe {
            cmd.pre_exec(move || self.apply());
        }
    }

    fn apply(&self) -> std::io::Result<()> {
        let mut buf = [0u8; 20];
        let digits = format_pid(std::process::id(), &mut buf);
        for &fd in &self.cgroup_procs {
            // SAFETY: `fd` is an open descriptor owned by the parent for the duration of the
            // spawn; `digits` is a valid buffer of its length.
            let n = unsafe { libc::write(fd, digits.as_ptr().cast(), digits.len()) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for &(resource, soft, hard) in &self.rlimits {
            nix::sys::resource::setrlimit(resource, soft, hard)?;
        }
        let first_closed = match self.seccomp {
            Some(fd) => {
                // SAFETY: `fd` is open in the child (inherited); dup2 onto 3 clears close-on-exec
                // on the copy so bwrap receives it.
                if unsafe { libc::dup2(fd, 3) } < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                4
            }
            None => 3,
        };
        // Every other descriptor the host may have leaked (one not opened close-on-exec) is
        // closed at exec. Marking instead of closing keeps std's own exec-error pipe working.
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors.
        let r = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first_closed as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Formats `pid` in decimal into `buf` without allocating.
#[cfg(target_os = "linux")]
fn format_pid(mut pid: u32, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            return &buf[i..];
        }
    }
}

/// Takes ownership of a descriptor that a system call just returned.
#[cfg(target_os = "linux")]
pub(crate) fn own_fd(fd: std::os::fd::RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: callers pass a descriptor freshly returned by a successful system call
    // (F_DUPFD_CLOEXEC), which nothing else owns.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

/// A pidfd for `pid` (readable once the process has exited), or an error if it is already gone.
#[cfg(target_os = "linux")]
pub(crate) fn pidfd_open(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(own_fd(fd as std::os::fd::RawFd))
}
