"""``cuda-resolve env``: the exports a job or a notebook needs for the target environment.

``eval "$(cuda-resolve env)"`` in a job script (or the lines of ``--slurm`` pasted into it) and
``--jupyter NAME`` (a kernel spec carrying them) make an extension that imports in the terminal
import in a job started with ``--export=NONE`` or in a notebook kernel too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..doctor.kernel import KERNEL_SPEC_VARIABLE
from ..envvars import (
    SHELLS,
    bare_extension_scan,
    job_environment,
    jupyter_data_dir,
    kernel_spec,
    library_locations,
    render,
    slurm_lines,
    validate_kernel_name,
)
from ..errors import UsageError
from ..install.target import RULE
from ..paths import write_atomic
from . import _output
from ._common import add_json_option, detect_target

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "env",
        help="print the exports jobs and notebooks need for the target environment",
        description="Print the variables the target environment needs where the shell's own are "
        "not inherited (a Slurm job with --export=NONE, a Jupyter kernel): CUDA_HOME and PATH "
        "for its toolkit, LD_LIBRARY_PATH only for libraries its extensions need that the "
        "loader would not find, TORCH_CUDA_ARCH_LIST for later builds. Evaluating the output "
        "twice changes nothing more.",
    )
    parser.add_argument(
        "--shell",
        choices=SHELLS,
        default=None,
        help="the shell to print for (default: from $SHELL, else bash)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help=f"the target interpreter; the target is: {RULE}",
    )
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="print the lines for an sbatch script (bash; the target's interpreter first on PATH)",
    )
    parser.add_argument(
        "--jupyter",
        metavar="NAME",
        help="write a Jupyter kernel spec NAME for the target whose env holds these variables",
    )
    add_json_option(parser)
    # env prints shell lines, not tables (issue 29)
    next(
        action for action in parser._actions if action.dest == "json"
    ).help = "print a JSON document (target, shell, exports, the text) instead of the shell lines"
    parser.set_defaults(handler=handle)


def _shell(args: argparse.Namespace) -> str:
    if args.shell:
        return str(args.shell)
    name = os.path.basename(os.environ.get("SHELL", ""))
    if name == "tcsh":
        return "csh"
    return name if name in SHELLS else "bash"


def _no_ipykernel(python: str) -> str | None:
    """What is wrong when the target cannot run the kernel spec (no ipykernel: the notebook
    would fail to start it), with what to install; None when it can (or cannot be asked)."""
    import shlex

    from .._bounded import run

    done = run(
        [
            python,
            "-c",
            "import importlib.util as u, sys; sys.exit(u.find_spec('ipykernel') is None)",
        ],
        timeout=30,
    )
    if done is None or done.returncode != 1:
        return None
    return (
        f"{python} has no ipykernel, so a notebook cannot start this kernel: "
        f"{shlex.quote(python)} -m pip install ipykernel"
    )


def handle(args: argparse.Namespace) -> int:
    if args.slurm and args.shell not in (None, "bash"):
        raise UsageError(
            f"--slurm prints bash lines for an sbatch script; --shell {args.shell} cannot be "
            "combined with it",
            hint="drop --shell (sbatch scripts run under bash)",
        )
    if args.jupyter is not None and not args.json:
        # A kernel spec holds the variables itself: nothing is printed for a shell.
        given = "--slurm" if args.slurm else f"--shell {args.shell}" if args.shell else None
        if given is not None:
            raise UsageError(
                f"--jupyter writes a kernel spec and prints no shell lines; {given} cannot be "
                "combined with it",
                hint=f"drop {given.split()[0]} (the kernel spec holds the variables itself)",
            )
    name = validate_kernel_name(args.jupyter) if args.jupyter is not None else None
    env, choice = detect_target(args.python)
    python = env.python.executable or choice.python
    scan = bare_extension_scan(env)
    missing = {soname for ext in scan for soname in ext.missing}
    job = job_environment(env, scan, library_locations(env, sorted(missing), os.environ))
    kernel_file: Path | None = None
    if name is not None:
        kernel_file = Path(jupyter_data_dir(os.environ)) / "kernels" / name / "kernel.json"
        spec = kernel_spec(job, name, python)
        # Which spec started a kernel: doctor inside it names this spec in its fix.
        spec["env"][KERNEL_SPEC_VARIABLE] = name
        try:
            write_atomic(kernel_file, json.dumps(spec, indent=1) + "\n")
        except OSError as exc:
            raise UsageError(
                f"--jupyter {name}: cannot write {kernel_file}: {exc.strerror or exc}",
                hint="set JUPYTER_DATA_DIR to a writable folder",
            ) from None
    shell = "bash" if args.slurm else _shell(args)
    text = slurm_lines(job, python) if args.slurm else render(job, shell)  # type: ignore[arg-type]
    no_kernel = _no_ipykernel(python) if kernel_file is not None else None
    if args.json:
        document = {"target": python, "shell": shell, "exports": job.to_json(), "text": text}
        if kernel_file is not None:
            document["kernel_spec"] = str(kernel_file)
            if no_kernel:
                document["warning"] = no_kernel
        _output.print_json(document)
        return 0
    # stdout is evaluated by a shell: only the lines go there; notes go to stderr.
    for note in job.notes:
        sys.stderr.write(f"note: {note}\n")
    if kernel_file is not None:
        sys.stderr.write(f"wrote kernel spec {name} to {kernel_file}\n")
        if no_kernel:
            sys.stderr.write(f"warning: {no_kernel}\n")
        return 0
    # Byte for byte: a path that is not UTF-8 is written as the bytes it is (os.fsencode).
    sys.stdout.flush()
    sys.stdout.buffer.write(os.fsencode(text))
    sys.stdout.buffer.flush()
    return 0
