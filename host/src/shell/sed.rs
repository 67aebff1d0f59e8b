//! `sed` scripts, read command by command as GNU sed reads them. A script is refused if it
//! contains a command that runs a program (`e`, the `e` flag of `s`), writes a file (`w`, `W`,
//! the `w` flag of `s`), or anything this reader does not know.

/// Why a sed script was refused.
pub(crate) type SedError = String;

/// Checks a sed script. Returns the files it reads (`r`, `R`), for the path checks.
pub(crate) fn check(script: &str) -> Result<Vec<String>, SedError> {
    let mut reader = Reader {
        chars: script.chars().collect(),
        at: 0,
        reads: Vec::new(),
        depth: 0,
    };
    reader.script()?;
    if reader.depth != 0 {
        return Err("a `{` is not closed".into());
    }
    Ok(reader.reads)
}

struct Reader {
    chars: Vec<char>,
    at: usize,
    reads: Vec<String>,
    depth: usize,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += usize::from(c.is_some());
        c
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.at += 1;
        }
    }

    /// The rest of the line (for file names, labels, text).
    fn rest_of_line(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            out.push(c);
            self.at += 1;
        }
        out
    }

    fn script(&mut self) -> Result<(), SedError> {
        loop {
            while matches!(self.peek(), Some(' ' | '\t' | '\n' | ';')) {
                self.at += 1;
            }
            if self.peek().is_none() {
                return Ok(());
            }
            self.command()?;
        }
    }

    fn number(&mut self) -> bool {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        self.at > start
    }

    /// A regular expression up to an unescaped `delim` (consumed), read as GNU sed reads it:
    /// outside a bracket expression `\\` escapes the next character; inside one (`[…]`) the
    /// delimiter and `\\` are ordinary characters, a `]` first in the set (after `[` or `[^`)
    /// belongs to it, and `[:…:]`, `[.….]`, `[=…=]` are classes whose `]` does not end it.
    fn delimited(&mut self, delim: char) -> Result<(), SedError> {
        loop {
            match self.next() {
                None => return Err(format!("an unterminated `{delim}…{delim}`")),
                Some('\\') => {
                    if self.next().is_none() {
                        return Err("a trailing backslash".into());
                    }
                }
                Some('[') if delim != '[' => self.bracket(delim)?,
                Some(c) if c == delim => return Ok(()),
                Some('\n') => return Err("a newline inside a regular expression".into()),
                Some(_) => {}
            }
        }
    }

    /// The rest of a bracket expression, after its `[`, up to its closing `]` (consumed).
    fn bracket(&mut self, delim: char) -> Result<(), SedError> {
        let unterminated = || format!("an unterminated `[` in a `{delim}…{delim}`");
        if self.peek() == Some('^') {
            self.at += 1;
        }
        if self.peek() == Some(']') {
            self.at += 1;
        }
        loop {
            match self.next() {
                None | Some('\n') => return Err(unterminated()),
                Some(']') => return Ok(()),
                Some('[') if matches!(self.peek(), Some(':' | '.' | '=')) => {
                    let kind = self.next().ok_or_else(unterminated)?;
                    // Up to the matching `:]`, `.]` or `=]`.
                    loop {
                        match self.next() {
                            None | Some('\n') => return Err(unterminated()),
                            Some(c) if c == kind && self.peek() == Some(']') => {
                                self.at += 1;
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                Some(_) => {}
            }
        }
    }

    fn address(&mut self) -> Result<bool, SedError> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.number();
                if self.peek() == Some('~') {
                    self.at += 1;
                    self.number();
                }
                Ok(true)
            }
            Some('$') => {
                self.at += 1;
                Ok(true)
            }
            Some('/') => {
                self.at += 1;
                self.delimited('/')?;
                while matches!(self.peek(), Some('I' | 'M')) {
                    self.at += 1;
                }
                Ok(true)
            }
            Some('\\') => {
                self.at += 1;
                let delim = self.next().ok_or("a `\\` address without a delimiter")?;
                if delim == '\n' || delim == '\\' {
                    return Err("an address with an invalid delimiter".into());
                }
                self.delimited(delim)?;
                while matches!(self.peek(), Some('I' | 'M')) {
                    self.at += 1;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn command(&mut self) -> Result<(), SedError> {
        if self.address()? {
            self.skip_blanks();
            if self.peek() == Some(',') {
                self.at += 1;
                self.skip_blanks();
                if matches!(self.peek(), Some('+' | '~')) {
                    self.at += 1;
                    if !self.number() {
                        return Err("`+` or `~` in an address needs a number".into());
                    }
                } else if !self.address()? {
                    return Err("a `,` without a second address".into());
                }
            }
        }
        self.skip_blanks();
        while self.peek() == Some('!') {
            self.at += 1;
            self.skip_blanks();
        }
        let Some(c) = self.next() else {
            return Err("an address without a command".into());
        };
        match c {
            '{' => {
                self.depth += 1;
                return Ok(());
            }
            '}' => {
                if self.depth == 0 {
                    return Err("a `}` without a `{`".into());
                }
                self.depth -= 1;
            }
            '#' => {
                self.rest_of_line();
                return Ok(());
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            'l' | 'q' | 'Q' | 'L' => {
                self.skip_blanks();
                self.number();
            }
            ':' => {
                self.skip_blanks();
                let label = self.label();
                if label.is_empty() {
                    return Err("`:` without a label".into());
                }
            }
            'b' | 't' | 'T' => {
                self.skip_blanks();
                self.label();
            }
            'a' | 'i' | 'c' => {
                // `a\` and one line of text, or `a text`. Text spanning lines, or holding a
                // backslash at all, is refused: whether a trailing `\` continues the text
                // depends on how many precede it, and a misread end of text would let the next
                // line be a command (`e`).
                self.skip_blanks();
                if self.peek() == Some('\\') {
                    self.at += 1;
                    if self.peek() == Some('\n') {
                        self.at += 1;
                    }
                }
                let line = self.rest_of_line();
                if line.contains('\\') {
                    return Err(format!(
                        "`{c}` text with a backslash is not allowed; keep it to one plain line"
                    ));
                }
                return Ok(());
            }
            's' => self.substitute()?,
            'y' => {
                let delim = self.next().ok_or("`y` without a delimiter")?;
                if delim == '\n' || delim == '\\' {
                    return Err("`y` with an invalid delimiter".into());
                }
                self.delimited(delim)?;
                self.delimited(delim)?;
            }
            'r' | 'R' => {
                self.skip_blanks();
                let file = self.rest_of_line();
                self.reads.push(file);
                return Ok(());
            }
            'w' | 'W' => return Err(format!("the `{c}` command writes a file")),
            'e' => return Err("the `e` command runs a program".into()),
            'v' => {
                self.label();
            }
            other => return Err(format!("`{other}` is not a sed command this checker knows")),
        }
        self.end_of_command()
    }

    /// A label: up to `;` or the end of the line.
    fn label(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '\n' || c == ';' {
                break;
            }
            out.push(c);
            self.at += 1;
        }
        out.trim_end().to_owned()
    }

    fn substitute(&mut self) -> Result<(), SedError> {
        let delim = self.next().ok_or("`s` without a delimiter")?;
        if delim == '\n' || delim == '\\' {
            return Err("`s` with an invalid delimiter".into());
        }
        self.delimited(delim)?;
        // The replacement may hold escaped newlines.
        loop {
            match self.next() {
                None => return Err("an unterminated `s` replacement".into()),
                Some('\\') => {
                    self.next().ok_or("a trailing backslash")?;
                }
                Some(c) if c == delim => break,
                Some(_) => {}
            }
        }
        while let Some(c) = self.peek() {
            match c {
                'g' | 'p' | 'i' | 'I' | 'm' | 'M' => self.at += 1,
                '0'..='9' => self.at += 1,
                'e' => return Err("the `e` flag of `s` runs the pattern space as a command".into()),
                'w' => return Err("the `w` flag of `s` writes a file".into()),
                _ => break,
            }
        }
        Ok(())
    }

    fn end_of_command(&mut self) -> Result<(), SedError> {
        self.skip_blanks();
        match self.peek() {
            None | Some('\n' | ';' | '}' | '#') => Ok(()),
            Some(c) => Err(format!("unexpected `{c}` after a command")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn ordinary_scripts_pass() {
        for script in [
            "s/foo/bar/g",
            "s|a/b|c|2",
            "/^#/d; s/\\s+$//",
            "1,/END/{s/x/y/;p}",
            "$!N; P; D",
            "0~4p",
            "/start/,+3d",
            "y/abc/xyz/",
            "s/a;b/c/",
            ":top\ns/aa/a/\nt top",
            "1i\\\nheader",
            "2c replaced line",
            "$a footer",
            "= ; l 40 ; q 3",
            "\\%regex%p",
            "r other.txt",
            "/a/!d",
        ] {
            assert!(check(script).is_ok(), "{script:?}: {:?}", check(script));
        }
        assert_eq!(check("1r notes.txt").expect("ok"), vec!["notes.txt".to_owned()]);
    }

    #[test]
    fn commands_that_run_or_write_are_refused() {
        for script in [
            "e id",
            "1e id",
            "s/x/id/e",
            "s/x/y/ge",
            "s/x/y/w out.txt",
            "w out.txt",
            "/x/W out",
            "s/a/b/;e",
            "1{e id\n}",
            "s/x/y/ ; w /tmp/x",
            "1a foo\\\\\ne",
            "1a\\\nfoo\\\\\ne id",
            "1i\\\n\\\ne id",
            "1a foo\\\nbar",
            "k",
            "s/unterminated",
            "{p",
            "}",
            // Inside a bracket expression `\\` is an ordinary character: the regex ends at
            // the `/` after `[a\\]`, and `e` runs.
            "/[a\\]/e echo HIT]/p",
            "\\%[a\\]%e echo HIT]%p",
            "s/[a\\]/x/e",
            "/[[:alpha:]/]/e id",
            "/[]/]/e id",
        ] {
            assert!(check(script).is_err(), "{script:?} passed");
        }
        // The twins: the same brackets, reading only.
        for script in ["/[a\\]/p", "s/[/]/x/g", "/[[:alpha:]/]/p", "/[]/]/d", "/[^]a]/p"] {
            assert!(check(script).is_ok(), "{script:?} refused: {:?}", check(script));
        }
    }
}
