//! The native backend against a real bubblewrap: every hole of MACHINE-FACTS tried from inside,
//! every limit exceeded, and real tools run.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use wrun_runtime::{
    Access, Backend, ByteSize, Confinement, Job, Limits, Mount, NativeConfig, NativeSandbox, Outcome,
    SandboxMode, Status,
};
use wrun_tests::{CANARY, Fixture, native, process_with_marker_exists, rt, run_native, workspace_root};

fn sh(script: &str) -> Job {
    Job::native("/bin/sh").args(["-c", script])
}

fn python(code: &str) -> Job {
    Job::native("/usr/bin/python3").args(["-c", code])
}

fn exited(out: &Outcome) -> i32 {
    match out.status {
        Status::Exited { code } => code,
        ref other => panic!("expected an exit, got {other:?}; stderr: {}", out.stderr.text()),
    }
}

macro_rules! sandbox {
    () => {
        match native() {
            Some(s) => s,
            None => return,
        }
    };
}

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
fn a_fork_bomb_is_bounded_and_leaves_nothing_behind() {
    let s = sandbox!();
    let marker = format!("1234.{}", std::process::id());
    let script =
        format!("n=0; while [ $n -lt 2000 ]; do sleep {marker} & n=$((n+1)); done 2>/dev/null; wait");
    let job = sh(&script).limits(
        Limits::default()
            .with_max_processes(64)
            .with_timeout(Duration::from_secs(10)),
    );
    let out = run_native(s, job);
    // Either the shell gives up when fork fails (exit 2) or the clock stops it: it ends.
    assert!(
        matches!(out.status, Status::TimedOut | Status::Exited { code: 2 }),
        "{:?}",
        out.status
    );
    assert!(!process_with_marker_exists(&marker), "a bomb process survived");
    assert!(
        matches!(
            out.backend,
            Backend::Native {
                enforcement: wrun_runtime::Enforcement {
                    processes: wrun_runtime::Mechanism::CgroupV1 | wrun_runtime::Mechanism::CgroupV2,
                    ..
                },
                ..
            }
        ),
        "{:?}",
        out.backend
    );
    // The limit held: count how many forks succeed.
    let code = "import os, sys, time\nn = 0\nfor i in range(200):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(99)\n        os._exit(0)\n    n += 1\nprint(n)";
    let out = run_native(
        s,
        python(code)
            .arg(&marker)
            .limits(Limits::default().with_max_processes(32)),
    );
    let forked: u32 = out.stdout.text().trim().parse().unwrap();
    assert!((1..32).contains(&forked), "{forked} forks under a limit of 32");
    assert!(!process_with_marker_exists(&marker));
}

#[test]
fn a_setsid_daemon_does_not_survive() {
    let s = sandbox!();
    let marker = format!("1235.{}", std::process::id());
    let out = run_native(
        s,
        sh(&format!(
            "setsid sh -c 'sleep {marker}' </dev/null >/dev/null 2>&1 & ( ( sleep {marker} & ) & ); echo started"
        )),
    );
    assert_eq!((exited(&out), out.stdout.text().as_ref()), (0, "started\n"));
    assert!(!process_with_marker_exists(&marker), "a daemon outlived the run");
}

#[test]
fn a_stopped_helper_does_not_hang_the_run() {
    let s = sandbox!();
    let out = run_native(
        s,
        sh("kill -STOP $$").limits(Limits::default().with_timeout(Duration::from_secs(1))),
    );
    assert_eq!(out.status, Status::TimedOut);
}

#[test]
fn cpu_memory_and_file_size_limits_hold() {
    let s = sandbox!();
    let out = run_native(
        s,
        sh("while :; do :; done").limits(
            Limits::default()
                .with_cpu(Duration::from_secs(1))
                .with_timeout(Duration::from_secs(20)),
        ),
    );
    assert_eq!(out.status, Status::OutOfCpu);

    // A gigabyte under a 256 MiB limit: refused (RLIMIT_AS: MemoryError) or stopped (the
    // memory cgroup: out of memory), never allocated.
    let out = run_native(
        s,
        python("b = bytearray(1 << 30); print('allocated')")
            .limits(Limits::default().with_memory(ByteSize::mib(256))),
    );
    assert!(!out.stdout.text().contains("allocated"));
    assert!(
        out.status == Status::OutOfMemory || out.stderr.text().contains("MemoryError"),
        "{:?}: {}",
        out.status,
        out.stderr.text()
    );

    let fx = Fixture::new();
    let out = run_native(
        s,
        sh("truncate -s 1T big")
            .worktree(&fx.worktree, Access::ReadWrite)
            .limits(Limits::default().with_max_file_size(ByteSize::mib(10))),
    );
    assert_eq!(out.status, Status::FileTooLarge, "{}", out.stderr.text());
    assert!(
        std::fs::metadata(fx.worktree.join("big"))
            .map(|m| m.len())
            .unwrap_or(0)
            <= 10 << 20
    );
}

#[test]
fn a_tmp_fill_stops_at_its_size() {
    let s = sandbox!();
    let mut limits = Limits::default();
    limits.tmp_size = ByteSize::mib(8);
    let out = run_native(
        s,
        sh("head -c 64M /dev/zero > /tmp/fill; ls -l /tmp/fill").limits(limits),
    );
    assert!(
        out.stderr.text().contains("No space left"),
        "{}",
        out.stderr.text()
    );
}

#[test]
fn a_gigabyte_flood_is_capped() {
    let s = sandbox!();
    let job = sh("head -c 1073741824 /dev/zero").limits(
        Limits::default()
            .with_stdout_cap(ByteSize::kib(64))
            .with_timeout(Duration::from_secs(120)),
    );
    let out = run_native(s, job);
    assert_eq!(exited(&out), 0);
    assert_eq!(out.stdout.total_bytes, 1 << 30);
    assert!(out.stdout.rendered.len() < 66 * 1024);
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
fn exit_codes_and_signals_pass_through() {
    let s = sandbox!();
    assert_eq!(run_native(s, sh("exit 3")).status, Status::Exited { code: 3 });
    assert_eq!(
        run_native(s, sh("kill -TERM $$")).status,
        Status::Signaled { signal: 15 }
    );
}

#[test]
fn require_refuses_and_auto_falls_back_when_bwrap_is_missing() {
    let missing = Some(std::path::PathBuf::from("/nonexistent/bwrap"));
    let require = NativeSandbox::new(NativeConfig::new(missing.clone(), SandboxMode::Require)).unwrap();
    let err = rt()
        .block_on(wrun_runtime::Sandbox::run(&require, sh("echo hi")))
        .unwrap_err();
    assert!(err.to_string().contains("required"), "{err}");

    let auto = NativeSandbox::new(NativeConfig::new(missing, SandboxMode::Auto)).unwrap();
    let out = rt()
        .block_on(wrun_runtime::Sandbox::run(
            &auto,
            sh("echo hi; env").env("GITHUB_TOKEN", "x"),
        ))
        .unwrap();
    assert_eq!(exited(&out), 0);
    assert!(out.stdout.text().starts_with("hi\n") && !out.stdout.text().contains("GITHUB_TOKEN"));
    assert!(
        matches!(&out.backend, Backend::Native { confinement: Confinement::Unsandboxed { reason }, .. } if reason.contains("/nonexistent/bwrap"))
    );

    let off = NativeSandbox::new(NativeConfig::new(None, SandboxMode::Off)).unwrap();
    let out = rt()
        .block_on(wrun_runtime::Sandbox::run(
            &off,
            sh("sleep 5").limits(Limits::default().with_timeout(Duration::from_millis(300))),
        ))
        .unwrap();
    assert_eq!(out.status, Status::TimedOut, "limits hold unsandboxed too");
}

#[test]
fn shellcheck_runs_on_a_fixture() {
    let s = sandbox!();
    let fx = Fixture::new();
    std::fs::write(fx.worktree.join("bad.sh"), "#!/bin/sh\necho $1\n").unwrap();
    std::fs::write(fx.worktree.join("good.sh"), "#!/bin/sh\necho \"$1\"\n").unwrap();
    let out = run_native(
        s,
        Job::native("/usr/bin/shellcheck")
            .args(["-f", "gcc", "bad.sh"])
            .worktree(&fx.worktree, Access::ReadOnly),
    );
    assert_eq!(exited(&out), 1, "{}", out.stderr.text());
    assert!(
        out.stdout
            .text()
            .contains("bad.sh:2:6: note: Double quote to prevent globbing"),
        "{}",
        out.stdout.text()
    );
    let out = run_native(
        s,
        Job::native("/usr/bin/shellcheck")
            .arg("good.sh")
            .worktree(&fx.worktree, Access::ReadOnly),
    );
    assert_eq!(exited(&out), 0);
}

#[test]
fn ruff_from_a_venv_runs_on_a_fixture() {
    let s = sandbox!();
    let venv = workspace_root().join("target/tools-venv");
    let ruff = venv.join("bin/ruff");
    if !ruff.exists() {
        let reason = format!("{} is missing; run tests/setup.sh", ruff.display());
        assert!(std::env::var_os("WRUN_REQUIRE_NATIVE").is_none(), "{reason}");
        eprintln!("skipping: {reason}");
        return;
    }
    let fx = Fixture::new();
    let mut f = std::fs::File::create(fx.worktree.join("bad.py")).unwrap();
    writeln!(f, "import os\n\ndef f():\n    return undefined_name\n").unwrap();
    std::fs::write(fx.worktree.join("good.py"), "def f():\n    return 1\n").unwrap();
    let job = |file: &str| {
        Job::native("/opt/tools-venv/bin/ruff")
            .args(["check", "--no-cache", "--output-format", "concise", file])
            .worktree(&fx.worktree, Access::ReadOnly)
            .dir(wrun_runtime::Mount::new(
                &venv,
                "/opt/tools-venv",
                Access::ReadOnly,
            ))
    };
    let out = run_native(s, job("bad.py"));
    assert_eq!(exited(&out), 1, "{}", out.stderr.text());
    let text = out.stdout.text();
    assert!(text.contains("bad.py:1:8: F401"), "{text}");
    assert!(text.contains("F821"), "{text}");
    assert_eq!(exited(&run_native(s, job("good.py"))), 0);
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
fn memory_in_tmpfs_counts_and_an_oom_kill_is_told() {
    let s = sandbox!();
    // RLIMIT_AS does not see tmpfs pages; the run's memory cgroup (memory + tmp_size) does:
    // /tmp and /dev/shm both filled exceed it.
    let limits = Limits::default()
        .with_memory(ByteSize::mib(64))
        .with_tmp_size(ByteSize::mib(256));
    let out = run_native(
        s,
        sh("head -c 200M /dev/zero > /tmp/fill; head -c 200M /dev/zero > /dev/shm/fill").limits(limits),
    );
    assert_eq!(out.status, Status::OutOfMemory, "{}", out.stderr.text());
    let peak = out.usage.peak_memory.expect("the memory cgroup reports a peak");
    assert!(peak <= ByteSize::mib(64 + 256), "{peak}");
    // The kernel's first choice under memory pressure is the helper, never wrun or its
    // spawner (which share the memory cgroup with it).
    let out = run_native(s, sh("cat /proc/self/oom_score_adj"));
    assert_eq!(out.stdout.text(), "1000\n");
}

#[test]
fn a_script_in_the_worktree_runs_by_its_guest_path_sandboxed_or_not() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let script = fx.worktree.join(".ai/lint.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\necho \"linted $(cat README.md)\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let job = || Job::native("/work/.ai/lint.sh").worktree(&fx.worktree, Access::ReadOnly);
    let auto = NativeSandbox::new(NativeConfig::new(None, SandboxMode::Auto)).unwrap();
    let out = rt().block_on(wrun_runtime::Sandbox::run(&auto, job())).unwrap();
    assert_eq!(
        out.stdout.text(),
        "linted hello from the worktree\n",
        "{}",
        out.stderr.text()
    );
    if let Some(s) = native() {
        let out = run_native(s, job());
        assert_eq!(out.stdout.text(), "linted hello from the worktree\n");
    }
}

#[test]
fn a_daemon_holding_stdout_does_not_hang_an_unsandboxed_run() {
    let off = NativeSandbox::new(NativeConfig::new(None, SandboxMode::Off)).unwrap();
    let marker = format!("1236.{}", std::process::id());
    let job = sh(&format!("setsid sleep {marker} & echo started"))
        .limits(Limits::default().with_timeout(Duration::from_secs(60)));
    let out = rt().block_on(wrun_runtime::Sandbox::run(&off, job)).unwrap();
    assert_eq!((exited(&out), out.stdout.text().as_ref()), (0, "started\n"));
    assert!(
        out.usage.wall_time < Duration::from_secs(30),
        "the run waited for the daemon: {:?}",
        out.usage.wall_time
    );
    // Where wrun can create a cgroup (as here, as root), the daemon is gone too.
    if matches!(
        out.backend,
        Backend::Native {
            enforcement: wrun_runtime::Enforcement {
                processes: wrun_runtime::Mechanism::CgroupV1 | wrun_runtime::Mechanism::CgroupV2,
                ..
            },
            ..
        }
    ) {
        assert!(!process_with_marker_exists(&marker));
    }
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

#[test]
fn a_reused_spawner_starts_every_run_clean() {
    let Some(s) = wrun_tests::fresh_native() else {
        return;
    };
    // An OOM kill first: its count, its peak and its processes must not follow later runs.
    let limits = Limits::default()
        .with_memory(ByteSize::mib(64))
        .with_tmp_size(ByteSize::mib(256));
    let out = run_native(
        &s,
        sh("head -c 200M /dev/zero > /tmp/fill; head -c 200M /dev/zero > /dev/shm/fill").limits(limits),
    );
    assert_eq!(out.status, Status::OutOfMemory, "{}", out.stderr.text());
    // More runs than the pool holds spawners, under a process limit smaller than the number
    // of runs: anything left in a reused cgroup (a process, an unreaped zombie) would add up.
    for i in 0..30 {
        let out = run_native(
            &s,
            sh(&format!("(true) & wait; echo run {i}")).limits(Limits::default().with_max_processes(6)),
        );
        assert_eq!(exited(&out), 0, "run {i}: {}", out.stderr.text());
        assert_eq!(out.stdout.text(), format!("run {i}\n"));
        let peak = out.usage.peak_memory.expect("the memory cgroup reports a peak");
        assert!(
            peak < ByteSize::mib(32),
            "run {i} reports {peak}: the OOM run's peak"
        );
    }
}

#[test]
fn runs_at_once_beyond_the_pool_and_a_dropped_run_leave_nothing_behind() {
    let Some(s) = wrun_tests::fresh_native() else {
        return;
    };
    // Twelve at once: more than the pool keeps parked, so most wait for a new spawner.
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..12)
            .map(|i| {
                let s = &s;
                scope.spawn(move || run_native(s, sh(&format!("echo {i}; echo err{i} >&2"))))
            })
            .collect();
        for (i, run) in runs.into_iter().enumerate() {
            let out = run.join().unwrap();
            assert_eq!(exited(&out), 0);
            assert_eq!(out.stdout.text(), format!("{i}\n"));
            assert_eq!(out.stderr.text(), format!("err{i}\n"));
        }
    });
    // A run whose future is dropped (the host gave up on it) is killed before the drop
    // returns, and the pool goes on.
    let marker = format!("1238.{}", std::process::id());
    let given_up = rt().block_on(async {
        let run = wrun_runtime::Sandbox::run(&s, sh(&format!("sleep {marker}")));
        tokio::time::timeout(Duration::from_millis(700), run).await
    });
    assert!(given_up.is_err(), "the run should still have been going");
    assert!(
        !process_with_marker_exists(&marker),
        "the dropped run's helper survived"
    );
    assert_eq!(exited(&run_native(&s, sh("exit 7"))), 7);
}

#[test]
fn a_program_that_cannot_start_is_an_error_and_the_next_run_works() {
    let off = NativeSandbox::new(NativeConfig::new(None, SandboxMode::Off)).unwrap();
    let err = rt()
        .block_on(wrun_runtime::Sandbox::run(
            &off,
            Job::native("/nonexistent/helper"),
        ))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nonexistent/helper") && err.contains("No such file"),
        "{err}"
    );
    let out = rt()
        .block_on(wrun_runtime::Sandbox::run(&off, sh("echo fine")))
        .unwrap();
    assert_eq!(out.stdout.text(), "fine\n");
}

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

/// Issue 12: with the default limits, a helper filling /tmp gets ENOSPC, which it can report,
/// not an out-of-memory kill: the memory cgroup holds memory and /tmp side by side.
#[test]
fn with_the_default_limits_a_full_tmp_is_enospc_not_an_oom_kill() {
    let s = sandbox!();
    let limits = Limits::default();
    let fill = limits.tmp_size.bytes() + (16 << 20);
    let out = run_native(
        s,
        sh(&format!("head -c {fill} /dev/zero > /tmp/fill; echo \"exit $?\"")).limits(limits),
    );
    assert_eq!(exited(&out), 0, "{:?} {}", out.status, out.stderr.text());
    assert!(
        out.stderr.text().contains("No space left"),
        "{}",
        out.stderr.text()
    );
    assert!(out.stdout.text().contains("exit 1"), "{}", out.stdout.text());
}

/// The sandbox mode travels with the job: one backend (one pool of spawners), configured
/// `auto` here, refuses a `require` job where bwrap is missing and runs an `auto` or `off` job
/// unsandboxed.
#[test]
fn a_jobs_sandbox_mode_overrides_the_backends() {
    let missing = Some(std::path::PathBuf::from("/nonexistent/bwrap"));
    let auto = NativeSandbox::new(NativeConfig::new(missing, SandboxMode::Auto)).unwrap();
    let err = rt()
        .block_on(wrun_runtime::Sandbox::run(
            &auto,
            sh("echo hi").sandbox(SandboxMode::Require),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("`require`"), "{err}");
    for job in [sh("echo hi"), sh("echo hi").sandbox(SandboxMode::Off)] {
        let out = rt().block_on(wrun_runtime::Sandbox::run(&auto, job)).unwrap();
        assert_eq!(exited(&out), 0);
        assert!(matches!(
            &out.backend,
            Backend::Native {
                confinement: Confinement::Unsandboxed { .. },
                ..
            }
        ));
    }
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

/// Where a memory cgroup bounds the memory a run uses, a process may reserve address space
/// beyond the limit (node's V8, the JVM and Go reserve far more than they touch); what it
/// touches is still bounded.
#[test]
fn address_space_reserved_beyond_the_limit_is_not_memory_used() {
    let s = sandbox!();
    let reserve = "import mmap\nm = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=0)\nprint('reserved')";
    let limits = Limits::default().with_memory(ByteSize::mib(256));
    let out = run_native(s, python(reserve).limits(limits.clone()));
    let cgroup = matches!(
        out.backend,
        Backend::Native {
            enforcement: wrun_runtime::Enforcement {
                memory: wrun_runtime::Mechanism::CgroupV1 | wrun_runtime::Mechanism::CgroupV2,
                ..
            },
            ..
        }
    );
    if cgroup {
        assert_eq!(out.stdout.text(), "reserved\n", "{}", out.stderr.text());
        // Touching it is memory: stopped.
        let touch = "b = bytearray(1 << 30); print('allocated')";
        let out = run_native(s, python(touch).limits(limits));
        assert_eq!(out.status, Status::OutOfMemory, "{}", out.stderr.text());
    } else {
        // Without a memory cgroup, RLIMIT_AS is the limit: the reservation is refused.
        assert!(!out.stdout.text().contains("reserved"));
    }
}
