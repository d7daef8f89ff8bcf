"""``cuda-resolve doctor``: the machine at a glance, and diagnoses with their fixes."""

from __future__ import annotations

import argparse
import os
import sys

from ..doctor.checks import run_checks
from ..doctor.findings import worst
from ..index import default_cuda_facts, default_index
from . import _output
from ._common import add_environment_options, environment_from_args

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

    from ..doctor.findings import Finding
    from ..doctor.kernel import KernelContext
    from ..environment import Environment


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="diagnose why CUDA extensions fail to build, load or run here",
        description="Show the machine and run checks (driver, torch build, arch coverage, "
        "toolkit, compiler, headers, extensions, Slurm; inside a Jupyter kernel, the "
        "variables the kernel started with against what `cuda-resolve env` says the target "
        "needs). Exit 0 when nothing is an error, 1 otherwise, 2 on bad input.",
    )
    add_environment_options(parser)
    parser.add_argument(
        "--network",
        action="store_true",
        help="also reach the indexes the target's pip really uses (its index-url, extra indexes "
        "and find-links pages, named with where each setting came from), the PyTorch and "
        "kaolin indexes (or mirrors), report TLS interception and whether pip and "
        "conda would cope",
    )
    parser.set_defaults(handler=handle)


def _kernel_findings(env: Environment) -> tuple[KernelContext, list[Finding]] | None:
    """Inside a Jupyter kernel: what it started without, of what `cuda-resolve env` prints for
    the target (the same computation: the bare-environment extension scan, then where this
    process's LD_LIBRARY_PATH or a toolkit holds each missing library)."""
    from ..doctor.kernel import check_kernel, detect_kernel

    kernel = detect_kernel(os.environ)
    if kernel is None:
        return None
    # Only inside a kernel: envvars imports shlex, which a warm doctor elsewhere never needs.
    from ..envvars import bare_extension_scan, job_environment, library_locations

    scan = bare_extension_scan(env)
    missing = sorted({soname for ext in scan for soname in ext.missing})
    job = job_environment(env, scan, library_locations(env, missing, os.environ))
    python = env.python.executable or sys.executable
    return kernel, check_kernel(kernel, job, python)


def handle(args: argparse.Namespace) -> int:
    env = environment_from_args(args)
    findings = run_checks(env, default_cuda_facts())  # not the package catalogue: see index/cuda.py
    kernel = _kernel_findings(env) if args.profile is None else None
    if kernel is not None:
        findings.extend(kernel[1])
    network: list[Any] = []
    if args.network:
        from ..doctor.network import network_findings

        # The indexes probed are the target's pip's (asked of its interpreter; for a profile,
        # only the PIP_* variables count): see doctor/network.py.
        network = network_findings(env, index=default_index())
        findings.extend(network)
    status = worst(findings)
    if args.json:
        from ..profile import environment_to_dict

        _output.print_json(
            {
                "status": status,
                "environment": environment_to_dict(env),
                "findings": [finding.to_json() for finding in findings],
                **({"jupyter_kernel": kernel[0].to_json()} if kernel is not None else {}),
            }
        )
    else:
        from ..doctor.render import render_environment, render_findings

        console = _output.console()
        render_environment(env, console)
        render_findings(findings[: len(findings) - len(network)], console)
        if network:
            render_findings(network, console, title="Network")
        errors = sum(1 for f in findings if f.status == "error")
        warnings = sum(1 for f in findings if f.status == "warn")
        console.print(f"{errors} error(s), {warnings} warning(s)", soft_wrap=True, highlight=False)
    return 1 if status == "error" else 0
