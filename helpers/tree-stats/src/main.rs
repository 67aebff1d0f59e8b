//! tree-stats: files, lines and bytes per file extension in the worktree.
//!
//! Usage: `tree-stats [DIR]` (default: the worktree). Exit 0 on success, 1 if some file could
//! not be read (reported on stderr, counted as skipped).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

#[derive(Default)]
struct Tally {
    files: u64,
    lines: u64,
    bytes: u64,
}

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    let root = arg.as_deref().map(Path::new).unwrap_or(wrun_guest::worktree());
    let mut failed = 0u64;
    let files = wrun_guest::walk_files(root, |path, e| {
        eprintln!("tree-stats: {}: {e}", path.display());
        failed += 1;
    });
    let mut by_ext: BTreeMap<String, Tally> = BTreeMap::new();
    for file in &files {
        let (bytes, lines) = match count(file) {
            Ok(counts) => counts,
            Err(e) => {
                eprintln!("tree-stats: {}: {e}", wrun_guest::display_path(root, file));
                failed += 1;
                continue;
            }
        };
        let ext = file
            .extension()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_else(|| "(none)".to_owned());
        let t = by_ext.entry(ext).or_default();
        t.files += 1;
        t.bytes += bytes;
        t.lines += lines;
    }
    let mut rows: Vec<_> = by_ext.into_iter().collect();
    rows.sort_by(|a, b| b.1.lines.cmp(&a.1.lines).then(a.0.cmp(&b.0)));
    println!(
        "{:<12} {:>7} {:>9} {:>11}",
        "extension", "files", "lines", "bytes"
    );
    let mut total = Tally::default();
    for (ext, t) in &rows {
        println!("{ext:<12} {:>7} {:>9} {:>11}", t.files, t.lines, t.bytes);
        total.files += t.files;
        total.lines += t.lines;
        total.bytes += t.bytes;
    }
    println!(
        "{:<12} {:>7} {:>9} {:>11}",
        "total", total.files, total.lines, total.bytes
    );
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Bytes and newlines of a file, read in chunks so memory stays flat whatever its size.
fn count(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut bytes, mut lines) = (0u64, 0u64);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((bytes, lines));
        }
        bytes += n as u64;
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}
