//! Install specs for the helper install hook (seed 001's `pip install <pkg>`): the only form
//! accepted is a package name, optional extras and an optional version specifier, e.g.
//! `ruff`, `mypy==1.11.2`, `black[jupyter]>=24,<25`. Everything that can make pip fetch or run
//! something other than a package from the configured index is refused: flags (`-e`, `-i`,
//! `--index-url`, `--extra-index-url`, `--find-links`, `--trusted-host`, any other), URLs and VCS
//! references, `@` direct references, local paths and archives, environment markers.
//!
//! [`install`] is `wrun install`: it creates or updates the policy's tool venv (`[install]`)
//! with pip and that hardened argument vector, outside any sandbox (pip needs the network, and
//! the specs are the operator's, never the pull request's), wheels only (no package's build code
//! runs on the host), and records what it installed in the audit log.

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

/// What pip takes for an archive file (its `ARCHIVE_EXTENSIONS`, and `.whl`).
const ARCHIVE_SUFFIXES: &[&str] = &[
    ".whl",
    ".zip",
    ".tar",
    ".tar.gz",
    ".tgz",
    ".tar.bz2",
    ".tbz",
    ".tar.xz",
    ".txz",
    ".tlz",
    ".tar.lz",
    ".tar.lzma",
    ".egg",
];

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
    // pip reads a requirement that ends like an archive as a file to install (a wheel whose
    // `.pth` then runs on the host, an sdist whose `setup.py` is built despite
    // `--only-binary`), whatever else it looks like.
    let lower = s.to_ascii_lowercase();
    let name_part = lower
        .split(['[', '=', '<', '>', '!', '~', ' ', ','])
        .next()
        .unwrap_or_default();
    if ARCHIVE_SUFFIXES
        .iter()
        .any(|suffix| name_part.ends_with(suffix) || lower.ends_with(suffix))
    {
        return refuse("archive files (.whl, .zip, .tar.gz, ...) are not allowed");
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

/// An installed distribution, as pip lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Package {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// What [`install`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Installed {
    /// The venv, on the host.
    pub venv: std::path::PathBuf,
    /// Where helpers see it.
    pub guest: String,
    /// Whether it was created (else updated).
    pub created: bool,
    /// The specs, as handed to pip.
    pub specs: Vec<String>,
    /// Every distribution in the venv afterwards.
    pub packages: Vec<Package>,
    /// Scripts whose `#!` line was made to name the venv's guest path.
    pub relocated: usize,
}

/// Why [`install`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The policy names no venv.
    #[error(
        "the policy installs nothing: give it an [install] section with a venv (bound by [native] ro_binds) and packages"
    )]
    Nothing,
    /// No Python to make the venv.
    #[error("python3 is not on PATH; install it (apt-get install python3-venv) or set [install] python")]
    NoPython,
    /// A step could not be started.
    #[error("cannot run {what}: {source}")]
    Spawn {
        /// The step.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A step failed.
    #[error("{what} failed ({status}): {output}")]
    Failed {
        /// The step.
        what: String,
        /// Its exit status.
        status: String,
        /// The end of what it printed.
        output: String,
    },
    /// The venv could not be read or changed.
    #[error("the venv {}: {reason}", path.display())]
    Venv {
        /// The venv.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// The audit log could not be written.
    #[error("cannot write the audit log {}: {source}", path.display())]
    Audit {
        /// The log.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Variables pip may need from wrun's environment (proxies); nothing else of it is passed.
const PASSED: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
];

/// Runs one step with a cleared environment; returns its stdout.
#[allow(clippy::disallowed_methods)] // the operator's install step: a fixed program and argv
fn step(what: &str, program: &std::path::Path, args: &[String]) -> Result<Vec<u8>, InstallError> {
    // An empty working directory: nothing pip or Python could take from wrun's own (a
    // requirement read as a relative path, a module shadowing one of the standard library's).
    let cwd = tempfile::tempdir().map_err(|source| InstallError::Spawn {
        what: what.to_owned(),
        source,
    })?;
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("PIP_NO_INPUT", "1")
        // No pip configuration file (system, user or site) may add an index or links.
        .env("PIP_CONFIG_FILE", "/dev/null")
        .stdin(std::process::Stdio::null());
    if let Some(home) = crate::ambient::var("HOME") {
        command.env("HOME", home);
    }
    for name in PASSED {
        if let Some(value) = crate::ambient::var(name) {
            command.env(name, value);
        }
    }
    let out = command.output().map_err(|source| InstallError::Spawn {
        what: what.to_owned(),
        source,
    })?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        let tail: String = text
            .trim()
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(InstallError::Failed {
            what: what.to_owned(),
            status: out.status.to_string(),
            output: tail,
        });
    }
    Ok(out.stdout)
}

/// The pip argument vector for `specs`: install or upgrade, wheels only, never asking, only
/// into a venv, the specs after `--` (each already validated: no option can hide in one).
pub fn pip_args(specs: &[InstallSpec]) -> Vec<String> {
    let mut args: Vec<String> = [
        "-I",
        "-m",
        "pip",
        "install",
        "--isolated",
        "--no-input",
        "--disable-pip-version-check",
        "--require-virtualenv",
        "--only-binary=:all:",
        "--upgrade",
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(specs.iter().map(InstallSpec::to_arg));
    args
}

/// `wrun install`: creates the policy's venv if missing, installs or upgrades its packages with
/// [`pip_args`], makes the venv's scripts name its guest path when the sandbox sees it
/// elsewhere, and appends what it installed to the policy's audit log.
///
/// # Security
/// Runs Python and pip on the host with wrun's authority and a cleared environment (proxies
/// passed); the specs come from the operator's policy and were validated when it was read.
pub fn install(policy: &crate::policy::Policy) -> Result<Installed, InstallError> {
    let venv = policy.install.venv.clone().ok_or(InstallError::Nothing)?;
    let specs: Vec<InstallSpec> = policy
        .install
        .packages
        .iter()
        .filter_map(|s| validate(s).ok())
        .collect();
    let guest = policy
        .guest_of(&venv)
        .unwrap_or_else(|| venv.display().to_string());
    let python = venv.join("bin/python");
    let created = !python.exists();
    if created {
        let base = match &policy.install.python {
            Some(p) => p.clone(),
            None => crate::ambient::which("python3").ok_or(InstallError::NoPython)?,
        };
        let args = vec![
            "-I".to_owned(),
            "-m".to_owned(),
            "venv".to_owned(),
            "--".to_owned(),
            venv.display().to_string(),
        ];
        step("python3 -m venv", &base, &args)?;
    }
    let result: Result<Installed, InstallError> = (|| {
        if !specs.is_empty() {
            step("pip install", &python, &pip_args(&specs))?;
        }
        let listed = step(
            "pip list",
            &python,
            &[
                "-I",
                "-m",
                "pip",
                "list",
                "--format=json",
                "--disable-pip-version-check",
            ]
            .map(str::to_owned),
        )?;
        let packages: Vec<Package> = serde_json::from_slice(&listed).map_err(|e| InstallError::Venv {
            path: venv.clone(),
            reason: format!("pip list printed something other than JSON: {e}"),
        })?;
        let relocated = relocate(&venv, &guest)?;
        Ok(Installed {
            venv: venv.clone(),
            guest: guest.clone(),
            created,
            specs: specs.iter().map(InstallSpec::to_arg).collect(),
            packages,
            relocated,
        })
    })();
    if let Some(log) = &policy.audit.log {
        let record = match &result {
            Ok(done) => serde_json::json!({
                "time": now(),
                "event": "install",
                "venv": done.venv,
                "guest": done.guest,
                "created": done.created,
                "specs": done.specs,
                "installed": done.packages,
            }),
            Err(e) => serde_json::json!({
                "time": now(),
                "event": "install",
                "venv": venv,
                "specs": specs.iter().map(InstallSpec::to_arg).collect::<Vec<_>>(),
                "error": e.to_string(),
            }),
        };
        crate::audit::append_value(log, &record).map_err(|source| InstallError::Audit {
            path: log.clone(),
            source,
        })?;
    }
    result
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0)
}

/// Makes the scripts in `venv/bin` whose `#!` line names the venv's host path name `guest`
/// instead (pip writes the host path; helpers run them where the sandbox binds the venv).
/// Returns how many it changed.
fn relocate(venv: &std::path::Path, guest: &str) -> Result<usize, InstallError> {
    use std::io::Read as _;
    let host = venv.display().to_string();
    if host == guest {
        return Ok(0);
    }
    let bin = venv.join("bin");
    let fail = |reason: String| InstallError::Venv {
        path: venv.to_owned(),
        reason,
    };
    let from = format!("#!{host}/bin/");
    let to = format!("#!{guest}/bin/");
    let mut changed = 0;
    let entries = std::fs::read_dir(&bin).map_err(|e| fail(format!("cannot list bin: {e}")))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 1 << 20 {
            continue;
        }
        let mut head = vec![0u8; from.len()];
        let matches = std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
            && head == from.as_bytes();
        if !matches {
            continue;
        }
        let text = std::fs::read(&path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        let mut out = to.as_bytes().to_vec();
        out.extend_from_slice(text.get(from.len()..).unwrap_or_default());
        let tmp = path.with_extension("wrun-tmp");
        std::fs::write(&tmp, &out)
            .and_then(|()| std::fs::set_permissions(&tmp, meta.permissions()))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| fail(format!("cannot rewrite {}: {e}", path.display())))?;
        changed += 1;
    }
    Ok(changed)
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
            "evil-1.0-py3-none-any.whl",
            "evil2.tar.gz",
            "x.zip",
            "x.whl[a]",
            "X.TGZ",
            "pkg.tar.bz2==1",
            "pkg.egg",
        ] {
            assert!(validate(spec).is_err(), "{spec:?} was accepted");
        }
        assert!(validate(&"a".repeat(300)).is_err());
    }

    #[test]
    fn pip_gets_wheels_only_no_prompts_and_the_specs_after_the_end_of_options() {
        let specs: Vec<InstallSpec> = ["ruff==0.6.9", "black[jupyter]>=24,<25"]
            .iter()
            .map(|s| validate(s).expect("valid"))
            .collect();
        let args = pip_args(&specs);
        let end = args.iter().position(|a| a == "--").expect("--");
        assert_eq!(&args[end + 1..], ["ruff==0.6.9", "black[jupyter]>=24,<25"]);
        for needed in ["-I", "--no-input", "--require-virtualenv", "--only-binary=:all:"] {
            assert!(args[..end].iter().any(|a| a == needed), "{needed}: {args:?}");
        }
        assert!(
            args[..end]
                .iter()
                .all(|a| a.starts_with('-') || ["pip", "install"].contains(&a.as_str()))
        );
    }

    #[test]
    fn scripts_naming_the_venvs_host_path_are_made_to_name_the_guest_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let venv = dir.path().join("venv");
        let bin = venv.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        let host = venv.display().to_string();
        std::fs::write(bin.join("tool"), format!("#!{host}/bin/python\nimport x\n")).expect("write");
        std::fs::write(bin.join("other"), "#!/usr/bin/python3\n").expect("write");
        std::fs::write(bin.join("activate"), format!("VIRTUAL_ENV={host}\n")).expect("write");
        assert_eq!(relocate(&venv, "/opt/tools").expect("relocate"), 1);
        assert_eq!(
            std::fs::read_to_string(bin.join("tool")).expect("read"),
            "#!/opt/tools/bin/python\nimport x\n"
        );
        assert_eq!(
            std::fs::read_to_string(bin.join("other")).expect("read"),
            "#!/usr/bin/python3\n"
        );
        assert_eq!(relocate(&venv, &host).expect("same path"), 0);
    }
}
