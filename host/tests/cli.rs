//! The real `wrun` binary: flags, streams, exit codes.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stderr)]

use std::path::Path;
use std::process::{Command, Output};

use wrun_tests::{CANARY, Fixture, GUEST_WASM, TREE_STATS_WASM};

fn wrun_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_wrun"))
}

/// `wrun` in the fixture's worktree with a known environment: canaries it must never pass on, a
/// HOME for its cache, a PATH for bwrap and bare command names.
fn wrun_cmd(fx: &Fixture, args: &[&str]) -> Command {
    let mut cmd = Command::new(wrun_bin());
    cmd.args(args)
        .current_dir(&fx.worktree)
        .env_clear()
        .env("WRUN_CANARY_TOKEN", CANARY)
        .env("WRUN_CANARY_PLAIN", CANARY)
        .env("HOME", fx.worktree.parent().unwrap())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    cmd
}

fn wrun(fx: &Fixture, args: &[&str]) -> Output {
    wrun_cmd(fx, args).output().unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn version() {
    let fx = Fixture::new();
    let out = wrun(&fx, &["--version"]);
    assert_eq!(stdout(&out), format!("wrun {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn runs_a_helper_in_the_current_directory_and_passes_streams_and_exit_code() {
    let fx = Fixture::new();
    let out = wrun(&fx, &["run", "--no-cache", GUEST_WASM, "--", "read", "README.md"]);
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, "hello from the worktree\n")
    );
    let out = wrun(&fx, &["run", "--no-cache", GUEST_WASM, "--", "exit", "3"]);
    assert_eq!(code(&out), 3);
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            GUEST_WASM,
            "--",
            "read",
            "../outside/secret.txt",
        ],
    );
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("error:") && !stdout(&out).contains(CANARY));
}

#[test]
fn worktree_write_and_dir_flags() {
    let fx = Fixture::new();
    let wt = fx.worktree.to_str().unwrap();
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--worktree",
            wt,
            GUEST_WASM,
            "--",
            "write",
            "f",
            "x",
        ],
    );
    assert_eq!(code(&out), 2, "read-only by default");
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--worktree",
            wt,
            "--write",
            GUEST_WASM,
            "--",
            "write",
            "src/f",
            "x",
        ],
    );
    assert_eq!(code(&out), 0);
    assert!(fx.worktree.join("src/f").exists());
    // `.git` and `.ai` are protected in a writable worktree; for a wasm helper (Landlock) that
    // also means no new entry at its top: the README says so.
    for path in [".git", ".ai", "f"] {
        let out = wrun(
            &fx,
            &[
                "run",
                "--no-cache",
                "--worktree",
                wt,
                "--write",
                GUEST_WASM,
                "--",
                "mkdir",
                path,
            ],
        );
        assert_eq!(code(&out), 2, "{path}");
        assert!(!fx.worktree.join(path).exists(), "{path}");
    }

    let dir = format!("{}::/data", fx.outside.display());
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--dir",
            &dir,
            GUEST_WASM,
            "--",
            "read",
            "/data/secret.txt",
        ],
    );
    assert_eq!((code(&out), stdout(&out).as_str()), (0, CANARY));
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--dir",
            &dir,
            GUEST_WASM,
            "--",
            "write",
            "/data/x",
            "y",
        ],
    );
    assert_eq!(code(&out), 2);
    let rw = format!("{dir}:rw");
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--dir",
            &rw,
            GUEST_WASM,
            "--",
            "write",
            "/data/x",
            "y",
        ],
    );
    assert_eq!(code(&out), 0);
}

#[test]
fn wruns_own_environment_does_not_reach_the_helper() {
    let fx = Fixture::new();
    let out = wrun(&fx, &["run", "--no-cache", GUEST_WASM, "--", "env"]);
    assert_eq!((code(&out), stdout(&out).as_str()), (0, ""));

    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--env",
            "WRUN_CANARY_PLAIN",
            "--env",
            "WRUN_CANARY_TOKEN",
            "--env",
            "LD_PRELOAD=/x.so",
            "--env",
            "A=b",
            GUEST_WASM,
            "--",
            "env",
        ],
    );
    assert_eq!(
        stdout(&out),
        format!("WRUN_CANARY_PLAIN={CANARY}\nA=b\n"),
        "only the named, non-secret ones"
    );
    let err = stderr(&out);
    assert!(
        err.contains("dropped env WRUN_CANARY_TOKEN (a credential"),
        "{err}"
    );
    assert!(
        err.contains("dropped env LD_PRELOAD (it changes how code is loaded"),
        "{err}"
    );
    // Reasons for a person, not internal names.
    assert!(!err.contains("(Secret)") && !err.contains("PolicyOnly"), "{err}");
    assert!(!err.contains(CANARY));

    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--env",
            "NOT_SET_ANYWHERE",
            GUEST_WASM,
            "--",
            "env",
        ],
    );
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("NOT_SET_ANYWHERE is not set"));
}

#[test]
fn stdin_from_a_file() {
    let fx = Fixture::new();
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--stdin",
            "README.md",
            GUEST_WASM,
            "--",
            "stdin",
        ],
    );
    assert_eq!(stdout(&out), "hello from the worktree\n");
}

#[test]
fn limits_map_to_exit_codes() {
    let fx = Fixture::new();
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--timeout",
            "200ms",
            GUEST_WASM,
            "--",
            "spin",
        ],
    );
    assert_eq!(code(&out), 124);
    assert!(stderr(&out).contains("timed out"));
    let out = wrun(
        &fx,
        &["run", "--no-cache", "--fuel", "1000000", GUEST_WASM, "--", "spin"],
    );
    assert_eq!(code(&out), 137);
    assert!(stderr(&out).contains("fuel"));
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--memory",
            "32MiB",
            GUEST_WASM,
            "--",
            "alloc",
            "256",
        ],
    );
    assert_eq!(code(&out), 137);
    assert!(stderr(&out).contains("memory limit"));
    let out = wrun(&fx, &["run", "--no-cache", GUEST_WASM, "--", "panic"]);
    assert_eq!(code(&out), 134);
}

#[test]
fn output_caps_cut_the_middle() {
    let fx = Fixture::new();
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--stdout-cap",
            "1KiB",
            GUEST_WASM,
            "--",
            "flood",
            "100000",
        ],
    );
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.contains("[wrun: 98976 bytes cut from the middle of this stream]"),
        "{text}"
    );
    assert!(out.stdout.len() < 1200);
}

#[test]
fn json_prints_the_whole_outcome() {
    let fx = Fixture::new();
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--json",
            "--fuel",
            "10000000000",
            GUEST_WASM,
            "--",
            "fib",
            "10",
        ],
    );
    assert_eq!(code(&out), 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"]["kind"], "exited");
    assert_eq!(v["stdout"]["text"], "55\n");
    assert_eq!(v["backend"]["kind"], "wasm");
    assert!(v["usage"]["fuel_consumed"].as_u64().unwrap() > 0);
}

#[test]
fn bad_input_is_refused_with_125_and_a_reason() {
    let fx = Fixture::new();
    std::fs::write(fx.worktree.join("junk.wasm"), "not wasm").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--no-cache", "junk.wasm"],
            "not a valid WebAssembly module",
        ),
        (
            &["run", "--no-cache", "missing.wasm"],
            "cannot read module missing.wasm",
        ),
        (
            &["run", "--no-cache", "--stdout-cap", "0", GUEST_WASM],
            "stdout_cap must be greater than zero",
        ),
        (
            &["run", "--no-cache", "--stdout-cap", "64MiB", GUEST_WASM],
            "above the policy's ceiling of 10MiB",
        ),
        (
            &["run", "--no-cache", "--timeout", "0s", GUEST_WASM],
            "greater than zero",
        ),
        (
            &["run", "--no-cache", "--memory", "lots", GUEST_WASM],
            "invalid byte size",
        ),
        (
            &["run", "--no-cache", "--worktree", "/nonexistent-dir", GUEST_WASM],
            "cannot mount",
        ),
        (&["run", "--bogus-flag", GUEST_WASM], "unexpected argument"),
    ];
    for (args, needle) in cases {
        let out = wrun(&fx, args);
        assert_eq!(code(&out), 125, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_module_with_a_foreign_import_is_refused() {
    let fx = Fixture::new();
    let wasm = wat::parse_str(r#"(module (import "env" "socket_connect" (func)) (func (export "_start")))"#)
        .unwrap();
    std::fs::write(fx.worktree.join("bad.wasm"), wasm).unwrap();
    let out = wrun(&fx, &["run", "--no-cache", "bad.wasm"]);
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("env::socket_connect"), "{}", stderr(&out));
}

#[test]
fn the_disk_cache_is_used_by_the_next_process() {
    let fx = Fixture::new();
    let cache = fx.worktree.parent().unwrap().join("cache");
    let cache = cache.to_str().unwrap();
    let run = || {
        let out = wrun(
            &fx,
            &["run", "--json", "--cache-dir", cache, GUEST_WASM, "--", "hello"],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["usage"]["cache"].as_str().unwrap().to_owned()
    };
    assert_eq!(run(), "compiled");
    assert_eq!(run(), "disk");
}

#[test]
fn the_example_helper_runs_on_a_real_tree() {
    let fx = Fixture::new();
    let out = wrun(&fx, &["run", "--no-cache", TREE_STATS_WASM]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("md                 1         1          24"),
        "{text}"
    );
    assert!(
        text.contains("total              2         2          38"),
        "{text}"
    );
}

fn wrun_with_env(fx: &Fixture, env: (&str, &str), args: &[&str]) -> Output {
    wrun_cmd(fx, args).env(env.0, env.1).output().unwrap()
}

fn bwrap_works() -> bool {
    if wrun_tests::native().is_some() {
        return true;
    }
    eprintln!("skipping: bubblewrap cannot run here");
    false
}

#[test]
fn native_programs_run_sandboxed_with_exit_codes_and_signals() {
    if !bwrap_works() {
        return;
    }
    let fx = Fixture::new();
    let out = wrun(&fx, &["run", "/bin/sh", "--", "-c", "cat README.md; exit 5"]);
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (5, "hello from the worktree\n")
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let out = wrun(&fx, &["run", "/bin/sh", "--", "-c", "kill -TERM $$"]);
    assert_eq!(code(&out), 128 + 15);
    let out = wrun(
        &fx,
        &["run", "--cpu", "1s", "/bin/sh", "--", "-c", "while :; do :; done"],
    );
    assert_eq!(code(&out), 128 + 24, "{}", stderr(&out));
    let out = wrun(
        &fx,
        &["run", "--timeout", "300ms", "/bin/sh", "--", "-c", "sleep 10"],
    );
    assert_eq!(code(&out), 124);
    // A bare name is resolved on PATH.
    std::fs::write(fx.worktree.join("s.sh"), "#!/bin/sh\necho $1\n").unwrap();
    let out = wrun(&fx, &["run", "shellcheck", "--", "s.sh"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stdout(&out).contains("SC2086"));
    // wrun's own environment (it holds a canary) is invisible, even at bwrap's /proc/1/environ.
    let out = wrun(
        &fx,
        &[
            "run",
            "/bin/sh",
            "--",
            "-c",
            "cat /proc/1/environ; env; ps -ef 2>/dev/null",
        ],
    );
    assert_eq!(code(&out), 0);
    assert!(!stdout(&out).contains(CANARY), "{}", stdout(&out));
    let out = wrun(&fx, &["run", "--json", "/bin/true"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["backend"]["confinement"]["kind"], "bwrap");
}

#[test]
fn sandbox_modes_from_flag_and_helper_sandbox() {
    let fx = Fixture::new();
    let out = wrun(
        &fx,
        &[
            "run",
            "--sandbox",
            "require",
            "--bwrap",
            "/nonexistent/bwrap",
            "/bin/true",
        ],
    );
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("install bubblewrap"), "{}", stderr(&out));
    let out = wrun_with_env(
        &fx,
        ("HELPER_SANDBOX", "require"),
        &["run", "--bwrap", "/nonexistent/bwrap", "/bin/true"],
    );
    assert_eq!(code(&out), 125);
    // HELPER_SANDBOX and --sandbox may make the policy's mode stricter, never looser: `off`
    // is reported and the policy's `auto` holds (bwrap runs here).
    for (env, flag) in [(Some("off"), None), (None, Some("off"))] {
        let mut args = vec!["run", "--json"];
        if let Some(flag) = flag {
            args.extend(["--sandbox", flag]);
        }
        args.extend(["/bin/sh", "--", "-c", "exit 4"]);
        let out = match env {
            Some(value) => wrun_with_env(&fx, ("HELPER_SANDBOX", value), &args),
            None => wrun(&fx, &args),
        };
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("is looser than the policy's sandbox mode (auto); the policy's holds"),
            "{}",
            stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["backend"]["confinement"]["kind"], "bwrap", "{v}");
    }
    // The twin: a policy whose mode is off runs without the sandbox, and says so.
    let off = fx.worktree.join("off.toml");
    std::fs::write(&off, "version = 1\nsandbox = \"off\"\n").unwrap();
    let out = wrun(
        &fx,
        &[
            "run",
            "--policy",
            off.to_str().unwrap(),
            "/bin/sh",
            "--",
            "-c",
            "exit 4",
        ],
    );
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains("ran unsandboxed: sandbox mode is off"),
        "{}",
        stderr(&out)
    );
    let out = wrun_with_env(&fx, ("HELPER_SANDBOX", "sometimes"), &["run", "/bin/true"]);
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("HELPER_SANDBOX"), "{}", stderr(&out));
    let out = wrun(
        &fx,
        &[
            "run",
            "--sandbox",
            "auto",
            "--bwrap",
            "/nonexistent/bwrap",
            "/bin/sh",
            "--",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(code(&out), 0);
    assert!(
        stderr(&out).contains("warning: the helper ran unsandboxed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn doctor_reports_the_machine() {
    let fx = Fixture::new();
    let out = wrun(&fx, &["doctor"]);
    let text = stdout(&out);
    for key in [
        "bwrap",
        "seccomp",
        "limits enforced by",
        "landlock",
        "launch probe",
        "verdict",
    ] {
        assert!(text.contains(key), "{key} missing: {text}");
    }
    // Which of cgroup v2, cgroup v1 or rlimits, as the kernel offers (this machine: v1, with
    // a hybrid unified hierarchy for cgroup.kill).
    let enforced = text
        .lines()
        .find(|l| l.starts_with("limits enforced by"))
        .unwrap();
    if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        assert!(
            enforced.contains("cgroup v2") || enforced.contains("rlimits only: cgroup v2"),
            "{enforced}"
        );
    } else if std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() && nix_is_root() {
        assert!(
            enforced.contains("cgroup v1: pids under /sys/fs/cgroup/pids"),
            "{enforced}"
        );
    }
    // The kernel is asked (landlock_create_ruleset with the version flag), not the LSM list.
    let kernel_has_it =
        std::fs::read_to_string("/sys/kernel/security/lsm").is_ok_and(|l| l.contains("landlock"));
    if kernel_has_it {
        assert!(text.contains("available (ABI"), "{text}");
    }
    let out = wrun(
        &fx,
        &["doctor", "--sandbox", "require", "--bwrap", "/nonexistent/bwrap"],
    );
    assert_eq!(code(&out), 125);
    assert!(stdout(&out).contains("would be refused"));
}

#[test]
fn policy_check_prints_the_resolved_policy_or_fails_closed() {
    let fx = Fixture::new();
    let strict = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/strict.toml");
    let out = wrun(&fx, &["policy", "check", strict]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"], "require");
    assert_eq!(v["defaults"]["timeout"], 20_000);
    let bad = fx.worktree.join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\nsandbox = \"auto\"\n[limits]\nstdout_cap = \"0\"\n",
    )
    .unwrap();
    let out = wrun(&fx, &["policy", "check", bad.to_str().unwrap()]);
    assert_eq!(code(&out), 125);
    assert!(
        stderr(&out).contains("stdout_cap must be greater than zero"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn killing_wrun_kills_its_sandboxed_helper() {
    if wrun_tests::native().is_none() {
        return;
    }
    let fx = Fixture::new();
    let marker = format!("1239.{}", std::process::id());
    let mut child = wrun_cmd(
        &fx,
        &[
            "run",
            "--sandbox",
            "require",
            "/bin/sh",
            "--",
            "-c",
            &format!("sleep {marker}"),
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let wait_for = |present: bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The helper itself (wrun's own command line holds the marker too).
        while wrun_tests::process_with_argv_exists(&["sleep", &marker]) != present {
            assert!(
                std::time::Instant::now() < deadline,
                "helper running: {}",
                !present
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait_for(true);
    // SIGKILL: wrun gets no chance to clean up; the helper's tree dies with it all the same
    // (spawner and bwrap hold a parent-death signal, bwrap's pid namespace takes the rest).
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for(false);
}

/// Issue 11: a helper that runs unsandboxed (bwrap unusable, mode `auto`) under wrun's own
/// user can read no secret of wrun's processes by any path, and holds no capability.
#[test]
fn an_unsandboxed_helper_reads_no_secret_of_wrun_and_holds_no_capability() {
    let fx = Fixture::new();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    std::fs::copy(data.join("host_secrets_probe.py"), fx.worktree.join("probe.py")).unwrap();
    // The canaries are made by the shell that becomes wrun, so that no other process (this
    // test's included) holds them: one only in wrun's environment, one also in its memory
    // (`--env GITHUB_TOKEN` copies it into the job, whose guard then drops it).
    let script = format!(
        "c=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'); printf %s \"$c\" > canary.txt; \
         exec env -i PATH=/usr/local/bin:/usr/bin:/bin HOME={home} WRUN_SECRET_CANARY=\"env-$c\" \
         GITHUB_TOKEN=\"mem-$c\" {wrun} run --sandbox auto --bwrap /nonexistent/bwrap --env GITHUB_TOKEN \
         --timeout 60s /usr/bin/python3 -- probe.py canary.txt",
        home = fx.worktree.parent().unwrap().display(),
        wrun = wrun_bin().display(),
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&fx.worktree)
        .output()
        .unwrap();
    let (report, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{report}{err}");
    assert!(err.contains("unsandboxed"), "{err}");
    assert!(
        report.contains("targets wrun=") && !report.contains("spawners=0"),
        "{report}"
    );
    assert!(
        !report.contains("found "),
        "a secret of wrun's was read:\n{report}"
    );
    for what in ["environ", "/mem", "process_vm_readv", "ptrace"] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("denied") && l.contains(what)),
            "{what} was not denied:\n{report}"
        );
    }
    let caps = report.lines().find(|l| l.starts_with("caps ")).unwrap();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(caps.contains(&format!("{set}=0000000000000000")), "{caps}");
    }
    assert!(caps.contains("NoNewPrivs=1"), "{caps}");
    let bits: i64 = caps.rsplit("securebits=").next().unwrap().trim().parse().unwrap();
    if nix_is_root() {
        assert_eq!(bits & 0xef, 0xef, "securebits not locked: {caps}");
    }

    // The twin: the same probe, run directly with wrun's privileges, reads the canary from a
    // dumpable process's environment and holds capabilities.
    let canary = std::fs::read_to_string(fx.worktree.join("canary.txt")).unwrap();
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .env("WRUN_SECRET_CANARY", format!("env-{canary}"))
        .spawn()
        .unwrap();
    let direct = Command::new("/usr/bin/python3")
        .args(["probe.py", "canary.txt", &sleeper.id().to_string()])
        .current_dir(&fx.worktree)
        .output()
        .unwrap();
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    let direct = stdout(&direct);
    assert!(
        direct.contains(&format!("found /proc/{}/environ", sleeper.id())),
        "the probe cannot find a canary where one is, so this test proves nothing:\n{direct}"
    );
    if nix_is_root() {
        assert!(!direct.contains("CapEff=0000000000000000"), "{direct}");
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Issue 12: stdin streams into the helper as it reads it, under the job's timeout, for wasm
/// and native alike; a helper that does not read it is not held up; wrun never holds it whole.
#[test]
fn stdin_streams_under_the_timeout_and_is_never_read_whole() {
    use std::io::Write;
    use std::process::Stdio;
    let fx = Fixture::new();
    let cases: [&[&str]; 2] = [&[GUEST_WASM, "--", "cat"], &["/bin/cat"]];
    for program in cases {
        let mut args = vec!["run", "--no-cache", "--stdin", "-", "--timeout", "2s"];
        args.extend_from_slice(program);
        let mut child = wrun_cmd(&fx, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The pipe never closes while wrun runs: this end is held open.
        let mut writer = child.stdin.take().unwrap();
        writer.write_all(b"hello through the pipe\n").unwrap();
        writer.flush().unwrap();
        let started = std::time::Instant::now();
        let out = child.wait_with_output().unwrap();
        drop(writer);
        assert_eq!(code(&out), 124, "{program:?}: {}", stderr(&out));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{program:?}"
        );
        assert!(
            stdout(&out).contains("hello through the pipe"),
            "{program:?}: {}",
            stdout(&out)
        );
    }
    // A helper that never reads its stdin ends at once.
    let cases: [&[&str]; 2] = [&[GUEST_WASM, "--", "noop"], &["/bin/true"]];
    for program in cases {
        let mut args = vec!["run", "--no-cache", "--stdin", "-", "--timeout", "20s"];
        args.extend_from_slice(program);
        let mut child = wrun_cmd(&fx, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let writer = child.stdin.take().unwrap();
        let out = child.wait_with_output().unwrap();
        drop(writer);
        assert_eq!(code(&out), 0, "{program:?}");
    }
    // A 4 GiB file, of which the helper reads 16 bytes: wrun's own peak memory stays small.
    let big = fx.worktree.parent().unwrap().join("big.bin");
    std::fs::File::create(&big).unwrap().set_len(4 << 30).unwrap();
    let measure = "import resource, subprocess, sys\n\
                   r = subprocess.run(sys.argv[1:], capture_output=True)\n\
                   print(r.returncode, len(r.stdout), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    for program in [
        &["/usr/bin/head", "--", "-c", "16"][..],
        &[GUEST_WASM, "--", "read", "README.md"][..],
    ] {
        let mut args = vec![
            "-c",
            measure,
            wrun_bin().to_str().unwrap(),
            "run",
            "--no-cache",
            "--stdin",
            big.to_str().unwrap(),
        ];
        args.extend_from_slice(program);
        let out = Command::new("/usr/bin/python3")
            .args(&args)
            .current_dir(&fx.worktree)
            .env("HOME", fx.worktree.parent().unwrap())
            .output()
            .unwrap();
        let report = stdout(&out);
        let fields: Vec<u64> = report.split_whitespace().map(|f| f.parse().unwrap()).collect();
        assert_eq!(fields[0], 0, "{program:?}: {report} {}", stderr(&out));
        assert!(
            fields[2] < 512 * 1024,
            "wrun's peak RSS was {} KiB for {program:?}",
            fields[2]
        );
    }
}

/// Issue 12: `--changed-files -` reads the list from stdin; piped input without `--stdin` is
/// not silently dropped: wrun says so.
#[test]
fn changed_files_from_stdin_and_a_note_for_ignored_input() {
    use std::io::Write;
    use std::process::Stdio;
    let fx = Fixture::new();
    let mut child = wrun_cmd(
        &fx,
        &[
            "run",
            "--no-cache",
            "--changed-files",
            "-",
            GUEST_WASM,
            "--",
            "stdin",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"src/lib.rs\nREADME.md\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0);
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list["files"][1]["path"], "README.md");

    let mut child = wrun_cmd(&fx, &["run", "--no-cache", GUEST_WASM, "--", "stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"ignored\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!((code(&out), stdout(&out).as_str()), (0, ""));
    assert!(
        stderr(&out).contains("stdin is not passed to the helper"),
        "{}",
        stderr(&out)
    );
    // No note when stdin is /dev/null.
    let out = wrun_cmd(&fx, &["run", "--no-cache", GUEST_WASM, "--", "noop"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!stderr(&out).contains("note"), "{}", stderr(&out));
}

/// Issue 12: native programs are found in the sandbox's view (inside a read-only bind), and a
/// program that could not start is wrun's refusal (125) with a hint, never the helper's exit 1.
#[test]
fn native_programs_are_found_in_binds_and_checked_before_they_run() {
    if !bwrap_works() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let tools = fx.worktree.parent().unwrap().join("tools");
    std::fs::create_dir_all(tools.join("bin")).unwrap();
    let script = |name: &str, text: &str| {
        let p = tools.join("bin").join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script("tool", "#!/bin/sh\necho \"tool ran: $*\"\n");
    script("needs-missing", "#!/nonexistent/prefix/bin/python3\nprint(1)\n");
    script("needs-env", "#!/usr/bin/env no-such-interpreter\n");
    script("not-executable", "#!/bin/sh\n");
    std::fs::set_permissions(
        tools.join("bin/not-executable"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let bind = format!("{}::/opt/tools", tools.display());
    let out = wrun(
        &fx,
        &[
            "run",
            "--sandbox",
            "require",
            "--ro-bind",
            &bind,
            "/opt/tools/bin/tool",
            "--",
            "x",
        ],
    );
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, "tool ran: x\n"),
        "{}",
        stderr(&out)
    );
    // Under /tmp, at the same path: fine (the sandbox's /tmp is its own tmpfs).
    let in_tmp = tempfile::tempdir().unwrap();
    std::fs::copy(tools.join("bin/tool"), in_tmp.path().join("tool")).unwrap();
    let out = wrun(
        &fx,
        &[
            "run",
            "--sandbox",
            "require",
            "--ro-bind",
            in_tmp.path().to_str().unwrap(),
            in_tmp.path().join("tool").to_str().unwrap(),
        ],
    );
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, "tool ran: \n"),
        "{}",
        stderr(&out)
    );
    for (program, needle) in [
        ("/opt/tools/bin", "is a directory"),
        ("/opt/tools/bin/needs-missing", "bind its prefix"),
        ("/opt/tools/bin/needs-env", "no-such-interpreter"),
        ("/opt/tools/bin/not-executable", "not an executable"),
        ("/opt/tools/bin/nothing", "cannot find"),
    ] {
        let out = wrun(&fx, &["run", "--sandbox", "require", "--ro-bind", &bind, program]);
        assert_eq!(code(&out), 125, "{program}: {}{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).contains(needle), "{program}: {}", stderr(&out));
    }
    let out = wrun(
        &fx,
        &["run", "--sandbox", "require", "--memory", "1", "/bin/true"],
    );
    assert_eq!(code(&out), 125);
    assert!(
        stderr(&out).contains("too small to start a native helper"),
        "{}",
        stderr(&out)
    );
    // Covering the sandbox's own directories stays refused.
    for guest in ["/", "/usr", "/tmp", "/proc", "/usr/lib/x"] {
        let out = wrun(
            &fx,
            &[
                "run",
                "--sandbox",
                "require",
                "--ro-bind",
                &format!("{}::{guest}", tools.display()),
                "/bin/true",
            ],
        );
        assert_eq!(code(&out), 125, "{guest}");
    }
}

/// Issue 12: flags for the other kind of helper are refused, and so is a wasm memory limit
/// below the module's own declared minimum.
#[test]
fn flags_of_the_other_kind_and_too_little_wasm_memory_are_refused() {
    let fx = Fixture::new();
    for flag in [
        &["--cpu", "1s"][..],
        &["--ro-bind", "/usr"],
        &["--max-processes", "4"],
        &["--max-file-size", "1MiB"],
        &["--sandbox", "off"],
        &["--tmp-size", "1MiB"],
    ] {
        let mut args = vec!["run", "--no-cache"];
        args.extend_from_slice(flag);
        args.extend([GUEST_WASM, "--", "noop"]);
        let out = wrun(&fx, &args);
        assert_eq!(code(&out), 125, "{flag:?}");
        assert!(
            stderr(&out).contains("native helpers only"),
            "{flag:?}: {}",
            stderr(&out)
        );
    }
    let out = wrun(&fx, &["run", "--fuel", "1000", "/bin/true"]);
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("wasm helpers only"), "{}", stderr(&out));
    let out = wrun(
        &fx,
        &["run", "--no-cache", "--memory", "64KiB", GUEST_WASM, "--", "noop"],
    );
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("initial linear memory"), "{}", stderr(&out));
}

/// Issue 12: wasm preopens follow wasmtime's rules (`/` itself, nested guest paths), and a run
/// may have no worktree at all.
#[test]
fn wasm_dirs_may_be_the_root_or_nested_and_the_worktree_optional() {
    let fx = Fixture::new();
    let root = format!("{}::/", fx.outside.display());
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--no-worktree",
            "--dir",
            &root,
            GUEST_WASM,
            "--",
            "read",
            "/secret.txt",
        ],
    );
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, CANARY),
        "{}",
        stderr(&out)
    );
    let outer = format!("{}::/data", fx.worktree.display());
    let inner = format!("{}::/data/src", fx.outside.display());
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--dir",
            &outer,
            "--dir",
            &inner,
            GUEST_WASM,
            "--",
            "read",
            "/data/src/secret.txt",
        ],
    );
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, CANARY),
        "{}",
        stderr(&out)
    );
    // With no worktree, the current directory is not there.
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--no-worktree",
            GUEST_WASM,
            "--",
            "read",
            "README.md",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stdout(&out));
}

/// Issue 12: every command handles a closed stdout quietly.
#[test]
fn a_closed_stdout_ends_output_quietly() {
    let fx = Fixture::new();
    for command in [
        format!("{} check {GUEST_WASM}", wrun_bin().display()),
        format!("{} check --json {GUEST_WASM}", wrun_bin().display()),
        format!("{} doctor", wrun_bin().display()),
        format!(
            "{} policy check {}/../policies/default.toml",
            wrun_bin().display(),
            env!("CARGO_MANIFEST_DIR")
        ),
        format!(
            "{} run --no-cache {GUEST_WASM} -- flood 1000000",
            wrun_bin().display()
        ),
    ] {
        let out = Command::new("bash")
            .args([
                "-c",
                &format!("{command} | head -c 0; echo \"status ${{PIPESTATUS[0]}}\" >&2"),
            ])
            .current_dir(&fx.worktree)
            .env("HOME", fx.worktree.parent().unwrap())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(
            !err.contains("panicked") && !err.contains("failed printing"),
            "{command}: {err}"
        );
        assert!(!err.contains("status 101"), "{command}: {err}");
    }
}

/// A `--changed-files` FIFO is read like a file within the timeout: one with a writer works
/// (`<(git diff --name-only)`), one whose writer never comes ends with an error, not a hang.
#[test]
fn a_changed_files_fifo_is_read_within_the_timeout() {
    let fx = Fixture::new();
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("changes");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = std::time::Instant::now();
    let out = wrun_cmd(
        &fx,
        &[
            "run",
            "--no-cache",
            "--timeout",
            "2s",
            "--changed-files",
            fifo.to_str().unwrap(),
            GUEST_WASM,
            "--",
            "stdin",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 125, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("within the timeout"));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // The twin: a writer.
    let path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(path, "src/lib.rs\n"));
    let out = wrun_cmd(
        &fx,
        &[
            "run",
            "--no-cache",
            "--changed-files",
            fifo.to_str().unwrap(),
            GUEST_WASM,
            "--",
            "stdin",
        ],
    )
    .output()
    .unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let list: serde_json::Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(list["files"][0]["path"], "src/lib.rs");
}

/// Findings are read from stdout as the helper writes it, whatever the stdout cap keeps: with a
/// 1 KiB cap all 500 come through whole; past the findings limits (count, bytes) records are
/// dropped whole and counted, in the Outcome and as a SARIF notification; on both backends.
#[test]
fn findings_survive_the_stdout_cap_and_past_their_own_limits_are_counted_never_cut() {
    let fx = Fixture::new();
    let sarif = |extra: &[&str], program: &[&str]| {
        let mut args = vec!["run", "--no-cache", "--stdout-cap", "1KiB", "--format", "sarif"];
        args.extend_from_slice(extra);
        args.extend_from_slice(program);
        let out = wrun(&fx, &args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"][0].clone()
    };
    let wasm: &[&str] = &[GUEST_WASM, "--", "findings", "500"];
    let script = "i=0; while [ $i -lt 500 ]; do printf '{\"wrun_finding\":1,\"path\":\"src/f%d.rs\",\"severity\":\"warning\",\"rule\":\"many\",\"message\":\"finding number %d of 500\"}\\n' $i $i; i=$((i+1)); done";
    let native: &[&str] = &["/bin/sh", "--", "-c", script];
    for program in [wasm, native] {
        let run = sarif(&[], program);
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.len(), 500, "{program:?}");
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r["message"]["text"], format!("finding number {i} of 500"));
        }
        let notes = run["invocations"][0]["toolExecutionNotifications"].to_string();
        assert!(!notes.contains("dropped"), "{program:?}: {notes}");

        // Past the count: the first 100 whole, 400 counted.
        let run = sarif(&["--findings", "100"], program);
        assert_eq!(run["results"].as_array().unwrap().len(), 100);
        let notes = run["invocations"][0]["toolExecutionNotifications"].to_string();
        assert!(
            notes.contains("400 finding(s)") && notes.contains("findings 100"),
            "{notes}"
        );

        // Past the bytes: whole records only.
        let run = sarif(&["--findings-cap", "2KiB"], program);
        let results = run["results"].as_array().unwrap();
        assert!(!results.is_empty() && results.len() < 30, "{}", results.len());
        for r in results {
            assert!(r["message"]["text"].as_str().unwrap().ends_with("of 500"));
        }
        let notes = run["invocations"][0]["toolExecutionNotifications"].to_string();
        assert!(
            notes.contains(&format!("{} finding(s)", 500 - results.len())),
            "{notes}"
        );
    }
    // The Outcome carries the records read, and what was dropped.
    let mut args = vec![
        "run",
        "--no-cache",
        "--json",
        "--stdout-cap",
        "1KiB",
        "--findings",
        "100",
    ];
    args.extend_from_slice(wasm);
    let out = wrun(&fx, &args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"]["kept"].as_array().unwrap().len(), 100, "{v}");
    assert_eq!(v["records"]["kept"][99]["value"]["path"], "src/f99.rs");
    assert_eq!(v["records"]["dropped"], 400);
    assert_eq!(v["records"]["other_lines"], 50);
    assert!(
        v["stdout"]["cut_bytes"].as_u64().unwrap() > 0,
        "the text keeps its own cap"
    );
    // A findings limit above its ceiling is refused, not clamped.
    let out = wrun(
        &fx,
        &[
            "run",
            "--no-cache",
            "--findings",
            "200000",
            GUEST_WASM,
            "--",
            "findings",
            "1",
        ],
    );
    assert_eq!(code(&out), 125);
    assert!(
        stderr(&out).contains("findings 200000 is above"),
        "{}",
        stderr(&out)
    );
}
