//! Shell-string helpers (layer 4): a definition of `kind = "shell"` gives one bash command
//! string. Before it runs it is parsed by a real bash parser (`brush-parser`), every simple
//! command in it is found — across `;`, `&&`, `||`, `|`, newlines, `{ }`, subshells, loops,
//! `if`/`case`, command and process substitutions and literal `bash -c '…'` strings — and each
//! must pass an **allowlist**: shell builtins that run nothing, upstream `.ai/` scripts, and
//! the commands of a table ([`table`]) each with its option grammar. Everything else is
//! refused, naming the rule that fired ([`Rule`]) and what to do instead.
//!
//! Besides the allowlist:
//! - **No evaluation of outside text.** Bash evaluates text as code in arithmetic (`$(( ))`,
//!   `(( ))`, `let`, `[[ -eq ]]`, array subscripts, substring offsets) and through indirect
//!   expansion, `test -v`, `declare -i`/`-n` and `${x@P}`. A variable read in any of these
//!   must be assigned only literals of the program, never command output, file contents or
//!   request arguments (`x=$(cat VERSION); echo $((x))` is refused).
//! - **Environment.** `NAME=value command`, `export`, `env NAME=…` may only set `LC_ALL`,
//!   `LANG`, `TZ`, `NO_COLOR` and `TERM`: other variables are how tools load code and
//!   configuration (`RIPGREP_CONFIG_PATH`, `PERL5OPT`, `GIT_CONFIG_GLOBAL`). The variables the
//!   checker guards (`PATH`, `IFS`, `BASH_ENV`, loader variables …) cannot be assigned at all,
//!   but for `IFS=… read` (a literal separator for that one builtin).
//! - **Words that become several.** A brace expansion is checked as the words it makes; a
//!   command with a glob or a spread (`"$@"`, `"${a[@]}"`) is checked again with it as two
//!   words, the second possibly an option, and with a bare spread as none (see `split`).
//! - **Options.** A word that is not literal may not stand where a command reads options (a
//!   pull request chooses file names and contents: `rg "$(cat p)"` could be `--pre=…`), unless
//!   `--` comes first; unquoted expansions are refused (split and globbed).
//! - **Paths.** No word may reach `/proc/*/environ` or `/dev/tcp|udp`, after quote removal and
//!   with globs and expansions matched as they could expand; a redirection target is a
//!   literal, and output goes only to the worktree (no dot-files), `/tmp` or `/dev/null`.
//! - **Directories.** After a `cd`, `pushd` or `popd` (tracked through subshells, branches and
//!   loops), a relative `.ai/` path could be another directory's, and git could find a nested
//!   repository: both are refused.
//! - **Wrappers** (`timeout`, `nice`, `env`, `stdbuf`, `command`) run their inner command: it
//!   is checked exactly like a top-level one, and its arguments are its own.
//! - **Interpreters** (`bash`, `sh`, `dash`, `python3`, `perl`, `node`) run only upstream
//!   `.ai/` scripts given as literal paths, without options that load other code; a literal
//!   `bash -c '…'` string is checked in turn.
//! - **Sizes.** At most [`MAX_STATEMENTS`] simple commands, 16 KiB, bounded nesting, no
//!   here-documents or control characters, and a parse on its own thread within 2 s (the fuzz
//!   target found inputs that made the parser run for minutes).
//!
//! What passes is then resolved like any native command (layer 2, by the caller: every
//! command on the policy's `PATH`, every script under upstream's `.ai/`) and runs in the native
//! sandbox under `bash` after [`PRELUDE`], with git's configuration isolated
//! ([`GIT_ENVIRONMENT`]) when it uses git.

mod grammar;
mod guards;
mod sed;
mod split;
pub mod table;
mod walk;
mod word;

pub use guards::MAX_PROGRAM_BYTES;
pub use table::{CommandSpec, Table};

/// The most simple commands a shell helper may contain.
pub const MAX_STATEMENTS: usize = 50;

/// The prelude run before a checked program: the variables that change how later words resolve
/// are made read-only, so a construct the checker did not foresee still cannot redirect them.
pub const PRELUDE: &str = "readonly PATH BASH_ENV ENV SHELLOPTS BASHOPTS CDPATH GLOBIGNORE PROMPT_COMMAND PS4 HOME TMPDIR TEXTDOMAIN TEXTDOMAINDIR\n";

/// The prelude for a program that runs git: [`PRELUDE`], and git's isolation read-only too.
pub fn prelude(uses_git: bool) -> String {
    let mut out = PRELUDE.to_owned();
    if uses_git {
        out.push_str("readonly");
        for (name, _) in GIT_ENVIRONMENT {
            out.push(' ');
            out.push_str(name);
        }
        out.push('\n');
    }
    out
}

/// The variables a program may set for a command (`NAME=value cmd`, `export`, `env NAME=…`).
pub const ENVIRONMENT_NAMES: &[&str] = &["LC_ALL", "LANG", "TZ", "NO_COLOR", "TERM"];

/// The environment a shell helper that runs git gets, so that git reads no configuration but
/// wrun's: no system or global file, and on top of the repository's own file (which wrun also
/// replaces inside the sandbox) settings that turn off every program git could run for a
/// read-only command. `GIT_CONFIG_COUNT` settings have command-line precedence.
pub const GIT_ENVIRONMENT: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_PAGER", "cat"),
    ("GIT_CONFIG_COUNT", "17"),
    ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_0", "false"),
    ("GIT_CONFIG_KEY_1", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_1", "/dev/null"),
    // Not `diff.external`: no configuration git reads here can set it (wrun replaces the
    // repository's file), and an empty value makes git try to run "" for every patch.
    ("GIT_CONFIG_KEY_2", "core.askPass"),
    ("GIT_CONFIG_VALUE_2", "false"),
    ("GIT_CONFIG_KEY_3", "core.pager"),
    ("GIT_CONFIG_VALUE_3", "cat"),
    ("GIT_CONFIG_KEY_4", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_4", "explicit"),
    ("GIT_CONFIG_KEY_5", "core.attributesFile"),
    ("GIT_CONFIG_VALUE_5", "/dev/null"),
    ("GIT_CONFIG_KEY_6", "core.sshCommand"),
    ("GIT_CONFIG_VALUE_6", "false"),
    ("GIT_CONFIG_KEY_7", "credential.helper"),
    ("GIT_CONFIG_VALUE_7", ""),
    ("GIT_CONFIG_KEY_8", "protocol.allow"),
    ("GIT_CONFIG_VALUE_8", "never"),
    ("GIT_CONFIG_KEY_9", "core.untrackedCache"),
    ("GIT_CONFIG_VALUE_9", "false"),
    ("GIT_CONFIG_KEY_10", "gpg.program"),
    ("GIT_CONFIG_VALUE_10", "false"),
    ("GIT_CONFIG_KEY_11", "core.alternateRefsCommand"),
    ("GIT_CONFIG_VALUE_11", "false"),
    ("GIT_CONFIG_KEY_12", "diff.ignoreSubmodules"),
    ("GIT_CONFIG_VALUE_12", "all"),
    ("GIT_CONFIG_KEY_13", "status.submoduleSummary"),
    ("GIT_CONFIG_VALUE_13", "false"),
    ("GIT_CONFIG_KEY_14", "submodule.recurse"),
    ("GIT_CONFIG_VALUE_14", "false"),
    // `%G?` and friends verify signatures with whichever program the signature's format names.
    ("GIT_CONFIG_KEY_15", "gpg.x509.program"),
    ("GIT_CONFIG_VALUE_15", "false"),
    ("GIT_CONFIG_KEY_16", "gpg.ssh.program"),
    ("GIT_CONFIG_VALUE_16", "false"),
];

/// How long parsing and checking one program may take.
const PARSE_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// The checker thread's stack: the parser recurses per nesting level (a chain of unary
/// operators, `[[ ! ! … x ]]` or `$((- - … 1))`, is one level each: 16 KiB of them needs some
/// 20 MiB in a debug build). Reserved, not committed: only what the parser touches is used.
const PARSER_STACK: usize = 256 << 20;

/// Which rule refused a program: a stable id for tests, the audit log and hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Rule {
    /// Too long, too nested, too many statements.
    Size,
    /// It does not parse (or the parser failed on it).
    Parse,
    /// A construct that runs code the checker cannot see: functions, coprocesses,
    /// here-documents, `eval`, `exec`, `trap` …
    Construct,
    /// The command is not in the allowlist.
    NotAllowed,
    /// An option (or subcommand, sed command, find primary) the command's grammar refuses.
    Option,
    /// An operand where it is not allowed: too many, or a non-literal word where an option could be.
    Operand,
    /// An interpreter, `source` or a path run as a program: only upstream `.ai/` scripts.
    Script,
    /// An assignment: a guarded variable, or a variable put into a command's environment.
    Assignment,
    /// Text from outside the program in a context where bash evaluates it as code.
    Evaluation,
    /// A command name that is not literal, or an unquoted expansion.
    Expansion,
    /// A path reaching a process environment or a network pseudo-device.
    Path,
    /// A redirection target that is not literal, or output to a place it may not go.
    Redirect,
    /// A relative script, or git, after a change of directory.
    Directory,
}

impl Rule {
    /// The rule's stable id, `shell.<name>`.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Size => "shell.size",
            Rule::Parse => "shell.parse",
            Rule::Construct => "shell.construct",
            Rule::NotAllowed => "shell.not-allowed",
            Rule::Option => "shell.option",
            Rule::Operand => "shell.operand",
            Rule::Script => "shell.script",
            Rule::Assignment => "shell.assignment",
            Rule::Evaluation => "shell.evaluation",
            Rule::Expansion => "shell.expansion",
            Rule::Path => "shell.path",
            Rule::Redirect => "shell.redirect",
            Rule::Directory => "shell.directory",
        }
    }
}

/// Why a shell program was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shell command refused [{}]: {reason}{}", rule.id(), at.as_ref().map(|s| format!(" (at {s:?})")).unwrap_or_default())]
pub struct ShellError {
    /// The rule that fired.
    pub rule: Rule,
    /// What was found and what to do instead.
    pub reason: String,
    /// The offending command or word, shortened.
    pub at: Option<String>,
}

impl ShellError {
    pub(crate) fn new(rule: Rule, reason: impl Into<String>, at: Option<&str>) -> Self {
        Self {
            rule,
            reason: reason.into(),
            at: at.map(|s| s.chars().take(80).collect()),
        }
    }
}

/// A simple command that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The command as bash looks it up, after quote removal (`grep`, `.ai/lint.sh`,
    /// `/usr/bin/git`).
    pub command: String,
    /// Whether it is a shell builtin (not looked up on `PATH`).
    pub builtin: bool,
    /// Literal `.ai/` paths this statement hands to an interpreter or `source`.
    pub scripts: Vec<String>,
    /// Whether an argument is not a plain literal file name (a variable, a glob, a name perl's
    /// magic open would run): the planner refuses it for an upstream script run by perl.
    pub dynamic_args: bool,
}

/// A program that passed the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Every simple command, in source order (substitutions before the command using them).
    pub statements: Vec<Statement>,
    /// Whether it runs git (which then gets [`GIT_ENVIRONMENT`] and a replaced configuration).
    pub uses_git: bool,
}

/// The policy's part of the check: the table of allowed commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The commands a program may run.
    pub table: Table,
}

fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        ..brush_parser::ParserOptions::default()
    }
}

/// Whether a program may not assign `name`: the prelude's read-only variables, the other
/// variables that change how bash resolves and runs things, and the loader and interpreter
/// variables only a policy may set.
pub fn is_guarded_var(name: &str) -> bool {
    const GUARDED_VARS: &[&str] = &[
        "PATH",
        "IFS",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
        "GLOBIGNORE",
        "PROMPT_COMMAND",
        "PS4",
        "BASH_XTRACEFD",
        "HISTFILE",
        "EXECIGNORE",
        "FUNCNEST",
        "BASH_LOADABLES_PATH",
        "BASH_COMPAT",
        "POSIXLY_CORRECT",
        "HOME",
        "TMPDIR",
        // bash's own arrays and completion, history and readline state.
        "DIRSTACK",
        "GROUPS",
        "FUNCNAME",
        "PIPESTATUS",
        "COPROC",
        "MAPFILE",
        "HISTCONTROL",
        "HISTIGNORE",
        "HISTTIMEFORMAT",
        "INPUTRC",
        "MAIL",
        "MAILPATH",
    ];
    let upper = name.to_ascii_uppercase();
    GUARDED_VARS.contains(&upper.as_str())
        // bash's own: BASH_CMDS is its command hash table, BASH_ALIASES its aliases, …
        || upper.starts_with("BASH")
        // gettext: where `$"…"` and every program's messages come from.
        || upper.starts_with("TEXTDOMAIN")
        || upper.starts_with("GIT_")
        || upper.starts_with("COMP_")
        || upper.starts_with("READLINE_")
        || wrun_runtime::env::is_policy_only_name(&upper)
}

/// Whether `name` is one a program may put in a command's environment ([`ENVIRONMENT_NAMES`],
/// and the other locale categories), with a literal value of the right shape only.
pub(crate) fn is_environment_name(name: &str) -> bool {
    ENVIRONMENT_NAMES.contains(&name) || name.starts_with("LC_") || name == "LANGUAGE"
}

/// Checks the value of an environment name: a literal, and for the locale, time zone and
/// terminal names a plain name, not a path (glibc would read a time zone file, a locale or a
/// terminal description from a path the pull request chooses).
pub(crate) fn environment_value(name: &str, value: Option<&str>, at: &str) -> Result<(), ShellError> {
    let Some(value) = value else {
        return Err(ShellError::new(
            Rule::Assignment,
            format!("{name} must be given a literal value"),
            Some(at),
        ));
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '@' | '-' | '+');
    let ok = match name {
        "NO_COLOR" => true,
        "TZ" => {
            let v = value.strip_prefix(':').unwrap_or(value);
            !v.starts_with('/')
                && !v.split('/').any(|c| c.is_empty() || c == "..")
                && v.chars().all(|c| plain(c) || c == '/')
        }
        _ => value.chars().all(plain) && !value.contains(".."),
    };
    if !ok {
        return Err(ShellError::new(
            Rule::Assignment,
            format!(
                "{name}={value:?}: not a plain {name} value (a path would make programs read a file the pull request chooses)"
            ),
            Some(at),
        ));
    }
    Ok(())
}

/// Checks a bash program; see the module documentation for what is refused.
pub fn check(program: &str, rules: &Rules) -> Result<Checked, ShellError> {
    guards::before_parse(program)?;
    // The parser is third-party code fed hostile text. It runs on a thread of its own with a
    // large stack and a deadline: a panic in it, or a parse that takes longer than
    // PARSE_BUDGET, is a refusal, not a crash or a hang. (A parse past its deadline finishes
    // in the background; the caps above keep every case the fuzz target found in the
    // milliseconds.)
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let owned_program = program.to_owned();
    let table = rules.table.clone();
    let spawned = std::thread::Builder::new()
        .name("wrun-shell-check".into())
        .stack_size(PARSER_STACK)
        .spawn(move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                walk::Checker::new(&table).finish(&owned_program)
            }));
            let _ = tx.send(run);
        });
    if let Err(e) = spawned {
        return Err(ShellError::new(
            Rule::Parse,
            format!("cannot start the checker: {e}"),
            None,
        ));
    }
    match rx.recv_timeout(PARSE_BUDGET) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ShellError::new(
            Rule::Parse,
            "the shell parser failed on it (refused)",
            None,
        )),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ShellError::new(
            Rule::Parse,
            format!(
                "the shell parser did not finish within {} s (refused); simplify the command or move it to an upstream .ai/ script",
                PARSE_BUDGET.as_secs()
            ),
            None,
        )),
    }
}

#[cfg(test)]
mod tests;
