"""The one error boundary every entry point (``cuda-resolve``, ``cuda-pip``) runs its work inside.

A :class:`~cuda_resolve.errors.CudaResolveError` becomes its ``error:`` line and exit status; any
other exception is a bug, one line too (exit 70, ``--debug`` for the traceback); Ctrl-C kills
what was started and exits 130; a closed pipe (``| head``) ends quietly. Every message, hint and
traceback is redacted (:mod:`cuda_resolve.redaction`): no credential leaves through an error.
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
    """Run ``body`` and turn whatever it raises into one line and an exit status."""
    try:
        return int(body())
    except CudaResolveError as exc:
        if debug:
            _print_traceback()
        _output.report_error(exc, as_json=wants_json)
        return exc.exit_code
    except KeyboardInterrupt:
        return interrupted(as_json=wants_json)
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
        _output.report_error(CudaResolveError(message, hint=None if debug else _REPORT_HINT), as_json=wants_json)
        return BUG_EXIT


def interrupted(*, as_json: bool = False) -> int:
    """Ctrl-C: kill the programs started (and their children), say so in one line, 130."""
    from .._bounded import kill_all

    kill_all()
    try:
        _output.report_error(CudaResolveError("interrupted", hint=None), as_json=as_json)
    except (KeyboardInterrupt, OSError):
        pass
    return 130


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
