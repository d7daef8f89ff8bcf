"""SIGTERM and SIGHUP are handled as Ctrl-C is, and nothing a build leaves behind can hang it.

Real processes throughout: the real command line (``python -m cuda_resolve`` / ``-m pip_plugin``)
builds tests/data/packages/sleepext, whose in-tree PEP 517 backend stands in for a compiler (it
starts a child that inherits the output pipe, as nvcc starts cicc, then sleeps), against a
stand-in torch and a stand-in CUDA toolkit (an ``nvcc`` script that answers ``--version``), so no
compiler, GPU or network is needed. The install case is the real pip against a PyTorch-style
index on loopback (test_install_unit's): torch goes in, then the next step's build hangs.

The signal goes to the command line's own process, as a scheduler's kill or a closed terminal
sends it. Afterwards: exit 143 (SIGTERM) or 129 (SIGHUP) and one ``error:`` line, no process of
the run left (every process of the run carries a marker variable, found in ``/proc``), the build
folder gone, no wheelhouse entry and the key's lock free, the target's ``pip freeze --all`` as
before. A background process that keeps the build's output open after the build finished is
ended a few seconds later, and the output says which process and why.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import filelock
import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401  (a fixture)
from test_install_unit import _env_with_torch_index, _freeze, torch_index  # noqa: F401  (torch_index: a fixture)

from cuda_resolve import _signals
from cuda_resolve.build.runner import LINGER_SECONDS, run_logged
from cuda_resolve.install import transaction
from cuda_resolve.install.stash import RestoreReport
from cuda_resolve.reporting import NullReporter

if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc to find the run's processes", allow_module_level=True)

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "sleepext"
INDEX = DATA / "index" / "sleepext"
MARKER = "CUDA_RESOLVE_TEST_SIGNAL_RUN"
#: The longest a wait here may take (the run's processes to be gone, the command line to answer
#: a signal): only a hang comes near it, never a busy machine. The fake compiler and the process
#: it leaves behind sleep 300 s, so a bound below that still tells "ended" from "waited for them".
PATIENCE = 120.0
#: The longest the build may take to reach the fake compiler (pip's overlay install first).
START_SECONDS = 300.0
STATUS: dict[int, int] = {signal.SIGTERM: 143, signal.SIGHUP: 129}
NAME: dict[int, str] = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


# -- the run's processes ---------------------------------------------------------------------------


def _of_run(run_id: str) -> list[str]:
    """The live (not zombie) processes that inherited the run's marker, as ``name (pid)``."""
    marker = f"{MARKER}={run_id}".encode()
    found: list[str] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and stat[stat.rindex(")") + 2] != "Z":
            found.append(f"{stat[stat.index('(') + 1 : stat.rindex(')')]} ({entry.name})")
    return found


def _gone_within(run_id: str, seconds: float) -> list[str]:
    end = time.monotonic() + seconds
    left = _of_run(run_id)
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = _of_run(run_id)
    return left


def _kill_run(run_id: str) -> None:
    for proc in _of_run(run_id):
        try:
            os.kill(int(proc.rsplit("(", 1)[1].rstrip(")")), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _signals_as_a_shell_leaves_them() -> None:
    """In the child: SIGTERM and SIGHUP at their defaults (a test runner under nohup ignores
    SIGHUP, and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _wait_for(path: Path, process: subprocess.Popen[str], seconds: float, stderr: Path) -> None:
    end = time.monotonic() + seconds
    while not (path.exists() and path.read_text().strip()):
        if process.poll() is not None:
            pytest.fail(
                f"the command ended (exit {process.returncode}) before the build "
                f"started:\n{stderr.read_text()}"
            )
        if time.monotonic() > end:
            pytest.fail(f"the build did not start within {seconds:.0f} s:\n{stderr.read_text()}")
        time.sleep(0.05)


def _run_and_signal(
    argv: list[str], env: dict[str, str], tmp_path: Path, signum: int, started: Path
) -> tuple[int, str, list[str]]:
    """Start the command line, wait until the fake compiler runs, send ``signum`` to the command
    line's process alone; (exit status, stderr, processes of the run left after it exited)."""
    run_id = uuid.uuid4().hex
    env = {**env, MARKER: run_id}
    stderr = tmp_path / "stderr"
    with open(tmp_path / "stdout", "w") as out, open(stderr, "w") as err:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            text=True,
            start_new_session=True,
            preexec_fn=_signals_as_a_shell_leaves_them,
        )
    try:
        _wait_for(started, process, START_SECONDS, stderr)
        time.sleep(0.2)  # not a deadline: the signal may land before or after the sleep begins
        process.send_signal(signum)
        status = process.wait(timeout=PATIENCE)
        left = _gone_within(run_id, PATIENCE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        _kill_run(run_id)
    return status, stderr.read_text(), left


# -- a build, signalled while the fake compiler runs
# -----------------------------------------------------


@pytest.fixture
def build_env(
    tmp_path: Path, torch_venv_template: Path
) -> Iterator[tuple[list[str], dict[str, str], Path]]:
    """(argv of `cuda-resolve build sleepext`, its environment, the target's python)."""
    python = copy_venv(tmp_path / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        TMPDIR=str(scratch),
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        SLEEPY_PIDS=str(tmp_path / "pids"),
    )
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        "sleepext",
        "--index",
        str(INDEX),
        "--python",
        str(python),
        "--arch-list",
        "9.0",
        "--source",
        str(SOURCE),
    ]
    yield argv, env, python


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_during_a_build_ends_every_process_and_removes_the_build_folder(
    tmp_path: Path, build_env: tuple[list[str], dict[str, str], Path], signum: int
) -> None:
    argv, env, python = build_env
    before = _freeze(python)
    status, stderr, left = _run_and_signal(argv, env, tmp_path, signum, tmp_path / "pids")

    assert not left, f"still running {PATIENCE:.0f} s after the command exited: {left}"
    assert status == STATUS[signum], stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert [line for line in stderr.splitlines() if line.startswith(("error:", "hint:"))] == [
        f"error: terminated by {NAME[signum]}"
    ]
    assert not list((tmp_path / "tmp").glob("cuda-resolve-build-*")), (
        "the build folder was left behind"
    )
    # pip's own temporary folders too (pip-unpack-*, pip-wheel-*: on the H200 they outlived a
    # SIGTERM until pip and nvcc were given a TMPDIR inside the build folder).
    assert not list((tmp_path / "tmp").iterdir()), "temporary files were left behind"
    wheelhouse = tmp_path / "wheelhouse"
    assert not list(wheelhouse.rglob("*.whl"))
    locks = list((wheelhouse / "locks").glob("*.lock"))
    assert locks, "the build took no lock on its key"
    for lock in locks:
        held = filelock.FileLock(str(lock))
        held.acquire(timeout=0)  # raises filelock.Timeout if anything still holds the key
        held.release()
    assert _freeze(python) == before


def test_a_background_process_holding_the_builds_output_is_ended_and_named(
    tmp_path: Path, build_env: tuple[list[str], dict[str, str], Path]
) -> None:
    """The build succeeds but leaves ``sleep 300`` with the output pipe open (ignoring SIGINT and
    SIGHUP): the build finishes a few seconds later, says which process it ended, and ends it."""
    argv, env, _python = build_env
    run_id = uuid.uuid4().hex
    env = {**env, MARKER: run_id, "SLEEPY_MODE": "linger"}
    try:
        # Within 240 s: a build that waited for the background process (sleep 300) times out.
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        left = _gone_within(run_id, PATIENCE)
    finally:
        _kill_run(run_id)
    assert done.returncode == 0, done.stderr
    assert not left, f"the background process outlived the build: {left}"
    [pid] = (tmp_path / "pids").read_text().split()
    shown = " ".join(done.stderr.split())  # the reporter wraps long notes
    assert (
        f"note: sleepext 0.1.0: sleep (pid {pid}) was left running by a build step that exited, "
        f"holding its output open (which would hang the build): ended after {LINGER_SECONDS:.0f} s"
    ) in shown, done.stderr
    assert list((tmp_path / "wheelhouse").rglob("sleepext-0.1.0+*.whl"))


def test_the_runner_ends_a_process_that_holds_the_pipe_a_few_seconds_after_the_program_exits(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    lines: list[str] = []
    returned: list[tuple[int, list[str]]] = []

    def run() -> None:
        with open(tmp_path / "log", "w") as log:
            returned.append(
                run_logged(
                    ["sh", "-c", f'sleep 300 & echo "$!" > {pids}; echo built; exit 0'],
                    environ={"PATH": "/usr/bin:/bin"},
                    log=log,
                    on_line=lines.append,
                    linger=1.0,
                )
            )

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(PATIENCE)  # a runner that waits for the background process (sleep 300) is late
    for word in pids.read_text().split() if pids.exists() else []:  # a runner that hangs is freed
        try:
            os.kill(int(word), signal.SIGKILL)
        except OSError:
            pass
    assert returned, "the runner waited for the background process"
    [(status, tail)] = returned
    [pid] = pids.read_text().split()
    assert status == 0 and tail[0] == "built"
    assert (
        tail[-1]
        == f"[cuda-resolve] sh exited (status 0) but sleep (pid {pid}) kept its output open: "
        "ended after 1 s"
    )
    assert lines == tail and tail[-1] in (tmp_path / "log").read_text()


# -- an install, signalled while pip builds its second step
# ------------------------------------------------


def _sleepy_sdist(folder: Path) -> None:
    """slowpkg 1.0 as an sdist whose build is the sleepy backend (pip builds it in its own
    session)."""
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "slowpkg-1.0.tar.gz", "w:gz") as archive:
        archive.add(SOURCE / "sleepy_backend.py", "slowpkg-1.0/sleepy_backend.py")
        archive.add(SOURCE / "pyproject.toml", "slowpkg-1.0/pyproject.toml")
        info = tmp = folder / "PKG-INFO"
        tmp.write_text("Metadata-Version: 2.1\nName: slowpkg\nVersion: 1.0\n")
        archive.add(info, "slowpkg-1.0/PKG-INFO")
        tmp.unlink()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM], ids=["SIGTERM"]
)  # SIGHUP takes the same path (the build tests)
def test_a_signal_during_an_install_restores_the_environment(
    tmp_path: Path, torch_index: str, signum: int
) -> None:
    python = copy_venv(tmp_path / "venv")
    before = _freeze(python)
    links = tmp_path / "links"
    _sleepy_sdist(links)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = _env_with_torch_index(tmp_path, torch_index)
    env.pop("VIRTUAL_ENV", None)
    env.update(TMPDIR=str(scratch), SLEEPY_PIDS=str(tmp_path / "pids"))
    # Step 1 puts torch in from the PyTorch-style index; step 2's pip then builds slowpkg forever.
    argv = [
        sys.executable,
        "-m",
        "pip_plugin",
        "install",
        "torch==2.6.0+cu126",
        "slowpkg",
        "--no-index",
        "--find-links",
        str(links),
        "--python",
        str(python),
    ]
    status, stderr, left = _run_and_signal(argv, env, tmp_path, signum, tmp_path / "pids")

    assert not left, f"still running {PATIENCE:.0f} s after cuda-pip exited: {left}"
    assert status == STATUS[signum], stderr
    assert stderr.rstrip().splitlines()[-1] == f"error: terminated by {NAME[signum]}", stderr
    assert "restored: torch 2.6.0+cu126" in stderr, stderr
    assert _freeze(python) == before
    assert list(scratch.iterdir()) == [], "pip's temporary folders were left behind"


# -- a second interrupt while the environment is restored
# ----------------------------------------------


class _SlowStash:
    """A stash whose restore is interrupted half-way by a second Ctrl-C (a real SIGINT)."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.committed = False

    def restore(self) -> RestoreReport:
        self.steps.append("first half")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # the handler runs here, between two bytecodes of the restore
        self.steps.append("second half")
        return RestoreReport(restored=("torch 2.6.0+cu126 removed (the install had added it)",))

    def commit(self) -> None:
        self.committed = True


class _Notes(NullReporter):
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.steps: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def step(self, text: str) -> None:
        self.steps.append(text)


def test_a_second_ctrl_c_during_the_restore_lets_it_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal
    try:
        stash = _SlowStash()
        report = _Notes()
        with _signals.terminate_as_interrupt():
            try:
                transaction._restored(_signals.Terminated(signal.SIGTERM), stash, report)  # type: ignore[arg-type]
            except KeyboardInterrupt:
                pytest.fail(f"the second Ctrl-C stopped the restore half-way, after {stash.steps}")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stash.steps == ["first half", "second half"] and stash.committed
    assert report.steps == ["restored: torch 2.6.0+cu126 removed (the install had added it)"]
    assert report.notes == ["SIGINT received while restoring the environment: finishing that first"]


def test_exit_statuses() -> None:
    assert _signals.exit_status(KeyboardInterrupt()) == 130
    assert _signals.exit_status(_signals.Terminated(signal.SIGTERM)) == 143
    assert _signals.exit_status(_signals.Terminated(signal.SIGHUP)) == 129


# A program whose command body is interrupted inside an eval() of a string, as a Ctrl-C during an
# import can land inside namedtuple's; run with "python -m", as `python -m cuda_resolve` is.
_INTERRUPTED_IN_EVAL = """
import contextlib
import io
import os
import signal

import {entry} as entry
from cuda_resolve.cli import guarded, interrupted

with contextlib.redirect_stderr(io.StringIO()):
    interrupted()  # its imports now, so that no later eval() of its own clears the mark


def body():
    eval("os.kill(os.getpid(), signal.SIGINT) or [i for i in range(10 ** 8)]")
    return 0


entry.main = lambda argv=None: guarded(body, wants_json=False, debug=False)
entry.run()
"""


@pytest.mark.parametrize("entry", ["cuda_resolve.cli", "pip_plugin.__main__"])
def test_ctrl_c_inside_an_eval_still_exits_130_under_python_m(tmp_path: Path, entry: str) -> None:
    # CPython marks such an interrupt as unhandled even when it is handled; under -m the process
    # would then kill itself with SIGINT at exit (status -2) after printing its error line.
    (tmp_path / "interrupted_in_eval.py").write_text(_INTERRUPTED_IN_EVAL.format(entry=entry))
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_in_eval"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")
