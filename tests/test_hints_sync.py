"""``sync --dry-run`` prints a command that can be pasted (issue 29): its ``-r`` file is kept
(named by its content in the cache), naming the cached files by path and the others by the
lock's URL, so the printed pip command installs the locked files after sync has exited.

With the real pip, a loopback index and the lock test_lock.py makes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)


def test_the_dry_run_command_runs_after_sync_has_exited(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cuda_resolve.cli import main

    python = _venv(tmp_path / "venv")
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(python), "--dry-run"]
    assert main([*words, "--installer", "pip"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("would run (pip): ")]
    command = shlex.split(line.removeprefix("would run (pip): "))
    requirements = Path(command[command.index("-r") + 1])
    assert f"its -r file stays at {requirements}" in out
    assert requirements.is_file(), "the -r file of a printed command is gone"
    assert "tinyutil" not in _installed(python)  # a dry run changes nothing
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    done = subprocess.run(command, capture_output=True, text=True, env=environ, check=False)
    assert done.returncode == 0, done.stderr
    assert _installed(python)["tinyutil"] == "1.0"
