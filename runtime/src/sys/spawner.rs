//! A spawner: a small supervisor forked ahead of time, parked in its own cgroups, that starts
//! one program per command and reports how it ended.
//!
//! Starting a process from a large, multi-threaded host costs far more than the program's own
//! start: `fork` copies the host's page tables and `exec` then tears the copy down, and on a
//! cgroup v1 host moving a process into a fresh cgroup costs more again. A spawner pays the fork
//! and the cgroup move once, off any run's path, and is then reused run after run: for each
//! command it starts the program with `clone(CLONE_VM | CLONE_VFORK)` (what `posix_spawn` does:
//! no page tables are copied and `exec` has nothing to tear down), waits for it, reports its
//! wait status and parks again. Everything the program starts is born in the spawner's
//! cgroups, so nothing it forks can escape them.
//!
//! The spawner is a forked copy of a multi-threaded process, so it only makes
//! async-signal-safe system calls, never allocates (its buffers, pointer table and the stack
//! of the `clone` child are allocated before the fork; it writes into its private copies),
//! takes no lock and cannot panic (every read of a message is bounds-checked with `get`).
//!
//! # Wire format
//! Command, host to spawner: one `SOCK_SEQPACKET` message (little endian) with the descriptors
//! in `SCM_RIGHTS`: `magic u32, argc u32, envc u32, nrlimits u32, flags u32`, then `nrlimits ×
//! (resource u32, soft u64, hard u64)`, then `2 + argc + envc` NUL-terminated strings: the program,
//! `argv`, the environment as `NAME=value`, the working directory. Descriptors: stdin, stdout,
//! stderr and optionally one more, which the program receives as fd 3 (the seccomp program for
//! bwrap). Events, spawner to host, 8 bytes each (`kind u32, value i32`): [`Event::Started`]
//! with the pid, then [`Event::Ended`] with the raw wait status; or [`Event::Failed`] with the
//! errno of the step that failed. End of file: the spawner is gone.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;

const MAGIC: u32 = 0x7772_756e; // "wrun"

/// The largest command message; a bigger one is refused before it is sent. It fits in a
/// socket's default send buffer, so sending never blocks.
pub(crate) const MAX_MESSAGE: usize = 128 * 1024;

/// The stack of the `clone` child (which only calls a few libc functions before `exec`).
const CHILD_STACK: usize = 64 * 1024;

/// The most strings (argv plus environment) a command may carry.
const MAX_STRINGS: usize = 8 * 1024;

/// The descriptor number of the control socket in the spawner.
const CONTROL: RawFd = 4;

/// Command flag: start the program with no capability in any set, securebits locked and
/// `no_new_privs` (an unsandboxed helper; bwrap drops them itself inside the sandbox).
const DROP_PRIVILEGES: u32 = 1;

/// The length of a command's fixed header.
const HEADER: usize = 20;

/// One command for a spawner, encoded.
#[derive(Debug)]
pub(crate) struct Message(Vec<u8>);

impl Message {
    /// Encodes `program` with `argv` (whose first entry is the program's name for itself), the
    /// environment, the working directory and `(resource, soft, hard)` rlimits (`libc::RLIMIT_*`).
    /// With `drop_privileges`, the program starts with no capabilities at all (see
    /// [`drop_privileges`]).
    pub(crate) fn new(
        program: &Path,
        argv: &[&OsStr],
        env: &[(String, String)],
        cwd: &Path,
        rlimits: &[(u32, u64, u64)],
        drop_privileges: bool,
    ) -> io::Result<Self> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        if argv.len() + env.len() + 2 > MAX_STRINGS {
            return Err(invalid("too many arguments and environment variables"));
        }
        let mut out = Vec::with_capacity(4096);
        let flags = if drop_privileges { DROP_PRIVILEGES } else { 0 };
        for n in [
            MAGIC,
            argv.len() as u32,
            env.len() as u32,
            rlimits.len() as u32,
            flags,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for &(resource, soft, hard) in rlimits {
            out.extend_from_slice(&resource.to_le_bytes());
            out.extend_from_slice(&soft.to_le_bytes());
            out.extend_from_slice(&hard.to_le_bytes());
        }
        let mut string = |bytes: &[u8], what: &str| {
            if bytes.contains(&0) {
                return Err(invalid(&format!("{what} contains a NUL byte")));
            }
            out.extend_from_slice(bytes);
            out.push(0);
            Ok(())
        };
        string(program.as_os_str().as_bytes(), "the program path")?;
        for arg in argv {
            string(arg.as_bytes(), "an argument")?;
        }
        for (name, value) in env {
            if name.contains('=') || name.is_empty() {
                return Err(invalid(&format!("invalid environment variable name {name:?}")));
            }
            string(format!("{name}={value}").as_bytes(), "an environment variable")?;
        }
        string(cwd.as_os_str().as_bytes(), "the working directory")?;
        if out.len() > MAX_MESSAGE {
            return Err(invalid("the command line and environment are too large"));
        }
        Ok(Self(out))
    }
}

/// What a spawner reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The program was started with this pid (also its process group).
    Started(i32),
    /// Starting the program failed with this errno; the spawner is parked again.
    Failed(i32),
    /// The program ended with this raw wait status; the spawner is parked again.
    Ended(i32),
}

const STARTED: u32 = 1;
const FAILED: u32 = 2;
const ENDED: u32 = 3;

impl Event {
    /// Decodes one event message.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let kind = u32_at(bytes, 0)?;
        let value = u32_at(bytes, 4)? as i32;
        if bytes.len() != 8 {
            return None;
        }
        match kind {
            STARTED => Some(Self::Started(value)),
            FAILED => Some(Self::Failed(value)),
            ENDED => Some(Self::Ended(value)),
            _ => None,
        }
    }
}

/// A forked spawner, parked on its control socket.
#[derive(Debug)]
pub(crate) struct Forked {
    pub(crate) pid: Pid,
    pub(crate) control: OwnedFd,
}

/// Forks a spawner. It becomes the leader of its own process group, dies with the calling
/// thread (`PR_SET_PDEATHSIG`), closes every descriptor but its control socket and waits for
/// commands until its control socket is closed.
pub(crate) fn fork() -> io::Result<Forked> {
    let (parent_end, child_end) = socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // Allocated before the fork: the spawner only ever writes into its own copies.
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    let mut table: Vec<*const libc::c_char> = vec![std::ptr::null(); MAX_STRINGS + 2];
    let mut stack = vec![0u128; CHILD_STACK / 16];
    let parent = nix::unistd::getpid();
    let memory = ChildMemory {
        buf: buf.as_mut_ptr(),
        buf_len: buf.len(),
        table: table.as_mut_ptr(),
        table_len: table.len(),
        stack_top: stack.as_mut_ptr_range().end.cast(),
    };
    // SAFETY: after fork the child runs `spawner_main`, which never returns (it exits) and
    // only makes async-signal-safe calls on memory allocated before the fork (see the module
    // documentation). The parent continues normally.
    #[allow(clippy::disallowed_methods)]
    let forked = unsafe { nix::unistd::fork() }?;
    match forked {
        nix::unistd::ForkResult::Child => spawner_main(child_end.as_raw_fd(), parent, memory),
        nix::unistd::ForkResult::Parent { child } => {
            drop(child_end);
            // Also set from this side, so the group exists whichever runs first.
            let _ = nix::unistd::setpgid(child, child);
            Ok(Forked {
                pid: child,
                control: parent_end,
            })
        }
    }
}

/// Sends a command and the descriptors the program gets as 0, 1, 2 (and 3). The spawner
/// holds its own copies from here on; the caller may close its ends.
pub(crate) fn send(control: &OwnedFd, message: &Message, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if !(3..=4).contains(&fds.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a spawner takes 3 or 4 descriptors",
        ));
    }
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [io::IoSlice::new(&message.0)];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let sent = socket::sendmsg::<()>(
        control.as_raw_fd(),
        &iov,
        &cmsg,
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        None,
    )?;
    if sent != message.0.len() {
        return Err(io::Error::other("the spawner took part of its command"));
    }
    Ok(())
}

/// Receives one event without blocking: `Ok(None)` at end of file (the spawner is gone),
/// `WouldBlock` when there is none yet.
pub(crate) fn receive(control: impl AsFd) -> io::Result<Option<Event>> {
    let mut bytes = [0u8; 16];
    let n = socket::recv(control.as_fd().as_raw_fd(), &mut bytes, MsgFlags::MSG_DONTWAIT)?;
    if n == 0 {
        return Ok(None);
    }
    bytes
        .get(..n)
        .and_then(Event::decode)
        .map(Some)
        .ok_or_else(|| io::Error::other("the spawner sent a malformed event"))
}

#[derive(Clone, Copy)]
struct ChildMemory {
    buf: *mut u8,
    buf_len: usize,
    table: *mut *const libc::c_char,
    table_len: usize,
    stack_top: *mut libc::c_void,
}

/// What the `clone` child needs; it lives on the spawner's stack while the spawner is
/// suspended (`CLONE_VFORK`), and the child writes `errno` back into it if `exec` fails.
struct Launch<'a> {
    command: &'a Received<'a>,
    fds: &'a [RawFd],
    spawner: libc::pid_t,
    errno: i32,
}

/// The spawner. Never returns.
fn spawner_main(control: RawFd, parent: Pid, memory: ChildMemory) -> ! {
    // SAFETY: every call below is an async-signal-safe system call wrapper given valid
    // arguments; `memory` points at this process's private copies of buffers allocated before
    // the fork, used by nothing else here.
    unsafe {
        // Own process group, and die with the thread that forked us. Not dumpable (inherited
        // from the host, and said again): an unsandboxed helper of the same user may not read
        // this copy of the host's memory through /proc or ptrace.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent.as_raw() {
            libc::_exit(1);
        }
        // Orphans of a run are reparented here and reaped, rather than left as zombies in the
        // cgroup (they count against `pids.max` until reaped) for an init that may never reap.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Keep only the control socket (close-on-exec, at a fixed number); 0, 1, 2 are
        // /dev/null, so received descriptors land at 3 or above and never on a target.
        if control != CONTROL && libc::dup3(control, CONTROL, libc::O_CLOEXEC) < 0 {
            libc::_exit(1);
        }
        close_range(0, (CONTROL - 1) as libc::c_uint);
        close_range((CONTROL + 1) as libc::c_uint, libc::c_uint::MAX);
        for _ in 0..3 {
            if libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) < 0 {
                libc::_exit(1);
            }
        }
        // Signals as a freshly started program expects them: none blocked, none ignored (the
        // Rust runtime ignores SIGPIPE; an ignored signal stays ignored across exec).
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let me = libc::getpid();
        loop {
            serve_one(memory, me);
        }
    }
}

/// Receives one command, runs it to its end and reports. Exits when the host has gone.
fn serve_one(memory: ChildMemory, me: libc::pid_t) {
    reap_orphans();
    // SAFETY: as in `spawner_main`: async-signal-safe calls on this process's own memory.
    unsafe {
        let buf = std::slice::from_raw_parts_mut(memory.buf, memory.buf_len);
        let mut cmsg = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = loop {
            let n = libc::recvmsg(CONTROL, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 || nix::errno::Errno::last_raw() != libc::EINTR {
                break n;
            }
        };
        if n <= 0 {
            // The pool closed its end (or the socket failed): nothing more to run.
            libc::_exit(0);
        }

        let mut fds = [-1 as RawFd; 4];
        let mut nfds = 0;
        let header = libc::CMSG_FIRSTHDR(&msg);
        if !header.is_null()
            && (*header).cmsg_level == libc::SOL_SOCKET
            && (*header).cmsg_type == libc::SCM_RIGHTS
        {
            let data = libc::CMSG_DATA(header).cast::<RawFd>();
            let count = count_fds(&msg);
            for i in 0..count {
                let fd = data.add(i).read_unaligned();
                match fds.get_mut(i) {
                    Some(slot) => *slot = fd,
                    None => {
                        libc::close(fd);
                    }
                }
            }
            nfds = count.min(fds.len());
        }
        let received = fds.get(..nfds).unwrap_or(&[]);
        let command = match buf.get(..n as usize).and_then(|m| parse(m, memory)) {
            _ if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 => Err(libc::EMSGSIZE),
            _ if !(3..=4).contains(&nfds) || nfds != count_fds(&msg) => Err(libc::EINVAL),
            Some(command) => Ok(command),
            None => Err(libc::EINVAL),
        };
        match command {
            Ok(command) => run(&command, received, memory, me),
            Err(errno) => {
                close_all(received);
                report(FAILED, errno);
            }
        }
    }
}

/// How many descriptors the message carried (also those beyond the four kept).
fn count_fds(msg: &libc::msghdr) -> usize {
    // SAFETY: `msg` is the header recvmsg filled in; CMSG_FIRSTHDR checks the control length.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(msg);
        if header.is_null() {
            return 0;
        }
        ((*header).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize)
            / std::mem::size_of::<RawFd>()
    }
}

/// Starts the command with `clone(CLONE_VM | CLONE_VFORK)`, reports it, waits for it and
/// reports how it ended.
fn run(command: &Received<'_>, fds: &[RawFd], memory: ChildMemory, me: libc::pid_t) {
    let mut launch = Launch {
        command,
        fds,
        spawner: me,
        errno: 0,
    };
    // SAFETY: the child runs `launch_child` on its own stack (`stack_top`, this process's copy
    // of a buffer allocated before the fork) in this process's memory while this process is
    // suspended (CLONE_VFORK) until the child has exec'd or exited, so `launch` stays valid
    // and nothing else touches it meanwhile; the child only writes `launch.errno`.
    let pid = unsafe {
        libc::clone(
            launch_child,
            memory.stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut launch).cast(),
        )
    };
    let clone_errno = nix::errno::Errno::last_raw();
    // The program has its own copies now (or none): the spawner keeps none, so the pipes reach
    // end of file when the program's processes close them, and not when the spawner next works.
    close_all(fds);
    if pid < 0 {
        report(FAILED, clone_errno);
        return;
    }
    let mut status = 0;
    // Written by the child, in this memory, while this process was suspended.
    // SAFETY: `launch` is a live local; a volatile read of an `i32` field.
    let child_errno = unsafe { std::ptr::read_volatile(&raw const launch.errno) };
    if child_errno != 0 {
        // The child could not exec and has exited: reap it and report why.
        // SAFETY: waitpid on our own child with a valid status pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        report(FAILED, child_errno);
        return;
    }
    report(STARTED, pid);
    loop {
        // Any child: orphans of the run that end first are reaped on the way.
        // SAFETY: as above.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && nix::errno::Errno::last_raw() != libc::EINTR {
            report(FAILED, nix::errno::Errno::last_raw());
            return;
        }
    }
    reap_orphans();
    report(ENDED, status);
}

/// Closes the descriptors received with a command. Async-signal-safe.
fn close_all(fds: &[RawFd]) {
    for &fd in fds {
        // SAFETY: these descriptors were received by this process and are used by nothing else.
        unsafe { libc::close(fd) };
    }
}

/// Reaps every child that has ended. Async-signal-safe.
fn reap_orphans() {
    let mut status = 0;
    // SAFETY: waitpid with a valid status pointer.
    while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {}
}

/// The `clone` child: takes its descriptors, process group, parent-death signal, rlimits and
/// working directory, and execs. Runs in the spawner's memory; only writes `errno` back.
extern "C" fn launch_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Launch` the suspended spawner passed; every call is an
    // async-signal-safe system call wrapper with valid arguments.
    unsafe {
        let launch = &mut *arg.cast::<Launch<'_>>();
        let command = launch.command;
        let fds = launch.fds;
        let failed = |launch: &mut Launch<'_>| -> libc::c_int {
            launch.errno = nix::errno::Errno::last_raw().max(1);
            libc::_exit(127)
        };
        libc::setpgid(0, 0);
        // Dies with the spawner, which dies with the host's pool thread.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0
            || libc::getppid() != launch.spawner
        {
            return failed(launch);
        }
        // The kernel's first choice when memory runs out, in its cgroup or on the machine:
        // never the spawner (a copy of the host, large by the kernel's count) or the host.
        // Raising the score needs no privilege; where /proc is missing it stays as it was.
        let adj = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if adj >= 0 {
            libc::write(adj, b"1000".as_ptr().cast(), 4);
            libc::close(adj);
        }
        // Sources are at 3 or above and target 3 is written last, so no source is overwritten
        // before it is used; the received copies are close-on-exec.
        for (target, &fd) in fds.iter().enumerate() {
            if libc::dup2(fd, target as RawFd) < 0 {
                return failed(launch);
            }
        }
        for (resource, soft, hard) in command.rlimits() {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(resource as _, &limit) < 0 {
                return failed(launch);
            }
        }
        if libc::chdir(command.cwd) < 0 {
            return failed(launch);
        }
        if command.flags & DROP_PRIVILEGES != 0 && !drop_privileges() {
            return failed(launch);
        }
        libc::execve(command.program, command.argv, command.envp);
        failed(launch)
    }
}

/// Securebits (`linux/securebits.h`): root gets no capabilities on exec or from setuid
/// transitions, capabilities are not kept across setuid, no ambient capability can be raised,
/// each locked.
const SECUREBITS: libc::c_ulong = (1 << 0) // SECBIT_NOROOT
    | (1 << 1) // SECBIT_NOROOT_LOCKED
    | (1 << 2) // SECBIT_NO_SETUID_FIXUP
    | (1 << 3) // SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5) // SECBIT_KEEP_CAPS_LOCKED
    | (1 << 6) // SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7); // SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED

/// `struct __user_cap_header_struct` (`linux/capability.h`).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one per 32 capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two data structs.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Leaves the calling process with no capability in its bounding, ambient, inheritable,
/// permitted and effective sets, the securebits locked and `no_new_privs`, so that what it
/// executes can never gain one back (as root, dropping `CAP_SYS_PTRACE` alone would leave
/// `CAP_SYS_ADMIN`, `CAP_BPF` and `CAP_SYS_MODULE`). Returns false if it cannot, and the
/// program must not start. Changing the bounding set and the securebits needs `CAP_SETPCAP`:
/// a process without it (not root) has no capabilities to drop there, and is let through.
/// Async-signal-safe (the `clone` child calls it).
fn drop_privileges() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let permitted =
        |result: libc::c_int| result == 0 || (!root && nix::errno::Errno::last_raw() == libc::EPERM);
    for cap in 0..64 {
        // SAFETY: prctl(PR_CAPBSET_DROP, cap) takes integers only.
        let dropped = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if dropped < 0 && nix::errno::Errno::last_raw() == libc::EINVAL {
            break; // past the kernel's last capability
        }
        if !permitted(dropped) {
            return false;
        }
    }
    // SAFETY: prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) takes integers only.
    let ambient = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    // SAFETY: prctl(PR_SET_SECUREBITS, bits) takes integers only.
    let securebits = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) };
    if ambient < 0 || !permitted(securebits) {
        return false;
    }
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capset reads a version 3 header and two data structs, both valid for the call.
    let capset = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_mut_ptr()) };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integers only.
    let no_new_privs = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    capset == 0 && no_new_privs == 0
}

/// Sends an event to the host. Async-signal-safe.
fn report(kind: u32, value: i32) {
    let mut bytes = [0u8; 8];
    let (k, v) = bytes.split_at_mut(4);
    k.copy_from_slice(&kind.to_le_bytes());
    v.copy_from_slice(&value.to_le_bytes());
    // SAFETY: send is async-signal-safe; `bytes` is a valid 8-byte buffer.
    unsafe {
        libc::send(CONTROL, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL);
    }
}

/// A received command, pointing into the message buffer and the pointer table.
struct Received<'a> {
    flags: u32,
    rlimits: &'a [u8],
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
}

impl Received<'_> {
    fn rlimits(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.rlimits.chunks_exact(RLIMIT_LEN).filter_map(|c| {
            Some((
                u32::from_le_bytes(c.get(0..4)?.try_into().ok()?),
                u64::from_le_bytes(c.get(4..12)?.try_into().ok()?),
                u64::from_le_bytes(c.get(12..20)?.try_into().ok()?),
            ))
        })
    }
}

const RLIMIT_LEN: usize = 20;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Checks a message and fills the pointer table: `argv`, NULL, environment, NULL. `None` if
/// the message is malformed. Allocation-free and panic-free (for the child after fork).
fn parse(message: &[u8], memory: ChildMemory) -> Option<Received<'_>> {
    if u32_at(message, 0)? != MAGIC {
        return None;
    }
    let argc = u32_at(message, 4)? as usize;
    let envc = u32_at(message, 8)? as usize;
    let nrlimits = u32_at(message, 12)? as usize;
    let flags = u32_at(message, 16)?;
    if flags & !DROP_PRIVILEGES != 0 {
        return None;
    }
    let rlimits_end = nrlimits.checked_mul(RLIMIT_LEN)?.checked_add(HEADER)?;
    let rlimits = message.get(HEADER..rlimits_end)?;
    // argv, NULL, env, NULL.
    let slots = argc.checked_add(envc)?.checked_add(2)?;
    if slots > memory.table_len || argc == 0 {
        return None;
    }
    // SAFETY: `table` is this process's own allocation of `table_len` pointers.
    let table = unsafe { std::slice::from_raw_parts_mut(memory.table, memory.table_len) };
    let mut at = rlimits_end;
    let mut next = || -> Option<*const libc::c_char> {
        let rest = message.get(at..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        let ptr = rest.as_ptr().cast::<libc::c_char>();
        at = at.checked_add(len + 1)?;
        Some(ptr)
    };
    let program = next()?;
    for slot in table.get_mut(..argc)? {
        *slot = next()?;
    }
    *table.get_mut(argc)? = std::ptr::null();
    for slot in table.get_mut(argc + 1..argc + 1 + envc)? {
        *slot = next()?;
    }
    *table.get_mut(argc + 1 + envc)? = std::ptr::null();
    let cwd = next()?;
    if at != message.len() {
        return None;
    }
    let argv = table.as_ptr();
    Some(Received {
        flags,
        rlimits,
        program,
        argv,
        // SAFETY: `argc + 1` is within the table (checked against `slots` above).
        envp: unsafe { argv.add(argc + 1) },
        cwd,
    })
}

/// `close_range(first, last, 0)`. Async-signal-safe.
fn close_range(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: close_range only closes descriptors of this process.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_what_new_writes_and_refuses_what_it_did_not() {
        let argv = [OsStr::new("/bin/echo"), OsStr::new("a b"), OsStr::new("")];
        let env = vec![("PATH".to_owned(), "/usr/bin".to_owned())];
        let message = Message::new(
            Path::new("/bin/echo"),
            &argv,
            &env,
            Path::new("/tmp"),
            &[(libc::RLIMIT_CORE, 0, 0), (libc::RLIMIT_NOFILE, 64, 128)],
            true,
        )
        .expect("valid");
        let mut table = vec![std::ptr::null(); 16];
        let memory = ChildMemory {
            buf: std::ptr::null_mut(),
            buf_len: 0,
            table: table.as_mut_ptr(),
            table_len: table.len(),
            stack_top: std::ptr::null_mut(),
        };
        let received = parse(&message.0, memory).expect("valid");
        let text = |p: *const libc::c_char| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes().to_vec();
        assert_eq!(received.flags, DROP_PRIVILEGES);
        assert_eq!(text(received.program), b"/bin/echo");
        assert_eq!(text(received.cwd), b"/tmp");
        assert_eq!(text(table[1]), b"a b");
        assert_eq!(text(table[2]), b"");
        assert!(table[3].is_null());
        assert_eq!(text(table[4]), b"PATH=/usr/bin");
        assert!(table[5].is_null());
        assert_eq!(
            received.rlimits().collect::<Vec<_>>(),
            vec![(libc::RLIMIT_CORE, 0, 0), (libc::RLIMIT_NOFILE, 64, 128)]
        );

        // Every truncation, a wrong magic and trailing bytes are refused, never a panic.
        for cut in 0..message.0.len() {
            assert!(parse(&message.0[..cut], memory).is_none(), "cut at {cut}");
        }
        let mut extra = message.0.clone();
        extra.push(b'x');
        assert!(parse(&extra, memory).is_none());
        let mut magic = message.0.clone();
        magic[0] ^= 1;
        assert!(parse(&magic, memory).is_none());
        let mut flags = message.0.clone();
        flags[16] |= 2;
        assert!(parse(&flags, memory).is_none(), "an unknown flag");
        // More strings than the table holds.
        let small = ChildMemory {
            table_len: 4,
            ..memory
        };
        assert!(parse(&message.0, small).is_none());
    }

    #[test]
    fn new_refuses_nul_bytes_and_bad_names() {
        let nul = OsStr::from_bytes(b"a\0b");
        assert!(Message::new(Path::new("/bin/true"), &[nul], &[], Path::new("/"), &[], false).is_err());
        let env = vec![("A=B".to_owned(), "x".to_owned())];
        assert!(
            Message::new(
                Path::new("/bin/true"),
                &[OsStr::new("t")],
                &env,
                Path::new("/"),
                &[],
                false
            )
            .is_err()
        );
    }

    #[test]
    fn events_round_trip_and_garbage_is_refused() {
        for (kind, event) in [
            (STARTED, Event::Started(42)),
            (FAILED, Event::Failed(2)),
            (ENDED, Event::Ended(-1)),
        ] {
            let value = match event {
                Event::Started(v) | Event::Failed(v) | Event::Ended(v) => v,
            };
            let mut bytes = kind.to_le_bytes().to_vec();
            bytes.extend_from_slice(&value.to_le_bytes());
            assert_eq!(Event::decode(&bytes), Some(event));
        }
        assert_eq!(Event::decode(&[1, 0, 0, 0]), None);
        assert_eq!(Event::decode(&[9, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(Event::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    }
}
