//! Words as bash expands them: quote removal, which parts are literal and which are only known
//! at run time, and the places inside a word where bash evaluates text as code (array
//! subscripts, substring offsets, indirect expansion, `$(( ))`, `${x@P}`).
//!
//! Every command substitution inside a word is checked as a program of its own. Every variable
//! whose value bash would evaluate is recorded ([`Checker::eval_ref`]); after the walk, each must
//! have been assigned only literal values in the program (see `walk`).

use brush_parser::word::{
    self as bw, Parameter, ParameterExpr, ParameterTransformOp, SpecialParameter, WordPiece,
    WordPieceWithSource,
};

use super::walk::Checker;
use super::{Rule, ShellError};

/// One part of a word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// Quoted or escaped text: taken as it is.
    Quoted(String),
    /// Unquoted text: subject to globbing and brace expansion.
    Unquoted(String),
    /// An expansion whose value is known only at run time.
    Unknown,
    /// A plain variable (`$x`, `${x}`): known only at run time, but the program's own
    /// assignments to it may tell what it can hold.
    Var(String),
    /// A number bash computes (`$(( ))`, `$#`, `${#x}`).
    Number,
    /// An expansion that makes several words, or none (`"$@"`, `"${a[@]}"`): each from
    /// outside.
    Spread,
}

/// What each variable may hold, from the program's literal assignments: `None` when some
/// value is not a literal (or there are too many).
pub(crate) type Values = std::collections::HashMap<String, Option<Vec<String>>>;

/// A word of the program, analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// As written.
    pub(crate) raw: String,
    /// Its parts.
    pub(crate) segs: Vec<Seg>,
    /// Whether an expansion in it is unquoted (its value would be split and globbed).
    pub(crate) unquoted_expansion: bool,
    /// The variables it expands (whose values it carries).
    pub(crate) vars: Vec<String>,
    /// Whether it carries text from outside the program: command output, request arguments,
    /// a home directory, an indirect expansion.
    pub(crate) opaque: bool,
    /// Whether an expansion in it yields several words (`"$@"`, `"${a[@]}"`).
    pub(crate) multi: bool,
}

impl Word {
    /// A word with this fixed text (a file name inside a sed script, say).
    pub(crate) fn literal_text(text: &str) -> Self {
        Self {
            raw: text.to_owned(),
            segs: vec![Seg::Quoted(text.to_owned())],
            unquoted_expansion: false,
            vars: Vec::new(),
            opaque: false,
            multi: false,
        }
    }

    /// Whether bash may make several words of it: a glob, a brace expansion, `"$@"`.
    pub(crate) fn may_split(&self) -> bool {
        self.multi || self.has_glob()
    }

    /// The word's one value, if bash expands it to exactly this text: no expansion, no glob,
    /// no brace expansion.
    pub(crate) fn literal(&self) -> Option<String> {
        if self.has_glob() {
            return None;
        }
        self.text()
    }

    /// The text after quote removal if the word has no expansion (globs kept as written): its
    /// value where bash neither globs nor splits (the right side of an assignment).
    pub(crate) fn text(&self) -> Option<String> {
        let mut out = String::new();
        for seg in &self.segs {
            match seg {
                Seg::Quoted(s) | Seg::Unquoted(s) => out.push_str(s),
                Seg::Unknown | Seg::Var(_) | Seg::Number | Seg::Spread => return None,
            }
        }
        Some(out)
    }

    /// Like [`Word::text`], with each computed number standing as `0`: the value's shape when
    /// it is literal text and numbers.
    pub(crate) fn numeric_text(&self) -> Option<String> {
        let mut out = String::new();
        for seg in &self.segs {
            match seg {
                Seg::Quoted(s) | Seg::Unquoted(s) => out.push_str(s),
                Seg::Number => out.push('0'),
                Seg::Unknown | Seg::Var(_) | Seg::Spread => return None,
            }
        }
        Some(out)
    }

    /// Whether unquoted text in it would be globbed or brace-expanded (quoted characters
    /// inside a bracket expression or a brace group do not stop either).
    pub(crate) fn has_glob(&self) -> bool {
        let items = super::split::items(self);
        super::split::is_glob(&items) || super::split::has_braces(&items)
    }

    /// Whether the word could expand to something starting with `-` (and so be read as an
    /// option): it starts with `-`, with an expansion, or with a glob that could match a file
    /// named `-…` (a pull request chooses its file names).
    pub(crate) fn may_be_option(&self) -> bool {
        self.may_start_with('-')
    }

    /// Whether the word could expand to something starting with `c`: it does, or it starts
    /// with an expansion, or with a glob that could match such a file name.
    pub(crate) fn may_start_with(&self, c: char) -> bool {
        for seg in &self.segs {
            match seg {
                Seg::Unknown | Seg::Var(_) | Seg::Spread => return true,
                Seg::Number => return false,
                Seg::Quoted(t) if !t.is_empty() => return t.starts_with(c),
                Seg::Unquoted(t) if !t.is_empty() => {
                    return t.starts_with([c, '*', '?', '[', '{']);
                }
                _ => {}
            }
        }
        false
    }

    /// Every shape the word could expand to, as glob tokens: literal text as characters, globs
    /// as what they match, expansions as any name (no `/`); one shape per brace alternative
    /// (bounded: past [`MAX_SHAPES`], a brace group is "anything").
    pub(crate) fn shapes(&self, values: &Values) -> Vec<Vec<Tok>> {
        super::split::shapes(self, values, MAX_SHAPES)
    }
}

/// The most brace alternatives a word is expanded into for the path checks.
const MAX_SHAPES: usize = 64;

/// A set of characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Set {
    /// This character.
    Char(char),
    /// Any character but `/` (what a glob matches).
    NotSlash,
    /// Any character (what an expansion holds).
    Any,
}

impl Set {
    /// Whether some character is in both sets.
    fn meets(self, other: Set) -> bool {
        match (self, other) {
            (Set::Char(a), Set::Char(b)) => a == b,
            (Set::Char(c), Set::NotSlash) | (Set::NotSlash, Set::Char(c)) => c != '/',
            _ => true,
        }
    }
}

/// One token of a glob shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    /// One character of the set (a literal character, `?`, `[…]`).
    One(Set),
    /// Any number of characters of the set (`*`, an expansion).
    Many(Set),
}

/// Glob text as tokens, `*` matching any text of `star`.
fn glob_tokens_with(text: &str, star: Set) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push(Tok::Many(star)),
            '?' => out.push(Tok::One(Set::NotSlash)),
            '[' if chars.clone().any(|d| d == ']') => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                out.push(Tok::One(Set::NotSlash));
            }
            c => out.push(Tok::One(Set::Char(c))),
        }
    }
    out
}

/// A pattern whose `*` matches any text, `/` included.
pub(crate) fn pattern_tokens(text: &str) -> Vec<Tok> {
    glob_tokens_with(text, Set::Any)
}

/// Whether some string matches both shapes (a walk over the product of the two automata).
pub(crate) fn intersects(a: &[Tok], b: &[Tok]) -> bool {
    let mut seen = vec![vec![false; b.len() + 1]; a.len() + 1];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        if seen[i][j] {
            continue;
        }
        seen[i][j] = true;
        if i == a.len() && j == b.len() {
            return true;
        }
        // Leaving a `Many` consumes nothing.
        if let Some(Tok::Many(_)) = a.get(i) {
            stack.push((i + 1, j));
        }
        if let Some(Tok::Many(_)) = b.get(j) {
            stack.push((i, j + 1));
        }
        // Both consume one character they have in common.
        if let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
            let (sx, nx) = match x {
                Tok::One(s) => (*s, i + 1),
                Tok::Many(s) => (*s, i),
            };
            let (sy, ny) = match y {
                Tok::One(s) => (*s, j + 1),
                Tok::Many(s) => (*s, j),
            };
            if sx.meets(sy) && (nx, ny) != (i, j) {
                stack.push((nx, ny));
            } else if sx.meets(sy) {
                // Both stay in their `Many`: one character later is the same state.
            }
        }
    }
    false
}

/// Variables bash computes itself: their values are numbers, never text from outside.
pub(crate) fn is_computed(name: &str) -> bool {
    matches!(
        name,
        "RANDOM"
            | "SRANDOM"
            // Set by getopts, or a literal number (every other assignment is refused).
            | "OPTIND"
            | "HISTCMD"
            | "SECONDS"
            | "EPOCHSECONDS"
            | "LINENO"
            | "BASHPID"
            | "PPID"
            | "UID"
            | "EUID"
            | "BASH_SUBSHELL"
    )
}

impl Checker<'_> {
    /// Analyses a word: every substitution in it is checked as a program, every evaluation
    /// context recorded.
    pub(super) fn word(&mut self, raw: &str) -> Result<Word, ShellError> {
        let pieces = bw::parse(raw, &super::parser_options())
            .map_err(|e| ShellError::new(Rule::Parse, format!("a word does not parse: {e}"), Some(raw)))?;
        let mut out = Word {
            raw: raw.to_owned(),
            segs: Vec::new(),
            unquoted_expansion: false,
            vars: Vec::new(),
            opaque: false,
            multi: false,
        };
        for p in &pieces {
            self.piece(p, raw, false, &mut out)?;
        }
        super::guards::path(&out, &Values::new())?;
        self.var_word(&out);
        Ok(out)
    }

    fn piece(
        &mut self,
        piece: &WordPieceWithSource,
        source: &str,
        quoted: bool,
        out: &mut Word,
    ) -> Result<(), ShellError> {
        let raw = source.get(piece.start_index..piece.end_index).unwrap_or(source);
        match &piece.piece {
            WordPiece::Text(t) if quoted => out.segs.push(Seg::Quoted(t.clone())),
            WordPiece::Text(t) => out.segs.push(Seg::Unquoted(t.clone())),
            WordPiece::SingleQuotedText(t) => out.segs.push(Seg::Quoted(t.clone())),
            WordPiece::AnsiCQuotedText(t) => out.segs.push(Seg::Quoted(ansi_c(t))),
            WordPiece::EscapeSequence(e) => {
                let c = e.strip_prefix('\\').unwrap_or(e);
                if c != "\n" {
                    out.segs.push(Seg::Quoted(c.to_owned()));
                }
            }
            WordPiece::GettextDoubleQuotedSequence(_) => {
                return Err(ShellError::new(
                    Rule::Evaluation,
                    "`$\"…\"` looks its text up in a message catalogue, whose translations bash expands again (they can hold command substitutions); write \"…\"",
                    Some(raw),
                ));
            }
            WordPiece::DoubleQuotedSequence(inner) => {
                // An empty "" still makes the word exist.
                out.segs.push(Seg::Quoted(String::new()));
                for p in inner {
                    self.piece(p, source, true, out)?;
                }
            }
            WordPiece::TildeExpansion(_) => {
                out.opaque = true;
                out.segs.push(Seg::Unknown);
            }
            WordPiece::ParameterExpansion(expr) => {
                let multi = std::mem::take(&mut out.multi);
                self.parameter(expr, raw, quoted, out)?;
                let spread = out.multi;
                out.multi |= multi;
                if !quoted {
                    out.unquoted_expansion = true;
                }
                out.segs.push(match expr {
                    _ if spread => Seg::Spread,
                    P::Parameter {
                        parameter: Parameter::Named(name),
                        indirect: false,
                    } => Seg::Var(name.clone()),
                    P::ParameterLength { indirect: false, .. }
                    | P::Parameter {
                        parameter:
                            Parameter::Special(
                                SpecialParameter::PositionalParameterCount
                                | SpecialParameter::LastExitStatus
                                | SpecialParameter::ProcessId
                                | SpecialParameter::LastBackgroundProcessId,
                            ),
                        indirect: false,
                    } => Seg::Number,
                    _ => Seg::Unknown,
                });
            }
            WordPiece::ArithmeticExpression(e) => {
                self.arithmetic(&e.value, "an arithmetic expansion $(( ))")?;
                out.segs.push(Seg::Number);
            }
            WordPiece::CommandSubstitution(code) | WordPiece::BackquotedCommandSubstitution(code) => {
                self.subprogram(code)?;
                out.opaque = true;
                if !quoted {
                    out.unquoted_expansion = true;
                }
                out.segs.push(Seg::Unknown);
            }
        }
        Ok(())
    }

    /// A parameter expansion: the words inside it (defaults, patterns) are words in turn, and
    /// what bash evaluates is recorded. Where its value comes from is added to `out`.
    fn parameter(
        &mut self,
        expr: &ParameterExpr,
        raw: &str,
        quoted: bool,
        out: &mut Word,
    ) -> Result<(), ShellError> {
        // Inside double quotes, bash reads a `${…}`'s words (defaults, patterns) as double-quoted
        // text: a `'` there is an ordinary character, so `"${x:-'$(id)'}"` runs `id`. The parser
        // reads those `'` as quotes; rather than guess, such words are refused.
        let nested_quote = |w: &str| quoted && w.contains('\'') && (w.contains('$') || w.contains('`'));
        use ParameterExpr as P;

        fn quoted_nested(raw: &str) -> ShellError {
            ShellError::new(
                Rule::Expansion,
                "a `'` inside a `${…}` within double quotes is an ordinary character to bash, not a quote; write the word without it",
                Some(raw),
            )
        }
        let (parameter, indirect, words): (&Parameter, bool, Vec<&str>) = match expr {
            P::Parameter { parameter, indirect } | P::ParameterLength { parameter, indirect } => {
                (parameter, *indirect, Vec::new())
            }
            P::UseDefaultValues {
                parameter,
                indirect,
                default_value: value,
                ..
            }
            | P::UseAlternativeValue {
                parameter,
                indirect,
                alternative_value: value,
                ..
            }
            | P::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                error_message: value,
                ..
            }
            | P::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | P::UppercaseFirstChar {
                parameter,
                indirect,
                pattern: value,
            }
            | P::UppercasePattern {
                parameter,
                indirect,
                pattern: value,
            }
            | P::LowercaseFirstChar {
                parameter,
                indirect,
                pattern: value,
            }
            | P::LowercasePattern {
                parameter,
                indirect,
                pattern: value,
            } => (parameter, *indirect, value.iter().map(String::as_str).collect()),
            P::AssignDefaultValues {
                parameter,
                indirect,
                default_value,
                ..
            } => {
                if default_value.as_deref().is_some_and(nested_quote) {
                    return Err(quoted_nested(raw));
                }
                let value = match default_value {
                    Some(v) => self.word(v)?,
                    None => Word::literal_text(""),
                };
                match parameter {
                    Parameter::Named(name) => {
                        self.assignable(name, raw)?;
                        self.assign_from(name, &value);
                    }
                    _ => {
                        return Err(ShellError::new(
                            Rule::Assignment,
                            "`${…:=…}` may only assign a plain variable",
                            Some(raw),
                        ));
                    }
                }
                out.vars.extend(value.vars);
                out.opaque |= value.opaque;
                out.multi |= value.multi;
                (parameter, *indirect, Vec::new())
            }
            P::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                self.arithmetic(&offset.value, "a substring offset ${x:offset}")?;
                if let Some(length) = length {
                    self.arithmetic(&length.value, "a substring length ${x:offset:length}")?;
                }
                (parameter, *indirect, Vec::new())
            }
            P::Transform {
                parameter,
                indirect,
                op,
            } => {
                if matches!(op, ParameterTransformOp::PromptExpand) {
                    return Err(ShellError::new(
                        Rule::Evaluation,
                        "`${x@P}` expands its value as a prompt, which runs command substitutions in it",
                        Some(raw),
                    ));
                }
                (parameter, *indirect, Vec::new())
            }
            P::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                ..
            } => {
                let mut words = vec![pattern.as_str()];
                words.extend(replacement.as_deref());
                (parameter, *indirect, words)
            }
            P::VariableNames { concatenate, .. } | P::MemberKeys { concatenate, .. } => {
                out.multi |= !concatenate;
                return Ok(());
            }
        };
        for w in words {
            if nested_quote(w) {
                return Err(quoted_nested(raw));
            }
            let inner = self.word(w)?;
            out.vars.extend(inner.vars);
            out.opaque |= inner.opaque;
            // `"${x:+"${a[@]}"}"` makes as many words as the array.
            out.multi |= inner.multi;
        }
        let length = matches!(expr, P::ParameterLength { .. });
        out.multi |= !length
            && matches!(
                parameter,
                Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate: false })
                    | Parameter::NamedWithAllIndices {
                        concatenate: false,
                        ..
                    }
            );
        // `${!r}` with `r='a[@]'` expands to every element: as many words as the array.
        out.multi |= indirect;
        match parameter {
            _ if indirect => out.opaque = true,
            Parameter::Named(name)
            | Parameter::NamedWithIndex { name, .. }
            | Parameter::NamedWithAllIndices { name, .. } => {
                if !length {
                    out.vars.push(name.clone());
                }
            }
            Parameter::Special(
                SpecialParameter::PositionalParameterCount
                | SpecialParameter::LastExitStatus
                | SpecialParameter::ProcessId
                | SpecialParameter::LastBackgroundProcessId
                | SpecialParameter::CurrentOptionFlags,
            ) => {}
            Parameter::Positional(_) | Parameter::Special(_) => out.opaque |= !length,
        }
        match parameter {
            Parameter::Named(name) | Parameter::NamedWithAllIndices { name, .. } if indirect => {
                self.name_ref(
                    name,
                    raw,
                    "an indirect expansion ${!name} (its value names the variable read)",
                );
            }
            Parameter::NamedWithIndex { name, index } => {
                self.arithmetic(index, "an array subscript")?;
                if indirect {
                    self.name_ref(name, raw, "an indirect expansion ${!name}");
                }
            }
            Parameter::Positional(_) | Parameter::Special(_) if indirect => {
                return Err(ShellError::new(
                    Rule::Evaluation,
                    "an indirect expansion of a positional or special parameter reads a variable named by text from outside",
                    Some(raw),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// Text bash evaluates as arithmetic (`$(( ))`, `(( ))`, `let`, subscripts, `[[ -eq ]]`
    /// operands): no command substitution, and every variable it reads must hold only literal
    /// values of the program. Bash evaluates a variable's value as an expression in turn, so a
    /// value from a file (`a[$(id)]`) would run a command.
    pub(super) fn arithmetic(&mut self, text: &str, what: &str) -> Result<(), ShellError> {
        let refuse = |reason: String| Err(ShellError::new(Rule::Evaluation, reason, Some(text)));
        if text.contains("$(")
            || text.contains('`')
            || text.contains("$[")
            || text.contains("<(")
            || text.contains(">(")
        {
            return refuse(format!(
                "a command substitution inside {what}: its output would be evaluated as code"
            ));
        }
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '$' {
                match chars.get(i + 1) {
                    Some('{') => {
                        let mut depth = 0;
                        let mut end = None;
                        for (j, &d) in chars.iter().enumerate().skip(i + 1) {
                            match d {
                                '{' => depth += 1,
                                '}' => {
                                    depth -= 1;
                                    if depth == 0 {
                                        end = Some(j);
                                        break;
                                    }
                                }
                                _ => {}
                            }
                        }
                        let Some(end) = end else {
                            return refuse(format!("an unclosed `${{` inside {what}"));
                        };
                        let expansion: String = chars[i..=end].iter().collect();
                        self.arithmetic_parameter(&expansion, what)?;
                        i = end + 1;
                    }
                    Some(d) if d.is_ascii_digit() || *d == '@' || *d == '*' => {
                        return refuse(format!(
                            "a positional parameter inside {what}: its value comes from the request and would be evaluated as code"
                        ));
                    }
                    Some('#' | '?' | '$' | '!') => i += 2,
                    Some(d) if d.is_ascii_alphabetic() || *d == '_' => {
                        let start = i + 1;
                        let mut j = start;
                        while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                            j += 1;
                        }
                        let name: String = chars[start..j].iter().collect();
                        self.eval_ref(&name, text, what);
                        i = j;
                    }
                    _ => i += 1,
                }
            } else if c.is_ascii_digit() {
                // A number: decimal, 0x…, 0…, or BASE#DIGITS (whose digits may be letters).
                let mut j = i;
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                if chars.get(j) == Some(&'#') {
                    j += 1;
                    while j < chars.len()
                        && (chars[j].is_ascii_alphanumeric() || matches!(chars[j], '@' | '_'))
                    {
                        j += 1;
                    }
                }
                i = j;
            } else if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                self.eval_ref(&name, text, what);
            } else {
                i += 1;
            }
        }
        super::walk::arithmetic_assignments(text, self)?;
        Ok(())
    }

    /// A `${…}` inside arithmetic: only a plain variable (or a computed special parameter).
    fn arithmetic_parameter(&mut self, expansion: &str, what: &str) -> Result<(), ShellError> {
        let pieces = bw::parse(expansion, &super::parser_options()).map_err(|e| {
            ShellError::new(
                Rule::Parse,
                format!("a word does not parse: {e}"),
                Some(expansion),
            )
        })?;
        if let [piece] = pieces.as_slice()
            && let WordPiece::ParameterExpansion(P::Parameter {
                parameter,
                indirect: false,
            }) = &piece.piece
        {
            match parameter {
                Parameter::Named(name) => {
                    self.eval_ref(name, expansion, what);
                    return Ok(());
                }
                Parameter::Special(
                    SpecialParameter::PositionalParameterCount
                    | SpecialParameter::LastExitStatus
                    | SpecialParameter::ProcessId
                    | SpecialParameter::LastBackgroundProcessId,
                ) => return Ok(()),
                _ => {}
            }
        }
        Err(ShellError::new(
            Rule::Evaluation,
            format!("only a plain variable may be expanded inside {what}"),
            Some(expansion),
        ))
    }
}

use ParameterExpr as P;

/// Decodes the body of a bash `$'…'` string the way bash does.
pub(crate) fn ansi_c(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    let take_digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, radix: u32, max: usize| {
        let mut v: u32 = 0;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (v, n)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let decoded = match e {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            'c' => chars.next().map(|c| char::from((c as u8) & 0x1f)),
            'x' => {
                let (v, n) = take_digits(&mut chars, 16, 2);
                if n == 0 { None } else { char::from_u32(v) }
            }
            'u' => char::from_u32(take_digits(&mut chars, 16, 4).0),
            'U' => char::from_u32(take_digits(&mut chars, 16, 8).0),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                let (rest, n) = take_digits(&mut chars, 8, 2);
                v = v * 8u32.pow(n as u32) + rest;
                char::from_u32(v & 0xff)
            }
            _ => None,
        };
        match decoded {
            Some(d) => out.push(d),
            None => {
                out.push('\\');
                out.push(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_strings_decode_as_bash_decodes_them() {
        assert_eq!(ansi_c("\\x63url"), "curl");
        assert_eq!(ansi_c("\\143url"), "curl");
        assert_eq!(ansi_c("\\u0063url"), "curl");
    }

    #[test]
    fn shapes_expand_braces_and_globs_and_intersect_as_bash_would_match() {
        let word = |segs: Vec<Seg>| Word {
            raw: String::new(),
            segs,
            unquoted_expansion: false,
            vars: Vec::new(),
            opaque: false,
            multi: false,
        };
        let sensitive = pattern_tokens("*proc/*environ");
        let reaches = |w: &Word| w.shapes(&Values::new()).iter().any(|s| intersects(s, &sensitive));
        let unquoted = |t: &str| word(vec![Seg::Unquoted(t.to_owned())]);
        assert!(reaches(&unquoted("/proc/self/envir*")));
        assert!(reaches(&unquoted("/pr?c/*/environ")));
        assert!(reaches(&unquoted("/p[r]oc/self/environ")));
        assert!(reaches(&unquoted("{README.md,/proc/self/environ}")));
        assert!(reaches(&word(vec![
            Seg::Quoted("/proc/".into()),
            Seg::Unknown,
            Seg::Quoted("/environ".into())
        ])));
        assert!(!reaches(&unquoted("src/*.rs")));
        assert!(!reaches(&unquoted("*.py")));
        let tcp = pattern_tokens("*dev/tcp/*");
        assert!(
            !unquoted("*.py")
                .shapes(&Values::new())
                .iter()
                .any(|s| intersects(s, &tcp))
        );
        let split = word(vec![
            Seg::Quoted("/dev/tc".into()),
            Seg::Unknown,
            Seg::Quoted("p/10.0.0.1/80".into()),
        ]);
        assert!(split.shapes(&Values::new()).iter().any(|s| intersects(s, &tcp)));
        assert!(!reaches(&unquoted("{src,lib}/*.py")));
        for glob in ["a{b,c}", "{1..3}", "*.py", "[ab].c"] {
            assert!(unquoted(glob).has_glob(), "{glob}");
        }
        for plain in ["{}", "a{b}", "plain", "["] {
            assert!(!unquoted(plain).has_glob(), "{plain}");
        }
    }
}
