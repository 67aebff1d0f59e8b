//! Real native tools run sandboxed on fixtures.

use std::io::Write;

use wrun_runtime::{Access, Job};
use wrun_tests::{Fixture, run_native, workspace_root};

use super::{exited, sandbox};

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
