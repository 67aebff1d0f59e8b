//! The allowlist: which commands a shell helper may run, each with the options it may take.
//!
//! A command is in the table or it does not run. Each entry is a grammar: the generic one
//! ([`Getopt`]) lists every option the command accepts here, and the tools whose arguments are
//! a language of their own (`find`'s expression, a `sed` script, a `jq` program, `git`'s
//! subcommands, interpreters, wrappers) have their own. What the tables leave out is what
//! executes, loads or evaluates code, writes files or reaches the network: `find -exec`,
//! `sed e`/`w`/`-i`/`-f`, `jq -f`/`-L`/`import`, `rg --pre`/`-z`/`--hostname-bin`,
//! `sort --compress-program`/`-o`, `diff --paginate`, `file -z`/`-m`, `date -s`, a second
//! `uniq` operand, `git -c`/`--exec-path`/aliases/`--open-files-in-pager`/`--output`. An
//! option that is not listed, an abbreviation of a long option included (GNU tools accept
//! `--compress` for `--compress-program`), is refused.
//!
//! The table is the operator's to narrow: a policy may remove entries, restrict a built-in
//! entry to a subset of its options (never widen it), and add commands of its own with the
//! options it allows ([`CommandSpec`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A command added to the table, or a built-in one narrowed, by a policy (`[[shell.commands]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The command's name as a shell helper writes it (`ruff`, `shellcheck`).
    pub name: String,
    /// The options it may take, written as on a command line: `-q` and `--quiet` take no value,
    /// `-o=` and `--output-format=` take one (as `-o VALUE`, `-oVALUE`, `--output-format VALUE`
    /// or `--output-format=VALUE`). For a built-in command, a subset of its own options.
    #[serde(default)]
    pub flags: Vec<String>,
    /// If not empty, the first operand must be one of these (a subcommand such as `check`).
    #[serde(default)]
    pub subcommands: Vec<String>,
    /// Whether operands (paths, patterns) may follow. Default: true.
    #[serde(default = "yes")]
    pub operands: bool,
}

fn yes() -> bool {
    true
}

/// How a command's arguments are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grammar {
    /// Options in the GNU `getopt_long` style, then operands.
    Getopt(Getopt),
    /// `find`: start points, then an expression of tests and actions.
    Find,
    /// `sed`: options, then a script checked command by command.
    Sed,
    /// `jq`: options, then a program that may not import modules.
    Jq,
    /// `git`: global options, then a read-only subcommand, run with the repository's
    /// configuration isolated.
    Git,
    /// An interpreter that may only run an upstream `.ai/` script.
    Interpreter(Interpreter),
    /// A command that runs another command given in its arguments.
    Wrapper(Wrapper),
}

/// Interpreters and the options each may take before its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interpreter {
    /// bash: `-e`, `-u`, `-o OPTION`, or `-c 'literal program'` (checked in turn).
    Bash,
    /// sh, dash: `-e`, `-u`, `-o OPTION`; no `-c` (a dash program is read with another grammar
    /// than the checker's: `$'…'` is no quote to dash).
    Sh,
    /// python3: `-B -E -I -s -S -u -q`.
    Python,
    /// perl: `-w -W -X -T -t`.
    Perl,
    /// node: no options.
    Node,
}

/// Commands that run another command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wrapper {
    /// `timeout [-s SIG] [-k DUR] [--preserve-status] [--foreground] [-v] DURATION CMD …`
    Timeout,
    /// `nice [-n N] CMD …`
    Nice,
    /// `env [NAME=VALUE…] [CMD …]` (no options: `-i`, `-u`, `-S`, `-C` are refused)
    Env,
    /// `stdbuf [-i MODE] [-o MODE] [-e MODE] CMD …`
    Stdbuf,
}

/// A `getopt_long` grammar.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Getopt {
    /// Single-letter options without a value.
    pub(crate) short: Vec<char>,
    /// Single-letter options with a value (`-n 5`, `-n5`).
    pub(crate) short_valued: Vec<char>,
    /// Single-letter options whose value is optional and only given in the same word (`-I`, `-Iseconds`).
    pub(crate) short_optional: Vec<char>,
    /// Long options without a value.
    pub(crate) long: Vec<String>,
    /// Long options with a value (`--lines 5`, `--lines=5`).
    pub(crate) long_valued: Vec<String>,
    /// Long options whose value is optional and only given after `=` (`--color[=WHEN]`).
    pub(crate) long_optional: Vec<String>,
    /// `-NUM` is an option (`head -5`, `grep -3`).
    pub(crate) numeric: bool,
    /// A word starting with `+` may be read as an option (`tail +5`, the obsolete form): it
    /// is refused, and a word that is not literal needs `--` before it.
    pub(crate) plus: bool,
    /// The most operands; `None`: any number.
    pub(crate) max_operands: Option<usize>,
    /// If not empty, the first operand must be one of these.
    pub(crate) subcommands: Vec<String>,
}

impl Getopt {
    /// Parses a list of option tokens as `CommandSpec::flags` and the built-in table write them:
    /// `-x`, `-x=`, `--long`, `--long=`, `-x?` and `--long?` (a value only in the same word),
    /// `-#` (numeric options).
    pub(crate) fn parse(tokens: &[&str]) -> Result<Self, String> {
        let mut g = Getopt::default();
        for &token in tokens {
            let bad =
                || format!("{token:?} is not an option as the table writes one (-x, -x=, --long, --long=)");
            if token == "+#" {
                g.plus = true;
                continue;
            }
            if token == "-#" {
                g.numeric = true;
            } else if let Some(long) = token.strip_prefix("--") {
                let (name, kind) = match long.strip_suffix('=') {
                    Some(name) => (name, 1),
                    None => match long.strip_suffix('?') {
                        Some(name) => (name, 2),
                        None => (long, 0),
                    },
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    return Err(bad());
                }
                [&mut g.long, &mut g.long_valued, &mut g.long_optional][kind].push(name.to_owned());
            } else if let Some(short) = token.strip_prefix('-') {
                let (name, kind) = match short.strip_suffix('=') {
                    Some(name) => (name, 1),
                    None => match short.strip_suffix('?') {
                        Some(name) => (name, 2),
                        None => (short, 0),
                    },
                };
                let mut chars = name.chars();
                let (Some(c), None) = (chars.next(), chars.next()) else {
                    return Err(bad());
                };
                if !c.is_ascii_alphanumeric() {
                    return Err(bad());
                }
                [&mut g.short, &mut g.short_valued, &mut g.short_optional][kind].push(c);
            } else {
                return Err(bad());
            }
        }
        Ok(g)
    }

    /// Every option name this grammar accepts, as written on a command line.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .short
            .iter()
            .chain(&self.short_valued)
            .chain(&self.short_optional)
            .map(|c| format!("-{c}"))
            .collect();
        out.extend(
            self.long
                .iter()
                .chain(&self.long_valued)
                .chain(&self.long_optional)
                .map(|l| format!("--{l}")),
        );
        out
    }
}

/// A policy's narrowing of a built-in entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Narrow {
    /// Option names (without `=`) that may be used; empty: none.
    pub(crate) options: Vec<String>,
    /// If not empty, the subcommands that may be used.
    pub(crate) subcommands: Vec<String>,
    /// Whether operands may be given.
    pub(crate) operands: bool,
}

/// One command of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) grammar: Grammar,
    /// Set when a policy narrowed a built-in entry.
    pub(crate) narrow: Option<Narrow>,
    /// Whether the entry came from the policy rather than wrun's table.
    pub(crate) from_policy: bool,
}

/// The commands a shell helper may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    entries: BTreeMap<String, Entry>,
}

impl Default for Table {
    fn default() -> Self {
        Self::builtin()
    }
}

/// The generic entries: `(name, option tokens)`. Operand limits are marked `max=N`.
///
/// Every option listed is one the tool on Debian 12 accepts and that only changes what is read
/// or how it is printed.
const GETOPT: &[(&str, &str)] = &[
    (
        "cat",
        "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting",
    ),
    (
        "head",
        "-# +# -q -v -z -c= -n= --quiet --silent --verbose --zero-terminated --bytes= --lines=",
    ),
    (
        "tail",
        "-# +# -q -v -z -c= -n= --quiet --silent --verbose --zero-terminated --bytes= --lines=",
    ),
    (
        "wc",
        "-c -m -l -L -w --bytes --chars --lines --max-line-length --words --files0-from= --total=",
    ),
    ("grep", GREP),
    ("egrep", GREP),
    ("fgrep", GREP),
    ("rg", RG),
    (
        "sort",
        "-b -d -f -g -i -M -h -n -R -r -V -c -C -m -s -u -z -k= -t= -S= -T= \
              --ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort \
              --ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort \
              --reverse --version-sort --merge --stable --unique --zero-terminated --debug \
              --check? --sort= --key= --field-separator= --buffer-size= --temporary-directory= \
              --parallel= --batch-size= --files0-from= --random-source=",
    ),
    (
        "uniq",
        "max=1 -c -d -D -i -u -z -f= -s= -w= --count --repeated --ignore-case --unique \
              --zero-terminated --skip-fields= --skip-chars= --check-chars= --all-repeated? --group?",
    ),
    (
        "cut",
        "-s -n -z -b= -c= -d= -f= --complement --only-delimited --zero-terminated --bytes= \
             --characters= --delimiter= --fields= --output-delimiter=",
    ),
    (
        "tr",
        "-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1",
    ),
    (
        "diff",
        "-q -s -y -i -E -Z -b -w -B -a -T -t -u -c -e -n -N -r -p -d -x= -X= -S= -I= -F= \
              -C= -U= -W= -D= --normal --brief --report-identical-files --ed --rcs --side-by-side \
              --left-column --suppress-common-lines --show-c-function --expand-tabs --initial-tab \
              --suppress-blank-empty --new-file --unidirectional-new-file --ignore-case \
              --ignore-tab-expansion --ignore-trailing-space --ignore-space-change \
              --ignore-all-space --ignore-blank-lines --text --strip-trailing-cr --recursive \
              --no-dereference --ignore-file-name-case --no-ignore-file-name-case --minimal \
              --speed-large-files --ignore-matching-lines= --show-function-line= --label= \
              --width= --tabsize= --exclude= --exclude-from= --starting-file= --from-file= \
              --to-file= --ifdef= --line-format= --old-line-format= --new-line-format= \
              --unchanged-line-format= --horizon-lines= --palette= --color? --context? --unified?",
    ),
    (
        "cmp",
        "-b -l -s -i= -n= --print-bytes --verbose --quiet --silent --ignore-initial= --bytes=",
    ),
    (
        "comm",
        "-1 -2 -3 -z --check-order --nocheck-order --total --zero-terminated --output-delimiter=",
    ),
    ("paste", "-s -z -d= --serial --zero-terminated --delimiters="),
    (
        "join",
        "-i -z -a= -e= -o= -t= -v= -1= -2= --ignore-case --check-order --nocheck-order \
              --header --zero-terminated",
    ),
    (
        "nl",
        "-p -b= -d= -f= -h= -i= -l= -n= -s= -v= -w= --no-renumber --body-numbering= \
            --section-delimiter= --footer-numbering= --header-numbering= --line-increment= \
            --join-blank-lines= --number-format= --number-separator= --starting-line-number= \
            --number-width=",
    ),
    (
        "column",
        "-t -x -n -e -J -L -c= -s= -o= -N= -R= -H= -E= -W= --table --fillrows \
                --keep-empty-lines --json --table-noextreme --output-width= --separator= \
                --output-separator= --table-columns= --table-right= --table-hide= \
                --table-noextreme= --table-wrap= --table-name=",
    ),
    (
        "od",
        "-b -c -d -f -i -l -o -s -v -x -A= -j= -N= -S= -t= -w= --address-radix= \
            --skip-bytes= --read-bytes= --strings? --format= --output-duplicates --width? --traditional",
    ),
    (
        "hexdump",
        "-b -c -C -d -o -v -x -e= -n= -s= --one-byte-octal --one-byte-char --canonical \
                 --two-bytes-decimal --two-bytes-octal --no-squeezing --two-bytes-hex --format= \
                 --length= --skip=",
    ),
    ("md5sum", SUMS),
    ("sha1sum", SUMS),
    ("sha224sum", SUMS),
    ("sha256sum", SUMS),
    ("sha384sum", SUMS),
    ("sha512sum", SUMS),
    (
        "b2sum",
        "-b -c -t -z -l= --binary --check --tag --text --zero --ignore-missing --quiet \
               --status --strict --warn --length=",
    ),
    ("base64", "-d -i -w= --decode --ignore-garbage --wrap="),
    ("basename", "-a -z -s= --multiple --zero --suffix="),
    ("dirname", "-z --zero"),
    (
        "realpath",
        "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical \
                  --physical --quiet --strip --no-symlinks --zero --relative-to= --relative-base=",
    ),
    (
        "readlink",
        "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing \
                  --canonicalize-missing --no-newline --quiet --silent --verbose --zero",
    ),
    (
        "stat",
        "-L -f -t -c= --dereference --file-system --terse --format= --printf= --cached=",
    ),
    (
        "file",
        "-b -L -h -i -k -N -n -r -s -0 -E -F= -e= -P= --brief --dereference --no-dereference \
              --mime --mime-type --mime-encoding --keep-going --no-pad --no-buffer --raw \
              --special-files --print0 --extension --apple --separator= --exclude= --exclude-quiet= \
              --parameter=",
    ),
    (
        "du",
        "-0 -a -b -c -D -h -H -k -l -L -m -P -s -S -x -d= -B= -t= -X= --null --all \
            --apparent-size --bytes --total --dereference-args --human-readable --inodes \
            --dereference --count-links --no-dereference --summarize --separate-dirs --si \
            --one-file-system --max-depth= --block-size= --threshold= --exclude= --exclude-from= \
            --files0-from= --time-style= --time?",
    ),
    (
        "ls",
        "-a -A -b -B -c -C -d -D -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s \
            -S -t -u -U -v -x -X -Z -1 -I= -T= -w= --all --almost-all --author --escape \
            --ignore-backups --directory --dired --file-type --full-time --no-group \
            --human-readable --si --dereference-command-line \
            --dereference-command-line-symlink-to-dir --inode --kibibytes --dereference \
            --numeric-uid-gid --literal --hide-control-chars --show-control-chars --quote-name \
            --recursive --reverse --size --group-directories-first --context --zero \
            --block-size= --format= --hide= --ignore= --indicator-style= --quoting-style= \
            --sort= --time= --time-style= --tabsize= --width= --color? --classify? --hyperlink?",
    ),
    (
        "date",
        "-u -R -d= -r= -I? --utc --universal --rfc-email --debug --date= --reference= \
              --iso-8601? --rfc-3339=",
    ),
    ("seq", "-# -w -f= -s= --equal-width --format= --separator="),
    (
        "uname",
        "max=0 -a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release \
               --kernel-version --machine --processor --hardware-platform --operating-system",
    ),
    (
        "id",
        "-a -g -G -n -r -u -z --group --groups --name --real --user --zero",
    ),
    ("whoami", "max=0"),
    ("which", "-a"),
    ("tac", "-b -r -s= --before --regex --separator="),
    ("rev", ""),
    ("fold", "-b -s -w= --bytes --spaces --width="),
    ("expand", "-i -t= --initial --tabs="),
    ("unexpand", "-a -t= --all --first-only --tabs="),
    (
        "fmt",
        "-# -c -s -t -u -p= -w= -g= --crown-margin --split-only --tagged-paragraph \
             --uniform-spacing --prefix= --width= --goal=",
    ),
];

const GREP: &str = "-# -E -F -G -P -i -y -v -w -x -c -L -l -o -q -s -b -H -h -n -T -Z -z -a -I -r \
    -R -U -V -e= -f= -m= -A= -B= -C= -d= -D= --extended-regexp --fixed-strings --basic-regexp \
    --perl-regexp --ignore-case --no-ignore-case --invert-match --word-regexp --line-regexp \
    --count --files-with-matches --files-without-match --only-matching --quiet --silent \
    --no-messages --byte-offset --with-filename --no-filename --line-number --initial-tab \
    --null --null-data --text --recursive --dereference-recursive --line-buffered --binary \
    --no-group-separator --regexp= --file= --max-count= --label= --after-context= \
    --before-context= --context= --binary-files= --devices= --directories= --exclude= \
    --exclude-from= --exclude-dir= --include= --group-separator= --color? --colour?";

/// ripgrep 14–15 without `--pre`, `--pre-glob`, `-z`/`--search-zip` (each runs a program per
/// file) and `--hostname-bin` (runs a program).
const RG: &str = "-# -s -F -i -v -x -U -S -a -w -L -u -b -H -I -n -N -0 -o -p -q -c -l -V -h -P \
    -e= -f= -g= -t= -T= -A= -B= -C= -m= -M= -j= -r= -E= -d= \
    --case-sensitive --crlf --no-crlf --fixed-strings --no-fixed-strings --ignore-case \
    --invert-match --no-invert-match --line-regexp --mmap --no-mmap --multiline --no-multiline \
    --multiline-dotall --no-multiline-dotall --no-unicode --unicode --null-data --pcre2 \
    --no-pcre2 --smart-case --stop-on-nonmatch --text --no-text --word-regexp \
    --auto-hybrid-regex --no-auto-hybrid-regex --no-pcre2-unicode --pcre2-unicode --binary \
    --no-binary --follow --no-follow --glob-case-insensitive --no-glob-case-insensitive \
    --ignore-file-case-insensitive --no-ignore-file-case-insensitive --no-ignore --ignore \
    --no-ignore-dot --ignore-dot --no-ignore-exclude --ignore-exclude --no-ignore-files \
    --ignore-files --no-ignore-global --ignore-global --no-ignore-parent --ignore-parent \
    --no-ignore-vcs --ignore-vcs --no-require-git --require-git --one-file-system \
    --no-one-file-system --unrestricted --block-buffered --no-block-buffered --byte-offset \
    --no-byte-offset --vimgrep --column --no-column --no-context-separator --heading \
    --no-heading --include-zero --no-include-zero --line-buffered --no-line-buffered \
    --line-number --no-line-number --max-columns-preview --no-max-columns-preview --null \
    --files --only-matching --passthru --pretty --quiet --trim --no-trim --with-filename \
    --no-filename --sort-files --no-sort-files --count --count-matches --files-with-matches \
    --files-without-match --json --no-json --debug --no-ignore-messages --ignore-messages \
    --no-messages --messages --stats --no-stats --trace --no-config --pcre2-version \
    --type-list --help --version --invert-match \
    --regexp= --file= --glob= --iglob= --type= --type-not= --type-add= --type-clear= \
    --after-context= --before-context= --context= --max-count= --max-columns= --threads= \
    --replace= --encoding= --max-depth= --maxdepth= --dfa-size-limit= --engine= \
    --regex-size-limit= --ignore-file= --max-filesize= --color= --colors= \
    --context-separator= --field-context-separator= --field-match-separator= \
    --hyperlink-format= --path-separator= --sort= --sortr= --generate=";

const SUMS: &str = "-b -c -t -z --binary --check --tag --text --zero --ignore-missing --quiet \
    --status --strict --warn";

impl Table {
    /// wrun's built-in table.
    pub fn builtin() -> Self {
        let mut entries = BTreeMap::new();
        for (name, tokens) in GETOPT {
            let mut max = None;
            let words: Vec<&str> = tokens
                .split_whitespace()
                .filter(|t| match t.strip_prefix("max=") {
                    Some(n) => {
                        max = n.parse().ok();
                        false
                    }
                    None => true,
                })
                .collect();
            let mut g = Getopt::parse(&words).unwrap_or_else(|e| unreachable!("built-in table: {name}: {e}"));
            g.max_operands = max;
            entries.insert((*name).to_owned(), Entry::builtin(Grammar::Getopt(g)));
        }
        for (name, grammar) in [
            ("find", Grammar::Find),
            ("sed", Grammar::Sed),
            ("jq", Grammar::Jq),
            ("git", Grammar::Git),
            ("bash", Grammar::Interpreter(Interpreter::Bash)),
            ("sh", Grammar::Interpreter(Interpreter::Sh)),
            ("dash", Grammar::Interpreter(Interpreter::Sh)),
            ("python3", Grammar::Interpreter(Interpreter::Python)),
            ("perl", Grammar::Interpreter(Interpreter::Perl)),
            ("node", Grammar::Interpreter(Interpreter::Node)),
            ("timeout", Grammar::Wrapper(Wrapper::Timeout)),
            ("nice", Grammar::Wrapper(Wrapper::Nice)),
            ("env", Grammar::Wrapper(Wrapper::Env)),
            ("stdbuf", Grammar::Wrapper(Wrapper::Stdbuf)),
        ] {
            entries.insert(name.to_owned(), Entry::builtin(grammar));
        }
        Self { entries }
    }

    /// The built-in table with a policy's changes: `remove` drops entries; each of `commands`
    /// narrows the built-in entry of its name (its options must be a subset of the entry's) or
    /// adds a command.
    pub fn with_policy(remove: &[String], commands: &[CommandSpec]) -> Result<Self, String> {
        let mut table = Self::builtin();
        for name in remove {
            if table.entries.remove(name).is_none() {
                return Err(format!(
                    "[shell] remove = {name:?}: not a command of wrun's table ({})",
                    table.names().join(", ")
                ));
            }
        }
        for spec in commands {
            let name = spec.name.as_str();
            if name.is_empty() || name.contains(['/', ' ', '=']) || name.starts_with('-') {
                return Err(format!(
                    "[[shell.commands]] name {name:?}: a command name, without a directory"
                ));
            }
            let tokens: Vec<&str> = spec.flags.iter().map(String::as_str).collect();
            let mut grammar =
                Getopt::parse(&tokens).map_err(|e| format!("[[shell.commands]] {name}: {e}"))?;
            match table.entries.get_mut(name) {
                Some(entry) if !entry.from_policy => {
                    let allowed = entry.option_names();
                    let options: Vec<String> = grammar.names();
                    if let Some(extra) = options.iter().find(|o| !allowed.contains(o)) {
                        return Err(format!(
                            "[[shell.commands]] {name}: {extra} is not one of the built-in entry's options; a policy may narrow wrun's table, not widen it"
                        ));
                    }
                    if entry.narrow.is_some() {
                        return Err(format!("[[shell.commands]] {name} is listed twice"));
                    }
                    entry.narrow = Some(Narrow {
                        options,
                        subcommands: spec.subcommands.clone(),
                        operands: spec.operands,
                    });
                }
                Some(_) => return Err(format!("[[shell.commands]] {name} is listed twice")),
                None => {
                    if !spec.operands {
                        grammar.max_operands = Some(if spec.subcommands.is_empty() { 0 } else { 1 });
                    }
                    grammar.subcommands = spec.subcommands.clone();
                    table.entries.insert(
                        name.to_owned(),
                        Entry {
                            grammar: Grammar::Getopt(grammar),
                            narrow: None,
                            from_policy: true,
                        },
                    );
                }
            }
        }
        Ok(table)
    }

    /// The entry for `name`, if it may run.
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// The names in the table.
    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }
}

impl Entry {
    fn builtin(grammar: Grammar) -> Self {
        Self {
            grammar,
            narrow: None,
            from_policy: false,
        }
    }

    /// The option names the entry's grammar knows (for checking a policy's narrowing).
    fn option_names(&self) -> Vec<String> {
        match &self.grammar {
            Grammar::Getopt(g) => g.names(),
            Grammar::Find => FIND_TESTS
                .iter()
                .chain(FIND_VALUED)
                .chain(FIND_OPERATORS)
                .map(|s| (*s).to_owned())
                .collect(),
            Grammar::Sed => SED_OPTIONS.iter().map(|(o, _)| (*o).to_owned()).collect(),
            Grammar::Jq => JQ_OPTIONS.iter().map(|(o, _)| (*o).to_owned()).collect(),
            Grammar::Git => GIT_GLOBAL.iter().map(|s| (*s).to_owned()).collect(),
            Grammar::Interpreter(_) | Grammar::Wrapper(_) => Vec::new(),
        }
    }
}

/// `find` tests, actions and options that take no argument.
pub(crate) const FIND_TESTS: &[&str] = &[
    "-depth",
    "-d",
    "-xdev",
    "-mount",
    "-noleaf",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-daystart",
    "-follow",
    "-empty",
    "-executable",
    "-readable",
    "-writable",
    "-nouser",
    "-nogroup",
    "-true",
    "-false",
    "-prune",
    "-quit",
    "-print",
    "-print0",
    "-ls",
];

/// `find` tests and options that take one argument.
pub(crate) const FIND_VALUED: &[&str] = &[
    "-maxdepth",
    "-mindepth",
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-lname",
    "-ilname",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-newer",
    "-anewer",
    "-cnewer",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-links",
    "-inum",
    "-samefile",
    "-used",
    "-fstype",
    "-printf",
    "-newermt",
    "-newerat",
    "-newerct",
    "-newermm",
    "-neweraa",
    "-newercc",
    "-newerma",
    "-newermc",
    "-neweram",
    "-newerac",
    "-newerca",
    "-newercm",
];

/// `find` operators.
pub(crate) const FIND_OPERATORS: &[&str] = &["(", ")", "!", ",", "-not", "-a", "-and", "-o", "-or"];

/// `find` primaries that run programs, write files or delete, with what to do instead.
pub(crate) const FIND_REFUSED: &[(&str, &str)] = &[
    ("-exec", "runs a command for each file"),
    ("-execdir", "runs a command for each file"),
    ("-ok", "runs a command for each file"),
    ("-okdir", "runs a command for each file"),
    ("-fprint", "writes a file"),
    ("-fprint0", "writes a file"),
    ("-fprintf", "writes a file"),
    ("-fls", "writes a file"),
    ("-delete", "deletes files"),
];

/// `sed` options: `(option, takes a value)`. Not `-i`/`--in-place` (writes files), `-f`/`--file`
/// (the script would come from a file, not from the program wrun checked).
pub(crate) const SED_OPTIONS: &[(&str, bool)] = &[
    ("-n", false),
    ("--quiet", false),
    ("--silent", false),
    ("-E", false),
    ("-r", false),
    ("--regexp-extended", false),
    ("-s", false),
    ("--separate", false),
    ("-z", false),
    ("--null-data", false),
    ("-u", false),
    ("--unbuffered", false),
    ("--posix", false),
    ("--debug", false),
    ("--sandbox", false),
    ("-l", true),
    ("--line-length", true),
    ("-e", true),
    ("--expression", true),
];

/// `jq` options: `(option, values it takes)`. Not `-f`/`--from-file` (the program would come
/// from a file) or `-L` (a module search path).
pub(crate) const JQ_OPTIONS: &[(&str, usize)] = &[
    ("-n", 0),
    ("--null-input", 0),
    ("-r", 0),
    ("--raw-output", 0),
    ("--raw-output0", 0),
    ("-j", 0),
    ("--join-output", 0),
    ("-a", 0),
    ("--ascii-output", 0),
    ("-c", 0),
    ("--compact-output", 0),
    ("-s", 0),
    ("--slurp", 0),
    ("-S", 0),
    ("--sort-keys", 0),
    ("-e", 0),
    ("--exit-status", 0),
    ("-C", 0),
    ("--color-output", 0),
    ("-M", 0),
    ("--monochrome-output", 0),
    ("-R", 0),
    ("--raw-input", 0),
    ("--tab", 0),
    ("--seq", 0),
    ("--stream", 0),
    ("--stream-errors", 0),
    ("--indent", 1),
    ("--arg", 2),
    ("--argjson", 2),
    ("--slurpfile", 2),
    ("--rawfile", 2),
    ("--args", 0),
    ("--jsonargs", 0),
];

/// `git` options before the subcommand. Not `-c`/`--config-env` (configuration on the command
/// line), `-C`/`--git-dir`/`--work-tree`/`--namespace`/`--bare` (another repository, whose
/// configuration would be read), `--exec-path` (where git finds its programs), `-p`/`--paginate`
/// (a pager program).
pub(crate) const GIT_GLOBAL: &[&str] = &[
    "--no-pager",
    "-P",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-replace-objects",
];

/// Read-only `git` subcommands. `branch` and `tag` only list (see [`GIT_LISTING`]).
pub(crate) const GIT_SUBCOMMANDS: &[&str] = &[
    "status",
    "log",
    "show",
    "diff",
    "diff-tree",
    "diff-index",
    "diff-files",
    "blame",
    "annotate",
    "shortlog",
    "ls-files",
    "ls-tree",
    "cat-file",
    "rev-parse",
    "rev-list",
    "describe",
    "merge-base",
    "grep",
    "name-rev",
    "for-each-ref",
    "show-ref",
    "count-objects",
    "branch",
    "tag",
    "whatchanged",
    "cherry",
    "range-diff",
    "check-ignore",
    "check-attr",
    "var",
];

/// Options of `git branch` and `git tag` that only list.
pub(crate) const GIT_LISTING: &[&str] = &[
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-l",
    "--list",
    "-v",
    "-vv",
    "--verbose",
    "-n",
    "-i",
    "--ignore-case",
    "--no-column",
    "--no-color",
    "--show-current",
    "--contains=",
    "--no-contains=",
    "--merged=",
    "--no-merged=",
    "--points-at=",
    "--sort=",
    "--format=",
    "--color=",
    "--column=",
];

/// Options of git subcommands that run programs, open a pager, check signatures with an
/// external program or write files. Git's option space is large, so inside the allowed
/// subcommands this list is defence in depth: what closes the class is that git runs with the
/// repository's configuration replaced (no drivers, no external diff, no fsmonitor, no hooks).
/// git's option parser accepts any unambiguous abbreviation of a long option (`--open` for
/// `--open-files-in-pager`), so an option is refused when it is one of these or a prefix of one.
pub(crate) const GIT_REFUSED: &[&str] = &[
    "--open-files-in-pager",
    "--ext-diff",
    "--textconv",
    "--filters",
    "--show-signature",
    "--output",
    "--output-directory",
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "--paginate",
    "--help",
    "--config",
    "--contents",
];

/// Short options of git subcommands refused wherever they appear in a cluster: `-O` (`git grep
/// -O<pager>` runs a program; `git diff -O<file>` reads an order file).
pub(crate) const GIT_REFUSED_SHORT: &[char] = &['O'];
