"""Running programs for a build or an install, and running the build itself.

:func:`run_logged` runs one program in a session of its own, every output line to a log file and
a callback, and ends it with everything it started (:mod:`cuda_resolve._sessions`) when it is
interrupted (Ctrl-C, SIGTERM, SIGHUP) or when, after it exited, a background process it left keeps
its output open. :func:`logged_runner` is the default :class:`ProcessRunner`, the one way
:class:`~cuda_resolve.install.pip.TargetPip` runs pip; a test gives a recording fake instead.

:func:`build_wheel` runs ``pip wheel --no-build-isolation --no-deps`` through the target's
:class:`~cuda_resolve.install.pip.TargetPip`, ninja's ``[n/m]`` lines turned into progress, and
reads a failure for the lines that matter and the known fix.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import selectors
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from .._frozen import frozen
from .._lifeline import die_with_parent, started
from .._sessions import end as end_members
from .._sessions import end_session, orphans_holding_output, pipe_holders
from .._signals import deferred_interrupts
from ..errors import BuildError
from ..redaction import redact_data, redact_urls
from .diagnose import diagnose, error_lines

if TYPE_CHECKING:
    from ..install.pip import TargetPip

__all__ = [
    "LINGER_SECONDS",
    "NOTE_PREFIX",
    "BuildProgress",
    "ProcessRunner",
    "build_wheel",
    "compiled_source",
    "linked_library",
    "logged_runner",
    "run_logged",
]

_NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
#: What a compile unit's source file is called (nvcc's and the C++ compiler's inputs).
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++", ".cuh", ".mm")
#: A link command: a shared library made from objects (setuptools' or ninja's link step).
_LINK = re.compile(r"\s-shared\s(?:.*\s)?-o\s+['\"]?(\S+?\.so[\w.]*)['\"]?(?:\s|$)")
_TAIL_LINES = 400  # what a failure is diagnosed from; the whole output is in the log
#: How long a background process may keep a program's output open after the program exited.
LINGER_SECONDS = 3.0
_POLL_SECONDS = 0.2
#: How often the session is searched for processes left holding an output pipe.
_SCAN_SECONDS = 1.0
#: Starts a line the runner adds to a program's output (in the log, the tail and ``on_line``).
NOTE_PREFIX = "[cuda-resolve] "


@frozen(kw_only=False)
class BuildProgress:
    done: int | None  # compile units finished (ninja), None before ninja starts
    total: int | None
    elapsed: float
    line: str
    unit: str = ""  # the compile unit most recently started (ninja's line names its source)
    linking: str = ""  # the shared library being linked once the compile units are done
    linking_for: float = 0.0  # seconds the link has taken so far


class ProcessRunner(Protocol):
    """Runs ``command`` with exactly ``environ``, its output to ``log_path`` and ``on_line``;
    returns (exit status, the last lines). :func:`logged_runner` is the real one."""

    def __call__(
        self,
        command: Sequence[str],
        *,
        environ: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = ...,
    ) -> tuple[int, list[str]]: ...


def logged_runner(
    command: Sequence[str],
    *,
    environ: Mapping[str, str],
    log_path: Path,
    cwd: Path | None = None,
    on_line: Callable[[str], None] = lambda _: None,
) -> tuple[int, list[str]]:
    """:func:`run_logged` with its output appended to the file ``log_path``."""
    with open(log_path, "a", encoding="utf-8") as log:
        return run_logged(command, environ=environ, log=log, cwd=cwd, on_line=on_line)


def run_logged(
    command: Sequence[str],
    *,
    environ: Mapping[str, str],
    log: IO[str],
    cwd: Path | None = None,
    on_line: Callable[[str], None] = lambda _: None,
    linger: float = LINGER_SECONDS,
) -> tuple[int, list[str]]:
    """Run ``command`` in its own session, every output line to ``log`` and ``on_line``.

    Returns (exit status, the last lines). Ctrl-C, SIGTERM or SIGHUP (any exception here) ends
    the whole session, compilers included, before it propagates: nothing keeps compiling after
    we stop. A process the program left running with its output open (``cmd &`` in a build
    script) is ended ``linger`` seconds after the program exited, and a line in the output says
    which one and why; it cannot hang the build.

    The command line written to the log, every line written there, every line given to
    ``on_line`` and every line returned are redacted (:func:`~cuda_resolve.redaction.redact_urls`):
    pip's arguments carry index and proxy credentials, and pip or a build may print them back.
    """
    shown: list[str] = redact_data(
        list(command)
    )  # each argument: "--proxy" "user:pw@host:port" too
    log.write(f"$ {' '.join(shown)}\n")
    log.flush()
    tail: deque[str] = deque(maxlen=_TAIL_LINES)

    def emit(line: str) -> None:
        text = redact_urls(line)
        log.write(text + "\n")
        tail.append(text)
        on_line(text)

    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=die_with_parent(),  # killed with us (SIGKILL): pip must not go on alone
    )
    started(process.pid)  # an install in progress records it: undo waits for it
    assert process.stdout is not None
    fd = process.stdout.fileno()
    try:
        _pump(process, fd, _program_name(command), emit, linger)
        status = process.wait()
    except BaseException:
        with deferred_interrupts():  # a second Ctrl-C must not leave half of them running
            end_session(process, also=pipe_holders(fd))
        raise
    finally:
        process.stdout.close()
    log.write(f"[exit status {status}]\n")
    log.flush()
    return status, list(tail)


def _program_name(command: Sequence[str]) -> str:
    """``pip`` for ``python -m pip ...``, else the program's file name."""
    words = list(command)
    if len(words) >= 3 and words[1] == "-m":
        return words[2]
    return Path(words[0]).name if words else "the program"


def _pump(
    process: subprocess.Popen[bytes], fd: int, name: str, emit: Callable[[str], None], linger: float
) -> None:
    """Read ``fd`` to its end, line by line (universal newlines, undecodable bytes replaced).

    Whatever is left holding an output pipe is ended ``linger`` seconds after the process that
    started it exited: ``fd`` itself once ``process`` has exited, and a pipe inside the session
    (pip reading a build hook's output) once the hook exited but left a child with its output."""
    decoder = io.IncrementalNewlineDecoder(
        codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True
    )
    pending = ""
    exited_at: float | None = None
    orphaned_at: dict[int, float] = {}
    next_scan = time.monotonic() + _SCAN_SECONDS
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if selector.select(_POLL_SECONDS):
                chunk = _read(fd)
                if not chunk:
                    break
                *lines, pending = (pending + decoder.decode(chunk)).split("\n")
                for line in lines:
                    emit(line)
            now = time.monotonic()
            if now >= next_scan:
                next_scan = now + _SCAN_SECONDS
                _end_orphans(process.pid, orphaned_at, now, emit, linger)
            if process.poll() is None:
                continue
            if exited_at is None:
                exited_at = now
            elif now - exited_at >= linger:
                holders = pipe_holders(fd)
                left = end_session(process, also=holders, gentle=False)
                named = ", ".join(str(m) for m in left) or "a process it started"
                emit(
                    f"{NOTE_PREFIX}{name} exited (status {process.returncode}) but {named} kept "
                    f"its output open: ended after {linger:.0f} s"
                )
                break
    rest = pending + decoder.decode(b"", final=True)
    if rest:
        emit(rest.rstrip("\n"))


def _end_orphans(
    session: int,
    orphaned_at: dict[int, float],
    now: float,
    emit: Callable[[str], None],
    linger: float,
) -> None:
    """End the session's processes that have held an output pipe for ``linger`` seconds since the
    process that started them exited (:func:`~cuda_resolve._sessions.orphans_holding_output`)."""
    found = {m.pid: m for m in orphans_holding_output(session)}
    for pid in list(orphaned_at):
        if pid not in found:
            del orphaned_at[pid]
    due = []
    for pid, member in found.items():
        since = orphaned_at.setdefault(pid, now)
        if now - since >= linger:
            due.append(member)
    if due:
        end_members(due)
        for member in due:
            del orphaned_at[member.pid]
            emit(
                f"{NOTE_PREFIX}{member} was left running by a build step that exited, holding its "
                f"output open (which would hang the build): ended after {linger:.0f} s"
            )


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def build_wheel(
    pip: TargetPip,
    source_dir: Path,
    out_dir: Path,
    *,
    environ: Mapping[str, str],
    log_path: Path,
    label: str,
    on_progress: Callable[[BuildProgress], None] = lambda _: None,
    disks: Sequence[tuple[str, Path]] = (),
) -> Path:
    """Build one wheel from ``source_dir`` into ``out_dir`` with ``pip`` (the target's pip, its
    options, its log); ``environ`` is the build's variables. Return the wheel's path. ``disks``:
    (what, folder) to name first when the disk fills up (the folders the user chose)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "--no-build-isolation",
        "--no-deps",
        "--no-cache-dir",
        "-v",
        "-w",
        str(out_dir),
        str(source_dir),
    ]
    started = time.monotonic()
    step: list[int | None] = [None, None]
    unit = [""]
    linking: list[str | float] = ["", 0.0]  # the library being linked, since when

    def on_line(text: str) -> None:
        now = time.monotonic()
        match = _NINJA_STEP.match(text)
        if match:
            step[0], step[1] = int(match.group(1)), int(match.group(2))
            unit[0] = compiled_source(text) or unit[0]
            linking[:] = ["", 0.0]  # a unit started or finished: not linking (yet)
        library = linked_library(text)
        if library:  # the link command: its library named (since the last unit, if linking)
            linking[:] = [library, linking[1] if linking[0] else now]
        elif match and step[0] == step[1] and unit[0]:
            # ninja (in a pipe) prints a unit's line once it finished: after the last one the
            # objects are linked, silently for a minute on a small machine.
            linking[:] = ["the extension", now]
        name, since = linking
        assert isinstance(name, str) and isinstance(since, float)
        on_progress(
            BuildProgress(
                step[0],
                step[1],
                now - started,
                text,
                unit[0],
                linking=name,
                linking_for=now - since if name else 0.0,
            )
        )

    status, tail = pip.wheel(
        args, environ=environ, log_path=log_path, cwd=source_dir, on_line=on_line
    )
    if status != 0:
        folders = [
            *disks,
            ("the build folder", source_dir),
            ("the wheel's output folder", out_dir),
            ("the build log's folder", log_path.parent),
        ]
        raise _failure(label, status, tail, log_path, folders)
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(
            f"{label}: pip wheel succeeded but left {len(wheels)} wheels in {out_dir}",
            hint=f"see the log: {log_path}",
        )
    return wheels[0]


def compiled_source(line: str) -> str:
    """The file name of the source a compiler command line compiles (the word after ``-c`` that
    names a source file: nvcc's lines carry ``-c -c FILE``), or "" where it names none."""
    words = line.split()
    for index, word in enumerate(words):
        if word != "-c":
            continue
        for following in words[index + 1 :]:
            if following == "-c":
                continue
            name = following.strip("'\"")
            if name.endswith(_SOURCE_SUFFIXES):
                return Path(name).name
            break
    for word in words:  # a compiler line that names its source elsewhere (after -o ...)
        name = word.strip("'\"")
        if not name.startswith("-") and name.endswith(_SOURCE_SUFFIXES):
            return Path(name).name
    return ""


def linked_library(line: str) -> str:
    """The file name of the shared library a link command line makes, or ""."""
    found = _LINK.search(line)
    return Path(found.group(1)).name if found else ""


def _failure(
    label: str,
    status: int,
    tail: list[str],
    log_path: Path,
    folders: Sequence[tuple[str, Path]] = (),
) -> BuildError:
    lines = error_lines(tail)
    found = diagnose(tail)
    message = f"building {label} failed (exit {status})"
    if lines:
        message += ":\n" + "\n".join(f"  {line}" for line in lines)
    if found is not None:
        kind, meaning, fix = found
        message += f"\ndiagnosis ({kind}): {meaning}"
        if (
            kind == "disk-full"
            and ": '" not in meaning
            and (fullest := fullest_disk(folders)) is not None
        ):
            # The compiler's or linker's line seldom names a path: then the disk with the least
            # room does (a quota is another diagnosis: free space says nothing of it).
            message += f"; the disk holding {fullest}"
            fix = (
                "free space there or point TMPDIR at a folder on another disk with a few GB free, "
                "then build again"
            )
        return BuildError(message, hint=f"{fix}. Full log: {log_path}")
    return BuildError(message, hint=f"read the full log: {log_path}")


def fullest_disk(folders: Sequence[tuple[str, Path]]) -> str | None:
    """``"PATH (WHAT) has N MB free"`` for the folder among ``folders`` (what, path) whose disk has
    the least room left, or None where none can be measured (each disk is measured once)."""
    measured: dict[int, tuple[int, str, Path]] = {}
    for what, folder in folders:
        path = folder
        while not path.exists() and path != path.parent:  # a folder removed or never made: its disk
            path = path.parent
        try:
            device = os.stat(path).st_dev
            free = shutil.disk_usage(path).free
        except OSError:
            continue
        measured.setdefault(device, (free, what, folder))
    if not measured:
        return None
    free, what, folder = min(measured.values(), key=lambda entry: entry[0])
    return f"{folder} ({what}) has {free / 2**20:.0f} MB free"
