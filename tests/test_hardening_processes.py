"""Every program cuda-resolve starts is bounded: output, time, and its children.

Fake tools on PATH flood their output, hang, or fork a sleeping child that keeps the pipes open.
The runner keeps at most its output limit, kills the whole process group at the deadline, and
on Ctrl-C; the probes of ``detect`` share one budget, so a machine where every tool hangs
answers within it and says which probe was slow.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_resolve._bounded import Deadline, run
from cuda_resolve.detect import detect_environment
from cuda_resolve.detect._run import run as probe_run
from cuda_resolve.detect._run import sharing

SYSTEM_PATH = "/usr/bin:/bin"
#: The longest any wait here may take: only a hang comes near it, never a busy machine (the fake
#: tools sleep 300 s, so a bound below that still tells "ended" from "waited for them").
PATIENCE = 120.0
REPO = Path(__file__).resolve().parent.parent


def _tool(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def _hanging_with_child(directory: Path, name: str, pids: Path) -> Path:
    """A tool that forks a sleeping child (which inherits the pipes), records both pids, hangs."""
    return _tool(directory, name, f'sleep 300 &\necho "$$ $!" >> "{pids}"\nsleep 300\n')


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for a parent that does not reap (PID 1 in some containers) is dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _all_gone(pids_file: Path, within: float = PATIENCE) -> bool:
    return not _left(pids_file, within)


def _left(pids_file: Path, within: float = PATIENCE) -> list[str]:
    """The fake tools' processes (``pid command line``) still alive after waiting up to
    ``within`` seconds for all of them to be gone."""
    pids = [int(word) for word in pids_file.read_text().split()] if pids_file.exists() else []
    assert pids, "the fake tool never ran"
    end = time.monotonic() + within
    while time.monotonic() < end:
        if all(_gone(pid) for pid in pids):
            return []
        time.sleep(0.05)
    left = []
    for pid in pids:
        if not _gone(pid):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                argv = b"?"
            left.append(f"{pid} {argv.decode(errors='replace').strip()}")
    return left


def _kill_left(pids_file: Path) -> None:
    for word in pids_file.read_text().split() if pids_file.exists() else []:
        try:
            os.kill(int(word), signal.SIGKILL)
        except OSError:
            pass


# -- the runner ------------------------------------------------------------------------------


def test_a_flood_is_cut_at_the_output_limit(tmp_path: Path) -> None:
    flood = _tool(tmp_path / "bin", "nvidia-smi", 'exec yes "flooding the pipe"\n')
    ran = run([str(flood)], timeout=PATIENCE, output_limit=64 * 1024)
    # stopped at the limit, not at the timeout
    assert ran is not None and ran.overflowed and ran.returncode is None and not ran.timed_out
    assert len(ran.stdout) + len(ran.stderr) <= 64 * 1024


def test_a_flood_on_stderr_counts_too(tmp_path: Path) -> None:
    flood = _tool(tmp_path / "bin", "gcc", 'exec yes "error" >&2\n')
    ran = run([str(flood)], timeout=PATIENCE, output_limit=4096)
    assert ran is not None and ran.overflowed and len(ran.stderr) <= 4096


def test_a_timeout_kills_the_program_and_the_child_it_forked(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    tool = _hanging_with_child(tmp_path / "bin", "nvcc", pids)
    try:
        started = time.monotonic()
        ran = run([str(tool)], timeout=0.5)
        assert ran is not None and ran.timed_out
        # not held by the child keeping the pipes open (it sleeps 300 s)
        assert time.monotonic() - started < PATIENCE
        assert _all_gone(pids), "the program or its child outlived the timeout"
    finally:
        _kill_left(pids)


def test_a_program_that_exits_normally_keeps_its_output_and_status(tmp_path: Path) -> None:
    tool = _tool(tmp_path / "bin", "gcc", 'echo "gcc (GCC) 12.2.0"\necho warn >&2\nexit 3\n')
    ran = run([str(tool)], timeout=PATIENCE)
    assert ran is not None and (ran.stdout, ran.stderr, ran.returncode, ran.overflowed) == (
        "gcc (GCC) 12.2.0\n",
        "warn\n",
        3,
        False,
    )
    assert run([str(tmp_path / "absent")], timeout=PATIENCE) is None


def test_a_spent_deadline_skips_the_program_and_says_so(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = _tool(tmp_path / "bin", "clang", f'touch "{marker}"\n')
    deadline = Deadline(0.0)
    with sharing(deadline):
        ran = probe_run([str(tool), "--version"], timeout=5)
    assert ran is not None and ran.returncode is None and not marker.exists()
    assert deadline.slow == (
        f"`clang --version` ({tool}) was not run: the 0 s detection budget was spent",
    )


def test_a_shared_deadline_caps_each_program(tmp_path: Path) -> None:
    tool = _tool(tmp_path / "bin", "g++", "sleep 300\n")
    deadline = Deadline(0.6)
    started = time.monotonic()
    with sharing(deadline):
        first = probe_run([str(tool)], timeout=PATIENCE)
        second = probe_run([str(tool)], timeout=PATIENCE)
    assert (
        first is not None and first.timed_out and second is not None and second.returncode is None
    )
    # capped by the 0.6 s deadline: its own timeout would have taken PATIENCE
    assert time.monotonic() - started < PATIENCE / 2
    assert any("`g++`" in line and "did not answer within" in line for line in deadline.slow), (
        deadline.slow
    )


# -- detect as a whole -----------------------------------------------------------------------


def test_detect_with_every_tool_hanging_answers_within_the_budget(tmp_path: Path) -> None:
    """nvidia-smi (twice), nvcc, gcc, g++, clang each hang for 300 s and fork a child."""
    pids = tmp_path / "pids"
    bin_dir = tmp_path / "bin"
    for name in ("nvidia-smi", "nvcc", "gcc", "g++", "clang", "clang++", "cc", "c++"):
        _hanging_with_child(bin_dir, name, pids)
    try:
        started = time.monotonic()
        env = detect_environment(
            root=tmp_path,
            environ={"PATH": f"{bin_dir}:{SYSTEM_PATH}"},
            timeout=PATIENCE,
            budget=2.0,
            cache_dir=tmp_path / "cache",
        )
        elapsed = time.monotonic() - started
        # A probe given its own timeout instead of what is left of the budget takes PATIENCE.
        assert elapsed < PATIENCE / 2, f"{elapsed:.1f} s: the probes did not share the budget"
        slow = [note for note in env.notes if note.startswith("slow probe: ")]
        assert any("`nvidia-smi" in note for note in slow), env.notes
        assert any("`nvcc --version`" in note for note in slow), env.notes
        assert any("`gcc --version`" in note for note in slow), env.notes
        assert _all_gone(pids), "a hung tool or its child outlived detect"
    finally:
        _kill_left(pids)


# -- Ctrl-C ----------------------------------------------------------------------------------


def _cli_env(bin_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COV_")}
    env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:{SYSTEM_PATH}"
    env["PYTHONPATH"] = str(REPO)
    return env


def _interruptible() -> None:
    """In the child: Ctrl-C as a terminal delivers it (a test runner started in the background
    inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(path: Path, seconds: float = PATIENCE) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not path.exists():
        time.sleep(0.02)
    assert path.exists(), "the fake tool was never started"


#: What detect may spend on its probes from the command line (twice its 5 s timeout): a Ctrl-C
#: that waited for the hung probes returns no sooner.
_CLI_BUDGET = 10.0


@pytest.mark.parametrize("entry", ["module", "script"])
def test_ctrl_c_during_a_hanging_probe_exits_130_with_one_line_and_kills_the_tools(
    tmp_path: Path, entry: str
) -> None:
    script = Path(sys.executable).parent / "cuda-resolve"
    if entry == "script" and not script.exists():
        pytest.skip("the cuda-resolve console script is not installed beside this interpreter")
    pids = tmp_path / "pids"
    bin_dir = tmp_path / "bin"
    for name in ("nvidia-smi", "nvcc", "gcc", "g++"):
        _hanging_with_child(bin_dir, name, pids)
    argv = (
        [sys.executable, "-m", "cuda_resolve", "detect"]
        if entry == "module"
        else [str(script), "detect"]
    )
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(bin_dir),
        cwd=tmp_path,
        text=True,
        preexec_fn=_interruptible,
    ) as process:
        try:
            _wait_for(pids)
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=PATIENCE)
            assert time.monotonic() - started < _CLI_BUDGET, "Ctrl-C waited for the probes"
            assert process.returncode == 130, err
            assert err == "error: interrupted\n" and out == ""
            left = _left(pids)
            assert not left, f"Ctrl-C left these running: {left}; pids: {pids.read_text()}"
        finally:
            process.kill()
            _kill_left(pids)


def test_ctrl_c_while_the_command_line_is_importing_exits_130_with_one_line(tmp_path: Path) -> None:
    """-X importtime reports each import as it finishes: the interrupt lands mid-import."""
    with subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "cuda_resolve", "detect"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(tmp_path),
        cwd=tmp_path,
        text=True,
        preexec_fn=_interruptible,
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            if line.rstrip().endswith("cuda_resolve.errors"):
                process.send_signal(signal.SIGINT)
                break
        else:  # pragma: no cover
            pytest.fail("cuda_resolve.errors was never imported")
        rest = process.stderr.read()
        process.wait(PATIENCE)
    ours = [line for line in rest.splitlines() if not line.startswith("import time:")]
    assert process.returncode == 130, rest
    assert ours == ["error: interrupted"], ours


# A daemon thread (a probe) is starting a program when the interpreter exits (after a Ctrl-C):
# its Popen has forked but not returned until exit has begun. Exit must wait for it to be known
# and kill it, not leave it running once the thread is frozen.
_EXIT_WHILE_STARTING = """
import subprocess, sys, threading, time
from cuda_resolve import _bounded

forked, go = threading.Event(), threading.Event()


class SlowToReturn(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        print(self.pid, flush=True)
        forked.set()
        go.wait()


def release():
    while not _bounded._exiting:  # exit has begun: only then does the start return
        time.sleep(0.01)
    go.set()


subprocess.Popen = SlowToReturn
starting = threading.Thread(
    target=_bounded.run, args=([sys.argv[1]],), kwargs={"timeout": 300}, daemon=True
)
starting.start()
forked.wait()
threading.Thread(target=release, daemon=True).start()
"""


def test_exit_while_a_thread_starts_a_program_kills_that_program(tmp_path: Path) -> None:
    tool = _tool(tmp_path / "bin", "nvidia-smi", "sleep 300\n")
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_WHILE_STARTING, str(tool)],
        capture_output=True,
        text=True,
        env=_cli_env(tmp_path),
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pids = tmp_path / "pids"
    pids.write_text(done.stdout)
    try:
        assert _all_gone(pids), "the program a thread was starting at exit was left running"
    finally:
        _kill_left(pids)
