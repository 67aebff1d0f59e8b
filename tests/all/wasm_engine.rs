//! Module acceptance, caching and concurrency.

use std::sync::Arc;
use std::time::Duration;

use wrun_runtime::{
    Allocator, ByteSize, CacheUse, Error, Job, Limits, Sandbox, Status, WasmConfig, WasmModule, WasmSandbox,
};
use wrun_tests::{guest, rt, run, sandbox, wat_module};

fn refusal(module: WasmModule) -> String {
    match run(Job::wasm(module)).status {
        Status::Refused { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn malformed_modules_are_errors() {
    for bytes in [
        &b"not wasm at all"[..],
        b"",
        b"\0asm\x01\0\0\0\xff\xff",
        b"\0asm\x02\0\0\0",
    ] {
        let result = rt().block_on(sandbox().run(Job::wasm(WasmModule::from_bytes("bad.wasm", bytes))));
        assert!(
            matches!(result, Err(Error::InvalidModule { .. })),
            "{bytes:?}: {result:?}"
        );
    }
}

#[test]
fn imports_wrun_does_not_provide_are_refused_by_name() {
    let reason = refusal(wat_module(
        "steal.wasm",
        r#"(module
            (import "env" "read_host_secret" (func))
            (import "wasi_snapshot_preview1" "definitely_not_wasi" (func))
            (memory (export "memory") 1)
            (func (export "_start")))"#,
    ));
    assert!(reason.contains("env::read_host_secret"), "{reason}");
    assert!(
        reason.contains("wasi_snapshot_preview1::definitely_not_wasi"),
        "{reason}"
    );
    assert_eq!(reason.lines().count(), 2, "one line per import: {reason}");

    let reason = refusal(wat_module(
        "p2.wasm",
        r#"(module (import "wasi:sockets/tcp@0.2.0" "connect" (func)) (func (export "_start")))"#,
    ));
    assert!(reason.contains("wasi:sockets/tcp@0.2.0::connect"), "{reason}");
}

#[test]
fn a_wrongly_typed_wasi_import_is_refused() {
    let reason = refusal(wat_module(
        "typed.wasm",
        r#"(module (import "wasi_snapshot_preview1" "proc_exit" (func (param i64))) (func (export "_start")))"#,
    ));
    assert!(reason.contains("proc_exit"), "{reason}");
}

#[test]
fn components_and_libraries_are_refused() {
    let reason = refusal(WasmModule::from_bytes("c.wasm", &b"\0asm\x0d\0\x01\0"[..]));
    assert!(reason.contains("component"), "{reason}");
    let reason = refusal(wat_module("lib.wasm", r#"(module (func (export "helper")))"#));
    assert!(reason.contains("_start"), "{reason}");
}

#[test]
fn the_second_run_never_compiles() {
    let sandbox = WasmSandbox::new(WasmConfig::default()).unwrap();
    let module = wat_module(
        "once.wasm",
        r#"(module (memory (export "memory") 1) (func (export "_start")))"#,
    );
    let first = rt().block_on(sandbox.run(Job::wasm(module.clone()))).unwrap();
    let second = rt().block_on(sandbox.run(Job::wasm(module))).unwrap();
    assert_eq!(
        (first.usage.cache, second.usage.cache),
        (CacheUse::Compiled, CacheUse::Memory)
    );
}

#[test]
fn the_disk_cache_serves_a_new_process_and_survives_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut c = WasmConfig::default();
        c.cache_dir = Some(dir.path().join("cache"));
        c
    };
    let run_in_new_sandbox = || {
        let sandbox = WasmSandbox::new(config()).unwrap();
        rt().block_on(sandbox.run(Job::wasm(guest()).arg("hello")))
            .unwrap()
    };
    assert_eq!(run_in_new_sandbox().usage.cache, CacheUse::Compiled);
    let warm = run_in_new_sandbox();
    assert_eq!(
        (warm.usage.cache, warm.stdout.text().as_ref()),
        (CacheUse::Disk, "hello from wasm\n")
    );

    // A broken entry (cut short, or not compiled code at all): the next run recompiles
    // instead of loading it, and still works. (Entries are mapped, not read and hashed: the
    // cache trusts its private directory, as wasmtime's own does.)
    let entries: Vec<_> = walk(&dir.path().join("cache"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1);
    let bytes = std::fs::read(&entries[0]).unwrap();
    for broken in [bytes[..bytes.len() / 2].to_vec(), b"garbage".to_vec()] {
        std::fs::write(&entries[0], &broken).unwrap();
        let recovered = run_in_new_sandbox();
        assert_eq!(
            (recovered.usage.cache, recovered.status),
            (CacheUse::Compiled, Status::Exited { code: 0 })
        );
        assert_eq!(
            run_in_new_sandbox().usage.cache,
            CacheUse::Disk,
            "the entry was rewritten"
        );
    }
}

/// A module file is found in the cache by its identity, not read; a file changed in place
/// (same size, its modification time put back) is never run from the stale entry, and neither
/// is one changed in the same timestamp tick as the entry was recorded (git's racy rule).
#[test]
fn a_module_file_changed_in_place_is_never_run_from_a_stale_entry() {
    let dir = tempfile::tempdir().unwrap();
    let module = |word: &str| {
        wat::parse_str(format!(
            r#"(module
                (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (data (i32.const 16) "{word}\n")
                (data (i32.const 0) "\10\00\00\00\05\00\00\00")
                (func (export "_start") (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#
        ))
        .unwrap()
    };
    let (a, b) = (module("AAAA"), module("BBBB"));
    assert_eq!(a.len(), b.len());
    let path = dir.path().join("helper.wasm");
    let run = |sandbox: &WasmSandbox| {
        let m = WasmModule::from_file(&path, 1 << 20).unwrap();
        let out = rt().block_on(sandbox.run(Job::wasm(m))).unwrap();
        (out.stdout.text().into_owned(), out.usage.cache)
    };
    let config = || {
        let mut c = WasmConfig::default();
        c.cache_dir = Some(dir.path().join("cache"));
        c
    };
    let mtime = nix::sys::time::TimeSpec::new(1_700_000_000, 0);
    let rewrite = |bytes: &[u8]| {
        // In place: same inode, same size, the old modification time put back.
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(bytes).unwrap();
        drop(f);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &path,
            &mtime,
            &mtime,
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        )
        .unwrap();
    };
    std::fs::write(&path, &a).unwrap();
    rewrite(&a);
    let sandbox = WasmSandbox::new(config()).unwrap();
    // Changed within the tick the entry was recorded in: re-verified, in this process and in
    // a new one.
    assert_eq!(run(&sandbox).0, "AAAA\n");
    rewrite(&b);
    assert_eq!(run(&sandbox).0, "BBBB\n");
    assert_eq!(run(&WasmSandbox::new(config()).unwrap()).0, "BBBB\n");
    // Recorded well after its last change: the entry is trusted and the module not compiled.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let fresh = WasmSandbox::new(config()).unwrap();
    assert_eq!(run(&fresh), ("BBBB\n".to_owned(), CacheUse::Disk));
    assert_eq!(run(&fresh), ("BBBB\n".to_owned(), CacheUse::Memory));
    // Changed in place afterwards: the change time moved, so the entry no longer names it.
    rewrite(&a);
    assert_eq!(run(&fresh).0, "AAAA\n");
    assert_eq!(run(&WasmSandbox::new(config()).unwrap()).0, "AAAA\n");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_cache_dir_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut config = WasmConfig::default();
    config.cache_dir = Some(dir.path().to_owned());
    assert!(matches!(WasmSandbox::new(config), Err(Error::Cache { .. })));
}

#[test]
fn a_spinning_helper_does_not_starve_others_on_the_same_thread() {
    // One executor thread: the spinning guest must yield at every epoch tick for the quick one
    // to finish first.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = WasmSandbox::new(WasmConfig::default()).unwrap();
    rt.block_on(async {
        let spin = sandbox.run(
            Job::wasm(wat_module(
                "spin.wasm",
                r#"(module (memory (export "memory") 1) (func (export "_start") (loop $l (br $l))))"#,
            ))
            .limits(Limits::default().with_timeout(Duration::from_secs(20))),
        );
        let quick = sandbox.run(Job::wasm(guest()).arg("hello"));
        tokio::pin!(spin);
        tokio::select! {
            out = &mut spin => panic!("the spinner ended first: {:?}", out.map(|o| o.status)),
            out = quick => assert_eq!(out.unwrap().status, Status::Exited { code: 0 }),
        }
    });
}

#[test]
fn many_helpers_run_at_once_with_the_pooling_allocator() {
    let mut config = WasmConfig::default();
    config.allocator = Allocator::Pooling { instances: 8 };
    config.max_concurrent = 8;
    let sandbox: Arc<dyn Sandbox> = Arc::new(WasmSandbox::new(config).unwrap());
    let outcomes = rt().block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..24 {
            let sandbox = sandbox.clone();
            let job = if i % 3 == 0 {
                Job::wasm(guest())
                    .args(["alloc", "512"])
                    .limits(Limits::default().with_memory(ByteSize::mib(64)))
            } else {
                Job::wasm(guest()).args(["fib", "15"])
            };
            set.spawn(async move { (i, sandbox.run(job).await) });
        }
        set.join_all().await
    });
    assert_eq!(outcomes.len(), 24);
    for (i, out) in outcomes {
        let out = out.unwrap();
        if i % 3 == 0 {
            assert_eq!(out.status, Status::OutOfMemory);
        } else {
            assert_eq!(
                (out.status, out.stdout.text().as_ref()),
                (Status::Exited { code: 0 }, "610\n")
            );
        }
    }
}

/// Issue 12: a pool with fewer slots than concurrent runs would fail the excess runs as if the
/// helper trapped; it is refused when the sandbox is made.
#[test]
fn a_pool_smaller_than_the_concurrency_is_refused_up_front() {
    let mut config = WasmConfig::default();
    config.allocator = Allocator::Pooling { instances: 4 };
    config.max_concurrent = 8;
    let e = WasmSandbox::new(config).expect_err("refused").to_string();
    assert!(
        e.contains("4 instance slots") && e.contains("max_concurrent is 8"),
        "{e}"
    );
    let mut config = WasmConfig::default();
    config.allocator = Allocator::Pooling { instances: 8 };
    config.max_concurrent = 8;
    assert!(WasmSandbox::new(config).is_ok());
}

#[test]
fn precompiling_makes_the_first_run_warm() {
    let sandbox = WasmSandbox::new(WasmConfig::default()).unwrap();
    let module = wat_module(
        "pre.wasm",
        r#"(module (memory (export "memory") 1) (func (export "_start")))"#,
    );
    assert_eq!(rt().block_on(sandbox.precompile(&module, false)).unwrap(), Ok(()));
    let out = rt().block_on(sandbox.run(Job::wasm(module))).unwrap();
    assert_eq!(out.usage.cache, CacheUse::Memory);
    let refused = wat_module("lib.wasm", r#"(module (func (export "f")))"#);
    assert!(
        rt().block_on(sandbox.precompile(&refused, false))
            .unwrap()
            .is_err()
    );
}
