//! The one module of the runtime allowed to use `unsafe`. Each block says why it is sound.
#![allow(unsafe_code)]

#[cfg(all(target_os = "linux", feature = "wasm"))]
pub(crate) mod interrupt;
#[cfg(target_os = "linux")]
pub(crate) mod landlock;
#[cfg(target_os = "linux")]
pub(crate) mod spawner;

#[cfg(feature = "wasm")]
use wasmtime::{Engine, Module};

/// Loads compiled code produced by [`Module::serialize`] from an open file, mapping it.
///
/// Callers must only pass a file of wrun's own cache: a regular file, opened without following
/// links, owned by the current user and writable by nobody else, in a directory with the same
/// properties, written whole by wrun for this engine configuration and renamed into place.
#[cfg(feature = "wasm")]
pub(crate) fn deserialize_module_file(engine: &Engine, file: std::fs::File) -> wasmtime::Result<Module> {
    // SAFETY: `Module::deserialize_open_file` trusts the file to be the output of
    // `Module::serialize` (it maps it as executable code) and to stay unchanged while mapped.
    // The caller guarantees the provenance: a user-private cache directory (checked owner and
    // mode), files written by wrun and renamed into place (never changed after), opened with
    // O_NOFOLLOW and checked by descriptor; wasmtime additionally checks the header and the
    // engine's compatibility hash and rejects code from another configuration.
    unsafe { Module::deserialize_open_file(engine, file) }
}

/// Takes ownership of a descriptor that a system call just returned.
#[cfg(target_os = "linux")]
pub(crate) fn own_fd(fd: std::os::fd::RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: callers pass a descriptor freshly returned by a successful system call, which
    // nothing else owns.
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

/// Registers a descriptor with the tokio reactor.
#[cfg(target_os = "linux")]
pub(crate) fn watch_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the `OwnedFd` owns an open descriptor, and the `AsyncFd` that takes it neither
    // replaces nor closes it while registered (it deregisters before dropping it).
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(std::io::Error::from)
}
