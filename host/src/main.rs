//! The `wrun` command: run a helper under the same sandbox and limits as production.
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    cli::Cli::parse().execute()
}
