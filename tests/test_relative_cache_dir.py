"""``CUDA_RESOLVE_CACHE_DIR=./cache`` (a relative path, as a lab's job script may set it) is
taken from the current folder once: sync wrote it into a ``file://`` URL and stopped with a
traceback (exit 70: "relative path can't be expressed as a file URI"; user walk 2026-12-05 F1).
The lock of tests/test_lock.py (its small wheels)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)

from cuda_resolve.cli import main
from cuda_resolve.paths import cache_root


def test_a_relative_cache_folder_is_the_current_folders_and_sync_works_in_it(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    work = tmp_path / "job"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", "cache")
    assert cache_root() == work / "cache"
    words = ["sync", str(locked), "--name", "a100", "--python", str(python)]
    assert main([*words, "--dry-run"]) == 0
    assert main(words) == 0
    assert _installed(python)["torch"] == "2.14.1+cu126"
    assert "Traceback" not in capsys.readouterr().err
    assert list((work / "cache" / "lock-wheels").rglob("*.whl"))
