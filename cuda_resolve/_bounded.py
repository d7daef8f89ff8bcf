"""Bounded input: read a file or run a program with a size cap and a deadline, never a hang.

Every file cuda-resolve reads and every program it starts goes through here, so no input can
make it hang, fill memory or replace something that is not a file:

- :func:`read_bytes` / :func:`read_text` read a *regular* file, at most ``limit`` bytes. A FIFO,
  a device or a socket is refused before it is opened (opening a FIFO blocks; reading
  ``/dev/zero`` never ends); they raise :class:`OSError` subclasses whose ``strerror`` says what
  was wrong. :func:`read_user_text` turns those into the caller's
  :class:`~cuda_resolve.errors.UsageError` class, naming the path.
- :func:`run` starts a program in its own process group (session), keeps at most
  ``output_limit`` bytes of its output, and kills the whole group when it runs past its
  deadline, floods its output, or the user presses Ctrl-C; a grandchild that ignores its
  parent's death is killed too. :func:`kill_all` kills every group still running (the CLI's
  Ctrl-C handler and interpreter exit call it, for programs started from worker threads).
- :class:`Deadline` is one wall-clock budget shared by several calls: each call gets
  ``min(its own timeout, what is left)``.
"""

from __future__ import annotations

import atexit
import errno
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._frozen import frozen
from .errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    # subprocess is imported by what starts a program: a warm doctor starts none (issue 28).
    import subprocess
    from typing import BinaryIO

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_READ_LIMIT",
    "Deadline",
    "FileTooLargeError",
    "NotRegularFileError",
    "Ran",
    "check_regular",
    "is_regular_or_absent",
    "kill_all",
    "read_bytes",
    "read_head",
    "read_text",
    "read_user_text",
    "run",
]

#: Configuration files, profiles and index overlays are kilobytes; 4 MiB is far past any of them.
DEFAULT_READ_LIMIT = 4 * 1024 * 1024
#: A version banner or a JSON probe report is kilobytes; a flood past this is killed.
DEFAULT_OUTPUT_LIMIT = 1024 * 1024

_POSIX = sys.platform != "win32"


class NotRegularFileError(OSError):
    """The path is a FIFO, a device, a socket or another file that is not a regular file."""


class FileTooLargeError(OSError):
    """The file is larger than the caller's limit."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path: str | os.PathLike[str], mode: int) -> None:
    """Raise :class:`IsADirectoryError` / :class:`NotRegularFileError` unless *mode* is a file's."""
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file", os.fspath(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(
            errno.EINVAL, f"is {_kind(mode)}, not a regular file", os.fspath(path)
        )


def _too_large(path: str | os.PathLike[str], limit: int) -> FileTooLargeError:
    return FileTooLargeError(
        errno.EFBIG,
        f"is larger than {_size(limit)}, too large to be what is expected",
        os.fspath(path),
    )


def _size(count: int) -> str:
    return (
        f"{count // (1024 * 1024)} MiB"
        if count >= 1024 * 1024 and count % (1024 * 1024) == 0
        else f"{count} bytes"
    )


def read_bytes(path: str | os.PathLike[str], *, limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """The contents of the regular file *path* (links followed), at most *limit* bytes.

    Raises :class:`FileNotFoundError`, :class:`IsADirectoryError`, :class:`NotRegularFileError`
    (checked before opening, so a FIFO never blocks and a tape device is never rewound),
    :class:`FileTooLargeError`, or the :class:`OSError` of the failed open or read."""
    data = read_head(path, limit + 1)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def read_head(path: str | os.PathLike[str], count: int) -> bytes:
    """The first *count* bytes of the regular file *path* (all of it if shorter); raises as
    :func:`read_bytes` does, except that a longer file is not an error."""
    check_regular(path, os.stat(path).st_mode)
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
        | getattr(os, "O_BINARY", 0)
    )
    descriptor = os.open(path, flags)
    with os.fdopen(descriptor, "rb", buffering=0) as handle:
        check_regular(path, os.fstat(descriptor).st_mode)  # swapped for a FIFO since the stat
        return _read_at_most(handle, count)


def _read_at_most(handle: BinaryIO, count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = handle.read(min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], *, limit: int = DEFAULT_READ_LIMIT) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a BOM dropped); :class:`UnicodeDecodeError` if it is
    not."""
    return read_bytes(path, limit=limit).decode("utf-8-sig")


def read_user_text(
    path: str | os.PathLike[str],
    *,
    error: type[UsageError] = UsageError,
    hint: str | None = None,
    what: str = "a file",
    limit: int = DEFAULT_READ_LIMIT,
) -> str:
    """:func:`read_text` for a file the user points at: every failure is one *error* naming the
    path."""
    try:
        return read_text(path, limit=limit)
    except FileNotFoundError:
        raise error(f"{path}: no such file", hint=hint) from None
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: cannot be read: not UTF-8 text (byte {exc.start})", hint=hint
        ) from None
    except (IsADirectoryError, NotRegularFileError, FileTooLargeError) as exc:
        raise error(f"{path}: {exc.strerror}; expected {what}", hint=hint) from None
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}", hint=hint) from None


# -- programs ------------------------------------------------------------------------------


@frozen(kw_only=False)
class Ran:
    """What a finished (or killed) program left behind."""

    stdout: str
    stderr: str
    returncode: int | None  # None: killed (deadline passed, or output past the limit)
    overflowed: bool = False  # killed because it wrote more than the output limit
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None and not self.overflowed

    @property
    def first_line(self) -> str:
        """The first non-blank line of the output, the usual place for an error message."""
        for line in (self.stdout + "\n" + self.stderr).splitlines():
            if line.strip():
                return line.strip()
        return ""


_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()
_exiting = False  # set at interpreter exit: a worker thread may not start another program
#: Programs a (daemon) thread is starting now, not yet in _live: exit waits for them to be
#: there, or a Ctrl-C landing during a probe's fork would leave that program running.
_starting = 0
_settled = threading.Condition(_live_lock)


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        if _POSIX:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: pid == process group id
        else:  # pragma: no cover - Windows
            import subprocess

            subprocess.run(
                ["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True, check=False
            )
    except OSError:
        pass  # the group is gone already
    try:
        process.kill()
    except OSError:
        pass


def kill_all() -> None:
    """Kill every program :func:`run` started that is still running, with its process group."""
    with _live_lock:
        running = list(_live)
    for process in running:
        _kill(process)


def _at_exit() -> None:
    global _exiting
    with _live_lock:
        _exiting = True
        _settled.wait_for(lambda: _starting == 0, timeout=5.0)  # a fork takes milliseconds
    kill_all()


atexit.register(_at_exit)


class _Collector:
    """Reads one pipe in a thread, keeping at most the shared limit; says when it is over."""

    def __init__(
        self,
        stream: BinaryIO,
        budget: list[int],
        over: threading.Event,
        wake: threading.Event,
        lock: threading.Lock,
    ) -> None:
        self.chunks: list[bytes] = []
        self._stream = stream
        self._budget = budget
        self._over = over
        self._wake = wake
        self._lock = lock
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="cuda-resolve-pipe", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = (
                    self._stream.read1(65536)
                    if hasattr(self._stream, "read1")
                    else self._stream.read(65536)
                )
                if not chunk:
                    break
                with self._lock:
                    keep = min(len(chunk), max(self._budget[0], 0))
                    self._budget[0] -= len(chunk)
                    if keep:
                        self.chunks.append(chunk[:keep])
                    if self._budget[0] < 0:
                        self._over.set()
                        break
        except (OSError, ValueError):
            pass
        finally:
            # Closed here, by the reading thread: closing it from another thread while this
            # one blocks in read (a grandchild that escaped the kill holds the pipe) would
            # wait for that read forever.
            try:
                self._stream.close()
            except (OSError, ValueError):
                pass
            self.done.set()
            self._wake.set()

    def data(self) -> bytes:
        with self._lock:
            return b"".join(self.chunks)


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: bytes | None = None,
) -> Ran | None:
    """Run *argv* for at most *timeout* seconds, keeping at most *output_limit* bytes of
    stdout and stderr together; ``None`` when it cannot be started (missing, not executable,
    not a program). *env* is the child's whole environment (default: this one's).

    Past the timeout or the output limit the program's process group is killed and the
    :class:`Ran` has ``returncode=None``; Ctrl-C kills the group and re-raises."""
    global _starting
    import subprocess

    started = time.monotonic()
    with _live_lock:
        if _exiting:  # a worker thread while the interpreter exits: nothing more is started
            return None
        _starting += 1
    process: subprocess.Popen[bytes] | None = None
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=_POSIX,
            creationflags=0 if _POSIX else getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )
    except (OSError, ValueError):
        return None
    finally:
        with _live_lock:
            _starting -= 1
            if process is not None:
                _live.add(process)
            exiting = _exiting
            _settled.notify_all()
    if exiting:  # started by a worker thread while the interpreter exits: not kept
        _kill(process)
    try:
        return _collect(
            process, timeout=timeout, output_limit=output_limit, stdin=stdin, started=started
        )
    except BaseException:
        _kill(process)  # Ctrl-C (or anything else): never leave the program behind
        raise
    finally:
        with _live_lock:
            _live.discard(process)
        if process.stdin is not None:
            try:
                process.stdin.close()
            except (OSError, ValueError):
                pass


def _collect(
    process: subprocess.Popen[bytes],
    *,
    timeout: float,
    output_limit: int,
    stdin: bytes | None,
    started: float,
) -> Ran:
    import subprocess

    assert process.stdout is not None and process.stderr is not None
    budget = [output_limit]
    over = threading.Event()
    wake = threading.Event()  # set by a collector that finished or went over the limit
    lock = threading.Lock()
    out = _Collector(process.stdout, budget, over, wake, lock)  # type: ignore[arg-type]
    err = _Collector(process.stderr, budget, over, wake, lock)  # type: ignore[arg-type]
    if stdin is not None and process.stdin is not None:
        threading.Thread(
            target=_feed, args=(process.stdin, stdin), name="cuda-resolve-stdin", daemon=True
        ).start()
    deadline = started + max(timeout, 0.0)
    killed = False
    # Wait for both pipes to close (the program and any child holding them are done), for the
    # output limit, or for the deadline. Event.wait is interrupted by Ctrl-C.
    while True:
        wake.clear()
        if over.is_set():
            killed = True
            break
        if out.done.is_set() and err.done.is_set():
            break
        left = deadline - time.monotonic()
        if left <= 0:
            killed = True
            break
        wake.wait(left)
    if not killed:
        try:
            process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:  # closed its output but kept running
            killed = True
    if killed:
        _kill(process)
        try:
            process.wait(1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass
        out.done.wait(0.2)
        err.done.wait(0.2)
    seconds = time.monotonic() - started
    return Ran(
        _decode(out.data()),
        _decode(err.data()),
        None if killed else process.returncode,
        overflowed=killed and over.is_set(),
        seconds=seconds,
    )


def _feed(pipe: BinaryIO, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (OSError, ValueError):
        pass


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# -- one budget for several calls ----------------------------------------------------------


class Deadline:
    """One wall-clock budget shared by several calls, and a record of what ran out of it.

    ``deadline.timeout(5.0)`` is the time a call may take now: its own 5 s, or what is left
    of the budget if that is less (0 once it is spent). :meth:`note_slow` records a call that
    was cut short so the caller can say which one it was."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._slow: list[str] = []

    def remaining(self) -> float:
        return max(self._end - time.monotonic(), 0.0)

    def cancel(self) -> None:
        """Spend what is left now (Ctrl-C): calls not yet started are skipped."""
        self._end = time.monotonic()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def timeout(self, own: float) -> float:
        return min(own, self.remaining())

    def note_slow(self, what: str) -> None:
        with self._lock:
            if what not in self._slow:
                self._slow.append(what)

    @property
    def slow(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._slow)


def is_regular_or_absent(path: Path) -> bool:
    """True when *path* (links followed) is a regular file or does not exist."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(mode)
