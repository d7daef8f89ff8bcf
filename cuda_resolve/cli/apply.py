"""``cuda-resolve apply PLAN.json``: carry out a plan written earlier or on another machine.

The same as ``cuda-pip install --plan PLAN.json``: the facts the plan was decided from (driver,
GPUs, toolkit, Python, platform, installed torch) are checked against this machine first, then
the plan's builds and pip steps run exactly as written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._act import add_action_options


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
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from .install import run_action

    if args.plan is not None and args.plan != args.plan_file:
        from ..errors import UsageError

        raise UsageError(
            "apply takes one plan: PLAN or --plan, not both", hint="cuda-resolve apply PLAN.json"
        )
    args.plan = args.plan_file
    return run_action(args, [], mode="install")
