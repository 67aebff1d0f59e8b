//! How native runs start and end: the sandbox mode, the pool of spawners, daemons and stopped
//! helpers, programs that cannot start.

use std::time::Duration;

use wrun_runtime::{
    Access, Backend, ByteSize, Confinement, Job, Limits, NativeConfig, NativeSandbox, SandboxMode, Status,
};
use wrun_tests::{Fixture, native, process_with_marker_exists, rt, run_native};

use super::{exited, sandbox, sh};

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
