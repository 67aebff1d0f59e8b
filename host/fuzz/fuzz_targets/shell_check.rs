//! Any text given as a shell helper's `run`: refused or checked, never a panic; what passes
//! has at most 50 statements and none of them is a denied command.
//!
//! `shell::check` turns a panic inside the third-party parser into a refusal; libFuzzer's panic
//! hook would abort on it anyway, so the hook installed here lets those through and aborts on a
//! panic anywhere else (ours).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wrun_host::shell::{MAX_STATEMENTS, ShellRules, check, normalize};

fuzz_target!(
    init: {
        let abort_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.location().is_some_and(|l| l.file().contains("brush-parser")) {
                return;
            }
            abort_hook(info);
        }));
    },
    |text: &str| {
        let rules = ShellRules::default();
        if let Ok(checked) = check(text, &rules) {
            assert!(checked.statements.len() <= MAX_STATEMENTS);
            for s in &checked.statements {
                let n = normalize(&s.command);
                assert!(!matches!(n.as_str(), "eval" | "exec" | "trap" | "alias"), "{text:?} passed with {n}");
            }
        }
    }
);
