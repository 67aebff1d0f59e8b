//! Support for wrun's workspace-level tests and benchmark: the guest modules built from source
//! by `build.rs`, a shared sandbox and async runtime, and fixture worktrees.
#![allow(clippy::disallowed_methods, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wrun_runtime::{Job, Outcome, Sandbox, WasmConfig, WasmModule, WasmSandbox};

/// The escape battery's guest program (`tests/guest`), built for wasm32-wasip1.
pub const GUEST_WASM: &str = env!("WRUN_WASM_WRUN_TEST_GUEST");
/// The `tree-stats` example helper, built for wasm32-wasip1.
pub const TREE_STATS_WASM: &str = env!("WRUN_WASM_TREE_STATS");

/// The guest program as a module (read and hashed once).
pub fn guest() -> WasmModule {
    static MODULE: OnceLock<WasmModule> = OnceLock::new();
    MODULE
        .get_or_init(|| WasmModule::from_file(Path::new(GUEST_WASM), 1 << 30).expect("guest module builds"))
        .clone()
}

/// A module from WebAssembly text.
pub fn wat_module(name: &str, text: &str) -> WasmModule {
    WasmModule::from_bytes(name, wat::parse_str(text).expect("valid wat"))
}

/// The async runtime the tests share.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// A wasm sandbox shared by the tests (memory cache only), as the trait object hosts hold.
pub fn sandbox() -> &'static dyn Sandbox {
    static SANDBOX: OnceLock<WasmSandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| WasmSandbox::new(WasmConfig::default()).expect("sandbox"))
}

/// Runs a job on the shared sandbox, expecting it to start.
pub fn run(job: Job) -> Outcome {
    rt().block_on(sandbox().run(job)).expect("job starts")
}

/// A pull-request worktree next to a directory that must stay out of reach.
#[derive(Debug)]
pub struct Fixture {
    _root: tempfile::TempDir,
    /// The worktree the helper gets.
    pub worktree: PathBuf,
    /// A sibling directory holding `secret.txt` with [`CANARY`].
    pub outside: PathBuf,
}

/// Content of the file outside the worktree; it must never appear in a helper's output.
pub const CANARY: &str = "CANARY-7f3a9c-outside-the-worktree";

impl Fixture {
    /// `worktree/README.md`, `worktree/src/lib.rs`, `outside/secret.txt`.
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let worktree = root.path().join("worktree");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(worktree.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(worktree.join("README.md"), "hello from the worktree\n").unwrap();
        std::fs::write(worktree.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(outside.join("secret.txt"), CANARY).unwrap();
        Self {
            _root: root,
            worktree,
            outside,
        }
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}
