//! Guards around the parse: what the parser is never given (oversized, deeply nested or
//! here-document-laden text, control characters), and paths no word may reach.

use super::word::Word;
use super::{Rule, ShellError};

/// The longest program checked.
pub const MAX_PROGRAM_BYTES: usize = 16 * 1024;

/// The deepest bracket nesting checked. The parser backtracks exponentially on unclosed
/// brackets (24 unclosed `(` take seconds, 30 take minutes; found by the shell_check fuzz
/// target), so the depth is capped where that cost stays in the microseconds.
const MAX_NESTING: usize = 12;

/// The most `((` in a program: each is an arithmetic-or-subshell ambiguity the parser
/// backtracks over.
const MAX_DOUBLE_PARENS: usize = 6;

/// Checks what can be checked before parsing.
pub(crate) fn before_parse(program: &str) -> Result<(), ShellError> {
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(ShellError::new(
            Rule::Size,
            format!("longer than {MAX_PROGRAM_BYTES} bytes; put long logic in an upstream .ai/ script"),
            None,
        ));
    }
    if program.contains("<<") {
        return Err(here_documents());
    }
    if nesting(program) > MAX_NESTING {
        return Err(ShellError::new(
            Rule::Size,
            format!("brackets nested deeper than {MAX_NESTING} levels"),
            None,
        ));
    }
    if program.matches("((").count() > MAX_DOUBLE_PARENS {
        return Err(ShellError::new(
            Rule::Size,
            format!("more than {MAX_DOUBLE_PARENS} `((`; put arithmetic in an upstream .ai/ script"),
            None,
        ));
    }
    characters(program)
}

/// Control characters other than newline and tab: NUL ends a C string early, a carriage
/// return hides text on a terminal, and the parser's here-document handling blows up on some
/// (found by the fuzz target).
pub(crate) fn characters(text: &str) -> Result<(), ShellError> {
    if let Some(c) = text.chars().find(|c| c.is_control() && !matches!(c, '\n' | '\t')) {
        return Err(ShellError::new(
            Rule::Parse,
            format!("the program contains the control character {c:?}"),
            None,
        ));
    }
    Ok(())
}

/// Here-documents and here-strings are refused outright: they are how code reaches a shell's
/// stdin, and the parser's handling of them can take gigabytes on hostile input (found by the
/// fuzz target).
pub(crate) fn here_documents() -> ShellError {
    ShellError::new(
        Rule::Construct,
        "here-documents and here-strings (`<<`, `<<<`) are not allowed in helper commands; put the text in an upstream .ai/ file",
        None,
    )
}

/// How deeply `text` nests brackets, for the parser's sake: the most brackets open at once,
/// each of `()`, `{}` and `[]` closed only by its own kind and a `[` counting three (quotes
/// ignored: an over-count only refuses more), or the number of `(` divided by four, whichever
/// is larger. With the cap of 12 the parser's worst case measured stays in the milliseconds.
fn nesting(text: &str) -> usize {
    let mut depth = [0usize; 3];
    let mut max = 0;
    let mut open_parens = 0;
    for b in text.bytes() {
        let (kind, opens) = match b {
            b'(' => (0, true),
            b')' => (0, false),
            b'{' => (1, true),
            b'}' => (1, false),
            b'[' => (2, true),
            b']' => (2, false),
            _ => continue,
        };
        if opens {
            depth[kind] += 1;
            // Subscripts cost the parser most: `${a[${a[…` is exponential even when closed.
            let weight = depth[0] + depth[1] + 3 * depth[2];
            max = max.max(weight);
            open_parens += usize::from(kind == 0);
        } else {
            depth[kind] = depth[kind].saturating_sub(1);
        }
    }
    max.max(open_parens / 4)
}

/// Paths that reach another process's environment or bash's network pseudo-devices, as globs
/// whose `*` matches anything: absolute or relative, through a pid, `self`, `thread-self` or a
/// task directory.
const SENSITIVE: &[&str] = &[
    "/proc",
    "/proc/*",
    "*/../proc",
    "*/../proc/*",
    "../proc",
    "../proc/*",
    "*proc/*environ",
    "*dev/tcp/*",
    "*dev/udp/*",
];

/// Refuses a word that could expand to a path reaching a process environment (`/proc/*/environ`)
/// or bash's `/dev/tcp`, `/dev/udp`: after quote removal, with globs (`/proc/self/envir*`,
/// `/pr?c/*/environ`), brace expansions and expansions (`"/dev/tc${e}p/h/1"`) matching what
/// they could match. A shape without a literal letter or digit (`"$dir/$file"`, `*`) is made of
/// values from outside or the worktree's file names, not a path the program names: not refused
/// here.
/// A literal `environ` on its own is refused too (after `cd /proc/1`). A variable the program
/// assigns only literals stands for each of them (`a=/pr; b=oc/self/environ; cat "$a$b"`).
pub(crate) fn path(word: &Word, values: &super::word::Values) -> Result<(), ShellError> {
    use super::word::{Set, Tok, intersects, pattern_tokens};
    for shape in word.shapes(values) {
        if !shape
            .iter()
            .any(|t| matches!(t, Tok::One(Set::Char(c)) if c.is_alphanumeric()))
        {
            continue;
        }
        let literal: Option<String> = shape
            .iter()
            .map(|t| match t {
                Tok::One(Set::Char(c)) => Some(*c),
                _ => None,
            })
            .collect();
        let bare_environ = literal
            .as_deref()
            .is_some_and(|l| l.trim_end_matches('/').rsplit('/').next() == Some("environ"));
        if bare_environ || SENSITIVE.iter().any(|p| intersects(&shape, &pattern_tokens(p))) {
            return Err(ShellError::new(
                Rule::Path,
                "the word could reach /proc (processes' environments and memory) or the network (/dev/tcp, /dev/udp)",
                Some(&word.raw),
            ));
        }
    }
    Ok(())
}
