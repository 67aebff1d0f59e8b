//! `wrun install --policy FILE`: the policy's tool venv, created or updated.

use crate::cli::out::say;
use std::path::PathBuf;

use clap::Args;
use wrun_host::policy::Policy;

#[derive(Debug, Args)]
pub(crate) struct InstallCmd {
    /// The operator's policy (TOML) whose `[install]` names the venv and its packages.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,

    /// Print what was installed as JSON.
    #[arg(long)]
    json: bool,
}

impl InstallCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        let policy = Policy::load(&self.policy)?;
        let done = wrun_host::install::install(&policy)?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&done)?)?;
            return Ok(0);
        }
        say!(
            "{} {} (helpers see it at {}): {}",
            if done.created { "created" } else { "updated" },
            done.venv.display(),
            done.guest,
            if done.specs.is_empty() {
                "nothing to install".to_owned()
            } else {
                done.specs.join(" ")
            }
        )?;
        for package in &done.packages {
            say!("  {} {}", package.name, package.version)?;
        }
        Ok(0)
    }
}
