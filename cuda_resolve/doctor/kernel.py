"""``doctor`` inside a Jupyter kernel: the kernel's environment against what the target needs.

A kernel starts from the Jupyter server's environment plus its kernel spec's ``env``, not from
the user's shell, and the dynamic loader reads ``LD_LIBRARY_PATH`` once, when the kernel starts:
setting ``os.environ`` in a notebook reaches ``!commands`` but never the kernel's own imports.
So the variables compared are the ones the kernel process started with (``/proc/PID/environ``),
against :func:`cuda_resolve.envvars.job_environment` (what ``cuda-resolve env`` prints).

How a kernel is recognised (what jupyter_client and ipykernel make observable):

- an ancestor process (or this one) runs ipykernel: the argv jupyter_client's kernel specs
  carry, ``python -m ipykernel_launcher -f {connection_file}`` (``ipykernel install`` writes it;
  so does ``cuda-resolve env --jupyter``);
- else ``JPY_PARENT_PID`` in the environment: jupyter_client's ``launcher.launch_kernel`` sets
  it in every kernel it starts (``env["JPY_PARENT_PID"] = str(os.getpid())`` on POSIX), and
  the kernel's children inherit it. ``JPY_SESSION_NAME`` (the notebook's path; jupyter_server's
  session manager adds it) is reported when present.

:func:`detect_kernel` is the probe; :func:`check_kernel` is pure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from .._frozen import frozen
from .findings import Finding

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:  # envvars imports shlex: doctor outside a kernel must not pay for it
    from typing import Any

    from ..envvars import JobEnvironment

__all__ = ["KERNEL_SPEC_VARIABLE", "KernelContext", "check_kernel", "detect_kernel", "is_ipykernel"]

#: Set in the ``env`` of the kernel specs ``cuda-resolve env --jupyter NAME`` writes: which spec
#: a kernel was started from (jupyter_client passes no spec name to the kernel otherwise).
KERNEL_SPEC_VARIABLE = "CUDA_RESOLVE_KERNEL_SPEC"
_COMPARED = ("CUDA_HOME", "PATH", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", KERNEL_SPEC_VARIABLE)
_MAX_ANCESTORS = 64
_READ_LIMIT = 1024 * 1024
_LAUNCHERS = ("ipykernel_launcher", "ipykernel")


@frozen
class KernelContext:
    """The kernel doctor runs in, as found."""

    pid: int | None  # the kernel's process, where an ancestor (or this process) is one
    evidence: str  # how it was recognised, for the reader
    variables: tuple[
        tuple[str, str], ...
    ]  # the compared variables, as the kernel started with them
    variables_from: str  # where those were read
    spec: str | None = (
        None  # the kernel spec cuda-resolve wrote that started it (KERNEL_SPEC_VARIABLE)
    )
    notebook: str | None = None  # JPY_SESSION_NAME

    def get(self, name: str) -> str | None:
        return dict(self.variables).get(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "evidence": self.evidence,
            "variables": dict(self.variables),
            "variables_from": self.variables_from,
            "spec": self.spec,
            "notebook": self.notebook,
        }


def is_ipykernel(argv: list[str]) -> bool:
    """Does this command line run an IPython kernel (``python -m ipykernel_launcher -f ...``,
    ``python -m ipykernel``, or the launcher script by path)?"""
    for position, word in enumerate(argv):
        if word == "-m" and position + 1 < len(argv) and argv[position + 1] in _LAUNCHERS:
            return True
        if word.startswith("-m") and word[2:] in _LAUNCHERS:
            return True
        if (
            position > 0
            and os.path.basename(word) in ("ipykernel_launcher.py", "__main__.py")
            and "ipykernel" in word
        ):
            return True
    return False


def _read(path: Path) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(_READ_LIMIT)
    except OSError:  # gone, or another user's
        return None


def _parent(proc: Path, pid: int) -> int | None:
    stat = _read(proc / str(pid) / "stat")
    if stat is None:
        return None
    # "PID (comm) STATE PPID ...": comm may hold spaces and parentheses; the last ')' ends it.
    fields = stat[stat.rfind(b")") + 1 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _argv(proc: Path, pid: int) -> list[str]:
    raw = _read(proc / str(pid) / "cmdline") or b""
    return [os.fsdecode(word) for word in raw.split(b"\0") if word]


def _environ(proc: Path, pid: int) -> dict[str, str] | None:
    raw = _read(proc / str(pid) / "environ")
    if not raw:
        return None
    pairs = (os.fsdecode(entry).partition("=") for entry in raw.split(b"\0") if b"=" in entry)
    return {name: value for name, _, value in pairs}


def _kernel_ancestor(proc: Path, pid: int) -> int | None:
    current: int | None = pid
    for _ in range(_MAX_ANCESTORS):
        if current is None or current <= 1:
            return None
        if is_ipykernel(_argv(proc, current)):
            return current
        current = _parent(proc, current)
    return None


def detect_kernel(
    environ: Mapping[str, str], *, pid: int | None = None, proc: Path = Path("/proc")
) -> KernelContext | None:
    """The Jupyter kernel this process runs in (itself, or an ancestor), or None."""
    kernel = _kernel_ancestor(proc, os.getpid() if pid is None else pid)
    started = _environ(proc, kernel) if kernel is not None else None
    if kernel is not None:
        evidence = f"process {kernel} runs {' '.join(_argv(proc, kernel)[:3])}"
    elif environ.get("JPY_PARENT_PID"):
        evidence = (
            f"JPY_PARENT_PID={environ['JPY_PARENT_PID']} is set (jupyter_client sets it in the "
            "kernels it starts)"
        )
    else:
        return None
    variables = started if started is not None else environ
    where = (
        f"/proc/{kernel}/environ, what the kernel started with"
        if started is not None
        else "this process's environment, as the kernel's start environment could not be read"
    )
    return KernelContext(
        pid=kernel,
        evidence=evidence,
        variables_from=where,
        variables=tuple((name, variables[name]) for name in _COMPARED if name in variables),
        spec=variables.get(KERNEL_SPEC_VARIABLE) or None,
        notebook=variables.get("JPY_SESSION_NAME") or environ.get("JPY_SESSION_NAME") or None,
    )


def _entries(value: str | None) -> list[str]:
    return [os.path.normpath(part) for part in (value or "").split(":") if part]


def suggested_name(python: str) -> str:
    """A kernel name for the environment of ``python``: ``/x/lab-env/bin/python`` -> ``lab-env``,
    ``/x/project/.venv/bin/python`` -> ``project`` (the folder holding a generically named venv)."""
    prefix = Path(python).parent.parent
    folder = prefix.parent.name if prefix.name in (".venv", "venv", "env", ".env") else prefix.name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder).strip("-.")
    return name if name and name not in ("usr", "local", "opt") else "cuda-env"


def check_kernel(kernel: KernelContext, job: JobEnvironment, python: str) -> list[Finding]:
    """What the kernel started without that ``cuda-resolve env`` says ``python``'s environment
    needs, and the fix: a kernel spec that carries it, and a restart."""
    lacks: list[str] = []
    wrong_library = False
    if job.cuda_home and _entries(kernel.get("CUDA_HOME")) != [os.path.normpath(job.cuda_home)]:
        had = kernel.get("CUDA_HOME")
        lacks.append(
            f"CUDA_HOME={job.cuda_home} (it has {had})" if had else f"CUDA_HOME={job.cuda_home}"
        )
    path = _entries(kernel.get("PATH"))
    lacks += [
        f"{directory} on PATH" for directory in job.path if os.path.normpath(directory) not in path
    ]
    libraries = _entries(kernel.get("LD_LIBRARY_PATH"))
    for directory in job.library_path:
        if os.path.normpath(directory) not in libraries:
            wrong_library = True
            sonames = ", ".join(
                dict.fromkeys(soname for _, soname, where in job.needs if where == directory)
            )
            lacks.append(f"{directory} on LD_LIBRARY_PATH (for {sonames})")
    unresolved = sorted({soname for _, soname in job.unresolved})
    if job.arch_list and kernel.get("TORCH_CUDA_ARCH_LIST") != job.arch_list:
        lacks.append(f"TORCH_CUDA_ARCH_LIST={job.arch_list}")
    where = f"kernel process {kernel.pid}" if kernel.pid is not None else "this kernel"
    origin = (
        f"started from the kernel spec {kernel.spec!r} cuda-resolve wrote"
        if kernel.spec
        else "started from a kernel spec whose env does not carry them"
    )
    if not lacks and not unresolved:
        spec = f" (kernel spec {kernel.spec!r})" if kernel.spec else ""
        return [
            Finding(
                check="jupyter-kernel",
                status="ok",
                title="Jupyter kernel",
                found=f"{where}{spec} started with what {python} needs ({kernel.evidence})",
            )
        ]
    name = kernel.spec or suggested_name(python)
    parts = []
    if lacks:
        parts.append(f"{where} started without {'; '.join(lacks)}")
    if unresolved:
        parts.append(
            f"its extensions need {', '.join(unresolved)}, which the kernel's loader does not "
            "find and no folder known here holds"
        )
    late = (
        "; values set in the notebook (os.environ) reach `!` commands but come too late for the "
        "kernel's own loader"
        if wrong_library
        else ""
    )
    found = (
        f"{'; '.join(parts)}: a kernel starts from the Jupyter server's environment and its "
        f"spec's env, not your shell's ({origin}; read from {kernel.variables_from}){late}"
    )
    write = f"`cuda-resolve env --jupyter {name} --python {python}`"
    where_to = (
        " in a terminal where the extensions import (its LD_LIBRARY_PATH names their folders)"
        if unresolved
        else ""
    )
    if kernel.spec:
        fix = (
            f"rewrite the kernel spec with {write}{where_to}, then restart this kernel (Kernel > "
            "Restart Kernel)"
        )
    else:
        fix = (
            f"write a kernel spec that carries them with {write}{where_to}, then switch this "
            f"notebook to the kernel '{name} (cuda-resolve)' (Kernel > Change Kernel) "
            "and restart it"
        )
    return [
        Finding(
            check="jupyter-kernel",
            status="error" if wrong_library or unresolved else "warn",
            title="Jupyter kernel",
            found=found,
            fix=fix,
        )
    ]
