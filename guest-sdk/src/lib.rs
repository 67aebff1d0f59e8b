//! Write wrun helpers in Rust for wasm32-wasip1.
//!
//! A helper is a WASI preview 1 command. wrun starts it with the pull-request worktree as its
//! working directory (also preopened at `/work`), read-only unless the helper definition asks
//! for write access; its arguments; an explicit, scrubbed environment; and stdin closed unless
//! the host passes input. See this crate's README for the whole contract.
#![forbid(unsafe_code)]

use std::io;
use std::path::{Path, PathBuf};

/// Where the worktree is, as seen by the helper: its working directory.
pub fn worktree() -> &'static Path {
    Path::new(".")
}

/// Every regular file under `root`, sorted, skipping `.git` directories. Symlinks are not
/// followed (and wrun would not let them lead out of the worktree anyway). Directories that
/// cannot be read are reported through `on_error` and skipped.
pub fn walk_files(root: &Path, mut on_error: impl FnMut(&Path, io::Error)) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                on_error(&dir, e);
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    on_error(&dir, e);
                    continue;
                }
            };
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    if entry.file_name() != ".git" {
                        stack.push(path);
                    }
                }
                Ok(t) if t.is_file() => files.push(path),
                Ok(_) => {}
                Err(e) => on_error(&path, e),
            }
        }
    }
    files.sort();
    files
}

/// `path` relative to `root`, with `/` separators, for reports.
pub fn display_path(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_skips_git_and_sorts() {
        let tmp = std::env::temp_dir().join(format!("wrun-guest-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join(".git/objects")).expect("mkdir");
        std::fs::create_dir_all(tmp.join("src")).expect("mkdir");
        std::fs::write(tmp.join(".git/HEAD"), "ref").expect("write");
        std::fs::write(tmp.join("src/b.rs"), "b").expect("write");
        std::fs::write(tmp.join("a.txt"), "a").expect("write");
        let files = walk_files(&tmp, |p, e| panic!("{}: {e}", p.display()));
        let names: Vec<String> = files.iter().map(|f| display_path(&tmp, f)).collect();
        assert_eq!(names, ["a.txt", "src/b.rs"]);
        std::fs::remove_dir_all(&tmp).expect("cleanup");
    }
}
