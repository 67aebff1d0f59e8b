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
//! use wrun_guest::{Changes, Finding, Severity, emit};
//! let changes = Changes::from_stdin().expect("changed-file list");
//! let mut found = 0;
//! for file in changes.files_or_walk(wrun_guest::worktree()) {
//!     if file.path.ends_with(".orig") {
//!         emit(&Finding::new(&file.path, "no-backup-files", Severity::Warning, "backup file added"));
//!         found += 1;
//!     }
//! }
//! std::process::exit(wrun_guest::Exit::from_count(found).code());
//! ```
#![forbid(unsafe_code)]

mod changes;
mod findings;
mod walk;

pub use changes::{ChangedFile, Changes, ChangesError, MAX_CHANGES_BYTES};
pub use findings::{Finding, Fix, SCHEMA_VERSION, Severity, emit, to_line};
pub use walk::{display_path, walk_files};

use std::path::Path;

/// Where the worktree is, as seen by the helper: its working directory.
pub fn worktree() -> &'static Path {
    Path::new(".")
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
