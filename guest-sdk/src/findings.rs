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

/// What a helper says about itself, once, before its findings: one JSON line
/// `{"wrun_tool":1,"name":…,"version":…,"information_uri":…}`. Reports (SARIF) name the tool
/// and its version from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Schema version: always [`SCHEMA_VERSION`] when written by this crate.
    pub wrun_tool: u32,
    /// The tool's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where to read about it (an absolute URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub information_uri: Option<String>,
}

impl ToolInfo {
    /// A tool with a name and version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            wrun_tool: SCHEMA_VERSION,
            name: name.into(),
            version: version.into(),
            information_uri: None,
        }
    }

    /// Sets where to read about it.
    pub fn with_information_uri(mut self, uri: impl Into<String>) -> Self {
        self.information_uri = Some(uri.into());
        self
    }
}

/// What a helper says about one of its rules, before findings of it: one JSON line
/// `{"wrun_rule":1,"id":…,"short":…,"full":…,"help":…}`. Code-scanning services (GitHub's)
/// require the short and full descriptions and the help text of every rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleInfo {
    /// Schema version: always [`SCHEMA_VERSION`] when written by this crate.
    pub wrun_rule: u32,
    /// The rule's id, as findings name it.
    pub id: String,
    /// One line: what it finds.
    pub short: String,
    /// A paragraph: what it finds and why it matters.
    pub full: String,
    /// What to do about a finding (plain text; Markdown in `help_markdown`).
    pub help: String,
    /// The same help as Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help_markdown: Option<String>,
    /// Where to read more (an absolute URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help_uri: Option<String>,
    /// The severity its findings usually have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_severity: Option<Severity>,
}

impl RuleInfo {
    /// A rule with its descriptions and help.
    pub fn new(
        id: impl Into<String>,
        short: impl Into<String>,
        full: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Self {
            wrun_rule: SCHEMA_VERSION,
            id: id.into(),
            short: short.into(),
            full: full.into(),
            help: help.into(),
            help_markdown: None,
            help_uri: None,
            default_severity: None,
        }
    }

    /// Sets the severity its findings usually have.
    pub fn with_default_severity(mut self, severity: Severity) -> Self {
        self.default_severity = Some(severity);
        self
    }
}

/// Writes what the helper is and its rules to stdout, one line each (call it once, first).
pub fn describe(tool: &ToolInfo, rules: &[RuleInfo]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(tool).unwrap_or_default());
    for rule in rules {
        let _ = writeln!(out, "{}", serde_json::to_string(rule).unwrap_or_default());
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
