//! `wrun run`: one helper, limits from flags, result as the helper's own streams or as JSON.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{exit, parse};
use anyhow::{Context, bail};
use clap::Args;
use wrun_host::ambient;
use wrun_host::policy::Policy;

use crate::cli::out::{ErrOut, Out, note};
use wrun_runtime::{
    Access, ByteSize, Job, Limits, Mount, NativeConfig, NativeSandbox, Outcome, Runner, Sandbox, SandboxMode,
    Status, WasmConfig, WasmModule, WasmSandbox,
};

/// Output formats of `wrun run` and `wrun helper`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Raw,
    Text,
    Sarif,
}

#[derive(Debug, Args)]
pub(crate) struct RunCmd {
    /// The helper: a WASI preview 1 command module (`.wasm`), or a native program (a path, or
    /// a bare name found on PATH) run in bubblewrap.
    program: PathBuf,

    /// Arguments passed to the helper (after `--`).
    #[arg(last = true)]
    args: Vec<String>,

    /// The worktree the helper inspects; it is the helper's working directory and appears at
    /// `/work`. Default: the current directory.
    #[arg(long, value_name = "DIR", conflicts_with = "no_worktree")]
    worktree: Option<PathBuf>,

    /// No worktree at all: the helper sees only the `--dir`s it is given (as `wasmtime run`).
    #[arg(long, conflicts_with = "write")]
    no_worktree: bool,

    /// Let the helper write to the worktree (read-only otherwise). `.git`, `.ai` and nested
    /// repositories stay read-only.
    #[arg(long)]
    write: bool,

    /// A further directory, `HOST[::GUEST]`, read-only unless suffixed `:rw`. Repeatable.
    #[arg(long = "dir", value_name = "HOST[::GUEST][:rw]", value_parser = parse::dir)]
    dirs: Vec<Mount>,

    /// An environment variable for the helper: `NAME=VALUE`, or `NAME` to copy wrun's own
    /// value. Nothing else is passed; credential names are dropped whatever their origin.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,

    /// Stream this file to the helper's stdin (`-` for wrun's own stdin) as it reads it.
    /// Default: closed.
    #[arg(long, value_name = "FILE")]
    stdin: Option<PathBuf>,

    /// The policy whose limits, ceilings, environment rules and sandbox mode the run gets, as
    /// `wrun helper` would give them. Default: wrun's built-in policies/dev.toml.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,

    #[command(flatten)]
    limits: crate::cli::limits::LimitFlags,

    /// Native helpers: require | auto | off, which may make the policy's mode stricter, never
    /// looser (as $HELPER_SANDBOX may). To run without the sandbox, use a policy whose
    /// `sandbox` is `off`.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<SandboxMode>,

    /// Native helpers: bind a host directory read-only, `HOST[::GUEST]` (at the same path
    /// without a guest path); a tools venv, for example. Repeatable.
    #[arg(long = "ro-bind", value_name = "HOST[::GUEST]", value_parser = parse::ro_bind)]
    ro_binds: Vec<Mount>,

    /// Native helpers: absolute path of bwrap. Default: found on PATH.
    #[arg(long, value_name = "PATH")]
    bwrap: Option<PathBuf>,

    /// How to print the helper's stdout: `raw` as written; `text` or `sarif` (SARIF 2.1.0) to read
    /// it as findings (JSON Lines of the wrun-guest protocol).
    #[arg(long, value_enum, default_value = "raw")]
    format: Format,

    /// The pull request's changed files, handed to the helper on stdin as the wrun-guest
    /// changed-file list: a file (`-` for wrun's stdin) with one path per line
    /// (`git diff --name-only`), or already in the JSON form.
    #[arg(long, value_name = "FILE", conflicts_with = "stdin")]
    changed_files: Option<PathBuf>,

    /// Print the whole Outcome as JSON on stdout instead of the helper's streams.
    #[arg(long)]
    json: bool,

    /// Neither read nor write the on-disk compiled-code cache.
    #[arg(long)]
    no_cache: bool,

    /// The compiled-code cache directory. Default: $XDG_CACHE_HOME/wrun or ~/.cache/wrun.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// The most bytes of a changed-file list read from a file or stdin.
const MAX_CHANGED_FILES: u64 = 8 << 20;

/// The least memory a native helper can start with: bubblewrap itself maps about this much.
const NATIVE_MEMORY_FLOOR: ByteSize = ByteSize::mib(4);

impl RunCmd {
    /// Flags that apply to one kind of helper, given for the other, are refused.
    fn check_flags(&self, wasm: bool) -> anyhow::Result<()> {
        use wrun_runtime::Applies;
        let given = |applies: Applies| {
            self.limits
                .given
                .iter()
                .find(|(_, a)| *a == applies)
                .map(|(flag, _)| format!("--{flag}"))
        };
        let native_only = [
            ("--sandbox".to_owned(), self.sandbox.is_some()),
            ("--ro-bind".to_owned(), !self.ro_binds.is_empty()),
            ("--bwrap".to_owned(), self.bwrap.is_some()),
        ]
        .into_iter()
        .find(|(_, on)| *on)
        .map(|(flag, _)| flag)
        .or_else(|| given(Applies::Native));
        if wasm {
            if let Some(flag) = native_only {
                bail!(
                    "{flag} applies to native helpers only; {} is a wasm module (its CPU is bounded by --fuel and --timeout, its files by --dir)",
                    self.program.display()
                );
            }
        } else if let Some(flag) = given(Applies::Wasm) {
            bail!("{flag} applies to wasm helpers only; bound a native helper's CPU with --cpu");
        } else if self.no_worktree {
            bail!("--no-worktree applies to wasm helpers only");
        }
        Ok(())
    }

    /// The policy: `--policy FILE`, else the built-in dev policy.
    fn policy(&self) -> anyhow::Result<Policy> {
        Ok(match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::builtin("dev")?,
        })
    }

    /// The flags' limits over the policy's defaults, within its ceilings.
    fn limits(&self, policy: &Policy) -> anyhow::Result<Limits> {
        policy.limits_for(&self.limits.spec).map_err(|e| {
            let from = match &self.policy {
                Some(path) => path.display().to_string(),
                None => "wrun's built-in policies/dev.toml".to_owned(),
            };
            anyhow::anyhow!("{e} (policy: {from}; a policy given with --policy sets other ceilings)")
        })
    }

    pub(crate) async fn execute(self) -> anyhow::Result<u8> {
        let wasm = is_wasm(&self.program);
        self.check_flags(wasm)?;
        let policy = self.policy()?;
        let limits = self.limits(&policy)?;
        if !wasm && limits.memory < NATIVE_MEMORY_FLOOR {
            bail!(
                "--memory {} is too small to start a native helper (bubblewrap alone needs about {NATIVE_MEMORY_FLOOR}); give it at least that",
                limits.memory
            );
        }
        let cache_dir = match (self.no_cache, &self.cache_dir) {
            (true, _) => None,
            (false, Some(dir)) => Some(dir.clone()),
            (false, None) => ambient::default_cache_dir(),
        };
        let mut config = WasmConfig::default();
        config.cache_dir = cache_dir;
        let max_module = config.max_module_size.bytes();
        let native = native_sandbox(&policy, self.sandbox, self.bwrap.clone())?;
        let runner = Runner::from_backends(WasmSandbox::new(config)?, Some(native));

        let worktree = match &self.worktree {
            Some(dir) => dir.clone(),
            None => {
                std::env::current_dir().context("cannot determine the current directory; pass --worktree")?
            }
        };
        let access = if self.write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let job = if wasm {
            let module = WasmModule::from_file(&self.program, max_module)?;
            Job::wasm(module)
        } else {
            let binds: Vec<&Mount> = self.ro_binds.iter().chain(&self.dirs).collect();
            Job::native(native_program(&self.program, &worktree, &binds)?)
        };
        let mut job = job.args(self.args.clone()).limits(limits.clone());
        if !self.no_worktree {
            let mut mount = Mount::new(&worktree, wrun_runtime::job::DEFAULT_WORKTREE_GUEST, access);
            if access == Access::ReadWrite {
                // `.git`, `.ai` and nested repositories stay read-only in a writable worktree.
                let opened = wrun_host::worktree::Worktree::open(&worktree, cap_std::ambient_authority())
                    .with_context(|| format!("cannot open the worktree {}", worktree.display()))?;
                mount = mount.protect(wrun_host::protect::protected_paths(&opened)?);
            }
            job = job.worktree_mount(mount);
        }
        for mount in self.dirs.iter().chain(&self.ro_binds) {
            job = job.dir(mount.clone());
        }
        if !wasm {
            // The policy's read-only binds, as production gives them (a tools prefix).
            for bind in &policy.native.ro_binds {
                job = job.dir(Mount::new(&bind.host, bind.guest.clone(), Access::ReadOnly));
            }
        }
        // The policy's fixed values, then --env: nothing of wrun's own environment reaches the
        // helper unless named (the policy's allowlist is for hosts: `wrun helper`).
        job = job.envs(policy.env_for(|_| None));
        for spec in &self.env {
            job = match spec.split_once('=') {
                Some((name, value)) => job.env(name, value),
                None => match ambient::var(spec) {
                    Some(value) => job.env(spec.as_str(), value),
                    None => bail!(
                        "--env {spec}: {spec} is not set in wrun's environment; write --env {spec}=VALUE"
                    ),
                },
            };
        }
        let stdin_used = matches!(self.stdin.as_deref(), Some(p) if p.as_os_str() == "-")
            || matches!(self.changed_files.as_deref(), Some(p) if p.as_os_str() == "-");
        if let Some(path) = &self.stdin {
            let fd: std::os::fd::OwnedFd = if path.as_os_str() == "-" {
                std::io::stdin()
                    .as_fd()
                    .try_clone_to_owned()
                    .context("using wrun's stdin")?
            } else {
                std::fs::File::open(path)
                    .with_context(|| format!("opening --stdin {}", path.display()))?
                    .into()
            };
            job = job.stdin_stream(fd);
        }
        if let Some(path) = &self.changed_files {
            job = job.stdin(changed_files(path, limits.timeout).await?);
        }
        if !stdin_used && stdin_has_input() {
            note!(
                "wrun: note: wrun's stdin is not passed to the helper; give --stdin - (or --changed-files - for a changed-file list)"
            );
        }
        let tool = self
            .program
            .file_stem()
            .map_or_else(|| "helper".to_owned(), |s| s.to_string_lossy().into_owned());
        let outcome = runner.run(job).await?;
        print_outcome(&outcome, self.format, self.json, &tool, &limits)?;
        Ok(exit::for_status(&outcome.status))
    }
}

/// Prints a finished run as asked: the helper's own streams (`raw`), its findings as text or
/// SARIF (with its stderr and wrun's notes on stderr), or with `--json` the whole Outcome,
/// which for `text` and `sarif` also carries the parsed findings (and the SARIF log).
pub(crate) fn print_outcome(
    outcome: &Outcome,
    format: Format,
    json: bool,
    tool: &str,
    limits: &wrun_runtime::Limits,
) -> anyhow::Result<()> {
    let timeout = limits.timeout;
    if format == Format::Raw {
        return report(outcome, json, timeout);
    }
    let parsed = wrun_host::findings::parse(&outcome.records);
    let invocation = wrun_host::findings::Invocation {
        tool,
        status: &outcome.status,
        limits,
    };
    if json {
        let mut value = serde_json::to_value(outcome)?;
        value["findings"] = serde_json::to_value(&parsed)?;
        if format == Format::Sarif {
            value["sarif"] = wrun_host::findings::to_sarif(&parsed, &invocation);
        }
        let mut text = serde_json::to_string_pretty(&value)?;
        text.push('\n');
        Out.write_all(text.as_bytes())?;
        return Ok(());
    }
    let rendered = if format == Format::Text {
        wrun_host::findings::to_text(&parsed)
    } else {
        let mut s = serde_json::to_string_pretty(&wrun_host::findings::to_sarif(&parsed, &invocation))?;
        s.push('\n');
        s
    };
    let mut quiet = outcome.clone();
    quiet.stdout = wrun_runtime::Captured::empty();
    report(&quiet, false, timeout)?;
    Out.write_all(rendered.as_bytes())?;
    Ok(())
}

/// Writes the outcome for a language model ([`wrun_host::untrusted::render`]): the helper's
/// stdout as written, or, with `--format text|sarif`, its findings so rendered, each stream
/// between nonce-carrying markers.
pub(crate) fn print_for_model(
    outcome: &Outcome,
    format: Format,
    tool: &str,
    limits: &wrun_runtime::Limits,
) -> anyhow::Result<()> {
    let nonce = wrun_host::untrusted::Nonce::random()
        .map_err(|e| anyhow::anyhow!("no randomness for the nonce: {e}"))?;
    let mut shown = outcome.clone();
    if format != Format::Raw {
        let parsed = wrun_host::findings::parse(&outcome.records);
        let rendered = if format == Format::Text {
            wrun_host::findings::to_text(&parsed)
        } else {
            let invocation = wrun_host::findings::Invocation {
                tool,
                status: &outcome.status,
                limits,
            };
            // Each string made safe before it is written as JSON, so that the log stays JSON
            // inside the markers (the escapes are then text inside its strings).
            let mut sarif = wrun_host::findings::to_sarif(&parsed, &invocation);
            defuse_strings(&mut sarif);
            serde_json::to_string_pretty(&sarif)?
        };
        let capture = wrun_runtime::Capture::new(ByteSize(rendered.len() as u64 + 1));
        capture.push(rendered.as_bytes());
        shown.stdout = capture.finish();
    }
    Out.write_all(wrun_host::untrusted::render(tool, &shown, &nonce).as_bytes())?;
    Ok(())
}

/// Every string of `value` with control characters, reordering characters and CI workflow
/// commands made visible and inert ([`wrun_host::untrusted`]).
fn defuse_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            *s = wrun_host::untrusted::defuse_workflow_commands(&wrun_host::untrusted::neutralize(s));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(defuse_strings),
        serde_json::Value::Object(map) => map.values_mut().for_each(defuse_strings),
        _ => {}
    }
}

/// Whether wrun's stdin holds input a user may have meant for the helper: a pipe, a socket or
/// a non-empty file (not a terminal, not /dev/null).
fn stdin_has_input() -> bool {
    use nix::sys::stat::SFlag;
    let Ok(st) = nix::sys::stat::fstat(std::io::stdin()) else {
        return false;
    };
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK || (kind == SFlag::S_IFREG && st.st_size > 0)
}

/// The native backend in the policy's sandbox mode, made stricter (never looser) by
/// `HELPER_SANDBOX` and `--sandbox`.
pub(crate) fn native_sandbox(
    policy: &Policy,
    flag: Option<SandboxMode>,
    bwrap: Option<PathBuf>,
) -> anyhow::Result<NativeSandbox> {
    native_backend(sandbox_mode(policy, flag)?, bwrap)
}

/// The native backend in `mode`, with bwrap at `bwrap` (else found on PATH).
pub(crate) fn native_backend(mode: SandboxMode, bwrap: Option<PathBuf>) -> anyhow::Result<NativeSandbox> {
    let bwrap = match bwrap {
        Some(path) if path.is_absolute() => Some(path),
        Some(path) => bail!("--bwrap {}: give an absolute path", path.display()),
        None => ambient::which("bwrap"),
    };
    Ok(NativeSandbox::new(NativeConfig::new(bwrap, mode))?)
}

/// The sandbox mode: the policy's, which `HELPER_SANDBOX` and a `--sandbox` flag may make
/// stricter but never looser (a looser one is reported and does not hold).
pub(crate) fn sandbox_mode(policy: &Policy, flag: Option<SandboxMode>) -> anyhow::Result<SandboxMode> {
    let mut asked = Vec::new();
    let mut named = Vec::new();
    if let Some(value) = ambient::helper_sandbox() {
        let mode: SandboxMode = value
            .parse()
            .map_err(|e| anyhow::anyhow!("HELPER_SANDBOX: {e}"))?;
        asked.push(mode);
        named.push(format!("HELPER_SANDBOX={value}"));
    }
    if let Some(mode) = flag {
        asked.push(mode);
        named.push(format!("--sandbox {mode}"));
    }
    let (mode, looser) = policy.sandbox_mode(&asked);
    if let Some(looser) = looser
        && let Some(at) = asked.iter().position(|m| *m == looser)
    {
        note!(
            "wrun: warning: {} is looser than the policy's sandbox mode ({}); the policy's holds (a policy with `sandbox = \"off\"` runs without it)",
            named[at],
            policy.sandbox
        );
    }
    Ok(mode)
}

/// Whether the helper is a wasm module: named `.wasm`, or starting with the WebAssembly magic
/// number.
fn is_wasm(path: &std::path::Path) -> bool {
    if path.extension().is_some_and(|e| e == "wasm") {
        return true;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"\0asm"
}

/// The absolute path a native program has inside the sandbox, checked before anything runs:
/// a bare name is looked up on wrun's PATH; a path under a bind's guest path (`/opt/tools/bin/ruff`
/// with `--ro-bind ~/.venvs/tools::/opt/tools`) is looked for in that bind; a path inside the
/// worktree is seen under `/work`; anything else must be visible in the sandbox (under `/usr`
/// or a bound directory). The program must be a regular executable file, and a script's
/// interpreter (`#!…`) must be visible in the sandbox too: otherwise it could not start, and
/// the helper's exit code would look like a finding.
fn native_program(
    program: &std::path::Path,
    worktree: &std::path::Path,
    binds: &[&Mount],
) -> anyhow::Result<PathBuf> {
    let as_str = program.to_string_lossy();
    let guest_root = std::path::Path::new(wrun_runtime::job::DEFAULT_WORKTREE_GUEST);
    let worktree = std::fs::canonicalize(worktree)
        .with_context(|| format!("cannot open worktree {}", worktree.display()))?;
    // Where a sandbox path lies on the host.
    let on_host = |guest: &std::path::Path| -> PathBuf {
        if let Ok(rel) = guest.strip_prefix(guest_root) {
            return worktree.join(rel);
        }
        for bind in binds {
            if let Ok(rel) = guest.strip_prefix(&bind.guest) {
                return bind.host.join(rel);
            }
        }
        guest.to_owned()
    };
    let (guest, host) = if !as_str.contains('/') {
        let found = ambient::which(&as_str).with_context(|| format!("{as_str}: not found on PATH"))?;
        (found.clone(), found)
    } else if program.is_absolute() && binds.iter().any(|b| program.starts_with(&b.guest)) {
        (program.to_owned(), on_host(program))
    } else {
        let absolute = std::fs::canonicalize(program).with_context(|| {
            format!(
                "cannot find {} (a program inside a --ro-bind is named by its guest path)",
                program.display()
            )
        })?;
        match absolute.strip_prefix(&worktree) {
            Ok(rel) => (guest_root.join(rel), absolute.clone()),
            Err(_) => (absolute.clone(), absolute),
        }
    };
    let visible = |guest: &std::path::Path| -> bool {
        let host = on_host(guest);
        let in_sandbox = guest.starts_with("/usr")
            || ["/bin", "/sbin", "/lib", "/lib64"]
                .iter()
                .any(|d| guest.starts_with(d))
            || guest.starts_with(guest_root)
            || binds.iter().any(|b| guest.starts_with(&b.guest));
        in_sandbox && host.exists()
    };
    let meta = std::fs::metadata(&host)
        .with_context(|| format!("cannot find {} ({})", guest.display(), host.display()))?;
    use std::os::unix::fs::PermissionsExt;
    if meta.is_dir() {
        bail!("{} is a directory, not a program", guest.display());
    }
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        bail!(
            "{} is not an executable file (chmod +x it, or run it through its interpreter)",
            guest.display()
        );
    }
    if !visible(&guest) {
        bail!(
            "{} is not inside the sandbox (only /usr, the worktree and bound directories are); bind its directory with --ro-bind",
            guest.display()
        );
    }
    if let Some(interpreter) = shebang(&host) {
        let (path, arg) = interpreter;
        let interp = std::path::Path::new(&path);
        if !visible(interp) {
            let prefix = interp.ancestors().nth(2).unwrap_or(interp);
            bail!(
                "{}'s interpreter {} is not inside the sandbox; bind its prefix read-only (--ro-bind {}) or use one under /usr",
                guest.display(),
                interp.display(),
                prefix.display()
            );
        }
        if interp.file_name().is_some_and(|n| n == "env")
            && let Some(name) = arg.filter(|a| !a.starts_with('-'))
            && !["/usr/local/bin", "/usr/bin", "/bin"]
                .iter()
                .any(|d| std::path::Path::new(d).join(&name).exists())
        {
            bail!(
                "{}'s interpreter `{name}` (through env) is not on the sandbox's PATH (/usr/local/bin:/usr/bin:/bin); name an interpreter that is, or bind one and name it by its path",
                guest.display()
            );
        }
    }
    Ok(guest)
}

/// A script's `#!` line: the interpreter and its first argument.
fn shebang(path: &std::path::Path) -> Option<(String, Option<String>)> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = head.get(..n)?.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    Some((words.next()?.to_owned(), words.next().map(str::to_owned)))
}

/// The changed-file list for the helper's stdin, from a file or `-` (wrun's stdin, read within
/// the job's timeout and at most 8 MiB): JSON as given, or one path per line converted.
pub(crate) async fn changed_files(path: &std::path::Path, timeout: Duration) -> anyhow::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        let mut stdin = tokio::io::stdin().take(MAX_CHANGED_FILES + 1);
        tokio::time::timeout(timeout, stdin.read_to_end(&mut bytes))
            .await
            .map_err(|_| anyhow::anyhow!("--changed-files -: stdin did not end within the timeout"))?
            .context("reading the changed-file list from stdin")?;
    } else {
        // A FIFO (`<(git diff --name-only …)`) is read like a file, within the timeout: one
        // whose writer never comes or never ends does not hang wrun.
        // A thread of its own, not the runtime's blocking pool: one left waiting on a FIFO
        // must not keep wrun from exiting.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let owned = path.to_owned();
        std::thread::spawn(move || {
            let mut read = Vec::new();
            let result = std::fs::File::open(&owned)
                .and_then(|f| std::io::Read::take(f, MAX_CHANGED_FILES + 1).read_to_end(&mut read));
            let _ = tx.send(result.map(|_| read));
        });
        bytes = tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "--changed-files {}: did not end within the timeout",
                    path.display()
                )
            })?
            .map_err(|_| anyhow::anyhow!("--changed-files {}: the reader stopped", path.display()))?
            .with_context(|| format!("reading --changed-files {}", path.display()))?;
    }
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_CHANGED_FILES,
        "--changed-files {}: larger than {} bytes",
        path.display(),
        MAX_CHANGED_FILES
    );
    let text =
        String::from_utf8(bytes).with_context(|| format!("--changed-files {}: not UTF-8", path.display()))?;
    if text.trim_start().starts_with('{') {
        let changes = wrun_guest::Changes::parse(text.as_bytes())
            .map_err(|e| anyhow::anyhow!("--changed-files {}: {e}", path.display()))?;
        plain_names(&changes, path)?;
        return Ok(text.into_bytes());
    }
    let files: Vec<serde_json::Value> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|p| serde_json::json!({"path": p}))
        .collect();
    let list = serde_json::json!({"wrun_changes": 1, "files": files});
    let bytes = serde_json::to_vec(&list)?;
    let changes = wrun_guest::Changes::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("--changed-files {}: {e}", path.display()))?;
    plain_names(&changes, path)?;
    Ok(bytes)
}

/// Refuses a changed-file list naming a file a helper could not open as a plain name: the
/// pull request chooses its file names, and a helper (or an upstream perl script) opening
/// `cmd|` with perl's `<>` or two-argument `open` runs `cmd`; a control character splits
/// or rewrites a line-based list or a terminal.
fn plain_names(changes: &wrun_guest::Changes, path: &std::path::Path) -> anyhow::Result<()> {
    for file in changes.files.iter().flatten() {
        if file.path.chars().any(char::is_control) {
            anyhow::bail!(
                "--changed-files {}: the path {:?} contains a control character; refused",
                path.display(),
                file.path
            );
        }
        if let Some(name) = wrun_host::args::magic_component(&file.path) {
            anyhow::bail!(
                "--changed-files {}: the path {:?} has a name ({name:?}) that {}",
                path.display(),
                file.path,
                wrun_host::args::MAGIC_REASON
            );
        }
    }
    Ok(())
}

/// Writes the outcome: as JSON, or as the helper's own streams plus a diagnostic line on
/// stderr when the helper did not simply exit.
pub(crate) fn report(outcome: &Outcome, json: bool, timeout: Duration) -> anyhow::Result<()> {
    let mut stdout = Out;
    if json {
        serde_json::to_writer_pretty(&mut stdout, outcome)?;
        writeln!(stdout)?;
        return Ok(());
    }
    stdout.write_all(&outcome.stdout.rendered)?;
    stdout.flush()?;
    let mut stderr = ErrOut;
    stderr.write_all(&outcome.stderr.rendered)?;
    for dropped in &outcome.env_dropped {
        writeln!(stderr, "wrun: dropped env {} ({})", dropped.name, dropped.reason)?;
    }
    for removed in &outcome.removed {
        writeln!(
            stderr,
            "wrun: removed {removed}: the helper created it, and git would read it as a repository (hooks, configuration)"
        )?;
    }
    let note = match &outcome.status {
        Status::Exited { .. } => None,
        Status::TimedOut => Some(format!(
            "helper timed out after {}",
            humantime::format_duration(timeout)
        )),
        Status::OutOfFuel => Some("helper ran out of fuel; raise --fuel if this is expected".to_owned()),
        Status::OutOfMemory => {
            Some("helper exceeded its memory limit; raise --memory if this is expected".to_owned())
        }
        Status::Trapped { message } => Some(format!("helper trapped: {message}")),
        Status::Refused { reason } => Some(format!("refused: {reason}")),
        Status::Signaled { signal } => Some(format!("helper was killed by signal {signal}")),
        Status::OutOfCpu => Some("helper used up its CPU time; raise --cpu if this is expected".to_owned()),
        Status::FileTooLarge => Some("helper tried to write past --max-file-size".to_owned()),
        other => Some(format!("helper {other}")),
    };
    if let wrun_runtime::Backend::Native {
        confinement: wrun_runtime::Confinement::Unsandboxed { reason },
        ..
    } = &outcome.backend
    {
        writeln!(stderr, "wrun: warning: the helper ran unsandboxed: {reason}")?;
    }
    if let wrun_runtime::Backend::Native { enforcement, .. } = &outcome.backend
        && enforcement.processes == wrun_runtime::Mechanism::Rlimit
        && nix::unistd::geteuid().is_root()
    {
        writeln!(
            stderr,
            "wrun: warning: no pids cgroup for this run, and RLIMIT_NPROC binds no process of \
             uid 0: the helper's process count was not bounded (`wrun doctor` says why)"
        )?;
    }
    if let Some(note) = note {
        writeln!(stderr, "wrun: {note}")?;
    }
    Ok(())
}
