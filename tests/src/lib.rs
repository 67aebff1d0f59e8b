//! Support for wrun's workspace-level tests and benchmark: the guest modules built from source
//! by `build.rs`, a shared sandbox and async runtime, and fixture worktrees.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wrun_runtime::{Job, Outcome, Sandbox, WasmConfig, WasmModule, WasmSandbox};

/// The escape battery's guest program (`tests/guest`), built for wasm32-wasip1.
pub const GUEST_WASM: &str = env!("WRUN_WASM_WRUN_TEST_GUEST");
/// The `tree-stats` example helper, built for wasm32-wasip1.
pub const TREE_STATS_WASM: &str = env!("WRUN_WASM_TREE_STATS");
/// The `secret-scan` helper, built for wasm32-wasip1.
pub const SECRET_SCAN_WASM: &str = env!("WRUN_WASM_SECRET_SCAN");
/// The `line-hygiene` helper, built for wasm32-wasip1.
pub const LINE_HYGIENE_WASM: &str = env!("WRUN_WASM_LINE_HYGIENE");
/// The `large-files` helper, built for wasm32-wasip1.
pub const LARGE_FILES_WASM: &str = env!("WRUN_WASM_LARGE_FILES");
/// The `config-syntax` helper, built for wasm32-wasip1.
pub const CONFIG_SYNTAX_WASM: &str = env!("WRUN_WASM_CONFIG_SYNTAX");

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

/// The native sandbox the tests share (mode `require`: a test that expects bwrap must never
/// silently run unsandboxed), or `None` with a printed reason when this machine cannot run
/// bubblewrap. With `WRUN_REQUIRE_NATIVE=1` (set by `.ci/run`) a missing sandbox fails instead.
pub fn native() -> Option<&'static wrun_runtime::NativeSandbox> {
    static NATIVE: OnceLock<Result<wrun_runtime::NativeSandbox, String>> = OnceLock::new();
    let result = NATIVE.get_or_init(|| {
        let bwrap = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists());
        let sandbox = wrun_runtime::NativeSandbox::new(wrun_runtime::NativeConfig::new(
            bwrap,
            wrun_runtime::SandboxMode::Require,
        ))
        .map_err(|e| e.to_string())?;
        rt().block_on(sandbox.probe())?;
        Ok(sandbox)
    });
    match result {
        Ok(sandbox) => Some(sandbox),
        Err(reason) if std::env::var_os("WRUN_REQUIRE_NATIVE").is_some() => {
            panic!("the native sandbox is required here but unavailable: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping: the native sandbox is unavailable: {reason}");
            None
        }
    }
}

/// Whether the kernel offers Landlock to this process (writable wasm runs with protected paths
/// need it).
pub fn landlock_available() -> bool {
    wrun_runtime::landlock_abi().is_some()
}

/// A native sandbox of its own (its own pool of spawners), when the shared one is available.
pub fn fresh_native() -> Option<wrun_runtime::NativeSandbox> {
    let shared = native()?;
    wrun_runtime::NativeSandbox::new(shared.config().clone()).ok()
}

/// Runs a native job in the shared native sandbox.
pub fn run_native(sandbox: &dyn Sandbox, job: Job) -> Outcome {
    rt().block_on(sandbox.run(job)).expect("native job starts")
}

/// Whether a process runs with exactly this command line.
pub fn process_with_argv_exists(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
}

/// Whether any process on the machine has `marker` in its command line.
pub fn process_with_marker_exists(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                .unwrap_or(false)
        })
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}
