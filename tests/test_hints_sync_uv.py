"""``sync --dry-run`` where uv installs (the default, ``--installer auto``, uv beside cuda-resolve):
the printed uv command ran ``--offline`` and its ``-r`` file named every file by its cache path,
fetched or not (issue 29, a fix that cannot be pasted): before sync had fetched the files, the
command failed ("Distribution not found"). Now, with files still to fetch, pip's command is
printed (it fetches them itself), with a note; uv's once they are cached. Both run as printed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)


def _dry_run_line(
    main: Any, words: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[str, list[str], str]:
    assert main([*words, "--dry-run", "--installer", "uv"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("would run (")]
    installer, _, command = line.removeprefix("would run (").partition("): ")
    return installer, shlex.split(command), out


def _runs(command: list[str]) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    done = subprocess.run(command, capture_output=True, text=True, env=environ, check=False)
    assert done.returncode == 0, done.stderr


def test_the_uv_dry_run_command_runs_after_sync_has_exited(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Files not fetched yet: pip's command is shown (it fetches them) with a note saying why;
    once a sync has fetched them, uv's offline command is shown. Each runs as printed."""
    from cuda_resolve.cli import main
    from cuda_resolve.install.uv import find_uv

    if find_uv(os.environ) is None:
        pytest.skip("uv is not installed beside cuda-resolve (pip install '.[fast]')")
    python = _venv(tmp_path / "venv")
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(python)]
    installer, command, out = _dry_run_line(main, words, capsys)
    assert installer == "pip", out
    assert "not in the cache yet (filelock, tinyutil, torch)" in out, out
    assert "pip's command is shown" in out, out
    _runs(command)
    assert _installed(python)["tinyutil"] == "1.0"

    assert main([*words[:-1], str(_venv(tmp_path / "fetching"))]) == 0  # fills the cache
    again = _venv(tmp_path / "again")
    capsys.readouterr()
    installer, command, out = _dry_run_line(main, [*words[:-1], str(again)], capsys)
    assert installer == "uv" and "--offline" in command, out
    _runs(command)
    assert _installed(again)["tinyutil"] == "1.0"
