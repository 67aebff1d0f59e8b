//! `wrun helper NAME --repo DIR --base REMOTE/BRANCH [-- ARGS]` and `wrun explain` (the same
//! resolution, printed instead of run).

use crate::cli::out::{note, say};
use std::path::PathBuf;

use crate::cli::exit;
use anyhow::Context;
use clap::Args;
use wrun_host::ambient;
use wrun_host::policy::Policy;
use wrun_host::session::{HelperRequest, Session};
use wrun_runtime::{Backend, Runner, SandboxMode, WasmConfig, WasmSandbox};

#[derive(Debug, Args)]
pub(crate) struct HelperArgs {
    /// The helper's name in the base branch's `.ai/helpers.toml`.
    #[arg(required_unless_present = "list")]
    name: Option<String>,

    /// List the helpers upstream defines (name, kind, what each runs) and every definition
    /// that cannot be used, with its line, instead of running or explaining one.
    #[arg(long, conflicts_with = "name")]
    list: bool,

    /// The repository (its `.git` and, unless --worktree is given, its working tree).
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,

    /// The base repository's default branch as REMOTE/BRANCH (e.g. origin/main): helper
    /// definitions and `.ai/` come from here, never from the pull request.
    #[arg(long, value_name = "REMOTE/BRANCH")]
    base: String,

    /// The pull request's worktree. Default: the repository's directory.
    #[arg(long, value_name = "DIR")]
    worktree: Option<PathBuf>,

    /// The operator's policy (TOML). Default: wrun's built-in policies/default.toml.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,

    /// The upstream repository's URL (https, ssh, git or file, or an absolute path). Default:
    /// the policy's `[upstream] url`, else the URL of the remote named by --base, which the
    /// policy's `[upstream] allow` must list.
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,

    /// Use the base branch as wrun last fetched it instead of fetching it again (the
    /// worktree's `.ai/` is still replaced with it).
    #[arg(long)]
    no_fetch: bool,

    /// A trusted template variable, KEY=VALUE (set by the host: refs, commit ids, names).
    #[arg(long = "var", value_name = "KEY=VALUE")]
    vars: Vec<String>,

    /// A template variable whose value came from a model or another helper's output,
    /// KEY=VALUE. Such values are never interpolated; a template that uses one is refused.
    #[arg(long = "model-var", value_name = "KEY=VALUE")]
    model_vars: Vec<String>,

    /// Native helpers: absolute path of bwrap. Default: found on PATH.
    #[arg(long, value_name = "PATH")]
    bwrap: Option<PathBuf>,

    /// Arguments from the request (after `--`), checked against the helper's `model_args`.
    #[arg(last = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct HelperCmd {
    #[command(flatten)]
    common: HelperArgs,

    /// Print the output for a language model: each stream between markers that carry a random
    /// nonce, control characters and CI workflow commands neutralized (with `--format`, the
    /// findings so rendered instead of the raw stdout).
    #[arg(long, conflicts_with = "json")]
    for_model: bool,

    /// Print the whole Outcome as JSON (with the findings, for `--format text|sarif`).
    #[arg(long)]
    json: bool,

    /// How to print the helper's stdout: `raw` as written; `text` or `sarif` (SARIF 2.1.0) to read
    /// it as findings (JSON Lines of the wrun-guest protocol).
    #[arg(long, value_enum, default_value = "raw")]
    format: crate::cli::run::Format,

    /// The pull request's changed files, handed to the helper on stdin as the wrun-guest
    /// changed-file list: a file (`-` for wrun's stdin) with one path per line
    /// (`git diff --name-only`), or already in the JSON form.
    #[arg(long, value_name = "FILE")]
    changed_files: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainCmd {
    #[command(flatten)]
    common: HelperArgs,

    /// Print the job as JSON (limits as numbers, their units in `limit_units`) instead of text
    /// (limits as a policy file writes them: `30s`, `256MiB`).
    #[arg(long)]
    json: bool,
}

impl HelperArgs {
    fn policy(&self) -> anyhow::Result<Policy> {
        Ok(match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::builtin("default")?,
        })
    }

    /// The session (policy, effective sandbox mode) and the request as the flags give them.
    fn session(&self) -> anyhow::Result<(Session, HelperRequest)> {
        let policy = self.policy()?;
        let mut asked = Vec::new();
        if let Some(value) = ambient::helper_sandbox() {
            asked.push(
                value
                    .parse::<SandboxMode>()
                    .map_err(|e| anyhow::anyhow!("HELPER_SANDBOX: {e}"))?,
            );
        }
        let store = ambient::default_cache_dir().map(|dir| dir.join("upstream"));
        let (session, looser) = Session::new(policy, &asked, store)?;
        if let Some(looser) = looser {
            note!(
                "wrun: warning: HELPER_SANDBOX={looser} is looser than the policy's sandbox mode ({}); the policy's holds",
                session.policy().sandbox
            );
        }
        let pairs = |specs: &[String]| -> anyhow::Result<Vec<(String, String)>> {
            specs
                .iter()
                .map(|spec| {
                    spec.split_once('=')
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .with_context(|| format!("{spec:?}: write KEY=VALUE"))
                })
                .collect()
        };
        let request = HelperRequest {
            name: self.name.clone().unwrap_or_default(),
            repo: self.repo.clone(),
            base: self.base.clone(),
            worktree: self.worktree.clone(),
            upstream: self.upstream.clone(),
            no_fetch: self.no_fetch,
            vars: pairs(&self.vars)?,
            model_vars: pairs(&self.model_vars)?,
            args: self.args.clone(),
        };
        Ok((session, request))
    }
}

impl HelperArgs {
    /// `--list`: upstream's helpers at the base commit, and the definitions that cannot be used.
    fn list(&self, json: bool) -> anyhow::Result<u8> {
        let (session, request) = self.session()?;
        let (source, source_name, file) = session.definitions(&request)?;
        if json {
            let helpers: Vec<serde_json::Value> = file
                .helpers
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "name": h.name,
                        "kind": h.kind(),
                        "runs": runs(h),
                        "description": h.description,
                        "worktree": h.worktree,
                        "model_args": h.model_args.is_some(),
                    })
                })
                .collect();
            say!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "source": source_name,
                    "commit": source.commit,
                    "helpers": helpers,
                    "problems": file.problems,
                }))?
            )?;
            return Ok(0);
        }
        say!("{source_name} at {}:", source.commit)?;
        let width = file.helpers.iter().map(|h| h.name.len()).max().unwrap_or(0);
        for h in &file.helpers {
            let kind = format!("{:?}", h.kind()).to_lowercase();
            say!(
                "  {:width$}  {kind:6}  {}",
                h.name,
                wrun_host::untrusted::neutralize(&runs(h)).replace('\n', "\\n")
            )?;
            if let Some(d) = &h.description {
                say!("  {:width$}          {}", "", wrun_host::untrusted::neutralize(d))?;
            }
        }
        if file.helpers.is_empty() {
            say!("  (no helper can be used)")?;
        }
        if !file.problems.is_empty() {
            say!("cannot be used:")?;
            for p in &file.problems {
                say!("  {}", wrun_host::untrusted::neutralize(&p.to_string()))?;
            }
        }
        Ok(0)
    }
}

/// What a helper runs, in one line.
fn runs(h: &wrun_host::definitions::Helper) -> String {
    use wrun_host::definitions::HelperProgram;
    let mut text = match &h.program {
        HelperProgram::Wasm { module, sha256 } => format!(
            "{module} ({})",
            if sha256.is_some() { "pinned" } else { "not pinned" }
        ),
        HelperProgram::Native { program, args } => std::iter::once(program)
            .chain(args)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        HelperProgram::Shell { run } => format!("bash: {run}"),
    };
    for arg in &h.args {
        text.push(' ');
        text.push_str(arg);
    }
    text
}

impl ExplainCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        if self.common.list {
            return self.common.list(self.json);
        }
        let (session, request) = self.common.session()?;
        let prepared = session.prepare(&request, ambient::var)?;
        session.check_ai(&prepared)?;
        let plan = prepared.plan?;
        session.check(&plan)?;
        let explained = plan.explain();
        if self.json {
            say!("{}", serde_json::to_string_pretty(&explained)?)?;
        } else {
            say!("{}", explained.to_text().trim_end())?;
        }
        Ok(0)
    }
}

impl HelperCmd {
    pub(crate) async fn execute(self) -> anyhow::Result<u8> {
        if self.common.list {
            return self.common.list(self.json);
        }
        let (session, request) = self.common.session()?;
        let prepared = session.prepare(&request, ambient::var)?;
        let native = crate::cli::run::native_backend(session.policy().sandbox, self.common.bwrap.clone())?;
        let mut config = WasmConfig::default();
        config.cache_dir = ambient::default_cache_dir();
        let runner = Runner::from_backends(WasmSandbox::new(config)?, Some(native));
        let stdin = match (&self.changed_files, &prepared.plan) {
            (Some(path), Ok(plan)) => {
                Some(crate::cli::run::changed_files(path, plan.job.parts().limits.timeout).await?)
            }
            _ => None,
        };
        let (plan, outcome) = session.run(&runner, prepared, stdin).await?;
        let limits = plan.job.parts().limits;
        if self.for_model {
            crate::cli::run::print_for_model(&outcome, self.format, &plan.helper, limits)?;
        } else {
            crate::cli::run::print_outcome(&outcome, self.format, self.json, &plan.helper, limits)?;
        }
        if let Backend::Native {
            confinement: wrun_runtime::Confinement::Unsandboxed { reason },
            ..
        } = &outcome.backend
            && (self.json || self.for_model)
        {
            note!("wrun: warning: the helper ran unsandboxed: {reason}");
        }
        Ok(exit::for_status(&outcome.status))
    }
}
