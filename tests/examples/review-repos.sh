#!/usr/bin/env bash
# Makes a small review set-up under DIR: DIR/upstream, a repository whose default branch (main)
# defines helpers in .ai/helpers.toml, and DIR/pr-123, a clone of it with a pull request's
# changes: a shell script with a quoting bug, a credential, an unused import, and its own edit of
# .ai/ (which wrun ignores). Run from the repository root after building tree-stats and
# secret-scan for wasm32-wasip1:
#
#   tests/examples/review-repos.sh /tmp/review
#
# DIR/upstream and DIR/pr-123 are replaced if they exist.
set -euo pipefail
dir=${1:?usage: tests/examples/review-repos.sh DIR}
module=target/wasm32-wasip1/release/tree-stats.wasm
scanner=target/wasm32-wasip1/release/secret-scan.wasm
for m in "$module" "$scanner"; do
    [ -f "$m" ] || {
        echo "review-repos.sh: $m is missing; build it first: cargo build --release --target wasm32-wasip1 -p tree-stats -p secret-scan" >&2
        exit 1
    }
done
git() { command git -c user.name=review -c user.email=review@example.com -c init.defaultBranch=main "$@"; }

rm -rf "$dir/upstream" "$dir/pr-123"
mkdir -p "$dir/upstream/.ai/helpers" "$dir/upstream/scripts" "$dir/upstream/src"
up=$dir/upstream
cp "$module" "$up/.ai/helpers/tree-stats.wasm"
cp "$scanner" "$up/.ai/helpers/secret-scan.wasm"
pin=$(sha256sum "$up/.ai/helpers/tree-stats.wasm" | cut -d' ' -f1)
scanner_pin=$(sha256sum "$up/.ai/helpers/secret-scan.wasm" | cut -d' ' -f1)
cat > "$up/.ai/helpers.toml" <<TOML
version = 1

[[helper]]
name = "stats"
kind = "wasm"
module = ".ai/helpers/tree-stats.wasm"
sha256 = "$pin"

[[helper]]
name = "shellcheck"
kind = "native"
command = ["shellcheck", "--format", "gcc"]
model_args = { max = 16, flags = ["-S="] }
limits = { timeout = "60s" }

[[helper]]
name = "lint"
kind = "shell"
run = "shellcheck -f gcc -- scripts/*.sh && grep -rn TODO -- src"

[[helper]]
name = "secrets"
kind = "wasm"
module = ".ai/helpers/secret-scan.wasm"
sha256 = "$scanner_pin"

[[helper]]
name = "ruff"
kind = "native"
command = [".ai/ruff-findings.py"]
TOML
cat > "$up/.ai/ruff-findings.py" <<'PY'
#!/usr/bin/env python3
"""Runs ruff on the pull request's changed Python files and prints its diagnostics as wrun
findings (JSON Lines on stdout). Exits 1 when it found something."""
import json
import subprocess
import sys

try:
    changes = json.load(sys.stdin)
    paths = [f["path"] for f in changes.get("files", []) if f["path"].endswith(".py")]
except ValueError:
    paths = ["."]
if not paths:
    sys.exit(0)
out = subprocess.run(
    ["ruff", "check", "--no-cache", "--exit-zero", "--output-format", "json", "--", *paths],
    capture_output=True, text=True, check=True,
)
found = 0
for d in json.loads(out.stdout or "[]"):
    print(json.dumps({"wrun_finding": 1, "path": d["filename"].removeprefix("/work/"),
                      "line": d["location"]["row"], "severity": "warning",
                      "rule": d.get("code") or "ruff", "message": d["message"]}))
    found += 1
sys.exit(1 if found else 0)
PY
chmod +x "$up/.ai/ruff-findings.py"
printf '#!/bin/sh\nset -eu\necho "deploying"\n' > "$up/scripts/deploy.sh"
printf 'def main():\n    return 0\n' > "$up/src/app.py"
git -C "$up" init -q
git -C "$up" add -A
git -C "$up" commit -qm "upstream"

git clone -q "$up" "$dir/pr-123"
pr=$dir/pr-123
printf '#!/bin/sh\nset -eu\ntarget=$1\ncp build/* $target\n' > "$pr/scripts/deploy.sh"
printf 'import os\n\nAWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # TODO: read it from the environment\n\ndef main():\n    return 0\n' > "$pr/src/app.py"
# The pull request's own "upstream" script: shadowed by upstream's, never run.
printf '#!/bin/sh\necho the pull request ran this\n' > "$pr/.ai/ruff-findings.py"
printf 'version = 1\n[[helper]]\nname = "stats"\nkind = "native"\ncommand = ["sh", "-c", "echo the pull request ran this"]\n' > "$pr/.ai/helpers.toml"
git -C "$pr" checkout -qb pr-123
git -C "$pr" add -A
git -C "$pr" commit -qm "the pull request"
echo "$dir/upstream and $dir/pr-123 are ready"
