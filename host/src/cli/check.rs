//! `wrun check HELPER.wasm`.

use crate::cli::out::{note, say};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use wrun_host::check::{self, Capability};
use wrun_runtime::{WasmConfig, WasmSandbox};

#[derive(Debug, Args)]
pub(crate) struct CheckCmd {
    /// The module.
    module: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

impl CheckCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        let config = WasmConfig::default();
        let max = config.max_module_size.bytes();
        let meta = std::fs::metadata(&self.module)
            .with_context(|| format!("cannot read {}", self.module.display()))?;
        anyhow::ensure!(
            meta.len() <= max,
            "{} is {} bytes, above the {max}-byte module cap",
            self.module.display(),
            meta.len()
        );
        let bytes =
            std::fs::read(&self.module).with_context(|| format!("cannot read {}", self.module.display()))?;
        let sandbox = WasmSandbox::new(config)?;
        let provided = |name: &str| sandbox.provides("wasi_snapshot_preview1", name).unwrap_or(false);
        let report = check::inspect(&bytes, provided)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.module.display()))?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            say!("module     {}", self.module.display())?;
            say!("wasi       {}", report.wasi)?;
            say!("size       {} bytes", report.size)?;
            say!("sha256     {}", report.sha256)?;
            let memories: Vec<String> = report
                .memories
                .iter()
                .map(|(min, max)| match max {
                    Some(max) => format!("{min}..{max} pages"),
                    None => format!("{min}.. pages"),
                })
                .collect();
            say!(
                "memory     {}",
                if memories.is_empty() {
                    "none".into()
                } else {
                    memories.join(", ")
                }
            )?;
            say!("exports    {}", report.exports.join(", "))?;
            for cap in [
                Capability::Args,
                Capability::Filesystem,
                Capability::Clocks,
                Capability::Random,
                Capability::Proc,
                Capability::Io,
                Capability::Sockets,
            ] {
                let names: Vec<&str> = report
                    .imports
                    .iter()
                    .filter(|i| i.capability == Some(cap))
                    .map(|i| i.name.as_str())
                    .collect();
                if !names.is_empty() {
                    say!("{:<10} {}", format!("{cap:?}").to_lowercase(), names.join(", "))?;
                }
            }
        }
        for problem in &report.problems {
            note!("wrun: refused: {problem}");
        }
        Ok(if report.runnable {
            0
        } else {
            crate::cli::exit::REFUSED
        })
    }
}
