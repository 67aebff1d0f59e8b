//! secret-scan: credentials committed in the pull request's changed files.
//!
//! Rules: `aws-access-key-id` (AKIA/ASIA + 16), `github-token` (ghp_/gho_/ghu_/ghs_/ghr_ + 36,
//! github_pat_), `private-key` (PEM private key blocks), `high-entropy-secret` (an assignment to a
//! name like key/secret/token/password of a 20+ character value with Shannon entropy above
//! 3.5 bits per character). Exit 0 clean, 1 found, 2 failed.

use regex::Regex;
use wrun_guest::{Finding, Severity, emit};

/// Files larger than this are not scanned (a generated blob, not a config with a key in it).
const MAX_FILE: u64 = 4 << 20;

fn main() {
    wrun_guest::run_helper("secret-scan", |changes| {
        let rules = Rules::new();
        let mut found = 0;
        for file in changes.files_or_walk(wrun_guest::worktree()) {
            let Some(bytes) = file.read(MAX_FILE) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            for (n, line) in text.lines().enumerate() {
                let line_no = n as u32 + 1;
                if !file.touches(line_no) {
                    continue;
                }
                for (rule, column, message) in rules.scan(line) {
                    emit(
                        &Finding::new(&file.path, rule, Severity::Error, message)
                            .at_line(line_no)
                            .at_column(column),
                    );
                    found += 1;
                }
            }
        }
        Ok(found)
    })
}

struct Rules {
    aws: Regex,
    github: Regex,
    private_key: Regex,
    assignment: Regex,
}

impl Rules {
    fn new() -> Self {
        let re = |s: &str| Regex::new(s).unwrap_or_else(|e| panic!("built-in pattern {s}: {e}"));
        Self {
            aws: re(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
            github: re(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,})\b"),
            private_key: re(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY(?: BLOCK)?-----"),
            assignment: re(
                r#"(?i)\b[a-z0-9_.-]*(?:secret|token|passwd|password|api[_-]?key|access[_-]?key|private[_-]?key)[a-z0-9_.-]*\s*[:=]\s*["']?([A-Za-z0-9+/=_\-.]{20,})["']?"#,
            ),
        }
    }

    /// (rule, 1-based column, message) for each credential on the line.
    fn scan(&self, line: &str) -> Vec<(&'static str, u32, String)> {
        let col = |byte: usize| line[..byte].chars().count() as u32 + 1;
        let mut out = Vec::new();
        for m in self.aws.find_iter(line) {
            out.push((
                "aws-access-key-id",
                col(m.start()),
                "an AWS access key id is committed".to_owned(),
            ));
        }
        for m in self.github.find_iter(line) {
            out.push((
                "github-token",
                col(m.start()),
                "a GitHub token is committed".to_owned(),
            ));
        }
        if let Some(m) = self.private_key.find(line) {
            out.push((
                "private-key",
                col(m.start()),
                "a private key is committed".to_owned(),
            ));
        }
        if out.is_empty()
            && let Some(c) = self.assignment.captures(line)
            && let Some(value) = c.get(1)
            && entropy(value.as_str()) > 3.5
        {
            out.push((
                "high-entropy-secret",
                col(value.start()),
                format!(
                    "a high-entropy value ({:.1} bits/char) is assigned to a secret-like name",
                    entropy(value.as_str())
                ),
            ));
        }
        out
    }
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind_and_spares_ordinary_code() {
        let r = Rules::new();
        assert_eq!(r.scan("key = AKIAIOSFODNN7EXAMPLE")[0].0, "aws-access-key-id");
        assert_eq!(
            r.scan("t = \"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\"")[0].0,
            "github-token"
        );
        assert_eq!(r.scan("-----BEGIN RSA PRIVATE KEY-----")[0].0, "private-key");
        assert_eq!(
            r.scan("DB_PASSWORD = \"q8Zr2LmX9vTk4WpN7sYb3Hc\"")[0].0,
            "high-entropy-secret"
        );
        assert!(
            r.scan("password = \"aaaaaaaaaaaaaaaaaaaaaaaa\"").is_empty(),
            "low entropy"
        );
        assert!(r.scan("let token_count = compute_tokens(input);").is_empty());
    }
}
