"""``cuda-resolve detect``: print the Environment, or save it as a profile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..paths import write_atomic
from ..profile import dump_profile, environment_to_dict, hand_written
from . import _output
from ._common import add_environment_options, environment_from_args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "detect",
        help="show what cuda-resolve knows about this machine",
        description="Probe the machine (driver, GPUs, toolkits, compilers, target Python and "
        "torch) without importing torch.",
    )
    add_environment_options(parser)
    parser.add_argument(
        "--save-profile", metavar="FILE", type=Path, help="write the machine profile (TOML) to FILE"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    env = environment_from_args(args)
    keep: dict[str, Any] = {}
    if args.save_profile is not None:
        target: Path = args.save_profile
        if target.is_dir():
            raise UsageError(
                f"--save-profile {target}: is a directory",
                hint="give a file name such as lab-a100.toml",
            )
        keep = hand_written(target)  # saved again over a class's file: its name and [slurm]
        try:
            write_atomic(target, dump_profile(env, keep=keep), make_parents=False)
        except OSError as exc:
            raise UsageError(
                f"--save-profile {target}: cannot write: {exc.strerror}",
                hint="choose a writable path",
            ) from None
    if args.json:
        _output.print_json(environment_to_dict(env))
    elif args.save_profile is None:
        from ..doctor.render import render_environment

        render_environment(env, _output.console())
        for note in env.notes:  # which interpreter, and which rule chose it
            if note.startswith("target interpreter: "):
                _output.console().print(note, markup=False, soft_wrap=True)
    else:
        kept = " and ".join(
            {"name": f"name = {keep['name']!r}", "slurm": "[slurm]"}[key] for key in keep
        )
        _output.console().print(
            f"saved machine profile to {args.save_profile}"
            + (f" (kept its {kept})" if kept else ""),
            markup=False,
            soft_wrap=True,
        )
    return 0
