//! The pull request's changed files, as the host passes them on stdin:
//!
//! ```json
//! {"wrun_changes":1,"files":[{"path":"src/a.rs","lines":[[10,12],[40,40]]},{"path":"README.md"}]}
//! ```
//! `lines` lists the changed line ranges (1-based, inclusive) of the new version; a file
//! without `lines` counts as changed throughout. Stdin closed or empty means the host passed no
//! list: helpers then look at the whole worktree. At most [`MAX_CHANGES_BYTES`] are read.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

/// The most stdin a helper reads for the list. A list this large is a hostile pull request.
pub const MAX_CHANGES_BYTES: u64 = 8 << 20;

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangedFile {
    /// Relative to the worktree, `/`-separated.
    pub path: String,
    /// Changed line ranges of the new version; `None` means the whole file.
    #[serde(default)]
    pub lines: Option<Vec<(u32, u32)>>,
}

impl ChangedFile {
    /// The file's bytes if it is a regular file of at most `max` bytes (relative to the
    /// worktree, the helper's working directory); `None` if it is missing, not a regular file
    /// (a symlink is followed only inside the worktree), too large or unreadable.
    pub fn read(&self, max: u64) -> Option<Vec<u8>> {
        use std::io::Read as _;
        let file = std::fs::File::open(&self.path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > max {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(max).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Whether `line` (1-based) is changed.
    pub fn touches(&self, line: u32) -> bool {
        self.lines
            .as_ref()
            .is_none_or(|ranges| ranges.iter().any(|&(a, b)| (a..=b).contains(&line)))
    }
}

/// The changed-file list, or its absence.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// `None` when the host passed no list.
    pub files: Option<Vec<ChangedFile>>,
}

/// Why the list could not be read.
#[derive(Debug)]
pub enum ChangesError {
    /// Reading stdin failed.
    Io(std::io::Error),
    /// More than [`MAX_CHANGES_BYTES`].
    TooLarge,
    /// Not the documented JSON.
    Malformed(String),
}

impl std::fmt::Display for ChangesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangesError::Io(e) => write!(f, "reading the changed-file list from stdin: {e}"),
            ChangesError::TooLarge => write!(
                f,
                "the changed-file list is larger than {MAX_CHANGES_BYTES} bytes"
            ),
            ChangesError::Malformed(e) => write!(f, "the changed-file list is not valid: {e}"),
        }
    }
}

impl std::error::Error for ChangesError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    wrun_changes: u32,
    files: Vec<ChangedFile>,
}

impl Changes {
    /// Reads the list from stdin.
    pub fn from_stdin() -> Result<Self, ChangesError> {
        let mut buf = Vec::new();
        std::io::stdin()
            .take(MAX_CHANGES_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(ChangesError::Io)?;
        if buf.len() as u64 > MAX_CHANGES_BYTES {
            return Err(ChangesError::TooLarge);
        }
        Self::parse(&buf)
    }

    /// Parses the list; empty input means no list.
    pub fn parse(bytes: &[u8]) -> Result<Self, ChangesError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| ChangesError::Malformed(e.to_string()))?;
        if wire.wrun_changes != 1 {
            return Err(ChangesError::Malformed(format!(
                "unsupported version {}",
                wire.wrun_changes
            )));
        }
        if let Some(bad) = wire
            .files
            .iter()
            .find(|f| f.path.starts_with('/') || f.path.split('/').any(|c| c == ".."))
        {
            return Err(ChangesError::Malformed(format!(
                "path {:?} leaves the worktree",
                bad.path
            )));
        }
        Ok(Self {
            files: Some(wire.files),
        })
    }

    /// The changed files, or, without a list, every file of the worktree walk (whole files).
    pub fn files_or_walk(&self, root: &Path) -> Vec<ChangedFile> {
        match &self.files {
            Some(files) => files.clone(),
            None => crate::walk_files(root, |_, _| {})
                .iter()
                .map(|p| ChangedFile {
                    path: crate::display_path(root, p),
                    lines: None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_form() {
        let c =
            Changes::parse(br#"{"wrun_changes":1,"files":[{"path":"a.rs","lines":[[2,3]]},{"path":"b"}]}"#)
                .expect("parses");
        let files = c.files.expect("a list");
        assert!(files[0].touches(3) && !files[0].touches(4));
        assert!(files[1].touches(999));
    }

    #[test]
    fn empty_means_no_list_and_junk_is_an_error() {
        assert_eq!(Changes::parse(b"  \n").expect("empty"), Changes::default());
        assert!(Changes::parse(b"[1,2]").is_err());
        assert!(Changes::parse(br#"{"wrun_changes":2,"files":[]}"#).is_err());
        assert!(Changes::parse(br#"{"wrun_changes":1,"files":[{"path":"../x"}]}"#).is_err());
    }
}
