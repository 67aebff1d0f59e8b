//! Exit codes of the `wrun` command, in one place.
//!
//! | code | meaning |
//! | --- | --- |
//! | helper's own | the helper exited with that code (0-255; other values become 1) |
//! | 124 | the wall-clock timeout expired (as `timeout(1)`) |
//! | 125 | wrun itself failed or refused the job: a bad flag, a bad or refused module, a policy |
//! | 134 | the helper trapped (a wasm trap: a panic, `unreachable`, a stack overflow) |
//! | 137 | the helper was stopped for memory or fuel (as a kill) |
//! | 128+N | a native helper was killed by signal N (152: out of CPU, SIGXCPU; 153: file too large, SIGXFSZ) |

use wrun_runtime::Status;

/// The timeout exit code.
pub(crate) const TIMED_OUT: u8 = 124;
/// wrun or a policy refused.
pub(crate) const REFUSED: u8 = 125;
/// The helper trapped.
pub(crate) const TRAPPED: u8 = 134;
/// The helper ran out of memory or fuel.
pub(crate) const KILLED: u8 = 137;

/// The exit code for a helper's status.
pub(crate) fn for_status(status: &Status) -> u8 {
    match status {
        Status::Exited { code } => u8::try_from(*code).unwrap_or(1),
        Status::TimedOut => TIMED_OUT,
        Status::OutOfFuel | Status::OutOfMemory => KILLED,
        Status::Trapped { .. } => TRAPPED,
        Status::Refused { .. } => REFUSED,
        Status::Signaled { signal } => u8::try_from(128 + signal).unwrap_or(KILLED),
        Status::OutOfCpu => 128 + 24,
        Status::FileTooLarge => 128 + 25,
        _ => REFUSED,
    }
}
