"""The ``cuda-resolve`` command line: ``main(argv) -> int`` with one error boundary.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module's
handler takes the parsed arguments and returns an exit status. Library code raises
:class:`~cuda_resolve.errors.CudaResolveError`; only :func:`main` turns it into output.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from ..errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ArgumentParser", "guarded", "interrupted", "main", "run", "split_debug"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = (
    "detect",
    "doctor",
    "plan",
    "install",
    "apply",
    "undo",
    "build",
    "wheelhouse",
    "mirror",
    "index",
    "lock",
    "sync",
    "env",
)


class _Formatter(argparse.HelpFormatter):
    """Help wrapped at spaces only: a command, option or path in it is never split at a hyphen
    (``cuda-`` / ``pip``) or inside a long word, so what a user copies from it runs."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        # argparse makes a formatter for every add_argument and, left to find its width, imports
        # shutil (with bz2 and lzma: 2 ms of every command, issue 28) for get_terminal_size.
        if len(args) < 3 and kwargs.get("width") is None:
            kwargs["width"] = _terminal_columns() - 2  # as argparse: its margin
        super().__init__(prog, *args, **kwargs)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(
            " ".join(text.split()), width, break_on_hyphens=False, break_long_words=False
        )

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: ``COLUMNS`` where it is a positive number, else the
    terminal's width, else 80."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad usage goes through the one boundary."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help` for usage")


#: The parser every entry point uses (cuda-pip's install included): bad usage is a UsageError.
ArgumentParser = _Parser


def guarded(action: Callable[[], int], *, wants_json: bool, debug: bool) -> int:
    """Run ``action`` inside the one error boundary (see :mod:`._boundary`)."""
    from ._boundary import guarded as boundary

    return boundary(action, wants_json=wants_json, debug=debug)


def split_debug(words: Sequence[str]) -> tuple[list[str], bool]:
    from ._boundary import split_debug as split

    return split(words)


def interrupted() -> int:
    from ._boundary import interrupted as exit_status

    return exit_status()


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if any (the first word that is not an option)."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in COMMANDS else None


class _VersionAction(argparse.Action):
    """--version, read only when asked (it reads the shipped index's files)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from .. import version_text

        print(version_text())
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cuda-resolve",
        description="Detect this NVIDIA machine, decide the ABI-matched torch and CUDA-extension "
        "builds, and install them.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        nargs=0,
        help="show the version and the index's date, and exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # Importing every command module costs start-up time a single command never needs.
    for name in (only,) if only else COMMANDS:
        module = importlib.import_module(f".{name}", __name__)
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every outcome is an exit status: 0 done, 1 failed, 2 bad input,
    70 a bug (one ``error:`` line; ``--debug`` adds the traceback), 130 interrupted (Ctrl-C),
    143 terminated (SIGTERM), 129 hung up (SIGHUP): what was started is ended and the
    environment restored for each of the three."""
    from ._boundary import guarded, split_debug

    words = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in words
    # --debug is global: accepted anywhere before a bare "--", by every subcommand.
    args_list, debug = split_debug(words)

    def command() -> int:
        parser = build_parser(_requested_command(args_list))
        parser.add_argument(
            "--debug", action="store_true", help="on an unexpected error, show the traceback"
        )
        args, unknown = parser.parse_known_args(args_list)
        if unknown:
            raise _unrecognized(args.command, unknown, args_list)
        if args.command is None:
            parser.print_help()
            return 2
        from .._signals import raise_lost_interrupt

        raise_lost_interrupt()  # one lost while the command's modules were imported
        return int(args.handler(args))

    return guarded(command, wants_json=wants_json, debug=debug)


def _unrecognized(command: str | None, words: Sequence[str], given: Sequence[str]) -> UsageError:
    """Words no option takes (``words``, of the command line ``given``), with the help of the
    subcommand they were given to (user walk C13: ``cuda-resolve install six --no-deps`` pointed
    at the top level's help)."""
    import shlex

    prog = f"cuda-resolve {command}" if command else "cuda-resolve"
    hint = f"run `{prog} --help` for usage"
    if command == "install" and "install" in given:
        # cuda-pip install takes every option cuda-resolve install does, and pip's: the user's
        # own words, as given, are the command (their --python, their quoting).
        again = shlex.join(["cuda-pip", *given[list(given).index("install") :]])
        hint += f"; pip's own options go through cuda-pip, which passes them on to pip: `{again}`"
    return UsageError(f"{prog}: unrecognized arguments: {shlex.join(words)}", hint=hint)


def _interrupted(*, as_json: bool = False, by: KeyboardInterrupt | None = None) -> int:
    from ._boundary import interrupted

    return interrupted(as_json=as_json, by=by)


def run() -> None:
    """Console-script entry point; Ctrl-C at any moment exits 130 with one line."""
    try:
        _restore_interrupts()
        code = main()
    except (
        KeyboardInterrupt
    ) as exc:  # between entering run() and main()'s boundary, or inside a handler
        code = _interrupted(by=exc)
    from .._signals import exit_with

    exit_with(code)


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
