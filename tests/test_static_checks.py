"""The tree stays lint-clean and type-checks strictly (ruff and mypy, configured in
pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", "cuda_resolve", "conda_plugin", "pip_plugin", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
