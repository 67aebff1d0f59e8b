//! `wrun policy check FILE`.

use crate::cli::out::say;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use wrun_host::policy::Policy;

#[derive(Debug, Args)]
pub(crate) struct PolicyCmd {
    #[command(subcommand)]
    action: PolicyAction,
}

#[derive(Debug, Subcommand)]
enum PolicyAction {
    /// Validate a policy file and print the resolved policy as JSON.
    Check {
        /// The policy file (TOML).
        file: PathBuf,
    },
}

impl PolicyCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        match self.action {
            PolicyAction::Check { file } => {
                let policy = Policy::load(&file)?;
                // What the text alone cannot say: whether each bind exists on this machine.
                let problems: Vec<String> = policy
                    .native
                    .ro_binds
                    .iter()
                    .filter_map(|b| b.host_problem())
                    .collect();
                if !problems.is_empty() {
                    anyhow::bail!("{}: [native] {}", file.display(), problems.join("; [native] "));
                }
                say!("{}", serde_json::to_string_pretty(&policy)?)?;
                Ok(0)
            }
        }
    }
}
