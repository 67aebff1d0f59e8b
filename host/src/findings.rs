//! Findings from a helper's stdout (the JSON Lines protocol of `wrun-guest`), as the runtime
//! read them while the helper wrote them ([`wrun_runtime::Records`]: whole records, up to the
//! `findings` and `findings_cap` limits, whatever the stdout cap kept), and their renderings as
//! SARIF 2.1.0 and as text.
//!
//! Parsing never fails: a record that is not a valid finding is reported with its line and the
//! reason, and records dropped by the findings limits are counted and reported (a SARIF tool
//! notification), never rendered in part.

use serde_json::{Value, json};
use wrun_guest::{Finding, RuleInfo, SCHEMA_VERSION, Severity, ToolInfo};
use wrun_runtime::{ByteSize, Limits, Records, Status};

/// What a helper's stdout held.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Parsed {
    /// What the helper said about itself, if it did.
    pub tool: Option<ToolInfo>,
    /// The rules it described.
    pub rules: Vec<RuleInfo>,
    /// The findings, in order.
    pub findings: Vec<Finding>,
    /// Records that are not findings, rules or the tool: 1-based line of stdout, and why.
    pub malformed: Vec<(u64, String)>,
    /// Records past the findings limits: counted, not kept.
    pub dropped: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// Lines of stdout that are not records (text the helper printed besides its findings).
    pub other_lines: u64,
}

/// Parses the records the runtime read from a helper's stdout.
pub fn parse(records: &Records) -> Parsed {
    let mut parsed = Parsed {
        malformed: records
            .malformed
            .iter()
            .map(|(l, why)| (*l, format!("not a finding: {why}")))
            .collect(),
        dropped: records.dropped,
        dropped_bytes: records.dropped_bytes,
        other_lines: records.other_lines,
        ..Parsed::default()
    };
    for record in &records.kept {
        let line = record.line;
        let object = &record.value;
        let value = Value::Object(object.clone());
        let kind = ["wrun_finding", "wrun_rule", "wrun_tool"]
            .into_iter()
            .find(|k| object.contains_key(*k));
        let result: Result<Result<(), String>, serde_json::Error> = match kind {
            Some("wrun_rule") => serde_json::from_value::<RuleInfo>(value).map(|r| {
                if r.wrun_rule != SCHEMA_VERSION {
                    return Err(format!("unsupported findings schema version {}", r.wrun_rule));
                }
                rule_id(&r.id)
                    .map(|()| parsed.rules.push(r))
                    .map_err(|why| format!("finding dropped: {why}"))
            }),
            Some("wrun_tool") => serde_json::from_value::<ToolInfo>(value).map(|t| {
                if t.wrun_tool != SCHEMA_VERSION {
                    return Err(format!("unsupported findings schema version {}", t.wrun_tool));
                }
                if t.name.is_empty()
                    || t.name.chars().count() > MAX_TOOL_TEXT
                    || t.version.chars().count() > MAX_TOOL_TEXT
                    || t.name.chars().chain(t.version.chars()).any(char::is_control)
                {
                    return Err(format!(
                        "tool description dropped: its name and version are 1 to {MAX_TOOL_TEXT} characters without control characters"
                    ));
                }
                parsed.tool = Some(t);
                Ok(())
            }),
            _ => serde_json::from_value::<Finding>(value).map(|mut f| {
                if f.wrun_finding != SCHEMA_VERSION {
                    return Err(format!("unsupported findings schema version {}", f.wrun_finding));
                }
                match plain_path(&f.path).and_then(|p| rule_id(&f.rule).map(|()| p)) {
                    Ok(path) => {
                        f.path = path;
                        parsed.findings.push(f);
                        Ok(())
                    }
                    Err(why) => Err(format!("finding dropped: {why}")),
                }
            }),
        };
        match result {
            Ok(Ok(())) => {}
            Ok(Err(why)) => parsed.malformed.push((line, why)),
            Err(e) => parsed.malformed.push((line, format!("not a finding: {e}"))),
        }
    }
    parsed.malformed.sort_by_key(|(line, _)| *line);
    parsed
}

/// What to say of stdout lines that are not records, if there were any.
fn other_lines_notice(parsed: &Parsed) -> Option<String> {
    (parsed.other_lines > 0).then(|| {
        format!(
            "{} line(s) of stdout are not findings (a finding is one JSON object per line; --format raw shows the text)",
            parsed.other_lines
        )
    })
}

/// What to say of dropped records, if any were: how many, and which limits to raise.
fn dropped_notice(parsed: &Parsed, limits: Option<&Limits>) -> Option<String> {
    if parsed.dropped == 0 {
        return None;
    }
    let caps = limits.map_or_else(String::new, |l| {
        format!(" (findings {}, findings_cap {})", l.findings, l.findings_cap)
    });
    Some(format!(
        "{} finding(s) ({}) past the findings limits{caps} were dropped, none in part; raise `findings` or `findings_cap` in the helper's limits",
        parsed.dropped,
        ByteSize(parsed.dropped_bytes)
    ))
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
    if path.starts_with('/') {
        return Err(format!(
            "its path {path:?} is absolute; give it relative to the worktree"
        ));
    }
    // What another system reads as a separator, a drive, a stream or a scheme (`a\..\x`,
    // `C:/x`, `.git::$INDEX_ALLOCATION`, `file:/x`): `/` is the only separator passed on.
    if let Some(c) = path.chars().find(|c| matches!(c, '\\' | ':')) {
        return Err(format!(
            "its path {path:?} holds `{c}`; separate parts with `/` only"
        ));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        return Err(format!("its path {path:?} names no file"));
    }
    // A part that some file system takes for `..` or `.git`: Windows drops trailing dots and
    // spaces (`.git.`, `.git `, `...`), and `git~1` is `.git`'s short name.
    let git_like = |p: &str| {
        let bare = p.trim_end_matches(['.', ' ']).to_ascii_lowercase();
        bare.is_empty() || bare == ".git" || bare == "git~1"
    };
    if let Some(bad) = parts.iter().find(|p| **p == ".." || git_like(p)) {
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
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Printable ASCII only (no look-alike or reordering characters), nothing a renderer or a
    // parser could read another way, and no user part (`https://docs@evil.example`).
    !authority.is_empty()
        && !authority.contains('@')
        && uri.len() <= MAX_URI
        && uri.chars().all(|c| {
            c.is_ascii_graphic() && !matches!(c, '\\' | '"' | '<' | '>' | '`' | '{' | '}' | '|' | '^')
        })
}

/// The longest link passed on.
const MAX_URI: usize = 2048;

/// The longest tool name or version kept: they are repeated in every generated rule text.
const MAX_TOOL_TEXT: usize = 128;

/// Whether a rule's Markdown help may be passed on: no raw HTML and every link (inline `](…)`
/// or a reference definition `[x]: …`) a web link. Code-scanning pages render it.
fn safe_markdown(markdown: &str) -> bool {
    if markdown.contains('<') {
        return false;
    }
    let inline_ok = markdown.split("](").skip(1).all(|after| {
        let target = after.trim_start().split([')', ' ']).next().unwrap_or_default();
        web_uri(target)
    });
    let references_ok = markdown.lines().all(|line| {
        let line = line.trim_start();
        match line.strip_prefix('[').and_then(|l| l.split_once("]:")) {
            Some((_, target)) => web_uri(target.split_whitespace().next().unwrap_or_default()),
            None => true,
        }
    });
    inline_ok && references_ok
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
    /// Its limits (the timeout named when it timed out, the findings limits when records were
    /// dropped).
    pub limits: &'a Limits,
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
                if let Some(markdown) = r.help_markdown.as_deref().filter(|m| safe_markdown(m)) {
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
    if let Some(text) = dropped_notice(parsed, Some(invocation.limits)) {
        notifications.push(json!({"level": "warning", "message": {"text": text}}));
    }
    if let Some(text) = other_lines_notice(parsed) {
        notifications.push(json!({"level": "note", "message": {"text": text}}));
    }
    let success = matches!(invocation.status, Status::Exited { code: 0 | 1 });
    if !success {
        let why = match invocation.status {
            Status::TimedOut => format!(
                "the helper timed out after {}; its findings are incomplete",
                humantime::format_duration(invocation.limits.timeout)
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
    if let Some(text) = dropped_notice(parsed, None) {
        out.push_str(&format!("wrun: {text}\n"));
    }
    if let Some(text) = other_lines_notice(parsed) {
        out.push_str(&format!("wrun: {text}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str) -> Records {
        let c = wrun_runtime::Capture::with_records(ByteSize::mib(1), Limits::default().record_limits());
        c.push(text.as_bytes());
        c.records(true)
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
        assert_eq!(p.malformed.len(), 1);
        assert_eq!(p.malformed[0].0, 4);
        assert!(p.malformed[0].1.contains("version 9"));
        assert_eq!((p.other_lines, p.dropped), (1, 0));
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
            "a\\b\\..\\..\\x",
            "C:/Windows/x",
            "file:/etc/passwd",
            ".git./config",
            ".git /config",
            "GIT~1/config",
            "a/.../b",
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
        assert_eq!(p.malformed.len(), 22, "{:?}", p.malformed);
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
                limits: &Limits::default(),
            },
        );
        let results = sarif["runs"][0]["results"].to_string();
        assert!(!results.contains(".git") && !results.contains("..") && !results.contains("etc"));
        assert_eq!(
            sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
                .as_array()
                .map(Vec::len),
            Some(22)
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
            "https://x\\@evil.com",
            "https://docs@evil.example/x",
            "https://example.com/\u{202e}gpj.exe",
            "https://example.com/<script>",
        ] {
            assert!(!web_uri(bad), "{bad:?}");
        }
        assert!(safe_markdown(
            "See [the docs](https://example.com/r1) and [ref].\n\n[ref]: https://example.com/x"
        ));
        for bad in [
            "[click](javascript:alert(1))",
            "[click]( javascript:alert(1))",
            "<img src=x onerror=alert(1)>",
            "[x]\n\n[x]: javascript:alert(1)",
        ] {
            assert!(!safe_markdown(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_long_tool_name_is_not_repeated_into_every_rule() {
        let mut text = format!(
            "{}\n",
            serde_json::json!({"wrun_tool": 1, "name": "n".repeat(100_000), "version": "1"})
        );
        for i in 0..50 {
            text.push_str(&format!(
                "{}\n",
                serde_json::json!({"wrun_finding":1,"path":"a.rs","severity":"note","rule":format!("r{i}"),"message":"m"})
            ));
        }
        let p = parse(&captured(&text));
        assert!(p.tool.is_none() && p.malformed.len() == 1, "{:?}", p.malformed);
        let sarif = to_sarif(
            &p,
            &Invocation {
                tool: "t",
                status: &Status::Exited { code: 1 },
                limits: &Limits::default(),
            },
        );
        assert!(sarif.to_string().len() < 100_000);
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
    fn findings_past_the_limits_are_counted_and_none_is_kept_in_part() {
        let line = br#"{"wrun_finding":1,"path":"a","severity":"note","rule":"r","message":"m"}"#;
        let limits = Limits::default().with_stdout_cap(ByteSize(200));
        let c = wrun_runtime::Capture::with_records(
            limits.stdout_cap,
            wrun_runtime::RecordLimits {
                count: 5,
                bytes: ByteSize::mib(1),
            },
        );
        for _ in 0..20 {
            // Each record cut across writes.
            c.push(&line[..10]);
            c.push(&line[10..]);
            c.push(b"\n");
        }
        assert!(c.finish().truncated(), "the text capture keeps its own cap");
        let p = parse(&c.records(true));
        assert_eq!((p.findings.len(), p.dropped), (5, 15));
        assert_eq!(p.dropped_bytes, 15 * line.len() as u64);
        assert!(to_text(&p).contains("15 finding(s)"), "{}", to_text(&p));
        let sarif = to_sarif(
            &p,
            &Invocation {
                tool: "t",
                status: &Status::Exited { code: 1 },
                limits: &limits,
            },
        );
        assert_eq!(sarif["runs"][0]["results"].as_array().map(Vec::len), Some(5));
        let notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"].to_string();
        assert!(
            notes.contains("15 finding(s)") && notes.contains("findings 1000"),
            "{notes}"
        );
    }
}
