//! Builds the guest programs for wasm32-wasip1 from source, so no `.wasm` is ever committed.
//! The paths reach the tests and the benchmark as `WRUN_WASM_<CRATE>` compile-time variables.

// A build script is not part of wrun: it reads cargo's variables and runs cargo.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::Command;

const GUESTS: &[&str] = &[
    "wrun-test-guest",
    "tree-stats",
    "secret-scan",
    "line-hygiene",
    "large-files",
    "config-syntax",
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("tests/ lives in the workspace")
        .to_owned();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = out_dir.join("wasm-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    for dir in ["tests/guest", "helpers", "guest-sdk"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }

    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args(["build", "--release", "--target", "wasm32-wasip1", "--target-dir"])
        .arg(&target_dir);
    for guest in GUESTS {
        cmd.args(["-p", guest]);
    }
    // The outer build's flags are for the host; the guests are built for wasm.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("running cargo to build the wasm guests");
    assert!(
        status.success(),
        "building the wasm32-wasip1 guests failed; is the target installed? Run `rustup target add wasm32-wasip1`"
    );
    for guest in GUESTS {
        let path = target_dir
            .join("wasm32-wasip1/release")
            .join(format!("{guest}.wasm"));
        assert!(path.exists(), "{} was not built", path.display());
        let var = format!("WRUN_WASM_{}", guest.to_uppercase().replace('-', "_"));
        println!("cargo:rustc-env={var}={}", path.display());
    }
}
