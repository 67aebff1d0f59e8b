//! Helper definitions: `.ai/helpers.toml` on the base repository's default branch (layer 1). The
//! file is read from git at the base commit ([`crate::git::Repo::read`]), never from the PR's
//! worktree. Parsed strictly: unknown keys, duplicate names and fields that do not belong to a
//! helper's kind are errors with the file (and, from the TOML parser, the line).
//!
//! ```toml
//! version = 1
//!
//! [[helper]]
//! name = "tree-stats"
//! kind = "wasm"
//! module = ".ai/helpers/tree-stats.wasm"   # a path in the upstream commit
//! sha256 = "9f2c…"                          # optional pin; another module is refused
//! args = ["--base", "{base_ref}"]           # templates; only the policy's safe keys
//! limits = { timeout = "10s" }              # any value up to the policy's [ceilings]
//!
//! [[helper]]
//! name = "ruff"
//! kind = "native"
//! command = ["ruff", "check", "--output-format", "concise"]
//! model_args = { max = 16, flags = ["--fix"] }   # what a model may add (paths after `--`)
//!
//! [[helper]]
//! name = "lint"
//! kind = "shell"
//! run = "ruff check . && shellcheck .ai/*.sh"
//! worktree = "ro"
//! ```

use std::collections::BTreeSet;
use std::path::{Component, Path};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::LimitsSpec;

/// Where definitions live in the upstream repository.
pub const DEFINITIONS_PATH: &str = ".ai/helpers.toml";

/// A definitions file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("helper definitions {source_name}: {message}")]
pub struct DefinitionsError {
    /// Where the file came from (`origin/main:.ai/helpers.toml`).
    pub source_name: String,
    /// What is wrong, with the line for syntax errors.
    pub message: String,
}

/// What a helper is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A WASI preview 1 module from the upstream repository, run in-process.
    Wasm,
    /// A native command (a bare name on the policy's PATH or a script under `.ai/`), in bwrap.
    Native,
    /// A bash command string, checked statement by statement, run by bash in bwrap.
    Shell,
}

/// How a helper sees the worktree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorktreeAccess {
    /// Read-only (the default).
    #[default]
    Ro,
    /// Read-write (`.git` and `.ai/` stay read-only).
    Rw,
}

/// What a model may pass to a helper.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelArgs {
    /// At most this many arguments (at most 64).
    pub max: usize,
    /// Flags accepted exactly as written (`--fix`, `--format=json`); one ending in `=` takes a
    /// value (`-S=` accepts `-S warning`, `--severity=` also `--severity=warning`). Every other
    /// argument is a path inside the worktree.
    #[serde(default)]
    pub flags: Vec<String>,
}

/// One helper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// Name used to call it: lower-case letters, digits, `-` and `_`, at most 64.
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// One line for people.
    #[serde(default)]
    pub description: Option<String>,
    /// wasm: the module's path in the upstream commit.
    #[serde(default)]
    pub module: Option<String>,
    /// wasm: the module's SHA-256 (64 hex digits); another module is refused.
    #[serde(default)]
    pub sha256: Option<String>,
    /// native: the command; the first entry is resolved (layer 2), the rest are templates.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// shell: the bash command string.
    #[serde(default)]
    pub run: Option<String>,
    /// Argument templates appended after the command (`{key}` for the policy's safe keys).
    #[serde(default)]
    pub args: Vec<String>,
    /// What a model may add; absent means the helper takes no model arguments.
    #[serde(default)]
    pub model_args: Option<ModelArgs>,
    /// Worktree access.
    #[serde(default)]
    pub worktree: WorktreeAccess,
    /// Limits, each at most the policy's ceiling.
    #[serde(default)]
    pub limits: LimitsSpec,
}

/// A definitions file as written.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionsFile {
    /// Format version: 1.
    pub version: u32,
    /// The helpers.
    #[serde(default, rename = "helper")]
    pub helpers: Vec<Definition>,
}

/// The JSON schema of definitions files, as checked in at `policies/definitions.schema.json`.
pub fn schema() -> String {
    let schema = schemars::schema_for!(DefinitionsFile);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The most model arguments any definition may accept.
pub const MAX_MODEL_ARGS: usize = 64;

/// A helper as every layer after parsing sees it: validated, its program typed by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    /// Its name.
    pub name: String,
    /// The 1-based line of its entry in the definitions file.
    pub line: usize,
    /// One line for people.
    pub description: Option<String>,
    /// What it runs.
    pub program: HelperProgram,
    /// Argument templates appended after the program's own arguments.
    pub args: Vec<String>,
    /// What a model may add; `None`: nothing.
    pub model_args: Option<ModelArgs>,
    /// Worktree access.
    pub worktree: WorktreeAccess,
    /// Limits it asks for, each at most the policy's ceiling.
    pub limits: LimitsSpec,
}

/// What a helper runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperProgram {
    /// A WASI preview 1 module at a path of the upstream commit, with its pinned SHA-256.
    Wasm {
        /// The module's path in the commit.
        module: String,
        /// The pin, if any.
        sha256: Option<[u8; 32]>,
    },
    /// A native command: the program (a name on the policy's PATH or an `.ai/` path) and its
    /// fixed argument templates.
    Native {
        /// The program.
        program: String,
        /// Its argument templates.
        args: Vec<String>,
    },
    /// A bash program, checked against the shell allowlist before it runs.
    Shell {
        /// The program text.
        run: String,
    },
}

impl Helper {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self.program {
            HelperProgram::Wasm { .. } => Kind::Wasm,
            HelperProgram::Native { .. } => Kind::Native,
            HelperProgram::Shell { .. } => Kind::Shell,
        }
    }
}

/// One definition that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The 1-based line of the file where it is (the entry's, or the offending key's).
    pub line: usize,
    /// The helper's name as written, where it could be read.
    pub helper: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.helper {
            Some(name) => write!(f, "line {}: helper {name:?}: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

/// A definitions file, validated: the helpers that can be used, and a problem for each entry
/// that cannot. One bad entry does not take the others down; it is reported with its line (by
/// [`Definitions::check`], and when the helper it names is asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definitions {
    /// The usable helpers, in file order.
    pub helpers: Vec<Helper>,
    /// Every entry that cannot be used, in file order.
    pub problems: Vec<Problem>,
}

/// The file as written, each entry kept as its own TOML text to be read on its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: u32,
    #[serde(default, rename = "helper")]
    helpers: Vec<toml::Spanned<toml::Value>>,
}

/// One entry, read from its own text.
#[derive(Deserialize)]
struct OneEntry {
    helper: Vec<Definition>,
}

/// The 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at)
        .map_or(1, |t| t.bytes().filter(|b| *b == b'\n').count() + 1)
}

impl Definitions {
    /// Parses and validates definitions text; `source_name` names it in errors. A file that is
    /// not TOML, has an unknown top-level key or another version is an error; an entry that
    /// cannot be used is a [`Problem`] and the others stay usable.
    pub fn parse(source_name: &str, text: &str) -> Result<Self, DefinitionsError> {
        let err = |message: String| DefinitionsError {
            source_name: source_name.to_owned(),
            message,
        };
        let file: RawFile = toml::from_str(text).map_err(|e| {
            err(match e.span() {
                Some(span) => format!("line {}: {}", line_of(text, span.start), e.message().trim_end()),
                None => e.message().trim_end().to_owned(),
            })
        })?;
        if file.version != 1 {
            return Err(err(format!(
                "version {} is not supported; this wrun reads version 1",
                file.version
            )));
        }
        let mut problems = Vec::new();
        let mut helpers: Vec<(usize, Helper)> = Vec::with_capacity(file.helpers.len());
        for (i, entry) in file.helpers.iter().enumerate() {
            // A `[[helper]]` header's span is the header alone: its entry runs to the next one.
            let mut span = entry.span();
            if text.get(span.clone()).is_some_and(|t| t.starts_with("[[")) {
                span.end = file
                    .helpers
                    .get(i + 1)
                    .map_or(text.len(), |next| next.span().start);
            }
            let line = line_of(text, span.start);
            let name = entry
                .get_ref()
                .get("name")
                .and_then(toml::Value::as_str)
                .map(str::to_owned);
            let problem = |line, message| Problem {
                line,
                helper: name.clone(),
                message,
            };
            let def = match read_entry(text, span.clone()) {
                Ok(def) => def,
                Err((at, message)) => {
                    problems.push(problem(at, message));
                    continue;
                }
            };
            match def.into_helper() {
                Ok(helper) => helpers.push((line, Helper { line, ..helper })),
                Err(message) => problems.push(problem(line, message)),
            }
        }
        // A name defined twice names neither: which one was meant is not for wrun to guess.
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let twice: BTreeSet<String> = helpers
            .iter()
            .map(|(_, h)| h.name.as_str())
            .filter(|n| !seen.insert(n))
            .map(str::to_owned)
            .collect();
        for name in &twice {
            let lines: Vec<String> = helpers
                .iter()
                .filter(|(_, h)| &h.name == name)
                .map(|(l, _)| l.to_string())
                .collect();
            let first = helpers
                .iter()
                .find(|(_, h)| &h.name == name)
                .map_or(1, |(l, _)| *l);
            problems.push(Problem {
                line: first,
                helper: Some(name.clone()),
                message: format!(
                    "is defined more than once (lines {}); rename or remove all but one",
                    lines.join(", ")
                ),
            });
        }
        problems.sort_by_key(|p| p.line);
        Ok(Self {
            helpers: helpers
                .into_iter()
                .filter(|(_, h)| !twice.contains(&h.name))
                .map(|(_, h)| h)
                .collect(),
            problems,
        })
    }

    /// [`Definitions::parse`], and every problem an error: what `wrun definitions check` asks
    /// before a file is merged upstream.
    pub fn check(source_name: &str, text: &str) -> Result<Self, DefinitionsError> {
        let file = Self::parse(source_name, text)?;
        if file.problems.is_empty() {
            return Ok(file);
        }
        Err(DefinitionsError {
            source_name: source_name.to_owned(),
            message: file
                .problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    /// The helper called `name`.
    pub fn get(&self, name: &str) -> Option<&Helper> {
        self.helpers.iter().find(|d| d.name == name)
    }

    /// The problems of the entries named `name`.
    pub fn problems_of(&self, name: &str) -> Vec<&Problem> {
        self.problems
            .iter()
            .filter(|p| p.helper.as_deref() == Some(name))
            .collect()
    }

    /// The names defined, for error messages.
    pub fn names(&self) -> Vec<&str> {
        self.helpers.iter().map(|d| d.name.as_str()).collect()
    }
}

/// Reads one `[[helper]]` entry from its own text (`span` of `text`), so that an error names
/// the line of the offending key. Returns the line and message of the first error.
fn read_entry(text: &str, span: std::ops::Range<usize>) -> Result<Definition, (usize, String)> {
    let start_line = line_of(text, span.start);
    let Some(slice) = text.get(span.clone()) else {
        return Err((start_line, "cannot be read".to_owned()));
    };
    // `[[helper]] …` is a document of its own; an inline table `{ … }` needs a key.
    let (doc, offset) = if slice.trim_start().starts_with("[[") {
        (slice.to_owned(), 0)
    } else {
        (format!("helper = [{slice}]"), "helper = [".len())
    };
    toml::from_str::<OneEntry>(&doc)
        .map_err(|e| {
            let line = e.span().map_or(start_line, |s| {
                start_line + line_of(&doc, s.start.max(offset)) - 1
            });
            (line, e.message().trim_end().to_owned())
        })
        .and_then(|mut one| one.helper.pop().ok_or((start_line, "is empty".to_owned())))
}

impl Definition {
    /// Validates the definition as written and types it.
    fn into_helper(self) -> Result<Helper, String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && !self.name.starts_with('-');
        if !name_ok {
            return Err("a name is 1-64 of a-z, 0-9, '-' and '_', not starting with '-'".into());
        }
        let extra = |field: &str| format!("`{field}` does not apply to a {:?} helper", self.kind);
        match self.kind {
            Kind::Wasm => {
                let module = self.module.as_deref().ok_or("a wasm helper needs `module`")?;
                if !is_repo_path(module) {
                    return Err(format!(
                        "module {module:?} must be a relative path in the repository without `..`"
                    ));
                }
                if let Some(hash) = &self.sha256
                    && parse_sha256(hash).is_none()
                {
                    return Err(format!("sha256 {hash:?} is not 64 hex digits"));
                }
                for (field, set) in [("command", self.command.is_some()), ("run", self.run.is_some())] {
                    if set {
                        return Err(extra(field));
                    }
                }
            }
            Kind::Native => {
                let command = self.command.as_deref().ok_or("a native helper needs `command`")?;
                if command.first().is_none_or(String::is_empty) {
                    return Err("`command` needs at least the program".into());
                }
                for (field, set) in [
                    ("module", self.module.is_some()),
                    ("sha256", self.sha256.is_some()),
                    ("run", self.run.is_some()),
                ] {
                    if set {
                        return Err(extra(field));
                    }
                }
            }
            Kind::Shell => {
                let run = self.run.as_deref().ok_or("a shell helper needs `run`")?;
                if run.trim().is_empty() {
                    return Err("`run` is empty".into());
                }
                for (field, set) in [
                    ("module", self.module.is_some()),
                    ("sha256", self.sha256.is_some()),
                    ("command", self.command.is_some()),
                ] {
                    if set {
                        return Err(extra(field));
                    }
                }
            }
        }
        if let Some(m) = &self.model_args {
            if m.max == 0 || m.max > MAX_MODEL_ARGS {
                return Err(format!("model_args.max must be 1..={MAX_MODEL_ARGS}"));
            }
            if let Some(f) = m.flags.iter().find(|f| {
                let name = f.strip_suffix('=').unwrap_or(f);
                !name.starts_with('-')
                    || matches!(name, "-" | "--")
                    || name.chars().any(|c| c.is_whitespace() || c.is_control())
            }) {
                return Err(format!("model_args.flags: {f:?} is not a flag"));
            }
        }
        let program = match self.kind {
            Kind::Wasm => HelperProgram::Wasm {
                module: self.module.unwrap_or_default(),
                sha256: self.sha256.as_deref().and_then(parse_sha256),
            },
            Kind::Native => {
                let mut command = self.command.unwrap_or_default().into_iter();
                HelperProgram::Native {
                    program: command.next().unwrap_or_default(),
                    args: command.collect(),
                }
            }
            Kind::Shell => HelperProgram::Shell {
                run: self.run.unwrap_or_default(),
            },
        };
        Ok(Helper {
            name: self.name,
            line: 0,
            description: self.description,
            program,
            args: self.args,
            model_args: self.model_args,
            worktree: self.worktree,
            limits: self.limits,
        })
    }
}

/// 64 hex digits as 32 bytes.
fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

fn is_repo_path(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Definitions, DefinitionsError> {
        Definitions::check("origin/main:.ai/helpers.toml", text)
    }

    #[test]
    fn the_checked_in_schema_is_current() {
        let validator = crate::checked_in_schema("definitions.schema.json", &schema());
        let example: toml::Value = toml::from_str(EXAMPLE).expect("toml");
        assert!(validator.is_valid(&serde_json::to_value(example).expect("json")));
        let typo =
            serde_json::json!({"version": 1, "helper": [{"name": "x", "kind": "wasm", "modul": "a.wasm"}]});
        assert!(!validator.is_valid(&typo));
    }

    const EXAMPLE: &str = r#"
version = 1

[[helper]]
name = "tree-stats"
kind = "wasm"
module = ".ai/helpers/tree-stats.wasm"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
args = ["--base", "{base_ref}"]
limits = { timeout = "10s" }

[[helper]]
name = "ruff"
kind = "native"
command = ["ruff", "check"]
model_args = { max = 16, flags = ["--fix"] }

[[helper]]
name = "lint"
kind = "shell"
run = "ruff check . && shellcheck .ai/*.sh"
worktree = "rw"
"#;

    #[test]
    fn the_example_parses() {
        let file = parse(EXAMPLE).expect("valid");
        assert_eq!(file.names(), ["tree-stats", "ruff", "lint"]);
        assert_eq!(file.get("lint").map(|d| d.worktree), Some(WorktreeAccess::Rw));
    }

    #[test]
    fn malformed_definitions_fail_with_the_reason() {
        for (text, needle) in [
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"wasm\"\nmodul = \"a\"\n",
                "line 5",
            ),
            ("version = 2\n", "version 2"),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"docker\"\n",
                "unknown variant",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"wasm\"\n",
                "needs `module`",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"native\"\ncommand = []\n",
                "at least",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \" \"\n",
                "empty",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"native\"\ncommand = [\"a\"]\nrun = \"b\"\n",
                "does not apply",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"wasm\"\nmodule = \"../up.wasm\"\n",
                "without `..`",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"wasm\"\nmodule = \"a.wasm\"\nsha256 = \"abc\"\n",
                "64 hex",
            ),
            (
                "version = 1\n[[helper]]\nname = \"X Y\"\nkind = \"shell\"\nrun = \"true\"\n",
                "a name is",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\n",
                "more than once",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\nmodel_args = { max = 0 }\n",
                "model_args.max",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\nmodel_args = { max = 2, flags = [\"fix\"] }\n",
                "not a flag",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\nmodel_args = { max = 2, flags = [\"--=\"] }\n",
                "not a flag",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\nmodel_args = { max = 2, flags = [\"-S x=\"] }\n",
                "not a flag",
            ),
            (
                "version = 1\n[[helper]]\nname = \"x\"\nkind = \"shell\"\nrun = \"true\"\nlimits = { max_processes = -1 }\n",
                "invalid value",
            ),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains("origin/main:.ai/helpers.toml"), "{err}");
        }
    }

    #[test]
    fn every_bad_entry_is_reported_with_its_line_and_the_good_ones_stay_usable() {
        let text = r#"version = 1

[[helper]]
name = "Bad Name"
kind = "shell"
run = "true"

[[helper]]
name = "good"
kind = "shell"
run = "true"

[[helper]]
name = "typo"
kind = "wasm"
modul = "a.wasm"

[[helper]]
name = "twice"
kind = "shell"
run = "true"

[[helper]]
name = "twice"
kind = "shell"
run = "false"

[[helper]]
name = "limits"
kind = "shell"
run = "true"
[helper.limits]
timeout = "soon"
"#;
        let file = Definitions::parse("f", text).expect("the file is TOML");
        assert_eq!(file.names(), ["good"]);
        let shown: Vec<String> = file.problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert!(
            shown[0].starts_with("line 3: helper \"Bad Name\": a name is"),
            "{shown:?}"
        );
        assert!(
            shown[1].starts_with("line 16: helper \"typo\": unknown field `modul`"),
            "{shown:?}"
        );
        assert!(
            shown[2].starts_with("line 18: helper \"twice\": is defined more than once (lines 18, 23)"),
            "{shown:?}"
        );
        assert!(shown[3].starts_with("line 33: helper \"limits\""), "{shown:?}");
        assert_eq!(file.problems_of("typo").len(), 1);
        let err = Definitions::check("f", text).expect_err("problems").to_string();
        for line in ["line 3:", "line 16:", "line 18:", "line 33:"] {
            assert!(err.contains(line), "{err}");
        }
        // Inline tables name their line too.
        let inline = "version = 1\nhelper = [\n  { name = \"a\", kind = \"shell\", run = \"true\" },\n  { name = \"b\", kind = \"shell\", rn = \"x\" },\n]\n";
        let file = Definitions::parse("f", inline).expect("TOML");
        assert_eq!(file.names(), ["a"]);
        assert_eq!(file.problems[0].line, 4, "{:?}", file.problems);
        // A syntax error is the file's, with its line.
        let err = Definitions::parse("f", "version = 1\n[[helper]\n")
            .expect_err("syntax")
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
