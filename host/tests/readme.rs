//! README.md's commands, run as written: every ```sh block, line by line, in a scratch copy of
//! this repository (its tracked files, committed on `main` and cloned, so that `origin/main`
//! exists), with `wrun` on PATH.
//!
//! What CI has done before this test runs is not done again: `tests/setup.sh` runs for real
//! (it installs only what is missing), but a `cargo` command that builds something this test
//! run already has is checked rather than repeated: `cargo build … -p wrun-host` and `cargo run
//! -p wrun-host -- ARGS` are the `wrun` under test, `cargo build --target wasm32-wasip1 -p NAME`
//! must find the module the test build made, `cargo install ripgrep` the ripgrep set-up built,
//! and `cargo test` is this run. Every other cargo command (the "Write a helper" walk-through:
//! `cargo new`, `cargo add`, a build of the new crate) runs for real, offline. A block that
//! clones from GitHub runs only where the clone already exists.
//!
//! A line passes when it exits 0, or 1 for a `wrun` command (the helper found something).
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The ```sh blocks of a Markdown file, each as its logical lines.
fn sh_blocks(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for (n, line) in markdown.lines().enumerate() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some((n + 1, Vec::new())),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some((_, lines)), line) => {
                if let Some(prev) = lines.last_mut()
                    && prev.ends_with('\\')
                {
                    prev.pop();
                    prev.push_str(line);
                } else if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
                    lines.push(line.to_owned());
                }
            }
            (None, _) => {}
        }
    }
    blocks
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.email=dev@example.com",
            "-c",
            "user.name=dev",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A copy of the repository's tracked files (as they are in the working tree), committed on
/// `main` in `base` and cloned to `checkout` with a pull request's commit on top.
fn checkout(root: &Path, scratch: &Path) -> PathBuf {
    let listed = Command::new("git")
        .current_dir(root)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let base = scratch.join("base");
    for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let rel = Path::new(std::str::from_utf8(path).unwrap());
        let from = root.join(rel);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = base.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    git(&base, &["init", "-q"]);
    git(&base, &["add", "-A"]);
    git(&base, &["commit", "-qm", "base"]);
    let checkout = scratch.join("checkout");
    git(scratch, &["clone", "-q", "base", "checkout"]);
    std::fs::write(
        checkout.join("runtime/config.example.py"),
        "DB_PASSWORD = \"q8Zr2LmX9vTk4WpN7sYb3Hc\"\n",
    )
    .unwrap();
    git(&checkout, &["checkout", "-qb", "pr"]);
    git(&checkout, &["add", "-A"]);
    git(&checkout, &["commit", "-qm", "a change"]);
    checkout
}

/// `target/` of the checkout: the binary and modules of this test run, the tools the set-up
/// installed.
fn target(root: &Path, checkout: &Path) {
    let target = checkout.join("target");
    let modules = target.join("wasm32-wasip1/release");
    std::fs::create_dir_all(&modules).unwrap();
    std::fs::create_dir_all(target.join("release")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wrun"), target.join("release/wrun")).unwrap();
    let built = Path::new(wrun_tests::TREE_STATS_WASM).parent().unwrap();
    for entry in std::fs::read_dir(built).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "wasm") {
            std::os::unix::fs::symlink(&path, modules.join(path.file_name().unwrap())).unwrap();
        }
    }
    for tool in ["wasm-tools", "tools-venv", "tools-npm", "tools"] {
        let real = root.join("target").join(tool);
        if real.exists() {
            std::os::unix::fs::symlink(&real, target.join(tool)).unwrap();
        }
    }
}

/// The `cargo` this test puts first on PATH (see the module's documentation).
const CARGO_SHIM: &str = r#"#!/usr/bin/env bash
set -euo pipefail
args=" $* "
case "$1" in
  test) echo "cargo test: this is the run in progress" >&2; exit 0 ;;
  install)
    if [[ "$args" == *" ripgrep "* ]]; then
      test -f target/wasm-tools/bin/rg.wasm || { echo "cargo shim: target/wasm-tools/bin/rg.wasm is missing (tests/setup.sh builds it)" >&2; exit 1; }
      exit 0
    fi ;;
  run)
    if [[ "$args" == *" -p wrun-host -- "* ]]; then
      shift; while [ "$1" != "--" ]; do shift; done; shift
      exec wrun "$@"
    fi ;;
  build)
    if [[ "$args" == *" -p wrun-host "* ]]; then
      test -x target/release/wrun; exit 0
    fi
    if [[ "$args" == *" --target wasm32-wasip1 "* && "$args" == *" -p "* ]]; then
      set -- "$@"; missing=0
      while [ $# -gt 0 ]; do
        if [ "$1" = "-p" ]; then
          test -f "target/wasm32-wasip1/release/$2.wasm" || { echo "cargo shim: $2.wasm was not built by the test build" >&2; missing=1; }
          shift
        fi
        shift
      done
      exit $missing
    fi ;;
esac
exec "$WRUN_README_CARGO" "$@"
"#;

#[test]
fn readme_commands_run_as_written() {
    let root = wrun_tests::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    assert!(blocks.len() >= 8, "{} sh blocks", blocks.len());
    let scratch = tempfile::tempdir().unwrap();
    let checkout = checkout(&root, scratch.path());
    target(&root, &checkout);
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("cargo"), CARGO_SHIM).unwrap();
    std::fs::set_permissions(
        bin.join("cargo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wrun"), bin.join("wrun")).unwrap();
    // The cargo that built this test (PATH's `cargo` is the shim).
    let real_cargo = env!("CARGO");
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(|| home.join(".cargo"), PathBuf::from);
    let rustup_home = std::env::var_os("RUSTUP_HOME").map_or_else(|| home.join(".rustup"), PathBuf::from);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    let mut failures = Vec::new();
    for (line_no, lines) in &blocks {
        let network = |l: &str| l.starts_with("git clone ") && l.contains("https://");
        if let Some(clone) = lines.iter().find(|l| network(l)) {
            let dest = clone.split_whitespace().last().unwrap();
            if !Path::new(dest).exists() {
                eprintln!(
                    "README.md:{line_no}: not run: it clones from the network ({dest} does not exist here)"
                );
                continue;
            }
        }
        let status_file = scratch.path().join("status");
        let _ = std::fs::remove_file(&status_file);
        let mut script = String::from("set -uo pipefail\n");
        for (i, line) in lines.iter().enumerate() {
            if network(line) {
                continue;
            }
            script.push_str(&format!(
                "{line}\necho \"{i} $?\" >> '{}'\n",
                status_file.display()
            ));
        }
        let out = Command::new("timeout")
            .args(["600", "bash", "-c", &script])
            .current_dir(&checkout)
            .env("PATH", &path)
            .env("HOME", scratch.path().join("home"))
            .env("LANG", "C.UTF-8")
            .env("CARGO_NET_OFFLINE", "true")
            .env("WRUN_README_CARGO", real_cargo)
            .env("CARGO_HOME", &cargo_home)
            .env("RUSTUP_HOME", &rustup_home)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .output()
            .unwrap();
        let statuses = std::fs::read_to_string(&status_file).unwrap_or_default();
        let mut seen = 0;
        for entry in statuses.lines() {
            let (i, code) = entry.split_once(' ').unwrap();
            let (i, code): (usize, i32) = (i.parse().unwrap(), code.parse().unwrap());
            seen += 1;
            let line = &lines[i];
            let is_wrun = line.split_whitespace().any(|w| w == "wrun") || line.contains("-p wrun-host -- ");
            if !(code == 0 || (code == 1 && is_wrun)) {
                failures.push(format!(
                    "README.md:{line_no}: `{line}` exited {code}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let expected = lines.iter().filter(|l| !network(l)).count();
        if seen != expected {
            failures.push(format!(
                "README.md:{line_no}: the block stopped after {seen} of {expected} lines ({})\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The guest SDK's README shows `guest-sdk/examples/backup-files.rs`, which the README's
/// walk-through copies: the two stay the same.
#[test]
fn the_guest_sdk_readme_shows_the_example_file() {
    let root = wrun_tests::workspace_root();
    let readme = std::fs::read_to_string(root.join("guest-sdk/README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("guest-sdk/examples/backup-files.rs")).unwrap();
    let start = readme.find("```rust\n").unwrap() + "```rust\n".len();
    let end = start + readme[start..].find("```").unwrap();
    assert_eq!(&readme[start..end], example);
}

/// The operator's guide shows `tests/examples/operator.toml`, which its commands use: the two
/// stay the same.
#[test]
fn the_operators_guide_shows_the_policy_it_runs_with() {
    let root = wrun_tests::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let policy = std::fs::read_to_string(root.join("tests/examples/operator.toml")).unwrap();
    let guide = &readme[readme.find("## Operator's guide").unwrap()..];
    let start = guide.find("```toml\n").unwrap() + "```toml\n".len();
    let end = start + guide[start..].find("```").unwrap();
    assert_eq!(&guide[start..end], policy);
}
