"""``cuda-resolve apply PLAN.json``: carry out a plan written earlier or on another machine.

The same as ``cuda-pip install --plan PLAN.json``: the facts the plan was decided from (driver,
GPUs, toolkit, Python, platform, installed torch) are checked against this machine first, then
the plan's builds and pip steps run exactly as written.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from ._act import add_action_options

#: The options install takes that decide what a plan holds (the plan file already says): apply
#: refuses them rather than take them and carry out the plan as written anyway. ``--plan`` is
#: PLAN again (kept for `cuda-pip install --plan` habits, checked in handle). ``--source`` and
#: ``--index`` stay: where an air-gapped machine finds the pinned source (checked against the
#: plan's revision) and the recipes, not what is built.
DECIDING = (
    "--allow-torch-change",
    "--strict-driver",
    "--arch-list",
    "--ptx",
    "--rebuild",
    "--accept-name",
    "--repair",
)
#: Those of them `cuda-resolve plan` takes too.
PLAN_TAKES = ("--allow-torch-change", "--strict-driver", "--arch-list", "--accept-name")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "apply",
        help="carry out a plan file (cuda-resolve plan REQ... --json > FILE) after checking its "
        "facts still hold",
        description="Carry out PLAN, a file written by `cuda-resolve plan REQ... --json`: its "
        "builds and pip steps run exactly as written, once the facts it was decided from are "
        "checked against this machine. Same as `cuda-pip install --plan PLAN`.",
    )
    parser.add_argument("plan_file", metavar="PLAN", type=Path)
    add_action_options(parser, install=True)
    for action in parser._actions:  # taken only to be refused: not listed (argparse's way)
        if set(action.option_strings) & {*DECIDING, "--plan"}:
            action.help = argparse.SUPPRESS
    parser.set_defaults(handler=handle, apply_parser=parser)


def _given(args: argparse.Namespace) -> list[str]:
    """The deciding options on the command line, as words that can be given to `plan`."""
    words: list[str] = []
    for option in DECIDING:
        value = getattr(args, option[2:].replace("-", "_"), None)
        if value in (None, False, []):
            continue
        if value is True:
            words.append(option)
            continue
        for one in value if isinstance(value, list) else [value]:
            words += [option, shlex.quote(str(one))]
    return words


def refuse_deciding(args: argparse.Namespace, plan_file: Path) -> None:
    """A plan is carried out exactly (``apply PLAN``, ``install --plan PLAN``): an option that
    would change it is refused (exit 2), with the command that makes a plan with it."""
    words = _given(args)
    if not words:
        return
    from ..errors import CudaResolveError, UsageError
    from ..install.apply import read_plan_file

    options = [word for word in words if word.startswith("--")]
    try:
        plan = read_plan_file(plan_file)
        wanted = [item.name for item in plan.items if item.kind != "installed"]
        names = " ".join(wanted or [item.name for item in plan.items]) or "REQ..."
    except CudaResolveError:  # an unreadable plan: the refusal still names the option
        names = "REQ..."
    from ..plan import new_plan_file

    quoted = new_plan_file(str(plan_file))  # the file given (a colleague's, maybe) stays
    target = ["--python", shlex.quote(str(args.python))] if args.python else []
    words += target  # the same target: the plan is decided for its torch, and applied there
    if "--repair" in options:
        hint = "cuda-resolve install --repair"
    elif set(options) <= set(PLAN_TAKES):  # a new plan with them, then apply that
        hint = (
            f"cuda-resolve plan {names} {' '.join(words)} --json > {quoted} && "
            f"cuda-resolve apply {' '.join([quoted, *target])}"
        )
    else:  # decided while installing (plan has no --rebuild, --ptx)
        hint = f"cuda-resolve install {names} {' '.join(words)}"
    raise UsageError(
        f"apply carries out {plan_file} exactly as written: "
        f"{', '.join(dict.fromkeys(options))} would change the plan, so it is not taken",
        hint=hint,
    )


def handle(args: argparse.Namespace) -> int:
    from .install import run_action

    refuse_deciding(args, args.plan_file)
    if args.plan is not None and args.plan != args.plan_file:
        from ..errors import UsageError

        target = f" --python {shlex.quote(str(args.python))}" if args.python else ""
        first, second = (shlex.quote(str(path)) for path in (args.plan_file, args.plan))
        raise UsageError(
            "apply takes one plan: PLAN or --plan, not both",
            hint=f"one of them: `cuda-resolve apply {first}{target}` or `cuda-resolve apply "
            f"{second}{target}`",
        )
    args.plan = args.plan_file
    return run_action(args, [], mode="install")
