//! Words bash may make several of, or none: brace expansion (`{a,b}`, `{1..3}`), pathname
//! expansion (a glob matches any number of files, and a pull request chooses their names), and
//! spreads (`"$@"`, `"${a[@]}"`, `"x${a[@]}"`, `"${x:+"${a[@]}"}"`).
//!
//! A grammar reads its arguments by position (an option's value, a duration, a `test` operand),
//! so a word that becomes several words moves every later one. The checker therefore never
//! takes such a word as one: brace expansions are expanded into the words bash makes of them
//! (exactly, they are literal), and a command with a glob or a spread is checked once more for
//! each way it can expand: the word as two words (a first one, and one that may be anything, an
//! option included) and, for a bare spread, as no word at all.
//!
//! Quoting is per character here: bash treats `["-"]x` as a bracket expression (it matches a
//! file named `-x`) and `{"a",b}` as a brace expansion, though quotes sit inside them.

use super::word::{Seg, Set, Tok, Values, Word};
use super::{Rule, ShellError};

/// The most words a command's brace expansions may make.
pub(crate) const MAX_BRACE_WORDS: usize = 256;

/// Past this many words that may split, a command is checked with all of them split (and all
/// of them gone) at once rather than one by one.
const MAX_ONE_BY_ONE: usize = 8;

/// One character of a word (and whether it is quoted), or an expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Char(char, bool),
    Atom(Seg),
}

/// The word as items.
pub(crate) fn items(word: &Word) -> Vec<Item> {
    let mut out = Vec::new();
    for seg in &word.segs {
        match seg {
            Seg::Quoted(t) => out.extend(t.chars().map(|c| Item::Char(c, true))),
            Seg::Unquoted(t) => out.extend(t.chars().map(|c| Item::Char(c, false))),
            other => out.push(Item::Atom(other.clone())),
        }
    }
    out
}

/// A word made of `items`, with what `from` carries (its variables, whether it is opaque);
/// `None` when bash would drop it (nothing left of a word without quotes).
fn word_of(from: &Word, items: &[Item]) -> Option<Word> {
    let quoted = from.segs.iter().any(|s| matches!(s, Seg::Quoted(_)));
    if items.is_empty() && !quoted {
        return None;
    }
    let mut segs: Vec<Seg> = Vec::new();
    for item in items {
        match (item, segs.last_mut()) {
            (Item::Char(c, true), Some(Seg::Quoted(t))) | (Item::Char(c, false), Some(Seg::Unquoted(t))) => {
                t.push(*c)
            }
            (Item::Char(c, true), _) => segs.push(Seg::Quoted(c.to_string())),
            (Item::Char(c, false), _) => segs.push(Seg::Unquoted(c.to_string())),
            (Item::Atom(seg), _) => segs.push(seg.clone()),
        }
    }
    if segs.is_empty() {
        segs.push(Seg::Quoted(String::new()));
    }
    Some(Word {
        raw: from.raw.clone(),
        multi: segs.iter().any(|s| matches!(s, Seg::Spread)),
        segs,
        unquoted_expansion: from.unquoted_expansion,
        vars: from.vars.clone(),
        opaque: from.opaque,
    })
}

/// Whether bash would glob the word: an unquoted `*` or `?`, or an unquoted `[` with a `]`
/// after it (quoted characters between them included).
pub(crate) fn is_glob(items: &[Item]) -> bool {
    items.iter().enumerate().any(|(i, item)| match item {
        Item::Char('*' | '?', false) => true,
        Item::Char('[', false) => closing_bracket(items, i).is_some(),
        _ => false,
    })
}

/// The `]` closing a bracket expression opened at `open` (conservatively, any later `]`: one
/// right after the `[` belongs to the set when another follows).
fn closing_bracket(items: &[Item], open: usize) -> Option<usize> {
    let close = |from: usize| (from..items.len()).find(|&j| matches!(items[j], Item::Char(']', _)));
    close(open + 2).or_else(|| close(open + 1))
}

/// Whether the word holds a brace expansion bash would expand.
pub(crate) fn has_braces(items: &[Item]) -> bool {
    (0..items.len()).any(|i| matches!(items[i], Item::Char('{', false)) && group(items, i).is_some())
}

/// The words bash's brace expansion makes of `items`, or `Err` past `limit` words.
pub(crate) fn brace_expand(items: &[Item], limit: usize) -> Result<Vec<Vec<Item>>, ()> {
    for start in 0..items.len() {
        if !matches!(items[start], Item::Char('{', false)) {
            continue;
        }
        let Some((end, alternatives)) = group(items, start) else {
            continue;
        };
        if alternatives.len() > limit {
            return Err(());
        }
        let mut out = Vec::new();
        for alternative in alternatives {
            let mut word = items[..start].to_vec();
            word.extend(alternative);
            word.extend_from_slice(&items[end + 1..]);
            for expanded in brace_expand(&word, limit)? {
                out.push(expanded);
                if out.len() > limit {
                    return Err(());
                }
            }
        }
        return Ok(out);
    }
    Ok(vec![items.to_vec()])
}

/// The brace group opened at `start`: where it closes and its alternatives (split at its
/// top-level unquoted commas, or a sequence `{1..5}`, `{a..e}`, `{1..9..2}`); `None` when bash
/// would leave it as it is (`{}`, `{a}`, no closing brace).
fn group(items: &[Item], start: usize) -> Option<(usize, Vec<Vec<Item>>)> {
    let mut depth = 0usize;
    let mut commas = Vec::new();
    for (i, item) in items.iter().enumerate().skip(start) {
        match item {
            Item::Char('{', false) => depth += 1,
            Item::Char('}', false) => {
                depth -= 1;
                if depth == 0 {
                    let inner = &items[start + 1..i];
                    if !commas.is_empty() {
                        let mut alternatives = Vec::new();
                        let mut from = start + 1;
                        for &comma in &commas {
                            alternatives.push(items[from..comma].to_vec());
                            from = comma + 1;
                        }
                        alternatives.push(items[from..i].to_vec());
                        return Some((i, alternatives));
                    }
                    return sequence(inner).map(|alternatives| (i, alternatives));
                }
            }
            Item::Char(',', false) if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    None
}

/// A sequence expression's words: `1..5`, `05..10`, `a..e`, with an optional `..step`.
fn sequence(inner: &[Item]) -> Option<Vec<Vec<Item>>> {
    let text: String = inner
        .iter()
        .map(|item| match item {
            Item::Char(c, false) => Some(*c),
            _ => None,
        })
        .collect::<Option<String>>()?;
    let parts: Vec<&str> = text.split("..").collect();
    let (from, to, step) = match parts.as_slice() {
        [a, b] => (*a, *b, None),
        [a, b, s] => (*a, *b, Some(s.parse::<i64>().ok()?)),
        _ => return None,
    };
    let chars = |t: String| t.chars().map(|c| Item::Char(c, false)).collect::<Vec<_>>();
    let step = step.map_or(1, i64::unsigned_abs).max(1);
    if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let count = a.abs_diff(b) / step + 1;
        if count > MAX_BRACE_WORDS as u64 {
            // More words than a command may make: say so rather than guess.
            return Some(vec![Vec::new(); MAX_BRACE_WORDS + 1]);
        }
        let width = if [from, to]
            .iter()
            .any(|t| t.trim_start_matches('-').starts_with('0') && t.len() > 1)
        {
            from.len().max(to.len())
        } else {
            0
        };
        let mut out = Vec::new();
        let mut n = a;
        for _ in 0..count {
            out.push(chars(format!("{n:0width$}")));
            n = if a <= b { n + step as i64 } else { n - step as i64 };
        }
        return Some(out);
    }
    let (mut a, mut b) = (from.chars(), to.chars());
    let (Some(a), None, Some(b), None) = (a.next(), a.next(), b.next(), b.next()) else {
        return None;
    };
    if !a.is_ascii_alphabetic() || !b.is_ascii_alphabetic() {
        return None;
    }
    let (lo, hi) = (a.min(b) as u8, a.max(b) as u8);
    let mut out: Vec<Vec<Item>> = (lo..=hi)
        .step_by(usize::try_from(step).ok()?)
        .map(|c| chars((c as char).to_string()))
        .collect();
    if a > b {
        out.reverse();
    }
    Some(out)
}

/// Every shape the word could expand to, as glob tokens: literal text as characters, globs as
/// what they match, expansions as any name (no `/`), a variable as each value the program
/// gives it; one shape per brace alternative (bounded: past `max`, "anything").
pub(crate) fn shapes(word: &Word, values: &Values, max: usize) -> Vec<Vec<Tok>> {
    let Ok(words) = brace_expand(&items(word), max) else {
        return vec![vec![Tok::Many(Set::Any)]];
    };
    let chars = |t: &str| -> Vec<Tok> { t.chars().map(|c| Tok::One(Set::Char(c))).collect() };
    let mut all = Vec::new();
    for items in words {
        let mut shapes: Vec<Vec<Tok>> = vec![Vec::new()];
        let mut i = 0;
        while i < items.len() {
            let alternatives: Vec<Vec<Tok>> = match &items[i] {
                Item::Char('*', false) => vec![vec![Tok::Many(Set::NotSlash)]],
                Item::Char('?', false) => vec![vec![Tok::One(Set::NotSlash)]],
                Item::Char('[', false) if closing_bracket(&items, i).is_some() => {
                    i = closing_bracket(&items, i).unwrap_or(i);
                    vec![vec![Tok::One(Set::NotSlash)]]
                }
                Item::Char(c, _) => vec![vec![Tok::One(Set::Char(*c))]],
                Item::Atom(Seg::Var(name)) => match values.get(name) {
                    Some(Some(known)) => known.iter().map(|v| chars(v)).collect(),
                    _ => vec![vec![Tok::Many(Set::NotSlash)]],
                },
                // An expansion may fill in a name, not make path structure: a word whose every
                // `/` comes from outside is a value from outside, not a path the program names.
                Item::Atom(_) => vec![vec![Tok::Many(Set::NotSlash)]],
            };
            i += 1;
            if shapes.len() * alternatives.len() > max {
                for shape in &mut shapes {
                    shape.push(Tok::Many(Set::NotSlash));
                }
                continue;
            }
            shapes = shapes
                .iter()
                .flat_map(|shape| {
                    alternatives.iter().map(move |alt| {
                        let mut s = shape.clone();
                        s.extend(alt.iter().copied());
                        s
                    })
                })
                .collect();
        }
        all.extend(shapes);
        if all.len() > max {
            return vec![vec![Tok::Many(Set::Any)]];
        }
    }
    all
}

/// The argument lists a command is checked with: brace expansions expanded, then the list as
/// written, and for every word that may become several (a glob, a spread) the list with it as
/// two words, and with a bare spread gone.
pub(crate) fn variants(args: &[Word]) -> Result<Vec<Vec<Word>>, ShellError> {
    let mut words: Vec<Word> = Vec::with_capacity(args.len());
    for arg in args {
        let items = items(arg);
        if !has_braces(&items) {
            words.push(arg.clone());
            continue;
        }
        let expanded = brace_expand(&items, MAX_BRACE_WORDS).map_err(|()| too_many(arg))?;
        for expanded in expanded {
            if let Some(word) = word_of(arg, &expanded) {
                super::guards::path(&word, &Values::new())?;
                words.push(word);
            }
        }
        if words.len() > MAX_BRACE_WORDS {
            return Err(too_many(arg));
        }
    }
    let splitting: Vec<usize> = (0..words.len()).filter(|&i| words[i].may_split()).collect();
    let mut out = vec![words.clone()];
    if splitting.is_empty() {
        return Ok(out);
    }
    let with = |i: usize, replacement: Vec<Word>, list: &mut Vec<Word>| {
        list.splice(i..=i, replacement);
    };
    if splitting.len() <= MAX_ONE_BY_ONE {
        for &i in &splitting {
            let mut list = words.clone();
            with(i, several(&words[i]), &mut list);
            out.push(list);
            if may_vanish(&words[i]) {
                let mut list = words.clone();
                list.remove(i);
                out.push(list);
            }
        }
    }
    let mut all_several = words.clone();
    let mut all_gone = words.clone();
    for &i in splitting.iter().rev() {
        with(i, several(&words[i]), &mut all_several);
        if may_vanish(&words[i]) {
            all_gone.remove(i);
        }
    }
    out.push(all_several);
    out.push(all_gone);
    Ok(out)
}

fn too_many(arg: &Word) -> ShellError {
    ShellError::new(
        Rule::Expansion,
        format!("brace expansion makes more than {MAX_BRACE_WORDS} words; write the words out or loop"),
        Some(&arg.raw),
    )
}

/// A word that may become several, as two: for a glob, two words of its shape; for a spread,
/// what comes before it with its first element, and its last element (which may be anything,
/// an option included) with what comes after.
fn several(word: &Word) -> Vec<Word> {
    let items = items(word);
    let Some(at) = items.iter().position(|i| matches!(i, Item::Atom(Seg::Spread))) else {
        return vec![word.clone(), word.clone()];
    };
    let unknown = |items: &[Item]| -> Vec<Item> {
        items
            .iter()
            .map(|i| match i {
                Item::Atom(Seg::Spread) => Item::Atom(Seg::Unknown),
                other => other.clone(),
            })
            .collect()
    };
    let mut first = unknown(&items[..at]);
    first.push(Item::Atom(Seg::Unknown));
    let mut last = vec![Item::Atom(Seg::Unknown)];
    last.extend(unknown(&items[at + 1..]));
    let opaque = |mut w: Word| {
        w.opaque = true;
        w
    };
    [first, last]
        .iter()
        .filter_map(|items| word_of(word, items))
        .map(opaque)
        .collect()
}

/// Whether bash may make no word at all of it: spreads and nothing else (`"$@"` with no
/// arguments, an empty array).
fn may_vanish(word: &Word) -> bool {
    word.multi && items(word).iter().all(|i| matches!(i, Item::Atom(Seg::Spread)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(text: &str, quoted: bool) -> Vec<Item> {
        text.chars().map(|c| Item::Char(c, quoted)).collect()
    }

    fn text(items: &[Item]) -> String {
        items
            .iter()
            .map(|i| match i {
                Item::Char(c, _) => *c,
                Item::Atom(_) => '$',
            })
            .collect()
    }

    fn expand(parts: &[(&str, bool)]) -> Vec<String> {
        let items: Vec<Item> = parts.iter().flat_map(|(t, q)| chars(t, *q)).collect();
        brace_expand(&items, MAX_BRACE_WORDS)
            .expect("bounded")
            .iter()
            .map(|w| text(w))
            .collect()
    }

    #[test]
    fn brace_expansion_makes_the_words_bash_makes() {
        assert_eq!(expand(&[("a{b,c}d", false)]), ["abd", "acd"]);
        assert_eq!(expand(&[("{x,-o,-exec,sh}", false)]), ["x", "-o", "-exec", "sh"]);
        assert_eq!(expand(&[("{a{b,c}}", false)]), ["{ab}", "{ac}"]);
        assert_eq!(expand(&[("{a,b}{1,2}", false)]), ["a1", "a2", "b1", "b2"]);
        assert_eq!(expand(&[("x{,a}", false)]), ["x", "xa"]);
        assert_eq!(expand(&[("{1..3}", false)]), ["1", "2", "3"]);
        assert_eq!(expand(&[("{08..10}", false)]), ["08", "09", "10"]);
        assert_eq!(expand(&[("{3..1}", false)]), ["3", "2", "1"]);
        assert_eq!(expand(&[("{1..9..4}", false)]), ["1", "5", "9"]);
        assert_eq!(expand(&[("{c..a}", false)]), ["c", "b", "a"]);
        // Quoted braces and commas are text; quotes inside a group do not stop it.
        assert_eq!(expand(&[("{a,b}", true)]), ["{a,b}"]);
        assert_eq!(expand(&[("{", false), ("a", true), (",b}", false)]), ["a", "b"]);
        assert_eq!(
            expand(&[("{a,", false), ("b,c", true), ("}", false)]),
            ["a", "b,c"]
        );
        for literal in ["{}", "{a}", "{a,b", "a}", "{1..}", "{a..bc}"] {
            assert_eq!(expand(&[(literal, false)]), [literal]);
        }
        let items = chars("{1..100000}", false);
        assert!(brace_expand(&items, MAX_BRACE_WORDS).is_err());
    }

    #[test]
    fn globs_are_found_across_quotes() {
        let glob = |parts: &[(&str, bool)]| {
            let items: Vec<Item> = parts.iter().flat_map(|(t, q)| chars(t, *q)).collect();
            is_glob(&items)
        };
        assert!(glob(&[("[", false), ("-", true), ("]x", false)]));
        assert!(glob(&[("a*", false)]));
        assert!(!glob(&[("a*", true)]));
        assert!(!glob(&[("[", false)]));
        assert!(!glob(&[("[a]", true)]));
    }
}
