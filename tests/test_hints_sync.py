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


def test_a_named_profile_for_another_platform_is_refused_and_other_differences_said(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """User walk C3: `sync --name gh200` installed an aarch64 profile on x86_64 (PEP 751's
    selection found the x86_64 files another profile put in the same entries) and `--check`
    said it "matches"."""
    import platform

    from cuda_resolve.cli import main

    python = _venv(tmp_path / "venv")
    text = locked.read_text()
    here = f'arch = "{platform.machine()}"'
    assert here in text
    other = tmp_path / "pylock.other.toml"
    other.write_text(text.replace(here, 'arch = "riscv64"'))
    capsys.readouterr()
    assert main(["sync", str(other), "--name", "cpu", "--python", str(python), "--check"]) == 1
    said = capsys.readouterr()
    assert "profile cpu of" in said.err and "was locked for linux/riscv64" in said.err
    assert "tinyutil" not in _installed(python)
    # A GPU here that the CPU profile was not locked for: said, and the sync goes on.
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "9.0")
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    words = ["sync", str(locked), "--name", "cpu", "--python", str(python), "--dry-run"]
    assert main([*words, "--installer", "pip"]) == 0
    out = capsys.readouterr().out
    assert "note: profile cpu was locked for another machine: GPUs here: 9.0" in out, out
