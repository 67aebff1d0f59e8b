//! Any text given as a policy file: an error or a policy, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(policy) = wrun_host::policy::Policy::parse(std::path::Path::new("fuzz.toml"), text) {
        // A policy that loads is internally consistent: its defaults are within its ceilings.
        assert!(policy.defaults.validate().is_ok());
        assert!(policy.defaults.timeout <= policy.ceilings.timeout);
        assert!(policy.defaults.stdout_cap <= policy.ceilings.stdout_cap);
    }
});
