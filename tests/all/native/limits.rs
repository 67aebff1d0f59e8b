//! Every native limit exceeded: processes, CPU, memory (address space and cgroup), file size,
//! /tmp, output; exit codes and signals as the host sees them.

use std::time::Duration;

use wrun_runtime::{Access, Backend, ByteSize, Limits, Status};
use wrun_tests::{Fixture, process_with_marker_exists, run_native};

use super::{exited, python, sandbox, sh};

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
fn exit_codes_and_signals_pass_through() {
    let s = sandbox!();
    assert_eq!(run_native(s, sh("exit 3")).status, Status::Exited { code: 3 });
    assert_eq!(
        run_native(s, sh("kill -TERM $$")).status,
        Status::Signaled { signal: 15 }
    );
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
