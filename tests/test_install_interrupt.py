"""Ctrl-C in the middle of a real build: ``cuda-pip install cuext`` (the fixture CUDA extension,
built with this machine's nvcc against a CUDA torch, as in test_install_e2e) is interrupted the
way a terminal does it, SIGINT to its process group, while nvcc is compiling.

The build's pip runs in a session of its own, so the terminal's SIGINT never reaches nvcc: only
cuda-pip can stop it. After the interrupt: exit 130 and one error line, no process of that run
left (found by a marker variable every child inherits, and by the sessions they ran in), the
target as it was, no wheelhouse entry or half-written file for the key, and the key's lock free:
the next install builds and installs.

Slow (torch is several GB; the follow-up install compiles for about a minute on 2 cores) and
needs the index torch comes from, as test_install_e2e does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import filelock
import pytest

# torch_python (a venv with PyPI's CUDA torch, installed by cuda-pip) is the session fixture
# conftest.py registers; importing test_install_e2e also skips this module where nvcc is missing.
from test_install_e2e import ARCH, FIXTURE, FIXTURE_INDEX, _freeze, _fresh_target

pytestmark = [pytest.mark.slow, pytest.mark.network]

if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc to find the build's processes", allow_module_level=True)

_MARKER_NAME = "CUDA_RESOLVE_TEST_INTERRUPT_RUN"
_START_SECONDS = 300.0  # resolve, overlay install (setuptools, ninja), then ninja starts nvcc
# How long killed processes may take to disappear, and cuda-pip to answer Ctrl-C, on a machine
# busy with other work: an event waited for, far longer than it takes on an idle one, yet shorter
# than the compile it stops.
_GONE_SECONDS = 30.0
_ANSWER_SECONDS = 300.0


@dataclass(frozen=True)
class Proc:
    pid: int
    name: str
    session: int
    compiling: bool  # CUDA compilation under way: cicc, or nvcc given a .cu file


def _compiles(name: str, pid_folder: str) -> bool:
    # Detection runs `nvcc --version` and `nvcc --list-gpu-arch` before any build: a Ctrl-C
    # there tests detection, not "while nvcc compiles". Only a compile names a .cu source.
    if name != "nvcc":
        return name == "cicc"
    try:
        argv = Path(pid_folder, "cmdline").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile
        return False
    return any(arg.endswith(b".cu") for arg in argv)


def _processes() -> list[tuple[Proc, bytes]]:
    """Every live (not zombie) process this user can read, with its environment block."""
    found: list[tuple[Proc, bytes]] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, _ppid, _pgrp, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if state != "Z":
            found.append(
                (Proc(int(entry.name), name, int(session), _compiles(name, entry.path)), environ)
            )
    return found


def _of_run(marker: bytes, sessions: set[int]) -> list[Proc]:
    """The processes of one run: those that inherited its marker, or live in a session it made."""
    return [
        proc
        for proc, environ in _processes()
        if marker in environ.split(b"\0") or proc.session in sessions
    ]


def _kill_run(marker: bytes, sessions: set[int]) -> None:
    # One by one: ninja starts each compile in a process group of its own, so a group kill of
    # the session's leader would miss them.
    for proc in _of_run(marker, sessions):
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _wheelhouse_files(wheelhouse: Path) -> list[str]:
    return sorted(
        str(p.relative_to(wheelhouse))
        for p in wheelhouse.rglob("*")
        if "locks" not in p.relative_to(wheelhouse).parts
    )


def test_ctrl_c_while_nvcc_compiles_stops_everything_and_changes_nothing(
    tmp_path: Path, torch_python: Path
) -> None:
    python = _fresh_target(tmp_path, torch_python)
    wheelhouse = tmp_path / "wheelhouse"
    scratch = tmp_path / "tmp"  # the build's TMPDIR: its working folder must be gone afterwards
    scratch.mkdir()
    before = _freeze(python)
    run_id = uuid.uuid4().hex
    marker = f"{_MARKER_NAME}={run_id}".encode()
    env = dict(
        os.environ,
        CUDA_RESOLVE_WHEELHOUSE=str(wheelhouse),
        TMPDIR=str(scratch),
        **{_MARKER_NAME: run_id},
    )
    env.pop("VIRTUAL_ENV", None)
    argv = [
        sys.executable,
        "-m",
        "pip_plugin",
        "install",
        "cuext",
        "--index",
        str(FIXTURE_INDEX),
        "--python",
        str(python),
        "--arch-list",
        ARCH,
        "--source",
        str(FIXTURE),
    ]
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"

    sessions: set[int] = set()
    with open(stdout, "w") as out, open(stderr, "w") as err:
        # Its own process group, as a shell starts a job; SIGINT to the group is the terminal's
        # Ctrl-C.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
        )
    sessions.add(process.pid)
    try:
        deadline = time.monotonic() + _START_SECONDS
        compiling: list[Proc] = []
        while not compiling:
            if process.poll() is not None:
                pytest.fail(
                    f"cuda-pip ended (exit {process.returncode}) before nvcc "
                    f"started:\n{stderr.read_text()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"nvcc did not start within {_START_SECONDS:.0f} s:\n{stderr.read_text()}"
                )
            running = _of_run(marker, sessions)
            sessions.update(proc.session for proc in running if proc.session != os.getsid(0))
            compiling = [proc for proc in running if proc.compiling]
            time.sleep(0.1)

        os.killpg(process.pid, signal.SIGINT)
        returncode = process.wait(timeout=_ANSWER_SECONDS)

        left = _of_run(marker, sessions)
        gone_by = time.monotonic() + _GONE_SECONDS
        while left and time.monotonic() < gone_by:
            time.sleep(0.2)
            left = _of_run(marker, sessions)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        _kill_run(marker, sessions)  # a failed test leaves no compiler running either

    assert not left, (
        f"still running {_GONE_SECONDS:.0f} s after cuda-pip exited: {left} (compiling at Ctrl-C: "
        f"{compiling})"
    )
    messages = stderr.read_text()
    assert returncode == 130, messages
    assert "Traceback" not in messages and "KeyboardInterrupt" not in messages, messages
    assert [line for line in messages.splitlines() if line.startswith(("error:", "hint:"))] == [
        "error: interrupted"
    ], messages
    assert messages.rstrip().splitlines()[-1] == "error: interrupted", messages

    assert _freeze(python) == before
    assert _wheelhouse_files(wheelhouse) == [], "the interrupted build left files in the wheelhouse"
    assert not list(scratch.glob("cuda-resolve-build-*")), (
        "the build's working folder was left behind"
    )
    locks = list((wheelhouse / "locks").glob("*.lock"))
    assert locks, "the build took no lock on its key"
    for lock in locks:
        held = filelock.FileLock(str(lock))
        held.acquire(timeout=0)  # raises filelock.Timeout if anything still holds the key
        held.release()

    # The next install is not stopped by anything the interrupted one left: it builds and installs.
    again = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, env=env, timeout=900, check=False
    )
    assert again.returncode == 0, again.stdout + again.stderr
    result = json.loads(again.stdout)["result"]
    assert [b["cache_hit"] for b in result["builds"]] == [False]
    assert "cuext" in {c["name"] for c in result["changed"]}
    assert "cuext._ext" in result["verified_imports"]
    assert len(list(wheelhouse.rglob("*.whl"))) == 1
