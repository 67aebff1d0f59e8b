//! A session: one request for one helper of the upstream repository, from the operator's
//! policy to the audit log. In order:
//!
//! 1. **upstream's `.ai/`**: the upstream repository is found (the policy's `[upstream]`, or
//!    the worktree's remote if the policy allows its URL), its base branch fetched into wrun's
//!    own bare repository, and its `.ai/` copied once into wrun's storage ([`AiCopy`]). The
//!    helper sees that copy at the worktree's `.ai/` (a read-only bind, a preopen); the
//!    worktree's own `.ai` is the pull request's, and is neither read nor changed. Only where
//!    nothing can bind it (a native helper run without a sandbox) is upstream's written into the
//!    worktree, replacing the pull request's, with the runs on that worktree taking turns;
//! 2. **sandbox mode**: the policy's, which the host may only make stricter
//!    ([`Session::new`]);
//! 3. **variables**: the request's trusted and model-origin template values, plus `base_ref`
//!    and `base_sha`;
//! 4. **plan**: the definition read from the base commit and turned into a job
//!    ([`crate::helper::plan`]);
//! 5. **run** on the host's sandbox, and
//! 6. **audit**: one line per run and per refusal, when the policy names a log.
//!
//! `wrun helper`, `wrun explain` and `wrun serve` all go through it; a refusal at any step
//! carries a stable rule id ([`SessionError::rule`]). Preparing writes nothing in the worktree
//! (`wrun explain` only prepares).

use std::collections::BTreeMap;
use std::path::PathBuf;

use wrun_runtime::{Sandbox, SandboxMode, Status};

use crate::audit::{self, DefinitionSource, Record};
use crate::definitions::Kind;
use crate::expand::{Origin, Var};
use crate::git::{AiCopy, BaseRef, GitError, Upstream};
use crate::helper::{Plan, PlanError, Request};
use crate::policy::{Policy, PolicyError};
use crate::worktree::Worktree;

/// A request for one helper, against a pull request's worktree.
#[derive(Debug, Clone, Default)]
pub struct HelperRequest {
    /// The helper's name in upstream's `.ai/helpers.toml`.
    pub name: String,
    /// The pull request's repository (its `.git`, and its worktree unless `worktree` is set).
    pub repo: PathBuf,
    /// The base branch as `REMOTE/BRANCH` (`origin/main`).
    pub base: String,
    /// The pull request's worktree, when not the repository's directory.
    pub worktree: Option<PathBuf>,
    /// The upstream URL the host names (else the policy's, else the remote's, if allowed).
    pub upstream: Option<String>,
    /// Use the base branch as wrun last fetched it.
    pub no_fetch: bool,
    /// Template values the host vouches for (refs, commit ids, names).
    pub vars: Vec<(String, String)>,
    /// Template values that came from a model or another helper's output: never interpolated.
    pub model_vars: Vec<(String, String)>,
    /// Arguments from the request, checked against the definition's `model_args`.
    pub args: Vec<String>,
}

/// Why a session step refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Finding, fetching or reading upstream, or the overlay.
    #[error(transparent)]
    Git(#[from] GitError),
    /// Turning the request into a job.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// No git to read upstream with.
    #[error("git is not on PATH; install git (apt-get install git)")]
    NoGit,
    /// A path of the request cannot be opened.
    #[error("cannot open the {what} {}: {source}", path.display())]
    Open {
        /// Which path.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// wrun has nowhere to keep its copies of upstream repositories.
    #[error("no directory for wrun's copies of upstream repositories: set XDG_CACHE_HOME or HOME")]
    NoStore,
    /// The audit log cannot be written: nothing runs.
    #[error("cannot write the audit log {}: {source}", path.display())]
    Audit {
        /// The log.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime refused or failed the job.
    #[error(transparent)]
    Run(#[from] wrun_runtime::Error),
    /// The worktree's `.ai` is not a directory upstream's can be mounted over.
    #[error(
        "the worktree's .ai is {0}, which upstream's .ai/ cannot be mounted over (a mount would follow a link, and needs a directory); a native helper does not run on it: remove .ai from the pull request, or use a wasm helper"
    )]
    AiNotADirectory(&'static str),
}

impl SessionError {
    /// The rule this refusal comes from, as a stable id (`shell.operand`, `upstream.url`,
    /// `args.refused` …): what the audit log records and a host may branch on.
    pub fn rule(&self) -> &'static str {
        match self {
            SessionError::Policy(_) => "policy.invalid",
            SessionError::Git(e) => e.rule(),
            SessionError::Plan(e) => e.rule(),
            SessionError::NoGit => "git.unavailable",
            SessionError::Open { .. } => "request.path",
            SessionError::NoStore => "upstream.storage",
            SessionError::Audit { .. } => "audit.unwritable",
            SessionError::Run(_) => "runtime.refused",
            SessionError::AiNotADirectory(_) => "worktree.ai-not-a-directory",
        }
    }
}

/// A request resolved: its plan, or why it was refused (kept, to be audited), and where its
/// definition came from when upstream was read.
#[derive(Debug)]
pub struct Prepared {
    /// The helper asked for.
    pub name: String,
    /// The plan, or the refusal.
    pub plan: Result<Plan, SessionError>,
    /// The definition's ref and commit.
    pub source: Option<DefinitionSource>,
    /// The worktree, upstream's repository and its `.ai/` copy, for a run that must place the
    /// copy in the worktree.
    place: Option<(crate::worktree::Worktree, Upstream, AiCopy)>,
}

/// What [`Session::locate`] found.
struct Located {
    handle: Worktree,
    repo: Upstream,
    base: BaseRef,
    commit: String,
}

/// One host's sessions under one policy.
#[derive(Debug)]
pub struct Session {
    policy: Policy,
    git: PathBuf,
    store: PathBuf,
}

impl Session {
    /// Sessions under `policy`, its sandbox mode made stricter (never looser) by `asked` (the
    /// host's `HELPER_SANDBOX`, a flag). Also returns the first asked mode that was looser than
    /// the policy's, which does not hold. `store` is where wrun keeps its bare copies of
    /// upstream repositories (`$XDG_CACHE_HOME/wrun/upstream`).
    ///
    /// # Security
    /// The store is created `0700` under wrun's authority when first used.
    pub fn new(
        mut policy: Policy,
        asked: &[SandboxMode],
        store: Option<PathBuf>,
    ) -> Result<(Self, Option<SandboxMode>), SessionError> {
        let (mode, looser) = policy.sandbox_mode(asked);
        policy.sandbox = mode;
        let git = crate::helper::git_binary().ok_or(SessionError::NoGit)?;
        let store = store.ok_or(SessionError::NoStore)?;
        Ok((Self { policy, git, store }, looser))
    }

    /// The policy, with the effective sandbox mode.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Upstream's definitions at the base commit, as [`Session::prepare`] would read them (the
    /// same checks of `--repo`, the same fetch), for `wrun helper --list`. Writes nothing in the
    /// worktree.
    pub fn definitions(
        &self,
        request: &HelperRequest,
    ) -> Result<(DefinitionSource, String, crate::definitions::Definitions), SessionError> {
        let located = self.locate(request)??;
        let base = located.base.to_string();
        let (source_name, file) = crate::helper::read_definitions(&located.repo, &base, &located.commit)?;
        Ok((
            DefinitionSource {
                git_ref: base,
                commit: located.commit,
            },
            source_name,
            file,
        ))
    }

    /// The worktree (checked to be a git worktree before anything in it is touched), upstream's
    /// repository and the base commit. The outer error is the host's (a path that cannot be
    /// opened), the inner a refusal of the request.
    fn locate(&self, request: &HelperRequest) -> Result<Result<Located, SessionError>, SessionError> {
        let base = match BaseRef::parse(&request.base) {
            Ok(base) => base,
            Err(e) => return Ok(Err(e.into())),
        };
        let repo_dir = std::fs::canonicalize(&request.repo).map_err(|source| SessionError::Open {
            what: "repository",
            path: request.repo.clone(),
            source,
        })?;
        // Before anything in it is touched.
        crate::git::check_worktree(&repo_dir)?;
        let worktree_path = request.worktree.as_ref().unwrap_or(&request.repo);
        if let Some(path) = &request.worktree {
            let dir = std::fs::canonicalize(path).map_err(|source| SessionError::Open {
                what: "worktree",
                path: path.clone(),
                source,
            })?;
            crate::git::check_worktree(&dir)?;
        }
        // The worktree is opened once, here: every later read of it goes through this handle.
        let handle = Worktree::open(worktree_path, cap_std::ambient_authority()).map_err(|source| {
            SessionError::Open {
                what: "worktree",
                path: worktree_path.clone(),
                source,
            }
        })?;
        let worktree = handle.path().to_owned();
        let configured = request
            .upstream
            .as_deref()
            .or(self.policy.upstream.url.as_deref());
        let url = match crate::git::upstream_url(
            &self.git,
            &repo_dir,
            &worktree,
            &base,
            configured,
            &self.policy.upstream.allow,
        ) {
            Ok((url, _)) => url,
            Err(e) => return Ok(Err(e.into())),
        };
        let repo = Upstream::open(self.git.clone(), &self.store, url)?;
        let commit = match repo.base_commit(&base, !request.no_fetch) {
            Ok(commit) => commit,
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(Ok(Located {
            handle,
            repo,
            base,
            commit,
        }))
    }

    /// Steps 1 to 4: the overlay, the variables and the plan. An error here is one the host
    /// made (a path that cannot be opened, a repository that is not a worktree); a refusal of
    /// the request itself is kept in [`Prepared::plan`], to be audited by [`Session::run`].
    ///
    /// `env_lookup` reads a variable of the host's environment (only the policy's allowlisted
    /// names are asked for).
    pub fn prepare(
        &self,
        request: &HelperRequest,
        env_lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Prepared, SessionError> {
        let refused = |e: SessionError, source| Prepared {
            name: request.name.clone(),
            plan: Err(e),
            source,
            place: None,
        };
        let Located {
            handle,
            repo,
            base,
            commit,
        } = match self.locate(request)? {
            Ok(located) => located,
            Err(e) => return Ok(refused(e, None)),
        };
        let source = DefinitionSource {
            git_ref: base.to_string(),
            commit: commit.clone(),
        };
        let copy = match repo.ai_copy(&commit) {
            Ok(copy) => copy,
            Err(e) => return Ok(refused(e.into(), Some(source))),
        };
        let handle = handle
            .with_ai(&copy.path, cap_std::ambient_authority())
            .map_err(|source| SessionError::Open {
                what: "copy of upstream's .ai/",
                path: copy.path.clone(),
                source,
            })?;
        let mut vars = BTreeMap::new();
        for ((key, value), origin) in request
            .vars
            .iter()
            .map(|kv| (kv, Origin::Trusted))
            .chain(request.model_vars.iter().map(|kv| (kv, Origin::Model)))
        {
            vars.insert(
                key.clone(),
                Var {
                    value: value.clone(),
                    origin,
                },
            );
        }
        vars.entry("base_ref".into()).or_insert(Var {
            value: base.to_string(),
            origin: Origin::Trusted,
        });
        vars.entry("base_sha".into()).or_insert(Var {
            value: commit.clone(),
            origin: Origin::Trusted,
        });
        let plan_request = Request {
            helper: request.name.clone(),
            model_args: request.args.clone(),
            vars,
        };
        let plan = crate::helper::plan(
            &self.policy,
            &repo,
            &base.to_string(),
            &commit,
            &handle,
            &plan_request,
            env_lookup,
        )
        .map(|mut plan| {
            for link in &copy.links_out {
                plan.decisions.insert(
                    0,
                    format!("upstream's link {link} leaves .ai/ (the pull request's files): not written"),
                );
            }
            plan.decisions.insert(
                0,
                format!(
                    "upstream's .ai/ from {commit} ({} files, {}) is what the helper sees at .ai/; {}",
                    copy.files,
                    if copy.reused { "reused" } else { "copied" },
                    if plan.kind != Kind::Wasm && self.policy.sandbox == wrun_runtime::SandboxMode::Off {
                        "with no sandbox to mount it, it is written into the worktree, replacing the pull request's .ai"
                    } else {
                        "the worktree's own .ai is not read or changed (a native helper run without a sandbox gets it written into the worktree instead)"
                    }
                ),
            );
            plan
        })
        .map_err(SessionError::from);
        Ok(Prepared {
            name: request.name.clone(),
            plan,
            source: Some(source),
            place: Some((handle, repo, copy)),
        })
    }

    /// Checks a plan's job as the runtime will before running it (mounts, binds, limits),
    /// without running it: `wrun explain` refuses what `wrun helper` would.
    pub fn check(&self, plan: &Plan) -> Result<(), SessionError> {
        match plan.kind {
            // Without the wasm backend (the fuzz targets' build) there is nothing to check
            // a wasm job against: such a build runs none.
            #[cfg(feature = "wasm")]
            Kind::Wasm => wrun_runtime::wasm::check(&plan.job)?,
            #[cfg(not(feature = "wasm"))]
            Kind::Wasm => {}
            _ => wrun_runtime::native::check(&plan.job)?,
        }
        Ok(())
    }

    /// What [`Session::place_ai`] would refuse, checked without changing anything: a native
    /// helper on a worktree whose `.ai` is a link or not a directory (`wrun explain`).
    pub fn check_ai(&self, prepared: &Prepared) -> Result<(), SessionError> {
        let (Ok(plan), Some((worktree, ..))) = (&prepared.plan, &prepared.place) else {
            return Ok(());
        };
        if plan.kind == Kind::Wasm {
            return Ok(());
        }
        match worktree.dir().symlink_metadata(crate::git::AI_DIR) {
            Ok(meta) if meta.is_symlink() => Err(SessionError::AiNotADirectory("a symbolic link")),
            Ok(meta) if !meta.is_dir() => Err(SessionError::AiNotADirectory("not a directory")),
            _ => Ok(()),
        }
    }

    /// Makes upstream's `.ai/` what a native helper sees at the worktree's `.ai/`, before it
    /// runs on `sandbox`. Where the sandbox binds it: the worktree's `.ai` must be a directory
    /// (or missing: an empty one is made as the mount point). Where nothing can bind it: upstream's
    /// is written into the worktree, replacing the pull request's, under a lock held until the
    /// returned guard is dropped. Returns the guard and what to say about it.
    async fn place_ai(
        &self,
        sandbox: &dyn Sandbox,
        plan: &Plan,
        place: Option<&(crate::worktree::Worktree, Upstream, AiCopy)>,
    ) -> Result<(Option<nix::fcntl::Flock<std::fs::File>>, Option<String>), SessionError> {
        let Some((worktree, repo, copy)) = place else {
            return Ok((None, None));
        };
        if plan.kind == Kind::Wasm {
            return Ok((None, None));
        }
        let root = worktree.dir();
        if sandbox.binds(&plan.job).await {
            return match root.symlink_metadata(crate::git::AI_DIR) {
                Ok(meta) if meta.is_dir() => Ok((None, None)),
                Ok(meta) if meta.is_symlink() => Err(SessionError::AiNotADirectory("a symbolic link")),
                Ok(_) => Err(SessionError::AiNotADirectory("not a directory")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match root.create_dir(crate::git::AI_DIR) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(GitError::Overlay(e).into()),
                    }
                    match root.symlink_metadata(crate::git::AI_DIR) {
                        Ok(meta) if meta.is_dir() => Ok((
                            None,
                            Some("the worktree had no .ai: an empty directory was made there for upstream's to be mounted on".to_owned()),
                        )),
                        _ => Err(SessionError::AiNotADirectory("not a directory")),
                    }
                }
                Err(e) => Err(GitError::Overlay(e).into()),
            };
        }
        let lock = repo.lock_worktree(worktree.path())?;
        let replaced = crate::git::write_over(repo, worktree, copy)?;
        Ok((
            Some(lock),
            Some(format!(
                "no sandbox binds upstream's .ai/ here (the helper runs unsandboxed), so it was written into the worktree{}; runs on this worktree take turns",
                if replaced {
                    ", replacing the pull request's .ai"
                } else {
                    ""
                }
            )),
        ))
    }

    /// Steps 5 and 6: runs the plan on `sandbox` (with `stdin` as its standard input, if
    /// given) and writes the audit line; a refused request is audited and returned as the
    /// error. Nothing runs when the policy's audit log cannot be written.
    pub async fn run(
        &self,
        sandbox: &dyn Sandbox,
        prepared: Prepared,
        stdin: Option<Vec<u8>>,
    ) -> Result<(Plan, wrun_runtime::Outcome), SessionError> {
        let log = self.policy.audit.log.clone();
        if let Some(log) = &log {
            audit::open(log).map_err(|source| SessionError::Audit {
                path: log.clone(),
                source,
            })?;
        }
        let refuse = |e: SessionError| -> Result<(Plan, wrun_runtime::Outcome), SessionError> {
            if let Some(log) = &log {
                let status = Status::Refused {
                    reason: e.to_string(),
                };
                let decisions = vec![format!("refused: {e}")];
                let record = Record::refusal(
                    &prepared.name,
                    prepared.source.as_ref(),
                    &decisions,
                    &status,
                    e.rule(),
                );
                audit::append(log, &record).map_err(|source| SessionError::Audit {
                    path: log.clone(),
                    source,
                })?;
            }
            Err(e)
        };
        let mut plan = match prepared.plan {
            Ok(plan) => plan,
            Err(e) => return refuse(e),
        };
        let (_turn, note) = match self.place_ai(sandbox, &plan, prepared.place.as_ref()).await {
            Ok(placed) => placed,
            Err(e) => return refuse(e),
        };
        if let Some(note) = &note {
            plan.decisions.push(note.clone());
        }
        let mut job = plan.job.clone();
        if let Some(bytes) = stdin {
            job = job.stdin(bytes);
        }
        let limits = job.parts().limits.clone();
        let mut outcome = sandbox.run(job).await?;
        outcome.notes.extend(note);
        if let Some(log) = &log {
            let record = Record::new(
                &plan.helper,
                Some(&plan.source),
                &plan.program,
                &plan.decisions,
                &limits,
                &outcome,
            );
            audit::append(log, &record).map_err(|source| SessionError::Audit {
                path: log.clone(),
                source,
            })?;
        }
        Ok((plan, outcome))
    }
}
