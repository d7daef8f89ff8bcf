"""Run a foreign program or a stalling library call with a deadline; never raise.

Everything here is used by probes, so failures become values: ``None`` when a program cannot
be started, a :class:`Ran` that says it timed out when it had to be killed. A program is
started in its own session so that a timeout kills its whole process group: a wrapper script
that runs ``sleep 30`` without ``exec`` would otherwise keep the output pipe open, and
``communicate()`` would wait for the grandchild after the child was killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Background", "Ran", "call_with_timeout", "run", "run_text"]

T = TypeVar("T")

#: Room after a kill for the pipes to drain; past it the probe gives up on the output.
_DRAIN_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Ran:
    """What a finished (or killed) program left behind."""

    stdout: str
    stderr: str
    returncode: int | None  # None: killed at the deadline

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def first_line(self) -> str:
        """The first non-blank line of the output, the usual place for an error message."""
        for line in (self.stdout + "\n" + self.stderr).splitlines():
            if line.strip():
                return line.strip()
        return ""


def _child_environment(environ: Mapping[str, str] | None) -> dict[str, str]:
    # LC_ALL=C: the parsers read English output (gcc and nvidia-smi are localised elsewhere).
    env = dict(os.environ if environ is None else environ)
    env["LC_ALL"] = "C"
    return env


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Ran | None:
    """Run *argv*; ``None`` when it cannot be started (missing, not executable, not a program)."""
    posix = sys.platform != "win32"
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_environment(environ),
            cwd=cwd,
            start_new_session=posix,
        )
    except (OSError, ValueError):
        return None
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process, group=posix)
        try:
            out, err = process.communicate(timeout=_DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return Ran(_decode(out), _decode(err), None)
    return Ran(_decode(out), _decode(err), process.returncode)


def run_text(
    argv: Sequence[str],
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Standard output of *argv* when it exits 0 within *timeout*, else ``None``."""
    ran = run(argv, timeout=timeout, environ=environ)
    return ran.stdout if ran is not None and ran.ok else None


def _kill(process: subprocess.Popen[bytes], *, group: bool) -> None:
    try:
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:
        pass  # it exited between the timeout and the kill


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def call_with_timeout(function: Callable[[], T], *, timeout: float) -> T | None:
    """Call *function* in a daemon thread; ``None`` if it has not returned by *timeout*.

    For in-process library calls that can stall (``cuInit``, ``nvmlInit`` on a wedged GPU):
    they cannot be cancelled, so the thread is abandoned and the process may still exit.
    *function* must catch its own errors; an exception that escapes it counts as no answer.
    """
    box: list[T] = []

    def target() -> None:
        try:
            box.append(function())
        except Exception:  # noqa: S110 - the caller only wants "no answer"
            pass

    thread = threading.Thread(target=target, name="cuda-resolve-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else None


class Background(Generic[T]):
    """*function* started in a thread now; :meth:`result` waits and re-raises its exception.

    For probes that overlap (the target interpreter, compilers, the driver). A plain thread
    rather than ``concurrent.futures``, whose import (logging and friends) costs more than
    the probes it would schedule.
    """

    def __init__(self, function: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(function,), name="cuda-resolve-detect", daemon=True)
        self._thread.start()

    def _run(self, function: Callable[[], T]) -> None:
        try:
            self._value.append(function())
        except BaseException as exc:  # handed to the caller in result()
            self._error.append(exc)

    def result(self) -> T:
        self._thread.join()
        if self._error:
            raise self._error[0]
        return self._value[0]
