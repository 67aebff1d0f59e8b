//! wrun's runtime: run a code-review helper against an untrusted worktree, in a sandbox, with
//! enforced limits, and get one uniform [`Outcome`].
//!
//! The runtime runs exactly the job it is given. It never reads environment variables,
//! configuration files or `PATH`, never prints and never exits; turning policy into a [`Job`]
//! is the host's business (crate `wrun-host`).
//!
//! One runner per process, shared by reference; jobs run concurrently without any `Arc`:
//!
//! ```
//! use wrun_runtime::{Access, Job, Limits, Runner, Sandbox, Status, WasmConfig, WasmModule};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let worktree = tempfile::tempdir()?;
//! # let wasm = wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "_start")))"#)?;
//! // Configuration in, a checked runner out (wasm here; on Linux, Some(NativeConfig) adds bwrap).
//! let runner = Runner::new(WasmConfig::default(), None)?;
//! let module = WasmModule::from_bytes("lint", wasm); // hashed once, cheap to clone
//! let job = |arg: &str| {
//!     Job::wasm(module.clone())
//!         .arg(arg)
//!         .worktree(worktree.path(), Access::ReadOnly)
//!         .env("LANG", "C.UTF-8")
//!         .limits(Limits::default().with_fuel(10_000_000_000))
//! };
//! // Several helpers at once on one runner.
//! let (a, b) = tokio::join!(runner.run(job("--check")), runner.run(job("--stats")));
//! for outcome in [a?, b?] {
//!     assert_eq!(outcome.status, Status::Exited { code: 0 });
//!     println!("{}: {}", outcome.status, outcome.stdout.text());
//! }
//! # Ok(()) }
//! ```
//!
//! The helper contract (what a helper sees and how it reports) is documented in the
//! `wrun-guest` crate's README.

#[cfg(target_os = "linux")]
mod beneath;
pub mod capture;
mod checked;
pub mod env;
mod error;
pub mod job;
pub mod limits;
#[cfg(target_os = "linux")]
pub mod native;
pub mod outcome;
#[cfg(all(target_os = "linux", feature = "wasm"))]
mod protect;
#[cfg(feature = "wasm")]
mod runner;
mod sandbox;
mod sys;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use capture::{Capture, Captured, Record, RecordLimits, Records};
pub use error::Error;
pub use job::{Access, FileId, Job, JobParts, Mount, Program, SandboxMode, Stdin, WasmModule};
pub use limits::{Applies, ByteSize, LIMIT_FIELDS, LimitError, LimitField, Limits, LimitsSpec};
#[cfg(target_os = "linux")]
pub use native::{NativeConfig, NativeSandbox};
pub use outcome::{Backend, CacheUse, Confinement, Enforcement, Mechanism, Outcome, Status, Usage};
#[cfg(feature = "wasm")]
pub use runner::Runner;
pub use sandbox::{BoxFuture, Sandbox};
#[cfg(feature = "wasm")]
pub use wasm::{Allocator, WasmConfig, WasmSandbox};

/// The Landlock ABI version this kernel offers this process, if any: a wasm job with
/// protected paths in a writable mount needs it (else it is refused).
#[cfg(target_os = "linux")]
pub fn landlock_abi() -> Option<u32> {
    sys::landlock::abi()
}
