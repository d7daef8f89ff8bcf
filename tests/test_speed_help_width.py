"""Help is wrapped at the width argparse would find, without importing shutil to find it (issue
28: argparse imports shutil, with bz2 and lzma, for every command, 2 ms of a warm ``doctor``)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from cuda_resolve.cli import _terminal_columns, build_parser


@pytest.mark.parametrize("columns", [None, "", "abc", "0", "-3", "57", "200"])
def test_the_width_is_shutils(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _terminal_columns() == shutil.get_terminal_size().columns


@pytest.mark.parametrize("columns", ["57", "200"])
def test_help_is_wrapped_as_at_the_width_argparse_finds(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    parser = build_parser()
    ours = parser.format_help()
    width = shutil.get_terminal_size().columns - 2  # what argparse.HelpFormatter would take
    formatter = parser.formatter_class
    parser.formatter_class = lambda prog: formatter(prog, width=width)  # type: ignore[assignment,misc]
    assert ours == parser.format_help()
    assert max(len(line) for line in ours.splitlines()) <= width


def test_a_command_run_imports_no_shutil() -> None:
    code = (
        "import sys\n"
        "from cuda_resolve.cli import build_parser\n"
        "parser = build_parser('doctor')\n"
        "parser.parse_known_args(['doctor', '--json'])\n"
        "parser.format_help()\n"
        "print('shutil' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False", result.stderr
