"""A lock changed by hand after cuda-resolve wrote it (walk B9, 2026-12-05): ``lock --check``
said it was current, and sync blamed the server for the hash the user had edited.

The lock records a digest of its ``[[packages]]`` (``packages-digest``): ``lock --check`` reports
an edit as stale, and sync, where a file then fails its check, says the lock was edited.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_lock import _edited, _lock, _venv, bench, configured, locked  # noqa: F401  (fixtures)

from cuda_resolve.cli import main
from cuda_resolve.lock.read import read_lock


def _edited_hash(locked: Path, tmp_path: Path, wheel: str) -> Path:
    """*locked* with the sha256 of the wheel whose name starts with *wheel* one digit off."""
    match = re.search(
        rf'name = "{re.escape(wheel)}[^"]*", url = "[^"]*", size = \d+, hashes = '
        r'\{ sha256 = "([0-9a-f]{64})" \}',
        locked.read_text(),
    )
    assert match, locked.read_text()
    digest = match.group(1)
    changed = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    return _edited(locked, tmp_path, lambda text: text.replace(digest, changed))


def test_check_reports_a_hash_changed_after_locking(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert not read_lock(locked).packages_edited
    edited = _edited_hash(locked, tmp_path, "tinyutil")
    assert read_lock(edited).packages_edited
    capsys.readouterr()
    assert _lock(configured, edited, "a100.toml", "cpu-box.toml", extra=("--check",)) == 1
    said = " ".join(capsys.readouterr().out.split())
    assert "stale: packages: changed after cuda-resolve wrote the lock" in said, said


def test_a_lock_written_before_the_digest_is_not_called_edited(
    locked: Path, tmp_path: Path
) -> None:
    older = tmp_path / "pylock.toml"
    older.write_text(re.sub(r'(?m)^packages-digest = "[^"]*"\n', "", locked.read_text()))
    assert "packages-digest" not in older.read_text()
    assert not read_lock(older).packages_edited


def test_sync_says_the_lock_was_edited_when_its_hash_fails(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    edited = _edited_hash(locked, tmp_path, "tinyutil")
    python = _venv(tmp_path / "venv")
    capsys.readouterr()
    assert main(["sync", str(edited), "--name", "a100", "--python", str(python)]) == 1
    said = " ".join(capsys.readouterr().err.split())
    assert "sha256" in said and "was changed after cuda-resolve wrote it" in said, said
    assert "tinyutil" not in {
        p.name.split("-")[0] for p in (tmp_path / "venv").rglob("*.dist-info")
    }
    shutil.rmtree(tmp_path / "venv")
