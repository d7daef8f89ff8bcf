"""``lock --check`` honours the options it takes (issue 29): another ``--index-url`` than the
lock's is not "current" (every profile's closure came from the index); with ``--update`` the
profiles given are checked, not the others."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_lock import _lock, bench, configured, locked  # noqa: F401  (fixtures)


def test_check_reports_another_index(
    configured: dict[str, Path | str],
    locked: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    assert _lock(configured, locked, "a100.toml", "cpu-box.toml", extra=("--check",)) == 0
    assert "is current" in capsys.readouterr().out
    other = ("--check", "--index-url", "https://pypi.lab.example/simple")
    # The last --index-url wins (argparse): the lab's index, not the one the lock came from.
    assert _lock(configured, locked, "a100.toml", "cpu-box.toml", extra=other) == 1
    said = capsys.readouterr().out
    assert "stale: index: the lock's closure came from" in said
    assert "asked https://pypi.lab.example/simple" in said, said


def test_check_with_update_checks_the_profiles_given(
    configured: dict[str, Path | str],
    locked: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``lock REQ --profile a100.toml --update --check`` (the relock's own arguments) checks that
    profile; the lock's other profiles were not given, as with --update they need not be."""
    capsys.readouterr()
    assert _lock(configured, locked, "a100.toml", extra=("--check",)) == 1
    assert "profile cpu: in the lock, not given" in capsys.readouterr().out
    assert _lock(configured, locked, "a100.toml", extra=("--check", "--update")) == 0
    assert "is current" in capsys.readouterr().out
