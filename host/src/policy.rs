//! The operator's policy file: TOML, parsed strictly and validated into a [`Policy`] before
//! anything runs. An unknown key, a zero or negative limit, a default above its ceiling or a
//! ceiling above wrun's own hard ceilings is an error naming the file and line; nothing is
//! silently clamped. A helper definition may set any limit up to the policy's ceilings
//! ([`Policy::limits_for`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wrun_runtime::{LimitError, Limits, SandboxMode};

/// A policy file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or wrong types.
    #[error("policy {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is out of range.
    #[error("policy {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A helper definition asked for more than the policy allows.
    #[error(
        "{what} {asked} is above the policy's ceiling of {ceiling}; ask for less or have the operator raise the ceiling"
    )]
    AboveCeiling {
        /// Which limit.
        what: &'static str,
        /// What was asked.
        asked: String,
        /// The ceiling.
        ceiling: String,
    },
    /// A helper definition asked for zero or for a malformed value.
    #[error("{what}: {message}")]
    BadRequest {
        /// Which limit.
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// Limits as written in a file: every field optional, units in strings (`"30s"`, `"256MiB"`).
pub use wrun_runtime::LimitsSpec;

/// A policy file as written (see `policies/*.toml`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Format version: 1.
    version: u32,
    /// Native sandbox mode: `require`, `auto` or `off`.
    #[schemars(with = "SandboxModeSchema")]
    sandbox: SandboxMode,
    #[serde(default)]
    limits: LimitsSpec,
    #[serde(default)]
    ceilings: LimitsSpec,
    #[serde(default)]
    native: NativeSection,
    #[serde(default)]
    env: EnvSection,
    #[serde(default)]
    shell: ShellSection,
    #[serde(default)]
    templates: TemplatesSection,
    #[serde(default)]
    audit: AuditSection,
    #[serde(default)]
    upstream: UpstreamSection,
    #[serde(default)]
    install: InstallSection,
}

/// The tools `wrun install` puts in a venv the native sandbox binds (seed 001's install hook:
/// pip, outside any sandbox, at the repository owner's trust; never the pull request's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallSection {
    /// The venv `wrun install` creates or updates: an absolute host path inside one of
    /// `[native] ro_binds` (so helpers see it), whose `bin` `[native] path` names.
    pub venv: Option<PathBuf>,
    /// What to install: a package name, optional `[extras]` and version (`ruff==0.6.9`). No
    /// options, URLs, VCS references, `@` references, paths, archives or markers.
    #[serde(default)]
    pub packages: Vec<String>,
    /// The Python that makes the venv (absolute). Default: `python3` on wrun's PATH.
    pub python: Option<PathBuf>,
}

/// Where helper definitions come from (layer 1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    /// The upstream repository's URL (https, ssh, git or file, or an absolute path). When set,
    /// the worktree's remotes are not consulted.
    pub url: Option<String>,
    /// URLs a worktree's remote (named by `--base REMOTE/BRANCH`) may have to be taken as the
    /// upstream, when `url` is not set. Compared up to a trailing `/` or `.git`.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// Native helpers: where bare commands are found and what is bound read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NativeSection {
    /// Directories searched for bare command names, in order (absolute).
    #[serde(default)]
    pub path: Vec<PathBuf>,
    /// Host directories (or files) bound read-only into native helpers' sandbox: `HOST` at
    /// the same path, or `HOST::GUEST` at a guest path of its own (a tools venv kept under the
    /// sandbox's `/work`, say: `/work/ci/venv::/opt/venv`). A guest path may not lie in the
    /// worktree's place (`/work`) or in the sandbox's own directories (`/usr`, `/proc`, `/tmp`
    /// itself …). `[native] path` names guest paths.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub ro_binds: Vec<RoBind>,
}

/// One of `[native] ro_binds`: a host path and where the sandbox sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct RoBind {
    /// The host path.
    pub host: PathBuf,
    /// The guest path (the host path when the entry names none).
    pub guest: String,
    /// Whether the entry named the guest path.
    pub explicit: bool,
}

impl From<String> for RoBind {
    fn from(spec: String) -> Self {
        match spec.split_once("::") {
            Some((host, guest)) => Self {
                host: PathBuf::from(host),
                guest: guest.to_owned(),
                explicit: true,
            },
            None => Self {
                guest: spec.clone(),
                host: PathBuf::from(spec),
                explicit: false,
            },
        }
    }
}

impl From<RoBind> for String {
    fn from(bind: RoBind) -> Self {
        if bind.explicit {
            format!("{}::{}", bind.host.display(), bind.guest)
        } else {
            bind.host.display().to_string()
        }
    }
}

impl RoBind {
    /// Why the sandbox cannot take this bind, with what to write instead; `None` if it can.
    /// Checks the text only (the host path need not exist here: see [`RoBind::host_problem`]).
    pub fn problem(&self) -> Option<String> {
        let spec = String::from(self.clone());
        let name = self
            .host
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "tools".to_owned());
        let elsewhere = format!("{}::/opt/{name}", self.host.display());
        if !self.host.is_absolute()
            || self
                .host
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Some(format!(
                "ro_binds {spec:?}: the host path must be absolute, without `..`"
            ));
        }
        let work = wrun_runtime::job::DEFAULT_WORKTREE_GUEST;
        let guest = self.guest.trim_end_matches('/');
        if guest == work || guest.starts_with(&format!("{work}/")) {
            return Some(if self.explicit {
                format!(
                    "ro_binds {spec:?}: the guest path {guest} lies in the worktree's place in the sandbox ({work}), where it would cover or land among the pull request's files; choose a free guest path, such as /opt/{name}"
                )
            } else {
                format!(
                    "ro_binds {spec:?}: bound at the same path, it would lie in the worktree's place in the sandbox ({work}); give it a guest path of its own: {elsewhere:?} (and name the guest path in [native] path)"
                )
            });
        }
        if let Some(problem) = wrun_runtime::native::guest_path_problem(&self.guest) {
            return Some(format!(
                "ro_binds {spec:?}: {problem}; choose a free guest path, such as {elsewhere:?}"
            ));
        }
        None
    }

    /// Why the host path cannot be bound on this machine (missing, not a directory or file).
    pub fn host_problem(&self) -> Option<String> {
        match std::fs::metadata(&self.host) {
            Ok(m) if m.is_dir() || m.is_file() => None,
            Ok(_) => Some(format!(
                "ro_binds: {} is not a directory or a regular file",
                self.host.display()
            )),
            Err(e) => Some(format!(
                "ro_binds: {} cannot be bound: {e}; create it (wrun install makes a policy's tool venv) or remove the entry",
                self.host.display()
            )),
        }
    }
}

/// The environment helpers get.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvSection {
    /// Names passed through from wrun's environment when set.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Fixed values, set by the policy (loader variables may only be set here).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

/// Shell-string helpers: the allowlist of commands they may run is wrun's table
/// (`wrun_host::shell::table`), which a policy may only narrow, plus commands the policy adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellSection {
    /// Commands of wrun's table that shell helpers may not run under this policy.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Commands added to the table, each with the options it may take; or, under the name of a
    /// command of wrun's table, the subset of its options allowed.
    #[serde(default)]
    pub commands: Vec<crate::shell::CommandSpec>,
}

/// Template variables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplatesSection {
    /// Keys whose values may be interpolated into a helper's arguments.
    #[serde(default)]
    pub safe_keys: Vec<String>,
}

/// The audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    /// A file that gets one JSON line per run.
    pub log: Option<PathBuf>,
}

/// The sandbox mode as the schema describes it.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
enum SandboxModeSchema {
    Require,
    Auto,
    Off,
}

/// The JSON schema of policy files, as checked in at `policies/policy.schema.json`.
pub fn schema() -> String {
    let mut text = serde_json::to_string_pretty(&schemars::schema_for!(PolicyFile)).unwrap_or_default();
    text.push('\n');
    text
}

/// wrun's built-in policies (the files under `policies/`): `default` for `wrun helper` and
/// `wrun explain`, `dev` for `wrun run`, `strict` for hosts that review forks.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("dev", include_str!("../../policies/dev.toml")),
    ("strict", include_str!("../../policies/strict.toml")),
];

/// How strict a sandbox mode is: `off` < `auto` < `require`.
fn strictness(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::Off => 0,
        SandboxMode::Auto => 1,
        _ => 2,
    }
}

/// A validated policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Where it came from.
    pub source: PathBuf,
    /// The native sandbox mode.
    pub sandbox: SandboxMode,
    /// Limits a helper gets when its definition sets none.
    pub defaults: Limits,
    /// The most a definition may ask for.
    pub ceilings: Limits,
    /// Native helpers.
    pub native: NativeSection,
    /// Environment.
    pub env: EnvSection,
    /// Shell helpers.
    pub shell: ShellSection,
    /// The shell allowlist: wrun's table with the policy's changes.
    #[serde(skip)]
    pub shell_rules: crate::shell::Rules,
    /// Template variables.
    pub templates: TemplatesSection,
    /// Audit log.
    pub audit: AuditSection,
    /// Upstream repository.
    pub upstream: UpstreamSection,
    /// Tools `wrun install` installs.
    pub install: InstallSection,
}

impl Policy {
    /// One of wrun's built-in policies ([`BUILTIN`]), by name.
    pub fn builtin(name: &str) -> Result<Self, PolicyError> {
        let text = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| *text)
            .ok_or_else(|| PolicyError::Invalid {
                path: PathBuf::from(format!("<built-in {name}>")),
                message: "no built-in policy has this name".to_owned(),
            })?;
        Self::parse(&PathBuf::from(format!("<built-in policies/{name}.toml>")), text)
    }

    /// The sandbox mode a run gets: the policy's, made stricter by each of `asked`
    /// (`HELPER_SANDBOX`, a command-line flag) but never looser. Also returns the first asked
    /// mode that was looser than the policy's, which did not hold.
    pub fn sandbox_mode(&self, asked: &[SandboxMode]) -> (SandboxMode, Option<SandboxMode>) {
        let mut mode = self.sandbox;
        let mut looser = None;
        for &m in asked {
            if strictness(m) < strictness(self.sandbox) {
                looser.get_or_insert(m);
            } else if strictness(m) > strictness(mode) {
                mode = m;
            }
        }
        (mode, looser)
    }

    /// Where native helpers see host path `host`: through the `[native] ro_binds` entry whose
    /// host path holds it (the longest), if any.
    pub fn guest_of(&self, host: &Path) -> Option<String> {
        self.native
            .ro_binds
            .iter()
            .filter_map(|b| {
                let rel = host.strip_prefix(&b.host).ok()?;
                let guest = if rel.as_os_str().is_empty() {
                    b.guest.clone()
                } else {
                    Path::new(&b.guest).join(rel).display().to_string()
                };
                Some((b.host.as_os_str().len(), guest))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, guest)| guest)
    }

    /// Where a guest path of native helpers' sandbox lies on the host: through the
    /// `[native] ro_binds` whose guest path holds it (the longest), else the same path.
    pub fn host_of(&self, guest: &Path) -> PathBuf {
        self.native
            .ro_binds
            .iter()
            .filter_map(|b| {
                let rel = guest.strip_prefix(&b.guest).ok()?;
                Some((b.guest.len(), b.host.join(rel)))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, host)| host)
            .unwrap_or_else(|| guest.to_owned())
    }

    /// Reads and validates a policy file.
    ///
    /// # Security
    /// Reads `path` with wrun's authority; policy files are the operator's, never the worktree's.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates policy text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            path: path.to_owned(),
            message,
        };
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        if file.version != 1 {
            return Err(invalid(format!(
                "version {} is not supported; this wrun reads version 1",
                file.version
            )));
        }
        let ceilings = file.ceilings.apply(&Limits::ceilings());
        ceilings
            .validate()
            .map_err(|e| invalid(format!("[ceilings] {e}")))?;
        let defaults = file.limits.apply(&Limits::default());
        defaults
            .validate()
            .map_err(|e| invalid(format!("[limits] {e}")))?;
        defaults
            .check_within(&ceilings)
            .map_err(|e| invalid(format!("[limits] {e}")))?;
        for bind in &file.native.ro_binds {
            if let Some(problem) = bind.problem() {
                return Err(invalid(format!("[native] {problem}")));
            }
        }
        for spec in &file.install.packages {
            crate::install::validate(spec).map_err(|e| invalid(format!("[install] {e}")))?;
        }
        if let Some(python) = &file.install.python
            && !python.is_absolute()
        {
            return Err(invalid(format!(
                "[install] python {} must be an absolute path",
                python.display()
            )));
        }
        match &file.install.venv {
            Some(venv) if !venv.is_absolute() => {
                return Err(invalid(format!(
                    "[install] venv {} must be an absolute path",
                    venv.display()
                )));
            }
            Some(venv) if !file.native.ro_binds.iter().any(|b| venv.starts_with(&b.host)) => {
                return Err(invalid(format!(
                    "[install] venv {} is not bound into the sandbox, so helpers would not see it; add it to [native] ro_binds (ro_binds = [\"{}\"], or \"{}::/opt/tools\" if it lies under /work or /tmp) and its bin to [native] path",
                    venv.display(),
                    venv.display(),
                    venv.display()
                )));
            }
            None if !file.install.packages.is_empty() => {
                return Err(invalid(
                    "[install] packages need a venv to go in: set [install] venv".to_owned(),
                ));
            }
            _ => {}
        }
        for dir in &file.native.path {
            if !dir.is_absolute() {
                return Err(invalid(format!(
                    "[native] {} must be an absolute path",
                    dir.display()
                )));
            }
        }
        for name in file.env.allow.iter().chain(file.env.set.keys()) {
            if wrun_runtime::env::is_secret_name(name) {
                return Err(invalid(format!(
                    "[env] {name} is a credential name; wrun never passes credentials to helpers"
                )));
            }
        }
        for name in &file.env.allow {
            if wrun_runtime::env::is_policy_only_name(name) {
                return Err(invalid(format!(
                    "[env] allow = {name:?}: loader and interpreter variables cannot pass through from the host; set a fixed value in [env.set]"
                )));
            }
        }
        let table =
            crate::shell::Table::with_policy(&file.shell.remove, &file.shell.commands).map_err(invalid)?;
        Ok(Self {
            shell_rules: crate::shell::Rules { table },
            source: path.to_owned(),
            sandbox: file.sandbox,
            defaults,
            ceilings,
            native: file.native,
            env: file.env,
            shell: file.shell,
            templates: file.templates,
            audit: file.audit,
            upstream: file.upstream,
            install: file.install,
        })
    }

    /// The environment a helper gets (layer 5): each allowlisted name that `lookup` finds in
    /// wrun's environment, passed as the job's (so the runtime's guard still refuses loader
    /// variables from it), then the policy's fixed values, marked as the policy's. The runtime
    /// drops credential names from either.
    pub fn env_for(&self, lookup: impl Fn(&str) -> Option<String>) -> Vec<wrun_runtime::env::EnvVar> {
        use wrun_runtime::env::{EnvOrigin, EnvVar};
        let passed = self.env.allow.iter().filter_map(|name| {
            lookup(name).map(|value| EnvVar {
                name: name.clone(),
                value,
                origin: EnvOrigin::Job,
            })
        });
        let fixed = self.env.set.iter().map(|(name, value)| EnvVar {
            name: name.clone(),
            value: value.clone(),
            origin: EnvOrigin::Policy,
        });
        passed.chain(fixed).collect()
    }

    /// The limits for a helper whose definition asks for `asked`: the policy's defaults with the
    /// definition's values, each of which must be non-zero and within the ceilings.
    pub fn limits_for(&self, asked: &LimitsSpec) -> Result<Limits, PolicyError> {
        let limits = asked.apply(&self.defaults);
        // The policy's ceilings first: they are at most wrun's, so a value above both is
        // named against the one that decides.
        limits.check_within(&self.ceilings).map_err(|e| match e {
            LimitError::AboveCeiling { name, value, ceiling } => PolicyError::AboveCeiling {
                what: name,
                asked: value,
                ceiling,
            },
            other => PolicyError::BadRequest {
                what: "limits",
                message: other.to_string(),
            },
        })?;
        limits.validate().map_err(|e| PolicyError::BadRequest {
            what: "limits",
            message: e.to_string(),
        })?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(Path::new("test.toml"), text)
    }

    #[test]
    fn the_checked_in_schema_is_current() {
        // The shipped policies are instances of it, and a typo is not.
        let validator = crate::checked_in_schema("policy.schema.json", &schema());
        for name in ["default", "strict", "dev"] {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
            let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).expect("read");
            let value: toml::Value = toml::from_str(&text).expect("toml");
            let json = serde_json::to_value(value).expect("json");
            assert!(validator.is_valid(&json), "{name}.toml does not match the schema");
        }
        let typo = serde_json::json!({"version": 1, "sandbox": "auto", "limts": {}});
        assert!(!validator.is_valid(&typo));
    }

    #[test]
    fn the_shipped_policies_validate() {
        for name in ["default", "strict", "dev"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../policies")
                .join(format!("{name}.toml"));
            let policy = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(policy.defaults.timeout <= policy.ceilings.timeout);
        }
        let strict = Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/strict.toml"))
            .expect("strict");
        assert_eq!(strict.sandbox, SandboxMode::Require);
    }

    #[test]
    fn unknown_keys_fail_with_the_line() {
        let err = parse("version = 1\nsandbox = \"auto\"\n\n[limits]\ntimeout = \"10s\"\ntimout = \"5s\"\n")
            .expect_err("must be refused");
        let text = err.to_string();
        assert!(
            text.contains("test.toml") && text.contains("line 6") && text.contains("timout"),
            "{text}"
        );
    }

    #[test]
    fn zero_negative_and_over_ceiling_values_fail_closed() {
        for (body, needle) in [
            ("[limits]\nstdout_cap = \"0\"\n", "greater than zero"),
            ("[limits]\ntimeout = \"0s\"\n", "greater than zero"),
            ("[limits]\nmax_processes = -1\n", "invalid value"),
            ("[limits]\nmemory = \"-5MiB\"\n", "invalid byte size"),
            ("[ceilings]\nstdout_cap = \"64MiB\"\n", "above the ceiling"),
            (
                "[limits]\ntimeout = \"10m\"\n[ceilings]\ntimeout = \"1m\"\n",
                "above the ceiling",
            ),
            ("[env]\nallow = [\"GITHUB_TOKEN\"]\n", "credential"),
            ("[env]\nallow = [\"LD_PRELOAD\"]\n", "loader"),
            ("[native]\npath = [\"bin\"]\n", "absolute"),
        ] {
            let err = parse(&format!("version = 1\nsandbox = \"require\"\n{body}"))
                .expect_err("must be refused")
                .to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
        assert!(parse("version = 2\nsandbox = \"auto\"\n").is_err());
        assert!(parse("version = 1\nsandbox = \"sometimes\"\n").is_err());
    }

    #[test]
    fn env_passes_only_the_allowlist_and_fixed_values() {
        let p = parse(
            "version = 1\nsandbox = \"auto\"\n[env]\nallow = [\"LANG\", \"TZ\"]\nset = { PYTHONPATH = \"/opt/lib\" }\n",
        )
        .expect("valid");
        let host = |name: &str| match name {
            "LANG" => Some("C.UTF-8".to_owned()),
            "GITHUB_TOKEN" | "HOME" => Some("host-value".to_owned()),
            _ => None,
        };
        let env = p.env_for(host);
        let guarded = wrun_runtime::env::guard(&env);
        assert_eq!(
            guarded.vars,
            vec![
                ("LANG".into(), "C.UTF-8".into()),
                ("PYTHONPATH".into(), "/opt/lib".into())
            ]
        );
    }

    #[test]
    fn without_ceilings_a_policy_has_wruns_own() {
        let p = parse("version = 1\nsandbox = \"auto\"\n").expect("valid");
        assert_eq!(p.ceilings, Limits::ceilings());
        assert_eq!(p.ceilings.max_processes, 4096);
        let asks = LimitsSpec {
            max_processes: Some(4096),
            tmp_size: Some(wrun_runtime::ByteSize::gib(4)),
            max_open_files: Some(65536),
            ..LimitsSpec::default()
        };
        assert!(p.limits_for(&asks).is_ok());
    }

    #[test]
    fn definitions_may_only_tighten() {
        let p = parse("version = 1\nsandbox = \"auto\"\n[ceilings]\ntimeout = \"1m\"\nmemory = \"512MiB\"\n")
            .expect("valid");
        let tight = LimitsSpec {
            timeout: Some(std::time::Duration::from_secs(5)),
            ..LimitsSpec::default()
        };
        assert_eq!(
            p.limits_for(&tight).expect("within").timeout,
            std::time::Duration::from_secs(5)
        );
        let greedy = LimitsSpec {
            memory: Some(wrun_runtime::ByteSize::gib(2)),
            ..LimitsSpec::default()
        };
        assert!(matches!(
            p.limits_for(&greedy),
            Err(PolicyError::AboveCeiling { what: "memory", .. })
        ));
        let zero = LimitsSpec {
            stdout_cap: Some(wrun_runtime::ByteSize(0)),
            ..LimitsSpec::default()
        };
        assert!(matches!(p.limits_for(&zero), Err(PolicyError::BadRequest { .. })));
    }
}
