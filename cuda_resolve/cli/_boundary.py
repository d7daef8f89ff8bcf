"""The one error boundary every entry point (``cuda-resolve``, ``cuda-pip``) runs its work inside.

A :class:`~cuda_resolve.errors.CudaResolveError` becomes its ``error:`` line and exit status; any
other exception is a bug, one line too (exit 70, ``--debug`` for the traceback); Ctrl-C kills
what was started and exits 130, SIGTERM and SIGHUP the same with 143 and 129; a closed pipe
(``| head``) ends quietly. Every message, hint and traceback is redacted
(:mod:`cuda_resolve.redaction`): no credential leaves through an error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ..errors import CudaResolveError
from . import _output

__all__ = ["BUG_EXIT", "guarded", "interrupted", "split_debug"]

#: Exit status for an unexpected exception (a bug): EX_SOFTWARE, distinct from 1 and 2.
BUG_EXIT = 70
_REPORT_HINT = (
    "this is a bug in cuda-resolve, not in your input: please report it with the command you ran "
    "and the traceback that `--debug` shows"
)


def split_debug(words: Sequence[str]) -> tuple[list[str], bool]:
    """(``words`` without ``--debug``, whether it was there); a bare ``--`` ends the options."""
    cut = list(words).index("--") if "--" in words else len(words)
    debug = "--debug" in words[:cut]
    return [word for word in words[:cut] if word != "--debug"] + list(words[cut:]), debug


def guarded(body: Callable[[], int], *, wants_json: bool, debug: bool) -> int:
    """Run ``body`` and turn whatever it raises into one line and an exit status. SIGTERM and SIGHUP
    are handled as Ctrl-C is while it runs (:func:`~cuda_resolve._signals.terminate_as_interrupt`).
    """
    from .._signals import terminate_as_interrupt

    with terminate_as_interrupt():
        return _guarded(body, wants_json=wants_json, debug=debug)


def _guarded(body: Callable[[], int], *, wants_json: bool, debug: bool) -> int:
    try:
        return int(body())
    except CudaResolveError as exc:
        if debug:
            _print_traceback()
        _output.report_error(exc, as_json=wants_json)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (Terminated)
        return interrupted(as_json=wants_json, by=exc)
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): no second error at exit
        return 1
    except SystemExit as exc:  # --help and --version: argparse exits after printing
        return exc.code if isinstance(exc.code, int) else 0
    except Exception as exc:  # a bug is one line, never a traceback
        if debug:
            _print_traceback()
        text = str(exc).replace("\n", " ")
        text = text if len(text) <= 300 else text[:280] + "..."
        message = f"unexpected {type(exc).__name__}" + (f": {text}" if text else "")
        _output.report_error(
            CudaResolveError(message, hint=None if debug else _REPORT_HINT), as_json=wants_json
        )
        return BUG_EXIT


def interrupted(*, as_json: bool = False, by: KeyboardInterrupt | None = None) -> int:
    """Ctrl-C (``by`` a KeyboardInterrupt or None): kill the programs started (and their
    children), say so in one line, 130. SIGTERM and SIGHUP (``by`` a
    :class:`~cuda_resolve._signals.Terminated`): the same, exit 143 and 129."""
    from .._bounded import kill_all
    from .._signals import Terminated, exit_status

    kill_all()
    message = f"terminated by {by.name}" if isinstance(by, Terminated) else "interrupted"
    try:
        _output.report_error(CudaResolveError(message, hint=None), as_json=as_json)
    except (KeyboardInterrupt, OSError, ValueError):
        pass
    return exit_status(by) if by is not None else 130


def _print_traceback() -> None:
    import traceback

    from ..redaction import redact_urls

    # A traceback quotes the exception's message and arguments: a URL there may carry a password.
    sys.stderr.write(redact_urls(traceback.format_exc()))


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
