//! The `wrun` command: run a helper under the same sandbox and limits as production.
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::Cli::parse_or_exit() {
        Ok(cli) => cli.execute(),
        Err(code) => code,
    }
}
