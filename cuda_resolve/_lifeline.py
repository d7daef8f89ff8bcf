"""A program we start dies with us, and an install records what it started.

pip runs in a session of its own (:mod:`cuda_resolve._sessions`): a Ctrl-C in the terminal
reaches only cuda-resolve, which then ends pip's whole session in order. A session of its own
also means that nothing ends pip when cuda-resolve itself is killed (SIGKILL, the OOM killer): it
would go on installing over an environment ``undo --last`` has just restored. So:

- :func:`die_with_parent` is a ``preexec_fn`` that asks the kernel (Linux's ``prctl``
  ``PR_SET_PDEATHSIG``) to SIGKILL the child when the thread that started it ends, and ends the
  child at once if that already happened (the parent died between ``fork`` and ``prctl``).
  Elsewhere it is ``None``.
- A process the child starts itself (a build backend, a compiler) is not covered by that.
  While an install is in progress (:func:`recording`), every program started through
  :func:`started` is written to a record (pid and start time); :func:`running` lists the
  processes of such a record that still run, the programs' own sessions included, so that
  ``undo`` waits for them instead of restoring under a writer. Linux only (``/proc``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ._sessions import Member, session_members

__all__ = ["die_with_parent", "recording", "running", "start_time", "started"]

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_lock = threading.Lock()
_record: Path | None = None


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, resolved in the parent (the child only calls it); imported on first
    use: most commands start no program."""
    if not _LINUX:
        return None
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return function


def _die_with(parent: int, prctl: Callable[..., int]) -> Callable[[], None]:
    def preexec() -> None:  # in the child, between fork and exec: only plain calls
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: nobody would end us
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die when this process (the starting thread) does;
    ``None`` where the kernel offers no such request."""
    prctl = _prctl()
    return None if prctl is None else _die_with(os.getpid(), prctl)


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``, field 22); ``None``
    when it is gone, a zombie, or unreadable. With the pid it names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            text = stream.read(4096).decode("ascii", "replace")
        fields = text[text.rindex(")") + 2 :].split()
        return None if fields[0] == "Z" else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def recording(path: Path) -> Iterator[None]:
    """Record every program :func:`started` reports to ``path`` until the block ends."""
    global _record
    with _lock:
        previous, _record = _record, path
    try:
        yield
    finally:
        with _lock:
            _record = previous


def started(pid: int) -> None:
    """Note that ``pid`` was started (a line "PID START" in the current record, if any). Never
    raises: the program dies with us anyway (:func:`die_with_parent`)."""
    with _lock:
        path = _record
        if path is None or not _LINUX:
            return
        with contextlib.suppress(OSError):
            with open(path, "a", encoding="ascii") as stream:
                stream.write(f"{pid} {start_time(pid) or 0}\n")


def running(path: Path) -> list[Member]:
    """The processes of the record at ``path`` that still run: a recorded program that is
    still the same process (its start time), and every process left in its session."""
    if not _LINUX:
        return []
    try:
        lines = path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    found: dict[int, Member] = {}
    for line in lines:
        try:
            pid, when = (int(word) for word in line.split())
        except ValueError:
            continue
        now = start_time(pid)
        if now is not None and now != when:
            continue  # the pid is another process's now, and so is the session it leads
        if now is not None:
            found[pid] = Member(pid, _name(pid))
        for member in session_members(pid):  # the program itself when alive, and its session
            found[member.pid] = member
    return sorted(found.values(), key=lambda m: m.pid)


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as stream:
            return stream.read(64).strip() or "?"
    except OSError:
        return "?"
