"""A command that must wait for another one on the same environment says so, naming who holds it,
then goes on when the lock is free: ``cuda-pip install`` and ``cuda-resolve undo`` run for real
while this test holds the environment's lock (user walk H7: a second install printed
``installing into ...`` and nothing more for as long as the first one ran)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from _torch_env import copy_venv
from test_install_unit import _wheel

from cuda_resolve.install.stash import default_lock_dir, target_lock


def _run_while_held(python: Path, words: list[str], environ: dict[str, str]) -> tuple[int, str]:
    """Run ``words`` while the lock of ``python``'s environment is held here; release it once
    the command says it waits (or after 60 s, and the test then fails on the missing line)."""
    lines: list[str] = []
    told = threading.Event()
    with target_lock(str(python), default_lock_dir(), timeout=10):
        process = subprocess.Popen(
            [sys.executable, *words],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None

        def read() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                lines.append(line)
                if "waiting for another install into" in line:
                    told.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        told.wait(60)
    status = process.wait(120)
    reader.join(10)
    process.stderr.close()
    return status, "".join(lines)


def _environ() -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PIP_FIND_LINKS")}
    environ["COLUMNS"] = "200"
    return environ


def test_cuda_pip_install_says_it_waits_for_the_holder_then_installs(tmp_path: Path) -> None:
    python = copy_venv(tmp_path / "venv")
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "waitpkg", "1.0", files={"waitpkg.py": "X = 1\n"})
    environ = {**_environ(), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    words = ["-m", "pip_plugin", "install", "waitpkg==1.0", "--python", str(python)]
    status, err = _run_while_held(python, words, environ)
    assert status == 0, err
    assert f"waiting for another install into {python} to finish (pid {os.getpid()}" in err, err
    assert err.index("waiting for another install") < err.index("waitpkg: - -> 1.0"), err


def test_undo_says_it_waits_for_the_holder_then_looks(tmp_path: Path) -> None:
    python = copy_venv(tmp_path / "venv")
    words = ["-m", "cuda_resolve", "undo", "--last", "--python", str(python)]
    status, err = _run_while_held(python, words, _environ())
    assert status == 0, err
    assert f"waiting for another install into {python} to finish (pid {os.getpid()}" in err, err
