//! config-syntax: JSON, TOML and YAML files among the changed files that do not parse, with the
//! line and column of the error. Exit 0 clean, 1 found, 2 failed.

use wrun_guest::{Finding, Severity, emit};

const MAX_FILE: u64 = 8 << 20;

fn main() {
    wrun_guest::describe(
        &wrun_guest::ToolInfo::new("config-syntax", env!("CARGO_PKG_VERSION")),
        &[
            wrun_guest::RuleInfo::new(
                "invalid-json",
                "A JSON file that does not parse",
                "A changed .json file with a syntax error, at the line and column the parser stopped.",
                "Fix the syntax at the reported position.",
            ),
            wrun_guest::RuleInfo::new(
                "invalid-toml",
                "A TOML file that does not parse",
                "A changed .toml file with a syntax error, at the line and column the parser stopped.",
                "Fix the syntax at the reported position.",
            ),
            wrun_guest::RuleInfo::new(
                "invalid-yaml",
                "A YAML file that does not parse",
                "A changed .yml or .yaml file with a syntax error, at the line and column the parser stopped.",
                "Fix the syntax at the reported position.",
            ),
        ],
    );
    wrun_guest::run_helper("config-syntax", |changes| {
        let mut found = 0;
        for file in changes.files_or_walk(wrun_guest::worktree()) {
            let Some(kind) = Kind::of(&file.path) else {
                continue;
            };
            let Some(bytes) = file.read(MAX_FILE) else {
                continue;
            };
            let Ok(text) = String::from_utf8(bytes) else {
                emit(&Finding::new(
                    &file.path,
                    kind.rule(),
                    Severity::Error,
                    "the file is not valid UTF-8",
                ));
                found += 1;
                continue;
            };
            if let Some((line, column, message)) = kind.check(&text) {
                emit(
                    &Finding::new(&file.path, kind.rule(), Severity::Error, message)
                        .at_line(line)
                        .at_column(column),
                );
                found += 1;
            }
        }
        Ok(found)
    })
}

#[derive(Clone, Copy)]
enum Kind {
    Json,
    Toml,
    Yaml,
}

impl Kind {
    fn of(path: &str) -> Option<Self> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Kind::Json),
            "toml" => Some(Kind::Toml),
            "yaml" | "yml" => Some(Kind::Yaml),
            _ => None,
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Kind::Json => "invalid-json",
            Kind::Toml => "invalid-toml",
            Kind::Yaml => "invalid-yaml",
        }
    }

    /// The first syntax error: 1-based line and column, and the parser's message.
    fn check(self, text: &str) -> Option<(u32, u32, String)> {
        match self {
            Kind::Json => serde_json::from_str::<serde_json::Value>(text)
                .err()
                .map(|e| (e.line() as u32, e.column() as u32, e.to_string())),
            Kind::Toml => toml::from_str::<toml::Table>(text).err().map(|e| {
                let offset = e.span().map_or(0, |s| s.start);
                let (line, column) = line_col(text, offset);
                (line, column, e.message().to_owned())
            }),
            Kind::Yaml => yaml_rust2::YamlLoader::load_from_str(text).err().map(|e| {
                let m = e.marker();
                (m.line() as u32, m.col() as u32 + 1, e.info().to_owned())
            }),
        }
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() as u32 + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_line_and_column() {
        assert_eq!(
            Kind::Json.check("{\n  \"a\": 1,\n}").map(|e| (e.0, e.1)),
            Some((3, 1))
        );
        assert_eq!(Kind::Toml.check("a = 1\nb = \n").map(|e| e.0), Some(2));
        assert!(Kind::Yaml.check("a: [1, 2\nb: 3\n").is_some());
        assert!(Kind::Json.check("{\"a\": [1]}").is_none());
        assert!(Kind::Toml.check("[x]\na = 1\n").is_none());
        assert!(Kind::Yaml.check("a:\n  - 1\n").is_none());
    }
}
