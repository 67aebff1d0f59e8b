//! Any text given as `.ai/helpers.toml`: an error or definitions, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wrun_host::definitions::{DefinitionsFile, Kind};

fuzz_target!(|text: &str| {
    if let Ok(file) = DefinitionsFile::parse("fuzz:.ai/helpers.toml", text) {
        for def in &file.helpers {
            // Validation held: each helper has what its kind needs and nothing else.
            match def.kind {
                Kind::Wasm => assert!(def.module.is_some() && def.command.is_none() && def.run.is_none()),
                Kind::Native => assert!(def.command.as_ref().is_some_and(|c| !c.is_empty()) && def.run.is_none()),
                Kind::Shell => assert!(def.run.is_some() && def.command.is_none() && def.module.is_none()),
            }
            assert!(file.get(&def.name).is_some());
        }
    }
});
