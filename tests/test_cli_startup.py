"""The command lines import the executor lazily: `--help` and `--version` load no builder,
stash, pin or HTTP code (issue 14: start-up stays cheap)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "cuda_resolve.install.transaction",
    "cuda_resolve.install.stash",
    "cuda_resolve.build.builder",
    "cuda_resolve.install.pins",
    "cuda_resolve.install.prepare",
    "requests",
)

_PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ARGV
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module(MODULE, run_name="__main__")
    except SystemExit:
        pass
print(json.dumps([name for name in HEAVY if name in sys.modules]))
"""


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("pip_plugin", ["cuda-pip", "install", "--help"]),
        ("cuda_resolve", ["cuda-resolve", "install", "--help"]),
        ("cuda_resolve", ["cuda-resolve", "apply", "--help"]),
        ("cuda_resolve", ["cuda-resolve", "plan", "--help"]),
        ("cuda_resolve", ["cuda-resolve", "--version"]),
    ],
)
def test_help_and_version_load_no_executor(module: str, argv: list[str]) -> None:
    code = f"MODULE = {module!r}\nARGV = {argv!r}\nHEAVY = {list(HEAVY)!r}\n{_PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
