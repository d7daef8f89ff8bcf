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
COMMANDS = ("detect", "doctor", "plan", "mirror", "index")


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


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in args_list
    try:
        parser = build_parser(_requested_command(args_list))
        args = parser.parse_args(args_list)
        if args.command is None:
            parser.print_help()
            return 2
        handler = args.handler
        return int(handler(args))
    except CudaResolveError as exc:
        _output.report_error(exc, as_json=wants_json)
        return exc.exit_code
    except KeyboardInterrupt:
        _output.report_error(CudaResolveError("interrupted", hint=None), as_json=wants_json)
        return 130
    except BrokenPipeError:
        return 1
    except SystemExit as exc:  # --help and --version: argparse exits after printing
        return exc.code if isinstance(exc.code, int) else 0


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())
