//! One sandbox for every kind of program: wasm modules to the wasm backend, native programs to
//! the native backend.

use crate::sandbox::{BoxFuture, Sandbox};
use crate::{Error, Job, Outcome, Program, WasmSandbox};

/// Dispatches each job to the backend for its program.
#[derive(Debug)]
pub struct Runner {
    wasm: WasmSandbox,
    #[cfg(target_os = "linux")]
    native: Option<crate::NativeSandbox>,
}

impl Runner {
    /// A runner with a wasm backend and, on Linux, an optional native backend (without one, a
    /// native job is an error).
    pub fn new(wasm: WasmSandbox, #[cfg(target_os = "linux")] native: Option<crate::NativeSandbox>) -> Self {
        Self {
            wasm,
            #[cfg(target_os = "linux")]
            native,
        }
    }

    /// The wasm backend.
    pub fn wasm(&self) -> &WasmSandbox {
        &self.wasm
    }

    /// The native backend, if configured.
    #[cfg(target_os = "linux")]
    pub fn native(&self) -> Option<&crate::NativeSandbox> {
        self.native.as_ref()
    }
}

impl Sandbox for Runner {
    fn name(&self) -> &'static str {
        "runner"
    }

    fn run<'a>(&'a self, job: Job) -> BoxFuture<'a, Result<Outcome, Error>> {
        match &job.program {
            Program::Wasm(_) => self.wasm.run(job),
            #[cfg(target_os = "linux")]
            Program::Native(_) => match &self.native {
                Some(native) => native.run(job),
                None => Box::pin(async {
                    Err(Error::Unsupported {
                        backend: "runner",
                        reason: "no native backend is configured".into(),
                    })
                }),
            },
            #[cfg(not(target_os = "linux"))]
            Program::Native(_) => Box::pin(async {
                Err(Error::Unsupported {
                    backend: "runner",
                    reason: "native helpers need Linux".into(),
                })
            }),
        }
    }
}
