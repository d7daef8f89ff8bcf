"""The ``cuda-resolve`` command line: ``main(argv) -> int`` with one error boundary.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module's
handler takes the parsed arguments and returns an exit status. Library code raises
:class:`~cuda_resolve.errors.CudaResolveError`; only :func:`main` turns it into output.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import CudaResolveError, UsageError
from . import _output

__all__ = ["main", "run"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = ("detect", "doctor", "plan", "install", "build", "wheelhouse", "mirror", "index")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad usage goes through the one boundary."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help` for usage")


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if any (the first word that is not an option)."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(
        prog="cuda-resolve",
        description="Detect this NVIDIA machine, decide the ABI-matched torch and CUDA-extension builds, and install them.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-resolve {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # Importing every command module costs start-up time a single command never needs.
    for name in (only,) if only else COMMANDS:
        module = importlib.import_module(f".{name}", __name__)
        module.register(subparsers)
    return parser


#: Exit status for an unexpected exception (a bug): EX_SOFTWARE, distinct from 1 and 2.
_BUG_EXIT = 70
_REPORT_HINT = (
    "this is a bug in cuda-resolve, not in your input: please report it with the command you ran "
    "and the traceback that `--debug` shows"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every outcome is an exit status: 0 done, 1 failed, 2 bad input,
    70 a bug (one ``error:`` line; ``--debug`` adds the traceback), 130 interrupted."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in args_list
    # --debug is global: accepted anywhere before a bare "--", by every subcommand.
    cut = args_list.index("--") if "--" in args_list else len(args_list)
    debug = "--debug" in args_list[:cut]
    args_list = [word for word in args_list[:cut] if word != "--debug"] + args_list[cut:]
    try:
        parser = build_parser(_requested_command(args_list))
        parser.add_argument("--debug", action="store_true", help="on an unexpected error, show the traceback")
        args = parser.parse_args(args_list)
        if args.command is None:
            parser.print_help()
            return 2
        handler = args.handler
        return int(handler(args))
    except CudaResolveError as exc:
        if debug:
            _print_traceback()
        _output.report_error(exc, as_json=wants_json)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted(as_json=wants_json)
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): no second error at exit
        return 1
    except SystemExit as exc:  # --help and --version: argparse exits after printing
        return exc.code if isinstance(exc.code, int) else 0
    except Exception as exc:  # the boundary: a bug is one line, never a traceback
        if debug:
            _print_traceback()
        text = str(exc).replace("\n", " ")
        text = text if len(text) <= 300 else text[:280] + "..."
        message = f"unexpected {type(exc).__name__}" + (f": {text}" if text else "")
        _output.report_error(CudaResolveError(message, hint=None if debug else _REPORT_HINT), as_json=wants_json)
        return _BUG_EXIT


def _print_traceback() -> None:
    import traceback

    traceback.print_exc(file=sys.stderr)


def _interrupted(*, as_json: bool = False) -> int:
    """Ctrl-C: kill the programs started (and their children), say so in one line, 130."""
    from .._bounded import kill_all

    kill_all()
    try:
        _output.report_error(CudaResolveError("interrupted", hint=None), as_json=as_json)
    except (KeyboardInterrupt, OSError):
        pass
    return 130


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run() -> None:
    """Console-script entry point; Ctrl-C at any moment exits 130 with one line."""
    try:
        _restore_interrupts()
        code = main()
    except KeyboardInterrupt:  # between entering run() and main()'s boundary, or inside a handler
        code = _interrupted()
    raise SystemExit(code)


def _restore_interrupts() -> None:
    """Undo :func:`_exit_on_interrupt`: from here on Ctrl-C raises KeyboardInterrupt, which the
    boundary turns into one line after killing what was started."""
    import signal

    if signal.getsignal(signal.SIGINT) is _exit_on_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _exit_on_interrupt(signum: int, frame: object) -> None:
    import os

    os.write(2, b"error: interrupted\n")
    os._exit(130)


def _interrupt_during_startup() -> None:
    """While the command line is still importing (before :func:`run`), Ctrl-C exits 130 with
    one line instead of a traceback from whichever import it landed in. Only for the
    ``cuda-resolve`` program itself: a library importing this package keeps its own handler."""
    import os
    import signal

    if os.path.basename(sys.argv[0] if sys.argv else "").removesuffix(".exe") != "cuda-resolve":
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _exit_on_interrupt)
    except ValueError:  # not the main thread
        pass


_interrupt_during_startup()
