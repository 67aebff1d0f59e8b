//! A fully resolved job: exactly what one helper run may see and use.
//!
//! The runtime runs the job it is given and nothing more: it never reads environment variables,
//! configuration files or `PATH`. Deciding what goes into a job is the host's business.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::env::{EnvOrigin, EnvVar};
use crate::limits::Limits;

/// What a directory grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories.
    ReadOnly,
    /// Also create, write, truncate, rename, link and remove.
    ReadWrite,
}

/// Whether native helpers must, may or must not run in their sandbox (bubblewrap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Refuse to run when the sandbox is unavailable. For production.
    Require,
    /// Sandbox when possible, else run unsandboxed and say so.
    Auto,
    /// Never sandbox. An escape hatch.
    Off,
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SandboxMode::Require => "require",
            SandboxMode::Auto => "auto",
            SandboxMode::Off => "off",
        })
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "require" => Ok(Self::Require),
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "invalid sandbox mode {other:?}: expected require, auto or off"
            )),
        }
    }
}

/// A host directory (or, for the native backend, a file) made visible to the helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the helper sees it: an absolute guest path such as `/work`.
    pub guest: String,
    /// What the helper may do in it.
    pub access: Access,
    /// Paths inside a writable mount (relative to it) that stay read-only: an existing one
    /// cannot be changed, replaced, renamed or removed, and one that does not exist cannot be
    /// created. Every backend enforces them or refuses the job (see [`Mount::protect`]).
    pub protected: Vec<PathBuf>,
    /// When set, nothing beneath the mount can be executed or mapped executable (`noexec`),
    /// except beneath these directories at its top (single names; a missing one, or one that
    /// is not a directory, exempts nothing). See [`Mount::no_exec`].
    pub no_exec_except: Option<Vec<String>>,
}

impl Mount {
    /// A mount of `host` at `guest` with `access`.
    pub fn new(host: impl Into<PathBuf>, guest: impl Into<String>, access: Access) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            access,
            protected: Vec::new(),
            no_exec_except: None,
        }
    }

    /// Makes the worktree's files data: no program beneath it can be executed and no file
    /// mapped executable (a shared library, a plugin), whoever tries (the helper, a tool it
    /// runs, a tool that runs what a project ships), except beneath `except` (names of
    /// directories at the top of the mount, such as `.ai`).
    ///
    /// The native backend mounts the worktree `noexec` in a mount namespace of the job's own
    /// before the sandbox binds it, with each exempt directory bound back over itself; an
    /// unsandboxed run (sandbox mode `auto` without bwrap, or `off`) confines nothing and
    /// ignores it. A wasm guest cannot execute files, so the wasm backend has nothing to do.
    /// Only the worktree mount takes it; on another the job is refused.
    pub fn no_exec<I, S>(mut self, except: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.no_exec_except = Some(except.into_iter().map(Into::into).collect());
        self
    }

    /// Keeps `paths` (relative to the mount, without `..`) read-only in a writable mount.
    ///
    /// The native backend binds each existing one read-only over itself and an empty read-only
    /// directory where one is missing (removed after the run); the wasm backend confines the
    /// guest with Landlock so that nothing beneath a protected path can be written and nothing
    /// can be created, removed or renamed in the directories on the way to one (so no new
    /// entry can appear at the top of a worktree whose `.git` is protected). A protected path
    /// that is a symbolic link cannot be protected either way, and the job is refused.
    pub fn protect<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.protected.extend(paths.into_iter().map(Into::into));
        self
    }
}

/// Where the worktree appears inside the helper unless the job says otherwise.
pub const DEFAULT_WORKTREE_GUEST: &str = "/work";

/// A WebAssembly module. Cloning is cheap, so a host that runs the same helper many times
/// builds one `WasmModule` and clones it into each job.
///
/// A module from bytes is hashed at once. A module from a file is opened and identified (device,
/// inode, size, modification and change times) but neither read nor hashed until something
/// needs its bytes: a warm run finds its compiled code by that identity (see the runtime's
/// disk cache) and never reads the module. The file stays open, so it is the same file that is
/// read if it must be.
#[derive(Clone)]
pub struct WasmModule {
    inner: Arc<ModuleInner>,
    name: String,
}

struct ModuleInner {
    file: Option<(std::fs::File, FileId)>,
    loaded: std::sync::OnceLock<Result<Loaded, String>>,
}

struct Loaded {
    bytes: Arc<[u8]>,
    sha256: [u8; 32],
}

/// Who a module file is: what changes when its content can have changed. A file replaced in
/// place with the same size and modification time still gets a new change time (which no
/// user can set), and a new file a new inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Last status change, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The latest of its times: an identity recorded no later than this (within the file
    /// system's timestamp granularity) may have been recorded before a change in the same
    /// tick, and must be verified (git's rule for racily clean index entries).
    pub fn changed_ns(&self) -> i128 {
        self.mtime_ns.max(self.ctime_ns)
    }
}

impl std::fmt::Debug for WasmModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmModule")
            .field("name", &self.name)
            .field("file", &self.inner.file.as_ref().map(|(_, id)| id))
            .finish_non_exhaustive()
    }
}

impl WasmModule {
    /// A module from bytes; `name` is what the helper sees as `argv[0]`.
    pub fn from_bytes(name: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Self {
        let bytes = bytes.into();
        let sha256 = Sha256::digest(&bytes).into();
        Self {
            inner: Arc::new(ModuleInner {
                file: None,
                loaded: std::sync::OnceLock::from(Ok(Loaded { bytes, sha256 })),
            }),
            name: name.into(),
        }
    }

    /// Opens a module file, refusing one larger than `max_size` bytes (or not a regular file)
    /// without reading it. `argv[0]` is the file name. The bytes are read when first needed.
    ///
    /// # Security
    /// Reads the host filesystem at `path` with the caller's authority.
    pub fn from_file(path: &Path, max_size: u64) -> Result<Self, crate::Error> {
        let io_err = |source| crate::Error::ReadModule {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            return Err(io_err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            )));
        }
        if meta.len() > max_size {
            return Err(crate::Error::ModuleTooLarge {
                size: meta.len(),
                max: max_size,
            });
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "helper.wasm".to_owned());
        Ok(Self {
            inner: Arc::new(ModuleInner {
                file: Some((file, FileId::of(&meta))),
                loaded: std::sync::OnceLock::new(),
            }),
            name,
        })
    }

    fn loaded(&self) -> Result<&Loaded, crate::Error> {
        self.inner
            .loaded
            .get_or_init(|| {
                let Some((file, id)) = &self.inner.file else {
                    return Err("the module has no bytes".to_owned());
                };
                read_whole(file, id.size).map(|bytes| {
                    let sha256 = Sha256::digest(&bytes).into();
                    Loaded {
                        bytes: bytes.into(),
                        sha256,
                    }
                })
            })
            .as_ref()
            .map_err(|message| crate::Error::InvalidModule {
                message: format!("reading {}: {message}", self.name),
            })
    }

    /// The module's bytes (read from its file the first time).
    pub fn bytes(&self) -> Result<&[u8], crate::Error> {
        self.loaded().map(|l| &*l.bytes)
    }

    /// The SHA-256 of the bytes (read and hashed the first time).
    pub fn sha256(&self) -> Result<&[u8; 32], crate::Error> {
        self.loaded().map(|l| &l.sha256)
    }

    /// The SHA-256 of the bytes, lowercase hex.
    pub fn sha256_hex(&self) -> Result<String, crate::Error> {
        self.sha256().map(|d| hex(d))
    }

    /// The module file's identity, for a module opened from a file.
    pub fn file_id(&self) -> Option<FileId> {
        self.inner.file.as_ref().map(|(_, id)| *id)
    }

    /// The module file's size, or the length of its bytes.
    pub fn len(&self) -> u64 {
        match (&self.inner.file, self.inner.loaded.get()) {
            (Some((_, id)), _) => id.size,
            (None, Some(Ok(l))) => l.bytes.len() as u64,
            _ => 0,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the helper sees as `argv[0]`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The whole of `file` from its start: exactly `size` bytes (it must not have changed size).
fn read_whole(file: &std::fs::File, size: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(size).map_err(|_| "too large".to_owned())?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0).map_err(|e| e.to_string())?;
    let mut more = [0u8; 1];
    if file.read_at(&mut more, size).map_err(|e| e.to_string())? != 0 {
        return Err("the file grew while it was read".to_owned());
    }
    Ok(bytes)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// What the helper is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Program {
    /// A WASI preview 1 command module.
    Wasm(WasmModule),
    /// A native executable, by absolute path (the host resolved it; the runtime never searches
    /// `PATH`). Inside the native sandbox the path must exist in the sandbox's view (under
    /// `/usr` or a bound directory).
    Native(PathBuf),
}

/// The helper's standard input.
#[derive(Debug, Clone, Default)]
pub enum Stdin {
    /// Closed: reads see end of file at once.
    #[default]
    Closed,
    /// These bytes, then end of file.
    Bytes(Arc<[u8]>),
    /// Whatever this file, pipe or terminal gives, read as the helper reads it: a native helper
    /// gets the descriptor itself, a wasm helper a stream that holds at most a small buffer.
    /// It counts against the job's timeout like anything else the helper waits for, and a
    /// helper that never reads it is not held up by it.
    Stream(Arc<std::os::fd::OwnedFd>),
}

/// A [`Job`]'s contents, borrowed ([`Job::parts`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct JobParts<'a> {
    /// The helper.
    pub program: &'a Program,
    /// Arguments after `argv[0]`.
    pub args: &'a [String],
    /// The pull-request worktree, the helper's working directory.
    pub worktree: Option<&'a Mount>,
    /// Further directories, only as listed.
    pub dirs: &'a [Mount],
    /// The environment, before the runtime's guard ([`crate::env::guard`]).
    pub env: &'a [EnvVar],
    /// Standard input.
    pub stdin: &'a Stdin,
    /// The limits.
    pub limits: &'a Limits,
    /// The sandbox mode the job asks for, if any.
    pub sandbox: Option<SandboxMode>,
}

/// One helper run, fully resolved.
///
/// [`Job::new`] denies everything by default:
/// - no arguments (the helper still sees its own name as `argv[0]`);
/// - no worktree and no other directories;
/// - no environment variables (nothing is inherited from the process running wrun);
/// - stdin closed;
/// - [`Limits::default`];
/// - no sandbox mode of its own: a native job runs in the native backend's configured mode
///   (a wasm job always runs in its sandbox);
/// - no network, no sockets, no host functions beyond WASI: there is no way to ask for them.
///
/// Its contents are set only through these builders, and read with [`Job::parts`]; the
/// runtime checks them all before anything runs.
#[derive(Debug, Clone)]
pub struct Job {
    pub(crate) program: Program,
    pub(crate) args: Vec<String>,
    pub(crate) worktree: Option<Mount>,
    pub(crate) dirs: Vec<Mount>,
    pub(crate) env: Vec<EnvVar>,
    pub(crate) stdin: Stdin,
    pub(crate) limits: Limits,
    pub(crate) sandbox: Option<SandboxMode>,
}

impl Job {
    /// A job that runs `program` with nothing: see the type's documentation for the defaults.
    pub fn new(program: Program) -> Self {
        Self {
            program,
            args: Vec::new(),
            worktree: None,
            dirs: Vec::new(),
            env: Vec::new(),
            stdin: Stdin::Closed,
            limits: Limits::default(),
            sandbox: None,
        }
    }

    /// The helper.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// What the job holds, to show it (`wrun explain`) or check it.
    pub fn parts(&self) -> JobParts<'_> {
        JobParts {
            program: &self.program,
            args: &self.args,
            worktree: self.worktree.as_ref(),
            dirs: &self.dirs,
            env: &self.env,
            stdin: &self.stdin,
            limits: &self.limits,
            sandbox: self.sandbox,
        }
    }

    /// The sandbox mode the job asks for, if any (native jobs; a wasm job always runs in its
    /// sandbox). Without one, the native backend's configured mode applies.
    pub fn sandbox_mode(&self) -> Option<SandboxMode> {
        self.sandbox
    }

    /// Runs a native job in `mode` rather than the native backend's configured mode: one
    /// backend (one pool of spawners) serves `require` and `auto` jobs alike.
    pub fn sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = Some(mode);
        self
    }

    /// A job for a native executable at an absolute path.
    pub fn native(program: impl Into<PathBuf>) -> Self {
        Self::new(Program::Native(program.into()))
    }

    /// A job for a wasm module.
    pub fn wasm(module: WasmModule) -> Self {
        Self::new(Program::Wasm(module))
    }

    /// Appends an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Mounts the worktree at [`DEFAULT_WORKTREE_GUEST`] with `access`.
    pub fn worktree(mut self, host: impl Into<PathBuf>, access: Access) -> Self {
        self.worktree = Some(Mount::new(host, DEFAULT_WORKTREE_GUEST, access));
        self
    }

    /// Mounts the worktree as `mount` says (its guest path, protected paths).
    pub fn worktree_mount(mut self, mount: Mount) -> Self {
        self.worktree = Some(mount);
        self
    }

    /// Adds a further directory.
    pub fn dir(mut self, mount: Mount) -> Self {
        self.dirs.push(mount);
        self
    }

    /// Adds an environment variable asked for by the request or definition.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push(EnvVar {
            name: name.into(),
            value: value.into(),
            origin: EnvOrigin::Job,
        });
        self
    }

    /// Adds environment variables as they are (each with its origin).
    pub fn envs(mut self, vars: impl IntoIterator<Item = EnvVar>) -> Self {
        self.env.extend(vars);
        self
    }

    /// Adds an environment variable set by the operator's policy: loader and interpreter
    /// variables are accepted from here, secrets still are not.
    pub fn policy_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push(EnvVar {
            name: name.into(),
            value: value.into(),
            origin: EnvOrigin::Policy,
        });
        self
    }

    /// Gives the helper these bytes on stdin.
    pub fn stdin(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.stdin = Stdin::Bytes(bytes.into());
        self
    }

    /// Gives the helper this file, pipe or terminal as stdin, streamed ([`Stdin::Stream`]).
    pub fn stdin_stream(mut self, fd: std::os::fd::OwnedFd) -> Self {
        self.stdin = Stdin::Stream(Arc::new(fd));
        self
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}
