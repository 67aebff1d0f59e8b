//! A spawner: a small supervisor forked ahead of time, parked in its own cgroups, that starts
//! one program per command and reports how it ended.
//!
//! Starting a process from a large, multi-threaded host costs far more than the program's own
//! start: `fork` copies the host's page tables and `exec` then tears the copy down, and on a
//! cgroup v1 host moving a process into a fresh cgroup costs more again. A spawner pays the fork
//! and the cgroup move once, off any run's path, and is then reused run after run: for each
//! command it starts the program with `clone(CLONE_VM | CLONE_VFORK)` (what `posix_spawn` does:
//! no page tables are copied and `exec` has nothing to tear down), waits for it, reports its
//! wait status and parks again. Everything the program starts is born in the spawner's
//! cgroups, so nothing it forks can escape them.
//!
//! The code is split by the process that runs it:
//!
//! - [`wire`]: the command and event formats, shared by both sides (and parsed in the child
//!   without allocating or panicking);
//! - [`parent`]: the host's side: fork a spawner, send it a command, read its events;
//! - [`child`]: the spawner itself, a forked copy of a multi-threaded process, so it only makes
//!   async-signal-safe system calls, never allocates (its buffers, pointer table and the stack
//!   of the `clone` child are allocated before the fork; it writes into its private copies),
//!   takes no lock and cannot panic.

mod child;
mod parent;
mod wire;

pub(crate) use parent::{fork, receive, send};
pub(crate) use wire::{Event, Message, NoExec};
