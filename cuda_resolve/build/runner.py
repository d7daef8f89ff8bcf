"""Running the build: ``python -m pip wheel --no-build-isolation --no-deps`` with the target's
interpreter, its output streamed to a log file, ninja's ``[n/m]`` lines turned into progress, and
a failure read for the lines that matter and the known fix.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import BuildError
from ..redaction import redact_data, redact_urls
from .diagnose import diagnose, error_lines

__all__ = ["BuildProgress", "build_wheel", "run_logged"]

_NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_TAIL_LINES = 400  # what a failure is diagnosed from; the whole output is in the log


@dataclass(frozen=True, slots=True)
class BuildProgress:
    done: int | None  # compile units finished (ninja), None before ninja starts
    total: int | None
    elapsed: float
    line: str


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()


def run_logged(
    command: Sequence[str],
    *,
    environ: Mapping[str, str],
    log: IO[str],
    cwd: Path | None = None,
    on_line: Callable[[str], None] = lambda _: None,
) -> tuple[int, list[str]]:
    """Run ``command`` in its own process group, every output line to ``log`` and ``on_line``.

    Returns (exit status, the last lines). Ctrl-C (or any exception here) kills the whole group,
    compilers included, before it propagates: nothing keeps compiling after we stop.

    The command line written to the log, every line written there, every line given to
    ``on_line`` and every line returned are redacted (:func:`~cuda_resolve.redaction.redact_urls`):
    pip's arguments carry index and proxy credentials, and pip or a build may print them back.
    """
    shown: list[str] = redact_data(list(command))  # each argument: "--proxy" "user:pw@host:port" too
    log.write(f"$ {' '.join(shown)}\n")
    log.flush()
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    process = subprocess.Popen(
        list(command), cwd=cwd, env=dict(environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1, start_new_session=True,
    )
    try:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                text = redact_urls(line.rstrip("\n"))
                log.write(text + "\n")
                tail.append(text)
                on_line(text)
        status = process.wait()
    except BaseException:
        _kill_group(process)
        raise
    log.write(f"[exit status {status}]\n")
    log.flush()
    return status, list(tail)


def build_wheel(
    python: str,
    source_dir: Path,
    out_dir: Path,
    *,
    environ: Mapping[str, str],
    log_path: Path,
    label: str,
    on_progress: Callable[[BuildProgress], None] = lambda _: None,
) -> Path:
    """Build one wheel from ``source_dir`` into ``out_dir``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [
        python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--disable-pip-version-check",
        "--no-cache-dir", "-v", "-w", str(out_dir), str(source_dir),
    ]
    started = time.monotonic()
    step: list[int | None] = [None, None]

    def on_line(text: str) -> None:
        match = _NINJA_STEP.match(text)
        if match:
            step[0], step[1] = int(match.group(1)), int(match.group(2))
        on_progress(BuildProgress(step[0], step[1], time.monotonic() - started, text))

    with open(log_path, "a", encoding="utf-8") as log:
        status, tail = run_logged(command, environ=environ, log=log, cwd=source_dir, on_line=on_line)
    if status != 0:
        raise _failure(label, status, tail, log_path)
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{label}: pip wheel succeeded but left {len(wheels)} wheels in {out_dir}",
                         hint=f"see the log: {log_path}")
    return wheels[0]


def _failure(label: str, status: int, tail: list[str], log_path: Path) -> BuildError:
    lines = error_lines(tail)
    found = diagnose(tail)
    message = f"building {label} failed (exit {status})"
    if lines:
        message += ":\n" + "\n".join(f"  {line}" for line in lines)
    if found is not None:
        kind, meaning, fix = found
        message += f"\ndiagnosis ({kind}): {meaning}"
        return BuildError(message, hint=f"{fix}. Full log: {log_path}")
    return BuildError(message, hint=f"read the full log: {log_path}")
