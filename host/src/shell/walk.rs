//! The walk over a parsed program: every simple command is found (across lists, pipelines,
//! subshells, loops, `if`/`case`, substitutions and literal `bash -c` strings) and handed to
//! its grammar; redirections, assignments, `[[ ]]` and `(( ))` are checked on the way; the
//! working directory is tracked so that a relative `.ai/` path after a `cd` is refused.

use std::collections::HashMap;

use brush_parser::ast;

use super::table::Table;
use super::word::{Seg, Values, Word, is_computed};
use super::{Checked, MAX_STATEMENTS, Rule, ShellError, Statement};

/// The deepest nesting of programs (substitutions, `bash -c` strings) checked.
const MAX_DEPTH: usize = 8;

/// The state of one check.
pub(crate) struct Checker<'r> {
    pub(super) table: &'r Table,
    pub(super) statements: Vec<Statement>,
    depth: usize,
    /// Whether the working directory may differ from the worktree's root here.
    pub(super) dir_changed: bool,
    /// Every variable assigned in the program, and where its values came from.
    assigns: HashMap<String, Source>,
    /// Variables whose values bash evaluates: `(name, where, what, how)`.
    eval_refs: Vec<(String, String, String, Evaluated)>,
    /// Whether a statement runs git.
    pub(super) uses_git: bool,
    /// What each variable may hold (its literal values).
    values: Values,
    /// Words that expand variables: their paths are checked again with [`Self::values`].
    var_words: Vec<Word>,
    /// Plain copies `to=$from`: `to` holds what `from` holds.
    copies: Vec<(String, String)>,
    /// Assignments to bash's integer variables (`OPTIND`, `RANDOM` …), whose every value bash
    /// evaluates as arithmetic.
    integer_assigns: Vec<String>,
    /// Variables used as arrays anywhere in the program.
    pub(super) arrays: std::collections::HashSet<String>,
    /// Declaration builtins (`declare`, `local`, `readonly` …) that gave a variable a value
    /// that is not literal: `(name, where)`. Bash parses such a value again as a compound
    /// assignment when the variable is an array.
    pub(super) declared_opaque: Vec<(String, String)>,
}

/// The most values remembered for one variable, and the most words checked again.
const MAX_VALUES: usize = 16;
const MAX_VAR_WORDS: usize = 512;

impl<'r> Checker<'r> {
    pub(super) fn new(table: &'r Table) -> Self {
        Self {
            table,
            statements: Vec::new(),
            depth: 0,
            dir_changed: false,
            assigns: HashMap::new(),
            eval_refs: Vec::new(),
            uses_git: false,
            values: Values::new(),
            var_words: Vec::new(),
            copies: Vec::new(),
            integer_assigns: Vec::new(),
            arrays: BASH_ARRAYS.iter().map(|s| (*s).to_owned()).collect(),
            declared_opaque: Vec::new(),
        }
    }

    /// Checks the whole program, then that every evaluated variable held only literals.
    pub(super) fn finish(mut self, program: &str) -> Result<Checked, ShellError> {
        self.program(program)?;
        self.propagate_copies();
        for word in &self.var_words {
            super::guards::path(word, &self.values)?;
        }
        let literal: std::collections::HashSet<String> = literal_variables(&self.assigns)
            .into_iter()
            .map(str::to_owned)
            .collect();
        // The values of an evaluated variable are evaluated in turn (`y=x; $((y))` reads x;
        // `x='a[$(id)]'; $((x))` runs id): each literal value is checked as the expression it
        // will be, which may add variables to check.
        // `declare a="$x"` when `a` is an array: bash reads `$x` as `(…)` code.
        for (name, at) in &self.declared_opaque {
            if self.arrays.contains(name) {
                return Err(ShellError::new(
                    Rule::Evaluation,
                    format!(
                        "`{name}` is an array, and a declaration builtin gives it a value that is not a literal: bash parses such a value again as `(…)`, running what its subscripts hold; assign the array with `{name}=(…)` or `read -a`"
                    ),
                    Some(at),
                ));
            }
        }
        // Every value assigned to OPTIND, RANDOM … is evaluated as arithmetic.
        let mut integers = std::mem::take(&mut self.integer_assigns);
        integers.sort();
        integers.dedup();
        for name in integers {
            let what =
                format!("an assignment to `{name}` (bash evaluates every value it is given as arithmetic)");
            if !literal.contains(&name) {
                return Err(ShellError::new(
                    Rule::Evaluation,
                    format!(
                        "bash evaluates every value assigned to `{name}` as arithmetic (a subscript in it runs commands), and it is assigned a value that is not a literal of the program; assign it a literal number, or use a variable of your own"
                    ),
                    Some(&name),
                ));
            }
            match self.values.get(&name).cloned() {
                None => {}
                Some(Some(values)) => {
                    for value in values {
                        self.arithmetic(&value, &what)?;
                    }
                }
                Some(None) => {
                    return Err(ShellError::new(
                        Rule::Evaluation,
                        format!("{what} is given more values than the checker follows"),
                        Some(&name),
                    ));
                }
            }
        }
        let mut done: std::collections::HashSet<(String, Evaluated)> = std::collections::HashSet::new();
        let mut next = 0;
        while let Some((name, at, what, how)) = self.eval_refs.get(next).cloned() {
            next += 1;
            if is_computed(&name) {
                continue;
            }
            if !literal.contains(&name) {
                let why = match self.assigns.get(&name) {
                    Some(_) => {
                        "it is assigned a value that is not a literal of the program (command output, a file, a request argument)"
                    }
                    None => "it is never assigned in the program (its value would come from outside)",
                };
                return Err(ShellError::new(
                    Rule::Evaluation,
                    format!(
                        "bash evaluates the value of `{name}` as code in {what}, and {why}; compare as strings (`[ \"$n\" -gt 10 ]` does not evaluate), or move the logic to an upstream .ai/ script"
                    ),
                    Some(&at),
                ));
            }
            if !done.insert((name.clone(), how)) {
                continue;
            }
            let values = match self.values.get(&name) {
                // Assigned only inside arithmetic: numbers.
                None => continue,
                Some(Some(values)) => values.clone(),
                Some(None) => {
                    return Err(ShellError::new(
                        Rule::Evaluation,
                        format!(
                            "bash evaluates the value of `{name}` in {what}, and it has more values than the checker follows"
                        ),
                        Some(&at),
                    ));
                }
            };
            for value in values {
                match how {
                    Evaluated::Arithmetic => {
                        self.arithmetic(&value, &format!("the value of `{name}`, which {what} evaluates"))?
                    }
                    Evaluated::Name => self.variable_name(&value, &at)?,
                }
            }
        }
        Ok(Checked {
            statements: self.statements,
            uses_git: self.uses_git,
        })
    }

    /// `to=$from` makes `to` hold what `from` holds, to a fixed point (bounded as values are).
    fn propagate_copies(&mut self) {
        loop {
            let mut changed = false;
            for (to, from) in &self.copies {
                let incoming = match self.values.get(from) {
                    Some(Some(v)) => Some(v.clone()),
                    _ => None,
                };
                let entry = self.values.entry(to.clone()).or_insert_with(|| Some(Vec::new()));
                match (entry.as_mut(), incoming) {
                    (Some(known), Some(incoming)) => {
                        for v in incoming {
                            if !known.contains(&v) {
                                if known.len() >= MAX_VALUES {
                                    *entry = None;
                                    changed = true;
                                    break;
                                }
                                known.push(v);
                                changed = true;
                            }
                        }
                    }
                    (Some(_), None) => {
                        *entry = None;
                        changed = true;
                    }
                    (None, _) => {}
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// Records that bash evaluates the value of `name` as an arithmetic expression.
    pub(super) fn eval_ref(&mut self, name: &str, at: &str, what: &str) {
        self.eval_refs.push((
            name.to_owned(),
            at.to_owned(),
            what.to_owned(),
            Evaluated::Arithmetic,
        ));
    }

    /// Records that bash reads the value of `name` as the name of a variable (`${!name}`).
    pub(super) fn name_ref(&mut self, name: &str, at: &str, what: &str) {
        self.eval_refs
            .push((name.to_owned(), at.to_owned(), what.to_owned(), Evaluated::Name));
    }

    /// A literal value used as a variable name: a name, or a name with a subscript (which is
    /// evaluated).
    fn variable_name(&mut self, value: &str, at: &str) -> Result<(), ShellError> {
        let (name, subscript) = match value.split_once('[') {
            Some((n, rest)) => (n, Some(rest.strip_suffix(']').unwrap_or(rest))),
            None => (value, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(ShellError::new(
                Rule::Evaluation,
                format!("{value:?} is not a variable name, but an indirect expansion reads it as one"),
                Some(at),
            ));
        }
        if let Some(subscript) = subscript {
            self.arithmetic(subscript, "an array subscript named indirectly")?;
        }
        Ok(())
    }

    /// Records an assignment to `name`; `literal`: its value is a literal of the program.
    pub(super) fn assign(&mut self, name: &str, literal: bool) {
        if is_integer_var(name) {
            self.integer_assigns.push(name.to_owned());
        }
        self.assigns.entry(name.to_owned()).or_default().outside |= !literal;
        if !literal {
            self.values.insert(name.to_owned(), None);
        }
    }

    /// Remembers a word that expands variables, to check its paths again at the end.
    pub(super) fn var_word(&mut self, word: &Word) {
        if word.segs.iter().any(|s| matches!(s, Seg::Var(_))) && self.var_words.len() < MAX_VAR_WORDS {
            self.var_words.push(word.clone());
        }
    }

    /// Records an assignment of `value` to `name`: literal if the word's text is the program's
    /// and every variable it expands holds only literals.
    pub(super) fn assign_from(&mut self, name: &str, value: &Word) {
        if is_integer_var(name) {
            self.integer_assigns.push(name.to_owned());
        }
        let source = self.assigns.entry(name.to_owned()).or_default();
        source.outside |= value.opaque;
        source.from.extend(value.vars.iter().cloned());
        let mut parts = value
            .segs
            .iter()
            .filter(|s| !matches!(s, Seg::Quoted(t) if t.is_empty()));
        if let (Some(Seg::Var(from)), None) = (parts.next(), parts.next()) {
            self.copies.push((name.to_owned(), from.clone()));
            self.values
                .entry(name.to_owned())
                .or_insert_with(|| Some(Vec::new()));
            return;
        }
        let entry = self
            .values
            .entry(name.to_owned())
            .or_insert_with(|| Some(Vec::new()));
        match (entry.as_mut(), value.text().or_else(|| value.numeric_text())) {
            (Some(known), Some(text)) if known.len() < MAX_VALUES => known.push(text),
            _ => *entry = None,
        }
    }

    /// Records a statement, counting it against [`MAX_STATEMENTS`].
    pub(super) fn statement(&mut self, command: &str, builtin: bool) -> Result<(), ShellError> {
        self.statements.push(Statement {
            command: command.to_owned(),
            builtin,
            scripts: Vec::new(),
            dynamic_args: false,
        });
        if self.statements.len() > MAX_STATEMENTS {
            return Err(ShellError::new(
                Rule::Size,
                format!("more than {MAX_STATEMENTS} commands; put long logic in an upstream .ai/ script"),
                None,
            ));
        }
        Ok(())
    }

    /// Marks the last statement as taking arguments that are not plain literal file names.
    pub(super) fn dynamic_args(&mut self) {
        if let Some(last) = self.statements.last_mut() {
            last.dynamic_args = true;
        }
    }

    /// Records an upstream script the last statement runs.
    pub(super) fn script(&mut self, path: &str) {
        if let Some(last) = self.statements.last_mut() {
            last.scripts.push(path.to_owned());
        }
    }

    /// Parses and walks a program (the helper's, a substitution's or a `bash -c` string's).
    pub(super) fn program(&mut self, text: &str) -> Result<(), ShellError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ShellError::new(
                Rule::Size,
                format!("programs nested deeper than {MAX_DEPTH} levels"),
                None,
            ));
        }
        super::guards::characters(text)?;
        let mut parser =
            brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &super::parser_options());
        let program = parser
            .parse_program()
            .map_err(|e| ShellError::new(Rule::Parse, format!("it does not parse as bash: {e}"), None))?;
        for complete in &program.complete_commands {
            self.list(complete)?;
        }
        self.depth -= 1;
        Ok(())
    }

    /// A program run in a subshell (a substitution): its directory changes do not leak out.
    pub(super) fn subprogram(&mut self, text: &str) -> Result<(), ShellError> {
        let dir = self.dir_changed;
        self.program(text)?;
        self.dir_changed = dir;
        Ok(())
    }

    fn subshell(&mut self, list: &ast::CompoundList) -> Result<(), ShellError> {
        let dir = self.dir_changed;
        self.list(list)?;
        self.dir_changed = dir;
        Ok(())
    }

    fn list(&mut self, list: &ast::CompoundList) -> Result<(), ShellError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), ShellError> {
        if let [only] = pipeline.seq.as_slice() {
            return self.command(only, false);
        }
        // Every element of a pipeline runs in a subshell of its own.
        for (index, command) in pipeline.seq.iter().enumerate() {
            let dir = self.dir_changed;
            self.command(command, index > 0)?;
            self.dir_changed = dir;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, piped: bool) -> Result<(), ShellError> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, piped),
            ast::Command::Compound(compound, redirects) => {
                for r in redirects.iter().flat_map(|l| l.0.iter()) {
                    self.redirect(r)?;
                }
                self.compound(compound)
            }
            ast::Command::Function(def) => Err(ShellError::new(
                Rule::Construct,
                "function definitions are not allowed in a helper command; put the code in an upstream .ai/ script",
                Some(&def.fname.value),
            )),
            ast::Command::ExtendedTest(test, redirects) => {
                for r in redirects.iter().flat_map(|l| l.0.iter()) {
                    self.redirect(r)?;
                }
                self.extended_test(&test.expr)
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) -> Result<(), ShellError> {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, "(( ))"),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater].into_iter().flatten() {
                    self.arithmetic(&e.value, "for (( ))")?;
                }
                self.loop_body(&f.body.list)
            }
            C::BraceGroup(b) => self.list(&b.list),
            C::Subshell(s) => self.subshell(&s.list),
            C::ForClause(f) => {
                self.assignable(&f.variable_name, &f.variable_name)?;
                // Without `in`, the loop runs over the positional parameters (the request's).
                self.assign(&f.variable_name, f.values.is_some());
                for w in f.values.iter().flatten() {
                    let word = self.word(&w.value)?;
                    self.no_unquoted_expansion(&word)?;
                    // A glob expands to the pull request's file names.
                    self.assign(&f.variable_name, !word.has_glob());
                    self.assign_from(&f.variable_name, &word);
                }
                self.loop_body(&f.body.list)
            }
            C::CaseClause(c) => {
                self.word(&c.value.value)?;
                let before = self.dir_changed;
                let mut after = before;
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.dir_changed = before;
                        self.list(list)?;
                        after |= self.dir_changed;
                    }
                }
                self.dir_changed = after;
                Ok(())
            }
            C::IfClause(i) => {
                self.list(&i.condition)?;
                let before = self.dir_changed;
                self.list(&i.then)?;
                let mut after = self.dir_changed;
                for e in i.elses.iter().flatten() {
                    self.dir_changed = before;
                    if let Some(c) = &e.condition {
                        self.list(c)?;
                    }
                    self.list(&e.body)?;
                    after |= self.dir_changed;
                }
                self.dir_changed = after;
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                // The condition runs again after the body: a `cd` in either is seen by both.
                self.dir_changed |= changes_dir(&w.0) || changes_dir(&w.1.list);
                self.list(&w.0)?;
                self.loop_body(&w.1.list)
            }
            C::Coprocess(_) => Err(ShellError::new(
                Rule::Construct,
                "coprocesses are not allowed",
                Some("coproc"),
            )),
        }
    }

    /// A loop body runs again after itself: a `cd` anywhere in it is seen from its start.
    fn loop_body(&mut self, body: &ast::CompoundList) -> Result<(), ShellError> {
        self.dir_changed |= changes_dir(body);
        self.list(body)
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr) -> Result<(), ShellError> {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E, UnaryPredicate as U};
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a)?;
                self.extended_test(b)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a),
            E::UnaryTest(pred, w) => {
                let word = self.word(&w.value)?;
                if matches!(
                    pred,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                ) {
                    self.variable_operand(&word, "[[ -v ]]")?;
                }
                Ok(())
            }
            E::BinaryTest(pred, l, r) => {
                self.word(&l.value)?;
                self.word(&r.value)?;
                if matches!(
                    pred,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                ) {
                    // Both sides are expanded and then evaluated as arithmetic expressions.
                    self.arithmetic(&l.value, "an arithmetic comparison in [[ ]]")?;
                    self.arithmetic(&r.value, "an arithmetic comparison in [[ ]]")?;
                }
                Ok(())
            }
        }
    }

    /// An operand naming a variable (`-v NAME`, `unset NAME`): a literal name; a subscript in
    /// it is evaluated.
    pub(super) fn variable_operand(&mut self, word: &Word, what: &str) -> Result<(), ShellError> {
        let Some(text) = word.text() else {
            return Err(ShellError::new(
                Rule::Evaluation,
                format!(
                    "{what} with a variable name that is not a literal: its subscript would be evaluated as code"
                ),
                Some(&word.raw),
            ));
        };
        if let Some((_, subscript)) = text.split_once('[') {
            self.arithmetic(subscript.trim_end_matches(']'), what)?;
        }
        Ok(())
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, piped: bool) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        let named = simple.word_or_name.is_some();
        // `IFS=… read`: the separators of that one `read` (a builtin: no program sees it).
        let reads = simple.word_or_name.as_ref().is_some_and(|w| w.value == "read");
        let mut args: Vec<Word> = Vec::new();
        let mut stdin_fed = piped;
        let items: Vec<(bool, &Item)> = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter().map(|i| (true, i)))
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter().map(|i| (false, i))))
            .collect();
        for (at, item) in items.iter().copied().enumerate() {
            match item {
                (_, Item::Word(w)) => {
                    let redirects_next = matches!(items.get(at + 1), Some((_, Item::IoRedirect(_))));
                    if redirects_next && is_fd_variable(&w.value) {
                        return Err(ShellError::new(
                            Rule::Evaluation,
                            "a word `{name}` right before a redirection makes bash store a descriptor number in the variable named inside (evaluating a subscript there, creating an array, setting bash's own variables); use a plain redirection",
                            Some(&w.value),
                        ));
                    }
                    args.push(self.word(&w.value)?);
                }
                // A declaration builtin's `name=value` argument: an argument like any other,
                // and for `name=(…)` each element's subscript is evaluated as arithmetic by
                // bash like a plain assignment's.
                (false, Item::AssignmentWord(assignment, w)) => {
                    self.declared_elements(assignment)?;
                    args.push(self.word(&w.value)?);
                }
                (true, Item::AssignmentWord(assignment, w)) => {
                    if reads && is_literal_ifs(assignment) {
                        self.word(&w.value)?;
                    } else if named {
                        self.environment_assignment(assignment, w)?;
                    } else {
                        self.shell_assignment(assignment, w)?;
                    }
                }
                (_, Item::ProcessSubstitution(_, sub)) => {
                    self.subshell(&sub.list)?;
                    // The command gets a /dev/fd/N path in its place.
                    args.push(Word::literal_text("/dev/fd/63"));
                }
                (_, Item::IoRedirect(r)) => stdin_fed |= self.redirect(r)?,
            }
        }
        let Some(name_word) = &simple.word_or_name else {
            return Ok(());
        };
        let name = self.word(&name_word.value)?;
        let Some(command) = name.literal() else {
            return Err(ShellError::new(
                Rule::Expansion,
                "the command name is not a literal word (a variable, substitution, glob or brace expansion); write the command out",
                Some(&name_word.value),
            ));
        };
        // Checked as written, then as bash could split it (see `split`); the extra checks
        // leave no statements of their own.
        let mut variants = super::split::variants(&args)?.into_iter();
        if let Some(first) = variants.next() {
            self.run(&command, &first, stdin_fed, false)?;
        }
        for args in variants {
            let mark = self.statements.len();
            self.run(&command, &args, stdin_fed, false)?;
            self.statements.truncate(mark);
        }
        Ok(())
    }

    /// `NAME=value command`: the variable reaches the command's environment, where tools read
    /// configuration and code (`RIPGREP_CONFIG_PATH`, `PERL5OPT`, `GIT_CONFIG_GLOBAL`). Only a
    /// few harmless names may be set this way.
    fn environment_assignment(
        &mut self,
        assignment: &ast::Assignment,
        w: &ast::Word,
    ) -> Result<(), ShellError> {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => n,
        };
        if !super::is_environment_name(name) {
            return Err(ShellError::new(
                Rule::Assignment,
                format!(
                    "`{name}=… command` puts {name} in the command's environment, where tools find configuration and code; only {} may be set before a command",
                    super::ENVIRONMENT_NAMES.join(", ")
                ),
                Some(&w.value),
            ));
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(v) => {
                let word = self.word(&v.value)?;
                super::environment_value(name, word.text().as_deref(), &w.value)
            }
            ast::AssignmentValue::Array(_) => Err(ShellError::new(
                Rule::Assignment,
                format!("{name} cannot be an array"),
                Some(&w.value),
            )),
        }
    }

    /// The elements of a declaration builtin's `name=(…)` or `name[i]=…` argument: subscripts
    /// are arithmetic, values words, and the name an array.
    fn declared_elements(&mut self, assignment: &ast::Assignment) -> Result<(), ShellError> {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(n) => n,
            ast::AssignmentName::ArrayElementName(n, subscript) => {
                self.arithmetic(subscript, "an array subscript")?;
                self.arrays.insert(n.clone());
                n
            }
        };
        if let ast::AssignmentValue::Array(items) = &assignment.value {
            self.arrays.insert(name.clone());
            for (k, v) in items {
                if let Some(k) = k {
                    self.word(&k.value)?;
                    self.arithmetic(&k.value, "an array subscript")?;
                }
                let word = self.word(&v.value)?;
                self.no_unquoted_expansion(&word)?;
            }
        }
        Ok(())
    }

    /// `name=value` on its own: a shell variable.
    fn shell_assignment(&mut self, assignment: &ast::Assignment, w: &ast::Word) -> Result<(), ShellError> {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(n) => n,
            ast::AssignmentName::ArrayElementName(n, subscript) => {
                self.arithmetic(subscript, "an array subscript")?;
                self.arrays.insert(n.clone());
                n
            }
        };
        if super::is_environment_name(name) {
            // Already in the helper's environment, so assigning it changes what every later
            // command gets.
            let ast::AssignmentValue::Scalar(v) = &assignment.value else {
                return Err(ShellError::new(
                    Rule::Assignment,
                    format!("{name} cannot be an array"),
                    Some(&w.value),
                ));
            };
            let word = self.word(&v.value)?;
            super::environment_value(name, word.text().as_deref(), &w.value)?;
            self.assign_from(name, &word);
            return Ok(());
        }
        self.assignable(name, &w.value)?;
        match &assignment.value {
            ast::AssignmentValue::Scalar(v) => {
                let word = self.word(&v.value)?;
                self.assign_from(name, &word);
            }
            ast::AssignmentValue::Array(items) => {
                self.arrays.insert(name.clone());
                self.assign(name, true);
                for (k, v) in items {
                    if let Some(k) = k {
                        self.word(&k.value)?;
                        self.arithmetic(&k.value, "an array subscript")?;
                    }
                    let word = self.word(&v.value)?;
                    self.no_unquoted_expansion(&word)?;
                    self.assign(name, !word.has_glob());
                    self.assign_from(name, &word);
                }
            }
        }
        Ok(())
    }

    /// Whether a program may assign `name` a value it cannot see (`read`, `for`, `getopts`,
    /// arithmetic, `${x:=…}`): not a variable the prelude or the policy guards, and not an
    /// environment name (whose values must be checked).
    pub(super) fn assignable(&self, name: &str, at: &str) -> Result<(), ShellError> {
        if super::is_guarded_var(name) {
            return Err(ShellError::new(
                Rule::Assignment,
                format!("assigning {name} is not allowed: bash, git or the policy relies on its value"),
                Some(at),
            ));
        }
        if super::is_environment_name(name) {
            return Err(ShellError::new(
                Rule::Assignment,
                format!(
                    "{name} is in the helper's environment; it may only be assigned a literal value (`{name}=C`)"
                ),
                Some(at),
            ));
        }
        Ok(())
    }

    /// Refuses an unquoted expansion in a word bash splits and globs.
    pub(super) fn no_unquoted_expansion(&self, word: &Word) -> Result<(), ShellError> {
        if word.unquoted_expansion {
            return Err(ShellError::new(
                Rule::Expansion,
                "an unquoted expansion is split and globbed by the shell; quote it (\"$x\")",
                Some(&word.raw),
            ));
        }
        Ok(())
    }

    /// A redirection. Returns whether it feeds the command's stdin.
    fn redirect(&mut self, r: &ast::IoRedirect) -> Result<bool, ShellError> {
        use ast::IoFileRedirectKind as K;
        match r {
            ast::IoRedirect::File(fd, kind, target) => {
                let reads = matches!(kind, K::Read | K::ReadAndWrite | K::DuplicateInput)
                    && fd.is_none_or(|fd| fd == 0);
                let writes = matches!(kind, K::Write | K::Append | K::Clobber | K::ReadAndWrite);
                match target {
                    ast::IoFileRedirectTarget::Filename(w) => {
                        let word = self.word(&w.value)?;
                        self.redirect_target(&word, writes)?;
                    }
                    ast::IoFileRedirectTarget::Duplicate(w) => {
                        // `>&2`, `<&0`, `>&-`; a file name here is a file like any other.
                        let word = self.word(&w.value)?;
                        let fd_like = word.literal().is_some_and(|l| {
                            !l.is_empty() && l.trim_end_matches('-').chars().all(|c| c.is_ascii_digit())
                        });
                        if !fd_like {
                            self.redirect_target(&word, true)?;
                        }
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => self.subshell(&sub.list)?,
                }
                Ok(reads)
            }
            ast::IoRedirect::HereDocument(..) | ast::IoRedirect::HereString(..) => {
                Err(super::guards::here_documents())
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let word = self.word(&w.value)?;
                self.redirect_target(&word, true)?;
                Ok(false)
            }
        }
    }

    /// A file named by a redirection: a literal, and for output a file of the worktree (no
    /// `..`, no dot-file, where tools look for configuration) or `/dev/null`, `/dev/stdout`,
    /// `/dev/stderr` or `/tmp/…`.
    fn redirect_target(&self, word: &Word, writes: bool) -> Result<(), ShellError> {
        let Some(path) = word.literal() else {
            return Err(ShellError::new(
                Rule::Redirect,
                "a redirection to a file that is not a literal name; write the file name out",
                Some(&word.raw),
            ));
        };
        if !writes {
            return Ok(());
        }
        if matches!(path.as_str(), "/dev/null" | "/dev/stdout" | "/dev/stderr") {
            return Ok(());
        }
        let rel = path.strip_prefix("/tmp/").unwrap_or(&path);
        let hidden = rel.split('/').any(|c| c.starts_with('.') && c != ".");
        if rel.starts_with('/') || rel.is_empty() || hidden {
            return Err(ShellError::new(
                Rule::Redirect,
                "output may go to /dev/null, /dev/stdout, /dev/stderr, /tmp/… or a file of the worktree that is not hidden (no `.` or `..` component: tools read their configuration from dot-files)",
                Some(&word.raw),
            ));
        }
        Ok(())
    }
}

/// How bash uses a variable's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Evaluated {
    /// As an arithmetic expression.
    Arithmetic,
    /// As the name of a variable (indirect expansion).
    Name,
}

/// Where the values of one variable come from.
#[derive(Debug, Default)]
struct Source {
    /// Some value came from outside the program.
    outside: bool,
    /// Variables whose values some value carries.
    from: Vec<String>,
}

/// The variables whose every value is a literal of the program: assigned, never from outside,
/// and carrying only such variables (a least fixed point: a cycle of copies with no outside
/// value is literal).
fn literal_variables(assigns: &HashMap<String, Source>) -> std::collections::HashSet<&str> {
    let mut tainted: std::collections::HashSet<&str> = assigns
        .iter()
        .filter(|(_, s)| s.outside)
        .map(|(n, _)| n.as_str())
        .collect();
    loop {
        let before = tainted.len();
        for (name, source) in assigns {
            if !tainted.contains(name.as_str())
                && source
                    .from
                    .iter()
                    .any(|v| tainted.contains(v.as_str()) || !(assigns.contains_key(v) || is_computed(v)))
            {
                tainted.insert(name);
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    assigns
        .keys()
        .map(String::as_str)
        .filter(|n| !tainted.contains(n))
        .collect()
}

/// Whether a list contains a `cd`, `pushd` or `popd` that changes the directory of the shell
/// running it (not one inside a subshell or substitution).
fn changes_dir(list: &ast::CompoundList) -> bool {
    use ast::CompoundCommand as C;
    let command = |c: &ast::Command| match c {
        ast::Command::Simple(s) => s
            .word_or_name
            .as_ref()
            .is_some_and(|w| matches!(w.value.trim_matches(['"', '\'', '\\']), "cd" | "pushd" | "popd")),
        ast::Command::Compound(compound, _) => match compound {
            C::BraceGroup(b) => changes_dir(&b.list),
            C::IfClause(i) => {
                changes_dir(&i.condition)
                    || changes_dir(&i.then)
                    || i.elses
                        .iter()
                        .flatten()
                        .any(|e| e.condition.as_ref().is_some_and(changes_dir) || changes_dir(&e.body))
            }
            C::CaseClause(c) => c.cases.iter().any(|i| i.cmd.as_ref().is_some_and(changes_dir)),
            C::ForClause(f) => changes_dir(&f.body.list),
            C::ArithmeticForClause(f) => changes_dir(&f.body.list),
            C::WhileClause(w) | C::UntilClause(w) => changes_dir(&w.0) || changes_dir(&w.1.list),
            C::Subshell(_) | C::Arithmetic(_) | C::Coprocess(_) => false,
        },
        ast::Command::Function(_) | ast::Command::ExtendedTest(..) => false,
    };
    list.0.iter().any(|ast::CompoundListItem(and_or, _)| {
        std::iter::once(&and_or.first)
            .chain(and_or.additional.iter().map(|a| match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            }))
            .any(|p| p.seq.len() == 1 && p.seq.iter().any(command))
    })
}

/// Variables assigned inside arithmetic (`i=0`, `i++`, `n+=2`): their values derive from the
/// expression, whose every variable was checked, so they count as literal; they must be
/// assignable.
pub(super) fn arithmetic_assignments(text: &str, checker: &mut Checker<'_>) -> Result<(), ShellError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let rest = text[i..].trim_start();
            let assigned = (rest.starts_with('=') && !rest.starts_with("=="))
                || [
                    "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=", "++", "--",
                ]
                .iter()
                .any(|op| rest.starts_with(op));
            if assigned {
                checker.assignable(&text[start..i], text)?;
                checker.assign(&text[start..i], true);
            }
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// `IFS=` or `IFS=' \t'`: a literal value for the shell's field separators.
fn is_literal_ifs(assignment: &ast::Assignment) -> bool {
    matches!(&assignment.name, ast::AssignmentName::VariableName(n) if n == "IFS")
        && matches!(&assignment.value, ast::AssignmentValue::Scalar(v)
            if !v.value.contains(['$', '`']))
}

/// bash's integer variables: every value assigned to them is evaluated as arithmetic (bash
/// 5.2 evaluates `OPTIND`, `RANDOM`, `SRANDOM` and `HISTCMD`; the others are numeric too, and
/// a literal number is all a program needs to give any of them).
pub(super) fn is_integer_var(name: &str) -> bool {
    matches!(
        name,
        "OPTIND" | "RANDOM" | "SRANDOM" | "HISTCMD" | "SECONDS" | "LINENO" | "OPTERR" | "EPOCHSECONDS"
    )
}

/// Whether a word is bash's `{varname}` (or `{name[sub]}`) form, which before a redirection
/// names a variable to store a new descriptor in.
fn is_fd_variable(raw: &str) -> bool {
    let Some(inner) = raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
        return false;
    };
    let name = inner.split('[').next().unwrap_or_default();
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// bash's own array variables: a declaration builtin parses a value given to one again as
/// `(…)`.
pub(super) const BASH_ARRAYS: &[&str] = &[
    "DIRSTACK",
    "GROUPS",
    "FUNCNAME",
    "PIPESTATUS",
    "BASH_ARGV",
    "BASH_ARGC",
    "BASH_LINENO",
    "BASH_SOURCE",
    "BASH_VERSINFO",
    "BASH_REMATCH",
    "BASH_ALIASES",
    "BASH_CMDS",
    "COMP_WORDS",
    "COPROC",
    "MAPFILE",
    "READLINE_ARGUMENT",
];
