//! The one module that reads wrun's own environment. Everything it returns is an explicit value
//! the rest of the host passes on; the runtime never reads the environment.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

/// The value of `name` in wrun's environment, if set and valid UTF-8.
///
/// # Security
/// Reads the process environment. Callers pass the value to a helper only when the user or the
/// policy named the variable explicitly, and the runtime's guard still drops secrets.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The directory for wrun's compiled-code cache: `$XDG_CACHE_HOME/wrun`, else
/// `$HOME/.cache/wrun`; `None` if neither is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let non_empty = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    non_empty(std::env::var_os("XDG_CACHE_HOME"))
        .or_else(|| non_empty(std::env::var_os("HOME")).map(|h| h.join(".cache")))
        .map(|d| d.join("wrun"))
}

/// Resolves a bare command name on wrun's own `PATH` to an absolute path to an executable file.
///
/// # Security
/// Reads `PATH` and the filesystem. Only for commands wrun itself runs (bwrap) or that the
/// operator named on the command line; helper definitions resolve against the policy's `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The sandbox mode from `HELPER_SANDBOX`, if set.
pub fn helper_sandbox() -> Option<String> {
    var("HELPER_SANDBOX")
}
