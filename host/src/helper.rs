//! From a request to a job: the host's layers applied in order to one named helper.
//!
//! 1. the definition is read from the base commit (layer 1; the caller attached upstream's
//!    `.ai/` to the worktree, and the job mounts it over the worktree's `.ai`);
//! 2. limits: the policy's defaults tightened by the definition, never above a ceiling;
//! 3. argument templates expanded with trusted, safe keys only (layer 4);
//! 4. model arguments checked: declared flags, paths inside the worktree, after `--` (layer 4);
//! 5. the program: a wasm module from the base commit (its sha256 checked against the pin), a
//!    native command resolved (layer 2), or a shell string checked statement by statement with
//!    every command in it resolved too (layer 4, then layer 2);
//! 6. the environment: the policy's allowlist and fixed values (layer 5; the runtime's guard
//!    drops credentials and loader variables);
//! 7. the sandbox mode and read-only binds from the policy.
//!
//! The result is a [`Plan`]: the job, and everything `wrun explain` and the audit line show.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use wrun_runtime::env::{DroppedEnv, guard};
use wrun_runtime::{Access, Job, Limits, Mount, SandboxMode, WasmModule};

use crate::args::ArgRules;
use crate::audit::DefinitionSource;
use crate::definitions::{DEFINITIONS_PATH, Definitions, HelperProgram, Kind, WorktreeAccess};
use crate::expand::Var;
use crate::git::Upstream;
use crate::policy::Policy;
use crate::resolve::{Resolved, resolve_with};
use crate::shell;

/// The largest module read from git.
const MAX_MODULE_BYTES: u64 = wrun_runtime::limits::MAX_MODULE_SIZE.bytes();

/// The largest definitions file read.
/// The largest definitions file wrun reads.
pub const MAX_DEFINITIONS_BYTES: u64 = 1 << 20;

/// A request for one helper.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The helper's name.
    pub helper: String,
    /// Arguments from the review loop (possibly from a model): checked, never interpolated.
    pub model_args: Vec<String>,
    /// Template variables with their origin.
    pub vars: BTreeMap<String, Var>,
}

/// Why a request cannot become a job. Every variant is a refusal (exit 125).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// git failed.
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    /// The definitions file is invalid.
    #[error(transparent)]
    Definitions(#[from] crate::definitions::DefinitionsError),
    /// No such helper.
    #[error("no helper {name:?} in {source_name}; defined: {known:?}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The file read.
        source_name: String,
        /// The names it defines.
        known: Vec<String>,
    },
    /// A limit is out of range.
    #[error("helper {helper:?}: {source}")]
    Limits {
        /// The helper.
        helper: String,
        /// Why.
        #[source]
        source: crate::policy::PolicyError,
    },
    /// A template could not be expanded.
    #[error(transparent)]
    Expand(#[from] crate::expand::ExpandError),
    /// A model argument was refused.
    #[error(transparent)]
    Args(#[from] crate::args::ArgError),
    /// The helper takes no model arguments.
    #[error("helper {0:?} takes no arguments from the request (its definition has no model_args)")]
    NoModelArgs(String),
    /// A command was refused (layer 2).
    #[error(transparent)]
    Resolve(#[from] crate::resolve::ResolveError),
    /// A shell string was refused.
    #[error(transparent)]
    Shell(#[from] crate::shell::ShellError),
    /// The module's hash does not match the pin.
    #[error(
        "helper {helper:?}: module {module} has sha256 {actual}, but the definition pins {pinned}; refusing to run it"
    )]
    HashMismatch {
        /// The helper.
        helper: String,
        /// The module path.
        module: String,
        /// The pin.
        pinned: String,
        /// What was read.
        actual: String,
    },
    /// The protected paths of a writable worktree could not be determined.
    #[error(transparent)]
    Protect(#[from] crate::protect::ProtectError),
    /// The worktree holds a name native code could run as a command.
    #[error(
        "the worktree holds {0:?}, a name perl's `<>` and two-argument `open` run as a command or read as a mode (it starts with `|`, `<`, `>`, `+<` or `+>`, ends with `|`, is `-`, has spaces at either end or a control character); a native helper could be handed it, so none runs: rename the file in the pull request, or use a wasm helper"
    )]
    UnplainName(PathBuf),
}

/// A request resolved into a job, with what was decided on the way.
#[derive(Debug)]
pub struct Plan {
    /// The helper's name.
    pub helper: String,
    /// Its kind.
    pub kind: Kind,
    /// Where its definition came from.
    pub source: DefinitionSource,
    /// The resolved program: an absolute path (native, shell: bash) or `sha256:<hex>` (wasm).
    pub program: String,
    /// The job to run.
    pub job: Job,
    /// The sandbox mode for native helpers.
    pub sandbox: SandboxMode,
    /// Decisions worth recording: what was dropped, checked or pinned.
    pub decisions: Vec<String>,
    /// The limits the definition set (the others are the policy's `[limits]`).
    pub limits_set: Vec<&'static str>,
    /// The policy's ceilings, which the definition's values may reach and not pass.
    pub ceilings: Limits,
}

/// What `wrun explain` prints: the plan without values of anything secret.
#[derive(Debug, Serialize)]
pub struct Explanation<'a> {
    /// The helper.
    pub helper: &'a str,
    /// Its kind.
    pub kind: Kind,
    /// Where its definition came from.
    pub definition: &'a DefinitionSource,
    /// The resolved program.
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The worktree and further binds: `host -> guest (ro|rw)`.
    pub binds: Vec<String>,
    /// Names of the variables the helper gets (values are not shown).
    pub env: Vec<String>,
    /// Names dropped by the guard, with the reason.
    pub env_dropped: Vec<DroppedEnv>,
    /// The limits, as numbers in the units `limit_units` names.
    pub limits: &'a Limits,
    /// The unit of each limit's number (`ms`, `bytes`, `count`).
    pub limit_units: std::collections::BTreeMap<&'static str, &'static str>,
    /// The limits the definition set; every other is the policy's `[limits]` default.
    pub limits_set_by_definition: &'a [&'static str],
    /// The policy's `[ceilings]`, in the units of `limit_units`: a definition may set any
    /// value up to these; above one it is refused, never clamped.
    pub ceilings: &'a Limits,
    /// The sandbox mode for native helpers (`wasm` helpers always run in wasmtime).
    pub sandbox: SandboxMode,
    /// Decisions.
    pub decisions: &'a [String],
}

impl Explanation<'_> {
    /// The explanation for a person: one item per line, limits as a policy file writes them
    /// (`timeout 30s`, `memory 256MiB`).
    pub fn to_text(&self) -> String {
        let word = |v: serde_json::Result<serde_json::Value>| {
            v.ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        let mut out = format!(
            "helper: {} ({})\ndefinition: {} at {}\nprogram: {}\n",
            self.helper,
            word(serde_json::to_value(self.kind)),
            self.definition.git_ref,
            self.definition.commit,
            self.program
        );
        out.push_str(&format!(
            "args: {}\n",
            serde_json::to_string(self.args).unwrap_or_default()
        ));
        out.push_str("binds:\n");
        for bind in &self.binds {
            out.push_str(&format!("  {bind}\n"));
        }
        out.push_str(&format!("env: {}\n", self.env.join(", ")));
        for dropped in &self.env_dropped {
            out.push_str(&format!("env dropped: {} ({})\n", dropped.name, dropped.reason));
        }
        let limits: Vec<String> = self
            .limits
            .shown()
            .into_iter()
            .map(|(k, v)| {
                if self.limits_set_by_definition.contains(&k) {
                    format!("{k} {v} (definition)")
                } else {
                    format!("{k} {v}")
                }
            })
            .collect();
        out.push_str(&format!("limits: {}\n", limits.join(", ")));
        let ceilings: Vec<String> = self
            .ceilings
            .shown()
            .into_iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!(
            "limits rule: the policy's [limits] are the defaults; a definition may set any value up to the policy's [ceilings], above which it is refused (never clamped); a request cannot raise one\nceilings: {}\n",
            ceilings.join(", ")
        ));
        out.push_str(&format!(
            "sandbox: {}\n",
            word(serde_json::to_value(self.sandbox))
        ));
        out.push_str("decisions:\n");
        for decision in self.decisions {
            out.push_str(&format!("  - {decision}\n"));
        }
        out
    }
}

impl Plan {
    /// What `wrun explain` shows of this plan.
    pub fn explain(&self) -> Explanation<'_> {
        let job = self.job.parts();
        let guarded = guard(job.env);
        let mount = |m: &Mount| {
            let mut text = format!(
                "{} -> {} ({})",
                m.host.display(),
                m.guest,
                if m.access == Access::ReadWrite { "rw" } else { "ro" }
            );
            if m.access == Access::ReadWrite && !m.protected.is_empty() {
                let protected: Vec<String> = m.protected.iter().map(|p| p.display().to_string()).collect();
                text.push_str(&format!(", read-only inside: {}", protected.join(", ")));
            }
            text
        };
        Explanation {
            helper: &self.helper,
            kind: self.kind,
            definition: &self.source,
            program: &self.program,
            args: job.args,
            binds: job.worktree.into_iter().chain(job.dirs).map(mount).collect(),
            env: guarded.vars.into_iter().map(|(name, _)| name).collect(),
            env_dropped: guarded.dropped,
            limits: job.limits,
            limit_units: Limits::units().into_iter().collect(),
            limits_set_by_definition: &self.limits_set,
            ceilings: &self.ceilings,
            sandbox: self.sandbox,
            decisions: &self.decisions,
        }
    }
}

/// The definitions file of upstream's `commit` (read from wrun's repository of it), and the
/// name it goes by in messages (`origin/main:.ai/helpers.toml`).
pub fn read_definitions(
    repo: &Upstream,
    base: &str,
    commit: &str,
) -> Result<(String, Definitions), PlanError> {
    let source_name = format!("{base}:{DEFINITIONS_PATH}");
    let text = repo.read(commit, DEFINITIONS_PATH, MAX_DEFINITIONS_BYTES)?;
    let text = String::from_utf8(text).map_err(|_| crate::definitions::DefinitionsError {
        source_name: source_name.clone(),
        message: "not UTF-8".into(),
    })?;
    let file = Definitions::parse(&source_name, &text)?;
    Ok((source_name, file))
}

/// Reads the definitions at `commit` and turns `request` into a plan.
///
/// `env_lookup` reads a variable of wrun's environment (the host passes
/// [`crate::ambient::var`]); only the policy's allowlisted names are asked for.
///
/// # Security
/// Reads the definitions and wasm modules from wrun's own repository of the upstream (the base
/// commit), and the worktree (which the caller overlaid with upstream's `.ai/`) only through
/// cap-std handles.
pub fn plan(
    policy: &Policy,
    repo: &Upstream,
    base: &str,
    commit: &str,
    worktree: &crate::worktree::Worktree,
    request: &Request,
    env_lookup: impl Fn(&str) -> Option<String>,
) -> Result<Plan, PlanError> {
    let (source_name, file) = read_definitions(repo, base, commit)?;
    let def = match file.get(&request.helper) {
        Some(def) => def,
        None => {
            let problems = file.problems_of(&request.helper);
            if problems.is_empty() {
                return Err(PlanError::Unknown {
                    name: request.helper.clone(),
                    source_name,
                    known: file.names().into_iter().map(str::to_owned).collect(),
                });
            }
            return Err(PlanError::Definitions(crate::definitions::DefinitionsError {
                source_name,
                message: problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            }));
        }
    };
    let helper = def.name.clone();
    let mut decisions = Vec::new();
    if !file.problems.is_empty() {
        decisions.push(format!(
            "{source_name} has {} other definition(s) that cannot be used ({}); `wrun definitions check` lists them",
            file.problems.len(),
            file.problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }

    let limits = policy
        .limits_for(&def.limits)
        .map_err(|source| PlanError::Limits {
            helper: helper.clone(),
            source,
        })?;
    let template_args = crate::expand::expand(&def.args, &request.vars, &policy.templates.safe_keys)?;
    let model_args = match &def.model_args {
        _ if request.model_args.is_empty() => Vec::new(),
        None => return Err(PlanError::NoModelArgs(helper)),
        Some(m) => {
            let rules = ArgRules {
                flags: m.flags.clone(),
                max_count: m.max,
                ..ArgRules::default()
            };
            crate::args::check(&request.model_args, &rules, worktree)?
        }
    };
    let guest_root = Path::new(wrun_runtime::job::DEFAULT_WORKTREE_GUEST);
    let host_of = |p: &Path| policy.host_of(p);
    let resolve = |command: &str, path: &[PathBuf], worktree: &crate::worktree::Worktree| {
        resolve_with(command, path, &host_of, worktree)
    };
    let in_sandbox = |resolved: Resolved| match resolved {
        Resolved::System(p) => p,
        Resolved::Upstream(rel) => guest_root.join(rel),
    };

    let mut uses_git = false;
    // Links outside /usr on the way to the commands it runs, bound read-only in the sandbox.
    let mut links: Vec<PathBuf> = Vec::new();
    let mut link = |resolved: &Resolved| {
        if let Resolved::System(path) = resolved {
            for l in crate::resolve::links_outside_usr(path) {
                if !links.contains(&l) {
                    links.push(l);
                }
            }
        }
    };
    let mut runs_node = false;
    let (program, job) = match &def.program {
        HelperProgram::Wasm {
            module: module_path,
            sha256: pin,
        } => {
            let module_path = module_path.clone();
            let bytes = repo.read(commit, &module_path, MAX_MODULE_BYTES)?;
            let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&bytes).into();
            let actual: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            let module = WasmModule::from_bytes(helper.clone(), bytes);
            if let Some(pinned) = pin {
                if *pinned != digest {
                    return Err(PlanError::HashMismatch {
                        helper,
                        module: module_path,
                        pinned: pinned.iter().map(|b| format!("{b:02x}")).collect(),
                        actual,
                    });
                }
                decisions.push(format!("module {module_path} matches its sha256 pin"));
            } else {
                decisions.push(format!("module {module_path} is not pinned (sha256 {actual})"));
            }
            let job = Job::wasm(module).args(template_args).args(model_args);
            (format!("sha256:{actual}"), job)
        }
        HelperProgram::Native {
            program: first,
            args: rest,
        } => {
            runs_node = is_node(first);
            let resolved = resolve(first, &policy.native.path, worktree)?;
            link(&resolved);
            let program = in_sandbox(resolved);
            let fixed = crate::expand::expand(rest, &request.vars, &policy.templates.safe_keys)?;
            let job = Job::native(&program)
                .args(fixed)
                .args(template_args)
                .args(model_args);
            (program.display().to_string(), job)
        }
        HelperProgram::Shell { run } => {
            let run = run.clone();
            let checked = shell::check(&run, &policy.shell_rules)?;
            for statement in &checked.statements {
                if !statement.builtin {
                    link(&resolve(&statement.command, &policy.native.path, worktree)?);
                }
                if statement.dynamic_args && runs_with_perl(worktree, &statement.command) {
                    return Err(PlanError::Shell(shell::ShellError::new(
                        shell::Rule::Operand,
                        format!(
                            "{} is a perl script, and an argument it gets is not a plain literal file name: perl's `<>` and two-argument `open` run a name ending in `|` as a command, and the pull request chooses file names",
                            statement.command
                        ),
                        Some(&statement.command),
                    )));
                }
                for script in &statement.scripts {
                    resolve(script, &policy.native.path, worktree)?;
                }
            }
            uses_git = checked.uses_git;
            runs_node = checked.statements.iter().any(|s| is_node(&s.command));
            decisions.push(format!(
                "shell command checked: {} statements, all resolved",
                checked.statements.len()
            ));
            let bash = resolve("bash", &policy.native.path, worktree)?;
            link(&bash);
            let bash = in_sandbox(bash);
            let script = format!("{}{run}", shell::prelude(checked.uses_git));
            // The program gets the request's flags and paths as "$@", without the `--` that
            // separates them for a command: `cat -- "$@"` must not read a file named `--`.
            let mut model_args = model_args;
            if let Some(at) = model_args.iter().position(|a| a == "--") {
                model_args.remove(at);
            }
            let job = Job::native(&bash)
                .args(["--noprofile", "--norc", "-c"])
                .arg(script)
                .arg(format!("wrun-{helper}"))
                .args(template_args)
                .args(model_args);
            (bash.display().to_string(), job)
        }
    };

    let access = match def.worktree {
        WorktreeAccess::Ro => Access::ReadOnly,
        WorktreeAccess::Rw => Access::ReadWrite,
    };
    // One walk of the worktree, for what a writable worktree protects, the nested repositories
    // git isolation hides and the names native code may not be handed.
    let scan = if access == Access::ReadWrite || def.kind() != Kind::Wasm {
        Some(crate::protect::scan(worktree)?)
    } else {
        None
    };
    if def.kind() != Kind::Wasm
        && let Some(name) = scan.as_ref().and_then(|s| s.unplain.as_ref())
    {
        // A directory walk, a glob or the changed-file list hands the name to native code; perl
        // (`<>`, two-argument `open`, an upstream script, a tool written in it) runs it.
        return Err(PlanError::UnplainName(name.clone()));
    }
    let protected = scan.map(|s| s.protected).unwrap_or_default();
    let mut mount = Mount::new(worktree.path(), wrun_runtime::job::DEFAULT_WORKTREE_GUEST, access);
    if access == Access::ReadWrite {
        mount = mount.protect(protected.clone());
        decisions.push(format!(
            "writable worktree: {} stay read-only",
            mount
                .protected
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if def.kind() != Kind::Wasm {
        // The pull request's files are data: no tool the helper runs executes or loads one as
        // a program or library (a provider binary, a plugin, a `.so`). Upstream's .ai/ runs.
        mount = mount.no_exec([".ai"]);
        decisions.push("the worktree is not executable (noexec), but for upstream's .ai/".to_owned());
    }
    let mut job = job.worktree_mount(mount).limits(limits);
    // Upstream's .ai/, read-only over the worktree's (the pull request's) for every kind: a bind
    // in the native sandbox, a preopen for wasm.
    if let Some((_, ai)) = worktree.ai() {
        job = job.dir(Mount::new(
            ai,
            format!(
                "{}/{}",
                wrun_runtime::job::DEFAULT_WORKTREE_GUEST,
                crate::git::AI_DIR
            ),
            Access::ReadOnly,
        ));
    }
    if def.kind() != Kind::Wasm {
        for l in &links {
            job = job.dir(Mount::new(l.clone(), l.display().to_string(), Access::ReadOnly));
        }
        for bind in &policy.native.ro_binds {
            job = job.dir(Mount::new(
                bind.host.clone(),
                bind.guest.clone(),
                Access::ReadOnly,
            ));
        }
    }
    let env = policy.env_for(env_lookup);
    let has_path = env.iter().any(|v| v.name == "PATH");
    job = job.envs(env);
    if def.kind() != Kind::Wasm {
        job = job.sandbox(policy.sandbox);
    }
    // A native helper and what it starts (an upstream script running `ruff`) find commands on
    // the policy's PATH, as the host resolved the helper's own.
    if def.kind() != Kind::Wasm && !has_path && !policy.native.path.is_empty() {
        let path = policy
            .native
            .path
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        job = job.policy_env("PATH", path);
    }
    if def.kind() != Kind::Wasm {
        let guest = wrun_runtime::job::DEFAULT_WORKTREE_GUEST;
        // The pull request's dependencies are its code: node resolves an upstream script's
        // `require("x")` through the worktree's node_modules, whoever starts node (a shell
        // program, a native helper, an upstream script, a shebang).
        if worktree.dir().symlink_metadata("node_modules").is_ok() {
            job = job.dir(Mount::new(
                repo.empty_dir()?,
                format!("{guest}/node_modules"),
                Access::ReadOnly,
            ));
            decisions.push("the pull request's node_modules is hidden".to_owned());
        }
        // Its package.json names packages node resolves before node_modules ("exports" of a
        // package's own name, "imports"): hidden behind `{}` wherever upstream may run node.
        if (runs_node || ai_uses_node(worktree)) && worktree.dir().symlink_metadata("package.json").is_ok() {
            job = job.dir(Mount::new(
                repo.empty_json()?,
                format!("{guest}/package.json"),
                Access::ReadOnly,
            ));
            decisions.push("the pull request's package.json is hidden from node".to_owned());
        }
    }
    if def.kind() != Kind::Wasm {
        // git in the sandbox, whoever runs it (a shell program, a native helper, an upstream
        // script), reads no configuration but wrun's (the repository's own file may be the
        // pull request's doing): none from the system or the user, the repository's replaced
        // by wrun's, every program-naming setting off, nested repositories hidden.
        for (name, value) in shell::GIT_ENVIRONMENT {
            job = job.policy_env(*name, *value);
        }
        let isolation = repo.isolate_git(worktree, &protected)?;
        if let Some(reason) = &isolation.unisolable {
            if uses_git {
                return Err(PlanError::Git(crate::git::GitError::Unisolable(format!(
                    "a shell helper that runs git needs the worktree's repository configuration replaced, and {reason}; check the pull request out as a plain clone"
                ))));
            }
            decisions.push(format!("the worktree's .git is hidden ({reason})"));
        }
        let guest = wrun_runtime::job::DEFAULT_WORKTREE_GUEST;
        if let Some(config) = isolation.config {
            job = job.dir(Mount::new(
                config,
                format!("{guest}/.git/config"),
                Access::ReadOnly,
            ));
        }
        for (path, is_dir) in isolation.hide {
            let empty = if is_dir {
                &isolation.empty_dir
            } else {
                &isolation.empty_file
            };
            job = job.dir(Mount::new(
                empty.clone(),
                format!("{guest}/{}", path.display()),
                Access::ReadOnly,
            ));
        }
        decisions.push("git runs with its configuration isolated".to_owned());
    }
    for dropped in guard(job.parts().env).dropped {
        decisions.push(format!("env {} dropped ({})", dropped.name, dropped.reason));
    }
    Ok(Plan {
        helper,
        kind: def.kind(),
        source: DefinitionSource {
            git_ref: base.to_owned(),
            commit: commit.to_owned(),
        },
        program,
        job,
        sandbox: policy.sandbox,
        decisions,
        limits_set: def.limits.given(),
        ceilings: policy.ceilings.clone(),
    })
}

/// The path of the git binary wrun runs: found on wrun's `PATH`.
pub fn git_binary() -> Option<PathBuf> {
    crate::ambient::which("git")
}

impl PlanError {
    /// The rule this refusal comes from, as a stable id (`shell.operand`, `args.refused`,
    /// `module.pin` …), for the audit log and hosts.
    pub fn rule(&self) -> &'static str {
        match self {
            PlanError::Git(e) => e.rule(),
            PlanError::Definitions(_) => "definitions.invalid",
            PlanError::Unknown { .. } => "definitions.unknown-helper",
            PlanError::Limits { .. } => "limits.ceiling",
            PlanError::Expand(e) => e.rule(),
            PlanError::Args(_) => "args.refused",
            PlanError::NoModelArgs(_) => "args.not-accepted",
            PlanError::Resolve(_) => "program.not-upstream",
            PlanError::Shell(e) => e.rule.id(),
            PlanError::HashMismatch { .. } => "module.pin",
            PlanError::Protect(_) => "worktree.protect",
            PlanError::UnplainName(_) => "worktree.magic-name",
        }
    }
}

/// Whether a command is node (which resolves modules through the script's parent directories).
fn is_node(command: &str) -> bool {
    matches!(command.rsplit('/').next(), Some("node" | "nodejs"))
}

/// Whether an upstream script (a `.ai/` path, read from upstream's copy) starts with a `#!`
/// line naming perl.
fn runs_with_perl(worktree: &crate::worktree::Worktree, script: &str) -> bool {
    use std::io::Read as _;
    let Some((ai, _)) = worktree.ai() else {
        return false;
    };
    let script = script.strip_prefix("./").unwrap_or(script);
    let Some(inner) = script.strip_prefix(".ai/") else {
        return false;
    };
    let mut head = [0u8; 256];
    let n = ai.open(inner).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    let first = head.get(..n).unwrap_or_default();
    let line = first.split(|b| *b == b'\n').next().unwrap_or_default();
    line.starts_with(b"#!") && line.windows(4).any(|w| w == b"perl")
}

/// Whether upstream's `.ai/` (wrun's copy) holds JavaScript or a script whose `#!` line names
/// node: then a helper may run node whatever its command says.
fn ai_uses_node(worktree: &crate::worktree::Worktree) -> bool {
    use std::io::Read as _;
    let Some((root, _)) = worktree.ai() else {
        return false;
    };
    let mut stack = vec![PathBuf::from(".")];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = root.read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 10_000 {
                // More than a helpers directory holds: assume it may.
                return true;
            }
            let path = dir.join(entry.file_name());
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            if path
                .extension()
                .is_some_and(|e| e == "js" || e == "mjs" || e == "cjs")
            {
                return true;
            }
            let mut head = [0u8; 128];
            let n = root.open(&path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
            let line = head
                .get(..n)
                .unwrap_or_default()
                .split(|b| *b == b'\n')
                .next()
                .unwrap_or_default();
            if line.starts_with(b"#!") && line.windows(4).any(|w| w == b"node") {
                return true;
            }
        }
    }
    false
}
