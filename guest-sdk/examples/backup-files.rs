use wrun_guest::{Finding, Severity, emit};

fn main() {
    // Reads the changed-file list; exits 0 or 1 from the count returned, 2 on an error.
    wrun_guest::run_helper("backup-files", |changes| {
        let mut found = 0;
        for file in changes.files_or_walk(wrun_guest::worktree()) {
            if file.path.ends_with(".orig") {
                emit(&Finding::new(
                    &file.path,
                    "backup-file",
                    Severity::Warning,
                    "a merge backup file is committed",
                ));
                found += 1;
            }
        }
        Ok(found)
    })
}
