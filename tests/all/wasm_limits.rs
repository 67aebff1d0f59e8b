//! Every limit, exceeded: each ends as an Outcome status, never as an error or a hang.

use std::time::Duration;

use wrun_runtime::{ByteSize, Error, Job, Limits, Status, WasmModule};
use wrun_tests::{guest, rt, run, sandbox, wat_module};

const SPIN_WAT: &str = r#"(module
    (memory (export "memory") 1)
    (func (export "_start") (loop $l (br $l))))"#;

fn limits() -> Limits {
    Limits::default()
}

#[test]
fn an_infinite_loop_times_out() {
    let job = Job::wasm(wat_module("spin.wasm", SPIN_WAT))
        .limits(limits().with_timeout(Duration::from_millis(200)));
    let out = run(job);
    assert_eq!(out.status, Status::TimedOut);
    assert!(out.usage.wall_time >= Duration::from_millis(200));

    let job = Job::wasm(guest())
        .arg("spin")
        .limits(limits().with_timeout(Duration::from_millis(200)));
    assert_eq!(run(job).status, Status::TimedOut);
}

#[test]
fn a_guest_blocked_in_a_host_call_times_out() {
    let job = Job::wasm(guest())
        .args(["sleep", "3600"])
        .limits(limits().with_timeout(Duration::from_millis(300)));
    let out = run(job);
    assert_eq!(out.status, Status::TimedOut);
    assert!(
        out.usage.wall_time < Duration::from_secs(60),
        "stopped, not slept"
    );
}

/// File operations run on the run's own thread: a guest blocked there (reading a FIFO nobody
/// writes, for a read-only and for a writable worktree) is still stopped at its deadline, and
/// the other runs of the same sandbox go on meanwhile.
#[test]
fn a_guest_blocked_in_a_file_read_on_its_own_thread_times_out() {
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(dir.path().join("plain.txt"), "plain\n").unwrap();
    let sandbox = sandbox();
    for access in [wrun_runtime::Access::ReadOnly, wrun_runtime::Access::ReadWrite] {
        let blocked = Job::wasm(guest())
            .args(["read", "fifo"])
            .worktree(dir.path(), access)
            .limits(limits().with_timeout(Duration::from_millis(500)));
        let quick = Job::wasm(guest())
            .args(["read", "plain.txt"])
            .worktree(dir.path(), wrun_runtime::Access::ReadOnly);
        let (blocked, quick) = rt().block_on(async {
            let blocked = sandbox.run(blocked);
            let quick = async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                sandbox.run(quick).await
            };
            tokio::join!(blocked, quick)
        });
        let (blocked, quick) = (blocked.unwrap(), quick.unwrap());
        assert_eq!(blocked.status, Status::TimedOut, "{access:?}: {blocked:?}");
        assert!(
            blocked.usage.wall_time < Duration::from_secs(10),
            "{:?}",
            blocked.usage
        );
        assert_eq!(quick.status, Status::Exited { code: 0 });
        assert_eq!(quick.stdout.text(), "plain\n");
        assert!(
            quick.usage.wall_time < Duration::from_millis(450),
            "{:?}",
            quick.usage
        );
    }
}

#[test]
fn an_infinite_loop_runs_out_of_fuel() {
    let job = Job::wasm(wat_module("spin.wasm", SPIN_WAT)).limits(limits().with_fuel(2_000_000));
    let out = run(job);
    assert_eq!(out.status, Status::OutOfFuel);
    let consumed = out.usage.fuel_consumed.unwrap();
    assert!(consumed >= 1_999_000, "consumed {consumed}");

    let job = Job::wasm(guest())
        .arg("spin")
        .limits(limits().with_fuel(50_000_000));
    assert_eq!(run(job).status, Status::OutOfFuel);
}

#[test]
fn fuel_is_reported_for_a_helper_that_finishes() {
    let out = run(Job::wasm(guest())
        .args(["fib", "20"])
        .limits(limits().with_fuel(10_000_000_000)));
    assert_eq!(out.status, Status::Exited { code: 0 });
    assert_eq!(out.stdout.text(), "6765\n");
    let consumed = out.usage.fuel_consumed.unwrap();
    assert!(
        consumed > 10_000 && consumed < 10_000_000_000,
        "consumed {consumed}"
    );
}

#[test]
fn a_memory_grow_bomb_is_out_of_memory() {
    let bomb = wat_module(
        "grow.wasm",
        r#"(module
            (memory (export "memory") 1)
            (func (export "_start")
              (loop $l (drop (memory.grow (i32.const 16))) (br $l))))"#,
    );
    let out = run(Job::wasm(bomb).limits(limits().with_memory(ByteSize::mib(32))));
    assert_eq!(out.status, Status::OutOfMemory);
    let peak = out.usage.peak_memory.unwrap();
    assert!(peak <= ByteSize::mib(32), "peak {peak}");

    let out = run(Job::wasm(guest())
        .args(["alloc", "512"])
        .limits(limits().with_memory(ByteSize::mib(64))));
    assert_eq!(out.status, Status::OutOfMemory);
    // Within the limit the same helper succeeds.
    let out = run(Job::wasm(guest())
        .args(["alloc", "16"])
        .limits(limits().with_memory(ByteSize::mib(64))));
    assert_eq!(out.status, Status::Exited { code: 0 });
}

/// A module that starts with more memory than its limit is refused before it runs, saying how
/// much it needs (it could never run); with that much it runs.
#[test]
fn a_module_whose_initial_memory_is_over_the_limit_is_refused_saying_what_it_needs() {
    let big = wat_module(
        "big.wasm",
        r#"(module (memory (export "memory") 2000) (func (export "_start")))"#,
    );
    let out = run(Job::wasm(big.clone()).limits(limits().with_memory(ByteSize::mib(64))));
    match out.status {
        Status::Refused { reason } => assert!(
            reason.contains("declares 125MiB of initial linear memory") && reason.contains("64MiB"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    let out = run(Job::wasm(big).limits(limits().with_memory(ByteSize::mib(125))));
    assert_eq!(out.status, Status::Exited { code: 0 });
}

#[test]
fn deep_recursion_traps_as_a_stack_overflow() {
    let rec = wat_module(
        "rec.wasm",
        r#"(module
            (memory (export "memory") 1)
            (func $f (param i32) (result i32) (i32.add (call $f (local.get 0)) (i32.const 1)))
            (func (export "_start") (drop (call $f (i32.const 0)))))"#,
    );
    let out = run(Job::wasm(rec));
    assert!(
        matches!(&out.status, Status::Trapped { message } if message.contains("call stack exhausted")),
        "{:?}",
        out.status
    );

    // A Rust guest keeps its frames on a shadow stack in linear memory; running off its end
    // traps as an out-of-bounds access before the native stack is exhausted. Either way: a
    // trap, and the host is untouched.
    let out = run(Job::wasm(guest()).args(["recurse", "100000000"]));
    assert!(matches!(&out.status, Status::Trapped { .. }), "{:?}", out.status);
}

#[test]
fn a_panicking_helper_traps() {
    let out = run(Job::wasm(guest()).arg("panic"));
    assert!(matches!(out.status, Status::Trapped { .. }), "{:?}", out.status);
    assert!(out.stderr.text().contains("the helper panicked"));
}

#[test]
fn a_gigabyte_on_stdout_is_capped_and_the_run_ends() {
    const GIB: u64 = 1 << 30;
    let cap = ByteSize::kib(64);
    let job = Job::wasm(guest()).args(["flood", &GIB.to_string()]).limits(
        limits()
            .with_stdout_cap(cap)
            .with_timeout(Duration::from_secs(300)),
    );
    let out = run(job);
    assert_eq!(
        out.status,
        Status::Exited { code: 0 },
        "the writer never saw an error"
    );
    assert_eq!(out.stdout.total_bytes, GIB);
    assert_eq!(out.stdout.cut_bytes, GIB - cap.bytes());
    assert!(
        out.stdout.rendered.len() < cap.as_usize() + 100,
        "memory held is bounded by the cap"
    );
    assert!(
        out.stdout
            .text()
            .contains(&format!("[wrun: {} bytes cut", GIB - cap.bytes()))
    );

    let job = Job::wasm(guest())
        .args(["flood-stderr", "1000000"])
        .limits(limits().with_stderr_cap(ByteSize(1000)));
    let out = run(job);
    assert_eq!(out.stderr.total_bytes, 1_000_000);
    assert!(out.stderr.truncated());
}

#[test]
fn zero_and_over_ceiling_limits_are_errors_not_unlimited() {
    for bad in [
        limits().with_stdout_cap(ByteSize(0)),
        limits().with_stderr_cap(ByteSize(0)),
        limits().with_memory(ByteSize(0)),
        limits().with_fuel(0),
        limits().with_timeout(Duration::ZERO),
        limits().with_stdout_cap(ByteSize::mib(11)),
    ] {
        let result = rt().block_on(sandbox().run(Job::wasm(guest()).arg("hello").limits(bad.clone())));
        assert!(matches!(result, Err(Error::Limits(_))), "{bad:?} was accepted");
    }
}

#[test]
fn a_module_over_the_size_cap_is_refused_before_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.wasm");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    assert!(matches!(
        WasmModule::from_file(&path, 1024),
        Err(Error::ModuleTooLarge { .. })
    ));
}

#[test]
fn a_table_grow_bomb_is_out_of_memory() {
    let bomb = wat_module(
        "tables.wasm",
        r#"(module
            (memory (export "memory") 1)
            (table 1 funcref)
            (func (export "_start")
              (loop $l (drop (table.grow (ref.null func) (i32.const 100000))) (br $l))))"#,
    );
    assert_eq!(run(Job::wasm(bomb)).status, Status::OutOfMemory);
}

#[test]
fn the_sandboxs_module_size_cap_refuses_before_compiling() {
    let mut config = wrun_runtime::WasmConfig::default();
    config.max_module_size = ByteSize::kib(1);
    let sandbox = wrun_runtime::WasmSandbox::new(config).unwrap();
    let out = rt()
        .block_on(wrun_runtime::Sandbox::run(
            &sandbox,
            Job::wasm(guest()).arg("hello"),
        ))
        .unwrap();
    assert!(
        matches!(&out.status, Status::Refused { reason } if reason.contains("module size cap")),
        "{:?}",
        out.status
    );
    assert_eq!(
        out.usage.cache,
        wrun_runtime::CacheUse::None,
        "nothing was compiled"
    );
}
