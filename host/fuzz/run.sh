#!/usr/bin/env bash
# Builds the host's fuzz targets with cargo-fuzz and runs each for SECONDS (default 20):
#   policy_parse       policy files (policies/*.toml as seeds)
#   definitions_parse  upstream .ai/helpers.toml files
#   shell_check        shell-string helpers
# cargo-fuzz (crates.io) is installed into host/fuzz/target/tools if missing. The targets are
# built without a sanitizer (the host crate forbids unsafe code) on the stable toolchain;
# RUSTC_BOOTSTRAP lets it accept the coverage flags cargo-fuzz passes. A crash, or one input
# taking over 10 s, fails the script and leaves the input in host/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-20}"

if [ ! -x target/tools/bin/cargo-fuzz ]; then
    cargo install cargo-fuzz --locked --version 0.13.2 --root target/tools
fi
export RUSTC_BOOTSTRAP=1
fuzz=(target/tools/bin/cargo-fuzz)
"${fuzz[@]}" build -s none
for target in policy_parse definitions_parse shell_check; do
    mkdir -p "corpus-run/$target"
    log="target/fuzz-$target.log"
    if ! "${fuzz[@]}" run -s none "$target" "corpus-run/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz target $target failed; the input is in host/fuzz/artifacts/$target/" >&2
        exit 1
    fi
    echo "$target: $(grep -E '^stat::number_of_executed_units' "$log" | cut -d: -f4 | tr -d ' ') inputs in ${seconds}s, no crash"
done
