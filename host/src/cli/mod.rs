//! Command-line interface: one struct per subcommand, each with an `execute`.
#![allow(clippy::print_stderr, clippy::print_stdout)]

mod check;
mod definitions;
mod doctor;
mod exit;
mod helper;
mod install;
mod limits;
mod out;
mod parse;
mod policy;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use out::note;

/// Run code-review helpers against untrusted worktrees, sandboxed and limited.
#[derive(Debug, Parser)]
#[command(name = "wrun", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a helper (a WASI preview 1 `.wasm` module or a native program) against a worktree.
    Run(Box<run::RunCmd>),
    /// Run a helper defined in the base branch's `.ai/helpers.toml` against a pull request's
    /// worktree, under the operator's policy.
    Helper(Box<helper::HelperCmd>),
    /// Resolve a helper like `wrun helper` and print the job (program, arguments, binds, env
    /// names, limits, sandbox) without running it.
    Explain(Box<helper::ExplainCmd>),
    /// Read a `.wasm` module without running it: what it imports, exports and declares.
    Check(check::CheckCmd),
    /// Work with policy files.
    Policy(policy::PolicyCmd),
    /// Work with helper definition files (`.ai/helpers.toml`).
    Definitions(definitions::DefinitionsCmd),
    /// Create or update the policy's tool venv (`[install]`: packages from PyPI with pip,
    /// wheels only, no options, URLs or paths), which its `[native] ro_binds` binds.
    Install(install::InstallCmd),
    /// Print what this machine supports for native helpers and which sandbox mode would be used.
    Doctor(doctor::DoctorCmd),
}

impl Cli {
    /// Parses the command line; a usage error exits 125 (wrun refused), `--help` and
    /// `--version` exit 0.
    pub(crate) fn parse_or_exit() -> Result<Self, ExitCode> {
        Self::try_parse().map_err(|e| {
            let _ = e.print();
            if e.use_stderr() {
                ExitCode::from(exit::REFUSED)
            } else {
                ExitCode::SUCCESS
            }
        })
    }

    pub(crate) fn execute(self) -> ExitCode {
        let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                note!("wrun: error: cannot start the async runtime: {e}");
                return ExitCode::from(exit::REFUSED);
            }
        };
        let result = runtime.block_on(async {
            match self.command {
                Command::Run(cmd) => cmd.execute().await,
                Command::Helper(cmd) => cmd.execute().await,
                Command::Explain(cmd) => cmd.execute(),
                Command::Doctor(cmd) => cmd.execute().await,
                Command::Check(cmd) => cmd.execute(),
                Command::Policy(cmd) => cmd.execute(),
                Command::Definitions(cmd) => cmd.execute(),
                Command::Install(cmd) => cmd.execute(),
            }
        });
        match result {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                // A refusal names its rule, as the audit log does.
                let text = chain(&e);
                match e.downcast_ref::<wrun_host::session::SessionError>() {
                    Some(refusal) => note!("wrun: refused [{}]: {text}", refusal.rule()),
                    None => note!("wrun: error: {text}"),
                }
                ExitCode::from(exit::REFUSED)
            }
        }
    }
}

/// An error and its causes, each said once: a cause whose text an outer message already holds
/// (an error that formats its source into its own message) is not repeated.
pub(crate) fn chain(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let text = text.trim();
        if text.is_empty() || parts.iter().any(|p| p.contains(text)) {
            continue;
        }
        parts.push(text.to_owned());
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the worktree /x: {source}")]
    struct Embeds {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Embeds { source: io }).context("preparing the helper");
        let text = chain(&e);
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(
            text.starts_with("preparing the helper: cannot open the worktree /x"),
            "{text}"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(chain(&plain), "outer: inner");
    }
}
