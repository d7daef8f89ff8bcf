"""``lock --check`` with another ``--index-url`` than the lock's is not "current" (issue 29:
every option a command takes is honoured): the closure of every profile came from that index."""

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
