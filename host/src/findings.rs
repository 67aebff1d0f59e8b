//! Findings from a helper's captured stdout (the JSON Lines protocol of `wrun-guest`), and
//! their renderings as SARIF 2.1.0 and as text.
//!
//! Parsing never fails: a line that is not a finding is reported with its line number and the
//! reason, and a stream that was cut by the output cap is flagged (the lines around the cut are
//! then usually malformed too, and findings in the cut middle are lost).

use serde_json::{Value, json};
use wrun_guest::{Finding, SCHEMA_VERSION, Severity};
use wrun_runtime::Captured;

/// What a helper's stdout held.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
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
        match serde_json::from_str::<Finding>(line) {
            Ok(f) if f.wrun_finding == SCHEMA_VERSION => parsed.findings.push(f),
            Ok(f) => parsed.malformed.push((
                i + 1,
                format!("unsupported findings schema version {}", f.wrun_finding),
            )),
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

/// A SARIF 2.1.0 log with one run for `tool`. `success` is whether the helper ran to a
/// normal exit (0 or 1 under the helper contract).
pub fn to_sarif(tool: &str, parsed: &Parsed, success: bool) -> Value {
    let mut rules: Vec<&str> = parsed.findings.iter().map(|f| f.rule.as_str()).collect();
    rules.sort_unstable();
    rules.dedup();
    let results: Vec<Value> = parsed.findings.iter().map(result).collect();
    let mut notifications: Vec<Value> = parsed
        .malformed
        .iter()
        .map(|(line, why)| {
            json!({"level": "warning", "message": {"text": format!("stdout line {line}: {why}")}})
        })
        .collect();
    if parsed.truncated {
        notifications.push(json!({
            "level": "warning",
            "message": {"text": "the helper's output was cut by its output cap; findings may be missing"}
        }));
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": tool,
                "rules": rules.iter().map(|id| json!({"id": id})).collect::<Vec<_>>(),
            }},
            "invocations": [{
                "executionSuccessful": success,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }]
    })
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
    let mut physical = json!({"artifactLocation": {"uri": f.path}});
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
                "artifactLocation": {"uri": f.path},
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
