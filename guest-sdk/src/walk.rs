//! Walking the worktree: regular files, `.git` skipped, `.gitignore` honoured.

use std::io;
use std::path::{Path, PathBuf};

/// Every regular file under `root`, sorted, skipping `.git` and what `.gitignore` files (and
/// `.git/info/exclude`) ignore. Hidden files are included: a pull request can hide things in
/// them. Symlinks are not followed. Entries that cannot be read are reported to `on_error`.
pub fn walk_files(root: &Path, mut on_error: impl FnMut(&Path, io::Error)) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker {
        match entry {
            Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => files.push(entry.into_path()),
            Ok(_) => {}
            Err(e) => {
                let path = match &e {
                    ignore::Error::WithPath { path, .. } => path.clone(),
                    _ => root.to_path_buf(),
                };
                on_error(&path, io::Error::other(e.to_string()));
            }
        }
    }
    files.sort();
    files
}

/// `path` relative to `root`, with `/` separators and no leading `./`, for reports.
pub fn display_path(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_skips_git_honours_gitignore_and_sorts() {
        let tmp = std::env::temp_dir().join(format!("wrun-guest-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join(".git/objects")).expect("mkdir");
        std::fs::create_dir_all(tmp.join("src")).expect("mkdir");
        std::fs::create_dir_all(tmp.join("target/debug")).expect("mkdir");
        std::fs::write(tmp.join(".git/HEAD"), "ref").expect("write");
        std::fs::write(tmp.join(".gitignore"), "target/\n*.log\n").expect("write");
        std::fs::write(tmp.join("target/debug/big"), "x").expect("write");
        std::fs::write(tmp.join("run.log"), "x").expect("write");
        std::fs::write(tmp.join("src/b.rs"), "b").expect("write");
        std::fs::write(tmp.join(".env"), "hidden").expect("write");
        std::fs::write(tmp.join("a.txt"), "a").expect("write");
        let files = walk_files(&tmp, |p, e| panic!("{}: {e}", p.display()));
        let names: Vec<String> = files.iter().map(|f| display_path(&tmp, f)).collect();
        assert_eq!(names, [".env", ".gitignore", "a.txt", "src/b.rs"]);
        std::fs::remove_dir_all(&tmp).expect("cleanup");
    }
}
