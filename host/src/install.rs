//! Install specs for the helper install hook (seed 001's `pip install <pkg>`): the only form
//! accepted is a package name, optional extras and an optional version specifier, e.g.
//! `ruff`, `mypy==1.11.2`, `black[jupyter]>=24,<25`. Everything that can make pip fetch or run
//! something other than a package from the configured index is refused: flags (`-e`, `-i`,
//! `--index-url`, `--extra-index-url`, `--find-links`, `--trusted-host`, any other), URLs and VCS
//! references, `@` direct references, local paths and archives, environment markers.

/// A validated install spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallSpec {
    /// The distribution name as written.
    pub name: String,
    /// Extras, as written.
    pub extras: Vec<String>,
    /// The version specifier without spaces (`""` for none), e.g. `>=24,<25`.
    pub specifier: String,
}

impl InstallSpec {
    /// The single argument to hand to the installer after `--`.
    pub fn to_arg(&self) -> String {
        let extras = if self.extras.is_empty() {
            String::new()
        } else {
            format!("[{}]", self.extras.join(","))
        };
        format!("{}{extras}{}", self.name, self.specifier)
    }
}

/// Why a spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "install spec {spec:?} refused: {reason}; write a package name with optional [extras] and version, e.g. mypy==1.11.2"
)]
pub struct InstallSpecError {
    /// The spec as given.
    pub spec: String,
    /// Why.
    pub reason: &'static str,
}

/// Longest spec accepted: names are short, and a long spec is an attack.
const MAX_LEN: usize = 200;

const OPERATORS: &[&str] = &["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

/// Validates one install spec.
pub fn validate(spec: &str) -> Result<InstallSpec, InstallSpecError> {
    let refuse = |reason| {
        Err(InstallSpecError {
            spec: spec.to_owned(),
            reason,
        })
    };
    let s = spec.trim();
    if s.is_empty() {
        return refuse("it is empty");
    }
    if s.len() > MAX_LEN {
        return refuse("it is too long");
    }
    if s.starts_with('-') {
        return refuse("options (-e, -i, --index-url, --find-links, ...) are not allowed");
    }
    if s.contains("://") || s.contains('@') || s.to_ascii_lowercase().starts_with("git+") {
        return refuse("URLs, VCS and direct (@) references are not allowed");
    }
    if s.contains(['/', '\\']) || s.starts_with(['.', '~']) {
        return refuse("local paths and archives are not allowed");
    }
    if s.contains(';') {
        return refuse("environment markers are not allowed");
    }
    if s.contains(|c: char| c.is_control()) {
        return refuse("control characters are not allowed");
    }
    let name_end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    let (name, mut rest) = s.split_at(name_end);
    if !is_name(name) {
        return refuse("it does not start with a valid package name");
    }
    let mut extras = Vec::new();
    if let Some(after) = rest.strip_prefix('[') {
        let Some((inner, tail)) = after.split_once(']') else {
            return refuse("an extras list is not closed");
        };
        for extra in inner.split(',').map(str::trim) {
            if !is_name(extra) {
                return refuse("an extra is not a valid name");
            }
            extras.push(extra.to_owned());
        }
        rest = tail;
    }
    let mut specifier = String::new();
    let rest = rest.trim();
    if !rest.is_empty() {
        for (i, clause) in rest.split(',').map(str::trim).enumerate() {
            let Some(op) = OPERATORS.iter().find(|op| clause.starts_with(**op)) else {
                return refuse("a version clause does not start with ==, !=, <=, >=, <, >, ~= or ===");
            };
            let version = clause[op.len()..].trim();
            let valid = !version.is_empty()
                && version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '-' | '_'));
            if !valid {
                return refuse("a version is not valid");
            }
            if i > 0 {
                specifier.push(',');
            }
            specifier.push_str(op);
            specifier.push_str(version);
        }
    }
    Ok(InstallSpec {
        name: name.to_owned(),
        extras,
        specifier,
    })
}

/// A PEP 508 name: letters, digits, `.`, `_`, `-`, starting and ending with a letter or digit.
fn is_name(s: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    ends_ok(s.chars().next())
        && ends_ok(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_extras_and_versions_pass() {
        for (spec, arg) in [
            ("ruff", "ruff"),
            ("mypy==1.11.2", "mypy==1.11.2"),
            ("black[jupyter] >= 24, < 25", "black[jupyter]>=24,<25"),
            (
                "types-requests~=2.31.0.20240406",
                "types-requests~=2.31.0.20240406",
            ),
            ("zope.interface!=5.*", "zope.interface!=5.*"),
            ("pkg[a, b]", "pkg[a,b]"),
        ] {
            assert_eq!(validate(spec).map(|s| s.to_arg()), Ok(arg.to_owned()), "{spec}");
        }
    }

    #[test]
    fn everything_that_fetches_or_runs_something_else_is_refused() {
        for spec in [
            "",
            "-e .",
            "-i https://evil.example/simple ruff",
            "--index-url=https://evil.example/simple",
            "--extra-index-url https://x",
            "--find-links /tmp/wheels",
            "--trusted-host evil.example",
            "--pre",
            "git+https://github.com/x/y",
            "https://evil.example/pkg.tar.gz",
            "pkg @ https://evil.example/pkg.whl",
            "pkg@git+https://x",
            "./local",
            "../x",
            "/tmp/pkg.whl",
            "~/pkg",
            "pkg.whl/..",
            "C:\\pkg",
            "ruff; python_version > '3'",
            "ruff ruff",
            "ruff==",
            "ruff==1.0 --index-url x",
            "ruff[",
            "-ruff",
            "ruff\n--index-url=x",
        ] {
            assert!(validate(spec).is_err(), "{spec:?} was accepted");
        }
        assert!(validate(&"a".repeat(300)).is_err());
    }
}
