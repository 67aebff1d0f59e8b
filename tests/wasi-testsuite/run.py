#!/usr/bin/env python3
"""Runs the WebAssembly wasi-testsuite (preview 1) against `wrun run`, the way the suite's
wasmtime adapter runs `wasmtime run`: `--env K=V` only, the test's root preopened read-write as
`/`, arguments verbatim after `--`, the exit code passed through.

The suite is another project's and on no registry: point this at a copy of its prebuilt tests
(branch `prod/testsuite-base` of https://github.com/WebAssembly/wasi-testsuite, directories
`tests/*/testsuite/wasm32-wasip1`). Each suite is copied to a temporary directory first, so that
tests that write start from the files as shipped.

    tests/wasi-testsuite/run.py [--wrun PATH] [--wasmtime PATH] SUITE_DIR...

Exit status 0 when every test passes. Needs Python 3.9 or later (the suite's own runner needs
3.12).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT_SECONDS = 60


def spec_of(wasm: Path) -> dict:
    """The test's specification as run/read/wait steps (legacy or operation-based)."""
    path = wasm.with_suffix(".json")
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if "operations" in config:
        ops = config["operations"]
        if config.get("proposals"):
            raise ValueError(f"needs proposals {config['proposals']}")
    else:
        ops = [{"type": "run", "args": config.get("args", []), "env": config.get("env", {}),
                "root": config.get("root")}]
        for stream in ("stdout", "stderr"):
            if config.get(stream) is not None:
                ops.append({"type": "read", "id": stream, "payload": config[stream]})
        ops.append({"type": "wait", "exit_code": config.get("exit_code", 0)})
    run = [op for op in ops if op["type"] == "run"]
    unsupported = {op["type"] for op in ops} - {"run", "read", "wait"}
    if len(run) != 1 or unsupported:
        raise ValueError(f"unsupported operations {sorted(unsupported) or ops}")
    return {"run": run[0], "checks": [op for op in ops if op["type"] != "run"]}


def argv_for(engine: str, binary: str, wasm: Path, run: dict) -> list:
    """The command line, as the wasmtime adapter builds it (and its equivalent for wrun)."""
    env = [item for k, v in run.get("env", {}).items() for item in ("--env", f"{k}={v}")]
    root = run.get("root")
    if engine == "wasmtime":
        dirs = ["--dir", f"{wasm.parent / root}::/"] if root else []
        return [binary, "run", *env, *dirs, str(wasm), *run.get("args", [])]
    dirs = ["--dir", f"{wasm.parent / root}::/:rw"] if root else []
    return [binary, "run", "--no-worktree", "--stdin", "-", *env, *dirs, str(wasm), "--",
            *run.get("args", [])]


def run_test(engine: str, binary: str, wasm: Path) -> list:
    """Failures of one test (empty when it passes)."""
    try:
        spec = spec_of(wasm)
    except ValueError as e:
        return [f"cannot run: {e}"]
    argv = argv_for(engine, binary, wasm, spec["run"])
    try:
        proc = subprocess.run(argv, stdin=subprocess.PIPE, capture_output=True,
                              timeout=TIMEOUT_SECONDS, cwd=wasm.parent, check=False)
    except subprocess.TimeoutExpired:
        return ["timed out"]
    out = {"stdout": proc.stdout.decode("utf-8", "replace"),
           "stderr": proc.stderr.decode("utf-8", "replace")}
    failures = []
    for check in spec["checks"]:
        if check["type"] == "read":
            want = check.get("payload", "")
            got = out[check.get("id", "stdout")][: len(want)]
            if got != want:
                failures.append(f"{check.get('id', 'stdout')}: expected {want!r}, got {got!r}")
        elif check.get("exit_code", 0) != proc.returncode:
            failures.append(f"exit code: expected {check.get('exit_code', 0)}, got "
                            f"{proc.returncode}; stderr: {out['stderr'][-400:]!r}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wrun", default="wrun", help="the wrun binary (default: on PATH)")
    parser.add_argument("--wasmtime", help="run the wasmtime CLI instead, for comparison")
    parser.add_argument("suites", nargs="+", type=Path)
    args = parser.parse_args()
    engine, binary = ("wasmtime", args.wasmtime) if args.wasmtime else ("wrun", args.wrun)
    # Tests run in their own directories: a relative path is this directory's.
    found = shutil.which(binary) if "/" not in binary else str(Path(binary).resolve())
    if found is None or not Path(found).is_file():
        print(f"{binary}: no such program", file=sys.stderr)
        return 2
    binary = found
    passed = failed = 0
    for suite in args.suites:
        if not (suite / "manifest.json").exists():
            print(f"{suite}: no manifest.json: not a wasi-testsuite suite", file=sys.stderr)
            return 2
        name = json.loads((suite / "manifest.json").read_text(encoding="utf-8"))["name"]
        with tempfile.TemporaryDirectory(prefix="wasi-testsuite-") as tmp:
            copy = Path(tmp) / "suite"
            shutil.copytree(suite, copy, symlinks=True)
            for leftover in copy.rglob("*.cleanup"):
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
            for wasm in sorted(copy.glob("*.wasm")):
                failures = run_test(engine, binary, wasm)
                if failures:
                    failed += 1
                    print(f"FAIL {name}/{wasm.stem}: " + "; ".join(failures))
                else:
                    passed += 1
    print(f"{engine}: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
