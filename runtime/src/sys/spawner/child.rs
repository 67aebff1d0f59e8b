//! The spawner itself: a forked copy of the host that waits for commands, starts each program
//! with `clone(CLONE_VM | CLONE_VFORK)`, waits for it and reports how it ended.
//!
//! Everything here runs after `fork` in a copy of a multi-threaded process: only
//! async-signal-safe system calls (through [`sys`], one call per wrapper), no allocation (the
//! buffers in [`ChildMemory`] were allocated before the fork), no lock, no panic.

use std::ffi::CStr;
use std::os::fd::RawFd;

use nix::unistd::Pid;

use super::wire::{self, DROP_PRIVILEGES, ENDED, Event, FAILED, MAX_EXEMPT, NO_EXEC, Received, STARTED};

/// The descriptor number of the control socket in the spawner.
const CONTROL: RawFd = 4;

/// This process's copies of buffers the host allocated before the fork.
#[derive(Clone, Copy)]
pub(super) struct ChildMemory {
    pub(super) buf: *mut u8,
    pub(super) buf_len: usize,
    pub(super) table: *mut *const libc::c_char,
    pub(super) table_len: usize,
    pub(super) stack_top: *mut libc::c_void,
}

/// What the `clone` child needs; it lives on the spawner's stack while the spawner is
/// suspended (`CLONE_VFORK`), and the child writes `errno` back into it if `exec` fails.
struct Launch<'a> {
    command: &'a Received<'a>,
    fds: &'a [RawFd],
    spawner: libc::pid_t,
    /// The spawner's effective user and group, which a child in a user namespace of its own
    /// maps to themselves.
    uid: libc::uid_t,
    gid: libc::gid_t,
    errno: i32,
}

/// The spawner. Never returns.
pub(super) fn main(control: RawFd, parent: Pid, memory: ChildMemory) -> ! {
    // Own process group, and die with the thread that forked us. Not dumpable (inherited
    // from the host, and said again): an unsandboxed helper of the same user may not read
    // this copy of the host's memory through /proc or ptrace.
    sys::prctl(libc::PR_SET_DUMPABLE, 0);
    sys::setpgid_self();
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    if sys::getppid() != parent.as_raw() {
        sys::exit(1);
    }
    // Orphans of a run are reparented here and reaped, rather than left as zombies in the
    // cgroup (they count against `pids.max` until reaped) for an init that may never reap.
    sys::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    // Keep only the control socket (close-on-exec, at a fixed number); 0, 1, 2 are /dev/null,
    // so received descriptors land at 3 or above and never on a target.
    if control != CONTROL && sys::dup3(control, CONTROL, libc::O_CLOEXEC) < 0 {
        sys::exit(1);
    }
    sys::close_range(0, (CONTROL - 1) as libc::c_uint);
    sys::close_range((CONTROL + 1) as libc::c_uint, libc::c_uint::MAX);
    for _ in 0..3 {
        if sys::open(c"/dev/null", libc::O_RDWR) < 0 {
            sys::exit(1);
        }
    }
    // Signals as a freshly started program expects them: none blocked, none ignored (the Rust
    // runtime ignores SIGPIPE; an ignored signal stays ignored across exec).
    sys::unblock_all_signals();
    for sig in 1..sys::sigrtmax() {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            sys::default_signal(sig);
        }
    }
    let me = sys::getpid();
    loop {
        serve_one(memory, me);
    }
}

/// Receives one command, runs it to its end and reports. Exits when the host has gone.
fn serve_one(memory: ChildMemory, me: libc::pid_t) {
    reap_orphans();
    // SAFETY: `buf` is this process's own copy of a `buf_len`-byte allocation made before the
    // fork, used by nothing else while this call runs.
    let buf = unsafe { std::slice::from_raw_parts_mut(memory.buf, memory.buf_len) };
    let mut fds = [-1 as RawFd; 4];
    let Some((n, nfds, truncated)) = sys::receive_command(buf, &mut fds) else {
        // The pool closed its end (or the socket failed): nothing more to run.
        sys::exit(0);
    };
    let received = fds.get(..nfds.min(fds.len())).unwrap_or(&[]);
    // SAFETY: `table` is this process's own copy of a `table_len`-pointer allocation made
    // before the fork, used by nothing else while this call runs.
    let table = unsafe { std::slice::from_raw_parts_mut(memory.table, memory.table_len) };
    let command = match buf.get(..n).and_then(|m| wire::parse(m, table)) {
        _ if truncated => Err(libc::EMSGSIZE),
        _ if !(3..=4).contains(&nfds) => Err(libc::EINVAL),
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

/// Starts the command with `clone(CLONE_VM | CLONE_VFORK)`, reports it, waits for it and
/// reports how it ended.
fn run(command: &Received<'_>, fds: &[RawFd], memory: ChildMemory, me: libc::pid_t) {
    let mut launch = Launch {
        command,
        fds,
        spawner: me,
        uid: sys::geteuid(),
        gid: sys::getegid(),
        errno: 0,
    };
    // A non-executable directory needs a mount namespace, which an unprivileged process gets
    // with a user namespace of its own.
    let namespaces = if command.flags & NO_EXEC != 0 {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    } else {
        0
    };
    // SAFETY: the child runs `launch_child` on its own stack (`stack_top`, this process's copy
    // of a buffer allocated before the fork) in this process's memory while this process is
    // suspended (CLONE_VFORK) until the child has exec'd or exited, so `launch` stays valid
    // and nothing else touches it meanwhile; the child only writes `launch.errno`.
    let pid = unsafe {
        libc::clone(
            launch_child,
            memory.stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | namespaces | libc::SIGCHLD,
            (&raw mut launch).cast(),
        )
    };
    let clone_errno = sys::errno();
    // The program has its own copies now (or none): the spawner keeps none, so the pipes reach
    // end of file when the program's processes close them, and not when the spawner next works.
    close_all(fds);
    if pid < 0 {
        report(FAILED, clone_errno);
        return;
    }
    // Written by the child, in this memory, while this process was suspended.
    // SAFETY: `launch` is a live local; a volatile read of an `i32` field.
    let child_errno = unsafe { std::ptr::read_volatile(&raw const launch.errno) };
    if child_errno != 0 {
        // The child could not exec and has exited: reap it and report why.
        sys::waitpid(pid, 0);
        report(FAILED, child_errno);
        return;
    }
    report(STARTED, pid);
    let status = loop {
        // Any child: orphans of the run that end first are reaped on the way.
        match sys::waitpid(-1, 0) {
            (r, status) if r == pid => break status,
            (r, _) if r < 0 && sys::errno() != libc::EINTR => {
                report(FAILED, sys::errno());
                return;
            }
            _ => {}
        }
    };
    reap_orphans();
    report(ENDED, status);
}

/// Closes the descriptors received with a command.
fn close_all(fds: &[RawFd]) {
    for &fd in fds {
        sys::close(fd);
    }
}

/// Reaps every child that has ended.
fn reap_orphans() {
    while sys::waitpid(-1, libc::WNOHANG).0 > 0 {}
}

/// Sends an event to the host.
fn report(kind: u32, value: i32) {
    sys::send(CONTROL, &Event::encode(kind, value));
}

/// The `clone` child: takes its descriptors, process group, parent-death signal, rlimits and
/// working directory, and execs. Runs in the spawner's memory; only writes `errno` back.
extern "C" fn launch_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Launch` the suspended spawner passed, live and used by nothing
    // else until this child execs or exits.
    let launch = unsafe { &mut *arg.cast::<Launch<'_>>() };
    let command = launch.command;
    let fds = launch.fds;
    let failed = |launch: &mut Launch<'_>| -> libc::c_int {
        launch.errno = sys::errno().max(1);
        sys::exit(127)
    };
    sys::setpgid_self();
    // Dies with the spawner, which dies with the host's pool thread.
    if sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0
        || sys::getppid() != launch.spawner
    {
        return failed(launch);
    }
    // The kernel's first choice when memory runs out, in its cgroup or on the machine: never
    // the spawner (a copy of the host, large by the kernel's count) or the host. Raising the
    // score needs no privilege; where /proc is missing it stays as it was.
    let adj = sys::open(c"/proc/self/oom_score_adj", libc::O_WRONLY | libc::O_CLOEXEC);
    if adj >= 0 {
        sys::write(adj, b"1000");
        sys::close(adj);
    }
    // Sources are at 3 or above and target 3 is written last, so no source is overwritten
    // before it is used; the received copies are close-on-exec.
    for (target, &fd) in fds.iter().enumerate() {
        if sys::dup2(fd, target as RawFd) < 0 {
            return failed(launch);
        }
    }
    for (resource, soft, hard) in command.rlimits() {
        if sys::setrlimit(resource, soft, hard) < 0 {
            return failed(launch);
        }
    }
    if let Some(dir) = command.no_exec
        && !no_exec(launch, dir)
    {
        return failed(launch);
    }
    if sys::chdir(command.cwd) < 0 {
        return failed(launch);
    }
    if command.flags & DROP_PRIVILEGES != 0 && !drop_privileges() {
        return failed(launch);
    }
    // SAFETY: `argv` and `envp` are the NULL-terminated tables `wire::parse` filled, every
    // entry a NUL-terminated string in the received message, all alive until exec.
    unsafe { sys::execve(command.program, command.argv, command.envp) };
    failed(launch)
}

/// In the child's own user and mount namespace: maps the spawner's user and group to
/// themselves, keeps mounts from propagating back, binds `dir` over itself `noexec` (and
/// `nosuid`, `nodev`, keeping the flags it had), then binds each exempt directory back over
/// itself from the original mount. False if a step fails: the program must not start.
fn no_exec(launch: &Launch<'_>, dir: &CStr) -> bool {
    let map = |id: u64| {
        let mut l = Line::new();
        l.number(id);
        l.push(b" ");
        l.number(id);
        l.push(b" 1\n");
        l
    };
    let mut deny = Line::new();
    deny.push(b"deny\n");
    let maps = [
        (c"/proc/self/setgroups", deny),
        (c"/proc/self/uid_map", map(launch.uid.into())),
        (c"/proc/self/gid_map", map(launch.gid.into())),
    ];
    for (file, text) in &maps {
        let fd = sys::open(file, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = sys::write_all(fd, text.bytes());
        sys::close(fd);
        if !written {
            return false;
        }
    }
    if sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE) < 0 {
        return false;
    }
    let original = sys::open(dir, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if original < 0 {
        return false;
    }
    // The exempt directories as they are now, before the non-executable mount hides them; a
    // missing one, a link or a file exempts nothing.
    let mut exempt = [-1 as RawFd; MAX_EXEMPT];
    for (slot, name) in exempt.iter_mut().zip(launch.command.exempt()) {
        *slot = sys::openat(
            original,
            name,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
    }
    let done = |ok: bool| {
        sys::close(original);
        for &fd in exempt.iter().filter(|&&fd| fd >= 0) {
            sys::close(fd);
        }
        ok
    };
    if sys::mount(Some(dir), dir, None, libc::MS_BIND | libc::MS_REC) < 0 {
        return done(false);
    }
    // A bind remount must keep the flags the mount had (in a user namespace they are locked).
    let Some(had) = sys::statvfs_flags(dir) else {
        return done(false);
    };
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOEXEC | libc::MS_NOSUID | libc::MS_NODEV;
    for (st, ms) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if had & st != 0 {
            flags |= ms;
        }
    }
    if sys::mount(None, dir, None, flags) < 0 {
        return done(false);
    }
    let mounted = sys::open(dir, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if mounted < 0 {
        return done(false);
    }
    for (&fd, name) in exempt.iter().zip(launch.command.exempt()) {
        if fd < 0 {
            continue;
        }
        let mut source = Line::new();
        source.push(b"/proc/self/fd/");
        source.number(fd as u64);
        let mut target = Line::new();
        target.push(b"/proc/self/fd/");
        target.number(mounted as u64);
        target.push(b"/");
        target.push(name.to_bytes());
        let (Some(source), Some(target)) = (source.c_str(), target.c_str()) else {
            sys::close(mounted);
            return done(false);
        };
        if sys::mount(Some(source), target, None, libc::MS_BIND | libc::MS_REC) < 0 {
            sys::close(mounted);
            return done(false);
        }
    }
    sys::close(mounted);
    done(true)
}

/// A short NUL-terminated line built without allocating (the child runs after `fork`).
struct Line {
    buf: [u8; 320],
    len: usize,
    overflow: bool,
}

impl Line {
    fn new() -> Self {
        Self {
            buf: [0; 320],
            len: 0,
            overflow: false,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        // One byte stays free for the NUL.
        let end = self.len + bytes.len();
        if end >= self.buf.len() {
            self.overflow = true;
            return;
        }
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
        }
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The line as a C string; `None` if it did not fit.
    fn c_str(&mut self) -> Option<&CStr> {
        if self.overflow {
            return None;
        }
        *self.buf.get_mut(self.len)? = 0;
        CStr::from_bytes_with_nul(self.buf.get(..=self.len)?).ok()
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

/// Leaves the calling process with no capability in its bounding, ambient, inheritable,
/// permitted and effective sets, the securebits locked and `no_new_privs`, so that what it
/// executes can never gain one back (as root, dropping `CAP_SYS_PTRACE` alone would leave
/// `CAP_SYS_ADMIN`, `CAP_BPF` and `CAP_SYS_MODULE`). Returns false if it cannot, and the
/// program must not start. Changing the bounding set and the securebits needs `CAP_SETPCAP`:
/// a process without it (not root) has no capabilities to drop there, and is let through.
fn drop_privileges() -> bool {
    let root = sys::geteuid() == 0;
    let permitted = |result: libc::c_int| result == 0 || (!root && sys::errno() == libc::EPERM);
    for cap in 0..64 {
        let dropped = sys::prctl(libc::PR_CAPBSET_DROP, cap);
        if dropped < 0 && sys::errno() == libc::EINVAL {
            break; // past the kernel's last capability
        }
        if !permitted(dropped) {
            return false;
        }
    }
    let ambient = sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    );
    let securebits = sys::prctl(libc::PR_SET_SECUREBITS, SECUREBITS);
    if ambient < 0 || !permitted(securebits) {
        return false;
    }
    sys::capset_none() == 0 && sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1) == 0
}

/// The system calls the spawner and its `clone` child make, one per function: each is
/// async-signal-safe, allocation-free, and holds a single unsafe operation.
mod sys {
    use std::ffi::CStr;
    use std::os::fd::RawFd;

    /// The calling thread's errno.
    pub(super) fn errno() -> i32 {
        nix::errno::Errno::last_raw()
    }

    /// `prctl(op, arg, 0, 0, 0)`.
    pub(super) fn prctl(op: libc::c_int, arg: libc::c_ulong) -> libc::c_int {
        // SAFETY: the operations used here take integer arguments only and read no memory.
        unsafe { libc::prctl(op, arg, 0, 0, 0) }
    }

    /// `setpgid(0, 0)`: a process group of its own.
    pub(super) fn setpgid_self() -> libc::c_int {
        // SAFETY: setpgid takes integers only.
        unsafe { libc::setpgid(0, 0) }
    }

    pub(super) fn getppid() -> libc::pid_t {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() }
    }

    pub(super) fn getpid() -> libc::pid_t {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() }
    }

    pub(super) fn geteuid() -> libc::uid_t {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    pub(super) fn getegid() -> libc::gid_t {
        // SAFETY: getegid has no preconditions.
        unsafe { libc::getegid() }
    }

    pub(super) fn openat(dir: RawFd, path: &CStr, flags: libc::c_int) -> libc::c_int {
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        unsafe { libc::openat(dir, path.as_ptr(), flags) }
    }

    /// `mount(source, target, NULL, flags, NULL)`.
    pub(super) fn mount(
        source: Option<&CStr>,
        target: &CStr,
        fstype: Option<&CStr>,
        flags: libc::c_ulong,
    ) -> libc::c_int {
        let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: every pointer is NULL or a NUL-terminated string that outlives the call.
        unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(fstype), flags, std::ptr::null()) }
    }

    /// The mount flags (`ST_*`) of the file system `path` is on.
    pub(super) fn statvfs_flags(path: &CStr) -> Option<libc::c_ulong> {
        let mut buf = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
        // SAFETY: `path` is NUL-terminated; `buf` is a live local the call fills.
        let r = unsafe { libc::statvfs(path.as_ptr(), buf.as_mut_ptr()) };
        // SAFETY: zeroed is a valid statvfs, and on success the call filled it.
        (r == 0).then(|| unsafe { buf.assume_init() }.f_flag)
    }

    /// Writes all of `bytes` in one call; false if the call wrote less or failed.
    pub(super) fn write_all(fd: RawFd, bytes: &[u8]) -> bool {
        // SAFETY: `bytes` is valid for reads of its length for the whole call.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        n >= 0 && n as usize == bytes.len()
    }

    /// `_exit(code)`: ends the process without running anything of the host's.
    pub(super) fn exit(code: libc::c_int) -> ! {
        // SAFETY: _exit ends the process at once; it touches no memory of ours.
        unsafe { libc::_exit(code) }
    }

    pub(super) fn dup3(from: RawFd, to: RawFd, flags: libc::c_int) -> libc::c_int {
        // SAFETY: dup3 takes descriptor numbers and flags only.
        unsafe { libc::dup3(from, to, flags) }
    }

    pub(super) fn dup2(from: RawFd, to: RawFd) -> libc::c_int {
        // SAFETY: dup2 takes descriptor numbers only.
        unsafe { libc::dup2(from, to) }
    }

    pub(super) fn open(path: &CStr, flags: libc::c_int) -> libc::c_int {
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        unsafe { libc::open(path.as_ptr(), flags) }
    }

    pub(super) fn close(fd: RawFd) {
        // SAFETY: close takes a descriptor number; the callers' descriptors are their own.
        unsafe { libc::close(fd) };
    }

    pub(super) fn write(fd: RawFd, bytes: &[u8]) {
        // SAFETY: `bytes` is valid for reads of its length for the whole call.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    }

    pub(super) fn send(fd: RawFd, bytes: &[u8]) {
        // SAFETY: `bytes` is valid for reads of its length for the whole call.
        unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
    }

    /// `close_range(first, last, 0)`.
    pub(super) fn close_range(first: libc::c_uint, last: libc::c_uint) {
        // SAFETY: close_range only closes descriptors of this process.
        unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) };
    }

    /// Blocks no signal.
    pub(super) fn unblock_all_signals() {
        let empty = nix::sys::signal::SigSet::empty();
        let _ =
            nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&empty), None);
    }

    /// The highest real-time signal number.
    pub(super) fn sigrtmax() -> libc::c_int {
        libc::SIGRTMAX()
    }

    /// Resets `sig` to its default action.
    pub(super) fn default_signal(sig: libc::c_int) {
        // SAFETY: SIG_DFL installs no handler of ours; signal takes integers only.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }

    /// `waitpid(pid, &status, flags)`: the pid (or -1) and the status.
    pub(super) fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> (libc::pid_t, libc::c_int) {
        let mut status = 0;
        // SAFETY: `status` is a live local the call writes once.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        (r, status)
    }

    pub(super) fn setrlimit(resource: u32, soft: u64, hard: u64) -> libc::c_int {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: `limit` is a live local the call reads.
        unsafe { libc::setrlimit(resource as _, &limit) }
    }

    pub(super) fn chdir(path: &CStr) -> libc::c_int {
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        unsafe { libc::chdir(path.as_ptr()) }
    }

    /// `execve(program, argv, envp)`; returns only on failure.
    ///
    /// # Safety
    /// `argv` and `envp` must be NULL-terminated arrays of pointers to NUL-terminated strings,
    /// all valid until the call returns.
    pub(super) unsafe fn execve(
        program: &CStr,
        argv: *const *const libc::c_char,
        envp: *const *const libc::c_char,
    ) {
        // SAFETY: the caller guarantees the tables; `program` is NUL-terminated.
        unsafe { libc::execve(program.as_ptr(), argv, envp) };
    }

    /// `capset` with every set empty (version 3: two data structs of 32 capabilities each).
    pub(super) fn capset_none() -> libc::c_long {
        /// `struct __user_cap_header_struct` (`linux/capability.h`).
        #[repr(C)]
        struct CapHeader {
            version: u32,
            pid: libc::c_int,
        }
        /// `struct __user_cap_data_struct`.
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct CapData {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = CapHeader {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: capset reads a version 3 header and two data structs, both live locals.
        unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_mut_ptr()) }
    }

    /// Receives one command into `buf` with up to `fds.len()` descriptors (any beyond are
    /// closed): `(bytes, descriptors received, truncated)`, or `None` when the host has gone.
    pub(super) fn receive_command(buf: &mut [u8], fds: &mut [RawFd]) -> Option<(usize, usize, bool)> {
        /// Room for one `SCM_RIGHTS` header and a few descriptors, aligned.
        #[repr(C, align(8))]
        struct Control([u8; 64]);
        let mut control = Control([0; 64]);
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg = msghdr(&mut iov, &mut control.0);
        let n = loop {
            // SAFETY: `msg` points at `iov` (over `buf`) and `control`, live locals the call
            // writes within their lengths.
            let n = unsafe { libc::recvmsg(super::CONTROL, &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 || errno() != libc::EINTR {
                break n;
            }
        };
        if n <= 0 {
            return None;
        }
        let truncated = msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
        let received = scm_rights(&msg, &control.0, fds);
        Some((n as usize, received, truncated))
    }

    /// A `msghdr` over one buffer and a control buffer.
    fn msghdr(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
        // SAFETY: an all-zero `msghdr` is valid (null pointers, zero lengths).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        msg
    }

    /// Copies the descriptors of the message's `SCM_RIGHTS` into `fds` (closing any beyond its
    /// length); how many the message carried.
    fn scm_rights(msg: &libc::msghdr, control: &[u8], fds: &mut [RawFd]) -> usize {
        // SAFETY: `msg` is the header recvmsg filled; CMSG_FIRSTHDR checks the control length.
        let header = unsafe { libc::CMSG_FIRSTHDR(msg) };
        if header.is_null() {
            return 0;
        }
        // SAFETY: a non-null CMSG_FIRSTHDR points at a complete header inside `control`.
        let header = unsafe { &*header };
        if header.cmsg_level != libc::SOL_SOCKET || header.cmsg_type != libc::SCM_RIGHTS {
            return 0;
        }
        // SAFETY: CMSG_LEN computes a length from an integer.
        let empty = unsafe { libc::CMSG_LEN(0) } as usize;
        let count = (header.cmsg_len as usize).saturating_sub(empty) / std::mem::size_of::<RawFd>();
        // The descriptors follow the header: read them as bytes within `control`.
        let start = empty;
        for i in 0..count {
            let at = start + i * std::mem::size_of::<RawFd>();
            let fd = control
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(RawFd::from_ne_bytes);
            match (fd, fds.get_mut(i)) {
                (Some(fd), Some(slot)) => *slot = fd,
                (Some(fd), None) => close(fd),
                (None, _) => {}
            }
        }
        count
    }
}
