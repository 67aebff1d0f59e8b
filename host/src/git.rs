//! Layer 1: configuration and `.ai/` scripts come only from the upstream repository's default
//! branch, and host-side git runs no program that a repository or a pull request chooses.
//!
//! - **Where upstream is** is the operator's to say: a URL from the policy (`[upstream] url`)
//!   or the request (`--upstream`), or the URL of the worktree's remote named by `--base`, which
//!   must then be one the policy allows (`[upstream] allow`). Either way it must be an
//!   `https`, `ssh`, `git` or `file` URL (or an absolute path): no `ext::` or other remote
//!   helper, no option-looking URL, no relative path, nothing inside the worktree.
//! - **The pull request's repository is never given to git.** Its remote's URL is read from
//!   the bytes of its `.git/config` by `git config --file -` (no includes, no repository), and
//!   nothing else of it is read: not its configuration, hooks, alternates or info files.
//! - **Fetches run in a repository wrun owns**: one bare repository per upstream URL under
//!   wrun's state directory, created by wrun, with only wrun's configuration; git runs with a
//!   cleared environment, no system or global configuration, and on the command line every
//!   hook, filter, helper, proxy and external program turned off, `protocol.allow=never` but
//!   for `file`, `git`, `ssh` and `https`.
//! - Files of upstream's `.ai/` are read from that repository's objects (`cat-file`), never
//!   checked out (which would apply `.gitattributes` filters), into a copy in wrun's storage
//!   that helpers see at the worktree's `.ai/` ([`AiCopy`]); only where nothing can bind it is
//!   it written into the worktree ([`write_over`]), through a directory handle, with
//!   descriptors bounded whatever the depth.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, DirBuilder, OpenOptions, Permissions};

/// The directory upstream owns in every worktree.
pub const AI_DIR: &str = ".ai";

/// The largest `.git/config` read to find a remote's URL.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A git operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// git could not be started.
    #[error("cannot run git ({}): {source}; install git or put it on PATH", git.display())]
    Spawn {
        /// The binary tried.
        git: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// git ran and failed.
    #[error("git {args} failed in {}: {stderr}", repo.display())]
    Failed {
        /// The repository.
        repo: PathBuf,
        /// The arguments, joined.
        args: String,
        /// git's own message.
        stderr: String,
    },
    /// A ref is not of the form `REMOTE/BRANCH` or has characters git would read as options.
    #[error("base ref {0:?} is not REMOTE/BRANCH (for example origin/main)")]
    BadRef(String),
    /// The upstream URL is refused.
    #[error("upstream URL {url:?} refused: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why, and what is allowed.
        reason: String,
    },
    /// No upstream could be determined.
    #[error("{0}")]
    NoUpstream(String),
    /// git inside the sandbox cannot be kept from the repository's configuration.
    #[error("{0}")]
    Unisolable(String),
    /// A file of upstream's `.ai/` is larger than wrun reads.
    #[error("upstream's {path} is {size} bytes, more than the {max} wrun reads")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The most wrun reads.
        max: u64,
    },
    /// The directory given as the repository is not a git worktree.
    #[error(
        "{} is not a git worktree (no .git in it); point --repo at the pull request's clone. Nothing in it was changed",
        .0.display()
    )]
    NotAWorktree(PathBuf),
    /// wrun's own storage could not be used.
    #[error("wrun's upstream storage {}: {reason}", path.display())]
    Storage {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Writing the overlay into the worktree failed.
    #[error("cannot write upstream's .ai/ into the worktree: {0}")]
    Overlay(#[source] std::io::Error),
    /// Upstream could not be fetched: nothing runs, and the worktree is left as it was.
    #[error(
        "upstream {base} could not be fetched, so no helper runs (fail closed; the worktree was not changed): {cause}"
    )]
    FetchFailed {
        /// The ref.
        base: String,
        /// git's message.
        cause: String,
    },
}

/// The base ref of a review: a remote and its default branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRef {
    /// The remote (`origin`).
    pub remote: String,
    /// The branch (`main`).
    pub branch: String,
}

impl BaseRef {
    /// Parses `REMOTE/BRANCH`. Names that start with `-`, contain `..`, whitespace, control
    /// characters or any of git's ref metacharacters are refused.
    pub fn parse(text: &str) -> Result<Self, GitError> {
        let bad = || GitError::BadRef(text.to_owned());
        let (remote, branch) = text.split_once('/').ok_or_else(bad)?;
        let valid = |s: &str| {
            !s.is_empty()
                && !s.starts_with(['-', '.', '/'])
                && !s.ends_with(['/', '.'])
                && !s.contains("..")
                && !s.contains("//")
                && !s.ends_with(".lock")
                && !s
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\@{}".contains(c))
        };
        if !valid(remote) || remote.contains('/') || !valid(branch) {
            return Err(bad());
        }
        Ok(Self {
            remote: remote.to_owned(),
            branch: branch.to_owned(),
        })
    }

    /// The ref wrun's own repository keeps the fetched branch at.
    fn wrun_ref(&self) -> String {
        format!("refs/wrun/heads/{}", self.branch)
    }
}

impl std::fmt::Display for BaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.remote, self.branch)
    }
}

/// An upstream URL that passed the rules: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl(String);

impl UpstreamUrl {
    /// Checks `url`. `worktree` and `repo`: directories a local upstream may not lie in.
    pub fn parse(url: &str, worktree: &Path, repo: &Path) -> Result<Self, GitError> {
        let bad = |reason: &str| GitError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if url.contains("::") {
            return Err(bad(
                "`TRANSPORT::ADDRESS` runs a remote helper (git-remote-TRANSPORT), such as ext:: which runs any command",
            ));
        }
        if url.is_empty() || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(bad("it is empty or contains whitespace or control characters"));
        }
        if url.starts_with('-') {
            return Err(bad("it starts with `-`, which git would read as an option"));
        }
        let local = if let Some(rest) = url.strip_prefix("file://") {
            Some(rest)
        } else if let Some((scheme, rest)) = url.split_once("://") {
            if !matches!(scheme, "https" | "ssh" | "git") {
                return Err(bad("the scheme must be https, ssh, git or file"));
            }
            // ssh://-oProxyCommand=… and friends (CVE-2017-1000117): no host starting with `-`.
            let host = rest.split(['/', '@']).find(|s| !s.is_empty()).unwrap_or("");
            if rest.starts_with('-') || host.starts_with('-') || rest.contains("@-") {
                return Err(bad("the host starts with `-`"));
            }
            None
        } else if url.starts_with('/') {
            Some(url)
        } else if let Some((user_host, _)) = url.split_once(':')
            && !user_host.contains('/')
        {
            // scp-like `user@host:path`, which git reaches over ssh.
            if user_host.starts_with('-') || user_host.contains("@-") {
                return Err(bad("the host starts with `-`"));
            }
            None
        } else {
            return Err(bad(
                "a relative path is resolved inside the repository (a pull request could provide it); give an absolute path or a URL",
            ));
        };
        if let Some(path) = local {
            let path = Path::new(path);
            if !path.is_absolute() {
                return Err(bad("a file URL must name an absolute path"));
            }
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
            for inside in [worktree, repo] {
                let inside = std::fs::canonicalize(inside).unwrap_or_else(|_| inside.to_owned());
                if real.starts_with(&inside) {
                    return Err(bad(
                        "it lies inside the pull request's repository or worktree, which the pull request controls",
                    ));
                }
            }
        }
        Ok(Self(url.to_owned()))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where the upstream URL comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlSource {
    /// The operator named it (policy or request).
    Operator,
    /// The worktree's remote, found in the policy's allowlist.
    AllowedRemote,
}

/// Finds the upstream URL: `configured` if the operator gave one, else the URL of the
/// worktree's remote `base.remote`, which must be in `allow`.
///
/// # Security
/// Reads the repository's `.git/config` as data (bounded) and hands it to `git config --file -`
/// run outside any repository: no include is followed and nothing of the repository runs.
pub fn upstream_url(
    git: &Path,
    repo: &Path,
    worktree: &Path,
    base: &BaseRef,
    configured: Option<&str>,
    allow: &[String],
) -> Result<(UpstreamUrl, UrlSource), GitError> {
    if let Some(url) = configured {
        return Ok((UpstreamUrl::parse(url, worktree, repo)?, UrlSource::Operator));
    }
    if allow.is_empty() {
        return Err(GitError::NoUpstream(
            "no upstream is configured: set [upstream] url (or allow the worktree's remote URL in [upstream] allow) in the policy, or pass --upstream URL"
                .into(),
        ));
    }
    let config = read_config(repo)?;
    let key = format!("remote.{}.url", base.remote);
    let out = run_git(
        git,
        Path::new("/"),
        &[
            "config",
            "--file",
            "-",
            "--no-includes",
            "--get-all",
            "--end-of-options",
            &key,
        ],
        Some(&config),
    );
    let urls = match out {
        Ok(out) => String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
        Err(GitError::Failed { .. }) => Vec::new(),
        Err(e) => return Err(e),
    };
    let url = match urls.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(GitError::NoUpstream(format!(
                "the repository has no remote {:?} (--base {base}); name a configured remote, or set [upstream] url in the policy",
                base.remote
            )));
        }
        _ => {
            return Err(GitError::NoUpstream(format!(
                "the repository's remote {:?} has several URLs; set [upstream] url in the policy",
                base.remote
            )));
        }
    };
    UpstreamUrl::parse(&url, worktree, repo)?;
    // What is fetched is the operator's entry, never the remote's spelling of it: `…/up`
    // allowed does not let the remote name a `…/up.git` beside it.
    let Some(allowed) = allow.iter().find(|a| same_url(a, &url)) else {
        return Err(GitError::BadUrl {
            url,
            reason: "it is not in the policy's [upstream] allow list (the worktree's remote is the pull request's to set)".into(),
        });
    };
    Ok((
        UpstreamUrl::parse(allowed, worktree, repo)?,
        UrlSource::AllowedRemote,
    ))
}

/// Whether two URLs name the same repository: equal up to a trailing `/` or `.git`.
fn same_url(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.trim_end_matches('/').trim_end_matches(".git").to_owned();
    norm(a) == norm(b)
}

/// The bytes of the repository's configuration file: `.git/config`, or for a linked worktree
/// (`.git` a file naming its gitdir) the common directory's.
fn read_config(repo: &Path) -> Result<Vec<u8>, GitError> {
    let dot_git = repo.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).map_err(|_| GitError::NotAWorktree(repo.to_owned()))?;
    let gitdir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        let text = read_bounded(&dot_git)?;
        let text = String::from_utf8_lossy(&text);
        let target = text
            .lines()
            .find_map(|l| l.strip_prefix("gitdir:"))
            .map(str::trim)
            .ok_or_else(|| GitError::NotAWorktree(repo.to_owned()))?;
        let gitdir = repo.join(target);
        match read_bounded(&gitdir.join("commondir")) {
            Ok(common) => gitdir.join(String::from_utf8_lossy(&common).trim()),
            Err(_) => gitdir,
        }
    } else {
        return Err(GitError::NotAWorktree(repo.to_owned()));
    };
    read_bounded(&gitdir.join("config"))
}

/// [`read_bounded`], beneath a directory handle.
fn read_bounded_in(root: &Dir, path: &Path) -> Result<Vec<u8>, GitError> {
    use std::io::Read;
    let storage = |reason: String| GitError::Storage {
        path: path.to_owned(),
        reason,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    cap_fs_ext::OpenOptionsFollowExt::follow(&mut options, cap_fs_ext::FollowSymlinks::No);
    cap_std::fs::OpenOptionsExt::custom_flags(&mut options, nix::fcntl::OFlag::O_NONBLOCK.bits());
    let file = root
        .open_with(path, &options)
        .map_err(|e| storage(format!("cannot read it: {e}")))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(storage("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| storage(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(storage(format!("larger than {MAX_CONFIG_BYTES} bytes")));
    }
    Ok(bytes)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, GitError> {
    use std::io::Read;
    let storage = |reason: String| GitError::Storage {
        path: path.to_owned(),
        reason,
    };
    use std::os::unix::fs::OpenOptionsExt;
    // Never a link (it could name any file of the host) and never a FIFO or device (a read
    // would wait forever): a regular file, or nothing.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| storage(format!("cannot read it: {e}")))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(storage("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| storage(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(storage(format!("larger than {MAX_CONFIG_BYTES} bytes")));
    }
    Ok(bytes)
}

/// Refuses a `--repo` (or `--worktree`) that is not a git worktree, before anything in it is
/// touched.
pub fn check_worktree(repo: &Path) -> Result<(), GitError> {
    match std::fs::symlink_metadata(repo.join(".git")) {
        Ok(m) if m.is_dir() || m.is_file() => Ok(()),
        _ => Err(GitError::NotAWorktree(repo.to_owned())),
    }
}

/// The largest file of upstream's `.ai/` wrun writes into a worktree.
pub const MAX_AI_FILE: u64 = 256 << 20;

/// The configuration every git call gets on the command line. (`diff.external` cannot be set
/// by any configuration git reads here, and an empty value would make git run "" for a patch.)
const HARDENING: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.sshCommand=ssh",
    "core.gitProxy=",
    "core.askPass=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "gpg.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.ssh.allow=always",
    "protocol.https.allow=always",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "transfer.fsckObjects=true",
    "safe.bareRepository=all",
    "advice.detachedHead=false",
];

/// Runs git with a cleared environment and [`HARDENING`] in `dir`, feeding `stdin`.
///
/// # Security
/// Starts a process with wrun's authority, with a cleared environment (only `PATH`, `HOME`
/// pointing nowhere and git's own switches), no system or global configuration, and every
/// hook, filter, helper and external program turned off on the command line. `dir` is never
/// the pull request's repository.
#[allow(clippy::disallowed_methods)] // the host's one git entry point, hardened above
fn run_git(git: &Path, dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, GitError> {
    let mut command = Command::new(git);
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .current_dir(dir)
        .arg("-c")
        .arg(format!("safe.directory={}", dir.display()));
    for setting in HARDENING {
        command.arg("-c").arg(setting);
    }
    command
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn = |source| GitError::Spawn {
        git: git.to_owned(),
        source,
    };
    let mut child = command.spawn().map_err(spawn)?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).map_err(spawn)?;
    }
    let output = child.wait_with_output().map_err(spawn)?;
    if !output.status.success() {
        return Err(GitError::Failed {
            repo: dir.to_owned(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output.stdout)
}

/// wrun's own bare repository for one upstream URL.
#[derive(Debug, Clone)]
pub struct Upstream {
    git: PathBuf,
    dir: PathBuf,
    url: UpstreamUrl,
}

impl Upstream {
    /// Opens (creating it if needed) the repository for `url` under `store`, a directory only
    /// wrun's user may write (created `0700`).
    ///
    /// # Security
    /// Creates and checks directories under `store` with wrun's authority.
    pub fn open(git: PathBuf, store: &Path, url: UpstreamUrl) -> Result<Self, GitError> {
        ensure_private_dir(store)?;
        use sha2::Digest;
        let digest = sha2::Sha256::digest(url.as_str().as_bytes());
        let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        let dir = store.join(format!("{name}.git"));
        let this = Self { git, dir, url };
        if !this.dir.join("HEAD").is_file() {
            let _lock = this.lock()?;
            if !this.dir.join("HEAD").is_file() {
                std::fs::create_dir_all(&this.dir).map_err(|e| GitError::Storage {
                    path: this.dir.clone(),
                    reason: format!("cannot create it: {e}"),
                })?;
                run_git(&this.git, &this.dir, &["init", "--quiet", "--bare"], None)?;
            }
        }
        Ok(this)
    }

    /// The repository's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The upstream URL.
    pub fn url(&self) -> &UpstreamUrl {
        &self.url
    }

    /// An exclusive lock on the repository, for a fetch (two runs may share it).
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, GitError> {
        let path = self.dir.with_extension("lock");
        let storage = |reason: String| GitError::Storage {
            path: path.clone(),
            reason,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| storage(format!("cannot open it: {e}")))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| storage(format!("cannot lock it: {e}")))
    }

    /// Fetches `base.branch` from the upstream URL into wrun's ref for it.
    pub fn fetch(&self, base: &BaseRef) -> Result<(), GitError> {
        let _lock = self.lock()?;
        let refspec = format!("+refs/heads/{}:{}", base.branch, base.wrun_ref());
        run_git(
            &self.git,
            &self.dir,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-recurse-submodules",
                "--no-write-fetch-head",
                "--upload-pack=git-upload-pack",
                "--end-of-options",
                self.url.as_str(),
                &refspec,
            ],
            None,
        )
        .map(drop)
    }

    /// The commit wrun last fetched for `base`.
    pub fn commit_of(&self, base: &BaseRef) -> Result<String, GitError> {
        let spec = format!("{}^{{commit}}", base.wrun_ref());
        let out = run_git(
            &self.git,
            &self.dir,
            &["rev-parse", "--verify", "--quiet", "--end-of-options", &spec],
            None,
        )
        .map_err(|_| {
            GitError::NoUpstream(format!(
                "{base} was never fetched from {}; run without --no-fetch",
                self.url.as_str()
            ))
        })?;
        let id = String::from_utf8_lossy(&out).trim().to_owned();
        if id.len() < 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GitError::Failed {
                repo: self.dir.clone(),
                args: format!("rev-parse {spec}"),
                stderr: format!("unexpected output {id:?}"),
            });
        }
        Ok(id)
    }

    /// The bytes of `path` at `commit` (`git cat-file blob COMMIT:PATH`, never textconv'd), if
    /// it is at most `max` bytes (asked of git before the blob is read).
    pub fn read(&self, commit: &str, path: &str, max: u64) -> Result<Vec<u8>, GitError> {
        let object = format!("{commit}:{path}");
        self.check_size(&object, path, max)?;
        run_git(&self.git, &self.dir, &["cat-file", "blob", &object], None)
    }

    /// Refuses an object larger than `max` bytes.
    fn check_size(&self, object: &str, path: &str, max: u64) -> Result<(), GitError> {
        let size = run_git(&self.git, &self.dir, &["cat-file", "-s", object], None)?;
        let size: u64 = String::from_utf8_lossy(&size).trim().parse().unwrap_or(u64::MAX);
        if size > max {
            return Err(GitError::TooLarge {
                path: path.to_owned(),
                size,
                max,
            });
        }
        Ok(())
    }

    /// The files under `.ai/` at `commit`: `(mode, blob id, path)`.
    fn ai_tree(&self, commit: &str) -> Result<Vec<(String, String, String)>, GitError> {
        let out = run_git(
            &self.git,
            &self.dir,
            &["ls-tree", "-r", "-z", "--full-tree", commit, "--", AI_DIR],
            None,
        )?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (meta, path) = entry.split_once('\t')?;
                let mut meta = meta.split(' ');
                let (mode, kind, id) = (meta.next()?, meta.next()?, meta.next()?);
                (kind == "blob").then(|| (mode.to_owned(), id.to_owned(), path.to_owned()))
            })
            .collect())
    }

    fn blob(&self, id: &str, path: &str) -> Result<Vec<u8>, GitError> {
        self.check_size(id, path, MAX_AI_FILE)?;
        run_git(&self.git, &self.dir, &["cat-file", "blob", id], None)
    }

    /// An empty directory of wrun's (made if missing), to hide a directory of the worktree
    /// behind in the sandbox.
    pub fn empty_dir(&self) -> Result<PathBuf, GitError> {
        let dir = self.dir.parent().unwrap_or(&self.dir).join("empty");
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(|e| GitError::Storage {
                path: dir.clone(),
                reason: format!("cannot create it: {e}"),
            })?;
        }
        Ok(dir)
    }

    /// A file of wrun's holding `{}` (made if missing), to hide a JSON file of the worktree
    /// behind in the sandbox.
    pub fn empty_json(&self) -> Result<PathBuf, GitError> {
        let path = self.dir.parent().unwrap_or(&self.dir).join("empty.json");
        if !path.is_file() {
            write_atomically(&path, b"{}\n")?;
        }
        Ok(path)
    }

    /// How git inside a shell helper's sandbox is kept from the repository's configuration:
    /// a configuration file to bind read-only over the worktree's `.git/config` (only what git
    /// needs to read the repository: its format version and the extensions that change how
    /// objects and refs are stored; nothing that names a program, a driver, a hook directory, an
    /// include or another work tree), and the nested repositories' git directories (submodules,
    /// embedded repositories, `.git/modules`) to hide behind empty ones, since git recursing
    /// into one would read its configuration. Where the configuration cannot be replaced (a
    /// `.git` file, a common directory elsewhere, a `.git/config` that is not a regular file),
    /// the whole `.git` is hidden instead; a `.git` that is a symbolic link is refused.
    ///
    /// # Security
    /// Reads the worktree's `.git/config` as data, hands it to `git config --file -` outside any
    /// repository, and writes the result into wrun's storage (content-addressed, `0600`).
    ///
    /// `protected` is the worktree's [`crate::protect::scan`]: its nested repositories are hidden.
    pub fn isolate_git(
        &self,
        worktree: &crate::worktree::Worktree,
        protected: &[PathBuf],
    ) -> Result<GitIsolation, GitError> {
        let root = worktree.dir();
        let store = self.dir.parent().unwrap_or(&self.dir).to_owned();
        let mut isolation = GitIsolation {
            config: None,
            hide: Vec::new(),
            unisolable: None,
            empty_dir: store.join("empty"),
            empty_file: store.join("empty-file"),
        };
        let hide_all =
            |mut isolation: GitIsolation, reason: &str, dir: bool| -> Result<GitIsolation, GitError> {
                isolation.unisolable = Some(reason.to_owned());
                isolation.hide = vec![(PathBuf::from(".git"), dir)];
                ensure_empties(&isolation)?;
                Ok(isolation)
            };
        match root.symlink_metadata(".git") {
            Err(_) => return Ok(isolation),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(GitError::Unisolable(
                    "the worktree's .git is a symbolic link, which git in the sandbox would follow out of it; check the pull request out as a plain clone".to_owned(),
                ));
            }
            Ok(m) if !m.is_dir() => {
                return hide_all(
                    isolation,
                    "its .git is a git file naming another directory",
                    false,
                );
            }
            Ok(_) => {}
        }
        if root.symlink_metadata(".git/commondir").is_ok() {
            return hide_all(isolation, "its .git names a common directory elsewhere", true);
        }
        match root.symlink_metadata(".git/config") {
            Ok(m) if m.is_file() => {}
            _ => return hide_all(isolation, "its .git/config is not a regular file", true),
        }
        let config = read_bounded_in(root, Path::new(".git/config"))?;
        let mut out = String::from(
            "# written by wrun: the repository's own configuration is not read\n[core]\n\tbare = false\n",
        );
        for (key, name) in [
            ("core.repositoryformatversion", "repositoryformatversion"),
            ("extensions.objectformat", "objectformat"),
            ("extensions.refstorage", "refstorage"),
        ] {
            let value = run_git(
                &self.git,
                Path::new("/"),
                &[
                    "config",
                    "--file",
                    "-",
                    "--no-includes",
                    "--get",
                    "--end-of-options",
                    key,
                ],
                Some(&config),
            );
            let Ok(value) = value else { continue };
            let value = String::from_utf8_lossy(&value).trim().to_owned();
            if !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') || value.is_empty() {
                continue;
            }
            if name == "repositoryformatversion" {
                out.push_str(&format!("\t{name} = {value}\n"));
            } else {
                out.push_str(&format!("[extensions]\n\t{name} = {value}\n"));
            }
        }
        let configs = store.join("gitconfig");
        ensure_private_dir(&configs)?;
        use sha2::Digest;
        let digest = sha2::Sha256::digest(out.as_bytes());
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let path = configs.join(format!("{name}.config"));
        if !path.is_file() {
            write_atomically(&path, out.as_bytes())?;
        }
        isolation.config = Some(path);
        // Nested repositories' git directories, found as the writable-worktree protection finds
        // them, and the submodules' store.
        for p in protected.iter().cloned() {
            if crate::protect::TOP_LEVEL.iter().any(|t| p == Path::new(t)) {
                continue;
            }
            if let Ok(meta) = root.symlink_metadata(&p) {
                if meta.file_type().is_symlink() {
                    // Hiding it would bind over the link's target, wherever that is.
                    return Err(GitError::Unisolable(format!(
                        "the worktree's nested {} is a symbolic link, which git in the sandbox would follow and which cannot be hidden; remove it from the pull request",
                        p.display()
                    )));
                }
                isolation.hide.push((p, meta.is_dir()));
            }
        }
        if root.symlink_metadata(".git/modules").is_ok_and(|m| m.is_dir()) {
            isolation.hide.push((PathBuf::from(".git/modules"), true));
        }
        // A directory hidden hides what is inside it (`.git/modules` holds the absorbed
        // submodules' git directories); a second mount inside the first would fail.
        let dirs: Vec<PathBuf> = isolation
            .hide
            .iter()
            .filter(|(_, dir)| *dir)
            .map(|(p, _)| p.clone())
            .collect();
        isolation
            .hide
            .retain(|(p, _)| !dirs.iter().any(|d| p != d && p.starts_with(d)));
        isolation.hide.sort();
        isolation.hide.dedup();
        ensure_empties(&isolation)?;
        Ok(isolation)
    }
}

/// Makes the empty directory and file a hiding bind needs.
fn ensure_empties(isolation: &GitIsolation) -> Result<(), GitError> {
    if isolation.hide.is_empty() {
        return Ok(());
    }
    if !isolation.empty_dir.is_dir() {
        std::fs::create_dir_all(&isolation.empty_dir).map_err(|e| GitError::Storage {
            path: isolation.empty_dir.clone(),
            reason: format!("cannot create it: {e}"),
        })?;
    }
    if !isolation.empty_file.is_file() {
        write_atomically(&isolation.empty_file, b"")?;
    }
    Ok(())
}

/// How git inside a shell helper's sandbox is isolated (see [`Upstream::isolate_git`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitIsolation {
    /// wrun's configuration file, to bind over `.git/config`; `None` without a `.git`.
    pub config: Option<PathBuf>,
    /// Git directories of nested repositories (relative to the worktree) to hide, and whether
    /// each is a directory (else a git file).
    pub hide: Vec<(PathBuf, bool)>,
    /// Why the repository's configuration could not be replaced (a `.git` file, a common
    /// directory elsewhere): its whole `.git` is then hidden, and git finds no repository.
    pub unisolable: Option<String>,
    /// An empty directory of wrun's, to hide a directory behind.
    pub empty_dir: PathBuf,
    /// An empty file of wrun's, to hide a git file behind.
    pub empty_file: PathBuf,
}

/// Writes `bytes` to `path` (mode `0600`) through a temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), GitError> {
    use std::os::unix::fs::OpenOptionsExt;
    let storage = |e: std::io::Error| GitError::Storage {
        path: path.to_owned(),
        reason: format!("cannot write it: {e}"),
    };
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(storage)?;
        file.write_all(bytes).map_err(storage)?;
    }
    std::fs::rename(&tmp, path).map_err(storage)
}

/// Creates `dir` (and parents) `0700` if missing; refuses it if another user owns it or others
/// may write it.
fn ensure_private_dir(dir: &Path) -> Result<(), GitError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let storage = |reason: String| GitError::Storage {
        path: dir.to_owned(),
        reason,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| storage(format!("cannot create it: {e}")))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| storage(format!("cannot inspect it: {e}")))?;
    if !meta.is_dir() {
        return Err(storage("it is not a directory".into()));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(storage("another user owns it".into()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(storage("others may write it; chmod go-w it".into()));
    }
    Ok(())
}

/// Upstream's `.ai/` at one commit, as wrun keeps it: a directory of wrun's storage, one per
/// `.ai` tree (content-addressed by git's tree id, shared by every commit with that tree),
/// written once and reused. Helpers see it at the worktree's `.ai/` (a read-only bind, a
/// preopen); the worktree's own `.ai` is the pull request's and is neither read nor changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AiCopy {
    /// The commit it was read from.
    pub commit: String,
    /// Its directory in wrun's storage.
    pub path: PathBuf,
    /// Files (and links inside it) it holds.
    pub files: usize,
    /// Upstream's symbolic links that point out of `.ai/` (into what the pull request
    /// controls), not written: `link -> target`.
    pub links_out: Vec<String>,
    /// Whether an earlier run had written it.
    pub reused: bool,
}

/// What the manifest next to a copy records.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Manifest {
    files: usize,
    links_out: Vec<String>,
}

impl Upstream {
    /// The commit `base` names, fetched first unless `fetch` is false. Nothing in any worktree
    /// is touched: when the fetch fails, the request is refused.
    pub fn base_commit(&self, base: &BaseRef, fetch: bool) -> Result<String, GitError> {
        let fetched = if fetch { self.fetch(base) } else { Ok(()) };
        fetched
            .and_then(|()| self.commit_of(base))
            .map_err(|e| GitError::FetchFailed {
                base: base.to_string(),
                cause: e.to_string(),
            })
    }

    /// Upstream's `.ai/` at `commit`, written into wrun's storage if no run has yet (an empty
    /// directory when upstream has none).
    ///
    /// # Security
    /// Writes only under wrun's own storage (`0700`), through a temporary directory renamed
    /// into place, so a copy is whole or absent; blobs come from git's objects, never a
    /// checkout; links that leave `.ai/` are not written.
    pub fn ai_copy(&self, commit: &str) -> Result<AiCopy, GitError> {
        let store = self.dir.parent().unwrap_or(&self.dir).join("ai");
        ensure_private_dir(&store)?;
        let tree = self.ai_tree_id(commit)?;
        let path = store.join(&tree);
        let manifest_path = store.join(format!("{tree}.json"));
        let read_manifest = || -> Option<Manifest> {
            let bytes = std::fs::read(&manifest_path).ok()?;
            serde_json::from_slice(&bytes).ok()
        };
        if path.is_dir()
            && let Some(m) = read_manifest()
        {
            return Ok(AiCopy {
                commit: commit.to_owned(),
                path,
                files: m.files,
                links_out: m.links_out,
                reused: true,
            });
        }
        let storage = |e: std::io::Error| GitError::Storage {
            path: store.clone(),
            reason: format!("cannot write upstream's .ai/ into it: {e}"),
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = store.join(format!(".tmp-{tree}-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(storage)?;
        let written = Dir::open_ambient_dir(&tmp, cap_std::ambient_authority())
            .map_err(storage)
            .and_then(|dir| self.write_ai(&dir, commit));
        let (files, links_out) = match written {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let manifest = serde_json::to_vec(&Manifest {
            files,
            links_out: links_out.clone(),
        })
        .map_err(|e| storage(std::io::Error::other(e)))?;
        write_atomically(&manifest_path, &manifest)?;
        if let Err(e) = std::fs::rename(&tmp, &path) {
            // Another run wrote the same tree first: its copy is as good.
            let _ = std::fs::remove_dir_all(&tmp);
            if !path.is_dir() {
                return Err(storage(e));
            }
        }
        Ok(AiCopy {
            commit: commit.to_owned(),
            path,
            files,
            links_out,
            reused: false,
        })
    }

    /// The id of the `.ai` tree at `commit`, or `empty` when upstream has no `.ai` directory.
    fn ai_tree_id(&self, commit: &str) -> Result<String, GitError> {
        let out = run_git(
            &self.git,
            &self.dir,
            &["ls-tree", "-z", "--full-tree", commit, "--", AI_DIR],
            None,
        )?;
        let entry = String::from_utf8_lossy(&out);
        let entry = entry.trim_end_matches('\0');
        let id = entry
            .split_once('\t')
            .and_then(|(meta, _)| {
                let mut meta = meta.split(' ');
                let (_, kind, id) = (meta.next()?, meta.next()?, meta.next()?);
                (kind == "tree").then(|| id.to_owned())
            })
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit()));
        Ok(id.unwrap_or_else(|| "empty".to_owned()))
    }

    /// Writes the files of `.ai/` at `commit` into `root` (as `.ai/x` becomes `x`). Returns
    /// the files written and the links left out.
    fn write_ai(&self, root: &Dir, commit: &str) -> Result<(usize, Vec<String>), GitError> {
        let entries = self.ai_tree(commit)?;
        let mut files = 0;
        let mut links_out = Vec::new();
        for (mode, id, path) in entries {
            let full = Path::new(&path);
            let Ok(rel) = full.strip_prefix(AI_DIR) else {
                continue;
            };
            if rel.as_os_str().is_empty()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                continue;
            }
            if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                let mut builder = DirBuilder::new();
                builder.recursive(true);
                root.create_dir_with(parent, &builder)
                    .map_err(GitError::Overlay)?;
            }
            let bytes = self.blob(&id, &path)?;
            if mode == "120000" {
                let target = String::from_utf8_lossy(&bytes).into_owned();
                // A link out of `.ai/` reaches files the pull request writes: upstream code would
                // run the pull request's.
                if !stays_in_ai(full, &target) {
                    links_out.push(format!("{path} -> {target}"));
                    continue;
                }
                root.symlink(target, rel).map_err(GitError::Overlay)?;
            } else {
                let mut options = OpenOptions::new();
                options.write(true).create_new(true);
                let mut file = root.open_with(rel, &options).map_err(GitError::Overlay)?;
                file.write_all(&bytes).map_err(GitError::Overlay)?;
                let executable = mode == "100755";
                use cap_std::fs::PermissionsExt;
                file.set_permissions(Permissions::from_mode(if executable { 0o755 } else { 0o644 }))
                    .map_err(GitError::Overlay)?;
            }
            files += 1;
        }
        Ok((files, links_out))
    }

    /// An exclusive lock on one worktree's `.ai`, for runs that must write upstream's `.ai/`
    /// into it (where nothing can bind it): held for the whole run, so such runs on one
    /// worktree take turns.
    ///
    /// # Security
    /// The lock file lives in wrun's storage, named by a hash of the worktree's path.
    pub fn lock_worktree(&self, worktree: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, GitError> {
        let dir = self.dir.parent().unwrap_or(&self.dir).join("locks");
        ensure_private_dir(&dir)?;
        use sha2::Digest;
        let digest = sha2::Sha256::digest(worktree.as_os_str().as_encoded_bytes());
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{name}.lock"));
        let storage = |reason: String| GitError::Storage {
            path: path.clone(),
            reason,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| storage(format!("cannot open it: {e}")))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| storage(format!("cannot lock it: {e}")))
    }
}

/// Where no confinement can bind upstream's `.ai/` over the worktree's (a helper run without a
/// sandbox), the overlay of seed 001: the worktree's `.ai` (whatever it is: directory, file or
/// symlink) is deleted and upstream's written in its place. The caller holds
/// [`Upstream::lock_worktree`]. Returns whether the worktree had a `.ai` of its own.
///
/// # Security
/// Makes every change through the worktree's handle: a `.ai` symlink is removed, never
/// followed.
pub fn write_over(
    upstream: &Upstream,
    worktree: &crate::worktree::Worktree,
    copy: &AiCopy,
) -> Result<bool, GitError> {
    let root = worktree.dir();
    let replaced = remove_ai(root).map_err(GitError::Overlay)?;
    root.create_dir(AI_DIR).map_err(GitError::Overlay)?;
    let ai = root.open_dir_nofollow(AI_DIR).map_err(GitError::Overlay)?;
    upstream.write_ai(&ai, &copy.commit)?;
    Ok(replaced)
}

/// Whether symbolic link `link` (a path under `.ai/`) with `target` points inside `.ai/`.
fn stays_in_ai(link: &Path, target: &str) -> bool {
    let target = Path::new(target);
    if target.is_absolute() {
        return false;
    }
    let mut at: Vec<std::ffi::OsString> = link
        .parent()
        .map(|p| p.iter().map(|c| c.to_owned()).collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            std::path::Component::Normal(n) => at.push(n.to_owned()),
            std::path::Component::ParentDir => {
                if at.pop().is_none() {
                    return false;
                }
            }
            std::path::Component::CurDir => {}
            _ => return false,
        }
    }
    at.first().is_some_and(|first| first == AI_DIR) && at.len() > 1
}

/// Removes the worktree's `.ai`, whatever it is. Returns whether there was one.
fn remove_ai(root: &Dir) -> std::io::Result<bool> {
    match root.symlink_metadata(AI_DIR) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => remove_tree(root, AI_DIR).map(|()| true),
        Ok(_) => root.remove_file(AI_DIR).map(|()| true),
    }
}

/// The deepest tree [`remove_tree`] removes; deeper is refused (a pull request can commit a
/// tree thousands of directories deep).
const MAX_REMOVE_DEPTH: usize = 65_536;

/// How many directories of the path being removed [`remove_tree`] keeps open at once.
const REMOVE_WINDOW: usize = 32;

/// Removes the directory `name` under `root` and everything in it, depth first, never
/// following a symlink and holding at most [`REMOVE_WINDOW`] descriptors whatever the depth
/// (a tree 1,800 directories deep ran out of descriptors): it keeps the deepest directories of
/// the path open, and reopens an ancestor from `root`, one component at a time, when it climbs
/// past them.
fn remove_tree(root: &Dir, name: &str) -> std::io::Result<()> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    let mut names: Vec<OsString> = vec![OsString::from(name)];
    let mut window: VecDeque<Dir> = VecDeque::from([root.open_dir_nofollow(name)?]);
    loop {
        if window.is_empty() {
            window = reopen(root, &names)?;
        }
        let Some(dir) = window.back() else {
            return Err(std::io::Error::other("no directory open"));
        };
        let mut sub = None;
        for entry in dir.entries()? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                sub = Some(entry.file_name());
                break;
            }
            dir.remove_file(entry.file_name())?;
        }
        match sub {
            Some(sub) => {
                if names.len() >= MAX_REMOVE_DEPTH {
                    return Err(std::io::Error::other(format!(
                        "the worktree's .ai/ is nested deeper than {MAX_REMOVE_DEPTH} directories; remove it by hand"
                    )));
                }
                let child = dir.open_dir_nofollow(&sub)?;
                names.push(sub);
                window.push_back(child);
                if window.len() > REMOVE_WINDOW {
                    window.pop_front();
                }
            }
            None => {
                window.pop_back();
                let Some(done) = names.pop() else {
                    return Ok(());
                };
                if names.is_empty() {
                    return root.remove_dir(&done);
                }
                if window.is_empty() {
                    window = reopen(root, &names)?;
                }
                match window.back() {
                    Some(parent) => parent.remove_dir(&done)?,
                    None => return Err(std::io::Error::other("no directory open")),
                }
            }
        }
    }
}

/// Opens the directories of `names` from `root` one component at a time (no symlink
/// followed) and keeps the last [`REMOVE_WINDOW`] of them.
fn reopen(root: &Dir, names: &[std::ffi::OsString]) -> std::io::Result<std::collections::VecDeque<Dir>> {
    let mut window = std::collections::VecDeque::new();
    let mut current: Option<Dir> = None;
    for name in names {
        let next = match &current {
            None => root.open_dir_nofollow(name)?,
            Some(dir) => dir.open_dir_nofollow(name)?,
        };
        if let Some(done) = current.take() {
            window.push_back(done);
            if window.len() >= REMOVE_WINDOW {
                window.pop_front();
            }
        }
        current = Some(next);
    }
    window.extend(current);
    Ok(window)
}

impl GitError {
    /// The rule this refusal comes from, as a stable id (for the audit log and hosts).
    pub fn rule(&self) -> &'static str {
        match self {
            GitError::Spawn { .. } => "git.unavailable",
            GitError::Failed { .. } => "git.failed",
            GitError::BadRef(_) => "upstream.base-ref",
            GitError::BadUrl { .. } => "upstream.url",
            GitError::NoUpstream(_) => "upstream.unknown",
            GitError::Unisolable(_) => "git.unisolable",
            GitError::TooLarge { .. } => "upstream.too-large",
            GitError::NotAWorktree(_) => "repo.not-a-worktree",
            GitError::Storage { .. } => "upstream.storage",
            GitError::Overlay(_) => "overlay.io",
            GitError::FetchFailed { .. } => "upstream.fetch",
        }
    }
}
#[cfg(test)]
mod tests {
    use cap_std::ambient_authority;

    use super::*;

    #[test]
    fn base_refs_are_remote_slash_branch_and_nothing_git_would_misread() {
        let b = BaseRef::parse("origin/main").expect("valid");
        assert_eq!(b.wrun_ref(), "refs/wrun/heads/main");
        assert_eq!(
            BaseRef::parse("upstream/release/1.2").expect("valid").branch,
            "release/1.2"
        );
        for bad in [
            "main",
            "-origin/main",
            "origin/--upload-pack=x",
            "origin/a..b",
            "origin/ma in",
            "origin/main.lock",
            "origin/",
            "/main",
            "origin/x:y",
            "origin/@{-1}",
            "origin/ma\nin",
        ] {
            assert!(BaseRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn upstream_urls_are_urls_of_allowed_schemes_outside_the_worktree() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wt = tmp.path().join("wt");
        std::fs::create_dir_all(wt.join("origin")).expect("mkdir");
        let up = tmp.path().join("up");
        std::fs::create_dir_all(&up).expect("mkdir");
        for good in [
            "https://github.com/psf/requests.git",
            "ssh://git@github.com/psf/requests.git",
            "git@github.com:psf/requests.git",
            "git://example.com/x.git",
            &format!("file://{}", up.display()),
            &up.display().to_string(),
        ] {
            assert!(UpstreamUrl::parse(good, &wt, &wt).is_ok(), "{good}");
        }
        for bad in [
            "ext::sh -c touch% /tmp/x",
            "fd::3",
            "http://example.com/x.git",
            "ftp://example.com/x",
            "-uoption",
            "ssh://-oProxyCommand=id/x",
            "ssh://user@-oProxyCommand=id/x",
            "-oProxyCommand=id:x",
            "./origin",
            "origin",
            "../up",
            &format!("file://{}", wt.join("origin").display()),
            &wt.join("origin").display().to_string(),
            &format!("{}/../wt/origin", up.display()),
            "https://exa mple.com/x",
            "",
        ] {
            assert!(UpstreamUrl::parse(bad, &wt, &wt).is_err(), "{bad:?} was accepted");
        }
        assert!(same_url("https://x/y.git", "https://x/y/"));
    }

    #[test]
    fn a_tree_thousands_deep_is_removed_with_few_descriptors() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Built through relative descriptors: the path is far longer than PATH_MAX.
        let root = Dir::open_ambient_dir(tmp.path(), ambient_authority()).expect("open");
        root.create_dir(AI_DIR).expect("mkdir");
        let mut dir = root.open_dir(AI_DIR).expect("open");
        for i in 0..1800 {
            dir.write(format!("f{i}"), b"x").expect("write");
            dir.create_dir("d").expect("mkdir");
            dir = dir.open_dir("d").expect("open");
        }
        drop(dir);
        assert!(remove_ai(&root).expect("removed"));
        assert!(!tmp.path().join(AI_DIR).exists());
    }
}
