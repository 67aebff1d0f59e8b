//! What a wasm helper can reach, and the must-fail twin of each capability.

use std::net::TcpListener;

use wrun_runtime::env::DropReason;
use wrun_runtime::{Access, Job, Mount, Status};
use wrun_tests::{CANARY, Fixture, guest, run};

fn exited(outcome: &wrun_runtime::Outcome) -> i32 {
    match outcome.status {
        Status::Exited { code } => code,
        ref other => panic!("expected an exit, got {other:?}: {}", outcome.stderr.text()),
    }
}

/// Runs the guest scenario against a read-only worktree; returns exit code, stdout, stderr.
fn scenario(fx: &Fixture, access: Access, args: &[&str]) -> (i32, String, String) {
    let out = run(Job::wasm(guest())
        .args(args.iter().copied())
        .worktree(&fx.worktree, access));
    (
        exited(&out),
        out.stdout.text().into_owned(),
        out.stderr.text().into_owned(),
    )
}

#[test]
fn reads_the_worktree_by_relative_and_guest_path() {
    let fx = Fixture::new();
    for path in ["README.md", "./README.md", "/work/README.md", "src/../README.md"] {
        let (code, stdout, _) = scenario(&fx, Access::ReadOnly, &["read", path]);
        assert_eq!(code, 0, "{path}");
        assert_eq!(stdout, "hello from the worktree\n", "{path}");
    }
    let (code, stdout, _) = scenario(&fx, Access::ReadOnly, &["ls", "src"]);
    assert_eq!((code, stdout.as_str()), (0, "lib.rs\n"));
}

#[test]
fn dot_dot_and_absolute_paths_do_not_leave_the_worktree() {
    let fx = Fixture::new();
    let outside_abs = fx.outside.join("secret.txt");
    for path in [
        "../outside/secret.txt",
        "/work/../outside/secret.txt",
        "src/../../outside/secret.txt",
        "/etc/passwd",
        outside_abs.to_str().unwrap(),
        "/proc/self/environ",
    ] {
        let (code, stdout, stderr) = scenario(&fx, Access::ReadOnly, &["read", path]);
        assert_eq!(code, 2, "{path} was readable: {stdout}");
        assert!(!stdout.contains(CANARY) && !stdout.contains("root:"), "{path}");
        assert!(stderr.starts_with("error: "), "{path}: {stderr}");
    }
}

#[test]
fn symlinks_do_not_lead_out() {
    let fx = Fixture::new();
    let wt = &fx.worktree;
    std::os::unix::fs::symlink(fx.outside.join("secret.txt"), wt.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", wt.join("rel-link")).unwrap();
    // A directory symlink whose target ends in `/`.
    std::os::unix::fs::symlink(format!("{}/", fx.outside.display()), wt.join("dir-link")).unwrap();
    std::os::unix::fs::symlink("../outside/", wt.join("rel-dir-link")).unwrap();
    std::os::unix::fs::symlink("/", wt.join("root-link")).unwrap();
    for path in [
        "abs-link",
        "rel-link",
        "dir-link/secret.txt",
        "rel-dir-link/secret.txt",
        "root-link/etc/passwd",
    ] {
        let (code, stdout, _) = scenario(&fx, Access::ReadOnly, &["read", path]);
        assert_eq!(code, 2, "{path} was readable");
        assert!(!stdout.contains(CANARY), "{path}");
    }
    // Writing through a symlink that points out is refused too, even with write access.
    let (code, _, _) = scenario(&fx, Access::ReadWrite, &["write", "dir-link/planted", "x"]);
    assert_eq!(code, 2);
    assert!(!fx.outside.join("planted").exists());
    // A symlink inside the worktree still works.
    std::os::unix::fs::symlink("README.md", wt.join("inner-link")).unwrap();
    assert_eq!(scenario(&fx, Access::ReadOnly, &["read", "inner-link"]).0, 0);
}

#[test]
fn a_read_only_worktree_cannot_be_changed() {
    let fx = Fixture::new();
    let attempts: &[&[&str]] = &[
        &["write", "new.txt", "x"],
        &["write", "README.md", "overwritten"],
        &["create-new", "new2.txt"],
        &["truncate", "README.md"],
        &["append", "README.md", "more"],
        &["rename", "README.md", "moved.md"],
        &["link", "README.md", "hard.md"],
        &["mkdir", "newdir"],
        &["remove", "src/lib.rs"],
    ];
    for args in attempts {
        let (code, _, stderr) = scenario(&fx, Access::ReadOnly, args);
        assert_eq!(code, 2, "{args:?} succeeded on a read-only worktree");
        assert!(stderr.contains("error:"), "{args:?}: {stderr}");
    }
    let mut names: Vec<_> = std::fs::read_dir(&fx.worktree)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["README.md", "src"]);
    assert_eq!(
        std::fs::read_to_string(fx.worktree.join("README.md")).unwrap(),
        "hello from the worktree\n"
    );
    assert!(fx.worktree.join("src/lib.rs").exists());
}

#[test]
fn a_writable_worktree_can_be_changed() {
    let fx = Fixture::new();
    for args in [
        &["write", "new.txt", "written"][..],
        &["append", "README.md", "more"],
        &["rename", "src/lib.rs", "src/moved.rs"],
        &["mkdir", "made"],
    ] {
        assert_eq!(scenario(&fx, Access::ReadWrite, args).0, 0, "{args:?}");
    }
    assert_eq!(
        std::fs::read_to_string(fx.worktree.join("new.txt")).unwrap(),
        "written"
    );
    assert!(
        std::fs::read_to_string(fx.worktree.join("README.md"))
            .unwrap()
            .ends_with("more")
    );
    assert!(fx.worktree.join("src/moved.rs").exists() && fx.worktree.join("made").is_dir());
}

#[test]
fn extra_dirs_are_visible_only_as_listed_and_read_only_by_default() {
    let fx = Fixture::new();
    let job = |access| {
        Job::wasm(guest())
            .worktree(&fx.worktree, Access::ReadOnly)
            .dir(Mount::new(&fx.outside, "/data", access))
    };
    let out = run(job(Access::ReadOnly).args(["read", "/data/secret.txt"]));
    assert_eq!((exited(&out), out.stdout.text().as_ref()), (0, CANARY));
    let out = run(job(Access::ReadOnly).args(["write", "/data/new", "x"]));
    assert_eq!(exited(&out), 2);
    let out = run(job(Access::ReadWrite).args(["write", "/data/new", "x"]));
    assert_eq!(exited(&out), 0);
    assert!(fx.outside.join("new").exists());
    // Without the mount, the same path is nothing.
    let (code, _, _) = scenario(&fx, Access::ReadOnly, &["read", "/data/secret.txt"]);
    assert_eq!(code, 2);
}

#[test]
fn without_a_worktree_there_is_no_filesystem() {
    let out = run(Job::wasm(guest()).args(["read", "/etc/passwd"]));
    assert_eq!(exited(&out), 2);
    let out = run(Job::wasm(guest()).args(["ls", "."]));
    assert_eq!(exited(&out), 2);
}

#[test]
fn args_env_and_stdin_arrive_as_given() {
    let out = run(Job::wasm(guest()).args(["args", "a b", "--flag", "ünïcode"]));
    assert_eq!(
        out.stdout.text(),
        "wrun-test-guest.wasm\nargs\na b\n--flag\nünïcode\n"
    );

    let out = run(Job::wasm(guest())
        .arg("env")
        .env("LANG", "C.UTF-8")
        .env("MODE", "x=y"));
    assert_eq!(out.stdout.text(), "LANG=C.UTF-8\nMODE=x=y\n");

    let out = run(Job::wasm(guest()).arg("stdin").stdin(&b"piped input\n"[..]));
    assert_eq!(out.stdout.text(), "piped input\n");
    let out = run(Job::wasm(guest()).arg("stdin"));
    assert_eq!(
        (exited(&out), out.stdout.total_bytes),
        (0, 0),
        "closed stdin reads as empty"
    );
}

#[test]
fn nothing_is_inherited_and_secrets_are_dropped() {
    // The process's own environment never reaches a helper (the CLI test puts a canary in
    // wrun's environment); here: a job without env sees none.
    let out = run(Job::wasm(guest()).arg("env"));
    assert_eq!(
        out.stdout.total_bytes,
        0,
        "a job without env sees none: {}",
        out.stdout.text()
    );

    let out = run(Job::wasm(guest())
        .arg("env")
        .env("GITHUB_TOKEN", "ghp_secret")
        .env("OPENAI_API_KEY", "sk-secret")
        .env("LD_PRELOAD", "/tmp/evil.so")
        .env("PYTHONPATH", "/tmp")
        .policy_env("AWS_SECRET_ACCESS_KEY", "policy-cannot-pass-secrets")
        .env("KEEP", "1"));
    assert_eq!(out.stdout.text(), "KEEP=1\n");
    let dropped: Vec<(&str, DropReason)> = out
        .env_dropped
        .iter()
        .map(|d| (d.name.as_str(), d.reason))
        .collect();
    assert_eq!(
        dropped,
        [
            ("GITHUB_TOKEN", DropReason::Secret),
            ("OPENAI_API_KEY", DropReason::Secret),
            ("LD_PRELOAD", DropReason::PolicyOnly),
            ("PYTHONPATH", DropReason::PolicyOnly),
            ("AWS_SECRET_ACCESS_KEY", DropReason::Secret),
        ]
    );
    let json = serde_json::to_string(&out).unwrap();
    for value in [
        "ghp_secret",
        "sk-secret",
        "/tmp/evil.so",
        "policy-cannot-pass-secrets",
    ] {
        assert!(
            !json.contains(value),
            "the value of a dropped variable was reported"
        );
    }

    let out = run(Job::wasm(guest())
        .arg("env")
        .policy_env("PYTHONPATH", "/opt/tools"));
    assert_eq!(out.stdout.text(), "PYTHONPATH=/opt/tools\n");
}

#[test]
fn exit_codes_pass_through() {
    for code in [0, 1, 7, 42, 125] {
        let out = run(Job::wasm(guest()).args(["exit", &code.to_string()]));
        assert_eq!(out.status, Status::Exited { code });
    }
    // WASI preview 1 as wasmtime implements it refuses exit statuses of 126 and above (they
    // would read as signals); the helper traps instead.
    let out = run(Job::wasm(guest()).args(["exit", "200"]));
    assert!(
        matches!(&out.status, Status::Trapped { message } if message.contains("exit status")),
        "{:?}",
        out.status
    );
}

#[test]
fn sockets_are_unavailable() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let out = run(Job::wasm(guest()).args(["connect", &addr]));
    assert_eq!(exited(&out), 2, "connect must fail: {}", out.stdout.text());
    assert!(!out.stdout.text().contains("connected"));
    assert_eq!(
        listener.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "nothing reached the host's listener"
    );

    // Preview 1's only socket calls work on sockets handed to the guest; none are, not even
    // the preopened worktree descriptor.
    let fx = Fixture::new();
    let module = wrun_tests::wat_module(
        "sock.wasm",
        r#"(module
            (import "wasi_snapshot_preview1" "sock_accept" (func $accept (param i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") 1)
            (func (export "_start")
              (call $exit (call $accept (i32.const 3) (i32.const 0) (i32.const 64)))))"#,
    );
    let out = run(Job::wasm(module).worktree(&fx.worktree, Access::ReadOnly));
    assert!(
        matches!(out.status, Status::Exited { code } if code != 0),
        "{:?}",
        out.status
    );
}
