//! `wrun check`: what a module asks for, read without running (or compiling) it.

use serde::Serialize;

/// A capability group of WASI preview 1 functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Arguments and environment.
    Args,
    /// Files and directories.
    Filesystem,
    /// Clocks and timers.
    Clocks,
    /// Random numbers.
    Random,
    /// Process exit, signals, scheduling.
    Proc,
    /// Sockets (preview 1 can only use sockets it is handed; wrun hands none).
    Sockets,
    /// Standard streams and polling.
    Io,
}

/// One import and what wrun makes of it.
#[derive(Debug, Clone, Serialize)]
pub struct Import {
    /// Import module.
    pub module: String,
    /// Import name.
    pub name: String,
    /// The capability, for WASI preview 1 functions.
    pub capability: Option<Capability>,
    /// Why wrun refuses it, if it does.
    pub refused: Option<String>,
}

/// The report on a module.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `preview1`, `component` or `unknown`.
    pub wasi: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, hex.
    pub sha256: String,
    /// Imports in order.
    pub imports: Vec<Import>,
    /// Export names.
    pub exports: Vec<String>,
    /// Declared memories: (initial, maximum) in 64 KiB pages.
    pub memories: Vec<(u64, Option<u64>)>,
    /// Whether wrun would run it (no refusals, a `_start`).
    pub runnable: bool,
    /// Reasons it would not.
    pub problems: Vec<String>,
}

/// Socket calls of preview 1: provided as functions, but they only work on sockets handed to
/// the guest, and wrun hands none.
const SOCKETS: &[&str] = &["sock_accept", "sock_recv", "sock_send", "sock_shutdown"];

fn capability(name: &str) -> Option<Capability> {
    Some(match name {
        "args_get" | "args_sizes_get" | "environ_get" | "environ_sizes_get" => Capability::Args,
        "clock_res_get" | "clock_time_get" => Capability::Clocks,
        "random_get" => Capability::Random,
        "proc_exit" | "proc_raise" | "sched_yield" => Capability::Proc,
        "poll_oneoff" => Capability::Io,
        n if SOCKETS.contains(&n) => Capability::Sockets,
        n if n.starts_with("fd_") || n.starts_with("path_") => Capability::Filesystem,
        _ => return None,
    })
}

/// Reads `bytes` as a module and reports what it asks for. `provided` says whether wrun's
/// linker has a given `wasi_snapshot_preview1` function.
pub fn inspect(bytes: &[u8], provided: impl Fn(&str) -> bool) -> Result<Report, String> {
    let mut report = Report {
        wasi: "unknown".into(),
        size: bytes.len() as u64,
        sha256: {
            use sha2::Digest as _;
            sha2::Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        },
        imports: Vec::new(),
        exports: Vec::new(),
        memories: Vec::new(),
        runnable: false,
        problems: Vec::new(),
    };
    if wasmparser::Parser::is_component(bytes) {
        report.wasi = "component".into();
        report
            .problems
            .push("a WebAssembly component (WASI preview 2): wrun runs preview 1 command modules".into());
        return Ok(report);
    }
    if !wasmparser::Parser::is_core_wasm(bytes) {
        return Err("not a WebAssembly module (no \\0asm header)".into());
    }
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("malformed module: {e}"))? {
            wasmparser::Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.map_err(|e| format!("malformed import: {e}"))?;
                    let module = import.module.to_owned();
                    let name = import.name.to_owned();
                    let func = matches!(import.ty, wasmparser::TypeRef::Func(_));
                    let refused = if module != "wasi_snapshot_preview1" {
                        Some(format!("module `{module}` is not WASI preview 1"))
                    } else if !func || !provided(&name) {
                        Some("not a WASI preview 1 function wrun provides".into())
                    } else {
                        None
                    };
                    let capability = (module == "wasi_snapshot_preview1")
                        .then(|| capability(&name))
                        .flatten();
                    report.imports.push(Import {
                        module,
                        name,
                        capability,
                        refused,
                    });
                }
            }
            wasmparser::Payload::ExportSection(section) => {
                for export in section {
                    let export = export.map_err(|e| format!("malformed export: {e}"))?;
                    report.exports.push(export.name.to_owned());
                }
            }
            wasmparser::Payload::MemorySection(section) => {
                for memory in section {
                    let memory = memory.map_err(|e| format!("malformed memory: {e}"))?;
                    report.memories.push((memory.initial, memory.maximum));
                }
            }
            _ => {}
        }
    }
    if report
        .imports
        .iter()
        .any(|i| i.module == "wasi_snapshot_preview1")
    {
        report.wasi = "preview1".into();
    }
    for import in &report.imports {
        if let Some(why) = &import.refused {
            report
                .problems
                .push(format!("imports `{}::{}`: {why}", import.module, import.name));
        }
    }
    if !report.exports.iter().any(|e| e == "_start") {
        report
            .problems
            .push("exports no `_start`: not a WASI command".into());
    }
    report.runnable = report.problems.is_empty();
    Ok(report)
}
