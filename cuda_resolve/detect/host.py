"""Facts read straight from the environment variables and the interpreter: no probing needed.

The operating system and architecture come from the target interpreter when there is one
(a wheel must match the interpreter, which may be emulated), else from this process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from ..environment import Machine, Scheduler, Variables

__all__ = ["machine_facts", "normalize_arch", "normalize_os", "scheduler_facts", "variable_facts"]

_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}


def normalize_arch(machine: str) -> str:
    lowered = machine.strip().lower()
    return _ARCH_ALIASES.get(lowered, lowered)


def normalize_os(platform: str) -> str:
    """``sys.platform`` → "linux" | "windows" | "darwin" (what profiles and wheel tags use)."""
    if platform.startswith("linux"):
        return "linux"
    if platform in ("win32", "cygwin", "msys"):
        return "windows"
    return platform


def _this_machine() -> str:
    try:
        return os.uname().machine
    except AttributeError:  # Windows
        import platform

        return platform.machine()


def machine_facts(*, platform: str | None, machine: str | None, glibc: str | None) -> Machine:
    return Machine(
        os=normalize_os(platform or sys.platform),
        arch=normalize_arch(machine or _this_machine()),
        glibc=glibc,
    )


def scheduler_facts(environ: Mapping[str, str]) -> Scheduler:
    return Scheduler(
        slurm_job_id=environ.get("SLURM_JOB_ID") or None,
        slurm_variables=tuple(sorted(name for name in environ if name.startswith("SLURM_"))),
    )


def variable_facts(environ: Mapping[str, str]) -> Variables:
    return Variables(
        cuda_home=environ.get("CUDA_HOME"),
        cuda_path=environ.get("CUDA_PATH"),
        ld_library_path=environ.get("LD_LIBRARY_PATH"),
        torch_cuda_arch_list=environ.get("TORCH_CUDA_ARCH_LIST"),
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
    )
