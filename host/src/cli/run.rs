//! `wrun run`: one helper, limits from flags, result as the helper's own streams or as JSON.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use wrun_host::{ambient, exit, parse};
use wrun_runtime::{
    Access, ByteSize, Job, Limits, Mount, NativeConfig, NativeSandbox, Outcome, Runner, Sandbox, SandboxMode,
    Status, WasmConfig, WasmModule, WasmSandbox,
};

/// Output formats of `wrun run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
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
    #[arg(long, value_name = "DIR")]
    worktree: Option<PathBuf>,

    /// Let the helper write to the worktree (read-only otherwise).
    #[arg(long)]
    write: bool,

    /// A further directory, `HOST[::GUEST]`, read-only unless suffixed `:rw`. Repeatable.
    #[arg(long = "dir", value_name = "HOST[::GUEST][:rw]", value_parser = parse::dir)]
    dirs: Vec<Mount>,

    /// An environment variable for the helper: `NAME=VALUE`, or `NAME` to copy wrun's own
    /// value. Nothing else is passed; credential names are dropped whatever their origin.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,

    /// Feed this file to the helper's stdin (`-` for wrun's own stdin). Default: closed.
    #[arg(long, value_name = "FILE")]
    stdin: Option<PathBuf>,

    /// Wall-clock limit, e.g. 30s, 500ms, 2m.
    #[arg(long, value_parser = parse::duration, default_value = "30s")]
    timeout: Duration,

    /// Instruction budget (fuel units; roughly 10 billion per CPU-second). Default: unmetered.
    #[arg(long)]
    fuel: Option<u64>,

    /// Linear memory limit, e.g. 256MiB.
    #[arg(long, default_value = "256MiB")]
    memory: ByteSize,

    /// Bytes of stdout kept (head and tail; the middle is cut). At most 10MiB.
    #[arg(long, default_value = "1MiB")]
    stdout_cap: ByteSize,

    /// Bytes of stderr kept (head and tail; the middle is cut). At most 10MiB.
    #[arg(long, default_value = "256KiB")]
    stderr_cap: ByteSize,

    /// Native helpers: require | auto | off. Default: $HELPER_SANDBOX, else auto.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<SandboxMode>,

    /// Native helpers: bind a host directory read-only, `HOST[::GUEST]` (at the same path
    /// without a guest path); a tools venv, for example. Repeatable.
    #[arg(long = "ro-bind", value_name = "HOST[::GUEST]", value_parser = parse::ro_bind)]
    ro_binds: Vec<Mount>,

    /// Native helpers: CPU-time limit per process (whole seconds), e.g. 10s.
    #[arg(long, value_parser = parse::duration)]
    cpu: Option<Duration>,

    /// Native helpers: largest file the helper may write, e.g. 100MiB.
    #[arg(long, default_value = "1GiB")]
    max_file_size: ByteSize,

    /// Native helpers: processes and threads.
    #[arg(long, default_value_t = 256)]
    max_processes: u32,

    /// Native helpers: absolute path of bwrap. Default: found on PATH.
    #[arg(long, value_name = "PATH")]
    bwrap: Option<PathBuf>,

    /// How to print the helper's stdout: `raw` as written; `text` or `sarif` (SARIF 2.1.0) to read
    /// it as findings (JSON Lines of the wrun-guest protocol).
    #[arg(long, value_enum, default_value = "raw")]
    format: Format,

    /// The pull request's changed files, handed to the helper on stdin as the wrun-guest
    /// changed-file list: a file with one path per line (`git diff --name-only`), or already in
    /// the JSON form.
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

impl RunCmd {
    pub(crate) async fn execute(self) -> anyhow::Result<u8> {
        let limits = Limits::default()
            .with_timeout(self.timeout)
            .with_memory(self.memory)
            .with_stdout_cap(self.stdout_cap)
            .with_stderr_cap(self.stderr_cap);
        let mut limits = match self.fuel {
            Some(fuel) => limits.with_fuel(fuel),
            None => limits,
        }
        .with_max_file_size(self.max_file_size)
        .with_max_processes(self.max_processes);
        if let Some(cpu) = self.cpu {
            limits = limits.with_cpu(cpu);
        }
        limits.validate()?;

        let cache_dir = match (self.no_cache, self.cache_dir) {
            (true, _) => None,
            (false, Some(dir)) => Some(dir),
            (false, None) => ambient::default_cache_dir(),
        };
        let mut config = WasmConfig::default();
        config.cache_dir = cache_dir;
        let max_module = config.max_module_size.bytes();
        let native = native_sandbox(self.sandbox, self.bwrap)?;
        let runner = Runner::new(WasmSandbox::new(config)?, Some(native));

        let worktree = match self.worktree {
            Some(dir) => dir,
            None => {
                std::env::current_dir().context("cannot determine the current directory; pass --worktree")?
            }
        };
        let access = if self.write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let job = if is_wasm(&self.program) {
            Job::wasm(WasmModule::from_file(&self.program, max_module)?)
        } else {
            Job::native(native_program(&self.program, &worktree)?)
        };
        let mut mount = Mount::new(&worktree, wrun_runtime::job::DEFAULT_WORKTREE_GUEST, access);
        if access == Access::ReadWrite {
            // `.git`, `.ai` and nested repositories stay read-only in a writable worktree.
            mount = mount.protect(wrun_host::protect::protected_paths(&worktree)?);
        }
        let mut job = job.args(self.args).worktree_mount(mount).limits(limits);
        for mount in self.dirs {
            job = job.dir(mount);
        }
        for mount in self.ro_binds {
            job = job.dir(mount);
        }
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
        if let Some(path) = &self.stdin {
            let mut bytes = Vec::new();
            if path.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .context("reading wrun's stdin")?;
            } else {
                bytes = std::fs::read(path).with_context(|| format!("reading --stdin {}", path.display()))?;
            }
            job = job.stdin(bytes);
        }

        if let Some(path) = &self.changed_files {
            job = job.stdin(changed_files(path)?);
        }
        let tool = self
            .program
            .file_stem()
            .map_or_else(|| "helper".to_owned(), |s| s.to_string_lossy().into_owned());
        let outcome = runner.run(job).await?;
        match self.format {
            Format::Raw => report(&outcome, self.json, self.timeout)?,
            Format::Text | Format::Sarif => {
                let parsed = wrun_host::findings::parse(&outcome.stdout);
                let rendered = if self.format == Format::Text {
                    wrun_host::findings::to_text(&parsed)
                } else {
                    let success = matches!(outcome.status, Status::Exited { code: 0 | 1 });
                    let mut s = serde_json::to_string_pretty(&wrun_host::findings::to_sarif(
                        &tool, &parsed, success,
                    ))?;
                    s.push('\n');
                    s
                };
                let mut quiet = outcome.clone();
                quiet.stdout = wrun_runtime::Captured::empty();
                report(&quiet, false, self.timeout)?;
                std::io::stdout().write_all(rendered.as_bytes())?;
            }
        }
        Ok(exit::for_status(&outcome.status))
    }
}

/// The native backend as the flags and `HELPER_SANDBOX` configure it.
pub(crate) fn native_sandbox(
    mode: Option<SandboxMode>,
    bwrap: Option<PathBuf>,
) -> anyhow::Result<NativeSandbox> {
    let mode = match (mode, ambient::helper_sandbox()) {
        (Some(mode), _) => mode,
        (None, Some(value)) => value
            .parse()
            .map_err(|e| anyhow::anyhow!("HELPER_SANDBOX: {e}"))?,
        (None, None) => SandboxMode::Auto,
    };
    let bwrap = match bwrap {
        Some(path) if path.is_absolute() => Some(path),
        Some(path) => bail!("--bwrap {}: give an absolute path", path.display()),
        None => ambient::which("bwrap"),
    };
    Ok(NativeSandbox::new(NativeConfig::new(bwrap, mode))?)
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

/// The absolute path a native program has inside the sandbox: a program inside the worktree
/// is seen under `/work`; a bare name is looked up on wrun's PATH; anything else is made
/// absolute and must be visible in the sandbox (under `/usr` or a bound directory).
fn native_program(program: &std::path::Path, worktree: &std::path::Path) -> anyhow::Result<PathBuf> {
    let as_str = program.to_string_lossy();
    if !as_str.contains('/') {
        return ambient::which(&as_str).with_context(|| format!("{as_str}: not found on PATH"));
    }
    let absolute =
        std::fs::canonicalize(program).with_context(|| format!("cannot find {}", program.display()))?;
    let worktree = std::fs::canonicalize(worktree)
        .with_context(|| format!("cannot open worktree {}", worktree.display()))?;
    Ok(match absolute.strip_prefix(&worktree) {
        Ok(rel) => std::path::Path::new(wrun_runtime::job::DEFAULT_WORKTREE_GUEST).join(rel),
        Err(_) => absolute,
    })
}

/// The changed-file list for the helper's stdin: JSON as given, or one path per line converted.
fn changed_files(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --changed-files {}", path.display()))?;
    if text.trim_start().starts_with('{') {
        wrun_guest::Changes::parse(text.as_bytes())
            .map_err(|e| anyhow::anyhow!("--changed-files {}: {e}", path.display()))?;
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
    wrun_guest::Changes::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("--changed-files {}: {e}", path.display()))?;
    Ok(bytes)
}

/// Writes the outcome: as JSON, or as the helper's own streams plus a diagnostic line on
/// stderr when the helper did not simply exit.
pub(crate) fn report(outcome: &Outcome, json: bool, timeout: Duration) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, outcome)?;
        writeln!(stdout)?;
        return Ok(());
    }
    stdout.write_all(&outcome.stdout.rendered)?;
    stdout.flush()?;
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(&outcome.stderr.rendered)?;
    for dropped in &outcome.env_dropped {
        writeln!(
            stderr,
            "wrun: dropped env {} ({:?})",
            dropped.name, dropped.reason
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
        other => Some(format!("helper ended: {other:?}")),
    };
    if let wrun_runtime::Backend::Native {
        confinement: wrun_runtime::Confinement::Unsandboxed { reason },
        ..
    } = &outcome.backend
    {
        writeln!(stderr, "wrun: warning: the helper ran unsandboxed: {reason}")?;
    }
    if let Some(note) = note {
        writeln!(stderr, "wrun: {note}")?;
    }
    Ok(())
}
