//! `wrun run`: one helper, limits from flags, result as the helper's own streams or as JSON.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use wrun_host::{ambient, exit, parse};
use wrun_runtime::{
    Access, ByteSize, Job, Limits, Mount, Outcome, Sandbox, Status, WasmConfig, WasmModule, WasmSandbox,
};

#[derive(Debug, Args)]
pub(crate) struct RunCmd {
    /// The helper: a WASI preview 1 command module (`.wasm`).
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
        let limits = match self.fuel {
            Some(fuel) => limits.with_fuel(fuel),
            None => limits,
        };
        limits.validate()?;

        let cache_dir = match (self.no_cache, self.cache_dir) {
            (true, _) => None,
            (false, Some(dir)) => Some(dir),
            (false, None) => ambient::default_cache_dir(),
        };
        let mut config = WasmConfig::default();
        config.cache_dir = cache_dir;
        let max_module = config.max_module_size.bytes();
        let sandbox = WasmSandbox::new(config)?;

        let module = WasmModule::from_file(&self.program, max_module)?;
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
        let mut job = Job::wasm(module)
            .args(self.args)
            .worktree(worktree, access)
            .limits(limits);
        for mount in self.dirs {
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

        let outcome = sandbox.run(job).await?;
        report(&outcome, self.json, self.timeout)?;
        Ok(exit::for_status(&outcome.status))
    }
}

/// Writes the outcome: as JSON, or as the helper's own streams plus a diagnostic line on
/// stderr when the helper did not simply exit.
fn report(outcome: &Outcome, json: bool, timeout: Duration) -> anyhow::Result<()> {
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
        other => Some(format!("helper ended: {other:?}")),
    };
    if let Some(note) = note {
        writeln!(stderr, "wrun: {note}")?;
    }
    Ok(())
}
