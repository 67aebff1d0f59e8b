//! `wrun helper NAME --repo DIR --base REMOTE/BRANCH [-- ARGS]` and `wrun explain` (the same
//! resolution, printed instead of run).

use crate::cli::out::{note, say};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use wrun_host::audit::{self, DefinitionSource, Record};
use wrun_host::expand::{Origin, Var};
use wrun_host::git::{BaseRef, Upstream};
use wrun_host::helper::{Plan, Request};
use wrun_host::policy::Policy;
use wrun_host::{ambient, exit, untrusted};
use wrun_runtime::{Backend, Outcome, Runner, Sandbox, WasmConfig, WasmSandbox};

#[derive(Debug, Args)]
pub(crate) struct HelperArgs {
    /// The helper's name in the base branch's `.ai/helpers.toml`.
    name: String,

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
    /// nonce, control characters neutralized.
    #[arg(long, conflicts_with = "json")]
    for_model: bool,

    /// Print the whole Outcome as JSON (with the findings, for `--format text|sarif`).
    #[arg(long)]
    json: bool,

    /// How to print the helper's stdout: `raw` as written; `text` or `sarif` (SARIF 2.1.0) to read
    /// it as findings (JSON Lines of the wrun-guest protocol).
    #[arg(long, value_enum, default_value = "raw", conflicts_with = "for_model")]
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
}

/// Everything resolved before running.
struct Prepared {
    policy: Policy,
    plan: Result<Plan, anyhow::Error>,
    source: Option<DefinitionSource>,
}

impl HelperArgs {
    fn policy(&self) -> anyhow::Result<Policy> {
        Ok(match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::builtin("default")?,
        })
    }

    /// Loads the policy (errors end here), runs the overlay and resolves the plan (errors are
    /// kept so they can be audited).
    fn prepare(&self) -> anyhow::Result<Prepared> {
        let mut policy = self.policy()?;
        policy.sandbox = crate::cli::run::sandbox_mode(&policy, None)?;
        let base = BaseRef::parse(&self.base)?;
        let git = wrun_host::helper::git_binary()
            .context("git is not on PATH; install git (apt-get install git)")?;
        let repo_dir = std::fs::canonicalize(&self.repo)
            .with_context(|| format!("cannot open the repository {}", self.repo.display()))?;
        // Before anything in it is touched.
        wrun_host::git::check_worktree(&repo_dir)?;
        let worktree = self.worktree.clone().unwrap_or_else(|| self.repo.clone());
        let worktree = std::fs::canonicalize(&worktree)
            .with_context(|| format!("cannot open worktree {}", worktree.display()))?;
        let configured = self.upstream.as_deref().or(policy.upstream.url.as_deref());
        let (url, _) = wrun_host::git::upstream_url(
            &git,
            &repo_dir,
            &worktree,
            &base,
            configured,
            &policy.upstream.allow,
        )?;
        let store = ambient::default_cache_dir()
            .context("no directory for wrun's copies of upstream repositories: set XDG_CACHE_HOME or HOME")?
            .join("upstream");
        let repo = Upstream::open(git, &store, url)?;
        let overlay = match wrun_host::git::overlay(&repo, &worktree, &base, !self.no_fetch) {
            Ok(o) => o,
            Err(e) => {
                return Ok(Prepared {
                    policy,
                    plan: Err(e.into()),
                    source: None,
                });
            }
        };
        let source = DefinitionSource {
            git_ref: base.to_string(),
            commit: overlay.commit.clone(),
        };
        let mut vars = BTreeMap::new();
        for (spec, origin) in self
            .vars
            .iter()
            .map(|s| (s, Origin::Trusted))
            .chain(self.model_vars.iter().map(|s| (s, Origin::Model)))
        {
            let (key, value) = spec
                .split_once('=')
                .with_context(|| format!("{spec:?}: write KEY=VALUE"))?;
            vars.insert(
                key.to_owned(),
                Var {
                    value: value.to_owned(),
                    origin,
                },
            );
        }
        vars.entry("base_ref".into()).or_insert(Var {
            value: base.to_string(),
            origin: Origin::Trusted,
        });
        vars.entry("base_sha".into()).or_insert(Var {
            value: overlay.commit.clone(),
            origin: Origin::Trusted,
        });
        let request = Request {
            helper: self.name.clone(),
            model_args: self.args.clone(),
            vars,
        };
        let plan = wrun_host::helper::plan(
            &policy,
            &repo,
            &base.to_string(),
            &overlay.commit,
            &worktree,
            &request,
            ambient::var,
        )
        .map(|mut plan| {
            let what = if overlay.replaced {
                "replaced the worktree's .ai/ with"
            } else {
                "wrote"
            };
            plan.decisions.insert(
                0,
                format!(
                    "{what} upstream's .ai/ from {} ({} files)",
                    overlay.commit, overlay.files
                ),
            );
            plan
        })
        .map_err(anyhow::Error::from);
        Ok(Prepared {
            policy,
            plan,
            source: Some(source),
        })
    }
}

impl ExplainCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        let prepared = self.common.prepare()?;
        let plan = prepared.plan?;
        say!("{}", serde_json::to_string_pretty(&plan.explain())?)?;
        Ok(0)
    }
}

impl HelperCmd {
    pub(crate) async fn execute(self) -> anyhow::Result<u8> {
        let prepared = self.common.prepare()?;
        let audit_log = prepared.policy.audit.log.clone();
        if let Some(log) = &audit_log {
            // Fail before running if the operator's audit log cannot be written.
            audit::open(log).with_context(|| format!("cannot open the audit log {}", log.display()))?;
        }
        let plan = match prepared.plan {
            Ok(plan) => plan,
            Err(e) => {
                if let Some(log) = &audit_log {
                    // Only its status is recorded: the request never reached a backend.
                    let outcome = Outcome::refused(Backend::Wasm, format!("{e:#}"), Vec::new());
                    let decisions = vec![format!("refused: {e:#}")];
                    let record = Record::refused(
                        &self.common.name,
                        prepared.source.as_ref(),
                        "",
                        &decisions,
                        &outcome,
                    );
                    audit::append(log, &record)
                        .with_context(|| format!("writing the audit log {}", log.display()))?;
                }
                return Err(e);
            }
        };
        let native = crate::cli::run::native_backend(plan.sandbox, self.common.bwrap.clone())?;
        let mut config = WasmConfig::default();
        config.cache_dir = ambient::default_cache_dir();
        let runner = Runner::new(WasmSandbox::new(config)?, Some(native));
        let limits = plan.job.parts().limits.clone();
        let mut job = plan.job;
        if let Some(path) = &self.changed_files {
            job = job.stdin(crate::cli::run::changed_files(path, limits.timeout).await?);
        }
        let outcome = runner.run(job).await?;
        if let Some(log) = &audit_log {
            let record = Record::new(
                &plan.helper,
                Some(&plan.source),
                &plan.program,
                &plan.decisions,
                &limits,
                &outcome,
            );
            audit::append(log, &record)
                .with_context(|| format!("writing the audit log {}", log.display()))?;
        }
        if self.for_model {
            let nonce = untrusted::Nonce::random()
                .map_err(|e| anyhow::anyhow!("no randomness for the nonce: {e}"))?;
            crate::cli::out::Out.write_all(untrusted::render(&plan.helper, &outcome, &nonce).as_bytes())?;
        } else {
            crate::cli::run::print_outcome(&outcome, self.format, self.json, &plan.helper, limits.timeout)?;
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
