//! Errors: wrun could not start the job or failed itself. A helper hitting a limit or being
//! refused by policy is an [`Outcome`](crate::Outcome), not an error.

use std::path::PathBuf;

use crate::limits::LimitError;

/// Why wrun could not run a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A limit is zero or above its ceiling.
    #[error("invalid limits: {0}")]
    Limits(#[from] LimitError),
    /// The module file could not be read.
    #[error("cannot read module {}", path.display())]
    ReadModule {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The module is larger than the configured cap.
    #[error(
        "module is {size} bytes, above the {max}-byte module size cap; raise the cap in the wasm configuration if this module is trusted"
    )]
    ModuleTooLarge {
        /// Its size.
        size: u64,
        /// The cap.
        max: u64,
    },
    /// The bytes are not a valid WebAssembly module.
    #[error("not a valid WebAssembly module: {message}")]
    InvalidModule {
        /// What the validator said.
        message: String,
    },
    /// A directory of the job cannot be used.
    #[error("cannot mount {} at {guest}: {reason}", host.display())]
    Mount {
        /// The host directory.
        host: PathBuf,
        /// The guest path.
        guest: String,
        /// Why.
        reason: String,
    },
    /// This sandbox cannot run this kind of program.
    #[error("the {backend} backend cannot run this program: {reason}")]
    Unsupported {
        /// The backend.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// The native program cannot be run as given.
    #[error("cannot run {}: {reason}", path.display())]
    Program {
        /// The program.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The sandbox mode is `require` and the sandbox cannot be used here.
    #[error("the native sandbox is required but unavailable: {0}")]
    SandboxUnavailable(String),
    /// Starting or supervising a process failed.
    #[error("{what}: {source}")]
    Spawn {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The compiled-code cache directory is unusable.
    #[error("compiled-code cache at {}: {reason}", path.display())]
    Cache {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The engine could not be configured or failed in a way that is wrun's fault.
    #[error("wasm engine: {0}")]
    Engine(String),
}
