//! The limit flags of `wrun run`, one per [`wrun_runtime::LIMIT_FIELDS`] entry: `--timeout`,
//! `--memory`, `--max-open-files` … Each gives a value of the runtime's [`LimitsSpec`], which
//! applies over the policy's defaults and is checked against its ceilings like a helper
//! definition's `limits`.

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use wrun_runtime::{Applies, LIMIT_FIELDS, LimitsSpec};

/// The limits given on the command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitFlags {
    /// The values.
    pub(crate) spec: LimitsSpec,
    /// The flags given, as written (`--cpu`), for messages.
    pub(crate) given: Vec<(&'static str, Applies)>,
}

impl FromArgMatches for LimitFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut out = Self::default();
        for field in LIMIT_FIELDS {
            if let Some(text) = matches.get_one::<String>(field.name) {
                out.spec.set(field.name, text).map_err(|e| {
                    clap::Error::raw(
                        clap::error::ErrorKind::ValueValidation,
                        format!("invalid value {text:?} for --{}: {e}\n", field.flag),
                    )
                })?;
                out.given.push((field.flag, field.applies));
            }
        }
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for LimitFlags {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(LIMIT_FIELDS.iter().map(|field| {
            let scope = match field.applies {
                Applies::All => "",
                Applies::Wasm => "wasm helpers: ",
                Applies::Native => "native helpers: ",
            };
            Arg::new(field.name)
                .long(field.flag)
                .value_name(field.value)
                .help(format!(
                    "{scope}{}. Default: the policy's [limits], within its [ceilings]",
                    field.help
                ))
                .help_heading("Limits")
        }))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}
