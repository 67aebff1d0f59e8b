//! Any text given as a shell helper's `run`: refused or checked, never a panic; what passes
//! has at most 50 statements, each a command of the allowlist.
//!
//! `shell::check` turns a panic inside the third-party parser into a refusal; libFuzzer's panic
//! hook would abort on it anyway, so the hook installed here lets those through and aborts on a
//! panic anywhere else (ours).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wrun_host::shell::{MAX_STATEMENTS, Rules, check};

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
        let rules = Rules::default();
        if let Ok(checked) = check(text, &rules) {
            assert!(checked.statements.len() <= MAX_STATEMENTS);
            for s in &checked.statements {
                let name = s.command.rsplit('/').next().unwrap_or(&s.command);
                // Whatever passed is a builtin that runs nothing, an upstream script or a
                // command of the table.
                assert!(
                    s.builtin || s.command.starts_with(".ai/") || s.command.starts_with("./.ai/")
                        || rules.table.names().contains(&name),
                    "{text:?} passed with {}", s.command
                );
                assert!(!matches!(name, "eval" | "exec" | "trap" | "alias" | "awk" | "xargs"), "{text:?} passed with {name}");
            }
        }
    }
);
