//! The native backend against a real bubblewrap: every hole of MACHINE-FACTS tried from inside,
//! every limit exceeded, and real tools run.

mod isolation;
mod lifecycle;
mod limits;
mod tools;

use wrun_runtime::{Job, Outcome, Status};

pub(crate) fn sh(script: &str) -> Job {
    Job::native("/bin/sh").args(["-c", script])
}

pub(crate) fn python(code: &str) -> Job {
    Job::native("/usr/bin/python3").args(["-c", code])
}

pub(crate) fn exited(out: &Outcome) -> i32 {
    match out.status {
        Status::Exited { code } => code,
        ref other => panic!("expected an exit, got {other:?}; stderr: {}", out.stderr.text()),
    }
}

/// The shared native sandbox, or return from the test (reported by `native`).
macro_rules! sandbox {
    () => {
        match wrun_tests::native() {
            Some(s) => s,
            None => return,
        }
    };
}
pub(crate) use sandbox;
