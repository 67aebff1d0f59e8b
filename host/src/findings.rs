//! Findings from a helper's captured stdout (the JSON Lines protocol of `wrun-guest`), and
//! their renderings as SARIF 2.1.0 and as text.
//!
//! Parsing never fails: a line that is not a finding is reported with its line number and the
//! reason, and a stream that was cut by the output cap is flagged (the lines around the cut are
//! then usually malformed too, and findings in the cut middle are lost).

use serde_json::{Value, json};
use wrun_guest::{Finding, RuleInfo, SCHEMA_VERSION, Severity, ToolInfo};
use wrun_runtime::{Captured, Status};

/// What a helper's stdout held.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Parsed {
    /// What the helper said about itself, if it did.
    pub tool: Option<ToolInfo>,
    /// The rules it described.
    pub rules: Vec<RuleInfo>,
    /// The findings, in order.
    pub findings: Vec<Finding>,
    /// Lines that are not findings: 1-based line number in the kept output, and why.
    pub malformed: Vec<(usize, String)>,
    /// Whether the output cap cut the stream (findings may be missing).
    pub truncated: bool,
}

/// Parses captured stdout. Blank lines and the capture's truncation marker are skipped.
pub fn parse(stdout: &Captured) -> Parsed {
    let marker = wrun_runtime::capture::truncation_marker(stdout.cut_bytes);
    let mut parsed = Parsed {
        truncated: stdout.truncated(),
        ..Parsed::default()
    };
    for (i, line) in stdout.text().lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (parsed.truncated && line == marker) {
            continue;
        }
        let kind = serde_json::from_str::<serde_json::Map<String, Value>>(line)
            .ok()
            .and_then(|object| {
                ["wrun_finding", "wrun_rule", "wrun_tool"]
                    .into_iter()
                    .find(|k| object.contains_key(*k))
            });
        let result = match kind {
            Some("wrun_rule") => serde_json::from_str::<RuleInfo>(line).map(|r| {
                let version = r.wrun_rule;
                (version == SCHEMA_VERSION)
                    .then(|| parsed.rules.push(r))
                    .ok_or(version)
            }),
            Some("wrun_tool") => serde_json::from_str::<ToolInfo>(line).map(|t| {
                let version = t.wrun_tool;
                (version == SCHEMA_VERSION)
                    .then(|| parsed.tool = Some(t))
                    .ok_or(version)
            }),
            _ => serde_json::from_str::<Finding>(line).map(|f| {
                let version = f.wrun_finding;
                (version == SCHEMA_VERSION)
                    .then(|| parsed.findings.push(f))
                    .ok_or(version)
            }),
        };
        match result {
            Ok(Ok(())) => {}
            Ok(Err(version)) => parsed
                .malformed
                .push((i + 1, format!("unsupported findings schema version {version}"))),
            Err(e) => parsed.malformed.push((i + 1, format!("not a finding: {e}"))),
        }
    }
    parsed
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// How the helper ran, for the SARIF log's invocation.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// The tool's name when the helper did not describe itself (its file name).
    pub tool: &'a str,
    /// How it ended.
    pub status: &'a Status,
    /// Its wall-clock limit (named when it timed out).
    pub timeout: std::time::Duration,
}

/// A SARIF 2.1.0 log with one run, as code-scanning services (GitHub's) take it: the driver
/// with its version and information URI, every rule with short and full descriptions and help
/// (the helper's own where it described them), results with percent-encoded relative artifact
/// URIs, and the invocation: whether the helper ran to a normal end (exit 0 or 1 under the
/// helper contract), and a notification saying why when it did not.
pub fn to_sarif(parsed: &Parsed, invocation: &Invocation<'_>) -> Value {
    let tool_name = parsed.tool.as_ref().map_or(invocation.tool, |t| t.name.as_str());
    let mut rule_ids: Vec<&str> = parsed
        .rules
        .iter()
        .map(|r| r.id.as_str())
        .chain(parsed.findings.iter().map(|f| f.rule.as_str()))
        .collect();
    rule_ids.sort_unstable();
    rule_ids.dedup();
    let rules: Vec<Value> = rule_ids
        .iter()
        .map(|id| match parsed.rules.iter().find(|r| r.id == *id) {
            Some(r) => {
                let mut rule = json!({
                    "id": r.id,
                    "shortDescription": {"text": r.short},
                    "fullDescription": {"text": r.full},
                    "help": {"text": r.help},
                });
                if let Some(markdown) = &r.help_markdown {
                    rule["help"]["markdown"] = json!(markdown);
                }
                if let Some(uri) = &r.help_uri {
                    rule["helpUri"] = json!(uri);
                }
                if let Some(severity) = r.default_severity {
                    rule["defaultConfiguration"] = json!({"level": level(severity)});
                }
                rule
            }
            None => json!({
                "id": id,
                "shortDescription": {"text": format!("{id} ({tool_name})")},
                "fullDescription": {"text": format!("Findings of the rule {id}, reported by the helper {tool_name}, which does not describe its rules.")},
                "help": {"text": format!("See the documentation of {tool_name} for the rule {id}.")},
            }),
        })
        .collect();
    let results: Vec<Value> = parsed.findings.iter().map(result).collect();
    let mut notifications: Vec<Value> = parsed
        .malformed
        .iter()
        .map(|(line, why)| json!({"level": "warning", "message": {"text": format!("stdout line {line}: {why}")}}))
        .collect();
    if parsed.truncated {
        notifications.push(json!({
            "level": "warning",
            "message": {"text": "the helper's output was cut by its output cap; findings may be missing"}
        }));
    }
    let success = matches!(invocation.status, Status::Exited { code: 0 | 1 });
    if !success {
        let why = match invocation.status {
            Status::TimedOut => format!(
                "the helper timed out after {}; its findings are incomplete",
                humantime::format_duration(invocation.timeout)
            ),
            Status::Exited { code } => {
                format!("the helper failed (exit code {code}); its findings are incomplete")
            }
            other => format!("the helper {other}; its findings are incomplete"),
        };
        notifications.push(json!({"level": "error", "message": {"text": why}}));
    }
    let mut driver = json!({
        "name": tool_name,
        "version": parsed.tool.as_ref().map_or("unspecified", |t| t.version.as_str()),
        "informationUri": parsed
            .tool
            .as_ref()
            .and_then(|t| t.information_uri.clone())
            .unwrap_or_else(|| format!("urn:wrun:helper:{}", uri_encode(tool_name))),
        "rules": rules,
    });
    if let Some(tool) = &parsed.tool
        && tool.version.split('.').count() == 3
        && tool
            .version
            .split('.')
            .all(|p| p.chars().all(|c| c.is_ascii_digit()))
    {
        driver["semanticVersion"] = json!(tool.version);
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "invocations": [{
                "executionSuccessful": success,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }]
    })
}

/// A worktree path as a relative URI reference: each segment percent-encoded but for RFC
/// 3986's unreserved characters (so `my file.rs` is `my%20file.rs` and `a#b` is `a%23b`), `/`
/// kept as the separator, leading `/` and `./` dropped.
pub fn uri_encode(path: &str) -> String {
    let path = path.trim_start_matches("./").trim_start_matches('/');
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn result(f: &Finding) -> Value {
    let mut region = serde_json::Map::new();
    if let Some(line) = f.line {
        region.insert("startLine".into(), json!(line.max(1)));
        if let Some(column) = f.column {
            region.insert("startColumn".into(), json!(column.max(1)));
        }
        if let Some(end) = f.end_line {
            region.insert("endLine".into(), json!(end.max(line.max(1))));
        }
    }
    let mut physical = json!({"artifactLocation": {"uri": uri_encode(&f.path)}});
    if !region.is_empty() {
        physical["region"] = Value::Object(region.clone());
    }
    let mut out = json!({
        "ruleId": f.rule,
        "level": level(f.severity),
        "message": {"text": f.message},
        "locations": [{"physicalLocation": physical}],
    });
    if let (Some(fix), false) = (&f.fix, region.is_empty()) {
        out["fixes"] = json!([{
            "description": {"text": fix.description.clone().unwrap_or_else(|| "suggested fix".into())},
            "artifactChanges": [{
                "artifactLocation": {"uri": uri_encode(&f.path)},
                "replacements": [{"deletedRegion": Value::Object(region), "insertedContent": {"text": fix.replacement}}],
            }],
        }]);
    }
    out
}

/// One line per finding, `path:line:column: severity [rule] message`, then the problems.
pub fn to_text(parsed: &Parsed) -> String {
    let mut out = String::new();
    for f in &parsed.findings {
        let pos = match (f.line, f.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            (Some(l), None) => format!(":{l}"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "{}{pos}: {} [{}] {}\n",
            f.path,
            level(f.severity),
            f.rule,
            f.message
        ));
    }
    for (line, why) in &parsed.malformed {
        out.push_str(&format!("wrun: stdout line {line}: {why}\n"));
    }
    if parsed.truncated {
        out.push_str("wrun: the helper's output was cut by its output cap; findings may be missing\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str) -> Captured {
        let c = wrun_runtime::Capture::new(wrun_runtime::ByteSize::mib(1));
        c.push(text.as_bytes());
        c.finish()
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let out = captured(concat!(
            r#"{"wrun_finding":1,"path":"a.rs","line":2,"severity":"error","rule":"r","message":"m"}"#,
            "\nnot json\n\n",
            r#"{"wrun_finding":9,"path":"a","severity":"note","rule":"r","message":"m"}"#,
            "\n"
        ));
        let p = parse(&out);
        assert_eq!(p.findings.len(), 1);
        assert_eq!(p.malformed.len(), 2);
        assert_eq!(p.malformed[0].0, 2);
        assert!(p.malformed[1].1.contains("version 9"));
        assert!(!p.truncated);
    }

    #[test]
    fn a_cut_stream_is_flagged() {
        let c = wrun_runtime::Capture::new(wrun_runtime::ByteSize(200));
        for _ in 0..20 {
            c.push(br#"{"wrun_finding":1,"path":"a","severity":"note","rule":"r","message":"m"}"#);
            c.push(b"\n");
        }
        let p = parse(&c.finish());
        assert!(p.truncated);
        assert!(!p.findings.is_empty());
        assert!(to_text(&p).contains("cut by its output cap"));
    }
}
