"""The temporary folder of an install killed with SIGKILL (pip may have left a gigabyte download
in it) is removed by a later install; a live run's folder, a young one and a folder that is not
ours are left alone. Before, each such folder stayed in /tmp for good (about ten per CI run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import make_wheel

from cuda_resolve.install.scratch import SCRATCH_PREFIX, remove_dead_scratch

if not sys.platform.startswith("linux"):
    pytest.skip("flock and SIGKILL as Linux has them", allow_module_level=True)

# A run that made its folder the product's way, wrote into it, and waits to be killed.
_HOLDER = textwrap.dedent(
    """
    import sys, tempfile, time
    from pathlib import Path
    tempfile.tempdir = sys.argv[1]
    from cuda_resolve.install.scratch import run_scratch
    with run_scratch() as folder:
        (folder / "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"x" * 4096)
        print(folder, flush=True)
        time.sleep(600)
    """
)


def _start_holder(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(parent)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    return holder, Path(holder.stdout.readline().strip())


def _kill(holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)  # no handler runs: the run's folder stays behind
    holder.wait(30)
    assert holder.stdout is not None
    holder.stdout.close()


def _age(folder: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(folder, (then, then))


def test_a_killed_runs_folder_goes_and_a_live_ones_stays(tmp_path: Path) -> None:
    live, live_folder = _start_holder(tmp_path)
    killed, killed_folder = _start_holder(tmp_path)
    try:
        _kill(killed)
        for folder in (live_folder, killed_folder):
            _age(folder, 120)
        assert remove_dead_scratch(tmp_path) == [killed_folder]
        assert live_folder.is_dir() and not killed_folder.exists()
    finally:
        _kill(live)
    _age(live_folder, 120)
    assert remove_dead_scratch(tmp_path) == [live_folder]


def test_young_lockless_and_foreign_entries_stay(tmp_path: Path) -> None:
    killed, young = _start_holder(tmp_path)
    _kill(killed)  # dead, but its folder is younger than a minute: its lock may be on its way
    lockless = tmp_path / f"{SCRATCH_PREFIX}made-by-hand"
    lockless.mkdir()
    _age(lockless, 3600)
    not_a_folder = tmp_path / f"{SCRATCH_PREFIX}file"
    not_a_folder.write_text("")
    _age(not_a_folder, 3 * 86400)
    other = tmp_path / "pip-unpack-1234"
    other.mkdir()
    _age(other, 3 * 86400)
    assert remove_dead_scratch(tmp_path) == []
    assert young.is_dir() and lockless.is_dir() and not_a_folder.is_file() and other.is_dir()
    _age(lockless, 2 * 86400)  # no lock file for two days: not a run's that is being made
    assert remove_dead_scratch(tmp_path) == [lockless]


def test_the_next_install_removes_a_killed_installs_folder(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    killed, leftover = _start_holder(temp)
    _kill(killed)
    _age(leftover, 300)
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "wanted", "2.0", files={"wanted.py": ""})
    python = copy_venv(tmp_path / "venv")
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", "wanted==2.0", "--python", str(python),
         "--no-index", "--find-links", str(wheels), "--no-verify"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "TMPDIR": str(temp)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (python.parent.parent / "lib").glob("python3*/site-packages/wanted.py")
    assert not leftover.exists()
    said = " ".join(done.stderr.split())  # progress lines wrap at the terminal's width
    assert f"removed {leftover}, the temporary folder of an install that was killed" in said
    assert not list(temp.glob(f"{SCRATCH_PREFIX}*"))  # its own folder is gone too
