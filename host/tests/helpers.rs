//! The first-party helpers, run through the real `wrun` binary on fixture worktrees, with
//! findings rendered as text and as SARIF validated against the SARIF 2.1.0 schema.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stderr)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use wrun_tests::{CONFIG_SYNTAX_WASM, LARGE_FILES_WASM, LINE_HYGIENE_WASM, SECRET_SCAN_WASM};

fn wrun(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wrun"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

fn worktree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

fn changed(dir: &Path, json: &str) -> String {
    let path = dir
        .parent()
        .unwrap()
        .join(format!("changes-{}.json", std::process::id()));
    std::fs::write(&path, json).unwrap();
    path.to_string_lossy().into_owned()
}

fn sarif_results(out: &Output) -> Vec<Value> {
    let sarif: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let schema: Value = serde_json::from_str(include_str!("data/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&sarif).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "SARIF does not validate: {errors:?}");
    sarif["runs"][0]["results"].as_array().unwrap().clone()
}

fn rules_at(results: &[Value]) -> Vec<(String, String, u64)> {
    results
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"];
            (
                r["ruleId"].as_str().unwrap().to_owned(),
                loc["artifactLocation"]["uri"].as_str().unwrap().to_owned(),
                loc["region"]["startLine"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn secret_scan_finds_credentials_in_changed_files_only() {
    let wt = worktree(&[
        (
            "config.py",
            b"DEBUG = True\nAWS_KEY = \"AKIAIOSFODNN7EXAMPLE\"\nDB_PASSWORD = \"q8Zr2LmX9vTk4WpN7sYb3Hc\"\n",
        ),
        (
            "deploy/key.pem",
            b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n",
        ),
        (
            "old.py",
            b"TOKEN = \"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\"\n",
        ),
        ("clean.py", b"def tokens(n):\n    return n\n"),
    ]);
    let list = changed(
        wt.path(),
        r#"{"wrun_changes":1,"files":[{"path":"config.py"},{"path":"deploy/key.pem"},{"path":"clean.py"}]}"#,
    );
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "sarif",
            "--changed-files",
            &list,
            SECRET_SCAN_WASM,
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found = rules_at(&sarif_results(&out));
    assert_eq!(
        found,
        [
            ("aws-access-key-id".to_owned(), "config.py".to_owned(), 2),
            ("high-entropy-secret".to_owned(), "config.py".to_owned(), 3),
            ("private-key".to_owned(), "deploy/key.pem".to_owned(), 1),
        ]
    );
    // Without a list the whole worktree is scanned, old.py included.
    let out = wrun(
        wt.path(),
        &["run", "--no-cache", "--format", "text", SECRET_SCAN_WASM],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("old.py:1:10: error [github-token]"));
    // A clean change exits 0.
    let list = changed(wt.path(), "clean.py\n");
    let out = wrun(
        wt.path(),
        &["run", "--no-cache", "--changed-files", &list, SECRET_SCAN_WASM],
    );
    // Nothing but the helper's description of itself and its rules.
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("wrun_finding"));
}

#[test]
fn line_hygiene_checks_changed_lines() {
    let wt = worktree(&[
        (
            "src/a.rs",
            b"fn a() {  \n<<<<<<< HEAD\nlet x = 1;\n=======\n  \n>>>>>>> branch\n}",
        ),
        ("src/b.rs", b"fn b() {}   \n"),
    ]);
    let list = changed(
        wt.path(),
        r#"{"wrun_changes":1,"files":[{"path":"src/a.rs","lines":[[1,2],[7,7]]},{"path":"src/b.rs","lines":[[5,9]]}]}"#,
    );
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "sarif",
            "--changed-files",
            &list,
            LINE_HYGIENE_WASM,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let results = sarif_results(&out);
    let found = rules_at(&results);
    assert_eq!(
        found,
        [
            ("trailing-whitespace".to_owned(), "src/a.rs".to_owned(), 1),
            ("conflict-marker".to_owned(), "src/a.rs".to_owned(), 2),
            ("missing-final-newline".to_owned(), "src/a.rs".to_owned(), 7),
        ]
    );
    // The suggested fix travels into SARIF.
    assert_eq!(
        results[0]["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"],
        "fn a() {"
    );
}

#[test]
fn large_files_flags_oversized_and_binary_files() {
    let big = vec![b'a'; 3000];
    let wt = worktree(&[
        ("big.txt", &big),
        ("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
        ("small.txt", b"ok\n"),
    ]);
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "text",
            LARGE_FILES_WASM,
            "--",
            "--max-size",
            "2048",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("big.txt: warning [oversized-file] the file is 3000 bytes, above the 2048-byte limit"),
        "{text}"
    );
    assert!(text.contains("logo.png: note [binary-file]"), "{text}");
    assert!(!text.contains("small.txt"));
    let out = wrun(
        wt.path(),
        &["run", "--no-cache", LARGE_FILES_WASM, "--", "--max-size", "zero"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "bad usage is a failure, not a finding"
    );
}

#[test]
fn config_syntax_reports_line_and_column() {
    let wt = worktree(&[
        ("package.json", b"{\n  \"name\": \"x\",\n}\n"),
        ("Cargo.toml", b"[package]\nname = \"x\"\nversion = \n"),
        ("ci.yml", b"jobs:\n  build: [a, b\n  test: c\n"),
        ("ok.json", b"{\"a\": [1, 2]}"),
        ("ok.toml", b"a = 1\n"),
        ("ok.yaml", b"a:\n  - 1\n"),
    ]);
    let out = wrun(
        wt.path(),
        &["run", "--no-cache", "--format", "sarif", CONFIG_SYNTAX_WASM],
    );
    assert_eq!(out.status.code(), Some(1));
    let results = sarif_results(&out);
    let found = rules_at(&results);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found.contains(&("invalid-json".to_owned(), "package.json".to_owned(), 3)));
    assert!(found.contains(&("invalid-toml".to_owned(), "Cargo.toml".to_owned(), 3)));
    assert!(found.iter().any(|f| f.0 == "invalid-yaml" && f.1 == "ci.yml"));
    for r in &results {
        assert!(
            r["locations"][0]["physicalLocation"]["region"]["startColumn"]
                .as_u64()
                .is_some()
        );
    }
}

#[test]
fn lines_that_are_not_findings_are_counted_and_findings_survive_a_cut_stream() {
    let wt = worktree(&[("f.txt", b"x\n")]);
    let guest = wrun_tests::GUEST_WASM;
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "text",
            guest,
            "--",
            "read",
            "f.txt",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("wrun: 1 line(s) of stdout are not findings"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "sarif",
            "--stdout-cap",
            "1KiB",
            guest,
            "--",
            "flood",
            "100000",
        ],
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"].to_string();
    assert!(notes.contains("1 line(s) of stdout are not findings"), "{notes}");
    assert!(!notes.contains("dropped"), "{notes}");
}

#[test]
fn check_describes_a_helper_and_refuses_foreign_imports() {
    let dir = tempfile::tempdir().unwrap();
    let out = wrun(dir.path(), &["check", SECRET_SCAN_WASM]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "wasi       preview1",
        "sha256",
        "filesystem",
        "path_open",
        "exports    memory, _start",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let bad = dir.path().join("net.wasm");
    std::fs::write(
        &bad,
        wat::parse_str(
            r#"(module
                (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
                (import "wasi:sockets/tcp@0.2.0" "start-connect" (func))
                (import "env" "http_get" (func))
                (memory (export "memory") 1)
                (func (export "_start")))"#,
        )
        .unwrap(),
    )
    .unwrap();
    let out = wrun(dir.path(), &["check", "net.wasm"]);
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("wasi:sockets/tcp@0.2.0::start-connect") && err.contains("env::http_get"),
        "{err}"
    );
    let out = wrun(dir.path(), &["check", "--json", "net.wasm"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runnable"], false);
    assert_eq!(v["imports"][0]["capability"], "filesystem");
}

#[test]
fn ripgrep_built_for_wasi_runs_as_a_helper() {
    let rg = wrun_tests::workspace_root().join("target/wasm-tools/bin/rg.wasm");
    if !rg.exists() {
        let reason = format!("{} is missing; tests/setup.sh builds it", rg.display());
        assert!(std::env::var_os("WRUN_REQUIRE_NATIVE").is_none(), "{reason}");
        eprintln!("skipping: {reason}");
        return;
    }
    let rg = rg.to_string_lossy().into_owned();
    // One compile of ripgrep for the whole test, not one per run.
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c").to_string_lossy().into_owned();
    let wt = worktree(&[
        (
            "src/main.rs",
            b"fn main() {\n    // TODO: handle errors\n    run();\n}\n",
        ),
        ("docs/notes.md", b"nothing to do\nTODO: write docs\n"),
        ("target/gen.rs", b"// TODO generated\n"),
        (".gitignore", b"target/\n"),
    ]);
    // A real repository: ripgrep honours .gitignore inside one.
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(wt.path())
        .status()
        .unwrap();
    assert!(git.success());
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--cache-dir",
            &cache_dir,
            &rg,
            "--",
            "-n",
            "-j1",
            "--sort",
            "path",
            "TODO",
            ".",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "./docs/notes.md:2:TODO: write docs\n./src/main.rs:2:    // TODO: handle errors\n"
    );
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--cache-dir",
            &cache_dir,
            &rg,
            "--",
            "-j1",
            "NOT-THERE",
            ".",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "no match is exit 1");
    // It cannot search outside the worktree, however it is asked.
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--cache-dir",
            &cache_dir,
            &rg,
            "--",
            "-j1",
            "root",
            "/etc/passwd",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    // stdin needs an explicit `-`.
    let input = wt.path().join("in.txt");
    std::fs::write(&input, "alpha\nbeta\n").unwrap();
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--cache-dir",
            &cache_dir,
            "--stdin",
            "in.txt",
            &rg,
            "--",
            "-j1",
            "beta",
            "-",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "beta\n");
}

/// Validates a SARIF log with Microsoft's SARIF multitool under the GitHub code-scanning rules,
/// the checks a SARIF upload goes through. Returns the errors and warnings it reports.
fn multitool_complaints(sarif: &[u8]) -> Vec<String> {
    let tool = wrun_tests::workspace_root().join("target/tools-npm/node_modules/.bin/sarif-multitool");
    if !tool.exists() {
        let reason = format!("{} is missing; tests/setup.sh installs it", tool.display());
        assert!(std::env::var_os("WRUN_REQUIRE_NATIVE").is_none(), "{reason}");
        eprintln!("skipping the multitool check: {reason}");
        return Vec::new();
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.sarif");
    let report = dir.path().join("report.sarif");
    std::fs::write(&input, sarif).unwrap();
    let out = Command::new(&tool)
        .args(["validate", "--rule-kind", "Gh", "-o"])
        .arg(&report)
        .arg(&input)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(report.exists(), "the multitool did not run: {text}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let mut complaints: Vec<String> = report["runs"][0]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| matches!(r["level"].as_str(), Some("error" | "warning") | None))
        .map(|r| r.to_string())
        .collect();
    if !out.status.success() {
        complaints.push(text);
    }
    complaints
}

#[test]
fn sarif_passes_the_code_scanning_checks_for_findings_failures_and_undescribed_rules() {
    // A described helper with findings.
    let wt = worktree(&[("config.py", b"AWS_KEY = \"AKIAIOSFODNN7EXAMPLE\"\n")]);
    let out = wrun(
        wt.path(),
        &["run", "--no-cache", "--format", "sarif", SECRET_SCAN_WASM],
    );
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let driver = &sarif["runs"][0]["tool"]["driver"];
    assert_eq!(driver["name"], "secret-scan");
    let rules = driver["rules"].as_array().unwrap();
    let aws = rules.iter().find(|r| r["id"] == "aws-access-key-id").unwrap();
    assert!(
        aws["shortDescription"]["text"].as_str().unwrap().len() > 3,
        "{aws}"
    );
    assert_eq!(multitool_complaints(&out.stdout), Vec::<String>::new());

    // A helper that describes nothing, reporting a rule under a path with spaces and a '#'.
    let finding = br#"{"wrun_finding":1,"path":"src/a b#c.rs","line":3,"severity":"warning","rule":"odd-rule","message":"look here"}"#;
    let wt = worktree(&[("f.jsonl", finding), ("src/a b#c.rs", b"1\n2\n3\n")]);
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "sarif",
            wrun_tests::GUEST_WASM,
            "--",
            "read",
            "f.jsonl",
        ],
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "odd-rule");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "src/a%20b%23c.rs"
    );
    assert_eq!(multitool_complaints(&out.stdout), Vec::<String>::new());

    // A run that timed out: no results, the failure said as a notification, still valid.
    let out = wrun(
        wt.path(),
        &[
            "run",
            "--no-cache",
            "--format",
            "sarif",
            "--timeout",
            "300ms",
            wrun_tests::GUEST_WASM,
            "--",
            "spin",
        ],
    );
    assert_eq!(out.status.code(), Some(124));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let invocation = &sarif["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    assert!(
        invocation["toolExecutionNotifications"]
            .to_string()
            .contains("timed out"),
        "{invocation}"
    );
    assert_eq!(multitool_complaints(&out.stdout), Vec::<String>::new());
}
