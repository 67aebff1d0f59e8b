//! line-hygiene: merge-conflict markers, trailing whitespace and a missing final newline, on the
//! pull request's changed lines. Exit 0 clean, 1 found, 2 failed.

use wrun_guest::{Finding, Severity, emit};

/// Files larger than this are skipped (generated, not written by hand).
const MAX_FILE: u64 = 4 << 20;

fn main() {
    wrun_guest::describe(
        &wrun_guest::ToolInfo::new("line-hygiene", env!("CARGO_PKG_VERSION")),
        &[
            wrun_guest::RuleInfo::new(
                "conflict-marker",
                "A merge-conflict marker",
                "A line that starts with a merge-conflict marker (<<<<<<<, =======, >>>>>>>) left in a changed line.",
                "Resolve the conflict and remove the marker lines.",
            ),
            wrun_guest::RuleInfo::new(
                "trailing-whitespace",
                "Trailing whitespace",
                "A changed line that ends in spaces or tabs.",
                "Remove the whitespace at the end of the line (the finding carries the fix).",
            ),
            wrun_guest::RuleInfo::new(
                "missing-final-newline",
                "No newline at the end of the file",
                "A changed file whose last line does not end in a newline.",
                "End the file with a newline.",
            ),
        ],
    );
    wrun_guest::run_helper("line-hygiene", |changes| {
        let mut found = 0;
        for file in changes.files_or_walk(wrun_guest::worktree()) {
            let Some(bytes) = file.read(MAX_FILE) else {
                continue;
            };
            if bytes.contains(&0) {
                continue; // binary
            }
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.split('\n').collect();
            let last = lines.len();
            for (n, line) in lines.iter().enumerate() {
                let line_no = n as u32 + 1;
                if n + 1 == last || !file.touches(line_no) {
                    continue; // the piece after the final newline is not a line
                }
                let line = line.strip_suffix('\r').unwrap_or(line);
                for finding in check_line(&file.path, line_no, line) {
                    emit(&finding);
                    found += 1;
                }
            }
            let final_line = lines.len().saturating_sub(1) as u32 + 1;
            if !bytes.is_empty() && !bytes.ends_with(b"\n") && file.touches(final_line) {
                emit(
                    &Finding::new(
                        &file.path,
                        "missing-final-newline",
                        Severity::Note,
                        "the file does not end with a newline",
                    )
                    .at_line(final_line)
                    .with_fix("\n", "add a newline at the end"),
                );
                found += 1;
            }
        }
        Ok(found)
    })
}

fn check_line(path: &str, line_no: u32, line: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let marker = ["<<<<<<< ", ">>>>>>> ", "||||||| "]
        .iter()
        .any(|m| line.starts_with(m))
        || line == "======="
        || line == "<<<<<<<"
        || line == ">>>>>>>";
    if marker {
        out.push(
            Finding::new(
                path,
                "conflict-marker",
                Severity::Error,
                "a merge-conflict marker is left in the file",
            )
            .at_line(line_no)
            .at_column(1),
        );
    }
    let trimmed = line.trim_end_matches([' ', '\t']);
    if trimmed.len() != line.len() {
        out.push(
            Finding::new(
                path,
                "trailing-whitespace",
                Severity::Warning,
                "trailing whitespace",
            )
            .at_line(line_no)
            .at_column(trimmed.chars().count() as u32 + 1)
            .with_fix(trimmed, "remove the trailing whitespace"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_whitespace() {
        assert_eq!(check_line("a", 1, "<<<<<<< HEAD")[0].rule, "conflict-marker");
        assert_eq!(check_line("a", 1, "=======")[0].rule, "conflict-marker");
        let f = &check_line("a", 1, "let x = 1;  ")[0];
        assert_eq!((f.rule.as_str(), f.column), ("trailing-whitespace", Some(11)));
        assert!(check_line("a", 1, "a == b").is_empty());
        assert!(check_line("a", 1, "=== heading ===").is_empty());
    }
}
