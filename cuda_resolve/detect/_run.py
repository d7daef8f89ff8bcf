"""Run a foreign program or a stalling library call with a deadline; never raise.

Everything here is used by probes, so failures become values: ``None`` when a program cannot
be started, a :class:`Ran` that says it was killed when it ran past its time or flooded its
output. Programs run through :func:`cuda_resolve._bounded.run`: in their own session, so a
timeout (or Ctrl-C) kills the whole process group, with at most a megabyte of output kept.

:func:`sharing` sets one :class:`~cuda_resolve._bounded.Deadline` for every probe started
under it, in this thread and in :class:`Background` threads: each program then gets at most
what is left of that budget, and one that is cut short or skipped is recorded there, so
``detect`` on a machine with several hanging tools answers within the budget and says which
probe was slow.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from .._bounded import DEFAULT_OUTPUT_LIMIT, Deadline, Ran
from .._bounded import run as run_bounded

__all__ = [
    "Background",
    "Ran",
    "call_with_timeout",
    "current_deadline",
    "run",
    "run_text",
    "sharing",
]

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Generic, TypeVar

    T = TypeVar("T")
else:  # Background is generic to the type checker only; Generic[T] is a plain base at run time

    class Generic:
        def __class_getitem__(cls, _item: object) -> type:
            return cls

    T = object

#: How often a wait for a library call checks whether its deadline was cancelled.
_CANCEL_POLL_SECONDS = 0.05

_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "cuda_resolve_deadline", default=None
)


@contextlib.contextmanager
def sharing(deadline: Deadline) -> Iterator[Deadline]:
    """Every probe run inside (and in :class:`Background` threads started inside) shares
    *deadline*."""
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> Deadline | None:
    return _DEADLINE.get()


def _child_environment(environ: Mapping[str, str] | None) -> dict[str, str]:
    # LC_ALL=C: the parsers read English output (gcc and nvidia-smi are localised elsewhere).
    env = dict(os.environ if environ is None else environ)
    env["LC_ALL"] = "C"
    return env


def _label(argv: Sequence[str]) -> str:
    import shlex  # a label is made only when a program runs: never on a warm cache

    shown = [os.path.basename(argv[0]), *argv[1:]] if argv else []
    text = shlex.join(shown)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"`{text}` ({argv[0]})" if argv and os.path.basename(argv[0]) != argv[0] else f"`{text}`"


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
) -> Ran | None:
    """Run *argv*; ``None`` when it cannot be started (missing, not executable, not a program).

    Under a shared deadline a program that is cut short, floods its output, or is not started
    because the budget is spent (a :class:`Ran` with ``returncode=None`` and no output) is
    recorded there; callers then need not note it themselves."""
    deadline = _DEADLINE.get()
    allowed = timeout if deadline is None else deadline.timeout(timeout)
    if deadline is not None and allowed <= 0:
        deadline.note_slow(
            f"{_label(argv)} was not run: the {deadline.seconds:g} s detection budget was spent"
        )
        return Ran("", "", None)
    ran = run_bounded(
        argv, timeout=allowed, output_limit=output_limit, env=_child_environment(environ), cwd=cwd
    )
    if deadline is not None and ran is not None and ran.returncode is None:
        if ran.overflowed:
            deadline.note_slow(
                f"{_label(argv)} wrote more than {output_limit} bytes and was stopped"
            )
        else:
            deadline.note_slow(
                f"{_label(argv)} did not answer within {allowed:.1f} s and was stopped"
            )
    return ran


def run_text(
    argv: Sequence[str],
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Standard output of *argv* when it exits 0 within *timeout*, else ``None``."""
    ran = run(argv, timeout=timeout, environ=environ)
    return ran.stdout if ran is not None and ran.ok else None


def call_with_timeout(
    function: Callable[[], T], *, timeout: float, label: str = "a library call"
) -> T | None:
    """Call *function* in a daemon thread; ``None`` if it has not returned by *timeout* (or by
    the shared deadline, whichever comes first). A call skipped because the deadline is spent
    is recorded there under *label*; one that timed out is the caller's to note.

    For in-process library calls that can stall (``cuInit``, ``nvmlInit`` on a wedged GPU):
    they cannot be cancelled, so the thread is abandoned and the process may still exit.
    *function* must catch its own errors; an exception that escapes it counts as no answer.
    """
    deadline = _DEADLINE.get()
    allowed = timeout if deadline is None else deadline.timeout(timeout)
    if deadline is not None and allowed <= 0:
        deadline.note_slow(
            f"{label} was not made: the {deadline.seconds:g} s detection budget was spent"
        )
        return None
    box: list[T] = []

    def target() -> None:
        try:
            box.append(function())
        except Exception:  # noqa: S110 - the caller only wants "no answer"
            pass

    thread = threading.Thread(target=target, name="cuda-resolve-probe", daemon=True)
    thread.start()
    if deadline is None:
        thread.join(allowed)
    else:  # a cancelled deadline (Ctrl-C) stops the wait too
        end = time.monotonic() + allowed
        while thread.is_alive() and not deadline.expired:
            left = end - time.monotonic()
            if left <= 0:
                break
            thread.join(min(left, _CANCEL_POLL_SECONDS))
    return box[0] if box else None


class Background(Generic[T]):
    """*function* started in a thread now; :meth:`result` waits and re-raises its exception.

    For probes that overlap (the target interpreter, compilers, the driver). A plain thread
    rather than ``concurrent.futures``, whose import (logging and friends) costs more than
    the probes it would schedule. The thread runs in a copy of the caller's context, so it
    shares the caller's deadline (:func:`sharing`).
    """

    def __init__(self, function: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run, function), name="cuda-resolve-detect", daemon=True
        )
        self._thread.start()

    def _run(self, function: Callable[[], T]) -> None:
        try:
            self._value.append(function())
        except BaseException as exc:  # handed to the caller in result()
            self._error.append(exc)

    def wait(self, seconds: float) -> None:
        """Wait at most *seconds* for the thread to end (its result is not wanted)."""
        self._thread.join(seconds)

    def result(self) -> T:
        self._thread.join()
        if self._error:
            raise self._error[0]
        return self._value[0]
