//! One simple command checked against the allowlist: shell builtins, upstream scripts, and
//! the table's commands each by their grammar. Wrappers (`timeout`, `nice`, `env`, `stdbuf`,
//! `command`) hand their inner command back to [`Checker::run`], so it is checked exactly like a
//! top-level one and its arguments are its own.

use super::table::{
    Entry, FIND_OPERATORS, FIND_REFUSED, FIND_TESTS, FIND_VALUED, GIT_GLOBAL, GIT_LISTING, GIT_REFUSED,
    GIT_REFUSED_SHORT, GIT_SUBCOMMANDS, Getopt, Grammar, Interpreter, JQ_OPTIONS, SED_OPTIONS, Wrapper,
};
use super::walk::Checker;
use super::word::Word;
use super::{ENVIRONMENT_NAMES, Rule, ShellError};

/// What a command line used, for a policy's narrowing.
#[derive(Debug, Default)]
struct Used {
    options: Vec<String>,
    subcommand: Option<String>,
    operands: usize,
}

/// Builtins that run code the checker cannot see, or change how later commands are found.
const REFUSED_BUILTINS: &[&str] = &[
    "eval",
    "exec",
    "trap",
    "alias",
    "unalias",
    "hash",
    "enable",
    "shopt",
    "mapfile",
    "readarray",
    "coproc",
    "fc",
    "history",
    "builtin",
    "bind",
    "complete",
    "compgen",
    "compopt",
    "caller",
    "kill",
    "jobs",
    "bg",
    "fg",
    "disown",
    "suspend",
    "logout",
    "dirs",
    "help",
    "times",
    "ulimit",
    "select",
    "function",
];

fn refuse(rule: Rule, reason: impl Into<String>, at: &str) -> ShellError {
    ShellError::new(rule, reason, Some(at))
}

/// Whether `path` names an upstream script: relative, under `.ai/`, without `..`.
pub(crate) fn is_upstream_path(path: &str) -> bool {
    let rel = path.strip_prefix("./").unwrap_or(path);
    rel.starts_with(".ai/") && !rel.split('/').any(|c| c == "..") && rel.len() > 4
}

impl Checker<'_> {
    /// Checks one command: `command` (after quote removal) with `args`. `wrapped`: the command
    /// is run by a wrapper (`timeout 5 grep …`), which executes a program, never a builtin.
    pub(super) fn run(
        &mut self,
        command: &str,
        args: &[Word],
        stdin_fed: bool,
        wrapped: bool,
    ) -> Result<(), ShellError> {
        for a in args {
            self.no_unquoted_expansion(a)?;
        }
        if command.contains('/') && !command.starts_with('/') {
            self.upstream(command, "run")?;
            self.statement(command, false)?;
            if args
                .iter()
                .any(|a| a.literal().is_none_or(|l| crate::args::is_magic_name(&l)))
            {
                self.dynamic_args();
            }
            return Ok(());
        }
        if !wrapped && !command.contains('/') && self.builtin(command, args)? {
            return Ok(());
        }
        let base = command.rsplit('/').next().unwrap_or(command);
        let Some(entry) = self.table.get(base) else {
            let reason = if REFUSED_BUILTINS.contains(&base) {
                format!("`{base}` runs or redefines code the checker cannot see")
            } else if wrapped && is_shell_builtin(base) {
                format!("`{base}` is a shell builtin; a wrapper cannot run it")
            } else {
                format!(
                    "`{base}` is not in the shell allowlist (wrun's table or the policy's [[shell.commands]]); make it an upstream .ai/ script or a native helper with declared arguments"
                )
            };
            let rule = if REFUSED_BUILTINS.contains(&base) {
                Rule::Construct
            } else {
                Rule::NotAllowed
            };
            return Err(refuse(rule, reason, command));
        };
        let entry = entry.clone();
        self.statement(command, false)?;
        let mut used = Used::default();
        match &entry.grammar {
            Grammar::Getopt(g) => self.getopt(base, g, args, &mut used)?,
            Grammar::Find => self.find(args, &mut used)?,
            Grammar::Sed => self.sed(args, &mut used)?,
            Grammar::Jq => self.jq(args, &mut used)?,
            Grammar::Git => self.git(args, &mut used)?,
            Grammar::Interpreter(kind) => return self.interpreter(*kind, base, args),
            Grammar::Wrapper(kind) => return self.wrapper(*kind, base, args, stdin_fed),
        }
        narrowed(&entry, base, &used)
    }

    /// A relative path run as a program or script: only upstream's `.ai/`, and only while the
    /// working directory is the worktree's root.
    fn upstream(&self, path: &str, what: &str) -> Result<(), ShellError> {
        if !is_upstream_path(path) {
            return Err(refuse(
                Rule::Script,
                format!(
                    "only scripts under upstream's .ai/ may {what} from the worktree (only upstream code executes), not {path:?}"
                ),
                path,
            ));
        }
        if self.dir_changed {
            return Err(refuse(
                Rule::Directory,
                format!(
                    "after a `cd`, {path:?} may name another directory's .ai/ (the pull request's); run upstream scripts before changing directory, or keep the `cd` inside a subshell of its own: `(cd sub && grep -r x .); {path}`"
                ),
                path,
            ));
        }
        Ok(())
    }

    /// A shell builtin. Returns false if `name` is not one this checker allows.
    fn builtin(&mut self, name: &str, args: &[Word]) -> Result<bool, ShellError> {
        match name {
            "echo" | "true" | "false" | ":" | "pwd" | "exit" | "return" | "shift" | "break" | "continue"
            | "type" | "umask" => {}
            "printf" => {
                if args.first().is_some_and(|a| a.literal().as_deref() == Some("-v")) {
                    return Err(refuse(
                        Rule::Assignment,
                        "`printf -v` assigns a variable",
                        "printf -v",
                    ));
                }
                if args
                    .first()
                    .is_some_and(|a| a.literal().is_none() && a.may_be_option())
                {
                    return Err(refuse(
                        Rule::Operand,
                        "printf's format is not a literal and could be read as an option (`-v`); write `printf -- \"$fmt\"` or a literal format",
                        &args[0].raw,
                    ));
                }
            }
            "test" | "[" => self.test(name, args)?,
            "cd" | "pushd" | "popd" => {
                for a in args {
                    if let Some(l) = a.literal()
                        && l.starts_with('-')
                        && !matches!(l.as_str(), "-" | "--" | "-L" | "-P")
                        && !(name != "cd" && l[1..].chars().all(|c| c.is_ascii_digit()))
                    {
                        return Err(refuse(
                            Rule::Option,
                            format!("`{name} {l}` is not allowed"),
                            &a.raw,
                        ));
                    }
                }
                self.dir_changed = true;
            }
            "set" => self.set(args)?,
            "local" | "declare" | "typeset" | "readonly" | "export" => self.declare(name, args)?,
            "unset" => {
                for a in args {
                    match a.literal().as_deref() {
                        Some("-v") => continue,
                        Some(l) if l.starts_with('-') => {
                            return Err(refuse(
                                Rule::Option,
                                format!("`unset {l}` is not allowed"),
                                &a.raw,
                            ));
                        }
                        _ => {}
                    }
                    let text = a.text().unwrap_or_default();
                    self.assignable(text.split('[').next().unwrap_or(&text), &a.raw)?;
                    self.variable_operand(a, "unset")?;
                }
            }
            "read" => self.read(args)?,
            "getopts" => {
                match args.get(1).and_then(Word::literal) {
                    Some(var) => {
                        self.assignable(&var, &var)?;
                        self.assign(&var, false);
                    }
                    None => {
                        return Err(refuse(
                            Rule::Assignment,
                            "getopts needs a literal variable name",
                            "getopts",
                        ));
                    }
                }
                self.assign("OPTARG", false);
            }
            "let" => {
                for a in args {
                    let Some(text) = a.text() else {
                        return Err(refuse(
                            Rule::Evaluation,
                            "`let` evaluates its arguments as arithmetic; they must be literal",
                            &a.raw,
                        ));
                    };
                    self.arithmetic(&text, "let")?;
                }
            }
            "wait" => self.wait(args)?,
            "source" | "." => {
                let script = args.first().and_then(Word::literal);
                match script {
                    Some(s) => {
                        self.upstream(&s, "be sourced")?;
                        self.statement(name, true)?;
                        self.script(&s);
                        // A sourced script runs in this shell: it may change directory, and
                        // later relative `.ai/` paths (and git) could then name another's.
                        self.dir_changed = true;
                        return Ok(true);
                    }
                    None => {
                        return Err(refuse(
                            Rule::Script,
                            "`source` may only read one literal upstream script under .ai/",
                            name,
                        ));
                    }
                }
            }
            "command" => return self.command_builtin(args).map(|()| true),
            _ => return Ok(false),
        }
        self.statement(name, true)?;
        Ok(true)
    }

    /// `command -v|-V NAME…` looks a name up; `command CMD …` runs it (a builtin included).
    fn command_builtin(&mut self, args: &[Word]) -> Result<(), ShellError> {
        let mut i = 0;
        let mut lookup = false;
        while let Some(l) = args.get(i).and_then(Word::literal) {
            match l.as_str() {
                "-v" | "-V" => lookup = true,
                "--" => {
                    i += 1;
                    break;
                }
                l if l.starts_with('-') => {
                    return Err(refuse(
                        Rule::Option,
                        format!("`command {l}` is not allowed (`-p` searches a PATH of its own)"),
                        l,
                    ));
                }
                _ => break,
            }
            i += 1;
        }
        self.statement("command", true)?;
        if lookup {
            return Ok(());
        }
        let Some(inner) = args.get(i) else {
            return Ok(());
        };
        let Some(name) = inner.literal() else {
            return Err(refuse(
                Rule::Expansion,
                "`command` with a command name that is not literal",
                &inner.raw,
            ));
        };
        if !name.contains('/') && self.builtin(&name, &args[i + 1..])? {
            return Ok(());
        }
        self.run(&name, &args[i + 1..], false, true)
    }

    /// `test`/`[`: bash reads an operator's operand from the next word, and `-v`/`-R`
    /// evaluate its subscript as code. A word that is not literal may be any operator, so it
    /// may not stand right before another word that is not literal (whose text would be the
    /// operand), and a literal one after it is checked as a `-v` operand; a literal `-v`/`-R`
    /// needs a literal name. `[` needs its closing `]`.
    fn test(&mut self, name: &str, args: &[Word]) -> Result<(), ShellError> {
        let args: &[Word] = if name == "[" {
            match args.split_last() {
                Some((last, rest)) if last.literal().as_deref() == Some("]") => rest,
                _ => {
                    return Err(refuse(
                        Rule::Operand,
                        "`[` without a closing `]` as its last word",
                        name,
                    ));
                }
            }
        } else {
            args
        };
        for (i, w) in args.iter().enumerate() {
            let next = args.get(i + 1);
            if let Some(l) = w.literal() {
                if matches!(l.as_str(), "-v" | "-R")
                    && let Some(operand) = next
                {
                    self.variable_operand(operand, &format!("{name} {l}"))?;
                }
                continue;
            }
            match next {
                Some(next) if next.literal().is_none() => {
                    return Err(refuse(
                        Rule::Operand,
                        format!(
                            "two `{name}` operands that are not literal side by side (or one that may be several words): the first could be `-v`, which evaluates the second's subscript as code; put a literal operator between them (`[ \"$a\" = \"$b\" ]`)"
                        ),
                        &w.raw,
                    ));
                }
                Some(next) if next.text().is_some_and(|t| t.contains('[')) => {
                    self.variable_operand(next, name)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `wait [-n] [-f] [ID…]`: `-p VAR` assigns (and evaluates a subscript), so an ID that is
    /// not literal and could be an option needs `--` before it.
    fn wait(&mut self, args: &[Word]) -> Result<(), ShellError> {
        let mut options_done = false;
        for w in args {
            match w.literal() {
                Some(l) if options_done || !l.starts_with('-') => {}
                Some(l) if l == "--" => options_done = true,
                Some(l) if l[1..].chars().all(|c| matches!(c, 'n' | 'f')) => {}
                Some(l) => {
                    return Err(refuse(
                        Rule::Option,
                        format!("`wait {l}` is not allowed (`-p` assigns a variable)"),
                        &w.raw,
                    ));
                }
                None if !options_done && w.may_be_option() => {
                    return Err(refuse(
                        Rule::Operand,
                        "a `wait` operand that is not literal could be an option (`-p`, which assigns a variable); write `wait -- \"$pid\"`",
                        &w.raw,
                    ));
                }
                None => {}
            }
        }
        Ok(())
    }

    fn set(&mut self, args: &[Word]) -> Result<(), ShellError> {
        let mut i = 0;
        while i < args.len() {
            let w = &args[i];
            let Some(l) = w.literal() else {
                return Err(refuse(
                    Rule::Operand,
                    "`set` with a word that is not literal, which could be an option; write `set -- …`",
                    &w.raw,
                ));
            };
            if l == "--" || l == "-" {
                return Ok(());
            }
            let Some(flags) = l.strip_prefix('-').or_else(|| l.strip_prefix('+')) else {
                return Err(refuse(
                    Rule::Operand,
                    "`set` with positional values needs `--` before them",
                    &w.raw,
                ));
            };
            for c in flags.chars() {
                match c {
                    'e' | 'u' | 'x' | 'f' | 'C' | 'v' | 'n' => {}
                    'o' => {
                        i += 1;
                        let option = args.get(i).and_then(Word::literal).unwrap_or_default();
                        if !matches!(
                            option.as_str(),
                            "errexit"
                                | "nounset"
                                | "pipefail"
                                | "xtrace"
                                | "noglob"
                                | "noclobber"
                                | "verbose"
                        ) {
                            return Err(refuse(
                                Rule::Option,
                                format!(
                                    "`set -o {option}` is not allowed (errexit, nounset, pipefail, xtrace, noglob, noclobber)"
                                ),
                                &w.raw,
                            ));
                        }
                    }
                    other => {
                        return Err(refuse(
                            Rule::Option,
                            format!(
                                "`set -{other}` is not allowed (`-a` exports every variable; allowed: -e -u -x -f -C -v -n -o)"
                            ),
                            &w.raw,
                        ));
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }

    /// `local`, `declare`, `typeset`, `readonly`, `export`: no integer (`-i`, every later
    /// assignment is evaluated), name-reference (`-n`) or export (`-x`) attributes beyond the
    /// harmless environment names, literal names, guarded variables untouched.
    fn declare(&mut self, name: &str, args: &[Word]) -> Result<(), ShellError> {
        let mut exported = name == "export";
        let mut array = false;
        let mut options_done = false;
        for w in args {
            let text = w.text();
            if !options_done && let Some(l) = w.literal() {
                if l == "--" {
                    options_done = true;
                    continue;
                }
                if let Some(flags) = l.strip_prefix('-') {
                    for c in flags.chars() {
                        let allowed = match name {
                            "export" => c == 'p',
                            "readonly" => matches!(c, 'a' | 'A' | 'p'),
                            _ => matches!(c, 'a' | 'A' | 'r' | 'g' | 'l' | 'u' | 'p' | 'x'),
                        };
                        if !allowed {
                            let why = match c {
                                'i' => {
                                    " (bash evaluates every value assigned to an integer variable as code)"
                                }
                                'n' => " (a name reference makes another variable's assignment this one's)",
                                'f' | 'F' => " (functions are not allowed)",
                                _ => "",
                            };
                            return Err(refuse(
                                Rule::Option,
                                format!("`{name} -{c}` is not allowed{why}"),
                                &w.raw,
                            ));
                        }
                        exported |= c == 'x';
                        array |= matches!(c, 'a' | 'A');
                    }
                    continue;
                }
                if l.starts_with('+') {
                    return Err(refuse(
                        Rule::Option,
                        format!("`{name} {l}` is not allowed"),
                        &w.raw,
                    ));
                }
            }
            // `name`, `name=value`, `name[i]=value`: the name must be literal text.
            let Some(var) = assignment_name(w, text.as_deref()) else {
                return Err(refuse(
                    Rule::Assignment,
                    format!("`{name}` with a variable name that is not literal could assign any variable"),
                    &w.raw,
                ));
            };
            let (base, subscript) = match var.split_once('[') {
                Some((b, s)) => (b, Some(s.trim_end_matches(']'))),
                None => (var.as_str(), None),
            };
            if super::is_environment_name(base) && subscript.is_none() {
                let value = text.as_deref().and_then(|t| t.split_once('=')).map(|(_, v)| v);
                match value {
                    Some(v) => super::environment_value(base, Some(v), &w.raw)?,
                    None if text.as_deref().is_some_and(|t| !t.contains('=')) => {}
                    None => super::environment_value(base, None, &w.raw)?,
                }
                self.assign_from(base, &declared_value(w, text.as_deref()));
                continue;
            }
            self.assignable(base, &w.raw)?;
            if let Some(s) = subscript {
                self.arithmetic(s, "an array subscript")?;
            }
            // `declare -a "a=(…$x…)"`: bash parses a quoted compound assignment again, so its
            // expansions run twice (a value from outside becomes code).
            let compound = text
                .as_deref()
                .unwrap_or(&w.raw)
                .split_once('=')
                .is_some_and(|(_, v)| v.starts_with('('));
            let quoted = w.raw.contains(['\'', '"', '\\']) || w.text().is_none();
            if compound && quoted {
                return Err(refuse(
                    Rule::Evaluation,
                    format!(
                        "`{name}` with a quoted or expanded `name=(…)` parses it again as code; write the array unquoted, `a=(x y)`"
                    ),
                    &w.raw,
                ));
            }
            if exported && !ENVIRONMENT_NAMES.contains(&base) {
                return Err(refuse(
                    Rule::Assignment,
                    format!(
                        "exporting {base} puts it in every later command's environment, where tools find configuration and code; only {} may be exported",
                        ENVIRONMENT_NAMES.join(", ")
                    ),
                    &w.raw,
                ));
            }
            let value = declared_value(w, text.as_deref());
            if array || subscript.is_some() || (compound && !quoted) {
                self.arrays.insert(base.to_owned());
            }
            if value.text().is_none() {
                if array {
                    return Err(refuse(
                        Rule::Evaluation,
                        format!(
                            "`{name} -a/-A` with a value that is not a literal: bash parses it again as `(…)`, running what its subscripts hold; assign the array with `{base}=(…)` or `read -a`"
                        ),
                        &w.raw,
                    ));
                }
                self.declared_opaque.push((base.to_owned(), w.raw.clone()));
            }
            self.assign_from(base, &value);
        }
        Ok(())
    }

    fn read(&mut self, args: &[Word]) -> Result<(), ShellError> {
        let mut i = 0;
        while i < args.len() {
            let w = &args[i];
            let Some(l) = w.literal() else {
                return Err(refuse(
                    Rule::Assignment,
                    "`read` with a variable name that is not literal",
                    &w.raw,
                ));
            };
            if l == "--" {
                i += 1;
                break;
            }
            if let Some(flags) = l.strip_prefix('-') {
                for (j, c) in flags.char_indices() {
                    match c {
                        'r' | 's' => {}
                        'a' | 'd' | 'n' | 'N' | 'p' | 't' | 'u' => {
                            let inline = &flags[j + c.len_utf8()..];
                            let value = if inline.is_empty() {
                                i += 1;
                                args.get(i).and_then(Word::literal)
                            } else {
                                Some(inline.to_owned())
                            };
                            if c == 'a' {
                                let var = value.unwrap_or_default();
                                let plain = var.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                                if !plain {
                                    return Err(refuse(
                                        Rule::Assignment,
                                        "`read -a` needs a plain literal array name",
                                        &w.raw,
                                    ));
                                }
                                self.assignable(&var, &w.raw)?;
                                self.assign(&var, false);
                                self.arrays.insert(var);
                            }
                            break;
                        }
                        other => {
                            return Err(refuse(
                                Rule::Option,
                                format!("`read -{other}` is not allowed"),
                                &w.raw,
                            ));
                        }
                    }
                }
                i += 1;
                continue;
            }
            break;
        }
        let names = if i >= args.len() { &[][..] } else { &args[i..] };
        for w in names {
            let var = w.literal().unwrap_or_default();
            if var.is_empty() || var.contains('[') {
                return Err(refuse(
                    Rule::Assignment,
                    "`read` needs plain literal variable names",
                    &w.raw,
                ));
            }
            self.assignable(&var, &w.raw)?;
            self.assign(&var, false);
        }
        if names.is_empty() {
            self.assign("REPLY", false);
        }
        Ok(())
    }

    /// The generic grammar.
    fn getopt(&mut self, name: &str, g: &Getopt, args: &[Word], used: &mut Used) -> Result<(), ShellError> {
        let mut i = 0;
        let mut ended = false;
        let mut operands: Vec<&Word> = Vec::new();
        while i < args.len() {
            let w = &args[i];
            i += 1;
            if ended {
                operands.push(w);
                continue;
            }
            let Some(l) = w.literal() else {
                if w.may_be_option() || (g.plus && w.may_start_with('+')) {
                    return Err(option_position(name, w));
                }
                operands.push(w);
                continue;
            };
            if l == "--" {
                ended = true;
                continue;
            }
            if g.plus && l.starts_with('+') {
                return Err(refuse(
                    Rule::Option,
                    format!(
                        "`{name} {l}` is the obsolete form of an option (`tail +1f` follows the file); write `-n +N`"
                    ),
                    &w.raw,
                ));
            }
            if l == "-" || !l.starts_with('-') {
                operands.push(w);
                continue;
            }
            if let Some(long) = l.strip_prefix("--") {
                let (opt, inline) = match long.split_once('=') {
                    Some((o, _)) => (o, true),
                    None => (long, false),
                };
                used.options.push(format!("--{opt}"));
                if g.long.iter().any(|x| x == opt) && !inline {
                    continue;
                }
                if g.long_optional.iter().any(|x| x == opt) {
                    continue;
                }
                if g.long_valued.iter().any(|x| x == opt) {
                    if !inline {
                        i += 1;
                    }
                    continue;
                }
                return Err(unknown_option(name, &format!("--{opt}"), &w.raw));
            }
            let flags = &l[1..];
            if g.numeric && flags.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            for (j, c) in flags.char_indices() {
                used.options.push(format!("-{c}"));
                if g.short.contains(&c) {
                    continue;
                }
                if g.short_valued.contains(&c) {
                    if flags[j + c.len_utf8()..].is_empty() {
                        i += 1;
                    }
                    break;
                }
                if g.short_optional.contains(&c) {
                    break;
                }
                return Err(unknown_option(name, &format!("-{c}"), &w.raw));
            }
        }
        if !g.subcommands.is_empty() {
            let first = operands.first().and_then(|w| w.literal());
            match first {
                Some(s) if g.subcommands.contains(&s) => used.subcommand = Some(s),
                _ => {
                    return Err(refuse(
                        Rule::Operand,
                        format!(
                            "`{name}` may only run the subcommands {}",
                            g.subcommands.join(", ")
                        ),
                        operands.first().map_or(name, |w| w.raw.as_str()),
                    ));
                }
            }
        }
        if let Some(max) = g.max_operands
            && let Some(many) = operands.iter().find(|w| w.may_split())
        {
            return Err(refuse(
                Rule::Operand,
                format!(
                    "`{name}` takes at most {max} operands here, and this word may become several (a glob, a brace expansion, \"$@\"); write them out"
                ),
                &many.raw,
            ));
        }
        if let Some(max) = g.max_operands
            && operands.len() > max
        {
            let why = match max {
                0 => "takes no operands".to_owned(),
                1 if name == "uniq" => {
                    "takes one input file here (a second operand is a file it writes)".to_owned()
                }
                n => format!("takes at most {n} operands here"),
            };
            return Err(refuse(
                Rule::Operand,
                format!("`{name}` {why}"),
                &operands[max].raw,
            ));
        }
        used.operands = operands.len();
        Ok(())
    }

    fn find(&mut self, args: &[Word], used: &mut Used) -> Result<(), ShellError> {
        let mut i = 0;
        while let Some(l) = args.get(i).and_then(Word::literal) {
            match l.as_str() {
                "-H" | "-L" | "-P" => i += 1,
                "-D" => i += 2,
                l if l.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        // Start points: up to the first word that begins the expression.
        while let Some(w) = args.get(i) {
            match w.literal() {
                Some(l) if l.starts_with(['-', '(', '!']) => break,
                Some(_) => {}
                None if w.may_be_option() => {
                    return Err(refuse(
                        Rule::Operand,
                        "a find start point that is not literal could be read as part of the expression (`-exec`); write it as \"./$dir\"",
                        &w.raw,
                    ));
                }
                None => {}
            }
            used.operands += 1;
            i += 1;
        }
        while let Some(w) = args.get(i) {
            let Some(l) = w.literal() else {
                return Err(refuse(
                    Rule::Operand,
                    "a word of find's expression that is not literal could be `-exec`; write the expression out",
                    &w.raw,
                ));
            };
            if let Some((_, why)) = FIND_REFUSED.iter().find(|(p, _)| *p == l) {
                return Err(refuse(
                    Rule::Option,
                    format!(
                        "`find {l}` {why}; print the names instead (`-print0`) and pipe them to a command of the allowlist (`wc -l --files0-from=-`, `grep -z`), or make it an upstream .ai/ script"
                    ),
                    &w.raw,
                ));
            }
            used.options.push(l.clone());
            if FIND_TESTS.contains(&l.as_str()) || FIND_OPERATORS.contains(&l.as_str()) {
                i += 1;
            } else if FIND_VALUED.contains(&l.as_str()) {
                i += 2;
            } else {
                return Err(refuse(
                    Rule::Option,
                    format!("`find {l}` is not a test or action wrun allows"),
                    &w.raw,
                ));
            }
        }
        Ok(())
    }

    fn sed(&mut self, args: &[Word], used: &mut Used) -> Result<(), ShellError> {
        let mut scripts: Vec<&Word> = Vec::new();
        let mut operands: Vec<&Word> = Vec::new();
        let mut i = 0;
        let mut ended = false;
        while i < args.len() {
            let w = &args[i];
            i += 1;
            let literal = w.literal();
            match literal.as_deref() {
                _ if ended => operands.push(w),
                None if w.may_be_option() => return Err(option_position("sed", w)),
                None => operands.push(w),
                Some("--") => ended = true,
                Some(l) if l == "-" || !l.starts_with('-') => operands.push(w),
                Some(l) => {
                    let (opt, inline) = match l.split_once('=').filter(|_| l.starts_with("--")) {
                        Some((o, v)) => (o.to_owned(), Some(v)),
                        None => (l.to_owned(), None),
                    };
                    if l.starts_with("--") {
                        used.options.push(opt.clone());
                        match SED_OPTIONS.iter().find(|(o, _)| *o == opt) {
                            Some((_, false)) if inline.is_none() => {}
                            Some((_, true)) => {
                                if opt == "--expression" {
                                    match inline {
                                        Some(_) => {
                                            return Err(refuse(
                                                Rule::Operand,
                                                "write the script as its own word: `-e SCRIPT`",
                                                &w.raw,
                                            ));
                                        }
                                        None => scripts.extend(args.get(i)),
                                    }
                                }
                                if inline.is_none() {
                                    i += 1;
                                }
                            }
                            _ => return Err(sed_option(&opt, &w.raw)),
                        }
                        continue;
                    }
                    for (j, c) in l[1..].char_indices() {
                        let o = format!("-{c}");
                        used.options.push(o.clone());
                        match SED_OPTIONS.iter().find(|(x, _)| *x == o) {
                            Some((_, false)) => {}
                            Some((_, true)) => {
                                let rest = &l[1 + j + c.len_utf8()..];
                                if c == 'e' {
                                    if !rest.is_empty() {
                                        return Err(refuse(
                                            Rule::Operand,
                                            "write the script as its own word: `-e SCRIPT`",
                                            &w.raw,
                                        ));
                                    }
                                    scripts.extend(args.get(i));
                                }
                                if rest.is_empty() {
                                    i += 1;
                                }
                                break;
                            }
                            None => return Err(sed_option(&o, &w.raw)),
                        }
                    }
                }
            }
        }
        if scripts.is_empty() {
            if operands.is_empty() {
                return Ok(());
            }
            scripts.push(operands.remove(0));
        }
        for script in scripts {
            let Some(text) = script.literal() else {
                return Err(refuse(
                    Rule::Evaluation,
                    "a sed script that is not literal cannot be checked (it could run `e`); write it out",
                    &script.raw,
                ));
            };
            let reads = super::sed::check(&text)
                .map_err(|why| refuse(Rule::Option, format!("sed script refused: {why}"), &script.raw))?;
            for file in reads {
                super::guards::path(&Word::literal_text(&file), &super::word::Values::new())?;
            }
        }
        used.operands = operands.len();
        Ok(())
    }

    fn jq(&mut self, args: &[Word], used: &mut Used) -> Result<(), ShellError> {
        let mut i = 0;
        let mut program: Option<&Word> = None;
        let mut ended = false;
        while i < args.len() {
            let w = &args[i];
            i += 1;
            let Some(l) = w.literal() else {
                if !ended && w.may_be_option() {
                    return Err(option_position("jq", w));
                }
                if program.is_none() {
                    program = Some(w);
                } else {
                    used.operands += 1;
                }
                continue;
            };
            if !ended && l == "--" {
                ended = true;
                continue;
            }
            if ended || !l.starts_with('-') || l == "-" {
                if program.is_none() {
                    program = Some(w);
                } else {
                    used.operands += 1;
                }
                continue;
            }
            let options: Vec<String> = if l.starts_with("--") || l.len() == 2 {
                vec![l.clone()]
            } else {
                l[1..].chars().map(|c| format!("-{c}")).collect()
            };
            for o in options {
                used.options.push(o.clone());
                match JQ_OPTIONS.iter().find(|(x, _)| *x == o) {
                    Some((_, values)) => i += values,
                    None => {
                        let why = match o.as_str() {
                            "-f" | "--from-file" => " (the program would come from a file wrun cannot check)",
                            o if o.starts_with("-L") => " (it adds a module search path)",
                            _ => "",
                        };
                        return Err(refuse(
                            Rule::Option,
                            format!("`jq {o}` is not allowed{why}"),
                            &w.raw,
                        ));
                    }
                }
            }
        }
        if let Some(program) = program {
            let Some(text) = program.literal() else {
                return Err(refuse(
                    Rule::Evaluation,
                    "a jq program that is not literal cannot be checked; write it out",
                    &program.raw,
                ));
            };
            if regex::Regex::new(r"\b(import|include)\b").is_ok_and(|re| re.is_match(&text)) {
                return Err(refuse(
                    Rule::Option,
                    "a jq program may not `import` or `include` modules (they are loaded from search paths, such as ~/.jq)",
                    &program.raw,
                ));
            }
        }
        Ok(())
    }

    fn git(&mut self, args: &[Word], used: &mut Used) -> Result<(), ShellError> {
        if self.dir_changed {
            return Err(refuse(
                Rule::Directory,
                "git after a `cd` may find another repository (a nested one of the pull request's) and read its configuration; run git from the worktree's root",
                "git",
            ));
        }
        self.uses_git = true;
        let mut i = 0;
        while let Some(w) = args.get(i) {
            let Some(l) = w.literal() else {
                return Err(option_position("git", w));
            };
            if !l.starts_with('-') {
                break;
            }
            if !GIT_GLOBAL.contains(&l.as_str()) {
                let why = match l.as_str() {
                    l if l.starts_with("-c") || l.starts_with("--config-env") => {
                        " (configuration on the command line can name programs to run)"
                    }
                    l if l.starts_with("-C")
                        || l.starts_with("--git-dir")
                        || l.starts_with("--work-tree") =>
                    {
                        " (another repository, whose configuration would be read)"
                    }
                    l if l.starts_with("--exec-path") => " (it chooses where git finds its programs)",
                    "-p" | "--paginate" => " (it runs a pager)",
                    _ => "",
                };
                return Err(refuse(
                    Rule::Option,
                    format!(
                        "`git {l}` is not allowed{why}; allowed before the subcommand: {}",
                        GIT_GLOBAL.join(" ")
                    ),
                    &w.raw,
                ));
            }
            used.options.push(l);
            i += 1;
        }
        let Some(sub_word) = args.get(i) else {
            return Err(refuse(Rule::Operand, "git needs a subcommand", "git"));
        };
        let sub = sub_word.literal().unwrap_or_default();
        if !GIT_SUBCOMMANDS.contains(&sub.as_str()) {
            return Err(refuse(
                Rule::Option,
                format!(
                    "`git {sub}` is not a read-only subcommand wrun allows (an alias or a command that writes or reaches the network); allowed: {}",
                    GIT_SUBCOMMANDS.join(", ")
                ),
                &sub_word.raw,
            ));
        }
        used.subcommand = Some(sub.clone());
        let listing = matches!(sub.as_str(), "branch" | "tag");
        let mut lists = false;
        let mut ended = false;
        let mut operands = 0;
        for w in &args[i + 1..] {
            let Some(l) = w.literal() else {
                if !ended && w.may_be_option() {
                    return Err(option_position(&format!("git {sub}"), w));
                }
                operands += 1;
                continue;
            };
            if ended || !l.starts_with('-') || l == "-" {
                operands += 1;
                continue;
            }
            if l == "--" {
                ended = true;
                continue;
            }
            let name = l.split_once('=').map_or(l.as_str(), |(n, _)| n);
            if listing {
                let known = GIT_LISTING.iter().any(|o| o.trim_end_matches('=') == name);
                if !known {
                    return Err(refuse(
                        Rule::Option,
                        format!(
                            "`git {sub} {name}` is not allowed: git {sub} may only list ({})",
                            GIT_LISTING.join(" ")
                        ),
                        &w.raw,
                    ));
                }
                lists |= matches!(name, "-l" | "--list");
                continue;
            }
            let refused = if name.starts_with("--") {
                // An abbreviation of a refused option is that option to git.
                name.len() > 2 && GIT_REFUSED.iter().any(|r| r.starts_with(name))
            } else {
                name.chars().skip(1).any(|c| GIT_REFUSED_SHORT.contains(&c))
            };
            if refused {
                return Err(refuse(
                    Rule::Option,
                    format!(
                        "`git {sub} {name}` runs a program, opens a pager, checks signatures with an external program or writes a file"
                    ),
                    &w.raw,
                ));
            }
        }
        if listing && operands > 0 && !lists {
            return Err(refuse(
                Rule::Operand,
                format!(
                    "`git {sub} NAME` creates a {sub}; only listing is allowed (`git {sub} --list PATTERN`)"
                ),
                &args[i].raw,
            ));
        }
        used.operands = operands;
        Ok(())
    }

    fn interpreter(&mut self, kind: Interpreter, name: &str, args: &[Word]) -> Result<(), ShellError> {
        let mut i = 0;
        let mut inline_program = false;
        while let Some(w) = args.get(i) {
            let Some(l) = w.literal() else {
                return Err(refuse(
                    Rule::Script,
                    format!(
                        "an argument of `{name}` before its script is not literal, so what it runs cannot be checked"
                    ),
                    &w.raw,
                ));
            };
            if l == "--" {
                i += 1;
                break;
            }
            if l == "-" {
                return Err(refuse(
                    Rule::Script,
                    format!("`{name} -` reads its program from stdin"),
                    &w.raw,
                ));
            }
            if !l.starts_with('-') {
                break;
            }
            let flags = &l[1..];
            let allowed = match kind {
                Interpreter::Bash if matches!(l.as_str(), "--noprofile" | "--norc" | "--posix") => true,
                Interpreter::Bash | Interpreter::Sh if flags.starts_with('-') => false,
                Interpreter::Bash => flags.chars().all(|c| {
                    inline_program |= c == 'c';
                    matches!(c, 'e' | 'u' | 'c' | 'o')
                }),
                Interpreter::Sh if flags.contains('c') => {
                    return Err(refuse(
                        Rule::Script,
                        format!(
                            "`{name} -c` runs its program in dash, whose grammar differs from bash's (the checker's): write `bash -c '…'`"
                        ),
                        &w.raw,
                    ));
                }
                Interpreter::Sh => flags.chars().all(|c| matches!(c, 'e' | 'u' | 'o')),
                Interpreter::Python => flags
                    .chars()
                    .all(|c| matches!(c, 'B' | 'E' | 'I' | 's' | 'S' | 'u' | 'q' | 'O')),
                Interpreter::Perl => flags.chars().all(|c| matches!(c, 'w' | 'W' | 'X' | 'T' | 't')),
                Interpreter::Node => false,
            };
            if !allowed {
                return Err(refuse(
                    Rule::Script,
                    format!(
                        "`{name} {l}` is not allowed: interpreters run only upstream .ai/ scripts, without options that read a program from elsewhere or load other code (-c, -e, -m, -M, -I, -i, -x, --rcfile, -r, --require …)"
                    ),
                    &w.raw,
                ));
            }
            if matches!(kind, Interpreter::Bash | Interpreter::Sh) && flags.contains('o') {
                i += 1;
                let option = args.get(i).and_then(Word::literal).unwrap_or_default();
                if !matches!(
                    option.as_str(),
                    "errexit" | "nounset" | "pipefail" | "xtrace" | "noglob"
                ) {
                    return Err(refuse(
                        Rule::Option,
                        format!("`{name} -o {option}` is not allowed"),
                        &w.raw,
                    ));
                }
            }
            i += 1;
        }
        let Some(first) = args.get(i) else {
            return Err(refuse(
                Rule::Script,
                format!(
                    "`{name}` without a script reads its program from stdin; give it an upstream .ai/ script"
                ),
                name,
            ));
        };
        let Some(text) = first.literal() else {
            return Err(refuse(
                Rule::Script,
                format!("the program given to `{name}` is not literal"),
                &first.raw,
            ));
        };
        if inline_program {
            // `bash -c 'literal'`: a program of its own, checked in turn; it starts where the
            // shell running it is, and its `cd`s end with it.
            return self.subprogram(&text);
        }
        self.upstream(&text, "run")?;
        self.script(&text);
        if kind == Interpreter::Perl {
            // perl's `<>` and two-argument `open` run a file name ending in `|` as a command: a
            // name from the pull request (a glob, a variable, a request argument) may be one.
            for w in args.iter().skip(i + 1) {
                match w.literal() {
                    Some(l) if !crate::args::is_magic_name(&l) => {}
                    _ => {
                        return Err(refuse(
                            Rule::Operand,
                            format!(
                                "an argument of `{name}`'s script that is not a plain literal file name: perl's `<>` and two-argument `open` run a name ending in `|` as a command, and the pull request chooses file names; pass literal names, or let the script read the changed-file list"
                            ),
                            &w.raw,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn wrapper(
        &mut self,
        kind: Wrapper,
        name: &str,
        args: &[Word],
        stdin_fed: bool,
    ) -> Result<(), ShellError> {
        let mut i = 0;
        let option_error =
            |l: &str, raw: &str| refuse(Rule::Option, format!("`{name} {l}` is not allowed"), raw);
        // GNU env reads options only before its first NAME=VALUE; a `--` after one is the
        // command's name.
        let mut assigned = false;
        while let Some(w) = args.get(i) {
            let Some(l) = w.literal() else {
                if w.may_be_option() {
                    return Err(option_position(name, w));
                }
                break;
            };
            if l == "--" && !assigned {
                i += 1;
                break;
            }
            match kind {
                Wrapper::Env => {
                    if l.starts_with('-') {
                        return Err(refuse(
                            Rule::Option,
                            format!(
                                "`env {l}` is not allowed (env may only set {} for a command)",
                                ENVIRONMENT_NAMES.join(", ")
                            ),
                            &w.raw,
                        ));
                    }
                    let Some((var, value)) = l.split_once('=') else {
                        break;
                    };
                    if super::is_environment_name(var) {
                        super::environment_value(var, Some(value), &w.raw)?;
                    }
                    if !super::is_environment_name(var) {
                        return Err(refuse(
                            Rule::Assignment,
                            format!(
                                "`env {var}=…` puts {var} in the command's environment, where tools find configuration and code; only {} may be set",
                                ENVIRONMENT_NAMES.join(", ")
                            ),
                            &w.raw,
                        ));
                    }
                    assigned = true;
                    i += 1;
                    continue;
                }
                _ if !l.starts_with('-') => break,
                Wrapper::Timeout => match l.as_str() {
                    "--preserve-status" | "--foreground" | "-v" | "--verbose" => {}
                    "-s" | "-k" => i += 1,
                    l if l.starts_with("--signal=") || l.starts_with("--kill-after=") => {}
                    l if (l.starts_with("-s") || l.starts_with("-k")) && l.len() > 2 => {}
                    _ => return Err(option_error(&l, &w.raw)),
                },
                Wrapper::Nice => match l.as_str() {
                    "-n" => i += 1,
                    l if l.starts_with("--adjustment=") => {}
                    l if l[1..].chars().all(|c| c.is_ascii_digit()) || l.starts_with("-n") => {}
                    _ => return Err(option_error(&l, &w.raw)),
                },
                Wrapper::Stdbuf => match l.as_str() {
                    "-i" | "-o" | "-e" => i += 1,
                    l if ["-i", "-o", "-e", "--input=", "--output=", "--error="]
                        .iter()
                        .any(|p| l.starts_with(p)) => {}
                    _ => return Err(option_error(&l, &w.raw)),
                },
            }
            i += 1;
        }
        if kind == Wrapper::Timeout {
            // The duration.
            if args.get(i).is_none() {
                return Err(refuse(
                    Rule::Operand,
                    "timeout needs a duration and a command",
                    name,
                ));
            }
            i += 1;
        }
        let Some(inner) = args.get(i) else {
            if kind == Wrapper::Env {
                return Ok(());
            }
            return Err(refuse(Rule::Operand, format!("`{name}` needs a command"), name));
        };
        let Some(command) = inner.literal() else {
            return Err(refuse(
                Rule::Expansion,
                format!("the command `{name}` runs is not a literal word; write it out"),
                &inner.raw,
            ));
        };
        self.run(&command, &args[i + 1..], stdin_fed, true)
    }
}

/// Whether `name` is a bash builtin or keyword (which a wrapper cannot run).
fn is_shell_builtin(name: &str) -> bool {
    matches!(
        name,
        "echo"
            | "printf"
            | "test"
            | "["
            | "true"
            | "false"
            | ":"
            | "cd"
            | "pwd"
            | "set"
            | "exit"
            | "return"
            | "shift"
            | "break"
            | "continue"
            | "wait"
            | "export"
            | "local"
            | "declare"
            | "typeset"
            | "readonly"
            | "unset"
            | "read"
            | "let"
            | "type"
            | "umask"
            | "getopts"
            | "source"
            | "."
            | "pushd"
            | "popd"
            | "command"
    ) || REFUSED_BUILTINS.contains(&name)
}

/// The value a declaration builtin's `name=value` argument assigns, as a word of its own: the
/// literal text after `=` (empty for a bare `name`), or the whole word when it expands
/// something (its sources are the word's).
fn declared_value(w: &Word, text: Option<&str>) -> Word {
    match text {
        Some(t) => Word::literal_text(t.split_once('=').map_or("", |(_, v)| v)),
        None => w.clone(),
    }
}

/// The variable a declaration builtin's `name` or `name=value` argument assigns: the literal
/// text before `=` (the value's sources are the word's own).
fn assignment_name(w: &Word, text: Option<&str>) -> Option<String> {
    if let Some(text) = text {
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        return Some(name.trim_end_matches('+').to_owned());
    }
    // The name must be in the literal text before the first expansion.
    let mut prefix = String::new();
    for seg in &w.segs {
        match seg {
            super::word::Seg::Quoted(t) | super::word::Seg::Unquoted(t) => {
                if let Some((name, _)) = t.split_once('=') {
                    prefix.push_str(name);
                    return Some(prefix.trim_end_matches('+').to_owned());
                }
                prefix.push_str(t);
            }
            super::word::Seg::Unknown
            | super::word::Seg::Var(_)
            | super::word::Seg::Number
            | super::word::Seg::Spread => return None,
        }
    }
    None
}

/// Checks a policy's narrowing of a built-in entry.
fn narrowed(entry: &Entry, name: &str, used: &Used) -> Result<(), ShellError> {
    let Some(narrow) = &entry.narrow else {
        return Ok(());
    };
    if let Some(o) = used.options.iter().find(|o| !narrow.options.contains(o)) {
        return Err(refuse(
            Rule::Option,
            format!("`{name} {o}` is not among the options the policy allows for {name}"),
            name,
        ));
    }
    if !narrow.subcommands.is_empty()
        && !used
            .subcommand
            .as_ref()
            .is_some_and(|s| narrow.subcommands.contains(s))
    {
        return Err(refuse(
            Rule::Option,
            format!("the policy allows only `{name} {}`", narrow.subcommands.join("|")),
            name,
        ));
    }
    if !narrow.operands && used.operands > 0 {
        return Err(refuse(
            Rule::Operand,
            format!("the policy allows `{name}` no operands"),
            name,
        ));
    }
    Ok(())
}

fn unknown_option(name: &str, option: &str, raw: &str) -> ShellError {
    refuse(
        Rule::Option,
        format!(
            "`{name} {option}` is not an option wrun allows for {name} (options that run programs, load code or write files are left out, and so is anything not listed; abbreviations included)"
        ),
        raw,
    )
}

fn option_position(name: &str, w: &Word) -> ShellError {
    if w.text().is_some_and(|t| t.starts_with('-')) {
        return refuse(
            Rule::Operand,
            format!(
                "an option of `{name}` holds a glob character (`*`, `?`, `[`) that bash would expand; quote it"
            ),
            &w.raw,
        );
    }
    refuse(
        Rule::Operand,
        format!(
            "a word of `{name}` that is not literal could be read as an option (a pull request chooses file names and file contents); put `--` before operands, or start the word with `./`"
        ),
        &w.raw,
    )
}

fn sed_option(option: &str, raw: &str) -> ShellError {
    let why = match option {
        "-i" | "--in-place" => " (it edits files in place)",
        "-f" | "--file" => " (the script would come from a file wrun cannot check)",
        _ => "",
    };
    refuse(Rule::Option, format!("`sed {option}` is not allowed{why}"), raw)
}
