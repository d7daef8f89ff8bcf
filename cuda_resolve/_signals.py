"""SIGTERM and SIGHUP handled as Ctrl-C is, and a restore that a second interrupt cannot cut short.

A job killed by its scheduler gets SIGTERM, a closed terminal sends SIGHUP. Inside
:func:`terminate_as_interrupt` both raise :class:`Terminated`, a :class:`KeyboardInterrupt`, in
the main thread: every path that ends what was started and puts the environment back on Ctrl-C
(the build runner, the build folder's removal, the install transaction's restore) does the same
for them, and the error boundary exits ``128 + signal`` (143, 129) instead of 130.

:func:`deferred_interrupts` holds Ctrl-C, SIGTERM and SIGHUP back while a restore runs: a
restore stopped half-way leaves the environment neither as it was nor as asked.

:func:`interrupts_call` turns them into a call from a helper thread while read-only work runs in
threads (detection): an exception raised wherever the signal lands can be lost, and worse.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = [
    "Terminated",
    "deferred_interrupts",
    "exit_status",
    "exit_with",
    "interrupts_call",
    "raise_lost_interrupt",
    "terminate_as_interrupt",
]

#: The signals that mean "stop", other than SIGINT (Ctrl-C): a scheduler's kill, a closed terminal.
TERMINATING = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; handled exactly as Ctrl-C is, but exits ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def exit_status(exc: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 128 + the signal's number for :class:`Terminated` (SIGTERM 143, SIGHUP
    129)."""
    return 128 + exc.signum if isinstance(exc, Terminated) else 130


def exit_with(code: int) -> NoReturn:
    """``raise SystemExit(code)``, with ``code`` kept as the exit status after a handled Ctrl-C.

    CPython marks a KeyboardInterrupt as unhandled when it ends an ``eval()`` of a string, even
    one caught later, and ``namedtuple`` builds each ``__new__`` that way, so a Ctrl-C during an
    import can land there. Under ``python -m`` the mark makes the process kill itself with SIGINT
    at exit instead of exiting with ``code`` (a parent then sees -2, not 130). An ``eval()`` of a
    string that completes clears the mark.

    The objects left are frozen first (``gc.freeze``): the interpreter's exit would otherwise
    walk every one of them in its garbage collections before freeing them by their reference
    counts, about a tenth of a warm ``doctor --json`` (issue 28). The console scripts end here
    only after the command's output is written and its files closed."""
    import gc

    eval("None")  # noqa: S307 - a constant; see the docstring
    gc.freeze()
    raise SystemExit(code)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    Only a signal whose handler is the default is taken over: a run under ``nohup`` keeps
    ignoring SIGHUP, and a host program's own handler (conda's) stays in charge. The handlers
    found are put back on the way out. Outside the main thread this does nothing."""
    previous: dict[int, Any] = {}
    if _in_main_thread():
        for signum in TERMINATING:
            try:
                if signal.getsignal(signum) is signal.SIG_DFL:
                    previous[signum] = signal.signal(signum, _raise_terminated)
            except (OSError, ValueError):
                pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            try:
                signal.signal(signum, handler)
            except (OSError, ValueError):
                pass


def _interrupt_for(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


@contextmanager
def deferred_interrupts(
    say: Callable[[str], None] = lambda _: None, *, doing: str = "restoring the environment"
) -> Iterator[list[KeyboardInterrupt]]:
    """Ctrl-C, SIGTERM and SIGHUP arriving inside the block wait until it is done.

    Each one is said (``say``: the reporter's note) as it arrives; the block then runs to its end,
    and the list this yields holds them, as the exceptions they would have raised, for the caller
    to raise or drop. Signals a handler outside cuda-resolve owns, or that are ignored, are left
    alone. Outside the main thread nothing is deferred. Only SIGKILL can stop the block: a killed
    restore is finished later from its journal (``cuda-resolve undo --last``)."""
    pending: list[KeyboardInterrupt] = []
    if not _in_main_thread():
        yield pending
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append(_interrupt_for(signum))
        with contextlib.suppress(
            OSError, ValueError
        ):  # a closed terminal (SIGHUP) must not stop it
            say(f"{signal.Signals(signum).name} received while {doing}: finishing that first")

    ours = (signal.default_int_handler, _raise_terminated)
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, *TERMINATING):
        try:
            if signal.getsignal(signum) in ours:
                previous[signum] = signal.signal(signum, hold)
        except (OSError, ValueError):
            pass
    try:
        yield pending
    finally:
        for signum, handler in previous.items():
            try:
                signal.signal(signum, handler)
            except (OSError, ValueError):
                pass


#: How often :func:`interrupts_call` repeats its call after an interrupt, until the block ends.
REPEAT_SECONDS = 0.05


@contextmanager
def interrupts_call(stop: Callable[[], None]) -> Iterator[list[KeyboardInterrupt]]:
    """Ctrl-C, SIGTERM and SIGHUP inside the block call *stop* from a helper thread instead of
    raising where they land; the caller raises the first of them once the block has wound down.

    For work spread over threads: a KeyboardInterrupt raised in the main thread at an arbitrary
    bytecode can land inside importlib's module-lock callback, which swallows it ("Exception
    ignored") after taking the import lock, so every thread that imports later waits for ever
    (seen under load: ``detect`` hung after Ctrl-C). *stop* (end the programs, spend the
    budget) runs in its own thread because the handler may interrupt code that holds the locks
    *stop* takes; it is called again every :data:`REPEAT_SECONDS` until the block ends, for a
    program that was being started at the first call. The signal handler only appends and writes
    a byte to a pipe. Signals that a handler outside cuda-resolve owns, or that are ignored, are
    left alone; outside the main thread nothing changes."""
    received: list[KeyboardInterrupt] = []
    ours = (signal.default_int_handler, _raise_terminated)
    signums = []
    if _in_main_thread():
        for signum in (signal.SIGINT, *TERMINATING):
            with contextlib.suppress(OSError, ValueError):
                if signal.getsignal(signum) in ours:
                    signums.append(signum)
    if not signums:
        yield received
        return
    wake_read, wake_write = os.pipe()

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(_interrupt_for(signum))
        with contextlib.suppress(OSError):  # the pipe is full: the helper is awake already
            os.write(wake_write, b"!")

    def helper() -> None:
        timeout: float | None = None  # asleep until the first signal
        while True:
            ready, _, _ = select.select([wake_read], [], [], timeout)
            if ready and not os.read(wake_read, 64):
                return  # the block is over
            if received:
                with contextlib.suppress(Exception):
                    stop()
                timeout = REPEAT_SECONDS

    os.set_blocking(wake_write, False)
    watcher = threading.Thread(target=helper, name="cuda-resolve-interrupts", daemon=True)
    watcher.start()
    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, note)
        yield received
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signum, handler)
        os.close(wake_write)
        watcher.join(1.0)
        if not watcher.is_alive():  # else a *stop* that hangs still reads it: the fd is left
            os.close(wake_read)


def raise_lost_interrupt() -> None:
    """Raise the Ctrl-C that importlib swallowed, if it swallowed one; call it only where the
    calling thread cannot be inside an import (a command line, between steps).

    A KeyboardInterrupt that lands in importlib's module-lock callback right after it took the
    interpreter's import lock is printed as "Exception ignored" and lost, and the lock stays
    held by this thread: the program would run on, and hang at the first import of another
    thread. Held here, outside any import, it can only be that; it is released and the
    interrupt raised."""
    import _imp

    lost = False
    while True:
        try:
            _imp.release_lock()
        except RuntimeError:  # not held by this thread (any more)
            break
        lost = True
    if lost:
        raise KeyboardInterrupt
