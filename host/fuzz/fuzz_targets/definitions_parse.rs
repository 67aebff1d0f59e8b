//! Any text given as `.ai/helpers.toml`: an error or definitions, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wrun_host::definitions::{Definitions, HelperProgram};

fuzz_target!(|text: &str| {
    if let Ok(file) = Definitions::parse("fuzz:.ai/helpers.toml", text) {
        for def in &file.helpers {
            // Validation held: each helper has what its kind needs.
            match &def.program {
                HelperProgram::Wasm { module, .. } => assert!(!module.is_empty()),
                HelperProgram::Native { program, .. } => assert!(!program.is_empty()),
                HelperProgram::Shell { run } => assert!(!run.trim().is_empty()),
            }
            assert!(file.get(&def.name).is_some());
        }
    }
});
