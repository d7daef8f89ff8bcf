"""Options every reporting command shares: --profile, --python, --json."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..environment import Environment
from ..errors import UsageError
from ..index import default_index
from ..install.target import RULE

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from ..index.model import Index
    from ..install.target import TargetChoice

__all__ = [
    "ArchListOption",
    "add_environment_options",
    "add_json_option",
    "detect_target",
    "environment_from_args",
    "index_from_args",
]


class ArchListOption(argparse.Action):
    """``--arch-list LIST``, given once and naming something: an empty value (an unset shell
    variable, ``--arch-list "$ARCHS"``) was taken as no --arch-list, and a second one silently
    replaced the first."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        given = getattr(namespace, self.dest, None)
        if given is not None:
            parser.error(
                f"{option_string} given twice ({given!r}, then {text!r}): give one list, "
                f"e.g. {option_string} '{given};{text}'"
            )
        if not text.strip():
            parser.error(
                f"{option_string} {text!r} names no architecture (an unset shell variable?): "
                f"e.g. {option_string} '8.6'"
            )
        setattr(namespace, self.dest, text)


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print a JSON document instead of tables"
    )


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
        help=f"the target interpreter, whose environment is read (nothing is installed); the "
        f"target is: {RULE}",
    )
    add_json_option(parser)


def environment_from_args(args: argparse.Namespace) -> Environment:
    """A profile when --profile is given (no probing at all), else detection."""
    if args.profile is not None:
        if args.python is not None:
            raise UsageError(
                f"--profile {args.profile} and --python {args.python} cannot be combined: a "
                "profile describes the machine without probing it",
                hint="pass --profile to decide for a described machine, or --python to inspect an "
                "interpreter here",
            )
        from ..profile import load_profile

        return load_profile(args.profile)
    from .._frozen import replace

    env, choice = detect_target(args.python)
    # Every report says whose environment it describes: not always the tool's own.
    return replace(
        env,
        notes=(
            f"target interpreter: {env.python.executable or choice.python} (from {choice.how})",
            *env.notes,
        ),
    )


def detect_target(python: str | None) -> tuple[Environment, TargetChoice]:
    """Detect the machine with the target environment's interpreter (see install.target), and
    say how that interpreter was chosen. The running interpreter is read in process."""
    from .._signals import raise_lost_interrupt
    from ..detect import detect_environment
    from ..install.target import choose_target, is_running_interpreter

    raise_lost_interrupt()  # the probes' threads import: a lock left held would hang them
    choice = choose_target(python)
    in_process = choice.how != "--python" and is_running_interpreter(choice.python)
    env = detect_environment(python=None if in_process else choice.python)
    return env, choice


def index_from_args(args: argparse.Namespace) -> Index:
    """The shipped index with the user's overlays, plus any ``--index DIR`` given (later wins)."""
    extra = list(getattr(args, "index", None) or [])
    if not extra:
        return default_index()
    from ..index.load import load_index

    return load_index(extra)
