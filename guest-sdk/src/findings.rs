//! Findings: one JSON object per line on stdout, schema version [`SCHEMA_VERSION`].
//!
//! ```json
//! {"wrun_finding":1,"path":"src/a.rs","line":3,"column":5,"end_line":3,"severity":"warning",
//!  "rule":"trailing-whitespace","message":"trailing whitespace","fix":{"replacement":""}}
//! ```
//! `path` is relative to the worktree with `/` separators; `line`, `column` and `end_line` are
//! 1-based and optional (a finding about a whole file has none); `fix` is optional.

use std::io::Write;

use serde::{Deserialize, Serialize};

/// The findings schema version this crate writes.
pub const SCHEMA_VERSION: u32 = 1;

/// How serious a finding is (the SARIF levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Must be fixed.
    Error,
    /// Should be looked at.
    Warning,
    /// For information.
    Note,
}

/// A suggested replacement for the finding's region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// The text that should replace the region.
    pub replacement: String,
    /// What the fix does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Schema version: always [`SCHEMA_VERSION`] when written by this crate.
    pub wrun_finding: u32,
    /// The file, relative to the worktree, `/`-separated.
    pub path: String,
    /// First line (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Column on the first line (1-based, in characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// Last line (1-based, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    /// How serious.
    pub severity: Severity,
    /// A stable identifier of the check, e.g. `aws-access-key`.
    pub rule: String,
    /// What is wrong, for a person.
    pub message: String,
    /// A suggested fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

impl Finding {
    /// A finding about a whole file.
    pub fn new(
        path: impl Into<String>,
        rule: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
    ) -> Self {
        Self {
            wrun_finding: SCHEMA_VERSION,
            path: path.into(),
            line: None,
            column: None,
            end_line: None,
            severity,
            rule: rule.into(),
            message: message.into(),
            fix: None,
        }
    }

    /// Sets the line (and the end line to the same).
    pub fn at_line(mut self, line: u32) -> Self {
        self.line = Some(line);
        self.end_line = Some(line);
        self
    }

    /// Sets the column.
    pub fn at_column(mut self, column: u32) -> Self {
        self.column = Some(column);
        self
    }

    /// Sets a suggested fix.
    pub fn with_fix(mut self, replacement: impl Into<String>, description: impl Into<String>) -> Self {
        self.fix = Some(Fix {
            replacement: replacement.into(),
            description: Some(description.into()),
        });
        self
    }
}

/// The JSON line for a finding (without the newline).
pub fn to_line(finding: &Finding) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string(finding).unwrap_or_default()
}

/// Writes a finding to stdout as one line. A closed stdout is ignored: the host has gone.
pub fn emit(finding: &Finding) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", to_line(finding));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_round_trip_as_one_line() {
        let f = Finding::new(
            "src/a.rs",
            "trailing-whitespace",
            Severity::Warning,
            "trailing \"space\"\nhere",
        )
        .at_line(3)
        .at_column(5)
        .with_fix("", "remove it");
        let line = to_line(&f);
        assert!(!line.contains('\n'));
        assert!(line.starts_with("{\"wrun_finding\":1,"));
        assert_eq!(serde_json::from_str::<Finding>(&line).expect("parses"), f);
    }

    #[test]
    fn optional_fields_are_omitted() {
        let line = to_line(&Finding::new("a", "r", Severity::Note, "m"));
        assert_eq!(
            line,
            r#"{"wrun_finding":1,"path":"a","severity":"note","rule":"r","message":"m"}"#
        );
    }
}
