//! One table of capability cases, run against every backend: what one guarantees, the others
//! must too, or the table says why not.
//!
//! Protected paths of a writable worktree (`.git`, `.ai`, a nested repository's `.git`, the
//! git directory a `.git` file points to): every way of changing one is tried — writing,
//! truncating, appending, removing, renaming it or a directory on the way to it, creating it
//! where it is missing, reaching it through a symbolic link or a hard link — and each must
//! fail and leave the worktree as it was; the must-run twins (writing elsewhere in the
//! worktree) must work on every backend.

use std::path::{Path, PathBuf};

use wrun_runtime::{Access, Job, Mount, Outcome, Sandbox, Status};
use wrun_tests::{guest, native, rt, run, run_native};

/// A worktree with everything a protected-path attack aims at.
struct Tree {
    _root: tempfile::TempDir,
    path: PathBuf,
}

/// What the host protects in it (the host's `protect::protected_paths` finds the same).
const PROTECTED: &[&str] = &[
    ".ai",
    ".git",
    "meta/gitdir",
    "sub/.git",
    "vendor/lib/.git",
    "sub2/.git",
];

impl Tree {
    /// `bare`: without `.git` and `.ai` (they must not be creatable either).
    fn new(bare: bool) -> Self {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("wt");
        let files: &[(&str, &str)] = &[
            ("README.md", "readme\n"),
            ("src/lib.rs", "lib\n"),
            ("sub/.git/config", "[core]\n"),
            ("vendor/lib/.git/config", "[core]\n"),
            ("vendor/lib/code.c", "code\n"),
            ("meta/gitdir/config", "[core]\n"),
            ("sub2/.git", "gitdir: ../meta/gitdir\n"),
        ];
        let top: &[(&str, &str)] = &[
            (".git/config", "[core]\n"),
            (".git/hooks/README", "hooks\n"),
            (".ai/marker", "upstream\n"),
        ];
        for (file, text) in files.iter().chain(if bare { &[][..] } else { top }) {
            let p = path.join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        Self { _root: root, path }
    }

    fn mount(&self) -> Mount {
        Mount::new(&self.path, "/work", Access::ReadWrite).protect(PROTECTED.iter().copied())
    }

    /// Every file and directory under the tree with its content, for before/after.
    fn snapshot(&self) -> Vec<(String, String)> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    out.push((rel, "<dir>".into()));
                    walk(&p, base, out);
                } else if t.is_symlink() {
                    out.push((rel, format!("-> {}", std::fs::read_link(&p).unwrap().display())));
                } else {
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path, &self.path, &mut out);
        out.sort();
        out
    }
}

/// One attack: the wasm guest's scenario and the shell's command for the same operation.
struct Case {
    what: &'static str,
    bare: bool,
    guest: &'static [&'static [&'static str]],
    sh: &'static str,
}

const ATTACKS: &[Case] = &[
    Case {
        what: "plant a hook",
        bare: false,
        guest: &[&["write", ".git/hooks/pre-commit", "evil"]],
        sh: "echo evil > .git/hooks/pre-commit",
    },
    Case {
        what: "rewrite .git/config",
        bare: false,
        guest: &[&["write", ".git/config", "evil"]],
        sh: "echo evil > .git/config",
    },
    Case {
        what: "truncate .git/config",
        bare: false,
        guest: &[&["truncate", ".git/config"]],
        sh: "truncate -s 0 .git/config",
    },
    Case {
        what: "append to .git/config",
        bare: false,
        guest: &[&["append", ".git/config", "evil"]],
        sh: "echo evil >> .git/config",
    },
    Case {
        what: "rewrite .ai",
        bare: false,
        guest: &[&["write", ".ai/marker", "evil"]],
        sh: "echo evil > .ai/marker",
    },
    Case {
        what: "add to .ai",
        bare: false,
        guest: &[&["write", ".ai/new.sh", "evil"]],
        sh: "echo evil > .ai/new.sh",
    },
    Case {
        what: "remove from .ai",
        bare: false,
        guest: &[&["remove", ".ai/marker"]],
        sh: "rm .ai/marker",
    },
    Case {
        what: "rename .git away",
        bare: false,
        guest: &[&["rename", ".git", "gone"]],
        sh: "mv .git gone",
    },
    Case {
        what: "rename .ai away",
        bare: false,
        guest: &[&["rename", ".ai", "gone"]],
        sh: "mv .ai gone",
    },
    Case {
        what: "rename a file into .git",
        bare: false,
        guest: &[&["rename", "README.md", ".git/hooks/pre-commit"]],
        sh: "mv README.md .git/hooks/pre-commit",
    },
    Case {
        what: "mkdir in .git",
        bare: false,
        guest: &[&["mkdir", ".git/x"]],
        sh: "mkdir .git/x",
    },
    Case {
        what: "write through a symlink to .git",
        bare: false,
        guest: &[
            &["symlink", "../.git", "src/l"],
            &["write", "src/l/hooks/pre-commit", "evil"],
        ],
        sh: "ln -s ../.git src/l; echo evil > src/l/hooks/pre-commit",
    },
    Case {
        what: "write through a hard link to .git/config",
        bare: false,
        guest: &[
            &["link", ".git/config", "src/config"],
            &["write", "src/config", "evil"],
        ],
        sh: "ln .git/config src/config; echo evil > src/config",
    },
    Case {
        what: "rewrite a nested repository's config",
        bare: false,
        guest: &[&["write", "sub/.git/config", "evil"]],
        sh: "echo evil > sub/.git/config",
    },
    Case {
        what: "plant a hook in a nested repository",
        bare: false,
        guest: &[&["mkdir", "vendor/lib/.git/hooks"]],
        sh: "mkdir vendor/lib/.git/hooks",
    },
    Case {
        what: "rename a nested repository's directory away",
        bare: false,
        guest: &[&["rename", "vendor/lib", "vendor/moved"]],
        sh: "mv vendor/lib vendor/moved",
    },
    Case {
        what: "rename the directory of a nested .git away",
        bare: false,
        guest: &[&["rename", "sub", "moved"]],
        sh: "mv sub moved",
    },
    Case {
        what: "rewrite a .git file to point elsewhere",
        bare: false,
        guest: &[&["write", "sub2/.git", "gitdir: /tmp/evil"]],
        sh: "echo 'gitdir: /tmp/evil' > sub2/.git",
    },
    Case {
        what: "write the git directory a .git file names",
        bare: false,
        guest: &[&["write", "meta/gitdir/config", "evil"]],
        sh: "echo evil > meta/gitdir/config",
    },
    Case {
        what: "create .git where there is none",
        bare: true,
        guest: &[&["mkdir", ".git"]],
        sh: "mkdir .git",
    },
    Case {
        what: "create .git as a file",
        bare: true,
        guest: &[&["write", ".git", "gitdir: /tmp/evil"]],
        sh: "echo 'gitdir: /tmp/evil' > .git",
    },
    Case {
        what: "create .ai where there is none",
        bare: true,
        guest: &[&["mkdir", ".ai"]],
        sh: "mkdir .ai",
    },
    Case {
        what: "rename a directory to .git",
        bare: true,
        guest: &[&["rename", "src", ".git"]],
        sh: "mv src .git",
    },
    Case {
        what: "symlink .ai to a directory",
        bare: true,
        guest: &[&["symlink", "src", ".ai"]],
        sh: "ln -s src .ai",
    },
];

/// Writes that must work on every backend.
const TWINS: &[Case] = &[
    Case {
        what: "write a file in a directory",
        bare: false,
        guest: &[&["write", "src/new.rs", "ok"]],
        sh: "echo ok > src/new.rs",
    },
    Case {
        what: "rewrite a top-level file in place",
        bare: false,
        guest: &[&["write", "README.md", "ok"]],
        sh: "echo ok > README.md",
    },
    Case {
        what: "make a directory in a directory",
        bare: false,
        guest: &[&["mkdir", "src/d"]],
        sh: "mkdir src/d",
    },
    Case {
        what: "write next to a nested repository",
        bare: false,
        guest: &[&["write", "vendor/lib/code.c", "ok"]],
        sh: "echo ok > vendor/lib/code.c",
    },
    Case {
        what: "rename inside a directory",
        bare: false,
        guest: &[&["rename", "src/lib.rs", "src/main.rs"]],
        sh: "mv src/lib.rs src/main.rs",
    },
];

fn wasm_steps(tree: &Tree, steps: &[&[&str]]) -> Vec<Outcome> {
    steps
        .iter()
        .map(|args| {
            run(Job::wasm(guest())
                .args(args.iter().copied())
                .worktree_mount(tree.mount()))
        })
        .collect()
}

fn native_step(tree: &Tree, sh: &str) -> Option<Outcome> {
    let sandbox = native()?;
    Some(run_native(
        sandbox,
        Job::native("/bin/sh")
            .args(["-c", sh])
            .worktree_mount(tree.mount()),
    ))
}

fn ok(out: &Outcome) -> bool {
    out.status == Status::Exited { code: 0 }
}

#[test]
fn protected_paths_hold_on_every_backend() {
    for case in ATTACKS {
        // wasm: every step of the attack; the worktree must be as it was.
        let tree = Tree::new(case.bare);
        let before = tree.snapshot();
        let outs = wasm_steps(&tree, case.guest);
        assert!(outs.iter().any(|o| !ok(o)), "wasm: {} succeeded", case.what);
        let after: Vec<_> = tree
            .snapshot()
            .into_iter()
            .filter(|(p, _)| !p.starts_with("src/"))
            .collect();
        let before_outside: Vec<_> = before
            .iter()
            .filter(|(p, _)| !p.starts_with("src/"))
            .cloned()
            .collect();
        assert_eq!(after, before_outside, "wasm: {} changed the worktree", case.what);

        // native: the same through a shell in bubblewrap.
        let tree = Tree::new(case.bare);
        let before = tree.snapshot();
        let Some(out) = native_step(&tree, &format!("{}; echo done", case.sh)) else {
            continue;
        };
        assert!(
            out.stdout.text().contains("done"),
            "native: {}: {}",
            case.what,
            out.stderr.text()
        );
        assert!(
            !out.stderr.text().is_empty(),
            "native: {} raised no error",
            case.what
        );
        let after: Vec<_> = tree
            .snapshot()
            .into_iter()
            .filter(|(p, _)| !p.starts_with("src/"))
            .collect();
        let before_outside: Vec<_> = before
            .iter()
            .filter(|(p, _)| !p.starts_with("src/"))
            .cloned()
            .collect();
        assert_eq!(
            after, before_outside,
            "native: {} changed the worktree",
            case.what
        );
    }
}

#[test]
fn ordinary_writes_work_on_every_backend() {
    for case in TWINS {
        let tree = Tree::new(case.bare);
        let outs = wasm_steps(&tree, case.guest);
        assert!(
            outs.iter().all(ok),
            "wasm: {}: {}",
            case.what,
            outs.last().unwrap().stderr.text()
        );
        let tree = Tree::new(case.bare);
        if let Some(out) = native_step(&tree, case.sh) {
            assert!(ok(&out), "native: {}: {}", case.what, out.stderr.text());
        }
    }
}

/// Where the backends differ, and why: Landlock only grants, so a wasm helper cannot create a
/// new entry at the top of a worktree whose `.git` is protected; bubblewrap re-binds the
/// protected paths read-only and can allow it.
#[test]
fn only_native_helpers_may_create_top_level_entries_next_to_protected_paths() {
    let tree = Tree::new(false);
    let out = run(Job::wasm(guest())
        .args(["write", "NEW.md", "x"])
        .worktree_mount(tree.mount()));
    assert!(
        !ok(&out),
        "Landlock cannot grant a directory without what is beneath it"
    );
    if let Some(out) = native_step(&tree, "echo x > NEW.md") {
        assert!(ok(&out), "{}", out.stderr.text());
    }
    // A read-only run of the same guest, and a writable one without protected paths, are
    // not confined at all.
    let out = run(Job::wasm(guest())
        .args(["write", "NEW2.md", "x"])
        .worktree(&tree.path, Access::ReadWrite));
    assert!(ok(&out), "{}", out.stderr.text());
}

/// Missing protected paths: the native backend covers each with an empty read-only directory
/// for the run and removes it afterwards.
#[test]
fn missing_protected_paths_leave_nothing_behind() {
    let tree = Tree::new(true);
    if let Some(out) = native_step(&tree, "ls -a") {
        assert!(ok(&out), "{}", out.stderr.text());
        assert!(!tree.path.join(".git").exists() && !tree.path.join(".ai").exists());
    }
    let _ = rt();
}

/// A protected path's name may not appear anew beneath a writable worktree: a helper that
/// makes `src/n/.git` (a repository of its own, with a hook that would run on the host the
/// next time git runs in `src/n`) or a `.git` file pointing at a planted directory finds it
/// removed after the run, on every backend, and the Outcome names it. What was there before,
/// nested repositories included, stays.
#[test]
fn a_new_nested_git_is_removed_after_the_run_on_every_backend() {
    let wasm_steps_list: &[&[&str]] = &[
        &["mkdir", "src/n"],
        // Each step is a run of its own: the `.git` made by one is gone before the next.
        &["mkdir", "src/n/.git"],
        &["write", "src/.git", "gitdir: n"],
        &["write", "src/n/kept.txt", "ok"],
    ];
    let check = |tree: &Tree, removed: &[String], backend: &str| {
        let mut removed = removed.to_vec();
        removed.sort();
        assert_eq!(
            removed,
            vec!["/work/src/.git".to_owned(), "/work/src/n/.git".to_owned()],
            "{backend}"
        );
        assert!(
            !tree.path.join("src/n/.git").exists() && !tree.path.join("src/.git").exists(),
            "{backend}"
        );
        assert!(
            tree.path.join("src/n/kept.txt").exists(),
            "{backend}: the helper's other files stay"
        );
        for kept in [
            "sub/.git/config",
            "vendor/lib/.git/config",
            "sub2/.git",
            ".git/config",
        ] {
            assert!(
                tree.path.join(kept).exists(),
                "{backend}: {kept} was there before"
            );
        }
    };
    let tree = Tree::new(false);
    let mut removed = Vec::new();
    for out in wasm_steps(&tree, wasm_steps_list) {
        assert!(ok(&out), "wasm: {}", out.stderr.text());
        removed.extend(out.removed);
    }
    check(&tree, &removed, "wasm");
    let tree = Tree::new(false);
    if let Some(out) = native_step(
        &tree,
        "mkdir -p src/n/.git/hooks && echo evil > src/n/.git/hooks/pre-commit && echo 'gitdir: n' > src/.git && echo ok > src/n/kept.txt",
    ) {
        assert!(ok(&out), "native: {}", out.stderr.text());
        check(&tree, &out.removed, "native");
    }
}

/// A directory mounted inside the worktree (the host's copy of upstream's `.ai/` over the
/// worktree's own) is what the helper sees there on every backend, by its absolute guest path
/// and by a relative one; the worktree's own directory is left as it was. A mount point that
/// is a symbolic link is refused where the backend would follow it (bwrap), and a link-free
/// twin runs.
#[test]
fn a_directory_mounted_inside_the_worktree_shadows_it_on_every_backend() {
    let tree = Tree::new(false);
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join("marker"), "copy\n").unwrap();
    let shadowed = |job: Job| {
        job.worktree_mount(Mount::new(&tree.path, "/work", Access::ReadOnly))
            .dir(Mount::new(copy.path(), "/work/.ai", Access::ReadOnly))
    };
    for path in [".ai/marker", "/work/.ai/marker"] {
        let out = run(shadowed(Job::wasm(guest()).args(["read", path])));
        assert_eq!(out.stdout.text(), "copy\n", "wasm {path}: {}", out.stderr.text());
    }
    let Some(sandbox) = native() else { return };
    for path in [".ai/marker", "/work/.ai/marker"] {
        let out = run_native(sandbox, shadowed(Job::native("/bin/cat").arg(path)));
        assert_eq!(
            out.stdout.text(),
            "copy\n",
            "native {path}: {}",
            out.stderr.text()
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.path.join(".ai/marker")).unwrap(),
        "upstream\n"
    );

    // The worktree's .ai made a link to elsewhere: bwrap would mount there instead.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::remove_dir_all(tree.path.join(".ai")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), tree.path.join(".ai")).unwrap();
    for link in [".ai", ".ai/deeper"] {
        let job = Job::native("/bin/cat")
            .arg("/work/.ai/marker")
            .worktree_mount(Mount::new(&tree.path, "/work", Access::ReadOnly))
            .dir(Mount::new(copy.path(), format!("/work/{link}"), Access::ReadOnly));
        let err = rt().block_on(sandbox.run(job)).expect_err("refused");
        assert!(err.to_string().contains("symbolic link"), "{link}: {err}");
    }
    let out = run(shadowed(Job::wasm(guest()).args(["read", "/work/.ai/marker"])));
    assert_eq!(out.stdout.text(), "copy\n", "{}", out.stderr.text());
}
