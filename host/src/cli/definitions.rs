//! `wrun definitions check FILE`: a `.ai/helpers.toml` checked before it is merged upstream.

use crate::cli::out::say;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use wrun_host::definitions::{Definitions, HelperProgram};
use wrun_host::policy::Policy;

#[derive(Debug, Args)]
pub(crate) struct DefinitionsCmd {
    #[command(subcommand)]
    action: DefinitionsAction,
}

#[derive(Debug, Subcommand)]
enum DefinitionsAction {
    /// Check a helper definitions file (`.ai/helpers.toml`) as `wrun helper` reads it (the types
    /// of policies/definitions.schema.json, and the rules no schema can say), and each
    /// helper against a policy: limits within its ceilings, templates naming only its safe
    /// keys, shell programs passing its allowlist. Prints every problem with its line; exit 125
    /// if there is one.
    Check {
        /// The definitions file (TOML).
        file: PathBuf,
        /// The operator's policy to check against. Default: wrun's built-in default policy.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
}

impl DefinitionsCmd {
    pub(crate) fn execute(self) -> anyhow::Result<u8> {
        let DefinitionsAction::Check { file, policy } = self.action;
        let policy = match &policy {
            Some(path) => Policy::load(path)?,
            None => Policy::builtin("default")?,
        };
        let max = wrun_host::helper::MAX_DEFINITIONS_BYTES;
        let size = std::fs::metadata(&file)
            .with_context(|| format!("cannot read {}", file.display()))?
            .len();
        anyhow::ensure!(
            size <= max,
            "{}: {size} bytes is more than wrun reads ({max} bytes)",
            file.display()
        );
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {} as UTF-8 text", file.display()))?;
        let name = file.display().to_string();
        let defs = Definitions::parse(&name, &text)?;
        let mut problems: Vec<(usize, String)> =
            defs.problems.iter().map(|p| (p.line, p.to_string())).collect();
        for helper in &defs.helpers {
            let mut refuse = |what: String| {
                problems.push((
                    helper.line,
                    format!("line {}: helper {:?}: {what}", helper.line, helper.name),
                ))
            };
            if let Err(e) = policy.limits_for(&helper.limits) {
                refuse(e.to_string());
            }
            // Every safe key given a plain value: a template naming another key is refused.
            let vars = policy
                .templates
                .safe_keys
                .iter()
                .map(|k| {
                    (
                        k.clone(),
                        wrun_host::expand::Var {
                            value: "value".to_owned(),
                            origin: wrun_host::expand::Origin::Trusted,
                        },
                    )
                })
                .collect();
            let templates: Vec<String> = match &helper.program {
                HelperProgram::Native { args, .. } => args.iter().chain(&helper.args).cloned().collect(),
                _ => helper.args.clone(),
            };
            if let Err(e) = wrun_host::expand::expand(&templates, &vars, &policy.templates.safe_keys) {
                refuse(e.to_string());
            }
            if let HelperProgram::Shell { run } = &helper.program
                && let Err(e) = wrun_host::shell::check(run, &policy.shell_rules)
            {
                refuse(e.to_string());
            }
        }
        if !problems.is_empty() {
            problems.sort_by_key(|(line, _)| *line);
            let lines: Vec<String> = problems.into_iter().map(|(_, p)| p).collect();
            anyhow::bail!("{name}: {} problem(s):\n  {}", lines.len(), lines.join("\n  "));
        }
        say!(
            "{name}: {} helper(s), no problems: {}",
            defs.helpers.len(),
            defs.names().join(", ")
        )?;
        Ok(0)
    }
}
