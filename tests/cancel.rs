//! Cancellation is part of the contract: a host that drops the future `run` returned (its own
//! timeout, a client gone) stops the run. For each backend, a helper that would otherwise run
//! for an hour is given up on, and nothing of it is left: no process, no thread, no permit.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stderr)]

use std::time::{Duration, Instant};

use wrun_runtime::{Access, Job, Limits, Mount, Sandbox, WasmConfig, WasmSandbox};
use wrun_tests::{Fixture, guest, process_with_marker_exists, rt};

const HOUR: Duration = Duration::from_secs(3600);

/// The runtime's threads running confined wasm guests.
fn confined_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("wrun-wasm-confi"))
        .count()
}

/// Waits up to five seconds for `done`.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Starts `job` on `sandbox`, lets it run for `after`, and drops its future.
fn give_up(sandbox: &dyn Sandbox, job: Job, after: Duration) {
    let given_up = rt().block_on(async { tokio::time::timeout(after, sandbox.run(job)).await });
    assert!(given_up.is_err(), "the run ended by itself: {given_up:?}");
}

#[test]
fn a_dropped_run_stops_on_every_backend() {
    let mut config = WasmConfig::default();
    config.max_concurrent = 1;
    config.cache_dir = None;
    let wasm = WasmSandbox::new(config).unwrap();
    let hour = Limits::default().with_timeout(HOUR);

    // wasm, on the caller's task: the guest spins; its permit (the only one) comes back.
    give_up(
        &wasm,
        Job::wasm(guest()).args(["spin"]).limits(hour.clone()),
        Duration::from_millis(500),
    );
    let started = Instant::now();
    let out = rt()
        .block_on(wasm.run(Job::wasm(guest()).args(["noop"])))
        .unwrap();
    assert_eq!(out.status, wrun_runtime::Status::Exited { code: 0 });
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the next run waited for the dropped one"
    );

    // wasm confined by Landlock (a writable worktree with a protected .git): the run has a
    // thread of its own, which ends.
    if wrun_tests::landlock_available() {
        let fx = Fixture::new();
        std::fs::create_dir_all(fx.worktree.join(".git")).unwrap();
        let mount = Mount::new(&fx.worktree, "/work", Access::ReadWrite).protect([".git"]);
        let job = Job::wasm(guest())
            .args(["spin"])
            .worktree_mount(mount)
            .limits(hour.clone());
        give_up(&wasm, job, Duration::from_millis(500));
        assert!(
            eventually(|| confined_threads() == 0),
            "the confined run's thread goes on"
        );
    }

    // native: the helper's whole process tree is killed before or promptly after the drop.
    if let Some(native) = wrun_tests::native() {
        let marker = format!("1240.{}", std::process::id());
        let job = Job::native("/bin/sh")
            .args(["-c", &format!("sleep {marker} & sleep {marker}")])
            .limits(hour);
        give_up(native, job, Duration::from_millis(700));
        assert!(
            eventually(|| !process_with_marker_exists(&marker)),
            "the dropped native run's processes survived"
        );
    }
}
