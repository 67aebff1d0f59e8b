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
    /// A runner with a wasm backend configured by `wasm` and, on Linux, a native backend
    /// configured by `native` (without one, a native job is an error). Like every backend's
    /// `new`: a configuration in, the checked backend out. Create one per process and share
    /// it by reference: `run` takes `&self`, so concurrent runs need no `Arc`.
    pub fn new(
        wasm: crate::WasmConfig,
        #[cfg(target_os = "linux")] native: Option<crate::NativeConfig>,
    ) -> Result<Self, Error> {
        Ok(Self::from_backends(
            WasmSandbox::new(wasm)?,
            #[cfg(target_os = "linux")]
            native.map(crate::NativeSandbox::new).transpose()?,
        ))
    }

    /// A runner over backends made elsewhere.
    pub fn from_backends(
        wasm: WasmSandbox,
        #[cfg(target_os = "linux")] native: Option<crate::NativeSandbox>,
    ) -> Self {
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

    fn binds<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, bool> {
        match &job.program {
            Program::Wasm(_) => self.wasm.binds(job),
            #[cfg(target_os = "linux")]
            Program::Native(_) => match &self.native {
                Some(native) => native.binds(job),
                None => Box::pin(async { false }),
            },
            #[cfg(not(target_os = "linux"))]
            Program::Native(_) => Box::pin(async { false }),
        }
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
