"""Which environment a command reports on or changes: the user's, never the tool's own.

One rule for ``detect``, ``doctor``, ``plan``, ``build`` and ``install``: ``--python PATH``, else
the active virtualenv (``VIRTUAL_ENV``), else the active conda environment (``CONDA_PREFIX``),
else ``python3`` on PATH. Each command says which interpreter it used and why.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["TargetChoice", "choose_target", "is_running_interpreter"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetChoice:
    python: str  # the interpreter (absolute where it was found on PATH)
    how: str  # "--python", "VIRTUAL_ENV", "CONDA_PREFIX", "python3 on PATH"

    def describe(self) -> str:
        return f"{self.python} (from {self.how})"


def _interpreter_in(prefix: str) -> str | None:
    for name in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        candidate = os.path.join(prefix, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def choose_target(explicit: str | None, environ: Mapping[str, str] | None = None) -> TargetChoice:
    env = os.environ if environ is None else environ
    if explicit is not None:
        # A relative path means relative to where the user stands, whatever folder probes run in.
        python = os.path.abspath(explicit) if os.sep in explicit else explicit
        return TargetChoice(python=python, how="--python")
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(variable, "").strip()
        if not prefix:
            continue
        found = _interpreter_in(prefix)
        if found is None:
            raise UsageError(
                f"{variable}={prefix} names an environment with no Python interpreter",
                hint=f"activate a working environment, unset {variable}, or pass --python PATH",
            )
        return TargetChoice(python=found, how=variable)
    found = shutil.which("python3", path=env.get("PATH", ""))
    if found is None:
        raise UsageError("no target environment: no virtualenv or conda env is active and python3 is not on PATH",
                         hint="activate the environment to use, or pass --python PATH")
    return TargetChoice(python=found, how="python3 on PATH")


def is_running_interpreter(python: str) -> bool:
    """Whether ``python`` is the interpreter running cuda-resolve (so it can be read in process).

    Compared by folder, not by resolved path: a venv's ``bin/python`` links to the base
    interpreter, yet sees other site-packages."""
    def folder(path: str) -> str:
        return os.path.normcase(os.path.abspath(os.path.dirname(path)))

    candidate = python if os.sep in python else (shutil.which(python) or python)
    return folder(candidate) == folder(sys.executable) and os.path.basename(candidate).startswith("python")
