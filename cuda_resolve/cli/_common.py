"""Options every reporting command shares: --profile, --python, --json."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..environment import Environment
from ..errors import UsageError
from ..index import Index, default_index

__all__ = ["add_environment_options", "add_json_option", "environment_from_args", "index_from_args"]


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of tables")


def add_environment_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("machine")
    group.add_argument(
        "--profile",
        metavar="FILE",
        type=Path,
        help="describe the machine from a profile (TOML) instead of probing this one",
    )
    group.add_argument(
        "--python",
        metavar="PATH",
        help="the target interpreter to inspect and install into (default: the active virtualenv, else the active conda env, else python3 on PATH)",
    )
    add_json_option(parser)


def environment_from_args(args: argparse.Namespace) -> Environment:
    """A profile when --profile is given (no probing at all), else detection."""
    if args.profile is not None:
        if args.python is not None:
            raise UsageError(
                f"--profile {args.profile} and --python {args.python} cannot be combined: a profile describes the machine without probing it",
                hint="pass --profile to decide for a described machine, or --python to inspect an interpreter here",
            )
        from ..profile import load_profile

        return load_profile(args.profile)
    from dataclasses import replace

    from ..detect import detect_environment
    from ..install.target import choose_target, is_running_interpreter

    choice = choose_target(args.python)
    in_process = choice.how != "--python" and is_running_interpreter(choice.python)
    env = detect_environment(python=None if in_process else choice.python)
    # Every report says whose environment it describes: not always the tool's own.
    return replace(env, notes=(f"target interpreter: {env.python.executable or choice.python} (from {choice.how})", *env.notes))


def index_from_args(args: argparse.Namespace) -> Index:
    """The shipped index with the user's overlays, plus any ``--index DIR`` given (later wins)."""
    extra = list(getattr(args, "index", None) or [])
    if not extra:
        return default_index()
    from ..index.load import load_index

    return load_index(extra)
