//! What a native helper cannot see, reach or change: host files, the host environment, the
//! network, other processes, capabilities, foreign system calls, read-only places.

use std::os::unix::net::UnixListener;
use std::time::Duration;

use wrun_runtime::{Access, Backend, ByteSize, Confinement, Job, Limits, Mount, Status};
use wrun_tests::{CANARY, Fixture, rt, run_native};

use super::{exited, python, sandbox, sh};

#[test]
fn runs_in_bubblewrap_with_the_worktree_as_working_directory() {
    let s = sandbox!();
    let fx = Fixture::new();
    let out = run_native(
        s,
        sh("pwd; cat README.md; id -u").worktree(&fx.worktree, Access::ReadOnly),
    );
    assert_eq!(exited(&out), 0);
    let text = out.stdout.text();
    assert!(text.starts_with("/work\nhello from the worktree\n"), "{text}");
    assert!(
        matches!(
            &out.backend,
            Backend::Native {
                confinement: Confinement::Bwrap,
                ..
            }
        ),
        "{:?}",
        out.backend
    );
}

#[test]
fn host_files_outside_the_binds_are_absent() {
    let s = sandbox!();
    let fx = Fixture::new();
    let secret = fx.outside.join("secret.txt");
    let script = format!(
        "cat {} /etc/shadow /root/.bashrc 2>&1; ls /home /sys /var 2>&1; cat ../outside/secret.txt",
        secret.display()
    );
    let out = run_native(s, sh(&script).worktree(&fx.worktree, Access::ReadOnly));
    assert!(!out.stdout.text().contains(CANARY));
    assert_ne!(exited(&out), 0);
}

#[test]
fn only_the_jobs_environment_is_visible_even_at_proc_1() {
    let s = sandbox!();
    let out = run_native(
        s,
        sh("cat /proc/1/environ | tr '\\0' '\\n'; echo ---; env | sort").env("LANG", "C"),
    );
    let text = out.stdout.text();
    assert!(
        !text.contains("CARGO") && !text.contains("RUST"),
        "the test process's env leaked: {text}"
    );
    assert!(text.contains("LANG=C") && text.contains("HOME=/tmp"), "{text}");
    let proc1 = text.split("---").next().unwrap();
    for line in proc1.lines().filter(|l| !l.is_empty()) {
        assert!(
            [
                "LANG=C",
                "HOME=/tmp",
                "TMPDIR=/tmp",
                "PATH=/usr/local/bin:/usr/bin:/bin"
            ]
            .contains(&line),
            "{line}"
        );
    }
}

#[test]
fn no_network_tcp_abstract_unix_or_vsock() {
    let s = sandbox!();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let name = format!("wrun-test-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(&name)
            .unwrap();
    let unix = UnixListener::bind_addr(&addr).unwrap();
    unix.set_nonblocking(true).unwrap();
    let code = format!(
        r#"
import socket, errno
results = []
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2); results.append("tcp-connected")
except OSError as e: results.append("tcp-" + errno.errorcode.get(e.errno, str(e.errno)))
try:
    u = socket.socket(socket.AF_UNIX); u.connect("\0{name}"); results.append("unix-connected")
except OSError as e: results.append("unix-" + errno.errorcode.get(e.errno, str(e.errno)))
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); results.append("vsock-created")
except OSError as e: results.append("vsock-" + errno.errorcode.get(e.errno, str(e.errno)))
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM); results.append("udp-created")
except OSError as e: results.append("udp-" + errno.errorcode.get(e.errno, str(e.errno)))
print(" ".join(results))
"#
    );
    let out = run_native(s, python(&code));
    let text = out.stdout.text();
    assert!(
        !text.contains("connected") && !text.contains("created"),
        "{text} {}",
        out.stderr.text()
    );
    assert!(text.contains("vsock-EAFNOSUPPORT"), "{text}");
    assert!(
        tcp.accept().is_err() && unix.accept().is_err(),
        "something reached the host"
    );
}

#[test]
fn ptrace_of_pid_1_is_refused_and_does_not_hang_the_run() {
    let s = sandbox!();
    let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, 0, 0)
print("ptrace", r, os.strerror(ctypes.get_errno()))
r = libc.syscall(310, 1, 0, 0, 0, 0, 0)
print("process_vm_readv", r, os.strerror(ctypes.get_errno()))
# The rest of the seccomp denylist, by x86_64 number: each must fail with EPERM (clone3: ENOSYS,
# so libc falls back to clone, whose namespace flags are checked).
calls = {"io_uring_setup": (425, 1, 0), "bpf": (321, 0, 0, 0), "perf_event_open": (298, 0, 0, -1, -1, 0),
         "userfaultfd": (323, 0), "keyctl": (250, 0, 0), "add_key": (248, 0, 0, 0, 0, 0),
         "mount": (165, 0, 0, 0, 0, 0), "open_by_handle_at": (304, 0, 0, 0), "setns": (308, 0, 0),
         "unshare": (272, 0x10000000), "clone-newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
         "clone-newnet": (56, 0x40000000 | 17, 0, 0, 0, 0), "init_module": (175, 0, 0, 0),
         "kexec_load": (246, 0, 0, 0, 0), "clone3": (435, 0, 0)}
for name, args in calls.items():
    r = libc.syscall(*args)
    print(name, r, os.strerror(ctypes.get_errno()))
"#;
    let out = run_native(
        s,
        python(code).limits(Limits::default().with_timeout(Duration::from_secs(20))),
    );
    assert_eq!(exited(&out), 0);
    let text = out.stdout.text();
    assert!(text.contains("ptrace -1 Operation not permitted"), "{text}");
    assert!(
        text.contains("process_vm_readv -1 Operation not permitted"),
        "{text}"
    );
}

#[test]
fn tiocsti_and_nested_user_namespaces_are_refused() {
    let s = sandbox!();
    let code = r#"
import fcntl, termios, os, errno
for fd in (0, 1):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x"); print("injected")
    except OSError as e: print("tiocsti", errno.errorcode[e.errno])
try:
    fcntl.ioctl(1, 0x541C, b"\x00" * 8); print("tioclinux passed")
except OSError as e: print("tioclinux", errno.errorcode[e.errno])
"#;
    let out = run_native(s, python(code));
    assert_eq!(
        out.stdout.text(),
        "tiocsti EPERM\ntiocsti EPERM\ntioclinux EPERM\n"
    );
    let out = run_native(
        s,
        sh("unshare -U true && echo nested-userns; unshare -r true && echo nested-root"),
    );
    assert!(!out.stdout.text().contains("nested"), "{}", out.stdout.text());
}

#[test]
fn usr_and_a_read_only_worktree_are_not_writable() {
    let s = sandbox!();
    let fx = Fixture::new();
    let out = run_native(
        s,
        sh("touch /usr/planted; echo x > README.md; touch new; mkdir d; rm src/lib.rs; echo x > /proc/sys/kernel/core_pattern; true")
            .worktree(&fx.worktree, Access::ReadOnly),
    );
    let err = out.stderr.text();
    assert_eq!(err.matches("Read-only file system").count(), 6, "{err}");
    assert!(!std::path::Path::new("/usr/planted").exists());
    assert_eq!(
        std::fs::read_to_string(fx.worktree.join("README.md")).unwrap(),
        "hello from the worktree\n"
    );
    assert!(!fx.worktree.join("new").exists() && fx.worktree.join("src/lib.rs").exists());
}

#[test]
fn a_writable_worktree_keeps_git_and_ai_read_only() {
    let s = sandbox!();
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.worktree.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(fx.worktree.join(".ai")).unwrap();
    let out = run_native(
        s,
        sh("echo ok > written.txt && echo evil > .git/hooks/pre-commit; echo evil > .ai/tool.sh; true")
            .worktree_mount(
                wrun_runtime::Mount::new(&fx.worktree, "/work", Access::ReadWrite).protect([".git", ".ai"]),
            ),
    );
    assert_eq!(exited(&out), 0);
    assert_eq!(
        std::fs::read_to_string(fx.worktree.join("written.txt")).unwrap(),
        "ok\n"
    );
    assert!(!fx.worktree.join(".git/hooks/pre-commit").exists());
    assert!(!fx.worktree.join(".ai/tool.sh").exists());
    assert_eq!(
        out.stderr.text().matches("Read-only file system").count(),
        2,
        "{}",
        out.stderr.text()
    );
}

#[test]
fn a_leaked_descriptor_is_not_inherited() {
    let s = sandbox!();
    let fx = Fixture::new();
    let file = std::fs::File::open(fx.outside.join("secret.txt")).unwrap();
    // Clear close-on-exec, as a careless host library would leave it.
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty())).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    let out = run_native(
        s,
        python(&format!(
            "import os\nprint(sorted(os.listdir('/proc/self/fd')))\nos.read({fd}, 100)"
        )),
    );
    assert!(!out.stdout.text().contains(CANARY));
    assert_eq!(
        out.stdout.text(),
        "['0', '1', '2', '3']\n",
        "only stdio (and listdir's own fd)"
    );
    assert!(
        out.stderr.text().contains("Bad file descriptor"),
        "{}",
        out.stderr.text()
    );
    drop(file);
}

#[test]
fn x32_and_i386_system_calls_are_refused() {
    let s = sandbox!();
    let fx = Fixture::new();
    let src = fx.worktree.join("abi.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    long r;
    if (strcmp(argv[1], "x32") == 0) {
        r = syscall(0x40000000L | SYS_getpid);
    } else {
        __asm__ volatile ("int $0x80" : "=a"(r) : "a"(20L));  /* i386 getpid */
    }
    printf("returned %ld\n", r);
    return 0;
}
"#,
    )
    .unwrap();
    let built = std::process::Command::new("gcc")
        .args(["-O0", "-o"])
        .arg(fx.worktree.join("abi"))
        .arg(&src)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var_os("WRUN_REQUIRE_NATIVE").is_none(),
            "gcc is needed to build the ABI probe"
        );
        eprintln!("skipping: gcc could not build the ABI probe");
        return;
    }
    for abi in ["x32", "i386"] {
        let out = run_native(
            s,
            Job::native("/work/abi")
                .arg(abi)
                .worktree(&fx.worktree, Access::ReadOnly),
        );
        assert_eq!(
            out.status,
            Status::Signaled {
                signal: libc_sigsys()
            },
            "{abi}: {}",
            out.stdout.text()
        );
    }
}

/// SIGSYS: what seccomp's kill-process action delivers.
fn libc_sigsys() -> i32 {
    31
}

#[test]
fn no_capabilities_a_new_session_no_core_dumps_and_few_open_files() {
    let s = sandbox!();
    let code = r#"
import os
caps = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if l.startswith("Cap"))
print("CapEff", caps["CapEff"].strip(), "CapBnd", caps["CapBnd"].strip())
# A new session led by bwrap's pid 1; without --new-session it would be wrun's (outside the
# pid namespace, so 0).
print("session", os.getsid(0))
import resource
print("core", resource.getrlimit(resource.RLIMIT_CORE))
files = []
try:
    for i in range(1000):
        files.append(open("/dev/null"))
except OSError as e:
    print("opened", len(files), e.strerror)
"#;
    let mut limits = Limits::default();
    limits.max_open_files = 64;
    let out = run_native(s, python(code).limits(limits));
    let text = out.stdout.text();
    assert!(
        text.contains("CapEff 0000000000000000 CapBnd 0000000000000000"),
        "{text}"
    );
    assert!(text.contains("session 1\n"), "{text}");
    assert!(text.contains("core (0, 0)"), "{text}");
    assert!(text.contains("Too many open files"), "{text}");
}

// The pool of spawners: a spawner is forked ahead of time, parked in its own cgroups and
// reused after sandboxed runs. Each run must still start clean.

/// Issue 12: nothing but `/tmp`, `/dev/shm` (both size-limited) and a writable worktree can be
/// written inside the sandbox: the root, `/etc`, `/dev` and every directory bwrap created are
/// read-only.
#[test]
fn the_root_and_every_directory_bwrap_creates_are_read_only() {
    let s = sandbox!();
    let fx = Fixture::new();
    let script = "for p in /x /etc/x /dev/x /run/x /home/x /var/x /opt/x /work/x /usr/x; do \
                    if touch \"$p\" 2>/dev/null || mkdir \"$p\" 2>/dev/null; then echo \"wrote $p\"; fi; done; \
                  touch /tmp/ok && echo tmp-ok; \
                  head -c 3000000 /dev/zero > /dev/shm/fill 2>/dev/null; \
                  echo \"shm $(wc -c < /dev/shm/fill)\"; \
                  test -e /dev/mqueue && echo mqueue-mounted; \
                  python3 -c 'import os; os.mkfifo(\"/etc/fifo\")' 2>/dev/null && echo wrote-fifo; true";
    let limits = Limits::default().with_tmp_size(ByteSize::mib(1));
    let out = run_native(
        s,
        sh(script).worktree(&fx.worktree, Access::ReadOnly).limits(limits),
    );
    let text = out.stdout.text();
    assert_eq!(exited(&out), 0, "{}", out.stderr.text());
    assert!(!text.contains("wrote"), "{text}");
    assert!(
        text.contains("tmp-ok") && !text.contains("mqueue-mounted"),
        "{text}"
    );
    let shm: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("shm "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(shm <= 1 << 20, "/dev/shm holds {shm} bytes under a 1 MiB limit");
    // The twin: the worktree, when writable, is.
    let out = run_native(
        s,
        sh("touch /work/x && echo wrote").worktree(&fx.worktree, Access::ReadWrite),
    );
    assert!(out.stdout.text().contains("wrote"), "{}", out.stderr.text());
}

/// A protected path reached through a symbolic link on the way (`.git` a link to a directory
/// with a `modules` in it) cannot be kept read-only: the writable job is refused before it
/// runs, on every backend.
#[test]
fn a_protected_path_below_a_link_is_refused_before_anything_runs() {
    let fx = Fixture::new();
    let real = fx.outside.join("gitdir");
    std::fs::create_dir_all(real.join("modules")).unwrap();
    std::os::unix::fs::symlink(&real, fx.worktree.join(".git")).unwrap();
    let mount = Mount::new(&fx.worktree, "/work", Access::ReadWrite).protect([".git/modules"]);
    let err = rt()
        .block_on(wrun_runtime::Sandbox::run(
            wrun_tests::sandbox(),
            Job::wasm(wrun_tests::guest())
                .worktree_mount(mount.clone())
                .args(["noop"]),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    if let Some(native) = wrun_tests::native() {
        let err = rt()
            .block_on(wrun_runtime::Sandbox::run(
                native,
                sh("touch /work/.git/modules/planted").worktree_mount(mount),
            ))
            .unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }
    assert!(!real.join("modules/planted").exists());
}
