//! Arguments that come from a language model (layer 4): each becomes exactly one argv entry,
//! never re-split and never through a shell, and
//!
//! - a value starting with `-` is refused unless the helper's definition declares it as a flag
//!   (no option injection: `--output=/etc/x`, `-e`, `--config`); a flag declared with a trailing
//!   `=` (`-S=`, `--severity=`) takes a value, given as the next argument or after `=` (long
//!   flags), which may not be empty, start with `-` or `~`, be absolute or contain a `..` part;
//! - every other value is a path that must stay inside the worktree: no absolute paths, no `..`,
//!   and it must resolve (symlinks followed, through a cap-std handle) to something inside;
//!   paths are passed after `--`, so a file named `-rf` is still a file;
//! - NUL and newlines are refused, and so are too many or too long arguments.

use std::path::{Component, Path};

/// What the helper's definition allows a model to pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgRules {
    /// Flags the helper accepts from a model, exactly as written (`--fix`, `-v`); with a
    /// trailing `=`, a flag that takes a value (`-S=`, `--severity=`).
    pub flags: Vec<String>,
    /// At most this many arguments.
    pub max_count: usize,
    /// At most this many bytes per argument.
    pub max_len: usize,
}

impl Default for ArgRules {
    /// No flags, 64 arguments of at most 4096 bytes.
    fn default() -> Self {
        Self {
            flags: Vec::new(),
            max_count: 64,
            max_len: 4096,
        }
    }
}

/// Why a flag's value is refused: it would be read as an option, or, read as a path, it would
/// leave the worktree (the value may well be a path: `--config=FILE`), or, read as a file name
/// by perl, it would run a command. A value may be a list (`a.py,b.py`, `x:y`, `k=v`): each
/// part is held to the same rules.
fn bad_value(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("may not be empty")
    } else if value.starts_with('-') {
        Some("may not start with `-`")
    } else if value.starts_with('/') || value.starts_with('~') {
        Some("may not be an absolute path")
    } else if value.split(['/', '=', ',', ':']).any(|part| part == "..") {
        Some("may not name a parent directory (`..`)")
    } else if is_magic_name(value) || value.split(['=', ',', ':', ';']).any(is_magic_name) {
        Some(MAGIC_REASON)
    } else {
        None
    }
}

/// What a refusal of a magic name says.
pub const MAGIC_REASON: &str = "is a command or a mode to perl's `<>` and two-argument `open` (it starts with `|`, `<`, `>`, `+<` or `+>`, ends with `|`, is `-`, or has spaces at either end); rename the file or pass another value";

/// Whether a file name is one an interpreter's magic open reads as a command or a mode rather
/// than as a name: perl's `<>` and two-argument `open` trim spaces, then run `cmd|` and `|cmd`,
/// read `<f`, `>f`, `>>f`, `+<f`, `+>f` (and `>&2`, `<&=3`) as modes and `-` as a standard
/// stream. Names such as `+page.svelte`, `a|b` or `a b` are names.
pub fn is_magic_name(name: &str) -> bool {
    let trimmed = name.trim_matches(|c: char| c.is_whitespace());
    trimmed.len() != name.len()
        || trimmed.is_empty()
        || trimmed == "-"
        || trimmed.starts_with(['|', '<', '>'])
        || trimmed.starts_with("+<")
        || trimmed.starts_with("+>")
        || trimmed.ends_with('|')
}

/// The first name in `path` (a `/`-separated path or one component) that [`is_magic_name`].
pub fn magic_component(path: &str) -> Option<&str> {
    if is_magic_name(path) {
        return Some(path);
    }
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .find(|c| is_magic_name(c))
}

/// Why a model-given argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument {index} ({arg:?}) refused: {reason}")]
pub struct ArgError {
    /// 0-based position.
    pub index: usize,
    /// The argument, shortened for display.
    pub arg: String,
    /// Why.
    pub reason: String,
}

/// Checks model-given arguments and returns the argv tail: declared flags first, then `--`,
/// then the paths (each normalized, relative to the worktree).
///
/// # Security
/// Looks paths up in the worktree only through a capability handle opened at its root.
pub fn check(
    args: &[String],
    rules: &ArgRules,
    worktree: &crate::worktree::Worktree,
) -> Result<Vec<String>, ArgError> {
    let refuse = |index: usize, arg: &str, reason: &str| ArgError {
        index,
        arg: arg.chars().take(80).collect(),
        reason: reason.to_owned(),
    };
    if args.len() > rules.max_count {
        return Err(refuse(
            rules.max_count,
            "",
            &format!("more than {} arguments", rules.max_count),
        ));
    }
    let root = worktree.dir();
    let mut flags = Vec::new();
    let mut paths = Vec::new();
    let valued: Vec<&str> = rules.flags.iter().filter_map(|f| f.strip_suffix('=')).collect();
    let plain: Vec<&str> = rules
        .flags
        .iter()
        .filter(|f| !f.ends_with('='))
        .map(String::as_str)
        .collect();
    let mut expecting: Option<&str> = None;
    for (i, arg) in args.iter().enumerate() {
        if arg.len() > rules.max_len {
            return Err(refuse(i, arg, &format!("longer than {} bytes", rules.max_len)));
        }
        if arg.contains(['\0', '\n', '\r']) {
            return Err(refuse(i, arg, "contains NUL or a line break"));
        }
        if let Some(flag) = expecting.take() {
            if let Some(why) = bad_value(arg) {
                return Err(refuse(i, arg, &format!("the value of {flag} {why}")));
            }
            flags.push(arg.clone());
            continue;
        }
        if arg.starts_with('-') {
            if plain.contains(&arg.as_str()) {
                flags.push(arg.clone());
                continue;
            }
            if let Some(flag) = valued.iter().find(|f| **f == arg.as_str()) {
                flags.push(arg.clone());
                expecting = Some(flag);
                continue;
            }
            if let Some((flag, value)) = arg.split_once('=')
                && flag.starts_with("--")
                && valued.contains(&flag)
            {
                if let Some(why) = bad_value(value) {
                    return Err(refuse(i, arg, &format!("the value of {flag} {why}")));
                }
                flags.push(arg.clone());
                continue;
            }
            return Err(refuse(
                i,
                arg,
                "starts with `-` but is not a flag the helper's definition declares",
            ));
        }
        let path = Path::new(arg);
        if arg.is_empty()
            || path.is_absolute()
            || path.components().any(|c| matches!(c, Component::ParentDir))
        {
            return Err(refuse(
                i,
                arg,
                "a path must be relative to the worktree, without `..`",
            ));
        }
        if magic_component(arg).is_some() {
            return Err(refuse(i, arg, &format!("a path that {MAGIC_REASON}")));
        }
        // Resolving through the handle fails for anything that leads out, symlinks included.
        root.canonicalize(path)
            .map_err(|e| refuse(i, arg, &format!("does not resolve inside the worktree: {e}")))?;
        let normalized: std::path::PathBuf = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        // `.` (or `./.`) is the worktree itself, never an empty argument.
        let normalized = normalized.to_string_lossy();
        paths.push(if normalized.is_empty() {
            ".".to_owned()
        } else {
            normalized.into_owned()
        });
    }
    if let Some(flag) = expecting {
        return Err(refuse(args.len(), "", &format!("{flag} needs a value")));
    }
    let mut out = flags;
    out.push("--".to_owned());
    out.extend(paths);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worktree at `path`, opened.
    fn open(path: &std::path::Path) -> crate::worktree::Worktree {
        crate::worktree::Worktree::open(path, cap_std::ambient_authority()).expect("open")
    }

    fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path().join("wt");
        std::fs::create_dir_all(wt.join("src")).expect("mkdir");
        std::fs::write(wt.join("src/a.py"), "").expect("write");
        std::fs::write(wt.join("-rf"), "").expect("write");
        std::fs::write(tmp.path().join("secret"), "").expect("write");
        std::os::unix::fs::symlink("../secret", wt.join("link")).expect("symlink");
        (tmp, wt)
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn declared_flags_and_inside_paths_pass_with_paths_after_dashdash() {
        let (_tmp, wt) = fixture();
        let rules = ArgRules {
            flags: strings(&["--fix"]),
            ..ArgRules::default()
        };
        let out = check(&strings(&["./src/a.py", "--fix", "src"]), &rules, &open(&wt)).expect("valid");
        assert_eq!(out, strings(&["--fix", "--", "src/a.py", "src"]));
    }

    #[test]
    fn injection_escapes_and_junk_are_refused() {
        let (_tmp, wt) = fixture();
        let rules = ArgRules::default();
        for bad in [
            "--output=/etc/passwd",
            "-e",
            "-rf",
            "--fix",
            "/etc/passwd",
            "../secret",
            "src/../../secret",
            "link",
            "missing.py",
            "a\nb",
            "a\0b",
            "",
        ] {
            assert!(
                check(&strings(&[bad]), &rules, &open(&wt)).is_err(),
                "{bad:?} passed"
            );
        }
        let long = "a".repeat(5000);
        assert!(check(&[long], &rules, &open(&wt)).is_err());
        let many: Vec<String> = (0..65).map(|_| "src".to_owned()).collect();
        assert!(check(&many, &rules, &open(&wt)).is_err());
        // Names perl's magic open reads as commands or modes, even when the file exists.
        for magic in [
            "sh p.sh|", "|sh", "<a", ">a", ">>a", "+<a", "+>a", " a", "a ", "\ta", "-", " |x", "x| ",
        ] {
            std::fs::write(wt.join(magic), "").expect("write");
            assert!(
                check(&strings(&[magic]), &rules, &open(&wt)).is_err(),
                "{magic:?} passed"
            );
        }
        // ... in any component of a path.
        std::fs::create_dir(wt.join("cmd|")).expect("mkdir");
        std::fs::write(wt.join("cmd|/f"), "").expect("write");
        assert!(check(&strings(&["cmd|/f"]), &rules, &open(&wt)).is_err());
    }

    #[test]
    fn names_perl_reads_as_names_pass_and_dot_is_the_worktree() {
        let (_tmp, wt) = fixture();
        let rules = ArgRules::default();
        // SvelteKit's routes, a pipe inside a name, inner spaces: perl opens them as files.
        for name in ["+page.svelte", "+layout.ts", "a|b", "a b", "x-", "a<b", "a>"] {
            std::fs::write(wt.join(name), "").expect("write");
            let out = check(&strings(&[name]), &rules, &open(&wt)).expect(name);
            assert_eq!(out, strings(&["--", name]));
        }
        for dot in [".", "./", "./."] {
            let out = check(&strings(&[dot]), &rules, &open(&wt)).expect(dot);
            assert_eq!(out, strings(&["--", "."]), "{dot:?}");
        }
    }

    #[test]
    fn is_magic_name_matches_perls_two_argument_open() {
        for magic in [
            "|", "a|", "|a", "<a", "> a", ">&2", "<&=3", "+<a", "+>a", "-", " -", "a\n",
        ] {
            assert!(is_magic_name(magic), "{magic:?}");
        }
        for name in ["a", "+a", "a+", "a|b", "a<", "--x", "-a", "a-b", "."] {
            assert!(!is_magic_name(name), "{name:?}");
        }
    }

    #[test]
    fn a_flag_declared_with_a_value_takes_one_that_is_not_an_option() {
        let (_tmp, wt) = fixture();
        let rules = ArgRules {
            flags: strings(&["-S=", "--severity=", "--fix"]),
            ..ArgRules::default()
        };
        let out = check(
            &strings(&["-S", "warning", "--severity=error", "src"]),
            &rules,
            &open(&wt),
        )
        .expect("valid");
        assert_eq!(out, strings(&["-S", "warning", "--severity=error", "--", "src"]));
        // The must-run twins: values with a pipe or a plus inside pass.
        let out = check(&strings(&["-S", "a|b", "--severity=+x"]), &rules, &open(&wt)).expect("valid");
        assert_eq!(out, strings(&["-S", "a|b", "--severity=+x", "--"]));
        for bad in [
            &["-S"][..],
            &["-S", "--fix"],
            &["-S", "-x"],
            &["--severity="],
            &["--severity=-x"],
            &["-S=warning"],
            &["--fix=1"],
            &["-S", "/etc/passwd"],
            &["--severity=../x"],
            &["-S", "a/../../b"],
            &["-S", "~root"],
            // Values perl would open as commands or modes, whole or as a part of a list.
            &["--severity=echo HI >&2|"],
            &["-S", "echo HI >&2|"],
            &["-S", "|id"],
            &["--severity=<x"],
            &["--severity=a.py,id|"],
            &["--severity=k=|id"],
            &["-S", "a: b|"],
            &["-S", " x"],
        ] {
            assert!(
                check(&strings(bad), &rules, &open(&wt)).is_err(),
                "{bad:?} passed"
            );
        }
    }
}
