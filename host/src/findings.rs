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
    let mut refused: Vec<(usize, String)> = Vec::new();
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
                if version != SCHEMA_VERSION {
                    return Err(version);
                }
                match rule_id(&r.id) {
                    Ok(()) => parsed.rules.push(r),
                    Err(why) => refused.push((i + 1, why)),
                }
                Ok(())
            }),
            Some("wrun_tool") => serde_json::from_str::<ToolInfo>(line).map(|t| {
                let version = t.wrun_tool;
                (version == SCHEMA_VERSION)
                    .then(|| parsed.tool = Some(t))
                    .ok_or(version)
            }),
            _ => serde_json::from_str::<Finding>(line).map(|mut f| {
                let version = f.wrun_finding;
                if version != SCHEMA_VERSION {
                    return Err(version);
                }
                match plain_path(&f.path).and_then(|p| rule_id(&f.rule).map(|()| p)) {
                    Ok(path) => {
                        f.path = path;
                        parsed.findings.push(f);
                    }
                    Err(why) => refused.push((i + 1, why)),
                }
                Ok(())
            }),
        };
        for (line, why) in refused.drain(..) {
            parsed.malformed.push((line, format!("finding dropped: {why}")));
        }
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

/// The longest rule id kept.
const MAX_RULE_ID: usize = 128;

/// A finding's path as wrun passes it on: relative to the worktree, `/`-separated, without
/// `.` or empty parts (SARIF gets it percent-encoded, `:` included, so it is never read as a
/// URI with a scheme). A path that leaves the worktree (absolute, `..`), names a git
/// directory (`.git`, where a fix applied later would plant a hook) or holds a control
/// character is refused: the helper read pull-request content, and a code-scanning service or
/// a fix tool trusts the location.
fn plain_path(path: &str) -> Result<String, String> {
    if path.chars().any(char::is_control) {
        return Err(format!("its path {path:?} holds a control character"));
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(format!(
            "its path {path:?} is absolute; give it relative to the worktree"
        ));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        return Err(format!("its path {path:?} names no file"));
    }
    if let Some(bad) = parts
        .iter()
        .find(|p| **p == ".." || p.eq_ignore_ascii_case(".git"))
    {
        return Err(format!(
            "its path {path:?} has a `{bad}` part: a finding names a file of the worktree, outside git's directory"
        ));
    }
    Ok(parts.join("/"))
}

/// A rule id: 1 to [`MAX_RULE_ID`] characters out of letters, digits and `._-/:#@+`.
fn rule_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= MAX_RULE_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '#' | '@' | '+'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its rule id {:?} is not 1 to {MAX_RULE_ID} letters, digits or `._-/:#@+`",
            id.chars().take(MAX_RULE_ID).collect::<String>()
        ))
    }
}

/// Whether a helper's link may be passed on: `https://` or `http://`, no spaces or controls
/// (a `javascript:` or `file:` link in a code-scanning page is the pull request's doing).
fn web_uri(uri: &str) -> bool {
    let lower = uri.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && uri.len() > "https://".len()
        && !uri.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// One line of text for a terminal: control characters (line breaks included), escape
/// sequences and bidirectional overrides shown as visible `\u{..}` escapes.
fn one_line(text: &str) -> String {
    crate::untrusted::neutralize(text)
        .replace('\n', "\\u{a}")
        .replace('\t', "\\u{9}")
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
                if let Some(uri) = r.help_uri.as_deref().filter(|u| web_uri(u)) {
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
            .filter(|u| web_uri(u))
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
            one_line(&f.path),
            level(f.severity),
            one_line(&f.rule),
            one_line(&f.message)
        ));
    }
    for (line, why) in &parsed.malformed {
        out.push_str(&format!("wrun: stdout line {line}: {}\n", one_line(why)));
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
    fn findings_outside_the_worktree_or_in_git_are_dropped_and_reported() {
        let line = |path: &str, rule: &str| {
            format!(
                "{}\n",
                serde_json::json!({"wrun_finding":1,"path":path,"line":1,"severity":"error","rule":rule,"message":"m","fix":{"replacement":"x"}})
            )
        };
        let mut text = String::new();
        for bad in [
            "../../../etc/passwd",
            "a/../../b",
            "/etc/passwd",
            "//host/x",
            ".git/hooks/pre-commit",
            "sub/.GIT/config",
            "a\nb",
            "a\u{1b}[2Jb",
            "",
            "./",
        ] {
            text.push_str(&line(bad, "r"));
        }
        for bad_rule in ["", "a\nb", "a b", &"r".repeat(200), "<script>"] {
            text.push_str(&line("ok.rs", bad_rule));
        }
        text.push_str(&line("./src//a.rs", "py:E501"));
        let p = parse(&captured(&text));
        assert_eq!(p.findings.len(), 1, "{:?}", p.findings);
        assert_eq!(p.findings[0].path, "src/a.rs");
        assert_eq!(p.malformed.len(), 15, "{:?}", p.malformed);
        assert!(
            p.malformed
                .iter()
                .all(|(_, why)| why.starts_with("finding dropped"))
        );
        let sarif = to_sarif(
            &p,
            &Invocation {
                tool: "t",
                status: &Status::Exited { code: 0 },
                timeout: std::time::Duration::from_secs(1),
            },
        );
        let results = sarif["runs"][0]["results"].to_string();
        assert!(!results.contains(".git") && !results.contains("..") && !results.contains("etc"));
        assert_eq!(
            sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
                .as_array()
                .map(Vec::len),
            Some(15)
        );
        // Rule descriptions are held to the same ids.
        let p = parse(&captured(
            r#"{"wrun_rule":1,"id":"a\nb","short":"s","full":"f","help":"h"}"#,
        ));
        assert!(p.rules.is_empty() && p.malformed.len() == 1);
    }

    #[test]
    fn only_web_links_are_passed_on() {
        assert!(web_uri("https://example.com/rules/r1") && web_uri("HTTP://x.org"));
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "https://a b",
            "data:text/html,x",
        ] {
            assert!(!web_uri(bad), "{bad:?}");
        }
    }

    #[test]
    fn text_shows_control_characters_as_escapes() {
        let out = captured(concat!(
            r#"{"wrun_finding":1,"path":"a.rs","severity":"error","rule":"r","message":"one\ntwo\r\u001b[2Jthree"}"#,
            "\n"
        ));
        let text = to_text(&parse(&out));
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'));
        assert!(text.contains("one\\u{a}two\\u{d}\\u{1b}[2Jthree"), "{text}");
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
