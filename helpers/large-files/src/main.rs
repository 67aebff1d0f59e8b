//! large-files: files the pull request adds or changes that are larger than a limit or binary.
//!
//! Usage: `large-files [--max-size BYTES]` (default 1048576). Binary means a NUL byte in the first
//! 8 KiB. Exit 0 clean, 1 found, 2 failed.

use std::io::Read;

use wrun_guest::{Finding, Severity, emit};

const DEFAULT_MAX: u64 = 1 << 20;

fn main() {
    wrun_guest::describe(
        &wrun_guest::ToolInfo::new("large-files", env!("CARGO_PKG_VERSION")),
        &[
            wrun_guest::RuleInfo::new(
                "oversized-file",
                "A file over the size limit",
                "A changed file larger than the limit the helper was given (--max-size, 1 MiB by default).",
                "Keep large files out of the repository (Git LFS, a release artifact) or raise the limit for this path.",
            ),
            wrun_guest::RuleInfo::new(
                "binary-file",
                "A binary file",
                "A changed file that is binary (it holds NUL bytes) where text was expected.",
                "Keep binary files out of the repository, or mark them in .gitattributes if they belong there.",
            ),
        ],
    );
    wrun_guest::run_helper("large-files", |changes| {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let max = match args.as_slice() {
            [] => DEFAULT_MAX,
            [flag, n] if flag == "--max-size" => match n.parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("--max-size needs a positive number of bytes, got {n:?}")),
            },
            _ => return Err("usage: large-files [--max-size BYTES]".into()),
        };
        let mut found = 0;
        for file in changes.files_or_walk(wrun_guest::worktree()) {
            let Ok(meta) = std::fs::metadata(&file.path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            if meta.len() > max {
                emit(&Finding::new(
                    &file.path,
                    "oversized-file",
                    Severity::Warning,
                    format!("the file is {} bytes, above the {max}-byte limit", meta.len()),
                ));
                found += 1;
            }
            let mut head = Vec::with_capacity(8192);
            if let Ok(f) = std::fs::File::open(&file.path)
                && f.take(8192).read_to_end(&mut head).is_ok()
                && head.contains(&0)
            {
                emit(&Finding::new(
                    &file.path,
                    "binary-file",
                    Severity::Note,
                    "a binary file is added or changed",
                ));
                found += 1;
            }
        }
        Ok(found)
    })
}
