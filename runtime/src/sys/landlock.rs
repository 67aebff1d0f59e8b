//! Landlock (`landlock(7)`): restricts what the calling thread, and every thread or process it
//! starts afterwards, may do to the file system. wrun uses it to keep protected paths of a
//! writable worktree (`.git`, `.ai`) read-only for code that runs in-process, where no mount
//! namespace can be had.
//!
//! The system calls are made here directly (they are three, with two small structs); the ABI
//! version decides which rights can be handled.
#![cfg_attr(
    not(feature = "wasm"),
    allow(
        dead_code,
        reason = "rulesets serve the wasm backend; without it only the ABI probe is used"
    )
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of creating a ruleset.
const CREATE_RULESET_VERSION: u32 = 1 << 0;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// Access rights to files and directories (`LANDLOCK_ACCESS_FS_*`).
pub(crate) mod access {
    /// Open a file with write access.
    pub(crate) const WRITE_FILE: u64 = 1 << 1;
    /// Open a file with read access.
    pub(crate) const READ_FILE: u64 = 1 << 2;
    /// Open a directory or list its contents.
    pub(crate) const READ_DIR: u64 = 1 << 3;
    /// Remove an empty directory or rename one.
    pub(crate) const REMOVE_DIR: u64 = 1 << 4;
    /// Unlink (or rename) a file.
    pub(crate) const REMOVE_FILE: u64 = 1 << 5;
    /// Create (or rename or link) a character device.
    pub(crate) const MAKE_CHAR: u64 = 1 << 6;
    /// Create (or rename) a directory.
    pub(crate) const MAKE_DIR: u64 = 1 << 7;
    /// Create (or rename or link) a regular file.
    pub(crate) const MAKE_REG: u64 = 1 << 8;
    /// Create (or rename or link) a socket.
    pub(crate) const MAKE_SOCK: u64 = 1 << 9;
    /// Create (or rename or link) a named pipe.
    pub(crate) const MAKE_FIFO: u64 = 1 << 10;
    /// Create (or rename or link) a block device.
    pub(crate) const MAKE_BLOCK: u64 = 1 << 11;
    /// Create (or rename or link) a symbolic link.
    pub(crate) const MAKE_SYM: u64 = 1 << 12;
    /// Link or rename a file from or to another directory (ABI 2).
    pub(crate) const REFER: u64 = 1 << 13;
    /// Truncate a file (ABI 3).
    pub(crate) const TRUNCATE: u64 = 1 << 14;

    /// Every right that changes the file system, for an ABI version.
    pub(crate) fn writes(abi: u32) -> u64 {
        let mut all = WRITE_FILE
            | REMOVE_DIR
            | REMOVE_FILE
            | MAKE_CHAR
            | MAKE_DIR
            | MAKE_REG
            | MAKE_SOCK
            | MAKE_FIFO
            | MAKE_BLOCK
            | MAKE_SYM;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        all
    }

    /// The rights of [`writes`] that a rule on a regular file may carry.
    pub(crate) fn file_writes(abi: u32) -> u64 {
        writes(abi) & (WRITE_FILE | TRUNCATE)
    }
}

/// The kernel's Landlock ABI version, or `None` when Landlock is unavailable (not built in,
/// not enabled at boot, or refused by a container's seccomp profile).
pub(crate) fn abi() -> Option<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) reads no memory and returns the ABI
    // version or -1.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|v| *v >= 1)
}

/// `struct landlock_ruleset_attr`, as far as file-system rights (the ABI 1 layout).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// A ruleset being built.
#[derive(Debug)]
pub(crate) struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// A ruleset that handles `handled` rights: once enforced, each is denied except beneath
    /// the paths a rule grants it on.
    pub(crate) fn new(handled: u64) -> io::Result<Self> {
        let attr = RulesetAttr {
            handled_access_fs: handled,
        };
        // SAFETY: the kernel reads `size_of::<RulesetAttr>()` bytes from a valid struct.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &raw const attr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd: super::own_fd(fd as std::os::fd::RawFd),
        })
    }

    /// Grants `access` beneath the file or directory `path` (an `O_PATH` descriptor).
    pub(crate) fn allow(&self, path: BorrowedFd<'_>, access: u64) -> io::Result<()> {
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: path.as_raw_fd(),
        };
        // SAFETY: the kernel reads a valid packed struct; both descriptors are open.
        let added = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &raw const attr,
                0u32,
            )
        };
        if added < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Enforces the ruleset on the calling thread and everything it starts from now on. Sets
    /// `no_new_privs` on the thread first (Landlock requires it without `CAP_SYS_ADMIN`).
    pub(crate) fn restrict_self(self) -> io::Result<()> {
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integers only; it affects this thread.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: landlock_restrict_self takes an open ruleset descriptor and flags.
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
