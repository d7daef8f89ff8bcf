"""The processes a started program leaves behind, found and ended.

A program cuda-resolve starts for a build or an install (pip, and through it setup.py, ninja,
nvcc, cicc ...) runs in a session of its own (``start_new_session``). ninja puts each compile in a
process group of its own, so killing the leader's group misses them; every one of them stays in
the session, though. A background process a build left (``cmd &``, a compiler server) may also
keep the output pipe open after the program exited. :func:`session_members` and
:func:`pipe_holders` find both kinds on Linux (``/proc``); :func:`end_session` ends them, gently
first: SIGINT to the leader's group (pip removes its temporary folders, ninja stops its compiles,
as after a Ctrl-C in a terminal), then SIGTERM and SIGKILL to whatever is left.

Elsewhere only the leader's process group is known and ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from ._frozen import frozen

__all__ = [
    "Member",
    "end",
    "end_session",
    "orphans_holding_output",
    "pipe_holders",
    "session_members",
]

_PROC = Path("/proc")
_LINUX = sys.platform.startswith("linux")
#: How long the leader gets to end after SIGINT, and everything left after SIGTERM.
GENTLE_SECONDS = 2.0
FIRM_SECONDS = 1.0


@frozen(kw_only=False)
class Member:
    pid: int
    name: str  # the program's name as the kernel knows it (``comm``)

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid})"


def _stat(pid: int) -> tuple[str, str, int, int] | None:
    """(name, state, session, parent) of a process, None when it is gone or unreadable."""
    try:  # os.open, not Path.read_text: a build's runner scans every process each second
        descriptor = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            text = os.read(descriptor, 4096).decode("utf-8", "replace")
        finally:
            os.close(descriptor)
    except OSError:
        return None
    try:
        name = text[text.index("(") + 1 : text.rindex(")")]
        state, parent, _group, session = text[text.rindex(")") + 2 :].split()[:4]
        return name, state, int(session), int(parent)
    except (ValueError, IndexError):
        return None


def _pids() -> list[int]:
    try:
        return [int(entry.name) for entry in os.scandir(_PROC) if entry.name.isdigit()]
    except OSError:
        return []


def session_members(session: int) -> list[Member]:
    """The live processes (not zombies) of ``session``, the leader included, on Linux."""
    return [member for member, _parent in _members(session)]


def _members(session: int) -> list[tuple[Member, int]]:
    if not _LINUX:
        return []
    found: list[tuple[Member, int]] = []
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None and stat[2] == session and stat[1] != "Z" and pid != os.getpid():
            found.append((Member(pid, stat[0]), stat[3]))
    return found


def orphans_holding_output(session: int) -> list[Member]:
    """The processes of ``session`` (not its leader) whose parent has exited, leaving them to
    init, while their output still goes to a pipe: a background process a build step left
    behind, which keeps whoever reads that pipe (pip, reading a build hook's output) waiting."""
    members = _members(session)
    inside = {member.pid for member, _parent in members}
    found: list[Member] = []
    for member, parent in members:
        if member.pid == session or parent in inside:
            continue
        if any(_is_pipe(member.pid, fd) for fd in (1, 2)):
            found.append(member)
    return found


def _is_pipe(pid: int, fd: int) -> bool:
    try:
        return os.readlink(_PROC / str(pid) / "fd" / str(fd)).startswith("pipe:")
    except OSError:
        return False


def end(members: Iterable[Member]) -> None:
    """SIGTERM to each of ``members``, then SIGKILL to those still there :data:`FIRM_SECONDS`
    later."""
    pids = [m.pid for m in members]
    _signal(pids, signal.SIGTERM)
    _wait_for(None, pids, FIRM_SECONDS)
    _signal([pid for pid in pids if _alive(pid)], signal.SIGKILL)


def pipe_holders(pipe_fd: int) -> list[Member]:
    """The other live processes with an end of the pipe ``pipe_fd`` (an end this process holds)
    open, on Linux: a background process that outlived the program it was started by."""
    if not _LINUX:
        return []
    try:
        target = f"pipe:[{os.fstat(pipe_fd).st_ino}]"
    except OSError:
        return []
    found: list[Member] = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            descriptors = os.scandir(_PROC / str(pid) / "fd")
        except OSError:  # gone, or another user's
            continue
        with descriptors:
            for entry in descriptors:
                try:
                    link = os.readlink(entry.path)
                except OSError:
                    continue
                if link == target:
                    stat = _stat(pid)
                    if stat is not None and stat[1] != "Z":
                        found.append(Member(pid, stat[0]))
                    break
    return found


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    stat = _stat(pid) if _LINUX else None
    if _LINUX:
        return stat is not None and stat[1] != "Z"
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _wait_for(process: subprocess.Popen[bytes] | None, pids: Iterable[int], seconds: float) -> None:
    end = time.monotonic() + seconds
    waiting = list(pids)
    while time.monotonic() < end:
        if process is not None:
            process.poll()  # reap the leader, or it stays a zombie that looks alive
        waiting = [pid for pid in waiting if _alive(pid)]
        if not waiting:
            return
        time.sleep(0.02)


def end_session(
    process: subprocess.Popen[bytes], *, also: Iterable[Member] = (), gentle: bool = True
) -> list[Member]:
    """End ``process`` (started with ``start_new_session``), every process of its session and
    ``also``; returns the processes that were still running besides the leader.

    With ``gentle`` the leader's group gets SIGINT first and :data:`GENTLE_SECONDS` to end (a
    process started with SIGINT ignored, as a background job's children are, does not wait
    longer than that); then SIGTERM, :data:`FIRM_SECONDS`, SIGKILL to whatever is left."""
    session = process.pid
    others = {m.pid: m for m in [*session_members(session), *also] if m.pid != session}
    if gentle and process.poll() is None:
        try:
            os.killpg(session, signal.SIGINT)
        except OSError:
            pass
        _wait_for(process, [session], GENTLE_SECONDS)
    left = {m.pid: m for m in [*session_members(session), *also]}
    others.update({pid: m for pid, m in left.items() if pid != session})
    if process.poll() is None:
        left[session] = Member(session, "leader")
    if left:
        try:
            os.killpg(session, signal.SIGTERM)
        except OSError:
            pass
        _signal(left, signal.SIGTERM)
        _wait_for(process, left, FIRM_SECONDS)
        rest = [pid for pid in left if _alive(pid)] + [m.pid for m in session_members(session)]
        try:
            os.killpg(session, signal.SIGKILL)
        except OSError:
            pass
        _signal(rest, signal.SIGKILL)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass
    return sorted(others.values(), key=lambda m: m.pid)
