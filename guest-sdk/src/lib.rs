//! Write wrun helpers in Rust for wasm32-wasip1.
//!
//! A helper is a WASI preview 1 command. The whole contract is in this crate's README; in short:
//! the worktree is the working directory (also at `/work`), read-only unless the definition
//! asks for write access; the pull request's changed files arrive on stdin as JSON
//! ([`Changes`]); findings go to stdout as JSON Lines ([`Finding`], [`emit`]); the exit code
//! says 0 "ran, found nothing", 1 "ran, found something", 2 "could not do its job"
//! ([`Exit`]).
//!
//! ```no_run
//! use wrun_guest::{Finding, Severity, emit};
//! wrun_guest::run_helper("no-backups", |changes| {
//!     let mut found = 0;
//!     for file in changes.files_or_walk(wrun_guest::worktree()) {
//!         if file.path.ends_with(".orig") {
//!             emit(&Finding::new(&file.path, "backup-file", Severity::Warning, "backup file added"));
//!             found += 1;
//!         }
//!     }
//!     Ok(found)
//! });
//! ```
#![forbid(unsafe_code)]

mod changes;
mod findings;
mod walk;

pub use changes::{ChangedFile, Changes, ChangesError, MAX_CHANGES_BYTES};
pub use findings::{Finding, Fix, RuleInfo, SCHEMA_VERSION, Severity, ToolInfo, describe, emit, to_line};
pub use walk::{display_path, walk_files};

use std::io::Write as _;
use std::path::Path;

/// Where the worktree is, as seen by the helper: its working directory.
pub fn worktree() -> &'static Path {
    Path::new(".")
}

/// Runs a helper: reads the changed-file list, calls `body` with it, and exits with the contract's
/// code: 0 or 1 from the number of findings `body` emitted, 2 (with `helper: message` on stderr)
/// when the list cannot be read or `body` fails.
pub fn run_helper(helper: &str, body: impl FnOnce(&Changes) -> Result<usize, String>) -> ! {
    let result = Changes::from_stdin()
        .map_err(|e| e.to_string())
        .and_then(|c| body(&c));
    let exit = match result {
        Ok(found) => Exit::from_count(found),
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "{helper}: {message}");
            Exit::Failed
        }
    };
    std::process::exit(exit.code())
}

/// The exit codes of the helper contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Ran and found nothing.
    Clean,
    /// Ran and found something (findings are on stdout).
    Found,
    /// Could not do its job (the reason is on stderr).
    Failed,
}

impl Exit {
    /// `Found` if `count > 0`, else `Clean`.
    pub fn from_count(count: usize) -> Self {
        if count > 0 { Exit::Found } else { Exit::Clean }
    }

    /// The process exit code.
    pub fn code(self) -> i32 {
        match self {
            Exit::Clean => 0,
            Exit::Found => 1,
            Exit::Failed => 2,
        }
    }
}
