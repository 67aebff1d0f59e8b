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
