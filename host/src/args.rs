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
/// leave the worktree (the value may well be a path: `--config=FILE`).
fn bad_value(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("may not be empty")
    } else if value.starts_with('-') {
        Some("may not start with `-`")
    } else if value.starts_with('/') || value.starts_with('~') {
        Some("may not be an absolute path")
    } else if value.split(['/', '=', ',', ':']).any(|part| part == "..") {
        Some("may not name a parent directory (`..`)")
    } else {
        None
    }
}

/// Whether a file name is one an interpreter's magic open reads as a command or a mode: perl's
/// `<>` and two-argument `open` run `cmd|` and `|cmd`, and read `<f`, `>f`, `+<f` as modes,
/// after trimming spaces.
pub fn is_magic_name(name: &str) -> bool {
    name.contains('|')
        || name.starts_with(['<', '>', '+'])
        || name.starts_with(char::is_whitespace)
        || name.ends_with(char::is_whitespace)
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
        if is_magic_name(arg) {
            return Err(refuse(
                i,
                arg,
                "a file name with `|`, or starting with `<`, `>` or `+`, or with spaces at either end, is a command or a mode to perl's `<>` and two-argument `open`; rename the file",
            ));
        }
        // Resolving through the handle fails for anything that leads out, symlinks included.
        root.canonicalize(path)
            .map_err(|e| refuse(i, arg, &format!("does not resolve inside the worktree: {e}")))?;
        let normalized: std::path::PathBuf = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        paths.push(normalized.to_string_lossy().into_owned());
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
        for magic in ["sh p.sh|", "|sh", "<a", ">a", "+<a", " a", "a "] {
            std::fs::write(wt.join(magic), "").expect("write");
            assert!(
                check(&strings(&[magic]), &rules, &open(&wt)).is_err(),
                "{magic:?} passed"
            );
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
        ] {
            assert!(
                check(&strings(bad), &rules, &open(&wt)).is_err(),
                "{bad:?} passed"
            );
        }
    }
}
