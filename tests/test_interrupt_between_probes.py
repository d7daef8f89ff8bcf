"""Ctrl-C during detection ends the probes' programs, and is raised only once they are done.

A KeyboardInterrupt raised at whatever bytecode the main thread is running can land inside
importlib's module-lock callback, which swallows it after taking the import lock: the probe
threads that import next then wait for ever (CI's busy stage saw ``detect`` hang after Ctrl-C).
So inside detection the signal only asks a helper thread to stop the programs, and detection
raises the interrupt itself when its probes have returned.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cuda_resolve.detect as detect
from cuda_resolve._signals import Terminated, interrupts_call, terminate_as_interrupt


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT as an interactive Python has it (a runner started in the background ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_until(condition, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_signal_inside_the_block_calls_stop_from_another_thread_and_raises_nothing_there(
    ctrl_c_raises: None,
) -> None:
    callers: list[str] = []
    with interrupts_call(lambda: callers.append(threading.current_thread().name)) as received:
        os.kill(os.getpid(), signal.SIGINT)
        # A KeyboardInterrupt raised where the signal lands would end this loop early.
        assert _wait_until(lambda: bool(callers)), "stop was never called"
        time.sleep(3 * 0.05)
    assert len(received) == 1 and type(received[0]) is KeyboardInterrupt
    assert callers and "MainThread" not in callers, callers
    assert len(callers) >= 2, "stop is repeated until the block ends"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_inside_the_block_is_kept_as_terminated(ctrl_c_raises: None) -> None:
    stopped = threading.Event()
    with terminate_as_interrupt(), interrupts_call(stopped.set) as received:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.wait(10.0)
    assert len(received) == 1 and isinstance(received[0], Terminated)
    assert received[0].signum == signal.SIGTERM


def test_a_handler_that_is_not_ours_is_left_in_charge() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with interrupts_call(lambda: pytest.fail("stop was called")) as received:
            os.kill(os.getpid(), signal.SIGINT)
            assert _wait_until(lambda: bool(seen))
        assert received == []
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_a_probe_lets_it_finish_then_detect_raises_it(
    ctrl_c_raises: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished: list[bool] = []
    real_probe = detect.probe_nvidia

    def probe_hit_by_ctrl_c(**kwargs):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)  # where an import, or any other probe code, would be running
        finished.append(True)
        return real_probe(**kwargs)

    monkeypatch.setattr(detect, "probe_nvidia", probe_hit_by_ctrl_c)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        detect.detect_environment(
            root=tmp_path, environ={"PATH": "/usr/bin:/bin"}, cache_dir=tmp_path / "cache"
        )
    assert finished == [True], "the interrupt was raised inside the probe"
    assert time.monotonic() - started < 5.0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_importlib_swallowed_still_ends_the_command_with_130(tmp_path: Path) -> None:
    """The import lock left held by this thread, as importlib's module-lock callback leaves it
    when a Ctrl-C lands there: without the check, detect's probe threads hang at their first
    import."""
    import subprocess
    import sys

    script = (
        "import _imp, sys\n"
        "from cuda_resolve.cli import main\n"
        "_imp.acquire_lock()\n"
        "sys.exit(main(['detect']))\n"
    )
    env = {**os.environ, "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr and done.stdout == ""
