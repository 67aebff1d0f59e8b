//! Parsers for command-line and policy values.

use std::path::PathBuf;

use wrun_runtime::{Access, Mount};

/// A directory in `wasmtime run --dir` spelling: `HOST[::GUEST]`, with an optional `:ro`
/// (default) or `:rw` at the end. Without a guest path the directory appears at its host path.
pub(crate) fn dir(s: &str) -> Result<Mount, String> {
    let (spec, access) = if let Some(rest) = s.strip_suffix(":rw") {
        (rest, Access::ReadWrite)
    } else if let Some(rest) = s.strip_suffix(":ro") {
        (rest, Access::ReadOnly)
    } else {
        (s, Access::ReadOnly)
    };
    let (host, guest) = match spec.split_once("::") {
        Some((host, guest)) => (host, guest.to_owned()),
        None => (spec, spec.to_owned()),
    };
    if host.is_empty() || guest.is_empty() {
        return Err(format!("invalid --dir {s:?}: expected HOST[::GUEST][:ro|:rw]"));
    }
    let guest = if guest.starts_with('/') {
        guest
    } else {
        format!("/{guest}")
    };
    Ok(Mount::new(PathBuf::from(host), guest, access))
}

/// A read-only bind for native helpers: `HOST[::GUEST]`, the host path made absolute; without a
/// guest path the directory appears at its absolute host path.
pub(crate) fn ro_bind(s: &str) -> Result<Mount, String> {
    let (host, guest) = match s.split_once("::") {
        Some((host, guest)) => (host, Some(guest)),
        None => (s, None),
    };
    let host = std::path::absolute(host).map_err(|e| format!("invalid --ro-bind {s:?}: {e}"))?;
    let guest = match guest {
        Some(g) if g.starts_with('/') => g.to_owned(),
        Some(g) => {
            return Err(format!(
                "invalid --ro-bind {s:?}: the guest path {g:?} must be absolute"
            ));
        }
        None => host.to_string_lossy().into_owned(),
    };
    Ok(Mount::new(host, guest, Access::ReadOnly))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_parse_like_wasmtime() {
        let m = dir("/data::/in").expect("parses");
        assert_eq!(
            (m.host.to_str(), m.guest.as_str(), m.access),
            (Some("/data"), "/in", Access::ReadOnly)
        );
        let m = dir("/data::/out:rw").expect("parses");
        assert_eq!((m.guest.as_str(), m.access), ("/out", Access::ReadWrite));
        let m = dir("/data").expect("parses");
        assert_eq!(m.guest, "/data");
        assert!(dir("::/x").is_err());
        assert!(dir("/x::").is_err());
    }
}
