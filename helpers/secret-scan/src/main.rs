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
    wrun_guest::describe(
        &wrun_guest::ToolInfo::new("secret-scan", env!("CARGO_PKG_VERSION")),
        &[
            wrun_guest::RuleInfo::new(
                "aws-access-key-id",
                "An AWS access key id",
                "An AWS access key id (AKIA or ASIA and 16 characters) in a changed file: with its secret key it gives access to an AWS account.",
                "Remove the key from the change and rotate it in AWS: a key that reached a pull request is public.",
            ),
            wrun_guest::RuleInfo::new(
                "github-token",
                "A GitHub token",
                "A GitHub personal access, OAuth, user-to-server, server-to-server or refresh token in a changed file.",
                "Remove the token from the change and revoke it on GitHub: a token that reached a pull request is public.",
            ),
            wrun_guest::RuleInfo::new(
                "private-key",
                "A private key",
                "A PEM private key block in a changed file.",
                "Remove the key from the change and replace it wherever it is used: a key that reached a pull request is public.",
            ),
            wrun_guest::RuleInfo::new(
                "high-entropy-secret",
                "A secret-looking value",
                "A long, random-looking value assigned to a name like secret, token, password or api key.",
                "If it is a credential, remove it and rotate it; if not, rename the variable or lower the value's entropy.",
            ),
        ],
    );
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
