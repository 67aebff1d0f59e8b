//! `wrun doctor`: what this machine supports for native helpers.

use crate::cli::out::say;
use std::path::PathBuf;

use clap::Args;
use wrun_runtime::SandboxMode;

#[derive(Debug, Args)]
pub(crate) struct DoctorCmd {
    /// The mode to check. Default: $HELPER_SANDBOX, else auto.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<SandboxMode>,

    /// Absolute path of bwrap. Default: found on PATH.
    #[arg(long, value_name = "PATH")]
    bwrap: Option<PathBuf>,
}

impl DoctorCmd {
    pub(crate) async fn execute(self) -> anyhow::Result<u8> {
        let mode = match (self.sandbox, wrun_host::ambient::helper_sandbox()) {
            (Some(mode), _) => mode,
            (None, Some(value)) => value
                .parse()
                .map_err(|e| anyhow::anyhow!("HELPER_SANDBOX: {e}"))?,
            (None, None) => SandboxMode::Auto,
        };
        let native = super::run::native_backend(mode, self.bwrap)?;
        let probe = native.probe().await;
        for (name, value) in native.report().await {
            say!("{name:<46} {value}")?;
        }
        let verdict = match (native.config().mode, &probe) {
            (SandboxMode::Off, _) => "native helpers would run unsandboxed (mode off)",
            (_, Ok(())) => "native helpers would run in bubblewrap",
            (SandboxMode::Require, Err(_)) => {
                "native helpers would be refused (mode require, sandbox unavailable)"
            }
            (SandboxMode::Auto, Err(_)) => {
                "native helpers would run unsandboxed (mode auto, sandbox unavailable)"
            }
        };
        say!("{:<46} {verdict}", "verdict")?;
        Ok(match (native.config().mode, probe) {
            (SandboxMode::Require, Err(_)) => crate::cli::exit::REFUSED,
            _ => 0,
        })
    }
}
